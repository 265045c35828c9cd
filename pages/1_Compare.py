"""Compare: exact attention next to each chosen method at equal memory budget, with error maps and metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import ui
from core import limits
from ui import downloads, timing
from ui.figures import compare as figs
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

top = st.columns([3.2, 1.6, 1, 1.1])
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
# Warm repeats cost up to a second per method, so they run on request; by default the column says "one cold run".
warm = ui.toggle("Warm timings", "warm_times", False, help="Time each method again: median of up to 5 warm runs.")
with st.spinner("Computing approximations…"):
    results = {method: s.run(method, params[method]) for method in methods}
    keys = {m: ui.params_key(params[m]) for m in methods}
    times = {
        m: timing.describe(timing.warm_timing(s.spec, s.beta, s.device_name, m, keys[m], s.seed) if warm else None,
                           r.seconds)
        for m, r in results.items() if not r.error_message
    }  # fmt: skip
labels = {m: ui.method_label(m) for m in methods}

# ------------------------------------------------------------------ metrics
st.subheader("Metrics at equal budget")
for method, res in results.items():
    if res.error_message:
        st.error(f"{labels[method]}: {res.error_message}")
rows = figs.metric_rows(results, labels, s.heads * s.n * s.n, times)
best = figs.best_error(rows)
for col, row in zip(st.columns(max(1, len(rows))), rows, strict=False):
    col.metric(
        row["method"],
        f"{row['attention error']:.3f}",
        delta="best" if best is not None and row["attention error"] == best else None,
        delta_color="off",
        help="Relative Frobenius error of the attention matrix, mean over heads.",
    )
table = pd.DataFrame(rows)
if rows:
    number_format = {c: st.column_config.NumberColumn(format="%.4g") for c in figs.number_columns(table)}
    st.dataframe(table, hide_index=True, width="stretch", column_config=number_format)
    exact_warm = timing.warm_timing(s.spec, s.beta, s.device_name, "exact", (), s.seed) if warm else None
    exact_time = timing.describe(exact_warm, exact.seconds)
    st.caption(
        f"Exact attention stores n² = {s.n * s.n:,} numbers per head and took {exact_time} on {exact.device}. "
        + (
            "Times are the median of a few warm runs after one warm-up, ± half the interquartile range; settings "
            "too heavy to repeat show one cold measurement. "
            if warm
            else "Times are one cold measurement each (turn on “Warm timings” for a median of warm runs). "
        )
        + (
            "At this small n the efficient methods' fixed costs (hashing, sorting, drawing features) outweigh "
            "exact attention's n²; their advantage shows at large n (the Scaling page). "
            if s.n < 1024
            else ""
        )
        + f"Mean row entropy {float(exact.entropy.mean()):.2f} nats at τ = {s.tau:g} (β = {s.beta:.3g})."
    )

# ------------------------------------------------------------------ temperature scrubber (client-side)
scrubber_section(s, methods, params)

# ------------------------------------------------------------------ heatmaps
head, ok, log = s.head, [m for m in methods if not results[m].error_message], log_colour
base_factor = 1 if not exact.reduced else ui.block_factor(s.n)
if view == "one":
    st.subheader(f"Head {head}: attention (top) and error against exact (bottom)")
    columns = ["exact", *ok]
    per_row = min(3, len(columns))
    for start in range(0, len(columns), per_row):
        for col, method in zip(st.columns(per_row), columns[start : start + per_row], strict=False):
            with col:
                source = exact.attention[head] if method == "exact" else results[method].attention[head]
                block = base_factor if method == "exact" else results[method].factor
                shown, factor = figs.shrink(s.sorted(source), resolution, block, "max")
                title = "Exact softmax" if method == "exact" else labels[method]
                fig = ui.heatmap(shown, title, factor=factor, log=log_colour)
                extra = downloads.heatmap_exports(s, method, params.get(method, {}), head, "attention", shown, log)
                key = "exact" if method == "exact" else f"{method}_att"
                ui.show_figure(fig, f"{method}_attention", key=key, **extra)
                if method == "exact":
                    exact_factor = factor
                    model = s.inputs().model_attention if s.spec.source == "real" else None
                    if model is not None and s.tau == 1.0:
                        gap = float(np.abs(model[head] - exact.attention[head]).max())
                        st.caption(f"τ = 1 reproduces the model's own attention: max difference {gap:.1e}.")
                    continue
                res = results[method]
                err, _ = figs.shrink(s.sorted(res.error[head]), resolution, res.factor, "absmax")
                efig = ui.heatmap(err, f"{labels[method]} − exact", kind="error", factor=factor, hover_label="error")
                ui.show_figure(
                    efig,
                    f"{method}_error",
                    key=f"{method}_err",
                    **downloads.heatmap_exports(s, method, params[method], head, "error", err, log),
                )
                st.caption(
                    f"head {head}: error {res.metrics['attention_error'][head]:.3f}, "
                    f"KL {res.metrics['row_kl'][head]:.3f}"
                )
    st.caption(
        ui.downsample_caption(s.n, exact_factor) + " Error maps: red = too much weight, blue = too little; the "
        "colour range is the 99th percentile of |error|, so the few largest errors saturate."
    )
else:
    st.subheader("All heads: exact (first row) and each method")
    maps = {"exact": exact.attention, **{m: results[m].attention for m in ok}}
    fig, data, grid_side = figs.heads_grid(maps, s.heads, log_colour)
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
