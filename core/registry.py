"""The single registry of attention methods and their parameter specs.

The engine validates parameters against these specs and the app builds its controls from them,
so a new method needs no page changes: register it here (via ``register``) and it appears everywhere.
Every input is checked once, by ``ParamSpec.coerce``: the engine's ``validate`` refuses what it would change,
and the app's URL layer (ui/url_params.py) applies the change and tells the user.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from core.errors import ParameterError, Refusal

if TYPE_CHECKING:
    from core.approximation import Approximation, AttentionInputs, Cost

Family = Literal["exact", "sparse", "routed-sparse", "low-rank", "sparse+low-rank", "compression", "oracle"]
# routed-sparse: a query picks key blocks by a score (NSA, MoBA), not by a hash or a fixed pattern.
FAMILIES: tuple[str, ...] = ("exact", "sparse", "routed-sparse", "low-rank", "sparse+low-rank", "compression", "oracle")

ParamKind = Literal["int", "float", "choice", "bool", "int_list", "text", "multi", "range"]
# A bound is a number, or a function of (n, d) for limits that depend on the input size.
Bound = float | int | Callable[[int, int], float] | None

# What coercion did to a raw value. The kinds marked "no value" leave nothing usable (the caller keeps its default).
FindingKind = Literal[
    "not_a_number",  # no value: not a finite number (text, NaN, inf, a list, None)
    "not_positive",  # no value: zero or below where the grid is logarithmic
    "not_whole",  # rounded to the nearest integer
    "below_minimum",  # raised to the lowest allowed value (limit)
    "above_maximum",  # lowered to the highest allowed value (limit)
    "off_grid",  # moved to the nearest grid value (limit)
    "not_a_choice",  # no value
    "not_a_bool",  # no value
    "control_characters",  # removed from the text
    "too_long",  # the text was cut to limit characters
    "too_short",  # no value: fewer than limit non-blank characters
    "unknown_items",  # items that are not choices were dropped (dropped); no value when none was left
    "no_items",  # no value: nothing to choose from
    "not_a_pair",  # no value: a range needs exactly two values
]
# Numbers given as text are read from their first characters only: a hostile URL may carry megabytes.
NUMBER_TEXT_CHARS = 64
TRUE_TEXTS = ("true", "1", "yes", "on")
FALSE_TEXTS = ("false", "0", "no", "off")


@dataclass(frozen=True)
class Finding:
    """Why a coerced value differs from the raw one (or why there is none)."""

    kind: FindingKind
    limit: Any = None  # the bound, grid value or length the value was moved to
    dropped: tuple[Any, ...] = ()  # unknown_items: the items dropped, as given
    part: Any = None  # range and int_list: the raw item the finding is about (None: the whole value)


@dataclass(frozen=True)
class Coerced:
    """A raw value turned into an allowed one. value None: nothing usable (keep the default)."""

    value: Any
    finding: Finding | None = None


@dataclass(frozen=True)
class ParamSpec:
    """One tunable parameter: of a registered method, or of an app control (kinds text, multi and range).

    ``coerce`` turns a raw value (a Python value, or URL text such as "1/8") into the allowed value and says
    what it changed; ``validate`` (the engine's check) refuses any value that coercion had to change.
    """

    name: str
    kind: ParamKind
    default: Any
    help: str
    # Numbers: the allowed range. text: the fewest non-blank characters and the most characters.
    # multi: the most items kept.
    low: Bound = None
    high: Bound = None
    # choice and multi: the allowed values (text names them by str(choice)).
    choices: tuple[Any, ...] = ()
    log: bool = False  # draw the control on a log scale; a grid is then snapped to in log distance
    # Keyword of budget_params that sets this parameter; the app greys it out while linked.
    budgeted: bool = False
    # float and range: the only allowed values; others move to the nearest one (its ends are the bounds).
    grid: tuple[float, ...] = ()
    # choice and multi: other texts that name a choice (text, choice), e.g. the label a selectbox displays.
    aliases: tuple[tuple[str, Any], ...] = ()
    # text: keep line breaks and tabs (other control characters are always removed).
    multiline: bool = False

    def bounds(self, n: int, d: int) -> tuple[float | None, float | None]:
        """The allowed range for an input of n tokens and head dimension d."""
        if self.grid and self.low is None and self.high is None:
            return min(self.grid), max(self.grid)
        low = self.low(n, d) if callable(self.low) else self.low
        high = self.high(n, d) if callable(self.high) else self.high
        return low, high

    def range_text(self, n: int, d: int) -> str:
        if self.kind in ("choice", "multi"):
            what = "one" if self.kind == "choice" else "some"
            return f"{what} of " + ", ".join(repr(c) for c in self.choices)
        if self.kind == "bool":
            return "True or False"
        low, high = self.bounds(n, d)
        if self.kind == "text":
            return f"a text of at most {'any number of' if high is None else _fmt(high)} characters"
        if self.grid:
            what = "a pair of values" if self.kind == "range" else "a value"
            return f"{what} from " + ", ".join(_fmt(g) for g in self.grid)
        lo = "-inf" if low is None else _fmt(low)
        hi = "inf" if high is None else _fmt(high)
        what = "an integer" if self.kind in ("int", "int_list") else "a number"
        if self.kind == "int_list":
            return f"a list of integers, each in [{lo}, {hi}]"
        return f"{what} in [{lo}, {hi}]"

    def coerce(self, raw: Any, n: int = 0, d: int = 0) -> Coerced:
        """The allowed value nearest to ``raw`` and what was changed (see ``FindingKind``).

        Text is read the way a URL carries it: numbers as "0.125" or "1/8", booleans as true/false, 1/0, yes/no,
        on/off. n and d are the input size for bounds that depend on it.
        """
        if self.kind == "choice":
            return self._coerce_choice(raw)
        if self.kind == "bool":
            return _coerce_bool(raw)
        if self.kind == "text":
            return self._coerce_text(raw, n, d)
        if self.kind == "multi":
            return self._coerce_multi(raw, n, d)
        if self.kind == "range":
            return self._coerce_range(raw, n, d)
        if self.kind == "int_list":
            return self._coerce_int_list(raw, n, d)
        return self._coerce_number(raw, n, d, integer=self.kind == "int")

    def validate(self, value: Any, n: int, d: int, method: str) -> Any:
        """Check a value and return it in its canonical type; raise ParameterError naming the parameter and its
        range where ``coerce`` would change it."""
        # The engine takes booleans as True/False (or 0/1) and lists as lists: text there is a caller's mistake.
        wrong_type = isinstance(value, str) and self.kind in ("bool", "int_list", "multi", "range")
        coerced = None if wrong_type else self.coerce(value, n, d)
        if coerced is None or coerced.finding is not None or coerced.value is None:
            raise ParameterError(f"{method}.{self.name}", f"must be {self.range_text(n, d)}, got {value!r}")
        return coerced.value

    # ------------------------------------------------------------------ one coercion per kind

    def _coerce_number(self, raw: Any, n: int, d: int, *, integer: bool) -> Coerced:
        number = _number(raw)
        if number is None:
            return Coerced(None, Finding("not_a_number"))
        if self.grid:
            return self._snap(number)
        finding = None
        if integer:
            whole = number if isinstance(number, int) else int(round(number))
            if whole != number:
                finding = Finding("not_whole")
            value: float = whole
        else:
            try:
                value = float(number)
            except OverflowError:  # an integer beyond any float: as far out as infinity, clamped below
                value = math.inf if number > 0 else -math.inf
        low, high = self.bounds(n, d)
        if low is not None and value < low:
            limit = int(math.ceil(low)) if integer else float(low)
            return Coerced(limit, Finding("below_minimum", limit))
        if high is not None and value > high:
            limit = int(math.floor(high)) if integer else float(high)
            return Coerced(limit, Finding("above_maximum", limit))
        if not math.isfinite(value):
            return Coerced(None, Finding("not_a_number"))
        return Coerced(value, finding)

    def _snap(self, number: float) -> Coerced:
        if self.log and number <= 0:
            return Coerced(None, Finding("not_positive"))
        lowest, highest = min(self.grid), max(self.grid)
        if number < lowest:
            return Coerced(lowest, Finding("below_minimum", lowest))
        if number > highest:
            return Coerced(highest, Finding("above_maximum", highest))

        def distance(option: float) -> float:
            return abs(math.log(option) - math.log(number)) if self.log else abs(option - number)

        best = min(self.grid, key=distance)
        if distance(best) > 1e-9 * max(1.0, abs(number)):
            return Coerced(best, Finding("off_grid", best))
        return Coerced(best)

    def _choice_for(self, raw: Any) -> tuple[bool, Any]:
        """(True, the choice) when raw is a choice, its str() or one of its aliases; (False, None) otherwise."""
        try:
            if raw in self.choices:
                return True, self.choices[self.choices.index(raw)] if isinstance(raw, str) else raw
        except (TypeError, ValueError):  # an array's truth value, an unhashable mix
            return False, None
        if isinstance(raw, str):
            for choice in self.choices:
                if str(choice) == raw:
                    return True, choice
            for text, choice in self.aliases:
                if text == raw:
                    return True, choice
        return False, None

    def _coerce_choice(self, raw: Any) -> Coerced:
        found, choice = self._choice_for(raw)
        return Coerced(choice) if found else Coerced(None, Finding("not_a_choice"))

    def _coerce_multi(self, raw: Any, n: int, d: int) -> Coerced:
        items = list(raw) if isinstance(raw, (list, tuple)) else [raw]
        kept: list[Any] = []
        dropped: list[Any] = []
        for item in items:
            found, choice = self._choice_for(item)
            if not found:
                dropped.append(item)
            elif choice not in kept:
                kept.append(choice)
        _, most = self.bounds(n, d)
        if most is not None:
            kept = kept[: int(most)]
        finding = Finding("unknown_items", dropped=tuple(dropped)) if dropped else None
        if not kept:
            return Coerced(None, finding or Finding("no_items"))
        return Coerced(kept, finding)

    def _coerce_range(self, raw: Any, n: int, d: int) -> Coerced:
        items = list(raw) if isinstance(raw, (list, tuple)) else [raw]
        if len(items) != 2:
            return Coerced(None, Finding("not_a_pair"))
        low, high = (self._coerce_number(item, n, d, integer=False) for item in items)
        finding = _about(low.finding, items[0]) or _about(high.finding, items[1])
        if low.value is None or high.value is None:
            return Coerced(None, finding)
        return Coerced((min(low.value, high.value), max(low.value, high.value)), finding)

    def _coerce_int_list(self, raw: Any, n: int, d: int) -> Coerced:
        if isinstance(raw, str):
            items: list[Any] = [part for part in raw.replace(" ", "").split(",") if part]
        elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
            items = [raw]
        elif isinstance(raw, Sequence):
            items = list(raw)
        else:
            return Coerced(None, Finding("not_a_number"))
        if not items:
            return Coerced(None, Finding("no_items"))
        values, finding = [], None
        for item in items:
            one = self._coerce_number(item, n, d, integer=True)
            if one.value is None:
                return Coerced(None, _about(one.finding, item))
            values.append(one.value)
            finding = finding or _about(one.finding, item)
        return Coerced(values, finding)

    def _coerce_text(self, raw: Any, n: int, d: int) -> Coerced:
        if not isinstance(raw, str):
            return Coerced(None)
        kept = "\n\t" if self.multiline else ""
        text = "".join(ch for ch in raw if ch.isprintable() or ch in kept)
        finding = Finding("control_characters") if text != raw else None
        fewest, most = self.bounds(n, d)
        if most is not None and len(text) > most:
            text = text[: int(most)]
            finding = Finding("too_long", int(most))
        if fewest is not None and len(text.strip()) < fewest:
            return Coerced(None, Finding("too_short", fewest))
        return Coerced(text, finding)


def _about(finding: Finding | None, part: Any) -> Finding | None:
    return None if finding is None else replace(finding, part=part)


def _coerce_bool(raw: Any) -> Coerced:
    if isinstance(raw, bool):
        return Coerced(raw)
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in TRUE_TEXTS:
            return Coerced(True)
        if text in FALSE_TEXTS:
            return Coerced(False)
    else:
        try:
            if raw in (0, 1):  # 0/1, and NumPy's booleans
                return Coerced(bool(raw))
        except (TypeError, ValueError):  # an array's truth value
            pass
    return Coerced(None, Finding("not_a_bool"))


def _number(raw: Any) -> int | float | None:
    """A finite number from a number, a number-like object or a text ("0.125", "1/8", " 3 "); None otherwise.
    Integers stay integers (exact however large)."""
    if isinstance(raw, bool):  # True/False are ints to Python, but a boolean for a count is a caller's mistake
        return None
    if isinstance(raw, int):
        return raw
    try:
        if isinstance(raw, str):
            text = raw.strip()[:NUMBER_TEXT_CHARS]
            if "/" in text:
                top, bottom = text.split("/", 1)
                value = float(top) / float(bottom)
            else:
                value = float(text)
        else:
            value = float(raw)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# A method's implementation: (inputs, params) -> Approximation.
MethodFn = Callable[["AttentionInputs", dict[str, Any]], "Approximation"]
BudgetFn = Callable[[int, int, float], dict[str, Any]]
# Analytic cost of the efficient path for validated inputs and parameters, checked before running.
CostFn = Callable[["AttentionInputs", dict[str, Any]], "Cost"]


@dataclass(frozen=True)
class MethodSpec:
    """A registered attention method."""

    name: str
    family: Family
    description: str
    params: tuple[ParamSpec, ...]
    fn: MethodFn = field(repr=False)
    budget: BudgetFn | None = field(default=None, repr=False)
    cost: CostFn | None = field(default=None, repr=False)
    # Largest n the method accepts (oracles build n x n matrices and run SVDs).
    max_n: int | None = None
    # Uses a random draw, so the seed matters.
    randomized: bool = False
    title: str = ""
    # The efficient path takes half-precision inputs as they are (half matmuls with float32 accumulation and
    # float32 softmax statistics, upcasting where it is not safe); otherwise they are computed in float32.
    half_native: bool = False
    # The method has its own causal algorithm: ``register`` adds the shared CAUSAL_PARAM to its params.
    causal_form: bool = False
    # A method without one says why; validate() refuses causal=True with this text (causal=False is accepted and
    # dropped, so such a method has no causal control and its results' parameters do not change).
    no_causal_reason: str = ""

    @property
    def label(self) -> str:
        return self.title or self.name

    def param(self, name: str) -> ParamSpec:
        for spec in self.params:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def validate(self, params: Mapping[str, Any], n: int, d: int) -> dict[str, Any]:
        """Fill in defaults and check every parameter; unknown names are refused."""
        if CAUSAL not in (p.name for p in self.params) and CAUSAL in params:
            params = self._without_causal(params)
        known = {p.name for p in self.params}
        unknown = sorted(set(params) - known)
        if unknown:
            allowed = ", ".join(sorted(known)) or "none"
            raise ParameterError(f"{self.name}.{unknown[0]}", f"is not a parameter of {self.name} (allowed: {allowed})")
        out = self.defaults()
        for spec in self.params:
            if spec.name in params:
                out[spec.name] = spec.validate(params[spec.name], n, d, self.name)
            else:
                out[spec.name] = _clip_default(spec, out[spec.name], n, d)
        return out

    def _without_causal(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """params less ``causal`` for a method without a causal form: False is dropped, True refused with why."""
        value = CAUSAL_PARAM.validate(params[CAUSAL], 0, 0, self.name)
        if value:
            reason = self.no_causal_reason or f"{self.label} has no causal form here"
            raise Refusal(f"{self.name}.{CAUSAL}", f"{self.label} cannot run under the causal mask: {reason}.")
        return {name: given for name, given in params.items() if name != CAUSAL}


CAUSAL = "causal"
CAUSAL_PARAM = ParamSpec(
    CAUSAL,
    "bool",
    False,
    "Causal (decoder) attention: query i attends only to keys j <= i, computed by the method's own causal "
    "algorithm (prefix sums, a causal window, causal chunks).",
)


def causal_methods() -> list[str]:
    """Names of the methods that take causal=True, in registration order."""
    return [name for name, spec in methods().items() if spec.causal_form]


def _clip_default(spec: ParamSpec, value: Any, n: int, d: int) -> Any:
    """Defaults are clipped into an n-dependent range (a default rank of 64 on n = 16 becomes 16)."""
    if spec.kind not in ("int", "float"):
        return value
    low, high = spec.bounds(n, d)
    if high is not None and value > high:
        value = type(value)(high) if spec.kind == "float" else int(high)
    if low is not None and value < low:
        value = type(value)(low) if spec.kind == "float" else int(math.ceil(low))
    return value


_REGISTRY: dict[str, MethodSpec] = {}


def register(spec: MethodSpec) -> MethodSpec:
    if spec.name in _REGISTRY:
        raise RuntimeError(f"method {spec.name!r} registered twice")
    if spec.family not in FAMILIES:
        raise RuntimeError(f"unknown family {spec.family!r}")
    if spec.causal_form and CAUSAL not in (p.name for p in spec.params):
        spec = replace(spec, params=(*spec.params, CAUSAL_PARAM))
    _REGISTRY[spec.name] = spec
    return spec


def methods() -> dict[str, MethodSpec]:
    """All registered methods, in registration order."""
    _load_all()
    return dict(_REGISTRY)


def get(name: str) -> MethodSpec:
    _load_all()
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ParameterError("method", f"must be one of {', '.join(_REGISTRY)}; got {name!r}")
    return _REGISTRY[name]


def _load_all() -> None:
    # Importing the package registers every method module.
    import core.approximators  # noqa: F401
