"""Pure builders of the Compare and Error vs entropy pages (ui/figures/compare.py), tested without a server;
and the engine helpers behind them (core/compare.py): crossing, warm timing, the export limit check."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import core  # noqa: E402
from core import compare  # noqa: E402
from ui.figures import compare as figs  # noqa: E402


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


def test_method_grid_draws_each_method_over_its_error_with_its_own_axes_and_colour_bar() -> None:
    from ui.figures import error_bound, heatmap

    rng = np.random.default_rng(1)
    maps = [
        figs.MethodMaps(f"M{i}", rng.random((32, 32)), rng.normal(size=(32, 32)) * (i + 1), 2, f"error {i}")
        for i in range(4)
    ]
    fig = figs.method_grid(maps, log_colour=True)
    assert len(fig.data) == 8 and all(t.type == "heatmap" for t in fig.data)
    axes = [(t.xaxis, t.yaxis) for t in fig.data]
    assert len(set(axes)) == 8, "every map on its own pair of axes"
    titles = [a.text for a in fig.layout.annotations]  # one per map, in the order of the traces
    assert sorted(titles) == sorted([f"M{i}" for i in range(4)] + [f"error {i}" for i in range(4)])

    def axes_of(trace: object) -> tuple[object, object]:
        x, y = trace.xaxis, trace.yaxis  # type: ignore[attr-defined]
        return fig.layout[f"xaxis{x[1:]}"], fig.layout[f"yaxis{y[1:]}"]

    for i, method in enumerate(maps):
        attention, error = fig.data[titles.index(f"M{i}")], fig.data[titles.index(f"error {i}")]
        # the same numbers and colours as the single heatmap of that map
        single = heatmap(method.attention, log=True, factor=2).data[0]
        np.testing.assert_array_equal(attention.z, single.z)
        assert attention.zmax == single.zmax and list(attention.x) == list(np.arange(32) * 2)
        assert error.zmax == pytest.approx(error_bound(method.error)) and error.zmin == -error.zmax
        assert f"M{i}" in error.hovertemplate and "error" in error.hovertemplate
        # the attention map sits above its error map, in the same column; the colour bar right of the map
        (xa, ya), (xe, ye) = axes_of(attention), axes_of(error)
        assert tuple(xa.domain) == tuple(xe.domain) and ya.domain[0] > ye.domain[1]
        assert xa.domain[1] < attention.colorbar.x < (i % 3 + 1) / 3
        assert ye.domain[0] < error.colorbar.y < ye.domain[1]
    # a fourth method starts a second row of maps: four rows of heatmaps in all
    assert len({tuple(fig.layout[f"yaxis{k}"].domain) for k in ["", *range(2, 9)]}) == 4


def test_method_grid_keeps_one_method_at_a_readable_width() -> None:
    one = figs.method_grid([figs.MethodMaps("A", np.ones((8, 8)), np.zeros((8, 8)), 1)], log_colour=False)
    assert one.layout.xaxis.domain[1] <= 1 / 3
    assert [a.text for a in one.layout.annotations] == ["A", "A − exact"]


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
