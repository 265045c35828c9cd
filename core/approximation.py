"""The engine's entry point: ``approximate`` validates inputs, runs a method, and returns an ``Approximation``."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from core import limits, registry
from core.cancel import check
from core.errors import ParameterError

# attention() materialises n x n per batch element; above these it refuses.
DENSE_MAX_N = 4096
DENSE_MAX_ELEMENTS = 2**27  # 512 MiB of float32 over the whole batch
# Working-set multiplier over the analytic "scalars stored": scores, their exp, and temporaries.
WORKING_SET_FACTOR = 4


@dataclass(frozen=True)
class Cost:
    """Analytic cost of a method's efficient path, for the whole batch.

    memory: scalars stored for the attention computation (the papers' budget measure);
    flops: floating point operations (a multiply-add counts 2).
    """

    memory: int
    flops: int

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.memory + other.memory, self.flops + other.flops)

    def scaled(self, factor: int) -> Cost:
        return Cost(self.memory * factor, self.flops * factor)


@dataclass
class AttentionInputs:
    """Validated inputs with the leading dimensions flattened to one batch dimension B."""

    q: torch.Tensor  # (B, n, d)
    k: torch.Tensor  # (B, n, d)
    v: torch.Tensor  # (B, n, dv)
    scale: torch.Tensor  # (B, 1, 1), the inverse temperature beta
    seed: int
    batch_shape: tuple[int, ...]
    # q and k are this many copies of their first batch / repeats rows (a temperature sweep stacks one input over a
    # tensor scale, as an expanded view): work that depends on q and k alone, such as LSH hashing, is done once.
    repeats: int = 1

    @property
    def n(self) -> int:
        return int(self.q.shape[-2])

    @property
    def d(self) -> int:
        return int(self.q.shape[-1])

    @property
    def dv(self) -> int:
        return int(self.v.shape[-1])

    @property
    def batch(self) -> int:
        return int(self.q.shape[0])

    @property
    def device(self) -> torch.device:
        return self.q.device

    @property
    def dtype(self) -> torch.dtype:
        return self.q.dtype

    @property
    def statistics_dtype(self) -> torch.dtype:
        """float32 for half-precision inputs (a half-native method's softmax statistics, hashes and draws), else
        the inputs' own dtype."""
        return at_least_float32(self.dtype)

    def generator(self, stream: int = 0) -> torch.Generator:
        """A CPU generator for one independent random stream of this call.

        Draws are made on the CPU in float64 and then moved, so CPU and GPU see the same numbers.
        """
        return torch.Generator().manual_seed(_mix_seed(self.seed, stream))

    def randn(self, *shape: int, stream: int = 0) -> torch.Tensor:
        draw = torch.randn(*shape, generator=self.generator(stream), dtype=torch.float64, device="cpu")
        return draw.to(device=self.device, dtype=self.statistics_dtype)

    def logits(self) -> torch.Tensor:
        """Dense scale * q k^T, (B, n, n). Only for dense views and oracles.

        When the batch repeats one q and k (``repeats``, a temperature sweep), q k^T is formed once and scaled for
        each copy: the same numbers, without a matrix product per temperature. Half-precision inputs give float32
        scores, so the dense views' softmax statistics are float32."""
        q, k = self.q.to(self.statistics_dtype), self.k.to(self.statistics_dtype)
        if self.repeats > 1:
            rows = self.batch // self.repeats
            product = q[:rows] @ k[:rows].transpose(-1, -2)
            scale = self.scale.reshape(self.repeats, rows, 1, 1)
            return (scale * product).reshape(self.batch, self.n, self.n)
        return self.scale * (q @ k.transpose(-1, -2))

    def exact_attention(self) -> torch.Tensor:
        return torch.softmax(self.logits(), dim=-1)


def _mix_seed(seed: int, stream: int) -> int:
    return (int(seed) * 1_000_003 + int(stream) * 7_919 + 12_345) % (2**63 - 1)


PartFn = Callable[[], Any]


class LazyParts(Mapping[str, Any]):
    """Named dense pieces for the split views, each computed only when first read."""

    def __init__(self, makers: Mapping[str, PartFn], reshape: Callable[[Any], Any]) -> None:
        self._makers = dict(makers)
        self._reshape = reshape
        self._cache: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key not in self._makers:
            raise KeyError(f"no part {key!r}; available: {', '.join(self._makers) or 'none'}")
        if key not in self._cache:
            self._cache[key] = self._reshape(self._makers[key]())
        return self._cache[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)

    def __repr__(self) -> str:
        return f"LazyParts({list(self._makers)})"


@dataclass
class Approximation:
    """The result of one method on one input.

    output: (..., n, dv), computed by the method's efficient path.
    cost: analytic memory and FLOPs of that path.
    parts: named dense pieces (computed on access).
    attention(): the dense n x n matrix the method implies.
    """

    method: str
    params: dict[str, Any]
    output: torch.Tensor
    cost: Cost
    _dense: Callable[[], torch.Tensor] = field(repr=False)
    _parts: Mapping[str, PartFn] = field(default_factory=dict, repr=False)
    batch_shape: tuple[int, ...] = ()
    n: int = 0
    # Non-tensor facts about the run (e.g. padding, compressed length); small and cheap.
    info: dict[str, Any] = field(default_factory=dict)
    _attention_cache: torch.Tensor | None = field(default=None, repr=False)
    _lazy_parts: LazyParts | None = field(default=None, repr=False)

    def attention(self) -> torch.Tensor:
        """The dense (..., n, n) matrix this method implies. Raises ValueError above the size cap."""
        batch = math.prod(self.batch_shape) if self.batch_shape else 1
        if self.n > DENSE_MAX_N or batch * self.n * self.n > DENSE_MAX_ELEMENTS:
            raise ParameterError(
                "n",
                f"the dense attention view needs n <= {DENSE_MAX_N} and batch * n^2 <= {DENSE_MAX_ELEMENTS}; "
                f"got n = {self.n} with batch {batch}. Use .output, or a smaller n.",
            )
        if self._attention_cache is None:
            self._attention_cache = self._unflatten(self._dense())
        return self._attention_cache

    @property
    def parts(self) -> LazyParts:
        if self._lazy_parts is None:
            self._lazy_parts = LazyParts(self._parts, self._unflatten_any)
        return self._lazy_parts

    def _unflatten(self, t: torch.Tensor) -> torch.Tensor:
        return t.reshape(*self.batch_shape, *t.shape[1:])

    def _unflatten_any(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == _prod(self.batch_shape):
            return self._unflatten(value)
        if isinstance(value, list):
            return [self._unflatten_any(x) for x in value]
        return value


def make_result(
    inputs: AttentionInputs,
    method: str,
    output: torch.Tensor,
    dense: Callable[[], torch.Tensor],
    parts: Mapping[str, PartFn] | None = None,
    cost: Cost | None = None,
    info: dict[str, Any] | None = None,
) -> Approximation:
    """Build an Approximation from a method's flat (B, n, dv) output and dense/part makers."""
    return Approximation(
        method=method,
        params={},
        output=output.reshape(*inputs.batch_shape, inputs.n, inputs.dv),
        cost=cost if cost is not None else Cost(0, 0),
        _dense=dense,
        _parts=parts or {},
        batch_shape=inputs.batch_shape,
        n=inputs.n,
        info=info or {},
    )


def _prod(shape: tuple[int, ...]) -> int:
    return math.prod(shape) if shape else 1


_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
HALF_DTYPES = (torch.float16, torch.bfloat16)
# The unit roundoff of each half precision: bfloat16 keeps 8 significant bits, float16 11.
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
# A half-native method's stated error in half precision, in units of the dtype's unit roundoff u: the relative output
# error of the half call against the float32 call on the same rounded values (clustered input, n = 256, budget 1/4,
# scale 3; tests/test_precision.py). Rounding the float32 output once costs about 0.45 u. Each factor is 1.5 times
# the largest error measured on five such inputs (data seeds 0-4) in bfloat16 and float16, rounded up to a half;
# benchmarks/precision.py measures the same at n = 1024.
HALF_ERROR_FACTOR: dict[str, float] = {
    "exact": 1.0,  # 0.62 u: float32 scores and statistics; the probabilities are rounded before P V
    "linformer": 4.0,  # 2.56 u
    "local": 1.0,  # 0.58 u
    "lsh": 3.5,  # 2.31 u
    "moba": 3.5,  # 2.28 u (causal 1.96 u): half q k^T over the gathered blocks, float32 softmax statistics
    "nystrom": 3.0,  # 1.67 u
    "nsa": 2.0,  # 1.14 u (causal 0.99 u): float32 compressed branch, half selection and window
    "performer": 1.5,  # 0.78 u
    "scatterbrain": 4.0,  # 2.61 u
}


def at_least_float32(dtype: torch.dtype) -> torch.dtype:
    """float32 for a half precision, else ``dtype``: where statistics and references of half inputs are computed."""
    return torch.float32 if dtype in HALF_DTYPES else dtype


def half_error_bound(method: str, dtype: torch.dtype) -> float:
    """The largest relative output error a half-native ``method`` may show in ``dtype`` (see HALF_ERROR_FACTOR)."""
    return HALF_ERROR_FACTOR[method] * UNIT_ROUNDOFF[dtype]


def _as_tensor(x: Any, name: str) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        if not np.issubdtype(x.dtype, np.floating):
            raise ParameterError(name, f"must be a floating-point array, got dtype {x.dtype}")
        x = torch.from_numpy(np.ascontiguousarray(x))
    if not isinstance(x, torch.Tensor):
        raise ParameterError(
            name, f"must be a torch.Tensor or numpy array of shape (..., n, d), got {type(x).__name__}"
        )
    if x.dtype not in _FLOAT_DTYPES:
        raise ParameterError(name, f"must have a floating dtype (float16, bfloat16, float32, float64), got {x.dtype}")
    if x.dim() < 2:
        raise ParameterError(name, f"must have shape (..., n, d) with at least 2 dimensions, got {tuple(x.shape)}")
    return x


def prepare_inputs(q: Any, k: Any, v: Any, scale: Any, seed: Any, *, keep_half: bool = False) -> AttentionInputs:
    """Check shapes, values, scale and seed; flatten the leading dimensions.

    Half-precision inputs are upcast to float32 unless ``keep_half`` (a method whose efficient path is safe in
    half precision: ``MethodSpec.half_native``). The scale is float32 then, for the method's float32 statistics.
    """
    q, k, v = _as_tensor(q, "q"), _as_tensor(k, "k"), _as_tensor(v, "v")
    if q.shape[-1] != k.shape[-1]:
        raise ParameterError("k", f"must have the same last dimension d as q ({q.shape[-1]}), got {k.shape[-1]}")
    if q.shape[-2] != k.shape[-2]:
        raise ParameterError("k", f"must have the same length n as q ({q.shape[-2]}), got {k.shape[-2]}")
    if v.shape[-2] != k.shape[-2]:
        raise ParameterError("v", f"must have the same length n as k ({k.shape[-2]}), got {v.shape[-2]}")
    if q.shape[:-2] != k.shape[:-2] or q.shape[:-2] != v.shape[:-2]:
        raise ParameterError(
            "q",
            f"q, k and v must share their leading (batch, head) dimensions; got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}",
        )
    n, d, dv = q.shape[-2], q.shape[-1], v.shape[-1]
    if n < 1:
        raise ParameterError("n", f"the sequence length must be at least 1, got {n}")
    if d < 1 or dv < 1:
        raise ParameterError("d", f"the head dimensions must be at least 1, got d = {d}, d_v = {dv}")
    if q.device != k.device or q.device != v.device:
        raise ParameterError("q", f"q, k and v must be on one device; got {q.device}, {k.device}, {v.device}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ParameterError("q", f"q, k and v must share one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        # One reduction first; the element-wise check only runs when the sum is not finite.
        if t.numel() and not bool(torch.isfinite(t.sum())) and not bool(torch.isfinite(t).all()):
            raise ParameterError(name, "contains NaN or infinite values; every entry must be finite")
    batch_shape = tuple(q.shape[:-2])
    batch = _prod(batch_shape)
    # A leading dimension of stride 0 in both q and k (torch.expand) holds the same q and k in every slice.
    repeats = int(q.shape[0]) if q.dim() > 2 and q.stride(0) == 0 and k.stride(0) == 0 else 1
    if q.dtype in HALF_DTYPES and not keep_half:
        # Half precision is computed in float32 (hashes, SVDs, pseudo-inverses and exp need the range and
        # digits), so the result is the float32 result on the same values; approximate() casts it back.
        q, k, v = q.float(), k.float(), v.float()
    scale_like = q.new_empty(0, dtype=torch.float32) if q.dtype in HALF_DTYPES else q
    scale_t = _prepare_scale(scale, d, batch_shape, scale_like)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**63:
        raise ParameterError("seed", f"must be an integer in [0, 2^63 - 1], got {seed!r}")
    return AttentionInputs(
        q=q.reshape(batch, n, d),
        k=k.reshape(batch, n, d),
        v=v.reshape(batch, n, dv),
        scale=scale_t,
        seed=int(seed),
        batch_shape=batch_shape,
        repeats=max(1, repeats),
    )


def _prepare_scale(scale: Any, d: int, batch_shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    batch = _prod(batch_shape)
    if scale is None:
        value = torch.full((batch, 1, 1), 1.0 / math.sqrt(d), dtype=like.dtype, device=like.device)
        return value
    if isinstance(scale, (int, float, np.floating, np.integer)) and not isinstance(scale, bool):
        if not math.isfinite(float(scale)) or float(scale) < 0:
            raise ParameterError("scale", f"must be a finite number >= 0 (the inverse temperature), got {scale!r}")
        return torch.full((batch, 1, 1), float(scale), dtype=like.dtype, device=like.device)
    if isinstance(scale, (torch.Tensor, np.ndarray)):
        s = torch.as_tensor(scale, dtype=like.dtype).to(like.device)
        if not bool(torch.isfinite(s).all()) or bool((s < 0).any()):
            raise ParameterError("scale", "every entry must be finite and >= 0")
        try:
            # A tensor scale lines up with the leading (batch) dimensions, numpy-style from the right.
            s = torch.broadcast_to(s, batch_shape)
        except RuntimeError:
            raise ParameterError(
                "scale", f"a tensor scale must broadcast to the batch shape {batch_shape}, got {tuple(s.shape)}"
            ) from None
        return s.reshape(batch, 1, 1).contiguous()
    raise ParameterError(
        "scale", f"must be None, a number >= 0, or a tensor over the batch; got {type(scale).__name__}"
    )


def approximate(
    method: str,
    q: Any,
    k: Any,
    v: Any,
    *,
    scale: Any = None,
    seed: int = 0,
    **params: Any,
) -> Approximation:
    """Run one attention method.

    q, k: (..., n, d); v: (..., n, dv); any leading batch/head dimensions, any device.
    scale: the inverse temperature beta multiplying q k^T (default 1/sqrt(d)); a number, or a tensor
        that broadcasts over the leading dimensions (used to batch temperature sweeps).
    seed: every random draw of the method is derived from it.
    params: the method's parameters (see ``core.methods()[method].params``).
    """
    check()  # every method call is a step of a page's loop: a closed tab stops it between calls
    spec = registry.get(method)
    input_dtype = _as_tensor(q, "q").dtype
    inputs = prepare_inputs(q, k, v, scale, seed, keep_half=spec.half_native)
    n, d = inputs.n, inputs.d
    if spec.max_n is not None and n > spec.max_n:
        raise ParameterError(
            "n", f"{method} is an oracle that builds n x n matrices; it needs n <= {spec.max_n}, got {n}"
        )
    checked = spec.validate(params, n, d)
    cost = spec.cost(inputs, checked) if spec.cost is not None else None
    if cost is not None:
        need = cost.memory * inputs.q.element_size() * WORKING_SET_FACTOR
        limit = limits.memory_limit_bytes()  # ATTN_EXPLORER_MEMORY_LIMIT, read per call
        if need > limit:
            raise ParameterError(
                "n",
                f"{method} at n = {n}, batch {inputs.batch} would need about {need / 2**30:.1f} GiB; "
                f"the limit is {limit / 2**30:.1f} GiB. Lower n, the batch, or the method's budget.",
            )
    result = spec.fn(inputs, checked)
    result.params = checked
    if cost is not None:
        result.cost = cost
    if input_dtype in HALF_DTYPES:
        _cast_result(result, input_dtype)
    return result


def _cast_result(result: Approximation, dtype: torch.dtype) -> None:
    """Give a half-precision call its results in its own dtype (computed in float32, or in part so by a
    half-native method)."""

    def cast(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.to(dtype)
        if isinstance(value, list):
            return [cast(x) for x in value]
        return value

    def casting(maker: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: cast(maker())

    result.output = result.output.to(dtype)
    result._dense = casting(result._dense)
    result._parts = {name: casting(maker) for name, maker in result._parts.items()}
