"""Pure builders of the Compare and Error vs entropy pages (ui/figures/compare.py), tested without a server;
and the engine helpers behind them (core/compare.py): crossing, warm timing, the export limit check."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import core
from core import compare
from ui.figures import compare as figs


def result(error: float, *, message: str | None = None) -> SimpleNamespace:
    heads = 2
    return SimpleNamespace(
        metrics={
            "attention_error": np.full(heads, error),
            "output_error": np.full(heads, error / 2),
            "row_kl": np.full(heads, 0.1),
        },
        memory=100,
        flops=2_000_000,
        seconds=0.012,
        device="cpu",
        params={"features": 8},
        error_message=message,
    )


def test_a_class_rooms_hidden_answer_leaves_no_error_number_in_the_table_or_titles() -> None:
    rows = figs.metric_rows({"a": result(0.5), "b": result(0.25)}, {"a": "A", "b": "B"}, 1000, {})
    shown = figs.metrics_table(rows)
    assert set(figs.ERROR_COLUMNS) <= set(shown.columns)
    hidden = figs.metrics_table(rows, show_errors=False)
    assert not set(figs.ERROR_COLUMNS) & set(hidden.columns)
    assert list(hidden["method"]) == ["A", "B"] and "memory (% of full)" in hidden  # the budget still shows
    assert "0.500" not in hidden.to_csv(index=False) and "0.25" not in hidden.to_csv(index=False)
    assert figs.head_error_title(1, 0.4567, 0.123) == "head 1: error 0.457 · KL 0.12"
    assert not any(ch.isdigit() for ch in figs.head_error_title(1, 0.4567, 0.123, show_errors=False).split(":")[1])
    assert figs.row_title("Performer (FAVOR+)", 0.969) == "Performer: 0.969"
    assert figs.row_title("Performer (FAVOR+)", 0.969, show_errors=False) == "Performer"


def test_metric_rows_skip_failures_and_carry_the_time_text() -> None:
    results = {"a": result(0.5), "b": result(0.25), "c": result(0.1, message="refused")}
    labels = {"a": "A", "b": "B", "c": "C"}
    rows = figs.metric_rows(results, labels, 1000, {"a": "12 ms ± 3 (median of 5)"})
    assert [r["method"] for r in rows] == ["A", "B"]
    assert rows[0]["time on cpu"] == "12 ms ± 3 (median of 5)"
    assert rows[1]["time on cpu"] == "12 ms (one cold measurement)"
    assert rows[0]["memory (% of full)"] == pytest.approx(10.0)
    assert figs.best_error(rows) == 0.25
    table = pd.DataFrame(rows)
    assert "time on cpu" not in figs.number_columns(table) and "attention error" in figs.number_columns(table)


def test_shrink_reduces_to_the_resolution_and_tracks_the_block() -> None:
    a = np.arange(256 * 256, dtype=np.float32).reshape(256, 256)
    small, block = figs.shrink(a, 128, 2, "max")
    assert small.shape == (128, 128) and block == 4
    assert small[0, 0] == a[:2, :2].max()
    same, block = figs.shrink(a, 512, 1, "max")
    assert same.shape == a.shape and block == 1


def test_heads_grid_has_one_cell_per_method_and_head() -> None:
    maps = {"exact": np.random.default_rng(0).random((3, 32, 32)), "lsh": np.zeros((3, 32, 32))}
    fig, data, side = figs.heads_grid(maps, 3, log_colour=True)
    assert len(fig.data) == 6 and set(data) == {f"{m}_head{h}" for m in maps for h in range(3)}
    assert side == 96


def test_method_figure_draws_the_attention_map_over_its_error_with_its_own_colour_bars() -> None:
    from ui.figures import error_bound, heatmap

    rng = np.random.default_rng(1)
    maps = SimpleNamespace(attention=rng.random((32, 32)), error=rng.normal(size=(32, 32)))
    fig = figs.method_figure("M", maps.attention, maps.error, 2, log_colour=True, error_title="error 0.5")
    attention, error = fig.data
    assert [a.text for a in fig.layout.annotations] == ["M", "error 0.5"]
    # the same numbers and colours as the single heatmap of that map
    single = heatmap(maps.attention, log=True, factor=2).data[0]
    np.testing.assert_array_equal(attention.z, single.z)
    assert attention.zmax == single.zmax and list(attention.x) == list(np.arange(32) * 2)
    assert error.zmax == pytest.approx(error_bound(maps.error)) and error.zmin == -error.zmax
    assert "M − exact" in error.hovertemplate and "error" in error.hovertemplate
    # attention above error, same column; each colour bar right of its map and level with it
    assert (attention.xaxis, attention.yaxis, error.xaxis, error.yaxis) == ("x", "y", "x2", "y2")
    xa, ya, xe, ye = fig.layout.xaxis, fig.layout.yaxis, fig.layout.xaxis2, fig.layout.yaxis2
    assert tuple(xa.domain) == tuple(xe.domain) and ya.domain[0] > ye.domain[1]
    assert xa.domain[1] < attention.colorbar.x < 1 and ya.domain[0] < attention.colorbar.y < ya.domain[1]
    assert ye.domain[0] < error.colorbar.y < ye.domain[1]
    assert fig.layout.xaxis2.title.text == "key j" and not fig.layout.xaxis.title.text


def test_heatmap_grid_places_rows_and_columns_and_leaves_empty_cells_empty() -> None:
    from ui.figures import GridCell, heatmap_grid

    z = np.eye(8)
    rows = [[GridCell("a", z), GridCell("b", z), GridCell("c", z)], [GridCell("d", z), None, GridCell("f", z)]]
    fig = heatmap_grid(rows, columns=3)
    assert [a.text for a in fig.layout.annotations] == ["a", "b", "c", "d", "f"] and len(fig.data) == 5
    x_of = [tuple(fig.layout[f"xaxis{t.xaxis[1:]}"].domain) for t in fig.data]
    y_of = [tuple(fig.layout[f"yaxis{t.yaxis[1:]}"].domain) for t in fig.data]
    assert x_of[0] == x_of[3] and x_of[2] == x_of[4] and x_of[0][1] < x_of[1][0] < x_of[1][1] < x_of[2][0]
    assert y_of[0] == y_of[1] == y_of[2] and y_of[3] == y_of[4] and y_of[3][1] < y_of[0][0]
    # every map labels its own positions, with room left of it past the first column (the issue: maps without any)
    shown = [fig.layout[f"yaxis{t.yaxis[1:]}"].showticklabels for t in fig.data]
    assert shown == [None] * 5
    colour_bar_right = x_of[0][1] + 0.005 + 0.02  # the first map's colour bar and a little of its labels
    assert x_of[1][0] - colour_bar_right > 0.03


def test_heatmap_grid_puts_a_real_models_tokens_on_the_axes_and_makes_room_for_them() -> None:
    from ui.figures import GridCell, heatmap, heatmap_grid

    tokens = [f"tok{i}" for i in range(8)]
    z = np.eye(8)
    plain = heatmap_grid([[GridCell("a", z), GridCell("b", z)]], columns=2)
    fig = heatmap_grid([[GridCell("a", z, labels=tokens), GridCell("b", z, labels=tokens)]], columns=2)
    for k in ("", "2"):
        assert list(fig.layout[f"xaxis{k}"].ticktext) == tokens
    assert list(fig.layout.yaxis.ticktext) == tokens and fig.layout.yaxis2.showticklabels is False
    # the same ticks as the single heatmap draws, and the maps keep their size: the figure grows below them
    single = heatmap(z, labels=tokens)
    assert list(fig.layout.xaxis.tickvals) == list(single.layout.xaxis.tickvals)
    assert fig.layout.height > plain.layout.height
    map_px = lambda f: (f.layout.yaxis.domain[1] - f.layout.yaxis.domain[0]) * (f.layout.height - 10)  # noqa: E731
    assert map_px(fig) == pytest.approx(map_px(plain))
    # no word labels on block-reduced maps or past 64 positions (they would not fit)
    reduced = heatmap_grid([[GridCell("a", z, labels=tokens, factor=2)]], columns=1)
    assert reduced.layout.xaxis.ticktext is None
    big = heatmap_grid([[GridCell("a", np.eye(80), labels=[str(i) for i in range(80)])]], columns=1)
    assert big.layout.xaxis.ticktext is None


def sweep_result() -> dict:
    betas = np.array([10.0, 3.0, 1.0])
    return {
        "entropy": np.array([1.0, 3.0, 5.0]),
        "betas": betas,
        "attention": {"lsh": np.array([0.1, 0.5, 2.0]), "performer": np.array([1.0, 0.6, 0.2])},
        "output": {"lsh": np.zeros(3), "performer": np.zeros(3)},
    }


def test_sweep_figure_marks_the_crossover_and_tabulates_every_point() -> None:
    labels = {"lsh": "LSH", "performer": "Performer"}
    fig, table, text = figs.sweep_figure(
        sweep_result(),
        ["lsh", "performer"],
        metric="attention",
        labels=labels,
        families={"lsh": "sparse", "performer": "low-rank"},
        budget_label="1/8",
        log_y=False,
        current_entropy=2.0,
        tau=0.2,
        n=64,
    )
    assert len(fig.data) == 2 and len(table) == 6
    assert "cross at H ≈ 3.11" in text
    annotations = [a.text for a in fig.layout.annotations]
    assert any(t.startswith("crossover H") for t in annotations) and "sidebar τ = 0.2" in annotations
    assert fig.layout.title.text.endswith("(equal budget 1/8)")


def test_crossover_text_without_a_pair_or_a_crossing() -> None:
    r = sweep_result()
    assert "Pick a sparse" in figs.crossover_text(r["entropy"], r["attention"], ["lsh"], {"lsh": "LSH"})
    flat = {"lsh": np.array([0.1, 0.1, 0.1]), "performer": np.array([1.0, 1.0, 1.0])}
    text = figs.crossover_text(r["entropy"], flat, ["lsh", "performer"], {"lsh": "LSH", "performer": "P"})
    assert text.startswith("No crossover") and "LSH wins everywhere" in text


def test_heads_scatter_one_trace_per_method() -> None:
    table = pd.DataFrame(
        [
            {"method": m, "layer": 0, "head": h, "entropy": 1.0 + h, "attention_error": 0.1, "output_error": 0.2}
            for m in ("lsh", "performer")
            for h in range(3)
        ]  # fmt: skip
    )
    fig = figs.heads_scatter(table, ["lsh", "performer"], {"lsh": "LSH", "performer": "P"}, "output")
    assert [len(t.x) for t in fig.data] == [3, 3]


def test_first_crossing_matches_the_sweep_result_crossover() -> None:
    x = core.data.clustered(64, 16, 4, 0.1, 0, heads=1)
    r = core.sweeps.error_vs_entropy(x.q, x.k, x.v, ["lsh", "performer"], taus=[0.03, 0.1, 0.3, 1, 3], fraction=1 / 8)
    diff = r.attention_error["lsh"] - r.attention_error["performer"]
    assert compare.first_crossing(r.entropy, diff) == r.crossover("lsh", "performer")
    assert compare.first_crossing([0, 1, 2], [1, 2, 3]) is None
    assert compare.first_crossing([2, 0, 1], [-1, 1, 0]) == 1.0


def test_warm_timing_reports_a_median_of_several_runs_or_says_it_is_one() -> None:
    timing = compare.warm_timing(lambda: sum(range(1000)), runs=5)
    assert timing.runs == 5 and timing.median_s > 0 and timing.spread_s >= 0
    assert "(median of 5)" in timing.describe() and "±" in timing.describe()
    one = compare.WarmTiming(0.0123, 0.0, 1, 0.0123)
    assert one.describe() == "12 ms (one cold measurement)"
    assert compare.WarmTiming(2.046, 0.0, 1, 2.046).describe() == "2,046 ms (one cold measurement)"
    slow = compare.warm_timing(lambda: sum(range(10)), runs=50, budget_s=0.0)
    assert slow.runs == 1  # the budget stops warm runs after the first
    with pytest.raises(core.ParameterError):
        compare.warm_timing(lambda: None, runs=0)


def test_method_timing_runs_the_method_itself() -> None:
    x = core.data.clustered(64, 16, 4, 0.1, 0, heads=1)
    params = core.budget_params("performer", 64, 16, 1 / 8)
    timing = compare.method_timing("performer", x.q, x.k, x.v, scale=5.0, seed=0, params=params, runs=3)
    assert timing.runs == 3 and timing.cold_s > 0


def test_full_export_check_refuses_what_the_server_limits_refuse(monkeypatch: pytest.MonkeyPatch) -> None:
    compare.full_export_check("performer", 256, 64, {}, with_exact=True)  # small: fits
    monkeypatch.setenv("ATTN_EXPLORER_MEMORY_LIMIT", str(200 * 2**20))
    with pytest.raises(core.ParameterError, match="largest n that fits"):
        compare.full_export_check("performer", 4096, 64, {}, with_exact=True)


def test_every_map_of_a_grid_has_the_same_width_and_no_taller_box_than_it_is_drawn_wide() -> None:
    """The presenter row drew exact 1.5x as wide as each method (the first column kept no room for its labels, the
    others did) and left white bands above and below maps narrower than their 230 px box."""
    from ui.figures import GRID_WIDTH_PX, GridCell, heatmap_grid

    z = np.eye(16)
    for one_bar in (False, True):
        fig = heatmap_grid([[GridCell(t, z, zmax=0.0) for t in "abcde"]], columns=5, map_px=230, one_colour_bar=one_bar)
        widths = [fig.layout[f"xaxis{k}"].domain[1] - fig.layout[f"xaxis{k}"].domain[0] for k in ("", 2, 3, 4, 5)]
        assert max(widths) - min(widths) < 1e-9, widths
        map_px = (fig.layout.yaxis.domain[1] - fig.layout.yaxis.domain[0]) * (fig.layout.height - 10)
        assert map_px == pytest.approx(min(230, int(widths[0] * GRID_WIDTH_PX)), abs=1), (one_bar, map_px)


def test_a_row_on_one_colour_range_shares_one_colour_bar_and_its_maps_are_wider() -> None:
    from ui.figures import GridCell, heatmap_grid

    z = np.random.default_rng(0).random((16, 16))
    shared = heatmap_grid([[GridCell(t, z, zmax=0.0, log=True) for t in "abcde"]], columns=5, one_colour_bar=True)
    own = heatmap_grid([[GridCell(t, z, zmax=0.0, log=True) for t in "abcde"]], columns=5)
    assert [bool(t.showscale) for t in shared.data] == [False, False, False, False, True]
    assert all(t.showscale for t in own.data)
    last_map = shared.layout.xaxis5.domain[1]
    assert last_map < shared.data[-1].colorbar.x < 1  # right of the last map
    width = lambda f: f.layout.xaxis2.domain[1] - f.layout.xaxis2.domain[0]  # noqa: E731
    assert width(shared) > 1.5 * width(own)
    # one column labels the query positions; the others have the same ones
    assert shared.layout.yaxis.showticklabels is None
    assert [shared.layout[f"yaxis{k}"].showticklabels for k in (2, 3, 4, 5)] == [False] * 4


def test_the_presenter_row_shares_a_bar_only_on_one_colour_range_and_its_caption_says_what_the_numbers_are() -> None:
    maps = {"Exact softmax": np.eye(8), "Performer (FAVOR+)": np.eye(8)}
    titles = {"Performer (FAVOR+)": figs.row_title("Performer (FAVOR+)", 0.815)}
    assert sum(bool(t.showscale) for t in figs.maps_row(maps, titles, 1, True, -1.0).data) == 1
    assert all(t.showscale for t in figs.maps_row(maps, titles, 1, True, None).data)
    said = figs.maps_row_caption(0, 4, 512, shared_colour=True, show_errors=True)
    assert "relative error" in said and "one colour range" in said and "4 × 4 block of the 512 × 512" in said
    hidden = figs.maps_row_caption(0, 1, 64, shared_colour=False, show_errors=False)
    assert "error" not in hidden and "block" not in hidden and "own colours" in hidden


def test_the_presenter_copy_keeps_no_empty_title_band_over_a_figure_without_a_title() -> None:
    from ui.figures import PRESENTER_FONT, GridCell, heatmap, heatmap_grid, presenter_figure

    grid = heatmap_grid([[GridCell("a", np.eye(8))]], columns=1)
    assert presenter_figure(grid).layout.margin.t == grid.layout.margin.t
    titled = heatmap(np.eye(8), "Exact")
    assert presenter_figure(titled).layout.margin.t > titled.layout.margin.t
    # a legend over subplots titled by annotations (Inside a model): room for the legend and the titles, none for a
    # figure title that is not there
    from plotly.subplots import make_subplots

    untitled = make_subplots(rows=1, cols=2, subplot_titles=("left", "right"))
    untitled.add_scatter(x=[1, 2], y=[1, 2], name="Performer (FAVOR+)", row=1, col=1)
    titled_too = go.Figure(untitled).update_layout(title="A title")
    gap = presenter_figure(titled_too).layout.margin.t - presenter_figure(untitled).layout.margin.t
    assert gap == 2 * PRESENTER_FONT  # the title pinned over the legend: two lines of its size, no more


def test_presenter_view_moves_a_short_legend_above_the_chart_and_leaves_a_long_one_below() -> None:
    """Scaling's and Error vs cost's legends (ten and nine long entries) moved above their charts filled a 1280 x 720
    projector's first screen: the plots started below it."""
    from ui.figures import PRESENTER_FONT, PRESENTER_LEGEND_ROWS, presenter_figure

    def chart(names: list[str]) -> go.Figure:
        fig = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name=name) for name in names])
        return fig.update_layout(title="A chart", legend={"orientation": "h", "y": -0.2, "yanchor": "top"})

    short = presenter_figure(chart(["LSH sparse (Reformer/SMYRF)", "Performer (FAVOR+)", "Scatterbrain"]))
    assert short.layout.legend.y == 1.0 and short.layout.legend.yanchor == "bottom"
    long_names = [f"Method {k} (family): FLOPs at GEMM rate, measured" for k in range(2 * PRESENTER_LEGEND_ROWS + 2)]
    long = presenter_figure(chart(long_names))
    assert long.layout.legend.y == -0.2 and long.layout.legend.yanchor == "top"
    assert long.layout.margin.t == round(PRESENTER_FONT * 3.2)  # the title's room, no legend's


def test_a_note_inside_the_plot_gets_no_room_of_a_subplot_title_over_it() -> None:
    """Error vs entropy's line labels ("crossover H ≈ 4.73") are annotations inside the plot; counted as subplot
    titles, they left a blank band of about 50 px between the title and the legend above the chart on a projector."""
    from plotly.subplots import make_subplots

    from ui.figures import PRESENTER_FONT, presenter_figure

    def chart() -> go.Figure:
        fig = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name="Performer (FAVOR+)")])
        return fig.update_layout(title="A chart", legend={"orientation": "h", "y": -0.2, "yanchor": "top"})

    plain = presenter_figure(chart())
    noted = chart()
    noted.add_vline(x=1.5, annotation_text="crossover H ≈ 4.73", annotation_position="top left")
    noted.add_vline(x=1.2, annotation_text="sidebar τ = 0.2", annotation_position="bottom right")
    assert presenter_figure(noted).layout.margin.t == plain.layout.margin.t
    assert presenter_figure(noted).layout.legend.y == plain.layout.legend.y == 1.0
    titled = make_subplots(rows=1, cols=2, subplot_titles=("left", "right"))
    titled.add_scatter(x=[1, 2], y=[1, 2], name="Performer (FAVOR+)", row=1, col=1)
    titled.update_layout(title="A chart", legend={"orientation": "h", "y": -0.2, "yanchor": "top"})
    big = presenter_figure(titled)
    assert big.layout.margin.t == plain.layout.margin.t + round(1.4 * PRESENTER_FONT)
    assert big.layout.legend.y > 1.0  # over the subplot titles


def test_the_title_over_a_legend_keeps_its_full_room_where_the_legend_may_take_a_row_more() -> None:
    """Kernels' seven entries, counted as three rows of columns, drew four: with the title's room cut to two lines
    its top row would sit on the title. A one-row legend that fits, or one counted entry by entry, needs no more."""
    from ui.figures import PRESENTER_FONT, legend_rows, presenter_figure

    names = ["positive iid (measured)", "positive orthogonal (measured)", "trig iid (measured)",
             "trig orthogonal (measured)", "positive: Lemma 2", "positive orthogonal: ORF bound",
             "trig: Lemma 2"]  # fmt: skip
    rows = legend_rows(names, PRESENTER_FONT)
    fig = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name=name) for name in names])
    fig.update_layout(title="Kernel MSE against m", legend={"orientation": "h", "y": -0.2, "yanchor": "top"})
    big = presenter_figure(fig)
    assert big.layout.legend.yanchor == "bottom"  # above the chart
    size = PRESENTER_FONT
    assert big.layout.margin.t == round(round(size * 3.2) + size * 0.6 + rows * size * 1.9)  # the full title room
    one = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name=name) for name in names[:3]])
    one.update_layout(title="Kernel MSE against m", legend={"orientation": "h", "y": -0.2, "yanchor": "top"})
    assert presenter_figure(one).layout.margin.t == round(2 * size + size * 0.6 + 1 * size * 1.9)  # one row fits


def test_a_legend_of_grouped_entries_wraps_entry_by_entry_and_one_of_ungrouped_entries_in_columns() -> None:
    """plotly.js lays a wrapped legend out in columns as wide as its longest entry unless every entry has a legend
    group; then each entry is as wide as its own name. Counted as columns, Error vs cost's grouped legend took a row
    more than it drew, a blank band over the panels on a projector."""
    from ui.figures import legend_rows

    names = ["Performer", "LSH sparse", "Scatterbrain", "Nystrom", "Linformer", "Local window", "Pareto front",
             "Exact softmax (error 0)"]  # fmt: skip
    assert legend_rows(names, 20) == 3  # three columns of the longest's width
    assert legend_rows(names, 20, grouped=True) == 2  # six short names, then two
    assert legend_rows([], 20) == 0 and legend_rows(["one"], 20, grouped=True) == 1
    assert legend_rows(["x" * 80] * 3, 20, grouped=True) == 3  # an entry wider than a row still takes its own


def test_a_presenter_chart_of_curves_fits_under_the_title_and_maps_keep_their_height() -> None:
    """At 1280 x 720 a chart taller than PRESENTER_CHART_PX ran past the first screen (Error vs cost's x axes at
    about 930 px). A map grid stays as drawn, square, and a chart whose long legend stays below keeps its room."""
    import plotly.graph_objects as go

    from ui.figures import PRESENTER_CHART_PX, GridCell, heatmap_grid, presenter_figure

    tall = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name="a"), layout={"height": 624})
    short = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name="a"), layout={"height": 400})
    assert presenter_figure(tall).layout.height == PRESENTER_CHART_PX < round(624 * 1.25)
    assert presenter_figure(short).layout.height == 500  # enlarged as its text is, still under the cap
    assert presenter_figure(go.Figure(go.Scatter(x=[1], y=[1]))).layout.height is None  # Plotly's 450 stays
    long_legend = go.Figure(
        [go.Scatter(x=[1, 2], y=[3, 4], name=f"a measured curve with a long name, number {i}") for i in range(12)],
        layout={"height": 624},
    )
    assert presenter_figure(long_legend).layout.height == round(624 * 1.25)  # its legend stays below, in its room
    grid = heatmap_grid([[GridCell("m", np.eye(8))], [GridCell("e", np.eye(8))]], columns=1)
    assert grid.layout.height is not None
    assert presenter_figure(grid).layout.height == round(grid.layout.height * 1.25)
