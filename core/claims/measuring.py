"""Measuring claims: one claim on one input, as plain values for caches, or every input of a claim with its timing;
what a page should measure now, and how long it should take."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from core import data
from core.claims.catalog import CLAIMS, get
from core.claims.claim import INPUTS, Claim, ClaimResult, Measurement, combine
from core.claims.committed import measured_seconds
from core.claims.inputs import clustered_input, real_heads
from core.errors import ParameterError


def measure(claim: Claim, which: str, seed: int = 0, text: str | None = None) -> Measurement:
    """Measure one claim on one input ("clustered": its paper setting or own data; "real": the MiniLM heads)."""
    if which not in claim.inputs:
        raise ParameterError("input", f"must be one of {claim.inputs} for {claim.id}, got {which!r}")
    if which == "real":
        x: data.Inputs | None = real_heads(text)
    else:
        x = clustered_input(claim.setting, seed) if claim.setting is not None else None
    with torch.no_grad():
        return claim.measure(x, seed)


def measure_plain(claim_id: str, which: str, seed: int = 0, text: str | None = None) -> dict[str, Any]:
    """``measure`` as plain values (value, verdict, detail) for caches and tables. A refused setting or a runtime
    error becomes the verdict "error" with its message; a cancellation (``core.cancel.Cancelled``) propagates."""
    try:
        m = measure(get(claim_id), which, seed, text)
    except (ParameterError, RuntimeError) as exc:
        return {"value": None, "verdict": "error", "detail": str(exc)}
    return {"value": m.value, "verdict": m.verdict, "detail": m.detail}


# Rough seconds per claim and input on the reference 2-core CPU, for the scheduler's light/heavy split, the queue's
# estimate and the page's button. Measured one after another: the 53 fast measurements of every paper took 8.2 s
# (mean 0.15 s, median 0.03 s, most 2.2 s: the first real-model load); slow ones take 1-18 s (claims.json).
FAST_SECONDS = 0.2
SLOW_SECONDS = 6.0


def estimate_seconds(claim: Claim, inputs: Sequence[str] = INPUTS) -> float:
    guess = SLOW_SECONDS if claim.slow else FAST_SECONDS
    per_input = measured_seconds().get(claim.id, guess)
    return per_input * sum(1 for w in claim.inputs if w in inputs)


def run_claim(claim: Claim, seed: int = 0, text: str | None = None, inputs: Sequence[str] = INPUTS) -> ClaimResult:
    start = time.perf_counter()
    measured: dict[str, Measurement] = {}
    errors: dict[str, str] = {}
    for which in claim.inputs:
        if which not in inputs:
            continue
        try:
            measured[which] = measure(claim, which, seed, text)
        except (ParameterError, RuntimeError) as exc:  # reported in the table, not hidden
            errors[which] = str(exc)
    verdict = combine([m.verdict for m in measured.values()]) if measured else "error"
    return ClaimResult(
        claim.id,
        claim.paper,
        claim.statement,
        claim.threshold,
        measured,
        verdict,
        dict(claim.expected),
        time.perf_counter() - start,
        errors,
    )


def run_all(seed: int = 0, text: str | None = None, inputs: Sequence[str] = INPUTS) -> list[ClaimResult]:
    return [run_claim(c, seed, text, inputs) for c in CLAIMS]


def inputs_for(claim: Claim, with_real: bool) -> list[str]:
    return [w for w in claim.inputs if w == "clustered" or with_real]


def due(selected: Sequence[Claim], paper: str, with_slow: bool, with_real: bool) -> list[tuple[str, str]]:
    """(claim id, input) pairs of one paper to measure now: slow claims only when asked for."""
    return [
        (c.id, w) for c in selected if c.paper == paper and (with_slow or not c.slow) for w in inputs_for(c, with_real)
    ]
