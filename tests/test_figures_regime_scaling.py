"""Pure figure builders of the Regime map and Scaling pages (no Streamlit)."""

from __future__ import annotations

import math
import sys

import numpy as np

from ui.figures import regime as regime_figs


def _view() -> regime_figs.MapView:
    betas = np.geomspace(1.0, 50.0, 8)
    spreads = np.linspace(0.1, 1.0, 5)
    hover = np.full((5, 8), "cell", dtype=object)
    return regime_figs.MapView(betas, spreads, hover, [(1.3, "β ≈ ln n / ln d"), (5.5, "β ≈ ln n")], (5.0, 0.3))


def test_pure_builders_do_not_import_streamlit() -> None:
    import ui.figures.regime as module

    source = open(module.__file__, encoding="utf-8").read()  # noqa: SIM115
    assert "import streamlit" not in source and "from streamlit" not in source
    assert "ui.figures.regime" in sys.modules


def test_beta_ticks_are_1_2_5_or_decades_and_inside_the_range() -> None:
    vals, text = regime_figs.beta_ticks([1.0, 50.0])
    assert text == ["1", "2", "5", "10", "20", "50"]
    assert vals == [math.log10(float(t)) for t in text]
    _, wide = regime_figs.beta_ticks([0.1, 200.0])
    assert wide == ["0.1", "1", "10", "100"]
    _, narrow = regime_figs.beta_ticks([3.0, 4.0])
    assert narrow == ["3", "4"]


def test_winner_map_greys_exactly_the_cells_within_noise() -> None:
    view = _view()
    winner = np.zeros((5, 8), dtype=int)
    within = np.zeros((5, 8), dtype=bool)
    within[1, 2] = within[4, 7] = True
    fig = regime_figs.winner_figure(view, ["sparse", "low_rank", "sparse_low_rank"], winner, within, seeds=3)
    overlay = fig.data[1]
    z = np.array(overlay.z, dtype=float)
    assert np.array_equal(~np.isnan(z), within)
    assert overlay.hoverinfo == "skip"
    legend = [t.name for t in fig.data if t.type == "scatter" and t.showlegend is not False]
    assert any("within noise" in name and "3 seeds" in name for name in legend), legend
    assert any(name == "sidebar (β, σ)" for name in legend)
    assert list(fig.data[0].colorbar.ticktext) == ["sparse", "low rank", "sparse + low rank"]


def test_boundary_labels_alternate_top_and_bottom() -> None:
    fig = regime_figs.gain_figure(_view(), np.zeros((5, 8)))
    positions = [(a.yanchor, a.y) for a in fig.layout.annotations]
    assert len(positions) == 2 and positions[0] != positions[1]
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0  # the legend sits below the plot


def test_gain_map_is_clipped_to_plus_minus_100_percent() -> None:
    gain = np.full((5, 8), -5.0)
    gain[0, 0] = 0.5
    fig = regime_figs.gain_figure(_view(), gain)
    z = np.array(fig.data[0].z)
    assert z.min() == -100 and z[0, 0] == 50


def test_hover_shows_standard_errors_only_with_several_seeds() -> None:
    shape = (1, 2)
    errors = {"sparse": np.full(shape, 0.5), "low_rank": np.full(shape, 0.4)}
    stderr = {"sparse": np.full(shape, 0.01), "low_rank": np.full(shape, 0.02)}
    methods = {"sparse": "lsh", "low_rank": "performer"}
    within = np.array([[True, False]])
    args = ([1.0, 2.0], [0.3], np.zeros(shape), errors, stderr, methods, np.zeros(shape), within)
    many = regime_figs.hover_text(*args, seeds=3)
    assert "± 0.0100" in many[0, 0] and "within noise" in many[0, 0] and "within noise" not in many[0, 1]
    one = regime_figs.hover_text(*args, seeds=1)
    assert "±" not in one[0, 0]
