"""Compare: exact attention next to each chosen method at equal memory budget, with error maps and metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
from plotly.subplots import make_subplots

import ui
from core import limits
from ui.presets import COMPARE_METHODS
from ui.scrubber import scrubber_section

ui.page("Compare", icon=":material/compare:")
s = ui.sidebar()

ui.explain(
    "Each efficient method replaces the n × n softmax matrix with something cheaper: a few random features "
    "(low rank), a few hashed blocks (sparse), or both. All of them get the same memory budget, so the error "
    "maps show what each one gives up. Red means the method puts too much weight on a key, blue too little.",
    r"A = \mathrm{softmax}\!\left(\tfrac{QK^\top}{\tau}\right),\qquad "
    r"\mathrm{error} = \frac{\lVert \hat A - A\rVert_F}{\lVert A\rVert_F}",
)

top = st.columns([3, 1, 1, 1])
methods = ui.method_picker("Methods", "methods", COMPARE_METHODS, n=s.n, where=top[0])
log_colour = ui.toggle(
    "Log colour scale",
    "logc",
    True,
    where=top[1],
    help="Attention weights span many orders of magnitude; a log scale shows the small ones.",
)
view = ui.choice(
    "Heads",
    "view",
    ["one", "all"],
    "one",
    where=top[2],
    widget="radio",
    help="one: the head chosen in the sidebar, full size. all: a small grid of every head.",
)
resolution = ui.choice(
    "Heatmap pixels",
    "res",
    [128, 256, 512],
    128,
    where=top[3],
    help="Largest side of each heatmap sent to the browser (block maximum). Smaller is faster; the Export "
    "menu has the full-resolution PNG.",
)

params: dict[str, dict] = {}
if methods:
    with st.expander("Method knobs (generated from each method's parameters)", expanded=False):
        tabs = st.tabs([ui.method_label(m) for m in methods])
        for tab, method in zip(tabs, methods, strict=True):
            with tab:
                tab.caption(ui.registered_methods()[method].description)
                params[method] = ui.method_controls(s, method, where=tab)

if not ui.state.within_limits(lambda: limits.check_compare(params, s.n, s.d, s.heads)):
    ui.finish()
    st.stop()
exact = s.exact()
results = {}
with st.spinner("Computing approximations…"):
    for method in methods:
        results[method] = s.run(method, params[method])

# ------------------------------------------------------------------ metrics
st.subheader("Metrics at equal budget")
full_memory = s.heads * s.n * s.n
rows = []
for method, res in results.items():
    if res.error_message:
        st.error(f"{ui.method_label(method)}: {res.error_message}")
        continue
    rows.append(
        {
            "method": ui.method_label(method),
            "attention error": float(np.mean(res.metrics["attention_error"])),
            "output error": float(np.mean(res.metrics["output_error"])),
            "row KL (nats)": float(np.mean(res.metrics["row_kl"])),
            "memory (% of full)": 100.0 * res.memory / full_memory,
            "FLOPs (M)": res.flops / 1e6,
            f"time on {res.device} (ms)": 1000 * res.seconds,
            "parameters": ", ".join(f"{k}={v}" for k, v in res.params.items()),
        }
    )
metric_cols = st.columns(max(1, len(rows)))
best = min((r["attention error"] for r in rows), default=None)
for col, row in zip(metric_cols, rows, strict=False):
    col.metric(
        row["method"],
        f"{row['attention error']:.3f}",
        delta="best" if best is not None and row["attention error"] == best else None,
        delta_color="off",
        help="Relative Frobenius error of the attention matrix, mean over heads.",
    )
table = pd.DataFrame(rows)
if rows:
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={c: st.column_config.NumberColumn(format="%.4g") for c in table.columns[1:-1]},
    )
    st.caption(
        f"Exact attention stores n² = {s.n * s.n:,} numbers per head and took "
        f"{1000 * exact.seconds:.1f} ms on {exact.device}. Times are measured once per setting (cached). "
        f"Mean row entropy {float(exact.entropy.mean()):.2f} nats at τ = {s.tau:g} (β = {s.beta:.3g})."
    )

# ------------------------------------------------------------------ temperature scrubber (client-side)
scrubber_section(s, methods, params)

# ------------------------------------------------------------------ heatmaps
head = s.head
kind_args = {"log": log_colour}
base_factor = 1 if not exact.reduced else ui.block_factor(s.n)


def shrink(a: np.ndarray, base: int, mode: str) -> tuple[np.ndarray, int]:
    """Block-reduce a (possibly already reduced) map to at most `resolution` per side; returns it and the block."""
    a = s.sorted(a)  # display only: cluster order when the sidebar asks for it
    extra = max(1, -(-a.shape[-1] // resolution))
    return ui.block_reduce(a, extra, mode), base * extra


exact_map, factor = shrink(exact.attention[head], base_factor, "max")


def full_png(method: str, kind: str = "attention"):
    """A full-resolution PNG, computed only when the download button is pressed."""

    def make() -> bytes:
        from ui import compute

        matrix = compute.full_attention(
            s.spec, s.beta, s.device_name, method, ui.params_key(params.get(method, {})), s.seed, head
        )
        if kind == "error":
            matrix = matrix - compute.full_attention(s.spec, s.beta, s.device_name, "exact", (), s.seed, head)
            return ui.png_bytes(matrix, "error")
        return ui.png_bytes(matrix, "attention", log=log_colour)

    return make


if view == "one":
    st.subheader(f"Head {head}: attention (top) and error against exact (bottom)")
    ok = [m for m in methods if not results[m].error_message]
    columns = ["exact", *ok]
    per_row = min(3, len(columns))
    for start in range(0, len(columns), per_row):
        cols = st.columns(per_row)
        for col, method in zip(cols, columns[start : start + per_row], strict=False):
            with col:
                if method == "exact":
                    fig = ui.heatmap(exact_map, "Exact softmax", factor=factor, **kind_args)
                    ui.show_figure(
                        fig,
                        "exact_attention",
                        data={"attention": exact_map},
                        png=full_png("exact"),
                        key="exact",
                        png_label="PNG (full resolution)",
                    )
                    if s.spec.source == "real":
                        model = s.inputs().model_attention
                        if model is not None and s.tau == 1.0:
                            gap = float(np.abs(model[head] - exact.attention[head]).max())
                            st.caption(f"τ = 1 reproduces the model's own attention: max difference {gap:.1e}.")
                    continue
                res = results[method]
                label = ui.method_label(method)
                attention, shown_factor = shrink(res.attention[head], res.factor, "max")
                fig = ui.heatmap(attention, label, factor=shown_factor, **kind_args)
                ui.show_figure(
                    fig,
                    f"{method}_attention",
                    data={"attention": attention},
                    png=full_png(method),
                    key=f"{method}_att",
                    png_label="PNG (full resolution)",
                )
                err, _ = shrink(res.error[head], res.factor, "absmax")
                efig = ui.heatmap(err, f"{label} − exact", kind="error", factor=shown_factor, hover_label="error")
                ui.show_figure(
                    efig,
                    f"{method}_error",
                    data={"error": err},
                    key=f"{method}_err",
                    png=full_png(method, "error"),
                    png_label="PNG (full resolution)",
                )
                st.caption(
                    f"head {head}: error {res.metrics['attention_error'][head]:.3f}, "
                    f"KL {res.metrics['row_kl'][head]:.3f}"
                )
    st.caption(
        ui.downsample_caption(s.n, factor) + " Error maps: red = too much weight, blue = too little; the "
        "colour range is the 99th percentile of |error|, so the few largest errors saturate."
    )
else:
    st.subheader("All heads: exact (first row) and each method")
    ok = [m for m in methods if not results[m].error_message]
    heads = s.heads
    grid_side = 64 if heads > 6 else 96
    grid_factor = max(1, -(-s.n // grid_side))
    names = ["exact", *ok]
    fig = make_subplots(
        rows=len(names),
        cols=heads,
        horizontal_spacing=0.01,
        vertical_spacing=0.03,
        subplot_titles=[f"h{h}" if r == 0 else "" for r in range(len(names)) for h in range(heads)],
    )
    data = {}
    for r, method in enumerate(names):
        for h in range(heads):
            if method == "exact":
                matrix = exact.attention[h]
            else:
                matrix = results[method].attention[h]
            small = ui.block_reduce(matrix, max(1, -(-matrix.shape[-1] // grid_side)), "max")
            data[f"{method}_head{h}"] = small
            z = np.log10(np.clip(small, 1e-6, None)) if log_colour else small
            fig.add_heatmap(
                z=z,
                row=r + 1,
                col=h + 1,
                colorscale="Viridis",
                showscale=False,
                zmin=-6 if log_colour else 0,
                hovertemplate=f"{method} head {h}<br>i %{{y}}, j %{{x}}<br>value %{{z:.3g}}<extra></extra>",
            )
        fig.update_yaxes(title_text=method, row=r + 1, col=1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    cell = max(50, min(150, 1000 // heads))  # square cells in a ~1000 px wide main area
    fig.update_layout(
        height=(cell + 12) * len(names) + 60, margin={"l": 10, "r": 10, "t": 30, "b": 10}, template="none"
    )
    ui.show_figure(fig, "all_heads_grid", data=data, key="grid")
    st.caption(
        f"Each cell is downsampled to at most {grid_side} × {grid_side} (block maximum). "
        "Heads are independent draws (synthetic) or the layer's 12 heads (real model)."
    )

with st.expander("Data and settings behind this page"):
    st.download_button(
        "Metrics table (CSV)",
        table.to_csv(index=False),
        file_name="compare_metrics.csv",
        mime="text/csv",
        on_click="ignore",
    )
    st.json(s.as_dict(), expanded=False)

ui.finish()
