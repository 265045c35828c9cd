"""Which keys the sparse side's hash finds: angular LSH (Reformer: cosine order) against SMYRF's XBOX+ then E2LSH
(inner-product order), for ``lsh`` and ``scatterbrain`` at equal parameters, on any q, k, v.

Per method and hashing: the output's relative error against exact attention (median over heads, mean over hash
seeds) and the recall of each query's top keys by q.k (the share of its top ``min(8, ceil(n / 8))`` keys inside the
method's support). ``chance_recall`` is what random balanced chunks would find. benchmarks/hashing.py runs this on
its inputs and adds times; the Sparse + low rank page runs it on the page's input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from core import metrics
from core.approximation import approximate
from core.approximators.lsh import HASHINGS
from core.budget import budget_params
from core.cancel import check

METHODS = ("lsh", "scatterbrain")
MAX_TOP_KEYS = 8


def top_keys(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(..., n, n) bool: each query's top min(8, ceil(n / 8)) keys by q.k (the order at any beta > 0)."""
    logits = q.double() @ k.double().transpose(-1, -2)
    top = min(MAX_TOP_KEYS, math.ceil(q.shape[-2] / 8))
    return torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, logits.topk(top, dim=-1).indices, True)


def chance_recall(n: int, params: Mapping[str, Any]) -> float:
    """The recall of a support of random balanced chunks (independent rounds)."""
    chunk = math.ceil(n / min(int(params["buckets"]), n))
    return 1 - (1 - chunk / n) ** int(params["rounds"])


def measure_hashings(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    beta: float,
    method: str,
    params: Mapping[str, Any],
    seeds: Sequence[int] = (0, 1, 2),
    exact_output: torch.Tensor | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """``method`` at ``params`` with each hashing: the chance recall, and per hashing the output error (median over
    heads, mean over seeds), the errors per seed and the top-key recall."""
    if exact_output is None:
        exact_output = approximate("exact", q, k, v, scale=beta).output
    wanted = top_keys(q, k)
    params = {key: value for key, value in params.items() if key != "hashing"}
    row: dict[str, Any] = {"params": params, "chance_recall": chance_recall(int(q.shape[-2]), params)}
    for index, hashing in enumerate(HASHINGS):
        errors, found = [], 0
        for seed in seeds:
            check()
            result = approximate(method, q, k, v, scale=beta, seed=seed, **params, hashing=hashing)
            errors.append(float(metrics.relative_output_error(result.output, exact_output).median()))
            found += int((result.parts["support"] & wanted).sum())
        row[hashing] = {
            "output_error": sum(errors) / len(errors),
            "output_error_per_seed": errors,
            "top_key_recall": found / (len(seeds) * int(wanted.sum())),
        }
        if progress is not None:
            progress((index + 1) / len(HASHINGS), f"{method}, {hashing} hashing")
    return row


def compare_hashings(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    beta: float,
    fraction: float,
    methods: Sequence[str] = METHODS,
    seeds: Sequence[int] = (0, 1, 2),
    progress: Any = None,
) -> list[dict[str, Any]]:
    """``measure_hashings`` for each method at its budgeted parameters (``core.budget_params`` at ``fraction``)."""
    n, d = int(q.shape[-2]), int(q.shape[-1])
    exact_output = approximate("exact", q, k, v, scale=beta).output
    rows = []
    for index, method in enumerate(methods):

        def report(fraction_done: float, label: str, index: int = index) -> None:
            if progress is not None:
                progress((index + fraction_done) / len(methods), label)

        row = measure_hashings(
            q, k, v, beta=beta, method=method, params=budget_params(method, n, d, fraction), seeds=seeds,
            exact_output=exact_output, progress=report,
        )  # fmt: skip
        rows.append({"method": method, **row})
    return rows
