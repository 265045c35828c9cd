"""Compare: exact attention next to each chosen method at equal memory budget, with error maps and metrics."""

from __future__ import annotations

from typing import Any

import streamlit as st

import ui
from core import limits
from service import prefetch
from ui import computed, room, timing
from ui.figures import compare as figs
from ui.panels import compare as panels
from ui.presets import COMPARE_METHODS, COMPARE_REDRAWS, MAX_REDRAWS
from ui.scrubber import scrubber_section

ui.page("Compare", icon=":material/compare:")
s = ui.sidebar(causal=True)

ui.explain(
    "Each efficient method replaces the n × n softmax matrix with something cheaper: a few random features "
    "(low rank), a few hashed blocks (sparse), or both. All of them get the same memory budget, so the error "
    "maps show what each one gives up. Red means the method puts too much weight on a key, blue too little.",
    r"A = \mathrm{softmax}\!\left(\tfrac{QK^\top}{\tau}\right),\qquad "
    r"\mathrm{error} = \frac{\lVert \hat A - A\rVert_F}{\lVert A\rVert_F}",
)

top = st.columns([3.2, 1.6, 1, 1.1])
shared_colour = ui.toggle(
    "One colour range",
    "samec",
    True,
    where=top[1],
    help="On: every attention map uses the exact map's colour range, so one colour is one weight across the panels "
    "(a method's entries above the exact map's largest saturate). Off: each map spans its own range.",
)
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


@st.fragment
def results(
    s: ui.Settings, methods: list[str], log_colour: bool, view: str, resolution: int, shared_colour: bool
) -> None:
    """Everything the method knobs drive: a knob reruns this section, not the sidebar or the inputs."""
    params = panels.method_knobs(s, methods)
    if not ui.within_limits(lambda: limits.check_compare(params, s.n, s.d, s.heads)):
        ui.finish_fragment()
        return
    exact = computed.exact(s)
    # Warm repeats cost up to a second per method, so they run on request; by default the column says "one cold run".
    knobs = st.columns(2)
    warm = ui.toggle(
        "Warm timings", "warm_times", False, where=knobs[0], help="Time each method again: median of up to 5 warm runs."
    )
    draws = ui.int_slider(
        "Draws of the random methods",
        "redraws",
        1,
        MAX_REDRAWS,
        COMPARE_REDRAWS,
        where=knobs[1],
        help="Performer, LSH, Scatterbrain (and the other randomised methods) are run again with seeds seed + 1, ...; "
        "the ± under each tile is the spread of their errors. The maps show the sidebar seed's draw.",
    )
    labels = {m: ui.method_label(m) for m in methods}
    # A class room's open question (predict, then reveal): no number that answers it shows before the Reveal.
    hidden = room.answers_hidden()
    # Presenter view: one row of maps (exact and each method) comes first, so a projector's first screen shows them.
    presenting = view == "one" and ui.presenter_mode()
    row_box = st.container()
    metrics_box = st.container()  # the error tiles, full width
    exact_shown, exact_factor = panels.exact_map(s, exact, resolution)
    zmax = ui.attention_top(exact_shown, log_colour) if shared_colour else None
    if view == "one" and not presenting:  # the exact map is drawn before the methods run: a picture at once
        exact_column, table_box = st.columns([1, 2])
        with exact_column:
            panels.exact_cell(s, exact, exact_shown, exact_factor, log_colour, zmax)
    else:
        table_box = st.container()
    scrubber_box = st.container()
    with metrics_box, st.spinner("Computing approximations…"):
        results = {method: computed.run(s, method, params[method]) for method in methods}
        runs = {m: s.method_run(m, params[m]) for m in methods}
        times = {
            m: timing.describe(timing.warm_timing(runs[m]) if warm else None, r.seconds)
            for m, r in results.items()
            if not r.error_message
        }
    spread_slots: dict[str, Any] = {}
    with metrics_box:
        table = panels.metrics_section(
            s, results, labels, times, exact, warm, table_where=table_box, spread_slots=spread_slots, hidden=hidden
        )
    with scrubber_box:  # the temperature scrubber (client-side): its curves and titles are every method's error
        if hidden:
            st.caption("The temperature scrubber (each method's error at every τ) opens after the teacher's Reveal.")
        else:
            scrubber_section(s, methods, params)
    if presenting:
        with row_box:
            panels.maps_row(s, exact_shown, exact_factor, labels, results, params, resolution, log_colour, zmax, hidden)
    if view == "one":
        st.subheader(f"Head {s.head}: each method's attention (top) and its error against exact (below)")
        panels.method_cells(s, methods, labels, results, params, resolution, log_colour, zmax, hidden)
        st.caption(
            ui.downsample_caption(s.n, exact_factor)
            + (" Every attention map uses the exact map's colour range." if shared_colour else "")
            + " Error maps: red = too much weight, blue = too little; the "
            "colour range is the 99th percentile of |error|, so the few largest errors saturate."
        )
    else:
        st.subheader("All heads: exact (first row) and each method")
        ok = [m for m in methods if not results[m].error_message]
        maps = {
            "exact": computed.drawn(s, exact.attention, exact.attention_in_cluster_order),
            **{
                m: computed.drawn(s, results[m].attention, (results[m].in_cluster_order or {}).get("attention"))
                for m in ok
            },
        }
        fig, data, grid_side = figs.heads_grid(maps, s.heads, log_colour)
        ui.show_figure(fig, "all_heads_grid", data=data, key="grid")
        st.caption(
            f"Each cell is downsampled to at most {grid_side} × {grid_side} (block maximum). "
            "Heads are independent draws (synthetic) or the layer's 12 heads (real model). " + s.order_note()
        )
    redraws = panels.draw_spread(s, runs, results, labels, draws, spread_slots, hidden)  # after the maps
    if s.spec.source == "real":  # bertviz #125: row errors of chosen query tokens, on demand below the picture
        panels.token_rows_section(s, runs, results, labels, hidden)
    # The temperatures one slider step away, computed while the server is idle (service/prefetch.py).
    done = [runs[m] for m in methods if not results[m].error_message] + redraws
    prefetch.compare_neighbours(done, s.tau, ui.TAU_OPTIONS)
    with st.expander("Data and settings behind this page"):
        st.download_button(
            "Metrics table (CSV)" + (" without the errors until the Reveal" if hidden else ""),
            table.to_csv(index=False),
            file_name="compare_metrics.csv",
            mime="text/csv",
            on_click="ignore",
        )
        st.json(s.as_dict(), expanded=False)
    ui.finish_fragment()


results(s, methods, log_colour, view, resolution, shared_colour)
ui.finish()
