"""The pure figure builders of the Rank vs heads and Kernels pages, without a server: traces, titles and decade
log axes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from core import kernel_study as ks
from core import kernels as K
from core import rank_heads as rh
from core import rank_heads_study as study
from ui.figures import kernels as kfig
from ui.figures import rank_heads as rfig

ROOT = Path(__file__).resolve().parents[1]


def names(fig) -> list[str]:  # type: ignore[no-untyped-def]
    return [t.name for t in fig.data if t.name]


def is_decades(axis) -> bool:  # type: ignore[no-untyped-def]
    """A log axis labelled at every decade, or (under two decades in the data) at two round numbers at least."""
    return axis.type == "log" and (axis.dtick == 1 or len(axis.tickvals or ()) >= 2)


def test_builders_do_not_import_streamlit() -> None:
    for module in ("rank_heads", "kernels"):
        source = (ROOT / "ui" / "figures" / f"{module}.py").read_text()
        assert "streamlit" not in source


def test_narrow_log_axes_get_a_few_round_labels_or_the_plotted_values() -> None:
    fig = rfig.log_axis(rfig.base_figure("", "", ""), "y", [0.16, 0.5])
    assert fig.layout.yaxis.type == "log" and list(fig.layout.yaxis.tickvals) == [0.2, 0.3, 0.5]
    assert list(fig.layout.yaxis.ticktext) == ["0.2", "0.3", "0.5"]
    heads = rfig.log_axis(rfig.base_figure("", "", ""), "x", [1, 4], ticks=[1, 4])
    assert list(heads.layout.xaxis.tickvals) == [1, 4]
    wide = rfig.log_axis(rfig.base_figure("", "", ""), "x", [1, 100], ticks=[1, 4, 100])
    assert wide.layout.xaxis.tickvals is None and wide.layout.xaxis.dtick == 1  # decades when there are any
    huge = rfig.log_axis(rfig.base_figure("", "", ""), "y", [0.1, 1e9])
    assert huge.layout.yaxis.dtick == 2 and huge.layout.yaxis.minor.ticks == ""  # 10 decades: every other one


def test_error_vs_heads_preview_shows_only_the_reference_levels() -> None:
    settings = study.TrainSettings("nearest", 16, 2, 10, 1, 0, "cpu")
    refs = study.reference_levels(settings)
    fig = rfig.error_vs_heads({}, refs, [1, 4, 16], preview=True)
    assert fig.layout.title.text.startswith("Before training")
    assert [t.name for t in fig.data] == [r.label for r in refs]
    assert is_decades(fig.layout.xaxis)
    assert list(fig.layout.yaxis.ticktext) == ["0.2", "0.3", "0.5"]  # 0.16 .. 0.5: under one decade
    trained = rfig.error_vs_heads({(1, 1): 0.3, (1, 16): 0.2, (4, 1): 0.25}, refs, [1, 16])
    assert names(trained)[:2] == ["r = 1", "r = 4"] and list(trained.data[0].x) == [1, 16]


def test_grid_heatmap_places_each_error_and_the_equal_parameter_lines() -> None:
    fig = rfig.grid_heatmap(16, {(1, 1): 0.2, (1, 16): 0.15, (16, 1): 0.01})
    heat = fig.data[0]
    assert list(heat.x) == [0.0, 4.0] and list(heat.y) == [0.0, 4.0]
    assert heat.text[1][0] == "0.010" and heat.text[1][1] == ""  # (r = 16, H = 16) not trained
    assert "r·d·H = d^2" in names(fig)


def test_rank_line_figures_use_decade_log_axes() -> None:
    curve = study.fact_one_curve(4, 4, "nearest", cs=[1.0, 10.0, 100.0], samples=500)
    fact = rfig.fact_one(curve, 4, 4)
    assert is_decades(fact.layout.xaxis) and is_decades(fact.layout.yaxis)
    assert len(fact.data) == 3
    theory = rfig.theorem_shapes(64, study.theorem_shapes(64, 0.1))
    assert is_decades(theory.layout.xaxis)
    assert theory.layout.yaxis.type == "log" and theory.layout.yaxis.dtick >= 2  # dozens of decades: every few
    paper = rfig.paper_fig1()
    assert len(paper.data) == len(rh.PAPER_FIG1_L1) and is_decades(paper.layout.xaxis)
    by_n = rfig.error_vs_n(8, {(8, 1, 2): 0.01, (1, 8, 2): 0.3, (8, 1, 64): 0.05, (1, 8, 64): 0.8})
    assert names(by_n) == ["r = 8, H = 1", "r = 1, H = 8"] and list(by_n.data[1].y) == [0.3, 0.8]
    assert is_decades(by_n.layout.xaxis)
    curves = rfig.training_curves({(1, 1): ([1, 10, 100], [0.5, 0.05, 0.005])})
    assert is_decades(curves.layout.yaxis) and curves.layout.xaxis.type != "log"


def test_kernel_mse_figure_adds_measured_points_to_the_closed_forms() -> None:
    theory = ks.kernel_mse_theory(16, 1.0, 2.5, features=(4, 16, 64))
    preview = kfig.kernel_mse(16, theory)
    assert not any("measured" in n for n in names(preview))
    assert "positive: Lemma 2" in names(preview) and "positive orthogonal: ORF bound" in names(preview)
    measured = ks.kernel_mse_at_pair(16, 1.0, 2.5, draws=20, seed=0, features=(4, 16, 64))
    full = kfig.kernel_mse(16, theory, measured)
    assert sum("measured" in n for n in names(full)) == 4
    assert is_decades(full.layout.xaxis) and is_decades(full.layout.yaxis)
    table = kfig.kernel_mse_table(measured)
    assert len(table) == 12 and set(table.columns) == {"variant", "m", "measured_mse", "lemma2_iid_mse"}


def test_attention_and_entry_figures() -> None:
    curve = K.AttentionErrorCurve("positive iid", [8, 1024], [0.5, 0.2], [0.4, 0.1], [0.6, 0.3], [0.3, 0.1])
    res = ks.AttentionStudy([8, 1024], [curve], elu_tv=0.4)
    fig = kfig.attention_error(res, 16, 1.0)
    assert list(fig.data[0].y) == [0.6, 0.3, 0.1, 0.4]  # the band: high forwards, low backwards
    assert names(fig)[-1] == "ELU+1 linear (m = d)" and is_decades(fig.layout.xaxis)
    assert list(kfig.attention_error_table(res)["tv_p90"]) == [0.6, 0.3]
    bins = K.EntryErrorBins((0.0, 1.0, math.inf), [3, 4], {"trig iid": [5.0, 0.2]})
    entry = kfig.entry_error(bins, 64, 2.0)
    assert entry.layout.xaxis.type == "category" and list(entry.data[0].x) == ["[0, 1)", ">= 1"]
    assert is_decades(entry.layout.yaxis)
    frac = kfig.trig_nonpositive(np.array([[0.5, 0.0]]), [16], (0.5, 5.0), 1.0)
    assert is_decades(frac.layout.xaxis) and names(frac) == ["m = 16"]
    assert frac.layout.annotations[0].x == 0.0 and frac.layout.shapes[0].x0 == 1.0  # log10 coordinates for the label
    table = kfig.trig_nonpositive_table(np.array([[0.5, 0.0], [0.25, 0.0]]), [16, 64], (0.5, 5.0))
    assert list(table["m"]) == [16, 16, 64, 64] and list(table["tau"]) == [0.5, 5.0, 0.5, 5.0]
    assert list(table["fraction"]) == [0.5, 0.0, 0.25, 0.0]


def test_trainable_kernel_and_paper_figures() -> None:
    rows = [
        {"method": "ELU+1 linear", "features": 16, "tv": 0.4, "tv_heldout": 0.41, "kl": 0.3},
        {"method": "learned ff", "features": 16, "tv": 0.1, "tv_heldout": 0.12, "kl": 0.02},
    ]
    curve = kfig.fitting_curve({"ff": [1.0, 0.1, 0.02]}, rows)
    assert names(curve) == ["learned ff", "ELU+1 linear (m = 16): 0.300"] and is_decades(curve.layout.yaxis)
    bars = kfig.comparison_bars(rows, 16, heldout=True)
    assert len(bars.data) == 2 and list(bars.data[0].x) == ["ELU+1 linear (m=16)", "learned ff (m=16)"]
    assert len(kfig.comparison_bars(rows, 16, heldout=False).data) == 1
    spectrum = kfig.penalty_spectrum([0.0, 1.0], [[3.0, 0.1], [1.0, 1.0]])
    assert names(spectrum) == ["λ = 0.0", "λ = 1.0"] and is_decades(spectrum.layout.yaxis)
    assert kfig.penalty_quality([0.0, 0.1], [0.2, 0.3]).layout.xaxis.type == "category"
    sweep = K.PenaltySweep([0.0, 1.0], [0.2, 0.3], [0.05, 0.07], [[3.0, 0.1], [1.0, 1.0]])
    assert kfig.penalty_sweep_table(sweep).to_dict("list") == {
        "lambda": [0.0, 1.0],
        "tv": [0.2, 0.3],
        "kl": [0.05, 0.07],
    }
    paper = pd.DataFrame(K.PAPER_TABLE1, columns=list(K.PAPER_TABLE1_COLUMNS))
    assert len(kfig.paper_table1(paper).data) == 3
    ratio = kfig.ratio_map(ks.mse_ratio_map(10, 5), 2.5, 1.0)
    assert names(ratio) == ["ratio = 1", "this pair"]
