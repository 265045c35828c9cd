"""VCC: VIP-token centric compression. The selection tree, the mixed-resolution attention, error vs budget,
cost, and the storage tree T(C) with the entries one layer update rewrites."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch
from plotly.subplots import make_subplots

import core
import ui
from core import limits as server_limits
from core import vcc_tree
from core.approximators.vcc import cost_model
from ui import compute

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

arrays = s.inputs()
tokens = arrays.tokens
n = s.n
MODE_LABELS = {"two_level": "two-level", "tree": "tree"}
# Short ASCII labels: a choice's label is also its value in the shared link.
SELECTOR_LABELS = {
    "score": "mu (eq. 53)",
    "softmax": "mean softmax",
    "random": "random",
    "bottom": "bottom mu",
}

# ------------------------------------------------------------------ controls
cols = st.columns(3)
mode = ui.choice(
    "Compression",
    "mode",
    list(MODE_LABELS),
    "two_level",
    fmt=MODE_LABELS.get,
    widget="radio",
    where=cols[0],
    help="Two levels (the paper's experiments): blocks of k tokens, the top h refined to single tokens. "
    "Tree (Algorithm 1): a dyadic tree from the whole sequence down, splitting h nodes per level.",
)
selector = ui.choice(
    "Block selection",
    "selector",
    list(SELECTOR_LABELS),
    "score",
    fmt=SELECTOR_LABELS.get,
    where=cols[0],
    help="mu: the paper's priority µ (eq. 53), the VIP queries' summed exp-score with the block mean. "
    "Mean softmax: the VIP- and head-averaged attention probability (the authors' released code). Random and "
    "bottom mu (the worst blocks) are baselines.",
)
vip_default = 4 if s.spec.source == "real" else 8
vip_count = ui.int_slider(
    "VIP tokens (first positions)",
    "vip",
    1,
    max(1, min(64, n - 2)),
    min(vip_default, n - 2),
    where=cols[1],
    help="How many tokens are VIP when no positions are named below.",
)
vip_indices: list[int] = []
if tokens is not None:
    options = [str(i) for i in range(len(tokens))]
    chosen = ui.multiselect(
        "VIP words",
        "vip_words",
        options,
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
    parsed: list[int] = []
    bad = []
    for part in raw_positions.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            parsed.append(int(part))
        except ValueError:
            bad.append(part)
    outside = [i for i in parsed if not 0 <= i < n]
    if bad or outside:
        ignored = ", ".join([*bad, *(str(i) for i in outside)])[:40]
        ui.notice(f"**VIP positions**: ignored `{ignored}` (not positions 0…{n - 1}).")
    vip_indices = sorted({i for i in parsed if 0 <= i < n})
vip_list = vip_indices or list(range(vip_count))
n_p = len(set(vip_list))
n_c_guess = max(1, n - n_p)
block_options = [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= max(1, n_c_guess)]
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
hierarchy = vcc_tree.build_hierarchy(n_c_guess, mode, block_size)
limits = vcc_tree.max_splits(hierarchy)
budget_max = limits[1] if mode == "two_level" else max(limits)
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
share = False
if s.heads > 1:
    share = ui.toggle(
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
}
if vip_indices:
    params["vip_indices"] = vip_indices
else:
    params["vip"] = vip_count


# ------------------------------------------------------------------ cached engine calls
def _tensors(spec: compute.InputSpec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return compute.tensors(spec, torch.device("cpu"))


def _as_params(key: tuple) -> dict[str, Any]:
    return {name: list(value) if isinstance(value, tuple) else value for name, value in key}


def _rel(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    return (torch.linalg.matrix_norm(a - b) / torch.linalg.matrix_norm(b).clamp_min(1e-30)).numpy()


@st.cache_data(show_spinner="Running VCC…", max_entries=32)
def vcc_view(spec: compute.InputSpec, beta: float, key: tuple, seed: int, head: int) -> dict[str, Any]:
    """Everything the page draws for the shown head (numpy and plain Python only)."""
    q, k, v = _tensors(spec)
    kwargs = _as_params(key)
    result = core.approximate("vcc", q, k, v, scale=beta, seed=seed, **kwargs)
    exact = core.approximate("exact", q, k, v, scale=beta)
    vip = result.parts["vip_positions"]
    out = {
        "info": dict(result.info),
        "vip": vip,
        "vip_error": _rel(result.output[:, vip], exact.output[:, vip]),
        "all_error": _rel(result.output, exact.output),
        "memory": int(result.cost.memory),
        "flops": int(result.cost.flops),
        "r": result.parts["r"].numpy(),
    }
    out["attention"] = result.attention()[head].float().numpy()
    out["exact"] = exact.attention()[head].float().numpy()
    nodes = result.parts["selection_tree"][head]
    out["nodes"] = [node.__dict__ for node in nodes]
    out["resolution"] = result.parts["resolution"][head].numpy()
    out["segments"] = result.parts["segments"][head].numpy()
    out["compressed"] = result.parts["compressed_attention"][head].float().numpy()
    update = result.parts["layer_update"][head]
    tree = update["before"]
    storage = []
    for level, lv in enumerate(tree.hierarchy.levels):
        before = tree.deltas[level] if level else tree.root[None]
        after = update["after"].deltas[level] if level else update["after"].root[None]
        for index in range(lv.nodes):
            count = int(lv.counts[index])
            if count == 0:
                continue
            start = int(lv.starts[index])
            storage.append(
                {
                    "level": level,
                    "index": index,
                    "start": start,
                    "count": count,
                    "size": lv.size,
                    "changed": bool(update["changed"][level][index]),
                    "before": float(before[index].norm()),
                    "after": float(after[index].norm()),
                }
            )
    out["storage"] = storage
    out["n_changed"] = update["n_changed"]
    out["n_entries"] = update["n_entries"]
    out["update_gap"] = float((update["materialised"] - update["explicit"]).abs().max())
    out["positions_c"] = [i for i in range(spec.n) if i not in set(vip)]
    return out


def sweep_budgets(maximum: int) -> list[int]:
    grid = {0, maximum}
    h = 1
    while h < maximum:
        grid.add(h)
        h = h + 1 if h < 4 else int(math.ceil(h * 1.5))
    return sorted(grid)


def error_sweep(
    spec: compute.InputSpec, beta: float, key: tuple, seed: int, maximum: int, report: Any = None
) -> list[dict[str, Any]]:
    """VIP-row and all-row output errors (mean over heads) for every selector, with and without D."""
    q, k, v = _tensors(spec)
    base = _as_params(key)
    exact = core.approximate("exact", q, k, v, scale=beta).output
    rows = []
    for selector_name in SELECTOR_LABELS:
        for with_d in (True, False):
            for h in sweep_budgets(maximum):
                if report is not None:  # also where a cancelled job stops
                    report(len(rows) / (2 * len(SELECTOR_LABELS) * len(sweep_budgets(maximum))), selector_name)
                params_h = dict(base, selector=selector_name, scale_correction=with_d, fine_blocks=h)
                result = core.approximate("vcc", q, k, v, scale=beta, seed=seed, **params_h)
                vip = result.parts["vip_positions"]
                rows.append(
                    {
                        "selector": selector_name,
                        "D": with_d,
                        "h": h,
                        "r": float(result.parts["r"].float().mean()),
                        "vip_error": float(_rel(result.output[:, vip], exact[:, vip]).mean()),
                        "all_error": float(_rel(result.output, exact).mean()),
                    }
                )
    return rows


try:
    view = vcc_view(s.spec, s.beta, ui.params_key(params), s.seed, s.head)
except core.ParameterError as exc:
    st.error(f"VCC cannot run with these settings: {exc}")
    ui.finish()
    st.stop()

info = view["info"]
if info.get("notice"):
    ui.notice(f"**Budget**: {info['notice']}")

# ------------------------------------------------------------------ summary
r = int(view["r"][s.head]) if view["r"].ndim else int(view["r"])
metric_cols = st.columns(5)
metric_cols[0].metric("Compressed length r", f"{r}", help="r = n_p + |J|: VIP tokens plus the blocks of J.")
metric_cols[1].metric("r / n", f"{r / n:.2f}")
metric_cols[2].metric(
    "VIP-row output error",
    f"{float(view['vip_error'][s.head]):.3g}",
    help="Relative Frobenius error of the VIP tokens' attention outputs (the paper's target).",
)
metric_cols[3].metric(
    "All-row output error",
    f"{float(view['all_error'][s.head]):.3g}",
    help="Every row, including compressed rows whose output is a block's shared output.",
)
metric_cols[4].metric(
    "Memory vs exact",
    f"{100 * view['memory'] / (s.heads * n * n):.1f} %",
    help="r² compressed scores plus n_p selection scores per scored block, against n² per head.",
)
pad = info.get("padding", 0)
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


def tree_figure(nodes: list[dict[str, Any]], resolution: np.ndarray, vip: list[int]) -> go.Figure:
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.8, 0.2], vertical_spacing=0.04)
    by_id = {node["id"]: node for node in nodes}

    def centre(node: dict[str, Any]) -> float:
        return (node["first"] + node["last"]) / 2

    edge_x: list[float | None] = []
    edge_y: list[float | None] = []
    for node in nodes:
        if node["parent"] >= 0:
            parent = by_id[node["parent"]]
            edge_x += [centre(parent), centre(node), None]
            edge_y += [parent["level"], node["level"], None]
    fig.add_trace(
        go.Scatter(
            x=edge_x, y=edge_y, mode="lines", line={"color": "#bbbbbb", "width": 1}, hoverinfo="skip", showlegend=False
        ),
        row=1,
        col=1,
    )
    mus = np.array([node["log_mu"] for node in nodes])
    lo, hi = float(mus.min()), float(mus.max())
    kinds = (
        ("split", "circle", "refined (split)"),
        ("pass", "diamond-open", "padding pass-through (free)"),
        ("leaf", "square", "leaf = compressed row"),
    )
    for status, symbol, name in kinds:
        group = [node for node in nodes if node["status"] == status]
        if not group:
            continue
        size = 13 if len(nodes) < 120 else 9 if len(nodes) < 400 else 6
        text = [
            f"<b>{name}</b><br>positions {nd['first']}–{nd['last']} ({nd['count']} tokens, s = {nd['size']})"
            f"<br>log µ = {nd['log_mu']:.3g}"
            + (f"<br>selector score = {nd['score']:.3g}" if not math.isnan(nd["score"]) else "")
            + (f"<br>row {nd['row']} of S<sub>c</sub>C" if nd["row"] >= 0 else "")
            for nd in group
        ]
        fig.add_trace(
            go.Scatter(
                x=[centre(nd) for nd in group],
                y=[nd["level"] for nd in group],
                mode="markers",
                name=name,
                marker={
                    "symbol": symbol,
                    "size": size,
                    "color": [nd["log_mu"] for nd in group],
                    "colorscale": "Viridis",
                    "cmin": lo,
                    "cmax": hi if hi > lo else lo + 1,
                    "line": {
                        "color": "#D55E00" if status == "split" else "#444444",
                        "width": 3 if status == "split" else 0.5,
                    },
                    "colorbar": {"title": {"text": "log µ"}, "len": 0.75, "y": 0.62} if status == "leaf" else None,
                    "showscale": status == "leaf",
                },
                text=text,
                hovertemplate="%{text}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    strip = np.log2(np.maximum(resolution.astype(np.float64), 1))
    strip_z = strip.copy()
    strip_z[vip] = np.nan
    labels = [f"{i}" + (f" · {tokens[i]}" if tokens is not None else "") for i in range(len(resolution))]
    fig.add_trace(
        go.Heatmap(
            z=[strip_z],
            x=list(range(len(resolution))),
            y=[0],
            colorscale="Cividis",
            showscale=False,
            customdata=[[[labels[i], int(resolution[i])] for i in range(len(resolution))]],
            hovertemplate="position %{customdata[0]}<br>segment length %{customdata[1]}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=vip,
            y=[0] * len(vip),
            mode="markers",
            name="VIP token (exact)",
            marker={"symbol": "star", "size": 11, "color": "#CC79A7", "line": {"width": 1}},
            text=[labels[i] for i in vip],
            hovertemplate="VIP %{text}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    levels = sorted({nd["level"] for nd in nodes})
    sizes = {nd["level"]: nd["size"] for nd in nodes}
    fig.update_yaxes(
        autorange="reversed",
        tickvals=levels,
        ticktext=["root" if lv == 0 else f"s = {sizes[lv]}" for lv in levels],
        title="block length",
        row=1,
        col=1,
    )
    fig.update_yaxes(showticklabels=False, title="tokens", row=2, col=1)
    fig.update_xaxes(title="position", row=2, col=1)
    fig.update_layout(
        height=460,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


tree_fig = tree_figure(view["nodes"], view["resolution"], view["vip"])
node_table = pd.DataFrame(view["nodes"])
ui.show_figure(
    tree_fig,
    "vcc_selection_tree",
    data=node_table,
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
heat_cols = st.columns(3)
exact_map = ui.display(view["exact"])
vcc_map = ui.display(view["attention"])
error_map = ui.block_reduce(view["attention"] - view["exact"], factor, "absmax")
with heat_cols[0]:
    ui.show_figure(
        ui.heatmap(exact_map, "Exact softmax", factor=factor, log=log_colour, labels=tick_labels),
        "vcc_exact",
        data={"attention": view["exact"]},
        png=lambda: ui.png_bytes(view["exact"], log=log_colour),
        key="exact",
    )
with heat_cols[1]:
    ui.show_figure(
        ui.heatmap(vcc_map, "VCC (tiles = blocks)", factor=factor, log=log_colour, labels=tick_labels),
        "vcc_attention",
        data={"attention": view["attention"]},
        png=lambda: ui.png_bytes(view["attention"], log=log_colour),
        key="vcc",
    )
with heat_cols[2]:
    ui.show_figure(
        ui.heatmap(error_map, "VCC − exact", kind="error", factor=factor, hover_label="error", labels=tick_labels),
        "vcc_error",
        data={"error": view["attention"] - view["exact"]},
        png=lambda: ui.png_bytes(view["attention"] - view["exact"], "error"),
        key="err",
    )
st.caption(
    "Rows of one block are identical (their query is the block mean) and columns of one block share one value "
    "(their key is the block mean, counted s times by D). VIP rows are exact on VIP columns up to one "
    "renormalising factor per row. " + ui.downsample_caption(n, factor)
)

# ------------------------------------------------------------------ error vs budget
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
sweep_runs = 2 * len(SELECTOR_LABELS) * len(sweep_budgets(budget_max))
if not ui.state.within_limits(
    lambda: server_limits.check(
        "n",
        s.n,
        server_limits.sizes_up_to(s.n),
        lambda n: server_limits.scaled(
            server_limits.method_estimate("vcc", n, s.d, s.heads, sweep_key, dense=False), sweep_runs
        ),
    )
):
    ui.finish()
    st.stop()
sweep_args = (s.spec, s.beta, ui.params_key(sweep_key), s.seed, budget_max)
sweep = pd.DataFrame(
    ui.run_heavy(
        "vcc_error_sweep",
        sweep_args,
        lambda report: error_sweep(*sweep_args, report=report),
        ui.estimate_seconds(2 * len(SELECTOR_LABELS) * len(sweep_budgets(budget_max)) * s.spec.heads * s.n**2),
        title="Sweeping the budget for every selector",
    )
)
column = "vip_error" if rows_choice == "vip" else "all_error"
err_fig = ui.line_figure(
    f"Output error vs budget h ({'mean over heads' if s.heads > 1 else 'one head'})",
    "compressed fraction r / n (the budget h sets r)",
    "relative output error",
)
for i, name in enumerate(SELECTOR_LABELS):
    for with_d in (True, False):
        part = sweep[(sweep["selector"] == name) & (sweep["D"] == with_d)]
        err_fig.add_trace(
            go.Scatter(
                x=part["r"] / n,
                y=part[column],
                mode="lines+markers",
                name=SELECTOR_LABELS[name] + ("" if with_d else ", no D"),
                line={"color": ui.method_colour(i), "dash": "solid" if with_d else "dot"},
                marker={"size": 5},
                customdata=np.stack([part["h"], part["r"]], axis=-1),
                hovertemplate="h %{customdata[0]}, r %{customdata[1]:.0f}<br>error %{y:.4g}"
                "<extra>%{fullData.name}</extra>",
                visible=True if with_d or name == "score" else "legendonly",
            )
        )
err_fig.add_trace(
    go.Scatter(
        x=[1.0],
        y=[0.0],
        mode="markers+text",
        name="full budget = exact",
        marker={"symbol": "star", "size": 16, "color": "#000000"},
        text=["exact"],
        textposition="top left",
        hovertemplate="full budget: every block refined, error 0<extra></extra>",
    )
)
err_fig.add_vline(x=r / n, line={"dash": "dash", "color": "#999999"})
err_fig.update_layout(
    height=460,
    legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0},
    margin={"l": 10, "r": 10, "t": 40, "b": 10},
)
ui.show_figure(
    err_fig,
    "vcc_error_vs_budget",
    data=sweep,
    key="sweep",
    caption=(
        "With one VIP token µ and the mean softmax rank blocks alike, so their curves coincide. " if n_p == 1 else ""
    )
    + "Solid: with D; dotted: without (click the legend to show the others). The dashed line is the "
    "current budget. Errors are measured, derived figures, not the paper's.",
)

# ------------------------------------------------------------------ cost
st.subheader("Cost: compressed length and FLOPs vs n (computed, not timed)")
ns = [2**e for e in range(8, 18)]
d, dv = s.d, s.d
vcc_costs = [cost_model(m, d, dv, min(n_p, m - 1), mode, min(block_size, m), int(budget)) for m in ns]
cost_fig = make_subplots(rows=1, cols=2, subplot_titles=("compressed length r", "FLOPs per head"))
cost_fig.add_trace(go.Scatter(x=ns, y=ns, name="exact (r = n)", line={"color": ui.method_colour(7)}), row=1, col=1)
cost_fig.add_trace(
    go.Scatter(x=ns, y=[c["r"] for c in vcc_costs], name="VCC", line={"color": ui.method_colour(0)}), row=1, col=1
)
cost_fig.add_trace(
    go.Scatter(
        x=ns,
        y=[c["exact_flops"] for c in vcc_costs],
        name="exact FLOPs",
        line={"color": ui.method_colour(7)},
        showlegend=False,
    ),
    row=1,
    col=2,
)
cost_fig.add_trace(
    go.Scatter(
        x=ns, y=[c["flops"] for c in vcc_costs], name="VCC FLOPs", line={"color": ui.method_colour(0)}, showlegend=False
    ),
    row=1,
    col=2,
)
for col in (1, 2):
    cost_fig.add_vline(x=n, line={"dash": "dash", "color": "#999999"}, row=1, col=col)
cost_fig.update_xaxes(type="log", title="sequence length n", dtick=1)
cost_fig.update_yaxes(type="log", dtick=1)
cost_fig.update_layout(height=340, template="plotly_white", margin={"l": 10, "r": 10, "t": 40, "b": 10})
ui.show_figure(
    cost_fig,
    "vcc_cost",
    key="cost",
    data=pd.DataFrame(
        {
            "n": ns,
            "r": [c["r"] for c in vcc_costs],
            "vcc_flops": [c["flops"] for c in vcc_costs],
            "exact_flops": [c["exact_flops"] for c in vcc_costs],
        }
    ),
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
storage = pd.DataFrame(view["storage"])
positions_c = view["positions_c"]


def storage_figure(table: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    x = [
        positions_c[int(a)] / 2 + positions_c[int(a + c - 1)] / 2
        for a, c in zip(table["start"], table["count"], strict=True)
    ]
    table = table.assign(x=x)
    for changed, colour, name in (
        (False, "#cccccc", "kept (below a leaf, or untouched)"),
        (True, "#009E73", "rewritten by the update"),
    ):
        part = table[table["changed"] == changed]
        text = [
            f"level {lv}, node {ix} (s = {sz})<br>|Δ| before {b:.3g} → after {a:.3g}"
            if lv
            else f"root mean, |c| before {b:.3g} → after {a:.3g}"
            for lv, ix, sz, b, a in zip(
                part["level"], part["index"], part["size"], part["before"], part["after"], strict=True
            )
        ]
        fig.add_trace(
            go.Scatter(
                x=part["x"],
                y=part["level"],
                mode="markers",
                name=name,
                text=text,
                marker={
                    "color": colour,
                    "size": 8 if len(table) < 600 else 5,
                    "line": {"width": 0.5, "color": "#555555"},
                },
                hovertemplate="%{text}<extra></extra>",
            )
        )
    levels = sorted(set(table["level"]))
    sizes = {lv: int(table[table["level"] == lv]["size"].iloc[0]) for lv in levels}
    fig.update_yaxes(
        autorange="reversed",
        tickvals=levels,
        title="stored entry",
        ticktext=["root: mean" if lv == 0 else f"Δ, s = {sizes[lv]}" for lv in levels],
    )
    fig.update_xaxes(title="position")
    fig.update_layout(
        height=320,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )
    return fig


leaves = sum(1 for nd in view["nodes"] if nd["status"] == "leaf")
internal = sum(1 for nd in view["nodes"] if nd["status"] in ("split", "pass"))
ui.show_figure(
    storage_figure(storage),
    "vcc_storage_tree",
    data=storage,
    key="storage",
    caption=f"{view['n_changed']} of {view['n_entries']} entries rewritten = |J| + #internal = "
    f"{leaves} + {internal}. The layer here is X + attention(X) on the values. Δ entries below a "
    "leaf are never touched: every token of a block gets the same update (Prop. 6.4). "
    f"Rebuilding all tokens from the updated tree matches explicit decompression "
    f"S†(Y − SC) + C to {view['update_gap']:.1e}.",
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
paper_cols = st.columns([1.7, 1.1, 1.2])
with paper_cols[0]:
    st.caption("Table 1 (encoder-only, 4K, base; runtime ms / accuracy)")
    st.dataframe(
        pd.DataFrame(
            {
                "method": ["RoBERTa-4K", "Big Bird", "Longformer", "MRA", "VCC (Ours)"],
                "HotpotQA ms": [422.3, 297.9, 371.0, 203.5, 114.6],
                "HotpotQA F1": [76.1, 73.2, 73.6, 77.0, 74.6],
                "WikiHop ms": [414.1, 293.3, 369.7, 199.2, 108.0],
                "WikiHop acc": [75.2, 74.5, 74.3, 76.1, 75.9],
            }
        ),
        hide_index=True,
        width="stretch",
    )
with paper_cols[1]:
    st.caption("Table 2 (T5 base, 4K; whole/encoder ms, WikiHop EM)")
    st.dataframe(
        pd.DataFrame(
            {
                "method": ["T5-4K", "LongT5-4K", "LED-4K", "VCC (Ours) 4K"],
                "WikiHop ms": ["594.3/553.7", "270.7/233.9", "236.6/222.9", "181.7/148.1"],
                "EM": [76.2, 72.7, 70.0, 76.7],
            }
        ),
        hide_index=True,
        width="stretch",
    )
with paper_cols[2]:
    st.caption("Table 3 (NarrativeQA, base, k = block size, h = refined blocks)")
    st.dataframe(
        pd.DataFrame(
            {
                "length": ["16K", "32K", "64K", "128K"],
                "k": [16, 16, 16, 16],
                "h": [90, 90, 90, 90],
                "runtime ms": [518.2, 1027.9, 2244.8, 6267.8],
                "F1": [16.6, 17.5, 19.3, 19.6],
            }
        ),
        hide_index=True,
        width="stretch",
    )
st.caption(
    "The paper: more than 3× faster than full attention at 4K and 16K with equal or better accuracy, and F1 "
    "keeps rising from 16K to 128K tokens. Those are trained models on A100s; this page only shows the "
    "attention approximation on your input."
)

ui.finish()
