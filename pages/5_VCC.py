"""VCC: VIP-token centric compression. The selection tree, the mixed-resolution attention, error vs budget,
cost, and the storage tree T(C) with the entries one layer update rewrites."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd
import streamlit as st
import torch

import core
import ui
from core import limits as server_limits
from core import vcc_study, vcc_tree
from ui import compute, result_cache
from ui.figures import vcc as figures

SWEEP_AUTO_SECONDS = 5.0  # a longer estimated sweep waits for its button (then it is cached)

ui.page("VCC", icon="🌳")
s = ui.sidebar(
    max_n=1024, show_budget=False, defaults={"n": 256, "d": 32, "heads": 1, "tau": 0.3, "spread": 0.3, "clusters": 8}
)
ui.explain(
    "**VCC** keeps a few *VIP tokens* exact (the tokens whose outputs matter: a question, a [CLS], masked words) and "
    "squeezes all the other tokens into block averages. Blocks the VIP queries attend to are refined to single "
    "tokens; the rest stay coarse. Softmax then runs on the short compressed sequence of r rows, and each row's "
    "output is copied back to every token of its block. Adding log(block length) to a block's logit (the matrix D) "
    "lets one averaged key stand in for all of its tokens.",
    r"\hat Z(q) = \sum_{j \in P} e^{\beta q\cdot p_j} + \sum_{b \in J} s_b\, e^{\beta q \cdot \bar c_b} "
    r"\;\le\; Z(q), \qquad \mu_b = \sum_{i \in P} e^{\beta\, p_i \cdot \bar c_b}",
)
tokens = s.inputs().tokens
n = s.n

# ------------------------------------------------------------------ controls
cols = st.columns(3)
mode = ui.choice(
    "Compression",
    "mode",
    list(vcc_tree.MODES),
    "two_level",
    fmt={"two_level": "two-level", "tree": "tree"}.get,
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
    fmt=figures.SELECTOR_LABELS.get,
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
if tokens is not None:
    chosen = ui.multiselect(
        "VIP words",
        "vip_words",
        [str(i) for i in range(len(tokens))],
        [],
        fmt=lambda i: f"{i} · {tokens[int(i)]}",
        max_items=min(64, n - 2),
        where=cols[1],
        help="Pick the words whose outputs matter (e.g. a question). Empty: the first tokens.",
    )
    vip_indices = sorted(int(i) for i in chosen)
else:
    raw_positions = ui.text_area(
        "VIP positions (optional)",
        "vip_at",
        "",
        max_chars=300,
        height=68,
        where=cols[1],
        help="Comma-separated positions, e.g. 0, 100, 200. Empty: the first positions.",
    )
    parsed = vcc_study.parse_positions(raw_positions, n)
    if parsed.ignored:
        ui.notice(f"**VIP positions**: ignored `{', '.join(parsed.ignored)[:40]}` (not positions 0…{n - 1}).")
    vip_indices = parsed.positions
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
    "Length bias D (log s on each block's logit)",
    "D",
    True,
    where=cols[2],
    help="Switch off to see why it is needed: without it a block of s tokens counts as one.",
)
share = s.heads > 1 and ui.toggle(
    "All heads share one J",
    "share",
    False,
    where=cols[0],
    help="As in the authors' code, where compression acts before the heads split.",
)
params: dict[str, Any] = {
    "mode": mode,
    "selector": selector,
    "block_size": block_size,
    "fine_blocks": int(budget),
    "scale_correction": bool(correction),
    "share_heads": bool(share),
    **({"vip_indices": vip_indices} if vip_indices else {"vip": vip_count}),
}


# ------------------------------------------------------------------ cached engine calls
def _params(key: tuple) -> dict[str, Any]:
    return {name: list(value) if isinstance(value, tuple) else value for name, value in key}


@st.cache_data(show_spinner="Running VCC…", max_entries=32)
def vcc_view(spec: compute.InputSpec, beta: float, key: tuple, seed: int, head: int) -> vcc_study.VccView:
    q, k, v = compute.tensors(spec, torch.device("cpu"))
    return vcc_study.vcc_view(q, k, v, beta, _params(key), seed, head)


def error_sweep(spec: compute.InputSpec, beta: float, key: tuple, seed: int, maximum: int, report: Any = None):
    q, k, v = compute.tensors(spec, torch.device("cpu"))
    return vcc_study.error_sweep(q, k, v, beta, _params(key), seed, maximum, progress=report)


try:
    view = vcc_view(s.spec, s.beta, ui.params_key(params), s.seed, s.head)
except core.ParameterError as exc:
    st.error(f"VCC cannot run with these settings: {exc}")
    ui.finish()
    st.stop()
if view.info.get("notice"):
    ui.notice(f"**Budget**: {view.info['notice']}")

# ------------------------------------------------------------------ summary
r = int(view.r[s.head]) if view.r.ndim else int(view.r)
metric_cols = st.columns(5)
metric_cols[0].metric("Compressed length r", f"{r}", help="r = n_p + |J|: VIP tokens plus the blocks of J.")
metric_cols[1].metric("r / n", f"{r / n:.2f}")
metric_cols[2].metric(
    "VIP-row output error",
    f"{float(view.vip_error[s.head]):.3g}",
    help="Relative Frobenius error of the VIP tokens' attention outputs (the paper's target).",
)
metric_cols[3].metric(
    "All-row output error",
    f"{float(view.all_error[s.head]):.3g}",
    help="Every row, including compressed rows whose output is a block's shared output.",
)
metric_cols[4].metric(
    "Memory vs exact",
    f"{100 * view.memory / (s.heads * n * n):.1f} %",
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

# ------------------------------------------------------------------ selection tree + token strip
st.subheader("The selection tree and the resolution of every token")
ui.show_figure(
    figures.tree_figure(view.nodes, view.resolution, view.vip, tokens),
    "vcc_selection_tree",
    data=pd.DataFrame(view.nodes),
    key="tree",
    caption="Nodes are blocks, coloured by log µ; refined nodes have an orange ring; squares are the "
    "leaves, i.e. the rows of the compressed sequence. The strip below colours each token by the "
    "length of the block it ended in (dark = single token, bright = long block); stars are VIPs.",
)

# ------------------------------------------------------------------ heatmaps
st.subheader(f"Attention at mixed resolution (head {s.head})")
log_colour = ui.toggle("Log colour scale", "logc", True, help="Attention weights span many orders of magnitude.")
factor = ui.block_factor(n)
tick_labels = tokens if tokens is not None and n <= 32 else None  # more words than that do not fit the axes
difference = view.attention - view.exact
heat_cols = st.columns(3)
with heat_cols[0]:
    ui.show_figure(
        ui.heatmap(ui.display(view.exact), "Exact softmax", factor=factor, log=log_colour, labels=tick_labels),
        "vcc_exact",
        data={"attention": view.exact},
        png=lambda: ui.png_bytes(view.exact, log=log_colour),
        key="exact",
    )
with heat_cols[1]:
    ui.show_figure(
        ui.heatmap(
            ui.display(view.attention), "VCC (tiles = blocks)", factor=factor, log=log_colour, labels=tick_labels
        ),
        "vcc_attention",
        data={"attention": view.attention},
        png=lambda: ui.png_bytes(view.attention, log=log_colour),
        key="vcc",
    )
with heat_cols[2]:
    ui.show_figure(
        ui.heatmap(
            ui.block_reduce(difference, factor, "absmax"),
            "VCC − exact",
            kind="error",
            factor=factor,
            hover_label="error",
            labels=tick_labels,
        ),
        "vcc_error",
        data={"error": difference},
        png=lambda: ui.png_bytes(difference, "error"),
        key="err",
    )
st.caption(
    "Rows of one block are identical (their query is the block mean) and columns of one block share one value "
    "(their key is the block mean, counted s times by D). VIP rows are exact on VIP columns up to one "
    "renormalising factor per row. " + ui.downsample_caption(n, factor)
)

# ------------------------------------------------------------------ error vs budget (heavy: the shared job path)
st.subheader("Error vs budget")
rows_choice = ui.choice(
    "Error of",
    "rows",
    ["vip", "all"],
    "vip",
    widget="radio",
    fmt=lambda v: "VIP rows (the paper's target)" if v == "vip" else "all rows",
)
sweep_key = {k: v for k, v in params.items() if k not in ("selector", "scale_correction", "fine_blocks")}
runs = vcc_study.sweep_runs(budget_max)
sweep_args = (s.spec, s.beta, ui.params_key(sweep_key), s.seed, budget_max)
sweep_seconds = ui.estimate_seconds(runs * s.spec.heads * s.n**2)
sweep = result_cache.get("vcc_error_sweep", sweep_args)
if sweep is None and ui.state.within_limits(
    lambda: server_limits.check(
        "n",
        s.n,
        server_limits.sizes_up_to(s.n),
        lambda n: server_limits.scaled(
            server_limits.method_estimate("vcc", n, s.d, s.heads, sweep_key, dense=False), runs
        ),
    )
):
    requested: set[tuple] = st.session_state.setdefault("vcc_sweeps_requested", set())  # survives other reruns
    label = f"Sweep the budget ({runs} VCC runs, about {sweep_seconds:.0f} s)"
    if sweep_seconds > SWEEP_AUTO_SECONDS and st.button(label, key="vcc_sweep", type="primary"):
        requested.add(sweep_args)
    if sweep_seconds <= SWEEP_AUTO_SECONDS or sweep_args in requested:
        sweep = ui.run_heavy(
            "vcc_error_sweep",
            sweep_args,
            lambda report: error_sweep(*sweep_args, report=report),
            sweep_seconds,
            title="Sweeping the budget for every selector",
        )
if sweep is not None:
    ui.show_figure(
        figures.error_budget_figure(sweep, n, rows_choice, r, mean_over_heads=s.heads > 1),
        "vcc_error_vs_budget",
        data=pd.DataFrame([asdict(p) for p in sweep]).rename(columns={"scale_correction": "D"}),
        key="sweep",
        caption=(
            "With one VIP token µ and the mean softmax rank blocks alike, so their curves coincide. "
            if n_p == 1
            else ""
        )
        + "Solid: with D; dotted: without (click the legend to show the others). The dashed line is the "
        "current budget. Errors are measured, derived figures, not the paper's.",
    )

# ------------------------------------------------------------------ cost
st.subheader("Cost: compressed length and FLOPs vs n (computed, not timed)")
cost = vcc_study.cost_curve(vcc_study.COST_LENGTHS, s.d, s.d, n_p, mode, block_size, int(budget))
ui.show_figure(
    figures.cost_figure(cost, n),
    "vcc_cost",
    key="cost",
    data=pd.DataFrame({"n": cost.n, "r": cost.r, "vcc_flops": cost.flops, "exact_flops": cost.exact_flops}),
    caption=f"From the paper's complexity (App. 6.4) with n_p = {n_p}, h = {budget}"
    + (
        f", k = {block_size} held fixed: r = n_p + n_c/k + h(k−1), so r grows like n/k"
        if mode == "two_level"
        else " per level held fixed: r = n_p + 1 + Σ h_s, so r grows like h log₂ n"
    )
    + ". Attention on r rows costs about 2r²(d + d_v). The computed analogue of the paper's Fig. 1; "
    "nothing here is timed.",
)

# ------------------------------------------------------------------ storage tree T(C)
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

# ------------------------------------------------------------------ explanation and the paper's numbers
st.subheader("Why VIP tokens, and what D does")
st.markdown(
    "- **VIP tokens** are the few tokens whose outputs the task reads (the question in QA, the [CLS] token, the "
    "masked words in pre-training). Their rows of the attention matrix are the ones that must be right.\n"
    "- **They guide the compression**: a block is worth refining when the VIP queries attend to it strongly, "
    "because its error in a VIP row is that attention times the spread of its keys (eq. 51). Blocks nobody looks at "
    "can stay coarse. Tokens that attend to the VIPs inherit fine blocks too, which is how answer spans survive.\n"
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

ui.finish()
