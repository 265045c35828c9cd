"""MoBA (arXiv 2502.13189): the checkable number of the routed-sparse methods added in issue #40.

NSA, Hedgehog and Based state their results as trained-model quality (perplexity, benchmark scores) or GPU speed;
their limits that the engine can check (every block selected is exact attention, the Taylor map is the second-order
expansion) are exact identities, tested in tests/test_newer_methods.py rather than listed here as claims.
"""

from __future__ import annotations

from core import data
from core.approximation import approximate
from core.claims.claim import HOLD, Measurement, Paper, verdict_at_most

PAPER = Paper("moba", "MoBA (routed sparse)")

MOBA_N, MOBA_BLOCK, MOBA_TOP_K = 8192, 512, 3


@PAPER.claim(
    "moba-sparsity",
    "At 8K tokens with blocks of 512 and top-3 routing, MoBA attends to kB/N of the keys: sparsity 81.25% (Sec. 2.2).",
    "|sparsity - 0.8125| <= 1e-9",
    setting=None,
    real=False,
    expected=HOLD,
    slow=True,  # MoBA twice at n = 8192: about 10 s
)
def moba_sparsity(x: data.Inputs | None, seed: int) -> Measurement:
    inputs = data.clustered(MOBA_N, 64, 90, 0.3, seed)
    result = approximate(
        "moba", inputs.q, inputs.k, inputs.v, block=MOBA_BLOCK, top_k=MOBA_TOP_K, seed=seed
    )  # the full form: every row keeps exactly k blocks
    sparsity = 1.0 - float(result.parts["support"].float().mean())
    causal = approximate(
        "moba", inputs.q, inputs.k, inputs.v, block=MOBA_BLOCK, top_k=MOBA_TOP_K, seed=seed, causal=True
    )
    causal_sparsity = 1.0 - float(causal.parts["support"].float().mean()) * 2 * MOBA_N / (MOBA_N + 1)
    return Measurement(
        sparsity,
        verdict_at_most(abs(sparsity - 0.8125), 1e-9),
        f"1 - kept entries / N^2, N = {MOBA_N}, B = {MOBA_BLOCK}, k = {MOBA_TOP_K}; the causal form keeps fewer of "
        f"the N(N+1)/2 causal pairs (sparsity {causal_sparsity:.4f} of them: early rows have fewer than k blocks)",
    )
