"""``Settings``: the shared sidebar settings of one page run, parsed from the URL once and held. It computes nothing:
it builds the views (``service.views``) that the service computes; ``ui.results`` asks for them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from core.registry import CAUSAL
from service import placement, views
from service.views import InputSpec


@dataclass(frozen=True)
class Settings:
    """What the sidebar's controls hold after parsing; every engine call is built from it as a view, whose fields are
    its cache key."""

    spec: InputSpec  # what determines q, k, v; its seed is every random draw's (data and methods)
    tau: float  # temperature: logits = q.k / tau
    device: str  # requested: auto | cpu | cuda
    device_used: torch.device
    fraction: float  # memory budget as a fraction of full attention
    head: int  # the head shown in single-head views
    # Display only: heatmaps drawn with positions sorted by cluster; every computation uses the real positions.
    sort_clusters: bool = False
    causal: bool = False  # every method in its causal form, against causally masked exact attention

    @property
    def seed(self) -> int:
        return self.spec.seed

    @property
    def beta(self) -> float:
        """Inverse temperature: the scale passed to core.approximate."""
        return 1.0 / self.tau

    @property
    def n(self) -> int:
        return self.spec.n

    @property
    def d(self) -> int:
        return self.spec.d

    @property
    def heads(self) -> int:
        return self.spec.heads

    @property
    def device_name(self) -> str:
        """The device the views carry: this process's, or ``X@worker`` when a cluster worker computes them."""
        return placement.view_device_name(self.device, self.device_used)

    @property
    def by_cluster(self) -> bool:
        """Maps are drawn with positions sorted by cluster ("Order positions by cluster", clustered input only)."""
        return self.sort_clusters and self.spec.source == "clustered"

    def order_note(self) -> str:
        """One line under the maps saying they are drawn in cluster order, and how to go back ("" if they are not)."""
        if not self.by_cluster:
            return ""
        return (
            "Drawn in cluster order, so clusters show as blocks (display only: methods run on the real positions). "
            "Position order: switch off “Order positions by cluster” (`?sort_clusters=false`)."
        )

    def exact_view(self) -> views.ExactAttention:
        return views.ExactAttention(self.spec, self.beta, self.device_name, self.causal)

    def entropy_view(self) -> views.EntropyReadout:
        return views.EntropyReadout(self.exact_view())

    def method_run(self, method: str, params: dict[str, Any]) -> views.MethodRun:
        """The view of one method at these settings (its cache key, and what the engine runs). Under the causal mask
        every method runs with causal=True: one without a causal form is refused by the engine, with its reason."""
        if self.causal:
            params = {**params, CAUSAL: True}
        return views.MethodRun.of(self.spec, self.beta, self.device_name, method, params, self.seed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "input": self.spec.source,
            "n": self.n,
            "d": self.d,
            "heads": self.heads,
            "tau": self.tau,
            "beta": self.beta,
            "clusters": self.spec.clusters,
            "spread": self.spec.spread,
            "seed": self.seed,
            "device": self.device,
            "device_used": self.device_name,
            "budget": self.fraction,
            "causal": self.causal,
            "layer": self.spec.layer,
            "head": self.head,
        }
