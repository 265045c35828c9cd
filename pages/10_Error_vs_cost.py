"""Error vs cost: each method's output error against its measured time and peak memory on this server, at several
budgets on the same q, k, v, with the Pareto front of accuracy and cost."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import streamlit as st

import service.views
import ui
from core import cost_study, limits
from ui.figures import cost as cost_figs

BUDGETS = ["1/64", "1/32", "1/16", "1/8", "1/4", "1/2"]
DEFAULT_BUDGETS = ["1/32", "1/16", "1/8", "1/4"]
DEFAULT_METHODS = ["performer", "lsh", "scatterbrain", "nystrom", "linformer", "local"]
# Not efficient paths: the oracles build the n x n matrix, the trainable kernels (and Hedgehog) train on it first.
NOT_TIMED = ("exact", "topk", "topk_renormalized", "svd", "rpca", "learned_kernel", "hedgehog")
TAKE_MAX = 9999

ui.page("Error vs cost", icon=":material/scatter_plot:")
s = ui.sidebar(show_budget=False, show_head=False, defaults={"n": 2048, "heads": 2})
ui.explain(
    "A smaller budget makes a method cheaper and less accurate. Here every method runs at several budgets on the "
    "same input, on this server, and each point puts its output error against the time and the memory it took. "
    "A point is on the Pareto front (ringed) when no other point is both cheaper and more accurate; a point right "
    "of the dotted line costs more than the exact attention it approximates. Colour is the method (the same on "
    "every page), the marker's shape its family (square sparse, circle low rank, diamond sparse + low rank), its "
    "size the budget.",
    r"e = \frac{\lVert \tilde{A}V - AV \rVert_F}{\lVert AV \rVert_F},\qquad "
    r"t = \operatorname{median}(t_1, \dots, t_k)",
)

c = st.columns([2.6, 1.6, 1.2, 1])
methods = ui.method_picker("Methods", "methods", DEFAULT_METHODS, n=s.n, where=c[0], exclude=NOT_TIMED)
budgets = ui.multiselect(
    "Budgets (fraction of the n² scores)",
    "budgets",
    BUDGETS,
    DEFAULT_BUDGETS,
    where=c[1],
    help="Each budget sets every method's knobs so that it stores about this fraction of full attention's n² "
    "scores (the same rule as the sidebar budget on the other pages).",
)
warm_runs = ui.int_slider(
    "Warm runs per point",
    "runs",
    1,
    20,
    5,
    where=c[2],
    help="Each point is timed this many times after one untimed warm-up; the chart shows the median.",
)
memory = ui.choice(
    "Memory shown",
    "memory",
    list(cost_figs.MEMORY_KINDS),
    "measured",
    where=c[3],
    widget="radio",
    help="measured: the extra memory at the peak of one call on this device. model: the method's analytic "
    "working set (scalars stored × 4 bytes), the papers' budget measure.",
)
fractions = sorted((float(Fraction(b)) for b in budgets), reverse=True)


def measure_again() -> None:
    st.session_state["take"] = min(TAKE_MAX, int(st.session_state.get("take", 1)) + 1)


row = st.columns([1.2, 1, 3], vertical_alignment="bottom")
take = ui.int_input(
    "Measurement",
    "take",
    1,
    TAKE_MAX,
    1,
    where=row[0],
    help="Times are measurements, not results: each number is one measurement, kept for these settings and "
    "shared by the link. A new number measures again.",
)
row[1].button("Measure again", on_click=measure_again, icon=":material/replay:")
with_exact = ui.toggle(
    "Measure exact attention too (the dotted line)",
    "exact",
    True,
    where=row[2],
    help="core's exact method, torch's scaled_dot_product_attention, on the same input.",
)


def study_estimate(n: int, runs: int) -> limits.Estimate:
    return cost_study.estimate(methods, fractions, n, s.d, s.heads, runs, with_exact)


if not methods or not fractions:
    st.info("Pick at least one method and one budget.")
elif ui.within_limits(
    lambda: limits.check_knobs(
        [
            ("runs", warm_runs, range(1, warm_runs + 1), lambda k: study_estimate(s.n, k)),
            ("n", s.n, limits.sizes_up_to(s.n), lambda n: study_estimate(n, warm_runs)),
        ]
    )
):
    view = service.views.ErrorCostStudy(
        inputs=s.spec,
        beta=s.beta,
        methods=tuple(methods),
        budgets=tuple(fractions),
        with_exact=with_exact,
        warm_runs=int(warm_runs),
        seed=s.seed,
        device=s.device_name,
        take=int(take),
    )
    points = len(cost_study.planned_points(methods, fractions, with_exact))
    status = ui.StatusLine(f"Measuring {points} points × {warm_runs} warm runs…")
    try:
        study: cost_study.CostStudy = service.views.run(
            view, study_estimate(s.n, warm_runs).seconds, title="Measuring error, time and memory"
        )
    except (ValueError, RuntimeError) as exc:
        status.update(label="The measurement failed", state="error")
        st.error(f"The study could not run with these settings: {exc}")
        ui.finish()
        st.stop()
    status.update(label=f"Done: {points} points, each timed {warm_runs} time(s)", state="complete")
    for point in study.points:
        if not point.ok:
            ui.notice(f"**{ui.method_label(point.method)}** at {cost_study.budget_text(point.budget)}: {point.status}")
    labels = {m: ui.method_label(m) for m in [cost_study.EXACT, *methods]}
    fig = cost_figs.error_cost_figure(study.points, labels, memory=memory)
    table = pd.DataFrame(study.rows())
    machine = study.machine
    memory_note = {
        "cpu": "the process's resident memory at the peak of one call, less what it held before (other work on "
        "this server at that moment can add to it)",
        "cuda": "torch's peak of allocated GPU memory during one call, less what was allocated before",
    }.get(machine["device"], study.memory_how)
    where = machine.get("device_name") or machine.get("device")
    load = machine.get("load_average")
    ui.show_figure(
        fig,
        "error_vs_cost",
        data=table,
        caption=(
            f"Measured on **{machine['device']}** ({where}, torch {machine['threads']} thread(s)) at "
            f"{study.measured_at.replace('T', ' ')[:16]} UTC; each time is the median of {study.warm_runs} warm "
            f"run(s) after one warm-up. Peak memory: {memory_note}. Times vary with the server's load"
            + (f" (load average then: {load[0]:g})" if load else "")
            + f"; this is measurement {take} of these settings, shown again to anyone who opens them. "
            "**Measure again** for a new one."
        ),
    )
    approximations = table[table["method"] != cost_study.EXACT]
    memory_column = "pareto_memory" if memory == "measured" else "pareto_model_memory"
    for column, what in (("pareto_time", "time"), (memory_column, f"{memory} memory")):
        front = approximations[approximations[column]]
        names = "; ".join(f"{labels[r.method]} at {cost_study.budget_text(r.budget)}" for r in front.itertuples())
        st.markdown(f"**Pareto-optimal in {what}**: {names or 'none (exact attention is cheaper and exact)'}.")
    if with_exact and memory == "measured":
        st.caption(
            "Measured memory is what a call allocates at its peak. Exact attention here is torch's fused kernel, "
            "which works in blocks and never stores the n × n matrix, so it can measure below the budgets' "
            "fractions of n²; choose **model** under *Memory shown* for the papers' measure."
        )
    with ui.on_demand("Numbers behind the chart", "numbers_cost") as open_:
        if open_:
            st.dataframe(table, hide_index=True, width="stretch")

ui.finish()
