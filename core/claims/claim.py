"""What a claim is: its declaration (``Claim``, made through its paper's ``Paper.claim``), a measurement, the three
verdicts and the rules that turn a measured number into one."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from core import data
from core.errors import ParameterError

HOLDS = "holds"
REGIME = "holds only in a regime"
FAILS = "does not hold"
VERDICTS = (HOLDS, REGIME, FAILS)
INPUTS = ("clustered", "real")
EXACT_TOL = 1e-9  # exact claims, float64
# Documented verdicts shared by many claims.
BOTH_HOLD = {"clustered": HOLDS, "real": HOLDS}
HOLD = {"clustered": HOLDS}


@dataclass(frozen=True)
class Measurement:
    value: float
    verdict: str
    detail: str


@dataclass(frozen=True)
class Setting:
    """The clustered input a claim runs on (Process 1 at the paper's sizes); None for a claim with its own data."""

    n: int
    d: int
    clusters: int
    spread: float
    contiguous: bool = False  # clusters in contiguous runs of positions (VCC's blocks are positional)


Measure = Callable[[data.Inputs | None, int], Measurement]


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    statement: str
    threshold: str
    measure: Measure
    setting: Setting | None  # None: the claim makes its own synthetic data (clustered column = that)
    real: bool  # also measured on the real MiniLM heads
    expected: dict[str, str]  # documented verdict per input at the default seed and text
    slow: bool = False  # more than a few seconds on 2 busy cores (n = 1024 oracle sweeps, long Monte Carlo)

    @property
    def inputs(self) -> tuple[str, ...]:
        return ("clustered", "real") if self.real else ("clustered",)


@dataclass
class ClaimResult:
    id: str
    paper: str
    statement: str
    threshold: str
    measured: dict[str, Measurement]
    verdict: str
    expected: dict[str, str]
    seconds: float
    errors: dict[str, str] = field(default_factory=dict)


class Paper:
    """One paper's claims, in the order its module declares them, and the claims it leaves out (with why).

    A measurement function becomes a claim through the ``claim`` decorator, so each claim is declared once, on the
    code that measures it::

        @PAPER.claim("vcc-7", "With every block refined ...", "max |diff| <= 1e-9", setting=..., real=True,
                     expected=BOTH_HOLD)
        def vcc_full_budget(x, seed): ...
    """

    def __init__(self, key: str, title: str) -> None:
        self.key = key  # its name in the page's URL (?papers=scatterbrain)
        self.title = title  # as the table shows it
        self.claims: list[Claim] = []
        self.skipped: list[tuple[str, str]] = []

    def claim(
        self,
        claim_id: str,
        statement: str,
        threshold: str,
        *,
        setting: Setting | None,
        real: bool,
        expected: dict[str, str],
        slow: bool = False,
    ) -> Callable[[Measure], Measure]:
        """Declare the decorated function as the measurement of claim ``claim_id`` (the function is unchanged)."""

        def declare(measure: Measure) -> Measure:
            self.claims.append(
                Claim(claim_id, self.title, statement, threshold, measure, setting, real, expected, slow)
            )
            return measure

        return declare

    def skip(self, claim_ids: str, why: str) -> None:
        """Record claims of the paper that are not measured here, and why."""
        self.skipped.append((claim_ids, why))


def result_key(claim_id: str, which: str) -> str:
    """The key of one claim's measurement on one input, in the page's results and the committed table."""
    return f"{claim_id}|{which}"


# ------------------------------------------------------------------------------------------------ verdict rules


def verdict_at_most(value: float, threshold: float) -> str:
    return HOLDS if value <= threshold else FAILS


def verdict_fraction(fraction: float) -> str:
    """A claim checked at several points (temperatures, heads): all -> holds, some -> regime, none -> fails."""
    if not 0.0 <= fraction <= 1.0 or math.isnan(fraction):
        raise ParameterError("fraction", f"must be in [0, 1], got {fraction!r}")
    if fraction >= 1.0:
        return HOLDS
    return REGIME if fraction > 0.0 else FAILS


def verdict_rate(rate: float, typical: float = 0.9) -> str:
    """A statistical ("typically") claim: rate >= typical holds, rate <= 1/2 fails, in between is a regime."""
    if not 0.0 <= rate <= 1.0 or math.isnan(rate):
        raise ParameterError("rate", f"must be in [0, 1], got {rate!r}")
    if rate >= typical:
        return HOLDS
    return REGIME if rate > 0.5 else FAILS


def combine(verdicts: Sequence[str]) -> str:
    """Overall verdict over the inputs: equal verdicts stay, different ones mean the claim holds in a regime."""
    if not verdicts:
        raise ParameterError("verdicts", "need at least one verdict")
    for v in verdicts:
        if v not in VERDICTS:
            raise ParameterError("verdicts", f"each must be one of {VERDICTS}, got {v!r}")
    return verdicts[0] if len(set(verdicts)) == 1 else REGIME
