"""Compare page sections: the method knobs, the metrics at equal budget, and one heatmap cell per method."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

import service.views
import ui
from core import token_rows
from service import compute
from ui import computed, downloads, figure_memo, room, timing
from ui.figures import compare as figs


def method_knobs(s: ui.Settings, methods: list[str]) -> dict[str, dict[str, Any]]:
    """Each method's knobs, one tab per method in a collapsed box; returns the validated parameters."""
    params: dict[str, dict[str, Any]] = {}
    if methods:
        with st.expander("Method knobs (generated from each method's parameters)", expanded=False):
            tabs = st.tabs([ui.method_label(m) for m in methods])
            for tab, method in zip(tabs, methods, strict=True):
                with tab:
                    tab.caption(ui.registered_methods()[method].description)
                    params[method] = ui.method_controls(s, method, where=tab)
    return params


def metrics_section(
    s: ui.Settings,
    results: dict[str, Any],
    labels: dict[str, str],
    times: dict[str, str],
    exact: Any,
    warm: bool,
    table_where: Any = None,
    spread_slots: dict[str, Any] | None = None,
    hidden: bool = False,
) -> pd.DataFrame:
    """Errors as metric tiles (the best marked), the full table, and a caption on timing and entropy.

    table_where: where the table and its caption go (default: under the tiles). spread_slots: filled with a slot
    under each method's tile (by method label), where ``draw_spread`` writes its ± once the redraws are done.
    hidden: a class room's question is open (``room.answers_hidden()``): the tiles show ``room.HIDDEN_VALUE`` (their
    real values still go to the room's measured answer) and the table (returned for the CSV too) has no error
    columns."""
    table_where = table_where or st
    st.subheader("Metrics at equal budget")
    for method, res in results.items():
        if res.error_message:
            st.error(f"{labels[method]}: {res.error_message}")
    rows = figs.metric_rows(results, labels, s.heads * s.n * s.n, times)
    best = figs.best_error(rows)
    over = f"mean over {s.heads} heads" if s.heads > 1 else "of the one head"
    if rows:  # what the numbers average over, next to them (the maps below show one head)
        shown = f"; the maps below show head {s.head} alone" if s.heads > 1 else ""
        st.caption(f"Relative attention error, **{over}**{shown}.")
    for col, row in zip(st.columns(max(1, len(rows))), rows, strict=False):
        room.tile(
            col,
            row["method"],
            f"{row['attention error']:.3f}",
            hidden=hidden,
            delta="best" if best is not None and row["attention error"] == best else None,
            delta_color="off",
            help=f"Relative Frobenius error of the attention matrix, {over}.",
        )
        if spread_slots is not None:
            spread_slots[row["method"]] = col.empty()
    table = figs.metrics_table(rows, show_errors=not hidden)
    if not rows:
        return table
    if hidden:
        table_where.caption(
            "Errors (tiles, table, chart titles) are hidden until the teacher reveals the class's answer."
        )
    # A grid beside the exact map cuts its columns at 1280 px: a static table that wraps, without the long
    # parameter lists (the metrics CSV below has them).
    shown = table.drop(columns=["parameters"], errors="ignore")
    table_where.table(shown.style.format("{:.4g}", subset=figs.number_columns(shown)).hide(axis="index"))
    if "parameters" in table:  # what each method ran with at this budget, as a wrapping line under the table
        table_where.caption(
            "Parameters: " + "; ".join(f"**{r['method']}** {r['parameters']}" for r in rows if r.get("parameters"))
        )
    exact_warm = timing.warm_timing(s.method_run("exact", {})) if warm else None
    exact_time = timing.describe(exact_warm, exact.seconds)
    table_where.caption(
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
    return table


def exact_map(s: ui.Settings, exact: Any, resolution: int) -> tuple[np.ndarray, int]:
    """The exact attention map of the shown head as drawn (ordered, block-reduced), and its display block size."""
    head = s.head
    base_factor = 1 if not exact.reduced else ui.block_factor(s.n)
    in_order = exact.attention_in_cluster_order
    drawn = computed.drawn(s, exact.attention[head], None if in_order is None else in_order[head])
    return figs.shrink(drawn, resolution, base_factor, "max")


def exact_cell(
    s: ui.Settings, exact: Any, shown: np.ndarray, factor: int, log_colour: bool, zmax: float | None
) -> None:
    """The exact attention heatmap of the shown head (``exact_map``), with its exports and notes."""
    head = s.head
    fig = figure_memo.shared(ui.heatmap, shown, "Exact softmax", factor=factor, log=log_colour, zmax=zmax)
    extra = downloads.heatmap_exports(s, "exact", {}, head, "attention", shown, log_colour)
    ui.show_figure(fig, "exact_attention", key="exact", **extra)
    if s.order_note():
        st.caption(s.order_note())
    model = computed.inputs(s).model_attention if s.spec.source == "real" else None
    if model is not None and s.tau == 1.0:
        gap = float(np.abs(model[head] - exact.attention[head]).max())
        st.caption(f"τ = 1 reproduces the model's own attention: max difference {gap:.1e}.")


def _head_maps(
    s: ui.Settings, method: str, params: dict[str, Any], res: Any, resolution: int
) -> dict[str, tuple[np.ndarray, int]]:
    """A method's attention and error maps of the shown head as drawn (ordered, block-reduced), with the block size;
    made once per process for every session showing the same run (``res``, the run of ``method`` at ``params``)
    the same way."""
    head = s.head
    in_order = res.in_cluster_order or {}

    def made() -> dict[str, tuple[np.ndarray, int]]:
        drawn = {
            kind: computed.drawn(s, getattr(res, kind)[head], in_order[kind][head] if kind in in_order else None)
            for kind in ("attention", "error")
        }
        return {
            "attention": figs.shrink(drawn["attention"], resolution, res.factor, "max"),
            "error": figs.shrink(drawn["error"], resolution, res.factor, "absmax"),
        }

    if s.by_cluster and res.factor > 1 and not in_order:
        return made()  # the notice that a reduced map keeps position order is this session's to show
    run_key = s.method_run(method, params).cache_key()
    return computed.shared_drawn(f"{run_key}|head {head}|by cluster {s.by_cluster}|resolution {resolution}", made)


def maps_row(
    s: ui.Settings,
    exact_shown: np.ndarray,
    exact_factor: int,
    labels: dict[str, str],
    results: dict[str, Any],
    params: dict[str, dict[str, Any]],
    resolution: int,
    log_colour: bool,
    zmax: float | None,
    hidden: bool = False,
) -> None:
    """Presenter view: the exact map and every method's map of the shown head in one row, each titled with its error
    (not while ``hidden``)."""
    head = s.head
    maps = {"Exact softmax": exact_shown}
    titles = {"Exact softmax": f"Exact (head {head})"}
    for method, res in results.items():
        if res.error_message:
            continue
        maps[labels[method]] = _head_maps(s, method, params[method], res, resolution)["attention"][0]
        titles[labels[method]] = figs.row_title(
            labels[method], float(res.metrics["attention_error"][head]), show_errors=not hidden
        )
    fig = figs.maps_row(maps, titles, exact_factor, log_colour, zmax)
    ui.show_figure(fig, "maps_row", key="maps_row", data=maps)
    st.caption(figs.maps_row_caption(head, exact_factor, s.n, shared_colour=zmax is not None, show_errors=not hidden))


def method_cells(
    s: ui.Settings,
    methods: list[str],
    labels: dict[str, str],
    results: dict[str, Any],
    params: dict[str, dict[str, Any]],
    resolution: int,
    log_colour: bool,
    zmax: float | None = None,
    hidden: bool = False,
) -> None:
    """Each method's attention map of the shown head over its error against exact: one figure per method, three
    to a row (titled without the error numbers while ``hidden``). Two maps to a chart halves the browser's per-chart
    cost on a slider move, and a method knob redraws only its own method's chart (the others' figures do not
    change)."""
    head = s.head
    for method in methods:
        if results[method].error_message:
            st.caption(f"{labels[method]}: no map (its error is shown above).")
    ok = [m for m in methods if not results[m].error_message]
    for start in range(0, len(ok), 3):
        for column, method in zip(st.columns(3), ok[start : start + 3], strict=False):
            res, label = results[method], labels[method]
            shown = _head_maps(s, method, params[method], res, resolution)
            attention, factor = shown["attention"]
            error, _ = shown["error"]
            # This head's own numbers (the tiles above average over heads): the title says which head.
            title = figs.head_error_title(
                head,
                float(res.metrics["attention_error"][head]),
                float(res.metrics["row_kl"][head]),
                show_errors=not hidden,
            )
            # Every session of a class builds the same figure: built once (ui/figure_memo.py)
            fig = figure_memo.shared(figs.method_figure, label, attention, error, factor, log_colour, title, zmax)
            parts = {
                f"{label}: {kind}": downloads.heatmap_exports(s, method, params[method], head, kind, shown, log_colour)
                for kind, shown in (("attention", attention), ("error", error))
            }
            ui.show_figure(
                fig,
                f"{method}_maps",
                key=f"{method}_maps",
                parts=parts,
                data={"attention": attention, "error": error},
                data_note="Data: both maps as shown (block-reduced). Choose a map above for its full resolution.",
                where=column,
            )


def draw_spread(
    s: ui.Settings,
    runs: dict[str, Any],
    results: dict[str, Any],
    labels: dict[str, str],
    draws: int,
    slots: dict[str, Any],
    hidden: bool = False,
) -> list[Any]:
    """Each randomised method's attention error over ``draws`` seeds (its run's seed, then seed + 1, ...: the same
    runs Compare shows at those seeds), written as ± under its tile. Drawn after the maps, so the page's first picture
    does not wait for the redraws. Returns the runs of the extra draws (for the work done ahead)."""
    extra: list[Any] = []
    if draws <= 1:
        return extra
    for method, run in runs.items():
        if results[method].error_message or not ui.registered_methods()[method].randomized:
            continue
        errors = [float(np.mean(results[method].metrics["attention_error"]))]
        for offset in range(1, draws):
            redraw = run.replace(seed=run.seed + offset)
            again = compute.run_method_scheduled(redraw)
            if again.error_message:
                break
            errors.append(float(np.mean(again.metrics["attention_error"])))
            extra.append(redraw)
        slot = slots.get(labels[method])
        if slot is not None and len(errors) > 1 and not hidden:  # the spread tells the errors too
            slot.caption(
                f"± {float(np.std(errors)):.3f} over {len(errors)} draws (range {min(errors):.3f} to {max(errors):.3f})"
            )
    return extra


def token_rows_section(
    s: ui.Settings, runs: dict[str, Any], results: dict[str, Any], labels: dict[str, str], hidden: bool = False
) -> None:
    """Real input only: pick query tokens and see each method's row errors on them (head shown), on demand; not while
    a class room's question is open (``hidden``)."""
    tokens = computed.inputs(s).tokens
    if not tokens:
        return
    if hidden:
        st.caption("Row errors of chosen query tokens: after the teacher's Reveal.")
        return
    with ui.on_demand("Row errors of chosen query tokens", "token_rows") as open_:
        if not open_:
            return
        options = [f"{i}: {t}" for i, t in enumerate(tokens)]
        chosen = ui.multiselect(
            "Query tokens",
            "tokens",
            options,
            options[:1],
            max_items=len(options),
            help="Each method's attention row of these tokens (head shown) against the exact one: KL, L1 and the "
            "output row's relative error, averaged (and summed) over the tokens.",
        )
        if not chosen:
            st.info("Pick at least one token.")
            return
        rows = [options.index(c) for c in chosen]
        table = []
        for method, run in runs.items():
            if results[method].error_message:
                continue
            view = service.views.TokenRowErrors(run, int(s.head))
            errors = service.views.run(view, ui.estimate_seconds(2 * s.heads * s.n**2))
            summary = token_rows.summarise_rows(errors, rows)
            table.append({"method": labels[method], **{k: round(v, 4) for k, v in summary.items()}})
        frame = pd.DataFrame(table)
        fig = figs.line_figure(
            f"Row errors of {len(rows)} token(s), head {s.head}", "method", "mean over the tokens", height=360
        )
        for column, name in (("row_l1_mean", "L1 of the attention row"), ("row_output_error_mean", "output error")):
            fig.add_bar(x=frame["method"], y=frame[column], name=name)
        ui.show_figure(fig, "token_row_errors", data=frame, key="token_rows")
        st.dataframe(frame, hide_index=True)
        st.caption(
            "KL(exact ‖ method) in nats and L1 (0 to 2) of each chosen token's attention row; output error: "
            "|õ − o| / |o| of its output row. _mean_: averaged over the tokens, _sum_: summed."
        )
