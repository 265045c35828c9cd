"""The app's causal mask (issue 30): one sidebar toggle (``?causal=true``) runs every method in its causal form
against causally masked exact attention; a method without one says why; the Home preset's story holds."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import core
from service import compute, views
from ui import share_box
from ui.presets import PRESETS

PRESET = next(p for p in PRESETS if "causal" in p.query)
SPEC = views.InputSpec("clustered", 512, 64, 4, 32, 0.1, 0)  # the shared defaults the preset starts from


def errors(method: str, causal: bool) -> dict[str, float]:
    params = {**core.budget_params(method, SPEC.n, SPEC.d, 1 / 8), "causal": causal}
    result = compute.run_method_now(views.MethodRun.of(SPEC, 1 / 0.2, "cpu", method, params, 0))
    assert result.error_message is None, result.error_message
    return {name: float(result.metrics[name].mean()) for name in ("attention_error", "output_error")}


def test_the_preset_story_holds_under_the_mask() -> None:
    assert "causal=true" in PRESET.query and "tau=0.2" in PRESET.query
    lsh_before, lsh_after = errors("lsh", False), errors("lsh", True)
    sb_after, performer_after = errors("scatterbrain", True), errors("performer", True)
    # LSH keeps about half of each chunk's keys under the mask: its errors rise.
    assert lsh_after["output_error"] > 1.2 * lsh_before["output_error"], (lsh_before, lsh_after)
    assert lsh_after["attention_error"] > lsh_before["attention_error"], (lsh_before, lsh_after)
    # Scatterbrain's causal low-rank part covers the past keys its buckets miss: it stays the best of the three.
    assert sb_after["output_error"] < min(lsh_after["output_error"], performer_after["output_error"])


def test_the_exact_reference_follows_the_mask() -> None:
    run = views.MethodRun.of(SPEC, 5.0, "cpu", "performer", {"causal": True}, 0)
    assert run.exact().causal is True
    exact = compute.exact_now(run.exact())
    assert abs(exact.attention[0][0, 1:]).max() == 0.0  # row 0 sees only key 0
    assert views.MethodRun.of(SPEC, 5.0, "cpu", "performer", {}, 0).exact().causal is False


def test_compare_under_the_mask_says_why_a_method_is_refused(open_page: Callable[..., AppTest]) -> None:
    at = open_page("pages/1_Compare.py", causal="true", n="128", methods=["performer", "nystrom"])
    assert not at.exception, at.exception
    assert at.toggle(key="causal").value is True
    shown = " ".join(str(e.value) for e in [*at.error, *at.warning, *at.markdown, *at.caption])
    assert "landmarks" in shown and "causal" in shown, shown[:2000]


@pytest.mark.parametrize("causal", ["true", "false"])
def test_error_vs_entropy_runs_under_the_mask_and_names_what_it_leaves_out(
    causal: str, open_page: Callable[..., AppTest]
) -> None:
    at = open_page("pages/3_Error_vs_entropy.py", causal=causal, n="128", points="4", oracles="true")
    assert not at.exception, at.exception
    notices = " ".join(str(m.value) for m in [*at.markdown, *at.warning, *at.info])
    assert ("left out under the causal mask" in notices) is (causal == "true")


def test_the_regime_map_runs_under_the_mask() -> None:
    from core import sweeps

    grid = {"n": 64, "d": 16, "clusters": 4, "betas": [1.0, 8.0], "spreads": [0.1], "fraction": 0.25}
    plain = sweeps.regime_map(**grid)
    masked = sweeps.regime_map(**grid, causal=True)
    assert not np.allclose(masked.errors["sparse"], plain.errors["sparse"])
    assert np.all(masked.entropy < plain.entropy)  # early rows see few keys: lower entropy under the mask
    with pytest.raises(core.ParameterError, match="svd.*no causal form"):
        sweeps.regime_map(**grid, methods=sweeps.ORACLES, causal=True)


def test_the_regime_map_page_under_the_mask(open_page: Callable[..., AppTest]) -> None:
    at = open_page("pages/4_Regime_map.py", causal="true", n="64", nb="2", ns="2", seeds="1")
    assert not at.exception, at.exception
    assert at.toggle(key="causal").value is True
    assert not at.error, [e.value for e in at.error]


def test_a_page_that_does_not_apply_the_mask_says_so_and_draws_no_toggle(open_page: Callable[..., AppTest]) -> None:
    at = open_page("pages/5_VCC.py", causal="true", n="128")
    assert not at.exception, at.exception
    assert not [t for t in at.toggle if t.key == "causal"]
    shown = " ".join(str(m.value) for m in [*at.warning, *at.markdown])
    assert "this page computes without it" in shown and "unknown URL parameter" not in shown


@pytest.mark.parametrize(("causal", "sorted_by_cluster"), [("true", False), ("false", True)])
def test_a_causal_view_opens_in_position_order(
    open_page: Callable[..., AppTest], causal: str, sorted_by_cluster: bool
) -> None:
    # #42: in cluster order the causal triangle scattered into a mesh; in position order it is the lower triangle.
    at = open_page("pages/1_Compare.py", n="64", heads="1", causal=causal, methods=["performer"])
    assert not at.exception, at.exception
    assert at.toggle(key="sort_clusters").value is sorted_by_cluster
    link = share_box.links_in(at)[-1]
    assert "sort_clusters" not in link, link  # the default for this view: the link need not say it
