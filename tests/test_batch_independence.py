"""Every registered method gives one element the same numbers alone or inside a batch.

The batch holds three different inputs (three heads of a clustered draw at three temperatures, via a tensor
scale); each element's output and implied matrix must match the single call to 1e-6 relative (float64 inputs,
so this only allows for a different summation order in batched BLAS).
"""

from __future__ import annotations

import pytest
import torch

import core

RELATIVE = 1e-6
BETAS = (0.5, 2.0, 8.0)
# Keep the iterative methods short; batch independence does not depend on how long they run.
FAST = {"learned_kernel": {"steps": 10}, "hedgehog": {"steps": 10}, "rpca": {"iterations": 10}}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _close(batched: torch.Tensor, single: torch.Tensor) -> float:
    scale = float(single.abs().max()) or 1.0
    return float((batched - single).abs().max()) / scale


# Non-default settings with their own random or per-batch code paths (vcc's share_heads pools heads on purpose).
EXTRA = [("vcc", {"selector": "random"}), ("scatterbrain", {"support": "local"}), ("nystrom", {"pinv": "exact"})]
CASES = [(name, {}) for name in sorted(core.methods())] + EXTRA


@pytest.mark.parametrize(("method", "extra"), CASES, ids=[f"{m}-{'-'.join(map(str, e.values()))}" for m, e in CASES])
def test_one_element_alone_equals_it_in_a_batch(method: str, extra: dict[str, object]) -> None:
    n, d = 64, 8
    x = core.data.clustered(n, d, clusters=4, spread=0.4, seed=3, heads=len(BETAS), dtype=torch.float64)
    params = {**core.budget_params(method, n, d, 1 / 4), **FAST.get(method, {}), **extra}
    scale = torch.tensor(BETAS, dtype=torch.float64)
    batched = core.approximate(method, x.q, x.k, x.v, scale=scale, seed=7, **params)
    for i, beta in enumerate(BETAS):
        alone = core.approximate(method, x.q[i : i + 1], x.k[i : i + 1], x.v[i : i + 1], scale=beta, seed=7, **params)
        gap_out = _close(batched.output[i], alone.output[0])
        gap_att = _close(batched.attention()[i], alone.attention()[0])
        assert gap_out <= RELATIVE and gap_att <= RELATIVE, (method, i, gap_out, gap_att)
