"""The RPCA switch says what it costs truthfully (#42: it said "tens of seconds at n = 512", then refused at 403 s):
the caption is the server's own estimate, and it says "over the limit" exactly when the check refuses."""

from __future__ import annotations

import pytest

import core
from core import limits
from ui.panels.sparse_lowrank import rpca_cost


@pytest.mark.parametrize("n", [64, 128, 512])
def test_the_rpca_caption_is_the_checks_own_verdict(n: int) -> None:
    iterations = int(core.budget_params("rpca", n, 64, 1 / 8)["iterations"])
    text = rpca_cost(n, iterations)
    estimate = limits.rpca_estimate(n, 1, iterations)
    assert f"about {estimate.seconds:,.0f} s" in text, text
    try:
        limits.check("n", n, limits.sizes_up_to(n), lambda size: limits.rpca_estimate(size, 1, iterations))
        refused = False
    except core.ParameterError:
        refused = True
    assert ("over the limit" in text) is refused, text
    if refused:
        largest = limits.largest_fitting(limits.sizes_up_to(n), lambda size: limits.rpca_estimate(size, 1, iterations))
        assert f"n ≤ {largest}" in text and "tens of seconds" not in text, text
