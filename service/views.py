"""The frozen settings of every cached computation a page shows: the one place its cache key and job key come from.

A view holds every setting its result depends on, and computes from those alone: ``view.compute(report)`` reads
only ``self``. So a result cannot depend on a setting that its key lacks, and the key is derived from the fields,
never written by hand. A field that only changes how a result is drawn is declared with ``display_only()`` and is
left out of the key (none of today's views needs one: cluster order of reduced maps is computed, so it is keyed).

Pages build a view from their settings and hand it to ``run`` (the scheduler, for heavy work), ``cached`` (light
work, computed at once) or ``lookup`` / ``is_cached``. This module imports no Streamlit: ``run`` waits through the
front end's hook (``service.scheduler.run_heavy``; ``ui.jobs`` installs the page's progress bar and Cancel).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from core import uploads as core_uploads
from service import compute, model_code, placement, result_cache, scheduler, uploads

Params = tuple[tuple[str, Any], ...]  # a method's knobs, sorted by name; lists become tuples
MethodParams = tuple[tuple[str, Params], ...]  # (method, its knobs) in the page's order

_DISPLAY_ONLY = "display_only"
VIEWS: dict[str, type[View]] = {}  # cache name -> view class, every view the app caches


def display_only(default: Any) -> Any:
    """A field that changes only how a result is drawn: kept on the view, left out of its key."""
    return dataclasses.field(default=default, metadata={_DISPLAY_ONLY: True})


def params_key(params: Mapping[str, Any]) -> Params:
    """A hashable, order-independent form of a method's parameters (lists become tuples)."""
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items()))


def params_dict(key: Params) -> dict[str, Any]:
    """The keyword arguments of ``core.approximate`` back from ``params_key``."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in key}


def method_params(methods: Any, params: Mapping[str, Mapping[str, Any]]) -> MethodParams:
    """(method, params_key) for each method, in the given order."""
    return tuple((m, params_key(params.get(m, {}))) for m in methods)


def method_params_dict(key: MethodParams) -> dict[str, dict[str, Any]]:
    return {m: params_dict(p) for m, p in key}


def _key_value(value: Any) -> Any:
    if isinstance(value, View):
        return (type(value).cache_name, value.key())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple((f.name, _key_value(getattr(value, f.name))) for f in dataclasses.fields(value))
    if isinstance(value, (list, tuple)):
        return tuple(_key_value(v) for v in value)
    return value


@dataclasses.dataclass(frozen=True)
class View(abc.ABC):
    """Base of every view: a frozen dataclass with a unique ``cache_name`` and a ``compute(report)``."""

    cache_name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("cache_name", "")
        if not name:
            return  # an intermediate base
        if name in VIEWS and VIEWS[name].__qualname__ != cls.__qualname__:
            raise RuntimeError(f"two views share the cache name {name!r}")
        VIEWS[name] = cls

    def key(self) -> tuple[tuple[str, Any], ...]:
        """Every field but the display-only ones, in declaration order (nested views by their own keys)."""
        return tuple(
            (f.name, _key_value(getattr(self, f.name)))
            for f in dataclasses.fields(self)
            if not f.metadata.get(_DISPLAY_ONLY)
        )

    def cache_key(self) -> str:
        """The shared cache's key of this view's result (it also names the job that computes it)."""
        return result_cache.make_key(self.cache_name, self.key())

    @abc.abstractmethod
    def compute(self, report: Callable[..., None] | None = None) -> Any:
        """The result, from this view's fields alone; ``report(fraction, label)`` takes progress when given."""

    def replace(self, **changes: Any) -> Any:
        return dataclasses.replace(self, **changes)

    def shared(self) -> bool:
        """Whether ``cached`` keeps this view's result in the shared cache (an upload is already there, with its
        own expiry)."""
        return True

    def expire_seconds(self) -> float | None:
        """How long the shared cache keeps this view's result: as long as its upload, when it computes on one
        (results are not kept past the arrays they came from); None (until evicted) otherwise."""
        return _upload_expiry(self)


def _upload_expiry(value: Any) -> float | None:
    if isinstance(value, InputSpec):
        if value.source != "upload":
            return None
        return core_uploads.upload_hours() * 3600.0
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            found = _upload_expiry(getattr(value, item.name))
            if found is not None:
                return found
    return None


def key_fields(view_type: type[View]) -> list[str]:
    """The names of the fields that make up a view type's key."""
    return [f.name for f in dataclasses.fields(view_type) if not f.metadata.get(_DISPLAY_ONLY)]


def run(view: View, estimate_seconds: float | None, *, title: str | None = None) -> Any:
    """The view's result: the shared cache, else at once (light) or through the scheduler's queue (heavy)."""
    return scheduler.run_heavy(
        view.cache_name,
        view.key(),
        lambda report: placement.compute(view, report),  # light: here or on a worker; heavy jobs ask it too
        estimate_seconds,
        title=title,
        task=view,
        expire=view.expire_seconds(),
    )


def cached(view: View) -> Any:
    """The view's result through the shared cache, computed at once in this thread when missing."""
    if not view.shared():
        return placement.compute(view)
    return result_cache.cached(view.cache_name, view.key(), lambda: placement.compute(view), view.expire_seconds())


def lookup(view: View) -> Any | None:
    """The view's result if the shared cache has it, else None (nothing is computed)."""
    return result_cache.get(view.cache_name, view.key())


def is_cached(view: View) -> bool:
    return result_cache.contains(view.cache_name, view.key())


def store(view: View, value: Any, *, soon: bool = False) -> None:
    """Put a result computed elsewhere (work done ahead) into the shared cache under the view's key."""
    if soon:
        result_cache.put_soon(view.cache_name, view.key(), value, view.expire_seconds())
    else:
        result_cache.put(view.cache_name, view.key(), value, view.expire_seconds())


# ------------------------------------------------------------------ the input and the engine's calls on it


@dataclasses.dataclass(frozen=True)
class InputSpec(View):
    """Everything that determines q, k, v."""

    cache_name: ClassVar[str] = "inputs"

    source: str  # clustered | gaussian | real | upload
    n: int
    d: int
    heads: int  # upload: its first ``heads`` heads
    clusters: int
    spread: float
    seed: int
    text: str = ""
    layer: int = 0
    upload: str = ""  # the uploaded file's sha256 (service/uploads.py), source "upload" only

    @property
    def drawn(self) -> bool:
        """Synthetic: another seed draws fresh q, k, v (a real text or an upload has only its own)."""
        return self.source in ("clustered", "gaussian")

    def shared(self) -> bool:
        return self.source != "upload"  # the upload's arrays are in the cache already, with their expiry

    def describe(self) -> str:
        if self.source == "real":
            return f"MiniLM layer {self.layer}, {self.heads} heads, n = {self.n} tokens, d = {self.d}"
        if self.source == "upload":
            return f"your upload {self.upload[:12]}…: {self.heads} head(s), n = {self.n}, d = {self.d}"
        extra = f", {self.clusters} clusters, σ = {self.spread:g}" if self.source == "clustered" else ""
        return f"{self.source}: n = {self.n}, d = {self.d}, {self.heads} head(s){extra}, seed {self.seed}"

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        if self.source == "upload":
            return uploads.input_arrays(self.upload, self.heads)
        return compute.load_inputs_now(self)


@dataclasses.dataclass(frozen=True)
class ExactAttention(View):
    """Exact softmax attention of every head at inverse temperature ``beta``."""

    cache_name: ClassVar[str] = "exact"

    inputs: InputSpec
    beta: float
    device: str  # the device actually used: cpu | cuda
    causal: bool = False  # causally masked: query i attends to keys j <= i

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        return compute.exact_now(self)


@dataclasses.dataclass(frozen=True)
class EntropyReadout(View):
    """The sidebar's readout: mean row entropy of exact attention (nats), averaged over heads."""

    cache_name: ClassVar[str] = "entropy_readout"

    exact: ExactAttention

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        return float(compute.exact(self.exact).entropy.mean())


@dataclasses.dataclass(frozen=True)
class MethodRun(View):
    """One method on every head; its errors are against exact attention at the same ``beta``."""

    cache_name: ClassVar[str] = "run_method"

    inputs: InputSpec
    beta: float
    device: str
    method: str
    params: Params
    seed: int

    @classmethod
    def of(
        cls, inputs: InputSpec, beta: float, device: str, method: str, params: Mapping[str, Any], seed: int
    ) -> MethodRun:
        return cls(inputs, float(beta), device, method, params_key(params), int(seed))

    @property
    def kwargs(self) -> dict[str, Any]:
        return params_dict(self.params)

    def exact(self) -> ExactAttention:
        """Exact attention in the same mode (causal or not) as this run."""
        return ExactAttention(self.inputs, self.beta, self.device, bool(self.kwargs.get("causal", False)))

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        return compute.run_method_now(self)


@dataclasses.dataclass(frozen=True)
class MethodParts(View):
    """Named dense parts of one head of a method's run (e.g. Scatterbrain's sparse and low-rank pieces)."""

    cache_name: ClassVar[str] = "method_parts"

    run: MethodRun
    head: int
    names: tuple[str, ...]
    reduce: bool = True  # block-reduce maps to the display size

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        return compute.method_parts_now(self)


@dataclasses.dataclass(frozen=True)
class ScatterbrainCorrection(View):
    """Scatterbrain against the naive sum of its parts on one head at full resolution: both errors, and what the
    correction does on the sparse support (``core.sparse_lowrank.correction_summary``). ``parts`` is the page's
    own parts view (attention, naive_sum and support among its names), so the parts are cache hits."""

    cache_name: ClassVar[str] = "scatterbrain_correction"

    parts: MethodParts

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        return compute.scatterbrain_correction_now(self)


# ------------------------------------------------------------------ the pages' studies


def _display_order(inputs: InputSpec, by_cluster: bool) -> list[int] | None:
    """The positions in cluster order (display only) when asked for and the input has clusters, else None."""
    order = compute.cluster_order(inputs) if by_cluster else None
    return None if order is None else order.tolist()


def _tensors(inputs: InputSpec, device: str) -> Any:
    return compute.tensors(inputs, compute.resolve(device))


@dataclasses.dataclass(frozen=True)
class TemperatureSweep(View):
    """Error vs entropy: every method's errors over the temperatures."""

    cache_name: ClassVar[str] = "error_vs_entropy"

    inputs: InputSpec
    betas: tuple[float, ...]  # inverse temperatures, in the sweep's order
    methods: tuple[str, ...]
    fraction: float
    seed: int
    params: MethodParams
    device: str
    causal: bool = False
    redraws: int = 1  # draws of the randomised methods (seeds seed, seed + 1, ...): the spread around each curve

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        import numpy as np

        from core import registry, sweeps

        q, k, v = _tensors(self.inputs, self.device)
        random = [m for m in self.methods if registry.get(m).randomized] if self.redraws > 1 else []
        rounds = 1 + (self.redraws - 1) * bool(random)

        def sweep(methods: list[str], seed: int, index: int) -> Any:
            def part(fraction: float, label: str = "") -> None:
                if report is not None:
                    report((index + fraction) / rounds, label)

            return sweeps.error_vs_entropy(
                q,
                k,
                v,
                methods,
                betas=list(self.betas),
                fraction=self.fraction,
                seed=seed,
                method_params=method_params_dict(self.params),
                progress=part,
                causal=self.causal,
            )

        result = sweep(list(self.methods), self.seed, 0)
        draws: dict[str, dict[str, list[Any]]] = {"attention": {}, "output": {}}
        for m in random:
            draws["attention"][m] = [result.attention_error[m]]
            draws["output"][m] = [result.output_error[m]]
        for index in range(1, rounds):
            again = sweep(random, self.seed + index, index)
            for m in random:
                draws["attention"][m].append(again.attention_error[m])
                draws["output"][m].append(again.output_error[m])
        return {
            "entropy": result.entropy,
            "betas": result.betas,
            "attention": result.attention_error,
            "output": result.output_error,
            "params": result.params,
            # Per randomised method, (redraws, temperatures): the first row is the curve's own draw.
            "attention_draws": {m: np.stack(rows) for m, rows in draws["attention"].items()},
            "output_draws": {m: np.stack(rows) for m, rows in draws["output"].items()},
            "redraws": rounds,
        }


@dataclasses.dataclass(frozen=True)
class RegimeMap(View):
    """The regime map: the winning family over (beta, sigma) on clustered inputs, averaged over seeds."""

    cache_name: ClassVar[str] = "regime_map"

    n: int
    d: int
    clusters: int
    betas: tuple[float, ...]
    spreads: tuple[float, ...]
    roles: tuple[tuple[str, str], ...]  # (role, method)
    fraction: float
    seed: int
    params: MethodParams
    device: str
    seeds: int
    causal: bool = False

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import regime

        return regime.averaged_regime_map(
            n=self.n,
            d=self.d,
            clusters=self.clusters,
            betas=list(self.betas),
            spreads=list(self.spreads),
            seeds=self.seeds,
            methods=dict(self.roles),
            fraction=self.fraction,
            seed=self.seed,
            method_params=method_params_dict(self.params),
            device=compute.resolve(self.device),
            progress=report,
            causal=self.causal,
        )


@dataclasses.dataclass(frozen=True)
class ClusteredEntropyCurve(View):
    """Mean row entropy of a clustered Process-1 input over a log grid of beta (to fit a beta to a real head)."""

    cache_name: ClassVar[str] = "clustered_entropy_curve"

    n: int
    d: int
    clusters: int
    spread: float
    seed: int

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import real_heads

        return real_heads.entropy_curve(self.n, self.d, self.clusters, self.spread, self.seed)


@dataclasses.dataclass(frozen=True)
class TokenRowErrors(View):
    """Per-row errors (KL, L1, output) of one head of a method's run, for Compare's query-token selection."""

    cache_name: ClassVar[str] = "token_row_errors"

    run: MethodRun
    head: int

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        import core
        from core import token_rows

        dev = compute.resolve(self.run.device)
        q, k, v = compute.tensors(self.run.inputs, dev)
        kwargs = self.run.kwargs
        causal = bool(kwargs.get("causal", False))
        # The whole run (every head), as MethodRun does, so the random methods draw the same numbers.
        approx = core.approximate(self.run.method, q, k, v, scale=self.run.beta, seed=self.run.seed, **kwargs)
        exact = core.approximate("exact", q, k, v, scale=self.run.beta, causal=causal)
        h = self.head
        return token_rows.row_errors(
            exact.attention()[h].float().cpu(),
            approx.attention()[h].float().cpu(),
            exact.output[h].float().cpu(),
            approx.output[h].float().cpu(),
        )


@dataclasses.dataclass(frozen=True)
class VccView(View):
    """VCC on one head: its tree, compressed matrices and errors (computed on the CPU)."""

    cache_name: ClassVar[str] = "vcc_view"

    inputs: InputSpec
    beta: float
    params: Params
    seed: int
    head: int

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import vcc_study

        q, k, v = _tensors(self.inputs, "cpu")
        return vcc_study.vcc_view(q, k, v, self.beta, params_dict(self.params), self.seed, self.head)


@dataclasses.dataclass(frozen=True)
class VccSweep(View):
    """VCC's error of every selector, with and without D, over the budget up to ``budget_max``."""

    cache_name: ClassVar[str] = "vcc_error_sweep"

    inputs: InputSpec
    beta: float
    params: Params
    seed: int
    budget_max: int

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import vcc_study

        q, k, v = _tensors(self.inputs, "cpu")
        params = params_dict(self.params)
        return vcc_study.error_sweep(q, k, v, self.beta, params, self.seed, self.budget_max, progress=report)


@dataclasses.dataclass(frozen=True)
class TemperatureScrub(View):
    """Compare's scrubber: every view of the chosen methods at each temperature of a grid, one head."""

    cache_name: ClassVar[str] = "temperature_scrub"

    inputs: InputSpec
    head: int
    device: str
    methods: tuple[str, ...]
    params: MethodParams
    betas: tuple[float, ...]  # the grid's inverse temperatures
    seed: int
    side: int
    by_cluster: bool  # frames reduced in cluster order: the reduction mixes other positions, so it is keyed

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        import core.scrub

        q, k, v = _tensors(self.inputs, self.device)
        head = min(max(self.head, 0), q.shape[0] - 1)
        return core.scrub.temperature_views(
            q[head],
            k[head],
            v[head],
            list(self.methods),
            betas=list(self.betas),
            params=method_params_dict(self.params),
            seed=self.seed,
            side=self.side,
            order=_display_order(self.inputs, self.by_cluster),
        )


@dataclasses.dataclass(frozen=True)
class SplitScrub(View):
    """Sparse + low rank's scrubber: S, L, S + L and the naive sum at each temperature of a grid, one head."""

    cache_name: ClassVar[str] = "split_scrub"

    inputs: InputSpec
    head: int
    device: str
    params: Params
    betas: tuple[float, ...]  # the grid's inverse temperatures
    seed: int
    side: int
    by_cluster: bool

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        import core.scrub

        q, k, v = _tensors(self.inputs, self.device)
        h = min(max(self.head, 0), q.shape[0] - 1)
        order = _display_order(self.inputs, self.by_cluster)
        return core.scrub.split_views(
            q[h], k[h], v[h], betas=list(self.betas), params=params_dict(self.params), seed=self.seed, side=self.side,
            order=order,
        )  # fmt: skip


# ------------------------------------------------------------------ Kernels


def _qkv(inputs: InputSpec, device: str, seed_offset: int = 0) -> Any:
    from core import kernel_study

    if seed_offset:
        inputs = inputs.replace(seed=inputs.seed + seed_offset)
    return kernel_study.QKV(*_tensors(inputs, device))


@dataclasses.dataclass(frozen=True)
class KernelPairCurves(View):
    """The Performer's kernel MSE against m at one pair (x, y), by Monte Carlo on the CPU."""

    cache_name: ClassVar[str] = "kernels_mse_curves"

    d: int
    length: float
    angle: float
    draws: int
    seed: int

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import kernel_study

        return kernel_study.kernel_mse_at_pair(self.d, self.length, self.angle, self.draws, self.seed, progress=report)


@dataclasses.dataclass(frozen=True)
class KernelEntryBins(View):
    """The Performer's relative error binned by the true entry's size."""

    cache_name: ClassVar[str] = "kernels_entry_bins"

    inputs: InputSpec
    beta: float
    features: int
    redraws: int
    seed: int
    device: str

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import kernels

        i = _qkv(self.inputs, self.device)
        return kernels.entry_error_by_size(i.q, i.k, self.beta, self.features, redraws=self.redraws, seed=self.seed)


@dataclasses.dataclass(frozen=True)
class KernelTrigFraction(View):
    """The share of non-positive normalisers of trig features at each m."""

    cache_name: ClassVar[str] = "kernels_trig_fraction"

    inputs: InputSpec
    features: tuple[int, ...]
    orthogonal: bool
    seed: int
    device: str

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import kernel_study

        i = _qkv(self.inputs, self.device)
        return kernel_study.trig_fraction(i.q, i.k, self.features, orthogonal=self.orthogonal, seed=self.seed)


@dataclasses.dataclass(frozen=True)
class KernelAttentionCurves(View):
    """The Performer at every m on the input: attention error over redraws."""

    cache_name: ClassVar[str] = "kernels_attention_curves"

    inputs: InputSpec
    beta: float
    redraws: int
    seed: int
    device: str

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import kernel_study

        i = _qkv(self.inputs, self.device)
        return kernel_study.attention_study(i.q, i.k, i.v, self.beta, self.redraws, self.seed, progress=report)


@dataclasses.dataclass(frozen=True)
class KernelComparison(View):
    """Trainable kernels fitted on the input against ELU+1 and the Performer (and on a fresh draw)."""

    cache_name: ClassVar[str] = "kernels_comparison"

    inputs: InputSpec
    beta: float
    features: int
    variants: tuple[str, ...]
    steps: int
    penalty: float
    lr: float
    seed: int
    device: str

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import kernel_study

        fresh = _qkv(self.inputs, self.device, seed_offset=1) if self.inputs.drawn else None
        fit_on = _qkv(self.inputs, self.device)
        args = (self.features, list(self.variants), self.steps, self.penalty, self.lr)
        return kernel_study.compare_on_inputs(fit_on, fresh, self.beta, *args, self.seed)


@dataclasses.dataclass(frozen=True)
class KernelPenaltySweep(View):
    """The ff kernel refitted at every orthogonality penalty."""

    cache_name: ClassVar[str] = "kernels_penalty_sweep"

    inputs: InputSpec
    beta: float
    features: int
    steps: int
    lr: float
    seed: int
    device: str

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import kernel_study, kernels

        i = _qkv(self.inputs, self.device)
        return kernels.penalty_sweep(
            i.q, i.k, i.v, self.beta, self.features, kernel_study.PENALTIES, steps=self.steps, lr=self.lr,
            seed=self.seed,
        )  # fmt: skip


# ------------------------------------------------------------------ Rank vs heads


@dataclasses.dataclass(frozen=True)
class RankHeadsCell(View):
    """One trained cell of the grid: heads of rank ``rank``, ``heads`` of them."""

    cache_name: ClassVar[str] = "rank_heads_cell"

    settings: Any  # core.rank_heads_study.TrainSettings (frozen)
    rank: int
    heads: int

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import rank_heads_study

        return rank_heads_study.train_cell(self.settings, self.rank, self.heads, progress=report)


@dataclasses.dataclass(frozen=True)
class RankHeadsNRun(View):
    """One run of the N sweep: uniform points, ``n_points`` of them."""

    cache_name: ClassVar[str] = "rank_heads_n"

    settings: Any  # core.rank_heads_study.TrainSettings
    rank: int
    heads: int
    n_points: int

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import rank_heads_study

        return rank_heads_study.train_cell(
            self.settings, self.rank, self.heads, n_points=self.n_points, distribution="uniform", progress=report
        )


@dataclasses.dataclass(frozen=True)
class FactOneConstruction(View):
    """Fact 1's construction against the temperature scale c."""

    cache_name: ClassVar[str] = "rank_heads_construction"

    d: int
    n_points: int
    target: str

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import rank_heads_study

        return rank_heads_study.fact_one_curve(self.d, self.n_points, self.target, progress=report)


# ------------------------------------------------------------------ Scaling


@dataclasses.dataclass(frozen=True)
class ScalingMeasurement:
    """A Scaling run's points and where they were measured: ``worker`` is the Dask worker's name ("" in a web
    process), ``host`` its machine, ``device`` cpu or cuda. A page draws this machine's GEMM-rate model only for a
    measurement made on its own host outside a worker (``measured_here``)."""

    points: list[Any]  # core.profiling.ScalingPoint, in the order measured
    host: str
    worker: str
    device: str

    def describe(self) -> str:
        return placement.Placement(self.host, self.device, bool(self.worker), name=self.worker).describe()

    def measured_here(self) -> bool:
        return not self.worker and self.host == placement.this_host()


@dataclasses.dataclass(frozen=True)
class ScalingRun(View):
    """Time and memory of the chosen methods against n on this server, within the run's limits."""

    cache_name: ClassVar[str] = "scaling"

    methods: tuple[str, ...]  # exact first when included
    sizes: tuple[int, ...]
    heads: int
    d: int
    row_budget: int
    beta: float
    seed: int
    device: str
    point_limit: float  # seconds
    total_limit: float  # seconds
    memory_limit: float  # MiB

    def compute(self, report: Callable[..., None] | None = None) -> ScalingMeasurement:
        from core import profiling

        device = compute.resolve(self.device)
        where = placement.computing_here(device.type)
        points = profiling.scaling_run(
            list(self.methods),
            list(self.sizes),
            d=self.d,
            heads=self.heads,
            row_budget=self.row_budget,
            scale=self.beta,
            seed=self.seed,
            device=device,
            point_limit_s=self.point_limit,
            total_limit_s=self.total_limit,
            memory_limit_bytes=self.memory_limit * 2**20,
            progress=report,
        )
        return ScalingMeasurement(points, where.host, where.name, where.device)


@dataclasses.dataclass(frozen=True)
class ErrorCostStudy(View):
    """Error against measured time and peak memory: every method at every budget on one input, on this server."""

    cache_name: ClassVar[str] = "error_vs_cost"

    inputs: InputSpec
    beta: float
    methods: tuple[str, ...]
    budgets: tuple[float, ...]  # fractions of full attention's n^2 scores
    with_exact: bool
    warm_runs: int
    seed: int
    device: str
    take: int  # the measurement's number: times are measurements, and a new number measures again

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import cost_study
        from core.approximation import prepare_inputs

        q, k, v = _tensors(self.inputs, self.device)
        return cost_study.cost_study(
            prepare_inputs(q, k, v, self.beta, self.seed),
            list(self.methods),
            list(self.budgets),
            warm_runs=self.warm_runs,
            with_exact=self.with_exact,
            progress=report,
        )


# ------------------------------------------------------------------ Paper claims


@dataclasses.dataclass(frozen=True)
class HashingComparison(View):
    """Angular against SMYRF's XBOX+ / E2LSH hashing for lsh and scatterbrain on the page's input, at its budget."""

    cache_name: ClassVar[str] = "hashing_comparison"

    inputs: InputSpec
    beta: float
    fraction: float
    device: str
    seeds: int = 3

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import hashing_study

        q, k, v = _tensors(self.inputs, self.device)
        return hashing_study.compare_hashings(
            q, k, v, beta=self.beta, fraction=self.fraction, seeds=range(self.seeds), progress=report
        )


@dataclasses.dataclass(frozen=True)
class PaperClaim(View):
    """One claim measured on one of its inputs (``which``), at a seed and, for the real model, a text."""

    cache_name: ClassVar[str] = "paper_claim"

    claim_id: str
    which: str
    seed: int
    text: str | None

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import claims

        if self.which == "real":
            model_code.import_in_steps()
        return claims.measure_plain(self.claim_id, self.which, self.seed, self.text)


@dataclasses.dataclass(frozen=True)
class PaperClaims(View):
    """One paper's due claims measured as one job; each claim is cached on its own (``PaperClaim``)."""

    cache_name: ClassVar[str] = "paper_claims"

    paper: str
    due: tuple[tuple[str, str], ...]  # (claim id, which input)
    seed: int
    text: str | None

    def claims(self) -> list[PaperClaim]:
        return [PaperClaim(claim_id, which, self.seed, self.text) for claim_id, which in self.due]

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import claims

        out = {}
        for i, claim in enumerate(self.claims()):
            if report is not None:
                report(i / len(self.due), f"{claim.claim_id} ({claim.which})")
            out[claims.result_key(claim.claim_id, claim.which)] = cached(claim)
        return out


# ------------------------------------------------------------------ Inside a model


@dataclasses.dataclass(frozen=True)
class SwapLayerErrors(View):
    """Each method swapped into the real model on one text: every layer's error, alone and inside the model."""

    cache_name: ClassVar[str] = "swap_layer_errors"

    text: str
    methods: tuple[str, ...]
    fraction: float
    layers: tuple[int, ...]
    heads: tuple[int, ...] | None
    seeds: int
    first_seed: int
    device: str

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import model_swap, registry

        model_code.import_in_steps()

        swaps = [
            model_swap.Swap(method, self.layers, self.heads, self.fraction, self.first_seed + seed)
            for method in self.methods
            for seed in range(self.seeds if registry.get(method).randomized else 1)
        ]
        ids = model_swap.encode(self.text)
        return model_swap.layer_errors(ids, swaps, device=self.device, progress=report)


@dataclasses.dataclass(frozen=True)
class SwapRetrieval(View):
    """First halves retrieving second halves on a slice of the shipped corpus, exact model beside each swap."""

    cache_name: ClassVar[str] = "swap_retrieval"

    passages: int  # the corpus's first passages
    methods: tuple[str, ...]
    fractions: tuple[float, ...]
    layers: tuple[int, ...]
    heads: tuple[int, ...] | None
    seeds: int
    first_seed: int
    device: str

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import model_swap

        model_code.import_in_steps()
        return model_swap.retrieval(
            model_swap.corpus()[: self.passages],
            list(self.methods),
            list(self.fractions),
            layers=self.layers,
            heads=self.heads,
            seeds=self.seeds,
            first_seed=self.first_seed,
            device=self.device,
            progress=report,
        )


# ------------------------------------------------------------------ Block sparsity


@dataclasses.dataclass(frozen=True)
class BlockSparsityStudy(View):
    """Every chosen method's support at one kernel tile size: entries kept, tiles touched, and the time on this
    device of the block-sparse computation on those tiles beside dense attention."""

    cache_name: ClassVar[str] = "block_sparsity"

    inputs: InputSpec
    beta: float
    fraction: float
    methods: tuple[str, ...]
    block: int
    causal: bool
    seed: int
    device: str

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import block_sparsity

        q, k, v = _tensors(self.inputs, self.device)
        return block_sparsity.block_study(
            list(self.methods),
            q,
            k,
            v,
            block=self.block,
            scale=self.beta,
            fraction=self.fraction,
            seed=self.seed,
            causal=self.causal,
            progress=(lambda done, label: report(done, label)) if report is not None else None,
        )


# ------------------------------------------------------------------ Sparse + low rank: the paper's Fig. 4


@dataclasses.dataclass(frozen=True)
class Fig4Measure(View):
    """Per-pair squared errors of Performer, LSH and Scatterbrain's estimates of exp(q.k) over random draws (CPU)."""

    cache_name: ClassVar[str] = "fig4_measure"

    d: int
    m: int  # random features
    rounds: int
    buckets: int
    draws: int
    pairs: int
    orthogonal: bool
    seed: int

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import sparse_lowrank

        return sparse_lowrank.fig4_measure(
            self.d, self.m, self.rounds, self.buckets, self.draws, self.pairs, self.orthogonal, self.seed
        )


# ------------------------------------------------------------------ Compare: warm timings


WARM_RUNS = 5
WARM_BUDGET_SECONDS = 1.0  # warm calls per method stop after about this much time
WARM_KEEP_SECONDS = 3600.0  # a timing is a measurement of the machine's state: measured again after an hour


@dataclasses.dataclass(frozen=True)
class MethodWarmTiming(View):
    """Warm timings (median of a few runs after a warm-up) of one method run, on the device and host that compute
    the run: ``host`` is in the key because a timing belongs to the machine that measured it (the run's device is
    too, through ``run``). None when the run is too heavy to repeat within the light budget."""

    cache_name: ClassVar[str] = "warm_timing"

    run: MethodRun
    host: str  # the host that computes ``run`` (service.placement.where(run).host): here, or the worker's

    def compute(self, report: Callable[..., None] | None = None) -> Any:
        from core import compare

        kwargs = self.run.kwargs
        if compute.method_seconds(self.run.inputs, self.run.method, kwargs) > scheduler.LIGHT_SECONDS:
            return None
        q, k, v = compute.tensors(self.run.inputs, compute.resolve(self.run.device))
        return compare.method_timing(
            self.run.method,
            q,
            k,
            v,
            scale=self.run.beta,
            seed=self.run.seed,
            params=kwargs,
            runs=WARM_RUNS,
            budget_s=WARM_BUDGET_SECONDS,
        )

    def expire_seconds(self) -> float | None:
        upload = super().expire_seconds()
        return WARM_KEEP_SECONDS if upload is None else min(upload, WARM_KEEP_SECONDS)
