"""The single registry of attention methods and their parameter specs.

The engine validates parameters against these specs and the app builds its controls from them,
so a new method needs no page changes: register it here (via ``register``) and it appears everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from core.errors import ParameterError

if TYPE_CHECKING:
    from core.approximation import Approximation, AttentionInputs, Cost

Family = Literal["exact", "sparse", "low-rank", "sparse+low-rank", "compression", "oracle"]
FAMILIES: tuple[str, ...] = ("exact", "sparse", "low-rank", "sparse+low-rank", "compression", "oracle")

ParamKind = Literal["int", "float", "choice", "bool", "int_list"]
# A bound is a number, or a function of (n, d) for limits that depend on the input size.
Bound = float | int | Callable[[int, int], float] | None


@dataclass(frozen=True)
class ParamSpec:
    """One tunable parameter of a method."""

    name: str
    kind: ParamKind
    default: Any
    help: str
    low: Bound = None
    high: Bound = None
    choices: tuple[Any, ...] = ()
    log: bool = False  # draw the control on a log scale
    # Keyword of budget_params that sets this parameter; the app greys it out while linked.
    budgeted: bool = False

    def bounds(self, n: int, d: int) -> tuple[float | None, float | None]:
        """The allowed range for an input of n tokens and head dimension d."""
        low = self.low(n, d) if callable(self.low) else self.low
        high = self.high(n, d) if callable(self.high) else self.high
        return low, high

    def range_text(self, n: int, d: int) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind == "bool":
            return "True or False"
        low, high = self.bounds(n, d)
        lo = "-inf" if low is None else _fmt(low)
        hi = "inf" if high is None else _fmt(high)
        what = "an integer" if self.kind in ("int", "int_list") else "a number"
        if self.kind == "int_list":
            return f"a list of integers, each in [{lo}, {hi}]"
        return f"{what} in [{lo}, {hi}]"

    def validate(self, value: Any, n: int, d: int, method: str) -> Any:
        """Coerce and check a value; raise ParameterError naming the parameter and its range."""
        label = f"{method}.{self.name}"
        if self.kind == "choice":
            if value not in self.choices:
                raise ParameterError(label, f"must be {self.range_text(n, d)}, got {value!r}")
            return value
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            if value in (0, 1):
                return bool(value)
            raise ParameterError(label, f"must be True or False, got {value!r}")
        if self.kind == "int_list":
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = [value]
            if not isinstance(value, Sequence) or isinstance(value, str) or len(value) == 0:
                raise ParameterError(label, f"must be {self.range_text(n, d)}, got {value!r}")
            return [self._check_number(v, n, d, label, integer=True) for v in value]
        return self._check_number(value, n, d, label, integer=self.kind == "int")

    def _check_number(self, value: Any, n: int, d: int, label: str, *, integer: bool) -> Any:
        if isinstance(value, bool):
            # True/False are ints to Python, but a boolean for a count is a caller's mistake.
            raise ParameterError(label, f"must be {self.range_text(n, d)}, got {value!r}")
        if not isinstance(value, (int, float)):
            try:
                value = float(value) if not integer else _as_int(value)
            except (TypeError, ValueError):
                raise ParameterError(label, f"must be {self.range_text(n, d)}, got {value!r}") from None
        if not math.isfinite(float(value)):
            raise ParameterError(label, f"must be {self.range_text(n, d)}, got {value!r}")
        if integer:
            if float(value) != int(value):
                raise ParameterError(label, f"must be {self.range_text(n, d)}, got {value!r}")
            value = int(value)
        else:
            value = float(value)
        low, high = self.bounds(n, d)
        if (low is not None and value < low) or (high is not None and value > high):
            raise ParameterError(label, f"must be {self.range_text(n, d)}, got {value!r}")
        return value


def _as_int(value: Any) -> int:
    as_float = float(value)
    if not math.isfinite(as_float) or as_float != int(as_float):
        raise ValueError(value)
    return int(as_float)


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
