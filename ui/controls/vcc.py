"""The VCC page's controls: compression mode, block selection, VIP tokens, block size, budget, D and shared J."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

import ui
from core import vcc_study, vcc_tree
from ui.figures import vcc as figures


@dataclass(frozen=True)
class VccControls:
    mode: str
    selector: str
    vip_count: int
    vip_indices: tuple[int, ...]  # named VIP positions; empty means the first vip_count tokens
    n_p: int  # distinct VIP tokens actually used
    block_size: int
    budget: int
    budget_max: int
    correction: bool
    share_heads: bool

    def params(self) -> dict[str, Any]:
        """The VCC method's parameters, as the engine takes them."""
        return {
            "mode": self.mode,
            "selector": self.selector,
            "block_size": self.block_size,
            "fine_blocks": self.budget,
            "scale_correction": self.correction,
            "share_heads": self.share_heads,
            **({"vip_indices": list(self.vip_indices)} if self.vip_indices else {"vip": self.vip_count}),
        }

    def sweep_params(self) -> dict[str, Any]:
        """The parameters the budget sweep holds fixed (it varies the selector, D and the budget itself)."""
        return {k: v for k, v in self.params().items() if k not in ("selector", "scale_correction", "fine_blocks")}


def _vip_positions(s: ui.Settings, tokens: list[str] | None, where: Any) -> list[int]:
    """The VIP tokens named by the user: words of the real model's text, or typed positions."""
    n = s.n
    if tokens is not None:
        chosen = ui.multiselect(
            "VIP words",
            "vip_words",
            [str(i) for i in range(len(tokens))],
            [],
            fmt=lambda i: f"{i} · {tokens[int(i)]}",
            max_items=min(64, n - 2),
            where=where,
            help="Pick the words whose outputs matter (e.g. a question). Empty: the first tokens.",
        )
        return sorted(int(i) for i in chosen)
    raw_positions = ui.text_area(
        "VIP positions (optional)",
        "vip_at",
        "",
        max_chars=300,
        height=68,
        where=where,
        help="Comma-separated positions, e.g. 0, 100, 200. Empty: the first positions.",
    )
    parsed = vcc_study.parse_positions(raw_positions, n)
    if parsed.ignored:
        ui.notice(f"**VIP positions**: ignored `{', '.join(parsed.ignored)[:40]}` (not positions 0…{n - 1}).")
    return list(parsed.positions)


def vcc_controls(s: ui.Settings, tokens: list[str] | None) -> VccControls:
    """Draw the VCC controls in three columns (URL-bound) and return the chosen values."""
    n = s.n
    cols = st.columns(3)
    mode = ui.choice(
        "Compression",
        "mode",
        list(vcc_tree.MODES),
        "two_level",
        fmt=lambda mode: str({"two_level": "two-level", "tree": "tree"}.get(mode)),
        widget="radio",
        where=cols[0],
        help="Two levels (the paper's experiments): blocks of k tokens, the top h refined to single tokens. "
        "Tree (Algorithm 1): a dyadic tree from the whole sequence down, splitting h nodes per level.",
    )
    selector = ui.choice(
        "Block selection",
        "selector",
        list(figures.SELECTOR_LABELS),
        "score",
        fmt=lambda selector: str(figures.SELECTOR_LABELS.get(selector)),
        where=cols[0],
        help="mu: the paper's priority µ (eq. 53), the VIP queries' summed exp-score with the block mean. "
        "Mean softmax: the VIP- and head-averaged attention probability (the authors' released code). Random and "
        "bottom mu (the worst blocks) are baselines.",
    )
    vip_count = ui.int_slider(
        "VIP tokens (first positions)",
        "vip",
        1,
        max(1, min(64, n - 2)),
        min(4 if s.spec.source == "real" else 8, n - 2),
        where=cols[1],
        help="How many tokens are VIP when no positions are named below.",
    )
    vip_indices = _vip_positions(s, tokens, cols[1])
    n_p = len(set(vip_indices or range(vip_count)))
    block_options = vcc_study.block_sizes(max(1, n - n_p))
    block_size = int(
        ui.log_slider(
            "Block size k (two-level)",
            "k",
            block_options,
            min(16, block_options[-1]),
            fmt=lambda x: f"{x:g}",
            where=cols[2],
            help="Coarse block length (two-level mode). The tree is dyadic.",
        )
    )
    split_limits = vcc_tree.max_splits(vcc_tree.build_hierarchy(max(1, n - n_p), mode, block_size))
    budget_max = split_limits[1] if mode == "two_level" else max(split_limits)
    budget = ui.int_slider(
        "Budget h (blocks refined" + (")" if mode == "two_level" else " per level)"),
        "h",
        0,
        max(1, budget_max),
        min(4, budget_max),
        where=cols[2],
        help=f"At most {budget_max} here; the maximum refines everything: exact attention.",
    )
    correction = ui.toggle(
        "Length bias D",
        "D",
        True,
        where=cols[2],
        help="Adds log s to each block's logit, so a block of s tokens weighs as s tokens. Switch off to see why it "
        "is needed: without it a block of s tokens counts as one.",
    )
    share = s.heads > 1 and ui.toggle(
        "All heads share one J",
        "share",
        False,
        where=cols[0],
        help="As in the authors' code, where compression acts before the heads split.",
    )
    return VccControls(
        mode=mode,
        selector=selector,
        vip_count=vip_count,
        vip_indices=tuple(vip_indices),
        n_p=n_p,
        block_size=block_size,
        budget=int(budget),
        budget_max=budget_max,
        correction=bool(correction),
        share_heads=bool(share),
    )
