"""What a lesson step or a Home preset claims its view shows, as data, and the check of it against the numbers the
page itself shows (pure: no Streamlit; ``tests/test_step_claims.py`` opens every step and preset with AppTest).

A claim compares two numbers the page shows in its metric tiles (``st.metric``), or one of them with a constant:

    "lsh < performer"                          the tiles of two methods (registry names stand for their labels)
    "Scatterbrain error < Naive-sum error"     any two tiles, by the label the page shows
    "Naive sum on Ω before normalising > 1.5"  a tile against a number
    "Naive-sum error > 1.5 × Scatterbrain error"  a tile against a multiple of another

A tile's number is the first number in its text ("0.713 ± 0.020" -> 0.713, "2.05 × exact" -> 2.05, "34.3%" -> 34.3).
A step or preset with nothing a tile can show says why instead (``no_claim``), so every one says something.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)?(?:e[-+]?\d+)?", re.IGNORECASE)
_OPERATORS = (" < ", " > ")
MAX_CLAIMS = 6


class ClaimError(ValueError):
    """A claim that cannot be read; the message says which and why."""


@dataclass(frozen=True)
class Claim:
    text: str
    left: str  # a method's registry name, a tile label, or a number
    operator: str  # "<" or ">"
    right: str

    def __str__(self) -> str:
        return self.text


def parse_claim(text: str) -> Claim:
    """``"a < b"`` or ``"a > b"``: two tiles, or a tile and a number; raises ClaimError naming the problem."""
    if not isinstance(text, str) or not text.strip():
        raise ClaimError("a claim must be a non-empty string such as 'lsh < performer'")
    text = " ".join(text.split())
    found = [op for op in _OPERATORS if op in text]
    if len(found) != 1 or text.count(found[0]) != 1:
        raise ClaimError(f"claim '{text}': needs exactly one ' < ' or ' > ' between two tiles (or a tile and a number)")
    left, right = (part.strip() for part in text.split(found[0]))
    if not left or not right or (_is_number(left) and _is_number(right)):
        raise ClaimError(f"claim '{text}': compares two numbers the page shows, or one of them with a constant")
    return Claim(text, left, found[0].strip(), right)


def parse_claims(raw: object, where: str) -> tuple[Claim, ...]:
    """A list of claim strings (absent: none); raises ClaimError naming ``where``."""
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)) or len(raw) > MAX_CLAIMS:
        raise ClaimError(f"{where}: 'claims' must be a list of at most {MAX_CLAIMS} strings")
    try:
        return tuple(parse_claim(item) for item in raw)
    except ClaimError as exc:
        raise ClaimError(f"{where}: {exc}") from exc


def _is_number(text: str) -> bool:
    return bool(re.fullmatch(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?", text.strip(), re.IGNORECASE))


def tile_number(value: str) -> float | None:
    """The first number in a tile's text, or None."""
    found = _NUMBER.search(value.replace("−", "-"))
    return float(found.group(0).replace(",", "")) if found else None


_FACTOR = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*[×*]\s*(.+)$")


def _value(term: str, tiles: Mapping[str, str], labels: Mapping[str, str]) -> tuple[float, str]:
    if _is_number(term):
        return float(term), term
    scaled = _FACTOR.match(term)
    if scaled:
        value, text = _value(scaled.group(2), tiles, labels)
        return float(scaled.group(1)) * value, f"{scaled.group(1)} × ({text})"
    label = labels.get(term, term)
    if label not in tiles:
        raise KeyError(f"no tile '{label}' on the page (tiles: {sorted(tiles)})")
    number = tile_number(tiles[label])
    if number is None:
        raise KeyError(f"tile '{label}' shows no number: {tiles[label]!r}")
    return number, f"{label} = {tiles[label]}"


def check(claim: Claim, tiles: Mapping[str, str], labels: Mapping[str, str]) -> tuple[bool, str]:
    """Whether the page's tiles hold ``claim``, and the numbers that decided it.

    tiles: label -> the text the page shows; labels: method registry name -> its label."""
    try:
        left, left_text = _value(claim.left, tiles, labels)
        right, right_text = _value(claim.right, tiles, labels)
    except KeyError as exc:
        return False, f"{claim}: {exc.args[0]}"
    holds = left < right if claim.operator == "<" else left > right
    return holds, f"{claim}: {left_text} {'holds' if holds else 'does not hold'} against {right_text}"
