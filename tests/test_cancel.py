"""Cancellation: the token, its deadline, and every long engine loop stopping soon after a cancel."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

import core
from core import cancel, kernels, profiling, rank_heads, sweeps
from core.approximators.learned_kernel import fit_kernel
from core.cancel import Cancelled, CancelToken

STOP_BOUND_S = 2.0  # a cancelled loop finishes its current step, then stops; steps here take well under a second


def run_and_cancel(
    work: Callable[[CancelToken], Any], *, after: float = 0.3, ready: threading.Event | None = None
) -> tuple[BaseException | None, float]:
    """Run ``work(token)`` in a thread with the token ambient, cancel it ``after`` s after ``ready`` is set (by
    the work, once its loop runs; default: at thread start); returns (what it raised, seconds to stop)."""
    token = CancelToken()
    outcome: dict[str, BaseException | None] = {"error": None}
    started = ready if ready is not None else threading.Event()

    def target() -> None:
        if ready is None:
            started.set()
        try:
            with cancel.active(token):
                work(token)
        except BaseException as exc:  # the test inspects what the loop raised
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    assert started.wait(60)
    time.sleep(after)
    assert thread.is_alive(), "the work finished before the cancel: make it longer"
    cancelled_at = time.perf_counter()
    token.cancel("the user pressed Cancel")
    thread.join(timeout=30)
    assert not thread.is_alive()
    return outcome["error"], time.perf_counter() - cancelled_at


def assert_stopped(
    work: Callable[[CancelToken], Any], after: float = 0.3, ready: threading.Event | None = None
) -> None:
    error, seconds = run_and_cancel(work, after=after, ready=ready)
    assert isinstance(error, Cancelled), f"expected Cancelled, got {error!r}"
    assert "the user pressed Cancel" in str(error)
    assert seconds < STOP_BOUND_S, f"took {seconds:.2f} s to stop"


# ------------------------------------------------------------------ the token


def test_token_cancel_and_check() -> None:
    token = CancelToken()
    token.check()
    assert not token.cancelled and token.reason is None
    token.cancel("first")
    token.cancel("second")  # the first reason wins
    assert token.cancelled and token.reason == "first"
    with pytest.raises(Cancelled, match="first"):
        token.check()


def test_token_deadline_names_the_setting() -> None:
    token = CancelToken(deadline=0.2)
    token.check()
    time.sleep(0.3)
    with pytest.raises(Cancelled, match="ATTN_EXPLORER_JOB_SECONDS"):
        token.check()
    assert "0.2 s" in (token.reason or "")


def test_token_start_restarts_the_deadline_clock() -> None:
    token = CancelToken(deadline=0.3)
    time.sleep(0.35)
    token.start()
    token.check()  # counted from start(), not from creation
    assert token.elapsed < 0.3


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_token_rejects_bad_deadlines(bad: float) -> None:
    with pytest.raises(ValueError, match="deadline"):
        CancelToken(deadline=bad)


def test_cancel_from_another_thread_wakes_wait() -> None:
    token = CancelToken()
    threading.Timer(0.1, token.cancel, args=("stop",)).start()
    start = time.perf_counter()
    assert token.wait(10)
    assert time.perf_counter() - start < 2


def test_ambient_token_is_per_thread() -> None:
    token = CancelToken()
    token.cancel("here")
    seen: list[CancelToken | None] = []
    with cancel.active(token):
        with pytest.raises(Cancelled):
            cancel.check()
        other = threading.Thread(target=lambda: seen.append(cancel.current()))
        other.start()
        other.join()
    assert seen == [None]
    cancel.check()  # no ambient token outside the block


def test_checking_progress_callback_raises() -> None:
    token = CancelToken()
    calls: list[float] = []
    report = cancel.checking(lambda f, label: calls.append(f), token)
    assert report is not None
    report(0.5, "half")
    token.cancel("stop")
    with pytest.raises(Cancelled):
        report(0.6, "more")
    assert calls == [0.5]


# ------------------------------------------------------------------ the engine's long loops


def test_regime_map_stops() -> None:
    betas = [0.5 * 1.2**i for i in range(20)]
    spreads = [0.05 * (i + 1) for i in range(20)]

    def work(token: CancelToken) -> None:
        sweeps.regime_map(n=256, d=32, clusters=8, betas=betas, spreads=spreads, cancel=token)

    assert_stopped(work)


def test_error_vs_entropy_stops() -> None:
    x = core.data.clustered(256, 32, 16, 0.3, 0)
    taus = [0.05 * 1.5**i for i in range(10)]

    def work(token: CancelToken) -> None:
        for _ in range(1000):
            sweeps.error_vs_entropy(x.q, x.k, x.v, ["performer", "lsh", "scatterbrain"], taus=taus, cancel=token)

    assert_stopped(work)


def test_rank_heads_training_stops() -> None:
    training = threading.Event()  # set at the first evaluation: the held-out set is built before the loop

    def work(token: CancelToken) -> None:
        rank_heads.train(
            16, 4, 2, 4, steps=20_000, device="cpu", cancel=token, test_samples=256, eval_every=5,
            progress=lambda step, steps: training.set(),
        )  # fmt: skip

    assert_stopped(work, ready=training)


def test_rank_heads_grid_stops_through_the_ambient_token() -> None:
    def work(token: CancelToken) -> None:
        rank_heads.train_grid(
            16, 4, [1, 2, 4], [1, 2, 4], steps=5_000, device="cpu", test_samples=256, eval_every=5,
        )  # fmt: skip

    assert_stopped(work, after=1.0)


def test_learned_kernel_fit_stops() -> None:
    x = core.data.clustered(256, 16, 8, 0.3, 0, heads=2)

    def work(token: CancelToken) -> None:
        fit_kernel(
            x.q,
            x.k,
            torch.full((2, 1, 1), 0.5),
            features=16,
            steps=20_000,
            generator=lambda stream: torch.Generator().manual_seed(stream),
            cancel=token,
        )

    assert_stopped(work)


def test_learned_kernel_method_stops_through_the_ambient_token() -> None:
    x = core.data.clustered(256, 16, 8, 0.3, 0)

    def work(token: CancelToken) -> None:
        for seed in range(50):
            core.approximate("learned_kernel", x.q, x.k, x.v, scale=0.5, seed=seed, features=16, steps=2000)

    assert_stopped(work)


def test_robust_pca_stops() -> None:
    x = core.data.clustered(512, 32, 16, 0.3, 0, heads=8)

    def work(token: CancelToken) -> None:
        for _ in range(10):
            core.approximate("rpca", x.q, x.k, x.v, scale=2.0, seed=0, iterations=500, top_k=8, rank=8)

    assert_stopped(work)


def test_kernel_monte_carlo_stops() -> None:
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, generator=generator, dtype=torch.float64), torch.randn(16, generator=generator).double()

    def work(token: CancelToken) -> None:
        for _ in range(1000):
            kernels.kernel_mse_monte_carlo(x * 0.2, y * 0.2, 16, "positive", False, draws=20_000, seed=0)

    assert_stopped(work)


def test_scaling_run_stops() -> None:
    def work(token: CancelToken) -> None:
        for _ in range(50):
            profiling.scaling_run(
                ["exact", "performer", "local"], [256, 512, 1024], repeats=5, total_limit_s=600, cancel=token
            )

    assert_stopped(work)


def test_deadline_stops_training_with_a_clear_message() -> None:
    token = CancelToken(deadline=0.5)
    start = time.perf_counter()
    with pytest.raises(Cancelled, match="ATTN_EXPLORER_JOB_SECONDS"):
        rank_heads.train(16, 4, 2, 4, steps=20_000, device="cpu", cancel=token, test_samples=256)
    assert time.perf_counter() - start < 0.5 + STOP_BOUND_S


def test_without_a_token_loops_run_to_the_end() -> None:
    result = rank_heads.train(8, 2, 1, 1, steps=20, device="cpu")
    assert len(result.train_loss) == 20


def test_start_can_set_the_deadline() -> None:
    token = CancelToken()
    time.sleep(0.3)
    token.start(0.2)  # no deadline while waiting; 0.2 s from now on
    token.check()
    time.sleep(0.3)
    with pytest.raises(Cancelled, match="ATTN_EXPLORER_JOB_SECONDS"):
        token.check()
    with pytest.raises(ValueError, match="deadline"):
        token.start(-1)


def test_parent_and_watch_cancel_a_token() -> None:
    parent = CancelToken()
    child = CancelToken(parent=parent)
    assert not child.cancelled
    parent.cancel("the tab closed")
    with pytest.raises(Cancelled, match="the tab closed"):
        child.check()
    stop: list[str] = []
    watched = CancelToken(watch=lambda: stop[0] if stop else None)
    watched.check()
    stop.append("told to stop")
    with pytest.raises(Cancelled, match="told to stop"):
        watched.check()


def test_the_fallback_token_stops_loops_without_an_ambient_token() -> None:
    token = CancelToken()
    installed = cancel._fallback  # the app's (ui.jobs.page_token) when ui was imported: put back afterwards
    cancel.set_fallback(lambda: token)
    try:
        x = core.data.clustered(n=64, d=8, clusters=4, spread=0.3, seed=0)
        sweeps.error_vs_entropy(x.q, x.k, x.v, ["performer"], taus=[1.0])  # runs while not cancelled
        token.cancel("the page run was stopped")
        with pytest.raises(Cancelled, match="the page run was stopped"):
            sweeps.error_vs_entropy(x.q, x.k, x.v, ["performer"], taus=[1.0])
        with pytest.raises(Cancelled):  # every method call checks, so page loops of their own stop too
            core.approximate("performer", x.q, x.k, x.v)
        with cancel.active(CancelToken()):  # an ambient token (a job's) takes precedence
            core.approximate("performer", x.q, x.k, x.v)
    finally:
        cancel.set_fallback(installed)


def test_kernel_entry_bins_and_trig_fractions_stop() -> None:
    x = core.data.gaussian(n=256, d=16, seed=0, heads=2)
    error, seconds = run_and_cancel(lambda t: kernels.entry_error_by_size(x.q, x.k, 1.0, 256, redraws=64))
    assert isinstance(error, Cancelled) and seconds < STOP_BOUND_S
    error, seconds = run_and_cancel(
        lambda t: kernels.trig_nonpositive_fraction(x.q, x.k, [1.0] * 13, [256] * 64, redraws=64)
    )
    assert isinstance(error, Cancelled) and seconds < STOP_BOUND_S
