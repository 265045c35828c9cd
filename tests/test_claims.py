"""The paper-claims registry: every claim's verdict at the default inputs matches the one documented in the
registry (an engine change that flips a claim fails here), and the verdict rules themselves can fail."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from core import ParameterError, claims
from ui import claims_table, page_registry

CASES = [(c.id, which) for c in claims.CLAIMS for which in c.inputs]


@pytest.mark.parametrize(("claim_id", "which"), CASES)
def test_claim_verdict_matches_the_registry(claim_id: str, which: str) -> None:
    claim = claims.get(claim_id)
    m = claims.measure(claim, which, seed=0)
    assert m.verdict in claims.VERDICTS
    assert math.isfinite(m.value) or m.verdict == claims.FAILS, m
    assert m.verdict == claim.expected[which], f"{claim_id} on {which}: {m}"


def test_registry_is_well_formed() -> None:
    ids = [c.id for c in claims.CLAIMS]
    assert len(ids) == len(set(ids))
    pages = set(page_registry.url_paths())
    for c in claims.CLAIMS:
        assert c.paper in claims.PAPERS.values()
        assert set(c.expected) == set(c.inputs), c.id
        assert all(v in claims.VERDICTS for v in c.expected.values()), c.id
        assert claims_table.view_link(c).split("?")[0] in pages, c.id
        assert c.statement and c.threshold
    assert list(claims_table.VIEW_LINKS) == ids  # one view per claim, in the registry's order
    for module in (claims.scatterbrain, claims.vcc, claims.performer_kernels, claims.rank_vs_heads):
        assert module.PAPER.claims and all(c.id.startswith(module.PAPER.key + "-") for c in module.PAPER.claims)
        assert all(cid.startswith(module.PAPER.key + "-") for cid, _ in module.PAPER.skipped)
    assert all(cid and why for cid, why in claims.SKIPPED)
    assert not set(ids) & {cid for cid, _ in claims.SKIPPED}


def test_verdict_rules_can_fail() -> None:
    assert claims.verdict_at_most(0.05, 0.1) == claims.HOLDS
    assert claims.verdict_at_most(0.2, 0.1) == claims.FAILS
    assert claims.verdict_fraction(1.0) == claims.HOLDS
    assert claims.verdict_fraction(0.3) == claims.REGIME
    assert claims.verdict_fraction(0.0) == claims.FAILS
    assert claims.verdict_rate(0.95) == claims.HOLDS
    assert claims.verdict_rate(0.7) == claims.REGIME
    assert claims.verdict_rate(0.4) == claims.FAILS
    assert claims.combine([claims.HOLDS, claims.HOLDS]) == claims.HOLDS
    assert claims.combine([claims.FAILS, claims.FAILS]) == claims.FAILS
    assert claims.combine([claims.HOLDS, claims.FAILS]) == claims.REGIME


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: claims.verdict_fraction(1.5), "fraction"),
        (lambda: claims.verdict_rate(float("nan")), "rate"),
        (lambda: claims.combine([]), "verdicts"),
        (lambda: claims.combine(["maybe"]), "verdicts"),
        (lambda: claims.get("no-such-claim"), "claim"),
        (lambda: claims.measure(claims.get("scatterbrain-13"), "real"), "input"),
    ],
)
def test_bad_input_names_the_parameter(call: object, name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        call()  # type: ignore[operator]


def test_a_wrong_threshold_fails_the_crossover_claim() -> None:
    """The same measurement as scatterbrain-13 against a crossover the paper does not state (beta* = 6)."""
    holds = claims.scatterbrain.crossover_measure(claims.scatterbrain.SB_RUN1, 32, 2.9, 0.3, seed=0)
    wrong = claims.scatterbrain.crossover_measure(claims.scatterbrain.SB_RUN1, 32, 6.0, 0.3, seed=0)
    assert holds.verdict == claims.HOLDS
    assert wrong.verdict == claims.FAILS
    assert wrong.value == holds.value


def test_sparse_oracle_is_the_unrenormalised_top_k() -> None:
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(3, 20, 20, generator=g, dtype=torch.float64), dim=-1)
    s = claims.sparse_oracle(p, 4)
    assert ((s > 0).sum(-1) == 4).all()
    assert torch.equal(s[s > 0], p[s > 0])  # kept entries unchanged, not renormalised
    assert (s.sum(-1) < 1).all()
    kept_min = s.masked_fill(s == 0, 2.0).amin(-1)
    dropped_max = p.masked_fill(s > 0, -1.0).amax(-1)
    assert (kept_min >= dropped_max).all()
    sparse, low_rank = claims.oracle_errors(p, 20)
    assert float(sparse.max()) == 0.0
    assert float(low_rank.max()) < 1e-12
    sparse, low_rank = claims.oracle_errors(p, 2)
    assert (sparse > 0.1).all() and (low_rank > 0.01).all()


def test_page_rows_combine_inputs_mark_not_run_and_real_failures() -> None:
    rh = [c for c in claims.CLAIMS if c.paper == claims.PAPERS["rank-vs-heads"]]
    assert claims.of_papers(["rank-vs-heads"]) == rh
    both = next(c for c in claims.CLAIMS if c.real and not c.slow)
    slow = next(c for c in claims.CLAIMS if c.slow and not c.real)
    assert claims.due([both, slow], both.paper, with_slow=False, with_real=True) == [
        (both.id, "clustered"),
        (both.id, "real"),
    ]  # the slow claim is left out (or belongs to another paper)
    assert claims.due([both], both.paper, with_slow=True, with_real=False) == [(both.id, "clustered")]
    found = {
        claims.result_key(both.id, "clustered"): {"value": 0.01, "verdict": claims.HOLDS, "detail": "a"},
        claims.result_key(both.id, "real"): {"value": None, "verdict": claims.FAILS, "detail": "b"},
    }
    rows, failing_real = claims_table.page_rows([both, slow], found, with_real=True, seed=3)
    assert failing_real == [both.id]
    assert rows[0]["verdict"] == claims.REGIME
    assert rows[0]["measured now (clustered)"] == "0.01 (holds)"
    assert rows[0]["measured now (real MiniLM heads)"] == f"– ({claims.FAILS})"
    assert rows[0]["how it was measured"] == "clustered: a | real: b"
    assert rows[0]["view"].endswith("seed=3")
    assert rows[1]["verdict"] == "not run" and rows[1]["measured now (real MiniLM heads)"] == "–"
    assert claims_table.link_with_seed("Kernels", 0) == "Kernels"
    assert claims_table.link_with_seed("Kernels", 2) == "Kernels?seed=2"
    assert claims_table.link_with_seed("Kernels?d=8", 2) == "Kernels?d=8&seed=2"


def test_shown_table_links_each_view_and_colours_cells_by_verdict() -> None:
    row = {"paper": "p", "claim": "c-1: s", "threshold": "t", "verdict": claims.REGIME, "view": "Kernels?seed=2"}
    row |= {"measured now (clustered)": "0.1 (holds)", "measured now (real MiniLM heads)": "–"}
    shown = claims_table.shown_table(pd.DataFrame([row]))
    assert list(shown.columns) == claims_table.SHOWN_COLUMNS  # the paper stays in the CSV only
    assert shown["view"][0] == "[open](Kernels?seed=2)"
    assert claims_table.measured_colour("0.1 (holds)") == claims_table.VERDICT_COLOURS[claims.HOLDS]
    assert claims_table.verdict_colour(claims.FAILS) == claims_table.VERDICT_COLOURS[claims.FAILS]
    assert claims_table.verdict_colour("not run") == "" and claims_table.measured_colour("–") == ""
