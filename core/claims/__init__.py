"""The papers' checkable claims, measured live: one registry shared by the "Paper claims" page and the tests.

One module per paper (``scatterbrain``, ``vcc``, ``performer_kernels``, ``rank_vs_heads``) declares each of its
claims once, on the function that measures it: its number in /work/shared/papers/*.md ("scatterbrain-13"), the claim
in one sentence, the threshold, the input and the documented verdict. A claim is measured on Scatterbrain's
clustered Process 1 (``core.data.clustered`` at the paper's sizes) and, where it makes sense, on the 72 real
all-MiniLM-L6-v2 heads (``core.data.real``; q is pre-scaled, so beta = 1 is the model's own attention). A
measurement is a number, a verdict and a short detail.

Verdicts:
  * "holds": the measured number meets the threshold (an exact claim to float tolerance, a statistical claim
    at the stated rate, a shape claim at every point of the range);
  * "holds only in a regime": it meets it on part of the range (some temperatures, some heads);
  * "does not hold": it meets it nowhere.
A claim's overall verdict combines the two inputs: the same verdict on both is that verdict; different verdicts
(e.g. holds on the clustered model but not on real heads) are "holds only in a regime".

The other modules: ``claim`` (the declaration, verdicts and verdict rules), ``inputs``, ``oracles`` (the sparse
and low-rank oracles from their definitions), ``catalog`` (every claim), ``measuring``, ``committed`` (the committed
table) and ``report`` (``python -m core.claims`` prints the table and writes benchmarks/results/claims.md and .json).
The page's table and its links to the views are in ``ui/claims_table.py``.
"""

from __future__ import annotations

from core.claims import performer_kernels, rank_vs_heads, routed, scatterbrain, vcc  # noqa: F401  (registers)
from core.claims.catalog import CLAIMS, PAPERS, SKIPPED, get, of_papers
from core.claims.claim import (
    EXACT_TOL,
    FAILS,
    HOLDS,
    INPUTS,
    REGIME,
    VERDICTS,
    Claim,
    ClaimResult,
    Measure,
    Measurement,
    Paper,
    Setting,
    combine,
    result_key,
    verdict_at_most,
    verdict_fraction,
    verdict_rate,
)
from core.claims.committed import COMMITTED_TABLE, NOT_YET, committed_or_not_yet, measured_seconds
from core.claims.inputs import REAL_FRACTION, clustered_input, exact_attention, real_heads
from core.claims.measuring import (
    FAST_SECONDS,
    SLOW_SECONDS,
    due,
    estimate_seconds,
    inputs_for,
    measure,
    measure_plain,
    run_all,
    run_claim,
)
from core.claims.oracles import oracle_crossover, oracle_errors, sparse_oracle
from core.claims.report import fmt_value, main, markdown, table_rows

__all__ = [
    "CLAIMS",
    "COMMITTED_TABLE",
    "EXACT_TOL",
    "FAILS",
    "FAST_SECONDS",
    "HOLDS",
    "INPUTS",
    "NOT_YET",
    "PAPERS",
    "REAL_FRACTION",
    "REGIME",
    "SKIPPED",
    "SLOW_SECONDS",
    "VERDICTS",
    "Claim",
    "ClaimResult",
    "Measure",
    "Measurement",
    "Paper",
    "Setting",
    "clustered_input",
    "combine",
    "committed_or_not_yet",
    "due",
    "estimate_seconds",
    "exact_attention",
    "fmt_value",
    "get",
    "inputs_for",
    "main",
    "markdown",
    "measure",
    "measure_plain",
    "measured_seconds",
    "of_papers",
    "oracle_crossover",
    "oracle_errors",
    "performer_kernels",
    "rank_vs_heads",
    "routed",
    "real_heads",
    "result_key",
    "run_all",
    "run_claim",
    "scatterbrain",
    "sparse_oracle",
    "table_rows",
    "vcc",
    "verdict_at_most",
    "verdict_fraction",
    "verdict_rate",
]
