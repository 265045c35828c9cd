"""Pure figure builders for the VCC page: the selection tree over the token strip, error vs budget, the computed
cost curves and the storage tree T(C). Data in, ``go.Figure`` out; nothing here draws or reads settings."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.vcc_study import CostCurve, StorageEntry, SweepPoint
from core.vcc_tree import TreeNode
from ui.figures import line_figure, method_colour
from ui.figures.axes import use_decades
from ui.figures.palette import OTHER, other_colour

# Short ASCII labels: a choice's label is also its value in the shared link. Same order as vcc_tree.SELECTORS.
SELECTOR_LABELS = {
    "score": "mu (eq. 53)",
    "softmax": "mean softmax",
    "random": "random",
    "bottom": "bottom mu",
}
# Not methods: colours no method has (ui/figures/palette.py). A VIP token is computed exactly: exact's black.
SPLIT_RING = OTHER[0]
VIP_COLOUR = method_colour("exact")
REWRITTEN = OTHER[3]
# The token strip shades a token by the length of the block it ended in (not the tree's µ scale, Viridis): black for
# a single token, computed at full resolution like the exact VIP stars, to light grey (still seen on white) for the
# longest block.
SINGLE_TOKEN_SHADE, LONGEST_BLOCK_SHADE = "#000000", "#D0D0D0"
SEGMENT_SCALE = [[0.0, SINGLE_TOKEN_SHADE], [1.0, LONGEST_BLOCK_SHADE]]


def tree_caption(resolution: np.ndarray) -> str:
    """What ``tree_figure`` draws, in the colours it uses: the caption under it."""
    longest = int(np.max(resolution)) if np.size(resolution) else 1
    return (
        "Nodes are blocks, coloured by log µ; refined nodes have a thick dark grey ring; squares are the leaves, i.e. "
        "the rows of the compressed sequence. The strip below shades each token by the length of the block it ended "
        f"in: black for a single token, light grey for the longest block (s = {longest}); stars are VIPs."
    )


def _centre(node: TreeNode) -> float:
    return (node.first + node.last) / 2


def _node_text(node: TreeNode, name: str) -> str:
    return (
        f"<b>{name}</b><br>positions {node.first}–{node.last} ({node.count} tokens, s = {node.size})"
        f"<br>log µ = {node.log_mu:.3g}"
        + (f"<br>selector score = {node.score:.3g}" if not math.isnan(node.score) else "")
        + (f"<br>row {node.row} of S<sub>c</sub>C" if node.row >= 0 else "")
    )


def tree_figure(
    nodes: Sequence[TreeNode], resolution: np.ndarray, vip: Sequence[int], tokens: Sequence[str] | None = None
) -> go.Figure:
    """The selection tree (nodes at their positions, by level, coloured by log µ) over a strip of every token
    coloured by the length of the block it ended in; VIP tokens are stars."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.8, 0.2], vertical_spacing=0.04)
    by_id = {node.id: node for node in nodes}
    edge_x: list[float | None] = []
    edge_y: list[float | None] = []
    for node in nodes:
        if node.parent >= 0:
            parent = by_id[node.parent]
            edge_x += [_centre(parent), _centre(node), None]
            edge_y += [parent.level, node.level, None]
    fig.add_trace(
        go.Scatter(
            x=edge_x, y=edge_y, mode="lines", line={"color": "#bbbbbb", "width": 1}, hoverinfo="skip", showlegend=False
        ),
        row=1,
        col=1,
    )
    mus = np.array([node.log_mu for node in nodes])
    lo, hi = float(mus.min()), float(mus.max())
    kinds = (
        ("split", "circle", "refined (split)"),
        ("pass", "diamond-open", "padding pass-through (free)"),
        ("leaf", "square", "leaf = compressed row"),
    )
    size = 13 if len(nodes) < 120 else 9 if len(nodes) < 400 else 6
    for status, symbol, name in kinds:
        group = [node for node in nodes if node.status == status]
        if not group:
            continue
        fig.add_trace(
            go.Scatter(
                x=[_centre(node) for node in group],
                y=[node.level for node in group],
                mode="markers",
                name=name,
                marker={
                    "symbol": symbol,
                    "size": size,
                    "color": [node.log_mu for node in group],
                    "colorscale": "Viridis",
                    "cmin": lo,
                    "cmax": hi if hi > lo else lo + 1,
                    "line": {
                        "color": SPLIT_RING if status == "split" else "#444444",
                        "width": 3 if status == "split" else 0.5,
                    },
                    "colorbar": {"title": {"text": "log µ"}, "len": 0.75, "y": 0.62} if status == "leaf" else None,
                    "showscale": status == "leaf",
                },
                text=[_node_text(node, name) for node in group],
                hovertemplate="%{text}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    strip = np.log2(np.maximum(resolution.astype(np.float64), 1))
    strip[list(vip)] = np.nan  # VIP tokens are drawn as stars on top
    labels = [f"{i}" + (f" · {tokens[i]}" if tokens is not None else "") for i in range(len(resolution))]
    fig.add_trace(
        go.Heatmap(
            z=[strip],
            x=list(range(len(resolution))),
            y=[0],
            colorscale=SEGMENT_SCALE,
            zmin=0.0,  # a single token is black whatever the longest block
            zmax=max(1.0, float(np.nanmax(strip, initial=0.0))),
            showscale=False,
            customdata=[[[labels[i], int(resolution[i])] for i in range(len(resolution))]],
            hovertemplate="position %{customdata[0]}<br>segment length %{customdata[1]}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=list(vip),
            y=[0] * len(vip),
            mode="markers",
            name="VIP token (exact)",
            marker={"symbol": "star", "size": 11, "color": VIP_COLOUR, "line": {"width": 1}},
            text=[labels[i] for i in vip],
            hovertemplate="VIP %{text}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    levels = sorted({node.level for node in nodes})
    sizes = {node.level: node.size for node in nodes}
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


def error_budget_figure(
    points: Sequence[SweepPoint], n: int, rows: str, current_r: float, *, mean_over_heads: bool = False
) -> go.Figure:
    """Output error (``rows`` "vip" or "all") against r / n, one curve per selector with D (solid) and without
    (dotted, hidden but µ's); a star at the full budget (exact) and a dashed line at ``current_r``."""
    fig = line_figure(
        f"Output error vs budget h ({'mean over heads' if mean_over_heads else 'one head'})",
        "compressed fraction r / n (the budget h sets r)",
        "relative output error",
    )
    for i, (selector, label) in enumerate(SELECTOR_LABELS.items()):
        for with_d in (True, False):
            part = [p for p in points if p.selector == selector and p.scale_correction == with_d]
            fig.add_trace(
                go.Scatter(
                    x=[p.r / n for p in part],
                    y=[p.vip_error if rows == "vip" else p.all_error for p in part],
                    mode="lines+markers",
                    name=label + ("" if with_d else ", no D"),
                    line={"color": other_colour(i), "dash": "solid" if with_d else "dot"},
                    marker={"size": 5},
                    customdata=[[p.h, p.r] for p in part],
                    hovertemplate="h %{customdata[0]}, r %{customdata[1]:.0f}<br>error %{y:.4g}"
                    "<extra>%{fullData.name}</extra>",
                    visible=True if with_d or selector == "score" else "legendonly",
                )
            )
    fig.add_trace(
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
    fig.add_vline(x=current_r / n, line={"dash": "dash", "color": "#999999"})
    fig.update_layout(
        height=460,
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0},
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return fig


def cost_figure(cost: CostCurve, n: int) -> go.Figure:
    """Compressed length r and FLOPs per head against n (log-log, decades), VCC beside exact; dashed at ``n``."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("compressed length r", "FLOPs per head"))
    exact_colour, vcc_colour = method_colour("exact"), method_colour("vcc")
    lengths = cost.n.tolist()
    fig.add_trace(go.Scatter(x=lengths, y=lengths, name="exact (r = n)", line={"color": exact_colour}), row=1, col=1)
    fig.add_trace(go.Scatter(x=lengths, y=cost.r.tolist(), name="VCC", line={"color": vcc_colour}), row=1, col=1)
    fig.add_trace(
        go.Scatter(
            x=lengths, y=cost.exact_flops.tolist(), name="exact FLOPs", line={"color": exact_colour}, showlegend=False
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Scatter(x=lengths, y=cost.flops.tolist(), name="VCC FLOPs", line={"color": vcc_colour}, showlegend=False),
        row=1,
        col=2,
    )
    for col in (1, 2):
        fig.add_vline(x=n, line={"dash": "dash", "color": "#999999"}, row=1, col=col)
    use_decades(fig, "x", lengths, title="sequence length n")
    use_decades(fig, "y", [*lengths, *cost.r.tolist()], row=1, col=1)
    use_decades(fig, "y", [*cost.flops.tolist(), *cost.exact_flops.tolist()], row=1, col=2)
    fig.update_layout(height=340, template="plotly_white", margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def storage_figure(entries: Sequence[StorageEntry], positions_c: Sequence[int]) -> go.Figure:
    """T(C)'s entries by level at the centre of the positions they cover: rewritten by the update (green) or kept."""
    fig = go.Figure()
    marker_size = 8 if len(entries) < 600 else 5
    for changed, colour, name in (
        (False, "#cccccc", "kept (below a leaf, or untouched)"),
        (True, REWRITTEN, "rewritten by the update"),
    ):
        part = [e for e in entries if e.changed == changed]
        fig.add_trace(
            go.Scatter(
                x=[positions_c[e.start] / 2 + positions_c[e.start + e.count - 1] / 2 for e in part],
                y=[e.level for e in part],
                mode="markers",
                name=name,
                text=[
                    f"level {e.level}, node {e.index} (s = {e.size})<br>|Δ| before {e.before:.3g} → after {e.after:.3g}"
                    if e.level
                    else f"root mean, |c| before {e.before:.3g} → after {e.after:.3g}"
                    for e in part
                ],
                marker={"color": colour, "size": marker_size, "line": {"width": 0.5, "color": "#555555"}},
                hovertemplate="%{text}<extra></extra>",
            )
        )
    sizes = {e.level: e.size for e in reversed(entries)}  # every entry of a level has the same nominal size
    levels = sorted(sizes)
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
