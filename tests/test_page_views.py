"""The pages' last Streamlit-cached results, now views of the service (issue 41): the scrubber's frames, VCC's run,
Fig. 4's measurement and Compare's warm timings go through ``service.views`` (the shared cache, ``service.placement``);
a hardware rate is a process-local memo; a timing says which machine measured it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core import compare, scaling_tables, sparse_lowrank, vcc_study
from core import device as core_device
from core.profiling import ScalingPoint
from service import compute, dask_client, placement, result_cache, views
from ui import scrubber, timing
from ui.figures import scaling as scaling_figs

SPEC = views.InputSpec("clustered", 64, 16, 2, 4, 0.1, 3)


def roundtrip(value: Any) -> Any:
    """What another process reads back from the shared cache."""
    return result_cache.decode(result_cache.encode(value))


# ------------------------------------------------------------------ Fig. 4: a view


def test_fig4_view_computes_the_engine_measurement_and_survives_the_shared_cache() -> None:
    view = views.Fig4Measure(8, 16, 2, 8, 2, 32, False, 4)
    direct = sparse_lowrank.fig4_measure(8, 16, 2, 8, 2, 32, False, 4)
    got = views.cached(view)
    assert set(got) == set(direct)
    for name in direct:
        np.testing.assert_array_equal(got[name], direct[name])
    assert views.is_cached(view)
    again = roundtrip(got)
    for name in direct:
        np.testing.assert_array_equal(again[name], direct[name])
    other = views.cached(view.replace(seed=5))  # the seed is in the key: a new measurement
    assert not np.array_equal(other["sq_error_performer"], direct["sq_error_performer"])


# ------------------------------------------------------------------ VCC and the scrubber: their results are cacheable


def test_vcc_view_through_the_service_equals_the_direct_run() -> None:
    view = views.VccView(SPEC, 2.0, views.params_key({"vip": 4}), 0, 1)
    direct = view.compute()
    got = views.run(view, vcc_study.sweep_seconds(1, SPEC.heads, SPEC.n), title="VCC")
    assert isinstance(got, vcc_study.VccView)
    assert views.is_cached(view)
    back = roundtrip(got)
    assert back.vip == direct.vip and back.memory == direct.memory and back.info == direct.info
    np.testing.assert_array_equal(back.attention, direct.attention)
    np.testing.assert_array_equal(back.all_error, direct.all_error)
    assert back.compressed_length(1) == direct.compressed_length(1)


def test_the_scrubber_frames_come_through_the_shared_cache() -> None:
    view = views.TemperatureScrub(SPEC, 0, "cpu", ("performer",), (), (0.5, 2.0, 8.0), 0, 16, False)
    got = views.run(view, 0.1, title="Precomputing every temperature")
    assert views.is_cached(view)
    back = roundtrip(got)
    np.testing.assert_array_equal(back.taus, got.taus)
    np.testing.assert_array_equal(back.attention["performer"], got.attention["performer"])
    assert back.payload_bytes() == got.payload_bytes()


# ------------------------------------------------------------------ warm timings: measured where the run computes

GPU_WORKER = placement.WorkerDevices("tcp://10.0.0.2:1", "gpu-1", "gpu-host", 1, ("auto", "cpu", "cuda"), gpu=True)


@pytest.fixture
def sent_to_gpu_worker(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """A scheduler with one GPU worker (GPU_WORKER) and no CUDA here: what is sent to it, as (view, placement); the
    stand-in worker answers None, and nothing computes here."""
    monkeypatch.setattr(core_device, "cuda_available", lambda: False)
    monkeypatch.setattr(placement, "worker_devices", lambda runner=None: [GPU_WORKER])
    monkeypatch.setattr(dask_client, "runner", lambda: dask_client.ClusterRunner("tcp://10.0.0.9:1"))
    sent: list[tuple[Any, Any]] = []
    monkeypatch.setattr(placement, "run_remote", lambda view, where: sent.append((view, where)) or None)
    return sent


def test_a_warm_timing_is_a_median_of_several_runs_here_keyed_by_the_host() -> None:
    run = views.MethodRun.of(SPEC, 2.0, "cpu", "performer", {"features": 8}, 0)
    got = timing.warm_timing(run)
    assert isinstance(got, compare.WarmTiming) and got.runs > 1 and got.median_s > 0
    here = views.MethodWarmTiming(run, placement.where(run).host)
    assert views.lookup(here) == got  # in the shared cache under this host's key
    assert views.lookup(here.replace(host=here.host + "-elsewhere")) is None  # never another machine's
    assert here.expire_seconds() == views.WARM_KEEP_SECONDS


def test_a_run_too_heavy_to_repeat_has_no_warm_timing() -> None:
    big = views.MethodRun.of(SPEC.replace(n=8192, heads=4), 2.0, "cpu", "performer", {}, 0)
    assert compute.method_seconds(big.inputs, big.method, big.kwargs) > 2.0
    assert views.MethodWarmTiming(big, "h").compute() is None


def test_a_warm_timing_on_a_worker_device_is_measured_and_keyed_there(
    sent_to_gpu_worker: list[tuple[Any, Any]],
) -> None:
    """With a scheduler whose worker has the chosen device, the timing view goes to that worker (like its run), and
    its key names the worker's host (the worker's report is given; nothing computes here)."""
    run = views.MethodRun.of(SPEC.replace(seed=77), 2.0, "cuda@worker", "performer", {}, 0)
    assert timing.warm_timing(run) is None  # what the stand-in worker answered
    assert len(sent_to_gpu_worker) == 1
    view, where = sent_to_gpu_worker[0]
    assert isinstance(view, views.MethodWarmTiming) and view.run == run and view.host == "gpu-host"
    assert where.remote and where.worker == GPU_WORKER.address and where.device == "cuda"


# ------------------------------------------------------------------ Sparse + low rank: the correction's summary

PARTS_NAMES = ("support_rounds", "support", "sparse", "low_rank", "naive_sum", "attention")


def test_the_correction_summary_is_a_view_of_the_pages_parts() -> None:
    run = views.MethodRun.of(SPEC.replace(seed=41), 2.0, "cpu", "scatterbrain", {"features": 16}, 0)
    parts_view = views.MethodParts(run, 1, PARTS_NAMES, True)
    got = compute.remembered(views.ScatterbrainCorrection(parts_view))
    assert isinstance(got, sparse_lowrank.CorrectionSummary) and got.features == 16
    exact = compute.exact(run.exact()).attention[1].astype(np.float64)
    whole = compute.run_method(run)  # the method's run on every head: its head 1 is the parts' attention
    assert got.sb_error == pytest.approx(np.linalg.norm(whole.attention[1] - exact) / np.linalg.norm(exact), rel=1e-5)
    parts = compute.method_parts(parts_view)
    assert got.naive_error == pytest.approx(np.linalg.norm(parts["naive_sum"] - exact) / np.linalg.norm(exact))
    assert got.omega_share == pytest.approx(parts["support"].astype(bool).mean())
    assert got.naive_error > got.sb_error  # the correction is what makes the sum better than naive
    assert views.is_cached(views.ScatterbrainCorrection(parts_view))


def test_the_correction_summary_computes_on_the_worker_with_the_pages_device(
    sent_to_gpu_worker: list[tuple[Any, Any]],
) -> None:
    run = views.MethodRun.of(SPEC.replace(seed=78), 2.0, "cuda@worker", "scatterbrain", {}, 0)
    view = views.ScatterbrainCorrection(views.MethodParts(run, 0, PARTS_NAMES, True))
    compute.remembered(view)
    assert [v for v, _ in sent_to_gpu_worker] == [view]
    where = sent_to_gpu_worker[0][1]
    assert where.remote and where.worker == GPU_WORKER.address and where.device == "cuda"


# ------------------------------------------------------------------ Scaling: the GEMM rate, and where it measured


def test_the_gemm_rate_is_measured_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def rate(device: Any, size: int = 0, repeats: int = 0, **_: Any) -> float:
        calls.append(str(device))
        return 2e9

    compute.gemm_gflops.cache_clear()
    monkeypatch.setattr(compute.profiling, "gemm_rate", rate)
    try:
        assert compute.gemm_gflops("cpu") == pytest.approx(2.0)
        assert compute.gemm_gflops("cpu") == pytest.approx(2.0)
        assert calls == ["cpu"]
    finally:
        compute.gemm_gflops.cache_clear()


def test_without_a_gemm_rate_the_time_chart_has_no_model_line() -> None:
    points = [ScalingPoint("performer", n, {}, seconds=1e-3 * n / 64, model_flops=1e6 * n) for n in (64, 128)]
    with_rate = scaling_tables.measured_series(points, ["performer"], 1e9)
    without = scaling_tables.measured_series(points, ["performer"], math.nan)
    names = [t.name for t in scaling_figs.time_figure(with_rate, {}).data]
    assert any("FLOPs at GEMM rate" in n for n in names)
    names = [t.name for t in scaling_figs.time_figure(without, {}).data]
    assert names and not any("FLOPs at GEMM rate" in n for n in names)


@pytest.fixture
def open_scaling_page(open_page: Callable[..., AppTest]) -> Callable[..., AppTest]:
    def opened(**query: str) -> AppTest:
        at = open_page("pages/8_Scaling.py", timeout=180, methods="performer", sizes=["64", "128"], **query)
        assert not at.exception, [e.value for e in at.exception]
        return at

    return opened


def test_scaling_says_it_measures_on_a_worker_and_gives_no_gemm_line_then(
    open_scaling_page: Callable[..., AppTest], monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_scaling_page()
    assert any("Measuring on **" in c.value and "worker" not in c.value for c in at.sidebar.caption)

    # With a scheduler, the service places the measurement on a cluster worker: the page says so. (The stand-in
    # placement only changes what the page reads; the job itself still computes here without a scheduler.)
    where = placement.where
    monkeypatch.setattr(
        placement,
        "where",
        lambda view, *, heavy=False, runner=None: (
            placement.Placement("a worker", "cpu", True) if heavy else where(view, heavy=heavy, runner=runner)
        ),
    )
    # The measurement says where it was made; a stand-in worker "gpu-1" on "gpu-host" measures this one.
    monkeypatch.setattr(
        placement, "computing_here", lambda device: placement.Placement("gpu-host", device, True, name="gpu-1")
    )
    at = open_scaling_page(seed="5")
    assert any("Measuring on **a cluster worker's cpu**" in c.value for c in at.sidebar.caption)
    assert any("size(s) on a cluster worker's cpu" in c.value for c in at.caption)
    next(b for b in at.button if b.label == "Measure").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Measured on **cpu on worker gpu-1 (gpu-host)**" in c.value for c in at.caption)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [trace.get("name", "") for trace in spec["data"]]
    assert any(name.startswith("Performer") for name in names), names
    assert not any("FLOPs at GEMM rate" in name for name in names), names
    assert not any("GFLOP/s" in c.value for c in at.caption)
    assert any("measured on cpu on worker gpu-1 (gpu-host)" in c.value for c in at.caption)


def test_a_scaling_measurement_made_here_says_so_and_gets_the_gemm_line(
    open_scaling_page: Callable[..., AppTest],
) -> None:
    run = views.ScalingRun(("performer",), (64,), 1, 16, 16, 1.0, 0, "cpu", 10.0, 30.0, 2048.0)
    measured = run.compute()
    assert measured.worker == "" and measured.host == placement.this_host() and measured.measured_here()
    assert measured.describe() == f"cpu in this process ({placement.this_host()})"
    assert [p.n for p in measured.points] == [64]
    # Another replica's machine (a shared cache) is not this one: no GEMM line from this server's rate.
    elsewhere = views.ScalingMeasurement(measured.points, "another-host", "", "cpu")
    assert not elsewhere.measured_here()

    at = open_scaling_page(seed="6")
    next(b for b in at.button if b.label == "Measure").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(f"Measured on **cpu in this process ({placement.this_host()})**" in c.value for c in at.caption)
    assert any("GFLOP/s" in c.value for c in at.caption)


def test_compare_scrubber_draws_its_frames_from_the_service(
    open_compare: Callable[..., AppTest], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compare's scrubber asks the service for its frames (``service.views.run``), and draws every temperature."""
    asked: list[views.View] = []
    run = views.run

    def counted(view: views.View, *args: Any, **kwargs: Any) -> Any:
        asked.append(view)
        return run(view, *args, **kwargs)

    monkeypatch.setattr(scrubber, "run_view", counted)
    at = open_compare(timeout=180, n="64", methods=["lsh", "performer"], scrub="true", tau="0.2")
    assert not at.exception, [e.value for e in at.exception]
    scrubs = [v for v in asked if isinstance(v, views.TemperatureScrub)]
    assert len(scrubs) == 1 and scrubs[0].methods == ("lsh", "performer") and len(scrubs[0].betas) == 13
    assert views.is_cached(scrubs[0])
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "frames" in json.loads(c.proto.spec))
    assert len(spec["frames"]) == 13
