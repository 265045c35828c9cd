"""The Rank vs heads page's sections: its texts, the train-on-demand panel of each tab, and summaries of results."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import streamlit as st

import ui
from core import limits
from core import rank_heads as rh
from core import rank_heads_study as study
from service import views
from ui.controls.rank_heads import AUTO_SECONDS, STEPS, RankHeadsControls

INTRO = (
    "Is attention better spent on many low-rank heads or on a few full-rank ones? Here one attention layer learns "
    "to return, for a query point y on the unit sphere, the nearest of N target points. One full-rank head does it "
    "(its bilinear form W_Q W_Kᵀ ≈ c·I picks the largest xᵢ·y), but heads of rank r < d stall on a plateau that more "
    "heads barely lower: the paper proves that rank-r heads need about (d/r)^(1/ε) heads for error ε. "
    "'Rank' here is the head dimension r, the rank of each head's W_Q W_Kᵀ, not the rank of the n × n attention "
    "matrix that the approximation pages work on."
)
FORMULA = (
    r"\mathrm{model}(X, y) = \sum_{h=1}^{H} V_h X\,\mathrm{softmax}\!\big(c\,X^\top K_h Q_h^\top y\big),\quad "
    r"K_h, Q_h \in \mathbb{R}^{d\times r},\quad "
    r"\varepsilon = \mathbb{E}\,\lVert f(X; y) - \mathrm{model}(X, y)\rVert^2"
)
TABS = ["Rank × heads grid", "Error vs N", "Temperature (Fact 1)", "Theorem shapes", "The paper's figures"]
NUMBERS_CAPTION = (
    "For r = d the last two columns are the Fig. 2 analogue: the angle between the learned K Qᵀ (times "
    "c) and I, near 0° for the nearest target and near 180° for the farthest, and its size."
)
FACT1_TEXT = (
    "Fact 1: one full-rank head with V = I and W_Q W_Kᵀ = c·I. With hardmax (c = ∞) it returns the nearest "
    "point exactly, for any d and N; with softmax its error falls like 1/c, and near hardmax it is about "
    "0.2 × the attention entropy. No training: this is the construction itself, on 20 000 fresh samples."
)
THEORY_TEXT = (
    "**Shapes only, unknown constants.** The paper's lower bounds hold with universal constants c, c′, C, C′ that "
    "it does not give, so only how these curves move with d, r and ε means anything; their heights do not."
)
THEORY_CAPTION = (
    "Full rank needs one head (d² parameters); rank r needs H ≳ (d/r)^(1/ε) heads, i.e. about d^(1+1/ε) "
    "parameters at r = 1. Theorem 4 (biased target) has the shape exp(d − r)/d²."
)
PAPER_TEXT = (
    "**The paper's numbers**, read from the authors' figure images (±10–15% on log axes) — not reproduced here. "
    "Setting: d = 64, N = 16 i.i.d. points, farthest neighbour, self-attention in a full Transformer layer, "
    "10⁵ steps of batch 256, best of 5 runs (a GPU for hours). The live grid above is a smaller, cross-attention "
    "version of the same question."
)
FIG4_TEXT = "**The paper's Fig. 4** (two layers, d = 64, H = d²/r): error by N — full rank stays low, rank 1 does not."


def describe(item: tuple[int, ...]) -> str:
    return f"r = {item[0]}, H = {item[1]}" + (f", N = {item[2]}" if len(item) > 2 else "")


def train_panel(
    c: RankHeadsControls,
    items: Sequence[tuple[int, ...]],
    view_of: Callable[[Any], views.View],
    label: str,
    button: str,
    ok: Callable[[list[Any]], bool],
) -> dict:
    """The items already in the shared cache; the rest trained at once when cheap (and ``auto``), else on the button,
    in an open status box (an overall bar, then each job's own bar and Cancel button from the scheduler)."""
    todo = [item for item in items if not views.is_cached(view_of(item))]
    seconds = c.settings.seconds([(item[0], item[1]) for item in todo])
    allowed = ok(todo)
    gpu_note = " (a GPU runs these much faster)." if c.device.type == "cpu" else "."
    st.caption(
        f"{len(items)} settings ({len(items) - len(todo)} already trained). Estimated training time for the rest: "
        f"about {seconds:.0f} s on {c.runs_on}" + gpu_note
    )
    clicked = st.button(label, key=button, type="primary", disabled=not allowed or not todo)
    if allowed and todo and (clicked or (c.auto and seconds <= AUTO_SECONDS)):
        with st.status(f"Training {len(todo)} setting(s)…", expanded=True) as box:
            overall = st.progress(0.0, text="starting")
            for index, item in enumerate(todo):
                overall.progress(index / len(todo), text=f"{index} of {len(todo)} trained")
                estimate = c.settings.seconds([(item[0], item[1])])
                views.run(view_of(item), estimate, title=f"Training {describe(item)}")
            box.update(label=f"Trained {len(todo)} setting(s)", state="complete", expanded=False)
    elif allowed and todo:
        st.info(f"Estimated {seconds:.0f} s: press **{label}** to start (it is cached afterwards).")
    return {item: r for item in items if (r := views.lookup(view_of(item))) is not None}


def grid_allowed(c: RankHeadsControls, cells: list[study.Cell]) -> bool:
    """Check the grid's size and its whole training time against the server's job limit; say so if refused."""
    t = c.settings
    try:
        rh.check_grid(t.d, t.n_points, c.ranks or [t.d], c.head_counts or [1], t.steps, seeds=t.seeds)
        limits.check(
            "Steps", t.steps, STEPS, lambda s: limits.Estimate(0, rh.estimate_seconds(t.d, cells, s, seeds=t.seeds))
        )
    except ValueError as exc:
        st.error(f"This grid is refused: {exc}")
        return False
    return True


def train_grid(c: RankHeadsControls, cells: list[study.Cell], allowed: bool) -> dict[study.Cell, rh.TrainResult]:
    """The grid's trained cells (cached, trained now, or after the button); a failure is shown, not raised."""
    t = c.settings
    try:
        return train_panel(
            c,
            cells,
            lambda cell: views.RankHeadsCell(t, *cell),
            "Train the grid",
            "train_grid",
            lambda todo: allowed,
        )
    except (ValueError, RuntimeError) as exc:
        st.error(f"Training failed: {exc}")
        return {}


def train_n_sweep(c: RankHeadsControls, sweep: list[tuple[int, int, int]]) -> dict[tuple[int, int, int], Any]:
    """The N sweep's trained runs (uniform points), each checked against the job limit before training."""
    t = c.settings

    def allowed(todo: list[tuple[int, int, int]]) -> bool:
        seconds = lambda s: sum(rh.estimate_seconds(t.d, [r[:2]], s, seeds=t.seeds, device=t.device) for r in todo)  # noqa: E731
        return ui.within_limits(lambda: limits.check("Steps", t.steps, STEPS, lambda s: limits.Estimate(0, seconds(s))))

    return train_panel(
        c,
        sweep,
        lambda r: views.RankHeadsNRun(t, r[0], r[1], r[2]),
        "Train the N sweep",
        "train_n",
        allowed,
    )


def trained_caption(results: dict[study.Cell, rh.TrainResult], seeds: int) -> None:
    devices = ", ".join(sorted({r.device for r in results.values()}))
    seconds = sum(r.seconds for r in results.values())
    st.caption(f"Trained on **{devices}**; {seconds:.1f} s of training in total (best of {seeds}).")


def low_rank_line(summary: study.LowRankSummary | None, refs: list[study.Reference]) -> None:
    """One sentence: the full-rank single head against the best and worst low-rank cells shown."""
    if summary is None:
        return
    floor = next((f" (degree-1 floor {r.value:.3f})" for r in refs if r.kind == "degree1_floor"), "")
    st.markdown(
        f"Full rank with one head: **{summary.full_error:.4f}**. Heads of rank ≤ d/4 shown: "
        f"**{summary.low_min:.3f} – {summary.low_max:.3f}**{floor}; the best of them is "
        f"**{summary.ratio:.1f}×** the full-rank error."
    )


def n_sweep_intro(d: int) -> None:
    st.markdown(
        f"Full rank against rank 1 at equal parameters (r·d·H = d²): one head of rank {d} against {d} heads of "
        "rank 1, on N i.i.d. uniform points (the paper's Fig. 4 asks the same with two layers at d = 64)."
    )


def fact_one_allowed(d: int, n_points: int) -> bool:
    """Fact 1's construction on its fresh samples against the server's limits (refusal shown)."""
    estimate = lambda n: limits.construction_estimate(d, n, samples=study.FACT1_SAMPLES)  # noqa: E731
    return ui.within_limits(lambda: limits.check("N for this panel", n_points, range(2, 257), estimate))


def fact_one_line(curve: study.FactOneCurve) -> None:
    st.markdown(
        f"Hardmax (c = ∞): error **{curve.hardmax:.3g}** — exact. At c = {curve.c[-1]:.0f}: "
        f"c × error = {curve.c[-1] * curve.error[-1]:.2f} (the notes measure ≈ 2.6 at d = 16, N = 16)."
    )


def numbers_table(table: pd.DataFrame) -> None:
    with st.expander("Numbers behind the charts"):
        st.dataframe(table, hide_index=True, width="stretch")
        st.caption(NUMBERS_CAPTION)
