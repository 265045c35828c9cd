"""Rank vs heads: one attention layer trained live on the nearest-neighbour target (Amsel, Yehudai & Bruna 2024)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

import ui
from core import device as core_device
from core import limits
from core import rank_heads as rh
from core import rank_heads_study as study
from ui import result_cache
from ui.figures import rank_heads as figs
from ui.sidebar import navigation

AUTO_SECONDS = 3.0  # settings estimated below this train without a click: the first chart never waits long
DIMS = [4, 8, 16, 32, 64]
POINTS = [2, 3, 4, 8, 16, 64, 256]
STEPS = [20, 50, 100, 200, 500, 1000, 2000, 5000]
HEAD_OPTIONS = [str(2**i) for i in range(0, 9)]  # 1 .. 256
N_SWEEP = [str(n) for n in (2, 4, 8, 16, 64, 256)]
TARGET_HELP = (
    "nearest: the x_i closest to y (the paper's Eq. 3). farthest: the paper's experiments (§7). biased: nearest "
    "after a fixed per-position bias b_i (Eq. 8, Theorem 4); the layer also learns a positional score bias."
)

ui.page("Rank vs heads", icon=":material/view_column:")
bar = st.sidebar
nav_box = bar.container()
ui.explain(
    "Is attention better spent on many low-rank heads or on a few full-rank ones? Here one attention layer learns "
    "to return, for a query point y on the unit sphere, the nearest of N target points. One full-rank head does it "
    "(its bilinear form W_Q W_Kᵀ ≈ c·I picks the largest xᵢ·y), but heads of rank r < d stall on a plateau that more "
    "heads barely lower: the paper proves that rank-r heads need about (d/r)^(1/ε) heads for error ε. "
    "'Rank' here is the head dimension r, the rank of each head's W_Q W_Kᵀ, not the rank of the n × n attention "
    "matrix that the approximation pages work on.",
    r"\mathrm{model}(X, y) = \sum_{h=1}^{H} V_h X\,\mathrm{softmax}\!\big(c\,X^\top K_h Q_h^\top y\big),\quad "
    r"K_h, Q_h \in \mathbb{R}^{d\times r},\quad "
    r"\varepsilon = \mathbb{E}\,\lVert f(X; y) - \mathrm{model}(X, y)\rVert^2",
)

bar.header("Task")
target = ui.choice("Target", "target", list(rh.TARGETS), "nearest", where=bar, help=TARGET_HELP)
d = int(ui.choice("Dimension d", "dim", DIMS, 16, where=bar, help="Points live on the unit sphere in R^d."))
points_help = "N ≤ d: orthonormal targets (the theorem's setting, N = 2 in the paper); N > d: i.i.d. uniform points."
n_points = int(ui.choice("Target points N", "points", POINTS, 2, where=bar, help=points_help))
distribution = "orthonormal" if n_points <= d else "uniform"
bar.caption(f"Targets: **{distribution}** ({'the theory setting D_N' if distribution == 'orthonormal' else 'i.i.d.'}).")
bar.header("Training")
steps = int(ui.log_slider("Steps", "steps", STEPS, 500, where=bar, help="AdamW, batch 512, 5% warm-up then cosine."))
rank_options = [str(2**i) for i in range(0, int(math.log2(d)) + 1)]
rank_default = [r for r in ("1", "4", "16") if r in rank_options] or rank_options[:1]
rank_help = "Rank of each head's W_Q W_Kᵀ (its head dimension). Powers of 2 up to d."
ranks = sorted(
    int(r) for r in ui.multiselect("Head ranks r", "ranks", rank_options, rank_default, where=bar, help=rank_help)
)
head_help = "Number of heads; the layer sums them."
head_counts = sorted(
    int(h) for h in ui.multiselect("Heads H", "hv", HEAD_OPTIONS, ["1", "4", "16"], where=bar, help=head_help)
)
seeds = ui.int_slider("Seeds (best of)", "seeds", 1, 5, 1, where=bar, help="The paper reports the best of 5 runs.")
seed = ui.int_input("Seed", "seed", 0, 2**31 - 1, 0, where=bar, help="First training seed (init and batches).")
device = ui.device_control(bar)[1]
auto_help = (
    f"Train as soon as the settings change when the estimate is under {AUTO_SECONDS:.0f} s; else wait for the button."
)
auto = ui.toggle("Train automatically", "auto", True, where=bar, help=auto_help)
settings = study.TrainSettings(target, d, n_points, steps, seeds, seed, device.type)


def train_panel(name: str, items: list[Any], key: Any, run: Any, label: str, button: str, ok: Any) -> dict:
    """The items already in the shared cache; the rest trained at once when cheap (and ``auto``), else on the button,
    in an open status box (an overall bar, then each job's own bar and Cancel button from ``ui.run_heavy``)."""
    todo = [item for item in items if result_cache.get(name, key(item)) is None]
    seconds = settings.seconds([item[:2] for item in todo])
    allowed = ok(todo)
    st.caption(
        f"{len(items)} settings ({len(items) - len(todo)} already trained). Estimated training time for the rest: "
        f"about {seconds:.0f} s on {WHERE}" + (" (a GPU runs these much faster)." if device.type == "cpu" else ".")
    )
    clicked = st.button(label, key=button, type="primary", disabled=not allowed or not todo)
    if allowed and todo and (clicked or (auto and seconds <= AUTO_SECONDS)):
        with st.status(f"Training {len(todo)} setting(s)…", expanded=True) as box:
            overall = st.progress(0.0, text="starting")
            for index, item in enumerate(todo):
                overall.progress(index / len(todo), text=f"{index} of {len(todo)} trained")
                work = lambda job, item=item: run(item, job)  # noqa: E731
                ui.run_heavy(name, key(item), work, settings.seconds([item[:2]]), title=f"Training {describe(item)}")
            box.update(label=f"Trained {len(todo)} setting(s)", state="complete", expanded=False)
    elif allowed and todo:
        st.info(f"Estimated {seconds:.0f} s: press **{label}** to start (it is cached afterwards).")
    return {item: r for item in items if (r := result_cache.get(name, key(item))) is not None}


def describe(item: tuple[int, ...]) -> str:
    return f"r = {item[0]}, H = {item[1]}" + (f", N = {item[2]}" if len(item) > 2 else "")


WHERE = "the CPU (one thread)" if device.type == "cpu" else core_device.describe(device)
tab_grid, tab_n, tab_c, tab_theory, tab_paper = st.tabs(
    ["Rank × heads grid", "Error vs N", "Temperature (Fact 1)", "Theorem shapes", "The paper's figures"]
)
with tab_grid:
    cells = study.grid_cells(d, ranks, head_counts)
    grid_ok = True
    try:
        rh.check_grid(d, n_points, ranks or [d], head_counts or [1], steps, seeds=seeds)
        limits.check(  # the whole grid's training time against the server's job limit
            "Steps", steps, STEPS, lambda t: limits.Estimate(0, rh.estimate_seconds(d, cells, t, seeds=seeds))
        )
    except ValueError as exc:
        grid_ok = False
        st.error(f"This grid is refused: {exc}")
    if not ranks or not head_counts:
        st.info("Pick at least one rank and one head count.")
    results: dict[study.Cell, rh.TrainResult] = {}
    try:
        results = train_panel(
            "rank_heads_cell",
            cells,
            lambda c: ("grid", target, d, n_points, steps, seeds, seed, device.type, *c),
            lambda c, job: study.train_cell(settings, *c, progress=job),
            "Train the grid",
            "train_grid",
            lambda todo: grid_ok,
        )
    except (ValueError, RuntimeError) as exc:
        st.error(f"Training failed: {exc}")
    shown = {c: r for c, r in results.items() if c[0] in ranks and c[1] in head_counts}
    refs = study.reference_levels(settings, results.get((d, 1)))
    table = pd.DataFrame(study.grid_rows(d, results))
    if results:
        devices = ", ".join(sorted({r.device for r in results.values()}))
        seconds = sum(r.seconds for r in results.values())
        st.caption(f"Trained on **{devices}**; {seconds:.1f} s of training in total (best of {seeds}).")
    if shown:
        heat = figs.grid_heatmap(d, {c: r.error for c, r in shown.items()})
        ui.show_figure(heat, "rank_heads_heatmap", data=table, key="heat")
    vs_heads = figs.error_vs_heads({c: r.error for c, r in shown.items()}, refs, head_counts or [1], preview=not shown)
    ui.show_figure(vs_heads, "error_vs_heads", data=table, key="vs_heads")
    summary = study.low_rank_summary(d, results.get((d, 1)), shown)
    if summary is not None:
        floor = next((f" (degree-1 floor {r.value:.3f})" for r in refs if r.kind == "degree1_floor"), "")
        st.markdown(
            f"Full rank with one head: **{summary.full_error:.4f}**. Heads of rank ≤ d/4 shown: "
            f"**{summary.low_min:.3f} – {summary.low_max:.3f}**{floor}; the best of them is "
            f"**{summary.ratio:.1f}×** the full-rank error."
        )
    if results:
        curves = {c: (r.curve_steps, r.curve) for c, r in results.items()}
        ui.show_figure(figs.training_curves(curves), "training_curves", key="curves")
        with st.expander("Numbers behind the charts"):
            st.dataframe(table, hide_index=True, width="stretch")
            st.caption(
                "For r = d the last two columns are the Fig. 2 analogue: the angle between the learned K Qᵀ (times "
                "c) and I, near 0° for the nearest target and near 180° for the farthest, and its size."
            )

with tab_n:
    st.markdown(
        f"Full rank against rank 1 at equal parameters (r·d·H = d²): one head of rank {d} against {d} heads of "
        "rank 1, on N i.i.d. uniform points (the paper's Fig. 4 asks the same with two layers at d = 64)."
    )
    sweep = study.n_sweep_cells(
        d, [int(n) for n in ui.multiselect("N values", "nsweep", N_SWEEP, ["2", "4", "16", "64"])]
    )

    def sweep_ok(todo: list[tuple[int, int, int]]) -> bool:  # the runs still to train against the job limit
        seconds = lambda t: sum(rh.estimate_seconds(d, [c[:2]], t, seeds=seeds, device=device.type) for c in todo)  # noqa: E731
        return ui.state.within_limits(
            lambda: limits.check("Steps", steps, STEPS, lambda t: limits.Estimate(0, seconds(t)))
        )

    found = train_panel(
        "rank_heads_n",
        sweep,
        lambda c: ("n_sweep", target, d, c[2], steps, seeds, seed, device.type, c[0], c[1]),
        lambda c, job: study.train_cell(settings, c[0], c[1], n_points=c[2], distribution="uniform", progress=job),
        "Train the N sweep",
        "train_n",
        sweep_ok,
    )
    if found:
        frame = pd.DataFrame(
            [{"N": n, "rank": r, "heads": h, "error": v.error, "device": v.device} for (r, h, n), v in found.items()]
        )
        ui.show_figure(figs.error_vs_n(d, {c: v.error for c, v in found.items()}), "error_vs_n", data=frame, key="vs_n")
        frame["setting"] = [f"r = {r}, H = {h}" for r, h in zip(frame["rank"], frame["heads"], strict=True)]
        st.dataframe(frame.pivot(index="N", columns="setting", values="error"), width="stretch")

with tab_c:
    st.markdown(
        "Fact 1: one full-rank head with V = I and W_Q W_Kᵀ = c·I. With hardmax (c = ∞) it returns the nearest "
        "point exactly, for any d and N; with softmax its error falls like 1/c, and near hardmax it is about "
        "0.2 × the attention entropy. No training: this is the construction itself, on 20 000 fresh samples."
    )
    c_points = ui.int_slider("N for this panel", "cpoints", 2, 256, 16, help="Fact 1 draws N i.i.d. points.")
    fact1_estimate = lambda n: limits.construction_estimate(d, n, samples=study.FACT1_SAMPLES)  # noqa: E731
    if ui.state.within_limits(lambda: limits.check("N for this panel", c_points, range(2, 257), fact1_estimate)):
        cc = ui.run_heavy(
            "rank_heads_construction",
            (d, c_points, target),
            lambda job: study.fact_one_curve(d, c_points, target, progress=job),  # checks the token between c values
            ui.estimate_seconds(study.fact_one_elements(d, c_points)),
            title="Evaluating the construction",
        )
        data = pd.DataFrame({"c": cc.c, "error": cc.error, "entropy_nats": cc.entropy})
        ui.show_figure(figs.fact_one(cc, d, c_points), "fact1_temperature", data=data, key="fact1")
        st.markdown(
            f"Hardmax (c = ∞): error **{cc.hardmax:.3g}** — exact. At c = {cc.c[-1]:.0f}: "
            f"c × error = {cc.c[-1] * cc.error[-1]:.2f} (the notes measure ≈ 2.6 at d = 16, N = 16)."
        )

with tab_theory:
    st.markdown(
        "**Shapes only, unknown constants.** The paper's lower bounds hold with universal constants c, c′, C, C′ that "
        "it does not give, so only how these curves move with d, r and ε means anything; their heights do not."
    )
    eps = ui.log_slider("Target error ε", "eps", [0.05, 0.1, 0.15, 0.2, 0.3], 0.1, help="For Theorem 2(ii).")
    ui.show_figure(figs.theorem_shapes(d, study.theorem_shapes(d, eps)), "theorem_shapes", key="theory")
    st.caption(
        "Full rank needs one head (d² parameters); rank r needs H ≳ (d/r)^(1/ε) heads, i.e. about d^(1+1/ε) "
        "parameters at r = 1. Theorem 4 (biased target) has the shape exp(d − r)/d²."
    )

with tab_paper:
    st.markdown(
        "**The paper's numbers**, read from the authors' figure images (±10–15% on log axes) — not reproduced here. "
        "Setting: d = 64, N = 16 i.i.d. points, farthest neighbour, self-attention in a full Transformer layer, "
        "10⁵ steps of batch 256, best of 5 runs (a GPU for hours). The live grid above is a smaller, cross-attention "
        "version of the same question."
    )
    fig1 = pd.DataFrame(
        [{"budget": b, "rank": r, "error": e} for b, v in rh.PAPER_FIG1_L1.items() for r, e in v.items()]
    )
    ui.show_figure(figs.paper_fig1(), "paper_fig1", data=fig1, key="paper1")
    fig4 = pd.DataFrame(
        [{"rank": r, "N": n, "error (paper)": e} for r, v in rh.PAPER_FIG4.items() for n, e in v.items()]
    )
    st.markdown(
        "**The paper's Fig. 4** (two layers, d = 64, H = d²/r): error by N — full rank stays low, rank 1 does not."
    )
    st.dataframe(fig4.pivot(index="N", columns="rank", values="error (paper)"), width="stretch")

navigation(nav_box)
ui.finish()
