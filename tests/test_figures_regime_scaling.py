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


def test_winner_map_marks_exactly_the_cells_within_noise() -> None:
    view = _view()
    winner = np.zeros((5, 8), dtype=int)
    within = np.zeros((5, 8), dtype=bool)
    within[1, 2] = within[4, 7] = True
    fig = regime_figs.winner_figure(view, ["sparse", "low_rank", "sparse_low_rank"], winner, within, seeds=3)
    overlay = fig.data[1]
    z = np.array(overlay.z, dtype=float)
    assert np.array_equal(~np.isnan(z), within)
    assert overlay.hoverinfo == "skip"
    crosses = fig.data[2]
    assert sorted(zip(crosses.y, crosses.x, strict=True)) == sorted(
        (view.spreads[i], np.log10(view.betas)[j]) for i, j in [(1, 2), (4, 7)]
    )
    legend = [t.name for t in fig.data if t.type == "scatter" and t.showlegend is not False]
    assert any("within noise" in name and "3 seeds" in name for name in legend), legend
    assert all(len(name) <= 50 for name in legend), legend  # fits a half-width column at 1280 px
    assert any(name == "sidebar (β, σ)" for name in legend)
    assert list(fig.data[0].colorbar.ticktext) == ["sparse", "low rank", "sparse + low rank"]


def test_boundaries_are_dashed_lines_named_in_the_legend_not_text_in_the_plot() -> None:
    fig = regime_figs.gain_figure(_view(), np.zeros((5, 8)))
    assert not fig.layout.annotations  # no text that could collide
    lines = [t for t in fig.data if t.type == "scatter" and t.mode == "lines"]
    assert [t.name for t in lines] == ["β ≈ ln n / ln d = 1.30", "β ≈ ln n = 5.50"]
    assert lines[0].line.dash != lines[1].line.dash
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0  # the legend sits below the plot
    outside = regime_figs.MapView(np.array([10.0, 20.0]), np.array([0.1, 0.2]), np.full((2, 2), ""), [(1.3, "x")])
    assert not [t for t in regime_figs.gain_figure(outside, np.zeros((2, 2))).data if t.type == "scatter"]


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


# ------------------------------------------------------------------ scaling

from core import scaling_tables  # noqa: E402
from core.profiling import ScalingPoint  # noqa: E402
from ui.figures import scaling as scaling_figs  # noqa: E402


def _points() -> list[ScalingPoint]:
    out = []
    for method, power in (("exact", 2), ("performer", 1)):
        for n in (256, 1024, 4096):
            out.append(
                ScalingPoint(
                    method,
                    n,
                    {},
                    seconds=1e-6 * n**power,
                    peak_bytes=4.0 * n**power,
                    model_flops=10.0 * n**power,
                    model_bytes=4.0 * n**power,
                )
            )
    out.append(ScalingPoint("performer", 16384, {}, status="stopped: over the time limit"))
    out.append(ScalingPoint("exact", 16384, {}, status="stopped: earlier size stopped"))
    return out


def test_measured_series_fit_the_slopes_and_skip_stopped_sizes() -> None:
    series = scaling_tables.measured_series(_points(), ["exact", "performer", "lsh"], gemm_flops=1e10)
    assert [s.method for s in series] == ["exact", "performer"]  # lsh has no rows
    exact, performer = series
    assert exact.ns == [256, 1024, 4096]
    assert abs(exact.slope - 2) < 1e-9 and abs(performer.slope - 1) < 1e-9
    assert abs(performer.model_slope - 1) < 1e-9
    assert performer.model_seconds[0] == 10.0 * 256 / 1e10
    assert [p.n for p in scaling_tables.stops(_points())] == [16384]
    table = scaling_tables.slopes_table(series)
    assert [row["largest n"] for row in table] == [4096, 4096]


def test_params_text_lists_a_methods_parameters_on_one_line() -> None:
    assert scaling_tables.params_text({"features": 64, "orthogonal": True}) == "features=64, orthogonal=True"
    assert scaling_tables.params_text({}) == ""


def test_server_limits_lower_the_knobs_with_notices() -> None:
    point, total, memory, notices = scaling_tables.fit_server_limits(30, 300, 4096, job_s=60, server_mib=1024)
    assert (point, total, memory) == (15, 15, 1024) and len(notices) == 3
    assert scaling_tables.fit_server_limits(5, 30, 1024, job_s=60, server_mib=4096)[3] == []


def test_scaling_figures_use_decade_log_axes_and_a_legend_below() -> None:
    series = scaling_tables.measured_series(_points(), ["exact", "performer"], gemm_flops=1e10)
    colours = {"exact": "#000000", "performer": "#0072B2"}
    for fig in (scaling_figs.time_figure(series, colours), scaling_figs.memory_figure(series, colours)):
        for axis in (fig.layout.xaxis, fig.layout.yaxis):
            # Every decade labelled, or two round numbers at least where the data spans under two decades.
            assert axis.type == "log" and axis.exponentformat == "power"
            assert axis.dtick == 1 or len(axis.tickvals) >= 2
        assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0
        assert not fig.layout.annotations  # slopes are in the legend, not in labels at the line ends
        assert fig.layout.height > scaling_figs.BASE_HEIGHT  # room for the legend rows
    names = [t.name for t in scaling_figs.time_figure(series, colours).data]
    assert "Exact softmax (slope 2.00)" in names and "Performer (FAVOR+): FLOPs at GEMM rate" in names


def test_committed_tables_become_dotted_series_named_by_device(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    payload = {
        "machine": {"device": "cpu", "device_name": "Test CPU", "threads": 2},
        "rows": [
            {"entry": "sdpa", "n": n, "status": "ok", "time_s": 1e-6 * n * n, "peak_mib": n / 100} for n in (1024, 2048)
        ]
        + [{"entry": "lsh", "n": 1024, "status": "failed", "time_s": 1.0, "peak_mib": 1.0}],
    }
    (tmp_path / "scaling_cpu.json").write_text(json.dumps(payload))
    (tmp_path / "scaling_broken.json").write_text("{")
    loaded = scaling_tables.load_committed(tmp_path)
    assert list(loaded) == ["cpu: Test CPU (2 threads)"]
    (series,) = scaling_tables.committed_series(loaded["cpu: Test CPU (2 threads)"], ["lsh"])
    assert series.committed and series.label == "sdpa [cpu: Test CPU, 2 threads]" and abs(series.slope - 2) < 1e-9
    other = scaling_tables.Series(**{**vars(series), "source": "cpu: Test CPU, 1 threads"})
    fig = scaling_figs.time_figure([series, other], {"exact": "#123456"})
    assert fig.data[0].line.dash == "dot" and "cpu" in fig.data[0].name
    assert fig.data[0].line.color == "#123456"  # sdpa is drawn in exact attention's colour
    assert fig.data[1].line.dash != fig.data[0].line.dash  # one dash and marker per committed table


def test_one_committed_table_alone_names_its_curves_by_method_and_two_tables_by_table_too() -> None:
    """The page's caption names the one committed table shown; its device and threads repeated in every entry
    ("sdpa [cpu: AMD EPYC, 1 threads] (slope 1.99)") made five legend rows on a projector. Two tables, or a table
    beside a measurement, still need the table in each name."""
    where = "cpu: Test CPU, 2 threads"

    def committed(entry: str, source: str = where) -> scaling_tables.Series:
        ns = [1024, 2048]
        return scaling_tables.Series(entry, f"{entry} [{source}]", ns, [1e-6 * n * n for n in ns], [1.0, 2.0],
                                     slope=2.0, committed=True, source=source)  # fmt: skip

    alone = scaling_figs.time_figure([committed("sdpa"), committed("performer")], {})
    names = [t.name for t in alone.data]
    assert names == ["Exact softmax (torch SDPA) (slope 2.00)", "Performer (FAVOR+) (slope 2.00)"]
    memory = scaling_figs.memory_figure([committed("sdpa"), committed("lsh")], {})
    assert [t.name for t in memory.data] == ["Exact softmax (torch SDPA)", "LSH sparse (Reformer/SMYRF)"]
    two = scaling_figs.time_figure([committed("sdpa"), committed("sdpa", "cpu: Test CPU, 1 threads")], {})
    assert [t.name for t in two.data] == [
        "sdpa [cpu: Test CPU, 2 threads] (slope 2.00)", "sdpa [cpu: Test CPU, 1 threads] (slope 2.00)"
    ]  # fmt: skip
    live = scaling_tables.measured_series(_points(), ["performer"], gemm_flops=1e10)
    beside = scaling_figs.time_figure([*live, committed("sdpa")], {})
    assert "sdpa [cpu: Test CPU, 2 threads] (slope 2.00)" in [t.name for t in beside.data]
