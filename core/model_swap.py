"""A method swapped into the real model: all-MiniLM-L6-v2 run with a registry method in place of softmax attention.

``forward`` runs the model's own weights layer by layer (embeddings, then per layer: the q/k/v projections, attention,
the output projection and LayerNorm, the feed-forward block), with the chosen method computing the attention of the
chosen heads in the chosen layers and exact softmax everywhere else. The method runs at the model's own temperature
(its scale 1/sqrt(d_head): the real input's tau = 1) and at its equal-budget parameters for each input's n
(``core.budget.budget_params``). Every other weight is the model's, unchanged; dropout is off (eval mode).

On top of it:
- ``layer_errors``: the error of each layer's output as it propagates, beside the method's error on its own (its
  attention map and output on the exact model's q, k, v of that layer);
- ``retrieval``: each corpus passage's first half retrieves its second half among all second halves by the model's
  sentence embedding (mean-pooled, normalised, as sentence-transformers uses this model): top-1 and top-5 accuracy,
  the embeddings' cosine to the exact model's, and how often the nearest neighbours agree with the exact model's.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core import approximation, cancel, data, limits, metrics, registry
from core.budget import budget_params
from core.errors import ParameterError

ASSETS = Path(__file__).resolve().parent.parent / "assets"
CORPUS_PATH = ASSETS / "corpus" / "python_reference.txt"
LONG_TEXT_PATH = ASSETS / "long_text.txt"  # written for the project: 493 tokens, so that budgets mean something
LAYERS = 6  # all-MiniLM-L6-v2
HEADS = 12
HEAD_DIM = 32
HIDDEN = 384
INTERMEDIATE = 1536
MAX_TOKENS = 512
# Methods that cannot be swapped in here: learned_kernel trains a feature map on each head's exact matrix first.
NOT_SWAPPABLE = ("learned_kernel",)
ProgressFn = Callable[[float, str], None]


# ------------------------------------------------------------------ the model and the corpus


@functools.lru_cache(maxsize=2)
def _model_on(device: str) -> tuple[Any, Any]:
    """(tokenizer, model) on ``device`` in eval mode; the CPU copy is the one ``core.data`` loads for the real input."""
    tokenizer, model = data._load_model(str(data.default_model_path()))
    if device != "cpu":
        model = copy.deepcopy(model).to(device)
    return tokenizer, model


def tokenizer() -> Any:
    return _model_on("cpu")[0]


def encode(text: str, max_tokens: int = MAX_TOKENS) -> torch.Tensor:
    """Token ids of ``text`` with [CLS] and [SEP], at most ``max_tokens`` (1-D)."""
    if not isinstance(text, str) or not text.strip():
        raise ParameterError("text", "must be a non-empty string")
    encoded = tokenizer()(text, truncation=True, max_length=max_tokens, return_tensors="pt")
    return encoded["input_ids"][0]


def long_text() -> str:
    return LONG_TEXT_PATH.read_text(encoding="utf-8").strip()


@functools.lru_cache(maxsize=1)
def corpus() -> tuple[str, ...]:
    """The shipped passages (assets/corpus/python_reference.txt; see scripts/extract_corpus.py)."""
    text = CORPUS_PATH.read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.split("\n\n")[1:] if line.strip())


def halves(passage: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The passage's token ids cut in two at its middle token, each half framed by [CLS] ... [SEP]."""
    tok = tokenizer()
    ids = tok(passage, add_special_tokens=False)["input_ids"][: 2 * (MAX_TOKENS - 2)]
    middle = len(ids) // 2
    frame = (tok.cls_token_id, tok.sep_token_id)
    return tuple(torch.tensor([frame[0], *part, frame[1]]) for part in (ids[:middle], ids[middle:]))  # type: ignore[return-value]


# ------------------------------------------------------------------ what is swapped


@dataclass(frozen=True)
class Swap:
    """A method in place of softmax attention: in ``layers`` (0-based), on ``heads`` (None: all 12), at ``fraction``
    of full attention's n^2 budget, with draws from ``seed``. Method "exact" is the model itself."""

    method: str
    layers: tuple[int, ...] = tuple(range(LAYERS))
    heads: tuple[int, ...] | None = None
    fraction: float = 1 / 8
    seed: int = 0

    def __post_init__(self) -> None:
        spec = registry.get(self.method)
        if spec.name in NOT_SWAPPABLE:
            raise ParameterError("method", f"{spec.name} trains on each head's exact matrix; it is not swapped in here")
        for name, values, top in (("layers", self.layers, LAYERS), ("heads", self.heads or (), HEADS)):
            bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < top]
            if bad:
                raise ParameterError(name, f"each must be an integer in [0, {top - 1}], got {bad[0]!r}")
        if self.heads is not None and not self.heads:
            raise ParameterError("heads", "must name at least one head (or None for all)")
        if not isinstance(self.fraction, (int, float)) or not 0 < self.fraction <= 1:
            raise ParameterError("fraction", f"must be a number in (0, 1], got {self.fraction!r}")

    def params(self, n: int) -> dict[str, Any]:
        return budget_params(self.method, n, HEAD_DIM, float(self.fraction))

    def layer_seed(self, layer: int) -> int:
        """Each layer draws its own random features / hashes (one seed per layer, from the swap's seed)."""
        return (int(self.seed) * 1_000_003 + layer) % (2**63 - 1)


EXACT = Swap("exact", layers=())


@dataclass
class ForwardRun:
    """One forward pass: per layer (L, n, hidden) outputs, attention outputs (before the output projection) and q,
    k, v as the method saw them (q scaled by 1/sqrt(d_head)); the sentence embedding (normalised mean of the last
    layer's outputs)."""

    hidden: list[torch.Tensor]
    context: list[torch.Tensor]
    qkv: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = field(default_factory=list)
    embedding: torch.Tensor = field(default_factory=lambda: torch.empty(0))


def forward(ids: torch.Tensor, swap: Swap = EXACT, *, device: str = "cpu", keep_qkv: bool = False) -> ForwardRun:
    """The model on one token sequence (no padding, so no mask) with ``swap`` in place of softmax where it says."""
    _, model = _model_on(device)
    swapped = set(swap.layers) if swap.method != "exact" or swap.layers else set()
    ids = ids.to(device).reshape(1, -1)
    n = int(ids.shape[1])
    params = swap.params(n) if swapped else {}
    hidden_out: list[torch.Tensor] = []
    contexts: list[torch.Tensor] = []
    qkvs: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    with torch.no_grad():
        h = model.embeddings(input_ids=ids, token_type_ids=torch.zeros_like(ids))
        for index, layer in enumerate(model.encoder.layer):
            cancel.check()
            attention = layer.attention.self

            def heads_of(t: torch.Tensor) -> torch.Tensor:  # (1, n, hidden) -> (heads, n, head_dim)
                return t[0].reshape(n, HEADS, HEAD_DIM).transpose(0, 1)

            q = heads_of(attention.query(h)) / math.sqrt(HEAD_DIM)
            k, v = heads_of(attention.key(h)), heads_of(attention.value(h))
            context = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
            if index in swapped:
                chosen = list(swap.heads) if swap.heads is not None else list(range(HEADS))
                result = approximation.approximate(
                    swap.method, q[chosen], k[chosen], v[chosen], scale=1.0, seed=swap.layer_seed(index), **params
                )
                context = context.clone()
                context[chosen] = result.output.to(context.dtype)
            if keep_qkv:
                qkvs.append((q, k, v))
            contexts.append(context)
            merged = context.transpose(0, 1).reshape(1, n, HIDDEN)
            attention_output = layer.attention.output(merged, h)
            h = layer.output(layer.intermediate(attention_output), attention_output)
            hidden_out.append(h[0])
    pooled = h[0].mean(dim=0)
    return ForwardRun(hidden_out, contexts, qkvs, pooled / pooled.norm())


# ------------------------------------------------------------------ error through the layers


def layer_errors(
    ids: torch.Tensor, swaps: Sequence[Swap], *, device: str = "cpu", progress: ProgressFn | None = None
) -> list[dict[str, Any]]:
    """Rows (method, seed, layer, swapped, own_map_error, own_output_error, inside_attention_error, hidden_error).

    own_*: the method alone on the exact model's q, k, v of that layer (its chosen heads), against exact softmax:
    the relative Frobenius error of the attention map and of its output, averaged over the heads (the app's error).
    inside_attention_error: the swapped model's attention output of that layer on the same heads against the exact
    model's (averaged the same way); hidden_error: the layer's output (relative Frobenius over all of it). A layer
    that is not swapped still shows what reached it from below.
    """
    report = cancel.checking(progress, None)
    exact = forward(ids, EXACT, device=device, keep_qkv=True)
    n = int(ids.numel())
    rows: list[dict[str, Any]] = []
    for i, swap in enumerate(swaps):
        if report is not None:
            report(i / max(1, len(swaps)), f"{swap.method}, seed {swap.seed}")
        run = forward(ids, swap, device=device)
        params = swap.params(n)
        chosen = list(swap.heads) if swap.heads is not None else list(range(HEADS))
        for layer in range(LAYERS):
            own_map = own_out = float("nan")
            if layer in swap.layers:
                q, k, v = exact.qkv[layer]
                alone = approximation.approximate(
                    swap.method, q[chosen], k[chosen], v[chosen], scale=1.0, seed=swap.layer_seed(layer), **params
                )
                truth = torch.softmax(q[chosen] @ k[chosen].transpose(-1, -2), dim=-1)
                own_map = _mean_relative(alone.attention(), truth)
                own_out = _mean_relative(alone.output, truth @ v[chosen])
            rows.append(
                {
                    "method": swap.method,
                    "fraction": float(swap.fraction),
                    "seed": swap.seed,
                    "layer": layer,
                    "swapped": layer in swap.layers,
                    "own_map_error": own_map,
                    "own_output_error": own_out,
                    "inside_attention_error": _mean_relative(run.context[layer][chosen], exact.context[layer][chosen]),
                    "hidden_error": _relative(run.hidden[layer], exact.hidden[layer]),
                    "embedding_cosine": float(run.embedding @ exact.embedding),
                    "n": n,
                }
            )
    return rows


def _mean_relative(approx: torch.Tensor, exact: torch.Tensor) -> float:
    """The app's error of a multi-head result: each head's relative Frobenius error, averaged over the heads."""
    return float(metrics.relative_frobenius_error(approx, exact).mean())


def _relative(approx: torch.Tensor, exact: torch.Tensor) -> float:
    return float((approx - exact).norm() / exact.norm().clamp_min(1e-30))


# ------------------------------------------------------------------ retrieval on the corpus


def embeddings(sequences: Sequence[torch.Tensor], swap: Swap, *, device: str = "cpu") -> torch.Tensor:
    """(len(sequences), hidden) sentence embeddings of the token sequences under ``swap`` (on the CPU)."""
    return torch.stack([forward(ids, swap, device=device).embedding.cpu() for ids in sequences])


@dataclass(frozen=True)
class RetrievalScores:
    top1: float  # fraction of first halves whose nearest second half is their own
    top5: float  # ... whose own second half is among the 5 nearest
    cosine: float  # mean cosine of each half's embedding to the exact model's embedding of it
    agree_top1: float  # fraction of first halves whose nearest second half is the exact model's nearest
    agree_top5: float  # mean overlap of the 5 nearest with the exact model's 5 nearest (0 to 1)


def retrieval_scores(
    queries: torch.Tensor, documents: torch.Tensor, exact_queries: torch.Tensor, exact_documents: torch.Tensor
) -> RetrievalScores:
    """Scores of one model's embeddings (query i's answer is document i) beside the exact model's embeddings."""
    count = int(queries.shape[0])
    top = min(5, count)
    ranked = (queries @ documents.T).argsort(dim=1, descending=True)[:, :top]
    exact_ranked = (exact_queries @ exact_documents.T).argsort(dim=1, descending=True)[:, :top]
    own = torch.arange(count).reshape(-1, 1)
    overlap = [len(set(a.tolist()) & set(b.tolist())) / top for a, b in zip(ranked, exact_ranked, strict=True)]
    cosine = torch.cat([(queries * exact_queries).sum(1), (documents * exact_documents).sum(1)]).mean()
    return RetrievalScores(
        top1=float((ranked[:, :1] == own).any(1).float().mean()),
        top5=float((ranked == own).any(1).float().mean()),
        cosine=float(cosine),
        agree_top1=float((ranked[:, 0] == exact_ranked[:, 0]).float().mean()),
        agree_top5=float(np.mean(overlap)),
    )


def retrieval(
    passages: Sequence[str],
    methods: Sequence[str],
    fractions: Sequence[float],
    *,
    layers: Sequence[int] = tuple(range(LAYERS)),
    heads: Sequence[int] | None = None,
    seeds: int = 1,
    first_seed: int = 0,
    device: str = "cpu",
    progress: ProgressFn | None = None,
) -> list[dict[str, Any]]:
    """One row per (method, fraction, seed), exact first: top-1 / top-5 accuracy, cosine and agreement.

    Deterministic methods run once per fraction (at ``first_seed``); randomised ones ``seeds`` times (seeds
    first_seed, first_seed + 1, ...).
    """
    if len(passages) < 2:
        raise ParameterError("passages", f"retrieval needs at least 2 passages, got {len(passages)}")
    report = cancel.checking(progress, None)
    cut = [halves(p) for p in passages]
    firsts, seconds = [a for a, _ in cut], [b for _, b in cut]
    plan = [Swap("exact", layers=())] + [
        Swap(m, tuple(layers), None if heads is None else tuple(heads), float(f), first_seed + s)
        for m in methods
        for f in fractions
        for s in range(seeds if registry.get(m).randomized else 1)
    ]
    exact_q = exact_d = torch.empty(0)
    rows = []
    for i, swap in enumerate(plan):
        if report is not None:
            report(i / len(plan), f"{swap.method} at {swap.fraction:g}, seed {swap.seed}")
        queries, documents = embeddings(firsts, swap, device=device), embeddings(seconds, swap, device=device)
        if i == 0:
            exact_q, exact_d = queries, documents
        scores = retrieval_scores(queries, documents, exact_q, exact_d)
        rows.append(
            {"method": swap.method, "fraction": 1.0 if i == 0 else swap.fraction, "seed": swap.seed} | scores.__dict__
        )
    return rows


# ------------------------------------------------------------------ cost, checked before work starts

# One forward pass at n tokens: the model's matrix products (2 flops a multiply-add per weight per token) and
# 12 heads of exact attention (q k^T, softmax, P V). These are GEMMs, far above the limits' assumed rate: one pass at
# n = 114 (2.6 GFLOP) took 0.07-0.43 s on one thread of the busy 2-core reference CPU (6-37 GFLOP/s), 0.5-2.4 s on
# two threads under a load average of 8; 11 GFLOP/s over a whole retrieval run on one thread (benchmarks.model_swap
# --quick, load average 8). Charged at 10 GFLOP/s plus 20 ms of Python per pass (the job deadline stops the rest).
MODEL_FLOPS_PER_TOKEN = 2.0 * LAYERS * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * INTERMEDIATE)
MODEL_FLOPS_PER_SECOND = 1.0e10
PASS_SECONDS = 0.02


def forward_estimate(method: str, n: int, layers: int, heads: int, fraction: float) -> limits.Estimate:
    """One forward pass with ``method`` on ``heads`` heads of ``layers`` layers (the exact attention still runs)."""
    flops = MODEL_FLOPS_PER_TOKEN * n + LAYERS * HEADS * 6.0 * n * n * HEAD_DIM
    nbytes = limits.BASE_BYTES + 8.0 * HEADS * n * n * limits.FLOAT_BYTES
    total = limits.Estimate(nbytes, flops / MODEL_FLOPS_PER_SECOND + PASS_SECONDS)
    if method != "exact" and layers:
        params = budget_params(method, n, HEAD_DIM, fraction)
        one = limits.method_estimate(method, n, HEAD_DIM, heads, params, dense=False)
        total = total + limits.Estimate(0.0, (one.seconds - limits.CALL_SECONDS) * layers + 0.01 * layers)
    return total


def retrieval_estimate(
    passage_tokens: Sequence[int],
    methods: Sequence[str],
    fractions: Sequence[float],
    layers: int,
    heads: int,
    seeds: int,
) -> limits.Estimate:
    """``retrieval``: every half of every passage through the exact model and each planned swap."""
    total = limits.Estimate(0.0, 0.0)
    plan = [("exact", 1.0)] + [
        (m, f) for m in methods for f in fractions for _ in range(seeds if registry.get(m).randomized else 1)
    ]
    peak = 0.0
    for method, fraction in plan:
        for tokens in passage_tokens:
            for half in (tokens // 2 + 2, tokens - tokens // 2 + 2):
                one = forward_estimate(method, half, layers, heads, fraction)
                total = total + limits.Estimate(0.0, one.seconds)
                peak = max(peak, one.bytes)
    return limits.Estimate(peak, total.seconds)


# ------------------------------------------------------------------ what the numbers say


def _mean(values: Sequence[float]) -> float:
    kept = [v for v in values if v == v]
    return float(np.mean(kept)) if kept else float("nan")


def verdict(layer_rows: Sequence[dict[str, Any]], retrieval_rows: Sequence[dict[str, Any]], fraction: float) -> str:
    """One sentence from the numbers at ``fraction``: the method with the smallest and the largest attention-map
    error on its own (mean over swapped layers and seeds), and what each does to top-1 retrieval against the exact
    model (mean over seeds). With one method: its own error, the last layer's error and its retrieval drop."""
    own: dict[str, float] = {}
    last: dict[str, float] = {}
    for method in dict.fromkeys(r["method"] for r in layer_rows):
        mine = [r for r in layer_rows if r["method"] == method]
        own[method] = _mean([r["own_map_error"] for r in mine if r["swapped"]])
        last[method] = _mean([r["hidden_error"] for r in mine if r["layer"] == LAYERS - 1])
    exact = [r["top1"] for r in retrieval_rows if r["method"] == "exact"]
    drop = {
        m: 100
        * (exact[0] - _mean([r["top1"] for r in retrieval_rows if r["method"] == m and r["fraction"] == fraction]))
        for m in own
        if exact
    }
    if not own or not exact:
        return "Pick at least one method to compare."
    budget = _fraction_text(fraction)
    ordered = sorted((m for m in own if own[m] == own[m]), key=own.__getitem__)
    if len(ordered) < 2:
        method = next(iter(own))
        return (
            f"At {budget} of the budget, {registry.get(method).label}'s attention map is {own[method]:.0%} off on its "
            f"own; inside the model the last layer's output is {last[method]:.0%} off, and top-1 retrieval "
            f"{_points(drop[method])} (exact: {exact[0]:.0%})."
        )
    best, worst = ordered[0], ordered[-1]
    ratio = own[worst] / own[best] if own[best] > 0 else float("inf")
    same = abs(drop[worst] - drop[best]) < 2.5
    link = "yet" if same or drop[worst] < drop[best] else "and"
    worst_label, best_label = registry.get(worst).label, registry.get(best).label
    if _points(drop[worst]) == _points(drop[best]):
        effect = f"top-1 retrieval {_points(drop[worst])} for both"
    else:
        effect = f"top-1 retrieval {_points(drop[worst])} for {worst_label} and {_points(drop[best])} for {best_label}"
    return (
        f"At {budget} of the budget, {worst_label}'s attention-map error on its own is {ratio:.1f}× {best_label}'s, "
        f"{link} {effect} (exact: {exact[0]:.0%})."
    )


def _points(drop: float) -> str:
    if drop != drop:
        return "was not measured"
    if abs(drop) < 0.5:
        return "stays where it was"
    return f"drops {drop:.0f} points" if drop > 0 else f"rises {-drop:.0f} points"


def _fraction_text(fraction: float) -> str:
    inverse = 1 / fraction
    return f"1/{inverse:.0f}" if abs(inverse - round(inverse)) < 1e-9 else f"{fraction:g}"


def layer_errors_estimate(
    n: int, methods: Sequence[str], fraction: float, layers: int, heads: int, seeds: int
) -> limits.Estimate:
    """``layer_errors``: the exact pass, each planned swap's pass, and each method alone on each swapped layer's
    heads with its dense map (for the map error). Memory: the largest single step."""
    exact = forward_estimate("exact", n, 0, heads, fraction)
    seconds, peak = exact.seconds, exact.bytes
    for method in methods:
        runs = seeds if registry.get(method).randomized else 1
        one = forward_estimate(method, n, layers, heads, fraction)
        params = budget_params(method, n, HEAD_DIM, fraction)
        alone = limits.method_estimate(method, n, HEAD_DIM, heads, params, dense=True)
        seconds += runs * (one.seconds + layers * alone.seconds)
        peak = max(peak, one.bytes, exact.bytes + alone.bytes)
    return limits.Estimate(peak, seconds)
