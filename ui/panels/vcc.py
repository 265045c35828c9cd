"""The VCC page's sections: summary, selection tree, mixed-resolution heatmaps, error vs budget, cost, the storage
tree T(C), and the explanation with the paper's numbers."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd
import streamlit as st

import service.views
import ui
from core import limits as server_limits
from core import vcc_study
from service.compute import reorder
from ui.controls.vcc import VccControls
from ui.figures import vcc as figures

SWEEP_AUTO_SECONDS = 5.0  # a longer estimated sweep waits for its button (then it is cached)


def intro() -> None:
    ui.explain(
        "**VCC** keeps a few *VIP tokens* exact (the tokens whose outputs matter: a question, a [CLS], masked words) "
        "and squeezes all the other tokens into block averages. Blocks the VIP queries attend to are refined to "
        "single tokens; the rest stay coarse. Softmax then runs on the short compressed sequence of r rows, and each "
        "row's output is copied back to every token of its block. Adding log(block length) to a block's logit (the "
        "matrix D) lets one averaged key stand in for all of its tokens.",
        r"\hat Z(q) = \sum_{j \in P} e^{\beta q\cdot p_j} + \sum_{b \in J} s_b\, e^{\beta q \cdot \bar c_b} "
        r"\;\le\; Z(q), \qquad \mu_b = \sum_{i \in P} e^{\beta\, p_i \cdot \bar c_b}",
    )


def summary(view: vcc_study.VccView, head: int, heads: int, n: int) -> None:
    """Five metrics and the caption with the sizes and splits per level."""
    r = view.compressed_length(head)
    # Which head the numbers are of, next to them: all but the memory are the shown head's own.
    st.caption(f"**Head {head}** (the one drawn below)" + (f"; memory counts all {heads} heads." if heads > 1 else "."))
    metric_cols = st.columns(5)
    metric_cols[0].metric("Compressed length r", f"{r}", help="r = n_p + |J|: VIP tokens plus the blocks of J.")
    metric_cols[1].metric("r / n", f"{r / n:.2f}")
    metric_cols[2].metric(
        "VIP-row output error",
        f"{float(view.vip_error[head]):.3g}",
        help="Relative Frobenius error of the VIP tokens' attention outputs (the paper's target).",
    )
    metric_cols[3].metric(
        "All-row output error",
        f"{float(view.all_error[head]):.3g}",
        help="Every row, including compressed rows whose output is a block's shared output.",
    )
    metric_cols[4].metric(
        "Memory vs exact",
        f"{view.memory_percent(heads, n):.1f} %",
        help="r² compressed scores plus n_p selection scores per scored block, against n² per head.",
    )
    info, pad = view.info, view.info.get("padding", 0)
    st.caption(
        f"n_p = {info['n_p']} VIP tokens, n_c = {info['n_c']} compressed tokens"
        + (
            f", padded with {pad} empty slot(s) to {info['padded_n_c']} (padding holds no token and changes nothing)"
            if pad
            else ""
        )
        + f". Splits per level (root first): {info['splits_per_level']}."
    )


def selection_tree(view: vcc_study.VccView, tokens: list[str] | None) -> None:
    st.subheader("The selection tree and the resolution of every token")
    ui.show_figure(
        figures.tree_figure(view.nodes, view.resolution, view.vip, tokens),
        "vcc_selection_tree",
        data=pd.DataFrame(view.nodes),
        key="tree",
        caption=figures.tree_caption(view.resolution),
    )


def heatmaps(view: vcc_study.VccView, head: int, n: int, tokens: list[str] | None, order: Any = None) -> None:
    """Exact, VCC and their difference side by side, with the log-colour toggle.

    order: the display order of the positions (cluster order), applied before the reduction; None: position order.
    """
    st.subheader(f"Attention at mixed resolution (head {head})")
    log_colour = ui.toggle("Log colour scale", "logc", True, help="Attention weights span many orders of magnitude.")
    factor = ui.block_factor(n)
    tick_labels = tokens if tokens is not None and n <= 32 else None  # more words than that do not fit the axes
    difference = view.difference()

    def drawn(matrix: Any, mode: str = "max") -> Any:
        return ui.block_reduce(matrix if order is None else reorder(matrix, order), factor, mode)

    maps = (  # (title, full matrix, drawn matrix, heatmap kind)
        ("Exact softmax", view.exact, drawn(view.exact), "attention"),
        ("VCC (tiles = blocks)", view.attention, drawn(view.attention), "attention"),
        ("VCC − exact", difference, drawn(difference, "absmax"), "error"),
    )
    cells: list[ui.GridCell | None] = []
    exports: dict[str, dict[str, Any]] = {}
    for title, matrix, shown, kind in maps:
        log = log_colour and kind == "attention"
        hover = "error" if kind == "error" else "value"
        cells.append(
            ui.GridCell(
                title, shown, kind=kind, log=log, factor=factor, hover_label=hover, x_title=True, labels=tick_labels
            )
        )
        exports[title] = {
            "png": lambda m=matrix, k=kind, lg=log: ui.png_bytes(m, k, log=lg),
            "png_label": "PNG (full resolution)",
            "data": {kind: matrix},
        }
    # One figure of three maps instead of three charts: the browser draws (and redraws) it in one pass.
    ui.show_figure(
        ui.heatmap_grid([cells], columns=3),
        "vcc_maps",
        key="maps",
        parts=exports,
        data=lambda: {"exact": view.exact, "vcc": view.attention, "error": difference},
        data_note="Data: the three maps of the shown head at full resolution.",
    )
    st.caption(
        "Rows of one block are identical (their query is the block mean) and columns of one block share one value "
        "(their key is the block mean, counted s times by D). VIP rows are exact on VIP columns up to one "
        "renormalising factor per row. "
        + ui.downsample_caption(n, factor)
        + (
            " Positions drawn in cluster order (display only): VCC's blocks are runs of real positions, so its "
            "tiles show as stripes; switch off “Order positions by cluster” in the sidebar to see them."
            if order is not None
            else ""
        )
    )


def _budget_sweep(s: ui.Settings, controls: VccControls) -> list[vcc_study.SweepPoint] | None:
    """The sweep from the shared cache, or run as a job (a long one waits for its button); None if not run."""
    sweep_key = controls.sweep_params()
    runs = vcc_study.sweep_runs(controls.budget_max)
    view = service.views.VccSweep(s.spec, s.beta, ui.params_key(sweep_key), s.seed, controls.budget_max)
    sweep_seconds = vcc_study.sweep_seconds(runs, s.spec.heads, s.n)
    sweep = service.views.lookup(view)
    if sweep is None and ui.within_limits(
        lambda: server_limits.check(
            "n",
            s.n,
            server_limits.sizes_up_to(s.n),
            lambda n: server_limits.scaled(
                server_limits.method_estimate("vcc", n, s.d, s.heads, sweep_key, dense=False), runs
            ),
        )
    ):
        requested: set[str] = st.session_state.setdefault("vcc_sweeps_requested", set())  # survives other reruns
        label = f"Sweep the budget ({runs} VCC runs, about {sweep_seconds:.0f} s)"
        if sweep_seconds > SWEEP_AUTO_SECONDS and st.button(label, key="vcc_sweep", type="primary"):
            requested.add(view.cache_key())
        if sweep_seconds <= SWEEP_AUTO_SECONDS or view.cache_key() in requested:
            sweep = service.views.run(view, sweep_seconds, title="Sweeping the budget for every selector")
    return sweep


def error_vs_budget(s: ui.Settings, controls: VccControls, r: int) -> None:
    """The error of every selector, with and without D, over the budget (heavy: the shared job path)."""
    st.subheader("Error vs budget")
    rows_choice = ui.choice(
        "Error of",
        "rows",
        ["vip", "all"],
        "vip",
        widget="radio",
        fmt=lambda v: "VIP rows (the paper's target)" if v == "vip" else "all rows",
    )
    sweep = _budget_sweep(s, controls)
    if sweep is None:
        return
    ui.show_figure(
        figures.error_budget_figure(sweep, s.n, rows_choice, r, mean_over_heads=s.heads > 1),
        "vcc_error_vs_budget",
        data=pd.DataFrame([asdict(p) for p in sweep]).rename(columns={"scale_correction": "D"}),
        key="sweep",
        caption=(
            "With one VIP token µ and the mean softmax rank blocks alike, so their curves coincide. "
            if controls.n_p == 1
            else ""
        )
        + "Solid: with D; dotted: without (click the legend to show the others). The dashed line is the "
        "current budget. Errors are measured, derived figures, not the paper's.",
    )


def cost(curve: vcc_study.CostCurve, n: int, controls: VccControls) -> None:
    st.subheader("Cost: compressed length and FLOPs vs n (computed, not timed)")
    ui.show_figure(
        figures.cost_figure(curve, n),
        "vcc_cost",
        key="cost",
        data=pd.DataFrame({"n": curve.n, "r": curve.r, "vcc_flops": curve.flops, "exact_flops": curve.exact_flops}),
        caption=f"From the paper's complexity (App. 6.4) with n_p = {controls.n_p}, h = {controls.budget}"
        + (
            f", k = {controls.block_size} held fixed: r = n_p + n_c/k + h(k−1), so r grows like n/k"
            if controls.mode == "two_level"
            else " per level held fixed: r = n_p + 1 + Σ h_s, so r grows like h log₂ n"
        )
        + ". Attention on r rows costs about 2r²(d + d_v). The computed analogue of the paper's Fig. 1; "
        "nothing here is timed.",
    )


def storage_tree(view: vcc_study.VccView) -> None:
    st.subheader("The storage tree T(C) and one layer update (Algorithm 2)")
    leaves, internal = vcc_study.tree_counts(view.nodes)
    ui.show_figure(
        figures.storage_figure(view.storage, view.positions_c),
        "vcc_storage_tree",
        data=pd.DataFrame(view.storage),
        key="storage",
        caption=f"{view.n_changed} of {view.n_entries} entries rewritten = |J| + #internal = "
        f"{leaves} + {internal}. The layer here is X + attention(X) on the values. Δ entries below a "
        "leaf are never touched: every token of a block gets the same update (Prop. 6.4). "
        f"Rebuilding all tokens from the updated tree matches explicit decompression "
        f"S†(Y − SC) + C to {view.update_gap:.1e}.",
    )


def why_vip_and_d() -> None:
    """Why VIP tokens and D matter, and the paper's headline numbers (quoted)."""
    st.subheader("Why VIP tokens, and what D does")
    st.markdown(
        "- **VIP tokens** are the few tokens whose outputs the task reads (the question in QA, the [CLS] token, the "
        "masked words in pre-training). Their rows of the attention matrix are the ones that must be right.\n"
        "- **They guide the compression**: a block is worth refining when the VIP queries attend to it strongly, "
        "because its error in a VIP row is that attention times the spread of its keys (eq. 51). Blocks nobody looks "
        "at can stay coarse. Tokens that attend to the VIPs inherit fine blocks too, which is how answer spans "
        "survive.\n"
        "- **D** = diag(block lengths). One averaged key stands for s tokens, so its weight is multiplied by s "
        "(log s added to its logit). Without D a 64-token block weighs like one token; with D, uniform attention "
        "(τ → ∞) is reproduced exactly, and the VIP normaliser Ẑ never exceeds the true Z (Jensen)."
    )
    st.markdown("**The paper's headline numbers** (Zeng et al. 2023, arXiv 2305.04241; quoted, not reproduced here):")
    # Table 1 on its own row: at three columns its last column (and Table 3's F1) were cut off at 1400 px.
    for where, (title, table) in zip([st.container(), *st.columns(2)], vcc_study.PAPER_TABLES.items(), strict=True):
        where.caption(title)
        where.dataframe(pd.DataFrame(table), hide_index=True, width="stretch")
    st.caption(
        "The paper: more than 3× faster than full attention at 4K and 16K with equal or better accuracy, and F1 "
        "keeps rising from 16K to 128K tokens. Those are trained models on A100s; this page only shows the "
        "attention approximation on your input."
    )
