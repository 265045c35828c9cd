"""The Error vs cost figure (ui/figures/cost.py): two log-log panels sharing the error axis, one colour per family,
the Pareto front ringed on each panel, exact attention as a line, and hover text with every parameter."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from core.cost_study import CostPoint
from ui.figures import cost as cost_figs
from ui.figures import palette

MIB = 2**20
LABELS = {"exact": "Exact softmax", "performer": "Performer", "nystrom": "Nyström", "lsh": "LSH"}


def point(method: str, family: str, budget: float, error: float, ms: float, mib: float, **params: object) -> CostPoint:
    return CostPoint(
        method, family, budget, dict(params), error, ms / 1e3, 0.1, mib * MIB, 2 * mib * MIB, "cpu", 5, "ok"
    )


POINTS = [
    point("exact", "exact", 1.0, 0.0, 40.0, 8.0),
    point("performer", "low-rank", 0.125, 0.7, 10.0, 6.0, features=64, kernel="positive"),
    point("performer", "low-rank", 0.25, 0.6, 20.0, 12.0, features=128, kernel="positive"),
    point("nystrom", "low-rank", 0.125, 0.9, 5.0, 4.0, landmarks=60),
    point("lsh", "sparse", 0.125, 0.5, 50.0, 2.0, rounds=2, buckets=16),  # slower than exact: off the time front
    CostPoint("lsh", "sparse", 0.25, {}, status="refused: too large"),
]


def traces(fig, col: int) -> dict[str, object]:
    axis = "x" if col == 1 else f"x{col}"
    return {t.name: t for t in fig.data if t.xaxis == axis}


def test_two_log_log_panels_share_the_error_axis() -> None:
    fig = cost_figs.error_cost_figure(POINTS, LABELS)
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log" and fig.layout.yaxis.type == "log"
    assert fig.layout.yaxis2.matches == "y"  # shared error axis
    assert "ms" in fig.layout.xaxis.title.text and "MiB" in fig.layout.xaxis2.title.text
    low, high = fig.layout.xaxis.range  # log10 units, with room beyond the fastest and slowest points
    assert low < math.log10(5.0) and high > math.log10(50.0)
    assert fig.layout.font.size >= 16 and fig.layout.legend.font.size >= 14  # readable on a projector


def test_each_method_in_its_own_colour_and_one_legend_entry_per_method() -> None:
    fig = cost_figs.error_cost_figure(POINTS, LABELS)
    left = traces(fig, 1)
    performer, nystrom, lsh = left["Performer (low-rank)"], left["Nyström (low-rank)"], left["LSH (sparse)"]
    # The method's colour on every page (ui/figures/palette.py); the marker's shape is its family, as the page says.
    assert performer.marker.color == palette.method_colour("performer") != nystrom.marker.color
    assert nystrom.marker.color == palette.method_colour("nystrom")
    assert lsh.marker.color == palette.method_colour("lsh")
    assert performer.marker.symbol == nystrom.marker.symbol == cost_figs.FAMILY_SYMBOLS["low-rank"] == "circle"
    assert lsh.marker.symbol == cost_figs.FAMILY_SYMBOLS["sparse"] == "square"
    assert cost_figs.FAMILY_SYMBOLS["sparse+low-rank"] == "diamond"
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert len(legend) == len(set(legend)) == 3 + 2  # methods, the front and exact attention
    assert list(performer.x) == [10.0, 20.0] and list(performer.y) == [0.7, 0.6]  # in budget order, refusals out
    assert performer.marker.size[0] < performer.marker.size[1]  # a larger budget, a larger marker
    assert cost_figs.legend_name("LSH sparse (Reformer/SMYRF)", "sparse") == "LSH sparse (Reformer/SMYRF)"
    assert (
        cost_figs.legend_name("Scatterbrain (sparse + low-rank)", "sparse+low-rank")
        == "Scatterbrain (sparse + low-rank)"
    )
    assert cost_figs.legend_name("Linformer", "low-rank") == "Linformer (low-rank)"


def test_the_front_rings_exactly_the_pareto_optimal_points_on_each_panel() -> None:
    fig = cost_figs.error_cost_figure(POINTS, LABELS)
    front_name = next(name for name in traces(fig, 1) if name.startswith("Pareto front"))
    time_front = traces(fig, 1)[front_name]
    # By time: nystrom (fastest), performer 1/8 and 1/4 (each more accurate); lsh is slower than exact (error 0).
    assert list(zip(time_front.x, time_front.y, strict=True)) == [(5.0, 0.9), (10.0, 0.7), (20.0, 0.6)]
    memory_front = traces(fig, 2)[front_name]
    # By measured memory: lsh (smallest), exact (8 MiB, error 0) dominates both Performers.
    assert list(zip(memory_front.x, memory_front.y, strict=True)) == [(2.0, 0.5)]
    model = traces(cost_figs.error_cost_figure(POINTS, LABELS, memory="model"), 2)
    assert list(model["Performer (low-rank)"].x) == [12.0, 24.0]
    exact_line = next(t for name, t in traces(fig, 1).items() if name.startswith("Exact softmax"))
    assert set(exact_line.x) == {40.0} and exact_line.mode == "lines"


def test_points_without_a_measured_memory_are_left_out_of_the_memory_panel_only() -> None:
    unmeasured = [
        CostPoint(p.method, p.family, p.budget, p.params, p.error, p.seconds, p.spread, math.nan, p.model_bytes)
        for p in POINTS
    ]
    fig = cost_figs.error_cost_figure(unmeasured, LABELS)
    assert len(traces(fig, 1)["Performer (low-rank)"].x) == 2
    assert len(traces(fig, 2)["Performer (low-rank)"].x) == 0


def test_hover_names_the_budget_runs_and_every_parameter() -> None:
    fig = cost_figs.error_cost_figure(POINTS, LABELS)
    text = traces(fig, 1)["LSH (sparse)"].text[0]
    for part in ("<b>LSH</b>", "budget 1/8", "error 0.5", "50 ms", "median of 5 warm runs", "rounds=2", "buckets=16"):
        assert part in text, (part, text)


def test_an_unknown_memory_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="memory must be one of measured, model"):
        cost_figs.error_cost_figure(POINTS, LABELS, memory="rss")


def test_the_page_says_what_colour_and_shape_stand_for() -> None:
    """The page's text and its picture say the same: colour the method, shape the family (the text said colour was
    the family, after the figure had given each method its own colour)."""
    page = (Path(__file__).resolve().parent.parent / "pages" / "10_Error_vs_cost.py").read_text()
    said = " ".join(" ".join(line.strip().strip('"') for line in page.splitlines()).split())
    assert "Colour is the method (the same on every page), the marker's shape its family" in said
    assert "square sparse, circle low rank, diamond sparse + low rank" in said
    assert "Colour is the method's family" not in said


def test_presenter_view_names_each_entry_short_and_puts_the_legend_above_the_panels() -> None:
    """Nine entries of up to 63 characters wrapped onto nine legend rows below the panels on a 1280 x 720 projector,
    off its first screen: the class saw coloured lines with no names. The presenter copy names them short."""
    from ui.figures import PRESENTER_LEGEND_ROWS, legend_rows, presenter_figure

    labels = {
        "exact": "Exact softmax",
        "performer": "Performer (FAVOR+)",
        "nystrom": "Nystrom",
        "lsh": "LSH sparse (Reformer/SMYRF)",
        "scatterbrain": "Scatterbrain (sparse + low-rank)",
        "linformer": "Linformer (random projection)",
        "local": "Local window",
    }
    families = {"performer": "low-rank", "nystrom": "low-rank", "linformer": "low-rank", "lsh": "sparse",
                "local": "sparse", "scatterbrain": "sparse+low-rank"}  # fmt: skip
    points = [POINTS[0]] + [point(m, f, 0.125, 0.5, 10.0, 4.0) for m, f in families.items()]
    fig = cost_figs.error_cost_figure(points, labels)
    laptop = [str(t.name) for t in fig.data if t.showlegend is not False]
    assert legend_rows(laptop, 20, grouped=True) > PRESENTER_LEGEND_ROWS  # the long names do not fit above
    big = presenter_figure(fig)
    names = [str(t.name) for t in big.data if t.showlegend is not False]
    assert names == [
        "Performer", "Nystrom", "Linformer", "LSH sparse", "Local window", "Scatterbrain", "Pareto front",
        "Exact softmax (error 0)",
    ]  # fmt: skip
    assert big.layout.legend.yanchor == "bottom" and big.layout.legend.y > 1.0  # above the panels and their titles
    assert [str(t.name) for t in fig.data if t.showlegend is not False] == laptop  # the page's own figure unchanged
    assert cost_figs.short_name("LSH sparse (Reformer/SMYRF)") == "LSH sparse"
    assert cost_figs.short_name("Nystrom") == "Nystrom" and cost_figs.short_name("(x)") == "(x)"
