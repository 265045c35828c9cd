"""Cached engine calls. Everything is keyed on scalar settings and returns numpy arrays (never tensors).

Inputs, exact attention and each method's result are cached separately, so moving one method's knob
recomputes only that method. Dense matrices above ``DISPLAY_MAX`` are block-reduced before caching.

Results are cached in the result cache only (``service.result_cache``: this process's memory layer, then the shared
disk or Redis store), never in Streamlit's caches: this module imports no Streamlit. A value served from the memory
layer is shared and read-only (copy an array before changing it).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

import core
from core import cancel as core_cancel
from core import device as core_device
from core import metrics, profiling, sparse_lowrank
from service import model_code, placement, result_cache, views
from service.downsampling import Matrix, block_factor, block_reduce
from service.scheduler import LIGHT_SECONDS, estimate_seconds, light_work

CACHE_FULL_MAX_N = 1024  # above this n, cached results keep only block-reduced matrices


@dataclass
class InputArrays:
    q: np.ndarray  # (H, n, d) float32
    k: np.ndarray
    v: np.ndarray
    labels: np.ndarray | None
    tokens: list[str] | None
    model_attention: np.ndarray | None  # the real model's own attention (H, n, n)


def remembered(view: views.View) -> Any:
    """The view's result from this process's memory layer, else the shared cache, else computed at once (light
    work), and kept in the memory layer (frozen: read-only) for every session of the process."""
    return result_cache.memory().remember(view.cache_key(), lambda: views.cached(view))[0]


@functools.lru_cache(maxsize=4)
def real_model(text: str) -> core.data.RealInputs:
    """The real model's q, k, v for every layer and head (shared, read-only). A process resource (the model's run
    on one text, tensors): kept for the last 4 texts, like a loaded model, not as a result."""
    model_code.import_in_steps()
    return core.data.real(text)


def real_token_count(text: str) -> int:
    return len(real_model(text).tokens)


def load_inputs(spec: views.InputSpec) -> InputArrays:
    """q, k, v as float32 numpy arrays (H, n, d); read-only (shared by every session of the process)."""
    return cast(InputArrays, remembered(spec))


def load_inputs_now(spec: views.InputSpec) -> InputArrays:
    if spec.source == "real":
        run = real_model(spec.text)
        return InputArrays(
            q=run.q[spec.layer].numpy().copy(),
            k=run.k[spec.layer].numpy().copy(),
            v=run.v[spec.layer].numpy().copy(),
            labels=None,
            tokens=list(run.tokens),
            model_attention=run.attentions[spec.layer].numpy().copy(),
        )
    if spec.source == "gaussian":
        x = core.data.gaussian(spec.n, spec.d, spec.seed, heads=spec.heads)
    else:
        x = core.data.clustered(spec.n, spec.d, spec.clusters, spec.spread, spec.seed, heads=spec.heads)
    labels = None if x.labels is None else x.labels.numpy()
    return InputArrays(x.q.numpy(), x.k.numpy(), x.v.numpy(), labels, None, None)


def tensors(spec: views.InputSpec, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v on ``device``: copies, so the engine may change them without touching the shared arrays."""
    arrays = load_inputs(spec)
    q, k, v = (torch.tensor(a, device=device) for a in (arrays.q, arrays.k, arrays.v))
    return q, k, v


# ------------------------------------------------------------------ downsampling


def display(a: Matrix, mode: str = "max") -> Matrix:
    """Block-reduce (..., n, n) to at most DISPLAY_MAX per side."""
    return block_reduce(a, block_factor(a.shape[-1]), mode)


def cluster_order(spec: views.InputSpec) -> np.ndarray | None:
    """The positions sorted by cluster (display only) for clustered input; None for other inputs. Read-only."""
    if spec.source != "clustered":
        return None
    full = result_cache.make_key("cluster_order", spec.key())  # memory layer only: cheap to redo from the inputs

    def order() -> np.ndarray | None:
        labels = load_inputs(spec).labels
        return None if labels is None else core.data.cluster_order(torch.tensor(labels)).numpy()

    return result_cache.memory().remember(full, order)[0]


def reorder(a: np.ndarray, order: np.ndarray) -> np.ndarray:
    """(..., n, n) with rows and columns taken in ``order``."""
    return a[..., order, :][..., order]


def reduce_in_cluster_order(
    a: np.ndarray | torch.Tensor, factor: int, mode: str, order: np.ndarray | None
) -> np.ndarray | None:
    """``a`` reordered at full resolution, then block-reduced: a reduced map cannot be sorted afterwards, since its
    blocks mix clusters. None when nothing is reduced (the page reorders the full map) or there are no clusters.
    A tensor is reordered and reduced on its device; the small result comes back as a NumPy array."""
    if factor <= 1 or order is None:
        return None
    if isinstance(a, torch.Tensor):
        index = torch.tensor(order, device=a.device)
        # one head at a time: a reordered copy of every head at n = 4096 would cost hundreds of MB
        heads = a.reshape(-1, *a.shape[-2:])
        reduced = [block_reduce(h.index_select(0, index).index_select(1, index), factor, mode) for h in heads]
        return torch.stack(reduced).reshape(*a.shape[:-2], *reduced[0].shape).cpu().numpy()
    if a.ndim > 2:
        return np.stack([reduce_in_cluster_order(h, factor, mode, order) for h in a])  # type: ignore[misc]
    return block_reduce(reorder(a, order), factor, mode)


# ------------------------------------------------------------------ exact attention


@dataclass
class ExactResult:
    attention: np.ndarray  # (H, n, n) if n <= CACHE_FULL_MAX_N else block-max reduced
    reduced: bool
    output: np.ndarray  # (H, n, dv)
    entropy: np.ndarray  # (H,) mean row entropy, nats
    seconds: float
    device: str
    # Reduced clustered input only: the attention reordered by cluster before the reduction (display only).
    attention_in_cluster_order: np.ndarray | None = None


def resolve(device_name: str) -> torch.device:
    """The torch device a view's ``device`` names (``cuda@worker``: cuda, where the worker computes it); CPU when
    absent here."""
    try:
        return core_device.resolve_device(device_name.split("@")[0])
    except core.ParameterError:
        return torch.device("cpu")


def exact(view: views.ExactAttention) -> ExactResult:
    """Exact attention through the result cache (memory layer, then the shared cache); read-only."""
    return cast(ExactResult, remembered(view))


@light_work()
def exact_now(view: views.ExactAttention) -> ExactResult:
    spec, beta = view.inputs, view.beta
    dev = resolve(view.device)
    q, k, v = tensors(spec, dev)
    start = time.perf_counter()
    result = core.approximate("exact", q, k, v, scale=beta, seed=0, causal=view.causal)
    core_device.synchronize(dev)
    seconds = time.perf_counter() - start
    attention = result.attention()
    core_cancel.check()  # at large n each step takes seconds: a closed tab stops the page run between them
    entropy = metrics.mean_row_entropy(attention).cpu().numpy()
    reduced = spec.n > CACHE_FULL_MAX_N
    in_order = None
    if reduced:  # reduced where the matrix lives (a GPU's copy to the host is then small)
        core_cancel.check()
        in_order = reduce_in_cluster_order(attention.float(), block_factor(spec.n), "max", cluster_order(spec))
        core_cancel.check()
        dense = display(attention.float()).cpu().numpy()
    else:
        dense = attention.float().cpu().numpy()
    output = result.output.float().cpu().numpy()
    return ExactResult(dense, reduced, output, entropy, seconds, dev.type, in_order)


# ------------------------------------------------------------------ one method


@dataclass
class MethodResult:
    method: str
    params: dict[str, Any]
    attention: np.ndarray  # (H, r, r): block-max reduced to <= DISPLAY_MAX
    error: np.ndarray  # (H, r, r): approx - exact, reduced keeping the signed largest |error|
    factor: int  # block size of the reduction (1 = full resolution)
    metrics: dict[str, np.ndarray]  # per head: attention_error, output_error, row_kl, max_abs_error
    memory: int  # scalars stored (whole batch)
    flops: int
    seconds: float
    device: str
    info: dict[str, Any]
    error_message: str | None = None
    # Reduced clustered input only: "attention" and "error" reordered by cluster before the reduction (display only).
    in_cluster_order: dict[str, np.ndarray] | None = None


def _small_info(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if isinstance(v, (int, float, str, bool))}


def run_method(run: views.MethodRun) -> MethodResult:
    """One method on all heads; errors are measured against exact attention at the same beta.

    Served from this process's memory layer (one frozen copy shared by every session), else from the shared disk
    cache, else computed. The value is read-only: copy an array before changing it."""
    return _remembered_run(run)[0]


def _remembered_run(run: views.MethodRun) -> tuple[MethodResult, bool]:
    """(result, True when this process's memory layer had it)."""
    full = run.cache_key()

    def load_or_run() -> MethodResult:
        hit = result_cache.get_key(full)
        if hit is not None:
            return cast(MethodResult, hit)
        with light_work():
            result = cast(MethodResult, placement.compute(run))  # here, or on the worker whose device it names
        if result.error_message is None:  # refusals are cheap to redo and may depend on the host's limits
            views.store(run, result, soon=True)
        return result

    return result_cache.memory().remember(full, load_or_run)


def run_method_now(run: views.MethodRun) -> MethodResult:
    """``run`` computed here and now (no cache)."""
    spec, beta = run.inputs, run.beta
    dev = resolve(run.device)
    q, k, v = tensors(spec, dev)
    reference = exact(run.exact())
    kwargs = run.kwargs
    try:
        start = time.perf_counter()
        result = core.approximate(run.method, q, k, v, scale=beta, seed=run.seed, **kwargs)
        core_device.synchronize(dev)
        seconds = time.perf_counter() - start
        core_cancel.check()  # each step of a large n takes seconds: a closed tab stops between them
        approx = result.attention().float()
        core_cancel.check()
    except (core.ParameterError, ValueError, RuntimeError) as exc:
        empty = np.zeros((spec.heads, 1, 1), np.float32)
        nan = np.full(spec.heads, np.nan)
        return MethodResult(
            run.method,
            kwargs,
            empty,
            empty,
            1,
            {"attention_error": nan},
            0,
            0,
            0.0,
            dev.type,
            {},
            error_message=str(exc),
        )
    exact_dense = torch.tensor(reference.attention, device=dev) if not reference.reduced else None
    if exact_dense is None:  # large n: recompute exact on the fly rather than caching n x n
        exact_dense = core.approximate("exact", q, k, v, scale=beta, causal=run.exact().causal).attention().float()
        core_cancel.check()
    out_exact = torch.tensor(reference.output, device=dev)
    per_head = {
        "attention_error": metrics.relative_frobenius_error(approx, exact_dense).cpu().numpy(),
        "output_error": metrics.relative_output_error(result.output.float(), out_exact).cpu().numpy(),
        "row_kl": metrics.mean_row_kl(exact_dense, approx).cpu().numpy(),
        "max_abs_error": metrics.max_abs_error(approx, exact_dense).cpu().numpy(),
    }
    core_cancel.check()
    factor = block_factor(spec.n)
    error = approx - exact_dense
    order = cluster_order(spec) if factor > 1 else None
    in_order: dict[str, np.ndarray] | None = None
    # Reduced on the device, then copied: the host gets display-sized maps, not n x n ones.
    if order is not None:
        attention_in_order = reduce_in_cluster_order(approx, factor, "max", order)
        core_cancel.check()  # each reduction of a large n takes a second or more
        error_in_order = reduce_in_cluster_order(error, factor, "absmax", order)
        core_cancel.check()
        if attention_in_order is not None and error_in_order is not None:  # always, with factor > 1 and an order
            in_order = {"attention": attention_in_order, "error": error_in_order}
    attention_shown = block_reduce(approx, factor, "max").cpu().numpy()
    error_shown = block_reduce(error, factor, "absmax").cpu().numpy()
    del error
    core_cancel.check()
    return MethodResult(
        method=run.method,
        params=dict(result.params),
        attention=attention_shown,
        error=error_shown,
        factor=factor,
        metrics=per_head,
        memory=int(result.cost.memory),
        flops=int(result.cost.flops),
        seconds=seconds,
        device=dev.type,
        info=_small_info(result.info),
        in_cluster_order=in_order,
    )


def method_seconds(spec: views.InputSpec, method: str, params: dict[str, Any]) -> float:
    """A rough run time of ``run_method`` (to tell light from heavy work; not a promise)."""
    dense = estimate_seconds(8 * spec.heads * spec.n**2)  # the method, its dense matrix, exact, error maps
    if method == "rpca":  # one n x n SVD per iteration and head
        return dense + spec.heads * int(params.get("iterations", 60)) * (spec.n / 512) ** 3 * 0.5
    if method in ("learned_kernel", "hedgehog"):  # Adam steps
        return dense + int(params.get("steps", 100)) * 0.02
    return dense


def run_method_scheduled(run: views.MethodRun) -> MethodResult:
    """``run_method``; heavy settings (large n, robust PCA, training) go through the scheduler's queue."""
    estimate = method_seconds(run.inputs, run.method, run.kwargs)
    if estimate <= LIGHT_SECONDS:
        result, from_memory = _remembered_run(run)
        if from_memory:
            result_cache.count_memory_hit()
        return result
    full = run.cache_key()
    kept = result_cache.memory().get(full)
    if kept is not None:
        result_cache.count_memory_hit()
        return cast(MethodResult, kept)
    value = views.run(run, estimate, title=f"Running {run.method} at n = {run.inputs.n}")
    return result_cache.memory().put(full, value)


SIGNED_PARTS = ("sparse", "unnormalized_sparse")


def method_parts(parts: views.MethodParts) -> dict[str, np.ndarray]:
    """Named dense parts of one head (e.g. Scatterbrain's sparse and low-rank pieces) as numpy arrays.

    With ``parts.reduce``, matrices are block-reduced to at most DISPLAY_MAX per side (masks: any; signed parts:
    the entry of largest magnitude; others: max); the block size is returned under "factor".
    """
    return cast(dict[str, np.ndarray], remembered(parts))


def method_parts_now(parts: views.MethodParts) -> dict[str, np.ndarray]:
    run = parts.run
    spec = run.inputs
    dev = resolve(run.device)
    q, k, v = tensors(spec, dev)
    head = min(max(parts.head, 0), q.shape[0] - 1)
    result = core.approximate(run.method, q[head], k[head], v[head], scale=run.beta, seed=run.seed, **run.kwargs)
    factor = block_factor(spec.n) if parts.reduce else 1
    # A plain int, not a 0-d array: the shared result cache's round trip turns 0-d arrays into shape (1,).
    out: dict[str, Any] = {"factor": int(factor)}
    for name in parts.names:
        value = result.attention() if name == "attention" else result.parts[name]
        if not isinstance(value, torch.Tensor):
            continue
        array = value.cpu().numpy()
        if array.dtype != np.bool_ and array.dtype.kind not in "iu":
            array = array.astype(np.float32)
        if factor > 1 and array.ndim >= 2 and array.shape[-1] == spec.n and array.shape[-2] == spec.n:
            mode = "any" if array.dtype == np.bool_ else "absmax" if name in SIGNED_PARTS else "max"
            array = block_reduce(array, factor, mode)
        out[name] = array
    return out


def scatterbrain_correction_now(view: views.ScatterbrainCorrection) -> sparse_lowrank.CorrectionSummary:
    parts_view = view.parts
    run, head = parts_view.run, parts_view.head
    parts = method_parts(parts_view)
    raw = method_parts(views.MethodParts(run, head, ("unnormalized_low_rank",), parts_view.reduce))
    arrays = load_inputs(run.inputs)
    logits = sparse_lowrank.head_logits(arrays.q[head], arrays.k[head], run.beta)
    return sparse_lowrank.correction_summary(
        exact(run.exact()).attention[head],
        parts["attention"],
        parts["naive_sum"],
        parts["support"],
        raw["unnormalized_low_rank"],
        logits,
        int(run.kwargs.get("features", 0)),
    )


def method_parts_scheduled(parts: views.MethodParts) -> dict[str, np.ndarray]:
    """``method_parts``; heavy settings (robust PCA, large n) go through the scheduler, with a Cancel button.

    Same cache entry as ``method_parts`` (the same view), so either path serves the other's result.
    """
    run = parts.run
    one_head = run.inputs.replace(heads=1)  # parts are computed for one head
    estimate = method_seconds(one_head, run.method, run.kwargs)
    if estimate <= LIGHT_SECONDS:
        return method_parts(parts)
    return cast(
        dict[str, np.ndarray], views.run(parts, estimate, title=f"Computing {run.method} at n = {run.inputs.n}")
    )


def full_attention(run: views.MethodRun, head: int) -> np.ndarray:
    """Full-resolution (n, n) attention of one head (for PNG downloads; not cached: it can be large)."""
    dev = resolve(run.device)
    q, k, v = tensors(run.inputs, dev)
    head = min(max(head, 0), q.shape[0] - 1)
    result = core.approximate(run.method, q[head], k[head], v[head], scale=run.beta, seed=run.seed, **run.kwargs)
    return result.attention().float().cpu().numpy()


@functools.cache
def gemm_gflops(device_type: str, size: int = 1024, repeats: int = 3) -> float:
    """This process's GEMM rate (GFLOP/s) on a device type, measured once per process: a hardware rate belongs to
    the machine that measured it, so it is remembered here, never in a cache shared between machines."""
    return profiling.gemm_rate(device_type, size=size, repeats=repeats) / 1e9
