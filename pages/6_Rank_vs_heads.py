"""Rank vs heads: one attention layer trained live on the nearest-neighbour target (Amsel, Yehudai & Bruna 2024)."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import ui
from core import device as core_device
from core import limits
from core import rank_heads as rh
from ui.sidebar import navigation

AUTO_SECONDS = 30.0  # settings estimated below this train without a click
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
n_points = int(
    ui.choice(
        "Target points N",
        "points",
        POINTS,
        2,
        where=bar,
        help="N ≤ d: orthonormal targets (the theorem's setting, N = 2 in the paper); N > d: i.i.d. uniform points.",
    )
)
distribution = "orthonormal" if n_points <= d else "uniform"
bar.caption(f"Targets: **{distribution}** ({'the theory setting D_N' if distribution == 'orthonormal' else 'i.i.d.'}).")
bar.header("Training")
steps = int(ui.log_slider("Steps", "steps", STEPS, 500, where=bar, help="AdamW, batch 512, 5% warm-up then cosine."))
rank_options = [str(2**i) for i in range(0, int(math.log2(d)) + 1)]
ranks = sorted(
    int(r)
    for r in ui.multiselect(
        "Head ranks r",
        "ranks",
        rank_options,
        [r for r in ("1", "4", "16") if r in rank_options] or rank_options[:1],
        where=bar,
        help="Rank of each head's W_Q W_Kᵀ (its head dimension). Powers of 2 up to d.",
    )
)
head_counts = sorted(
    int(h)
    for h in ui.multiselect(
        "Heads H", "hv", HEAD_OPTIONS, ["1", "4", "16"], where=bar, help="Number of heads; the layer sums them."
    )
)
seeds = ui.int_slider("Seeds (best of)", "seeds", 1, 5, 1, where=bar, help="The paper reports the best of 5 runs.")
seed = ui.int_input("Seed", "seed", 0, 2**31 - 1, 0, where=bar, help="First training seed (init and batches).")
device = ui.device_control(bar)[1]
auto = ui.toggle(
    "Train automatically",
    "auto",
    True,
    where=bar,
    help=f"Train as soon as the settings change when the estimate is under {AUTO_SECONDS:.0f} s; otherwise "
    "wait for the button.",
)

TRAINED_MAX = 256  # trained settings kept per server process (a few kB each)


@st.cache_resource
def _trained() -> dict[str, Any]:
    """Every trained setting of this server process, shared across sessions (LRU, never mutated in place)."""
    return {"lock": threading.Lock(), "items": OrderedDict()}


def lookup(key: tuple[Any, ...]) -> rh.TrainResult | None:
    store = _trained()
    with store["lock"]:
        return store["items"].get(key)


def train_cached(key: tuple[Any, ...], run: Any) -> rh.TrainResult:
    found = lookup(key)
    if found is not None:
        return found
    value = run()
    store = _trained()
    with store["lock"]:
        store["items"][key] = value
        while len(store["items"]) > TRAINED_MAX:
            store["items"].popitem(last=False)
    return value


# The full-rank single head is always trained: it is the reference every curve is compared with.
cells = sorted({(r, h) for r in ranks for h in head_counts} | {(d, 1)})
run_key = (target, d, n_points, steps, seeds, seed, device.type)


def cell_key(rank: int, heads: int) -> tuple[Any, ...]:
    return ("grid", *run_key, rank, heads)


def cached_cell(rank: int, heads: int) -> rh.TrainResult | None:
    return lookup(cell_key(rank, heads))


def train_cells(todo: list[tuple[int, int]], label: str) -> dict[tuple[int, int], rh.TrainResult]:
    """Train the cells (each cached on its own), with a progress bar over all steps."""
    out: dict[tuple[int, int], rh.TrainResult] = {}
    status = st.status(label, expanded=False)
    progress = status.progress(0.0, text="starting")
    total = len(todo)
    for index, (rank, heads) in enumerate(todo):
        progress.progress(index / total, text=f"r = {rank}, H = {heads}")

        def run(rank: int = rank, heads: int = heads) -> rh.TrainResult:
            def train(job: Any) -> rh.TrainResult:  # runs on a worker thread: reports to the job, not to st
                return rh.train_best_of(
                    d,
                    n_points,
                    rank,
                    heads,
                    steps,
                    seeds=seeds,
                    device=device,
                    target=target,
                    first_seed=seed,
                    progress=lambda step, of: job(step / of, f"step {step}/{of}"),
                )

            estimate = rh.estimate_seconds(d, [(rank, heads)], steps, seeds=seeds, device=device.type)
            return ui.run_heavy(
                "rank_heads_cell", cell_key(rank, heads), train, estimate, title=f"Training r = {rank}, H = {heads}"
            )

        out[(rank, heads)] = train_cached(cell_key(rank, heads), run)
    progress.progress(1.0, text="done")
    status.update(label=f"Trained {total} setting(s)", state="complete")
    return out


tab_grid, tab_n, tab_c, tab_theory, tab_paper = st.tabs(
    ["Rank × heads grid", "Error vs N", "Temperature (Fact 1)", "Theorem shapes", "The paper's figures"]
)

# ------------------------------------------------------------------------------------------------ grid
with tab_grid:
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
    todo = [c for c in cells if cached_cell(*c) is None]
    estimate = rh.estimate_seconds(d, todo, steps, seeds=seeds, device=device.type)
    st.caption(
        f"{len(cells)} settings ({len(cells) - len(todo)} already trained). Estimated training time for the rest: "
        f"about {estimate:.0f} s on {'the CPU (one thread)' if device.type == 'cpu' else core_device.describe(device)}"
        + (" (a GPU runs this grid much faster)." if device.type == "cpu" else ".")
    )
    clicked = st.button("Train the grid", key="train_grid", type="primary", disabled=not grid_ok or not todo)
    results: dict[tuple[int, int], rh.TrainResult] = {}
    if grid_ok and todo and (clicked or (auto and estimate <= AUTO_SECONDS)):
        try:
            train_cells(todo, "Training the rank × heads grid…")
        except (ValueError, RuntimeError) as exc:
            st.error(f"Training failed: {exc}")
    elif grid_ok and todo:
        st.info(f"Estimated {estimate:.0f} s: press **Train the grid** to start (it is cached afterwards).")
    for c in cells:
        found = cached_cell(*c)
        if found is not None:
            results[c] = found

    if results:
        shown = {c: r for c, r in results.items() if c[0] in ranks and c[1] in head_counts}
        full = results.get((d, 1))
        devices = sorted({r.device for r in results.values()})
        seconds = sum(r.seconds for r in results.values())
        st.caption(f"Trained on **{', '.join(devices)}**; {seconds:.1f} s of training in total (best of {seeds}).")
        floor = (
            rh.degree1_floor(d) if (n_points == 2 and distribution == "orthonormal" and target != "biased") else None
        )
        midpoint = rh.midpoint_error(n_points) if distribution == "orthonormal" else None

        # Heatmap over (log2 H, log2 r) with equal-parameter diagonals r d H = d^(1+c).
        if shown:
            hs = sorted({h for _, h in shown})
            rs = sorted({r for r, _ in shown})
            z = np.full((len(rs), len(hs)), np.nan)
            for (r, h), res in shown.items():
                z[rs.index(r), hs.index(h)] = res.error
            xs, ys = [math.log2(h) for h in hs], [math.log2(r) for r in rs]
            heat = go.Figure(
                go.Heatmap(
                    x=xs,
                    y=ys,
                    z=np.log10(np.clip(z, 1e-6, None)),
                    text=np.vectorize(lambda v: "" if np.isnan(v) else f"{v:.3f}")(z),
                    texttemplate="%{text}",
                    textfont={"color": "black", "size": 14},
                    colorscale="YlOrRd",
                    colorbar={"title": "log10 error"},
                    hovertemplate="H = 2^%{x:.0f}, r = 2^%{y:.0f}<br>log10 error %{z:.2f}<extra></extra>",
                )
            )
            x_span = np.linspace(min(xs) - 0.5, max(xs) + 0.5, 50)
            for power, dash in ((1.0, "solid"), (1.5, "dash"), (2.0, "dot")):
                line_y = power * math.log2(d) - x_span
                keep = (line_y >= min(ys) - 0.5) & (line_y <= max(ys) + 0.5)
                if keep.any():
                    exponent = f"{1 + power:g}"
                    heat.add_scatter(
                        x=x_span[keep],
                        y=line_y[keep],
                        mode="lines",
                        line={"color": "#2c3e50", "dash": dash, "width": 1.5},
                        opacity=0.55,
                        name=f"r·d·H = d^{exponent}",
                        hoverinfo="name",
                    )
            heat.update_layout(
                title={
                    "text": "Final test error over (rank r, heads H); lines: equal parameters r·d·H",
                    "font": {"size": 14},
                },
                height=420,
                template="plotly_white",
                margin={"l": 10, "r": 10, "t": 40, "b": 10},
                xaxis={"title": "heads H", "tickvals": xs, "ticktext": [str(h) for h in hs]},
                yaxis={"title": "head rank r", "tickvals": ys, "ticktext": [str(r) for r in rs]},
                legend={"orientation": "h", "yanchor": "top", "y": -0.18, "x": 0},
            )
            table = pd.DataFrame(
                [
                    {
                        "rank": r,
                        "heads": h,
                        "params r·d·H": rh.parameter_count(d, r, h),
                        "params / d²": rh.parameter_count(d, r, h) / d**2,
                        "trained params": res.parameters,
                        "error": res.error,
                        "best during training": res.best_error,
                        "learned c": res.temperature,
                        "seconds": res.seconds,
                        "seed": res.seed,
                        "angle(KQᵀ, I) °": float(np.median(res.kq_angle_deg)) if res.kq_angle_deg else np.nan,
                        "‖KQᵀ‖/√d": float(np.median(res.kq_norm)) if res.kq_norm else np.nan,
                    }
                    for (r, h), res in sorted(results.items())
                ]
            )
            ui.show_figure(heat, "rank_heads_heatmap", data=table, key="heat")

            # Error against heads, one line per rank, with the reference lines.
            curves = ui.line_figure(
                "Error against the number of heads, per rank",
                "heads H",
                "test error",
                log_x=True,
                log_y=True,
                height=420,
            )
            for i, r in enumerate(rs):
                pts = sorted((h, res.error) for (rr, h), res in shown.items() if rr == r)
                curves.add_scatter(
                    x=[p[0] for p in pts],
                    y=[p[1] for p in pts],
                    mode="lines+markers",
                    name=f"r = {r}",
                    line={"color": ui.method_colour(i)},
                )
            refs: list[tuple[str, float, str]] = []
            if full is not None:
                refs.append((f"full rank, 1 head: {full.error:.4f}", full.error, "#111"))
                construction = rh.full_rank_construction(
                    d, n_points, full.temperature, samples=20_000, distribution=distribution, target=target
                )
                refs.append(
                    (f"Fact 1 head at the learned c = {full.temperature:.1f}: {construction:.4f}", construction, "#777")
                )
            if midpoint is not None:
                refs.append((f"predict the mean of the targets: {midpoint:.3g}", midpoint, "#c0392b"))
            if floor is not None:
                refs.append((f"degree-1 floor ½(1 − d·E|xᵀy|²) = {floor:.3f}", floor, "#e67e22"))
            for label, value, colour in refs:
                curves.add_scatter(
                    x=[min(hs), max(hs)],
                    y=[value, value],
                    mode="lines",
                    name=label,
                    line={"color": colour, "dash": "dash", "width": 1.5},
                )
            ui.show_figure(curves, "error_vs_heads", data=table, key="vs_heads")
            if full is not None:
                low = [res.error for (r, h), res in shown.items() if r <= d // 4]
                if low:
                    floor_text = f" (degree-1 floor {floor:.3f})" if floor is not None else ""
                    st.markdown(
                        f"Full rank with one head: **{full.error:.4f}**. Heads of rank ≤ d/4 shown: "
                        f"**{min(low):.3f} – {max(low):.3f}**{floor_text}; the best of them is "
                        f"**{min(low) / max(full.error, 1e-12):.1f}×** the full-rank error."
                    )

            # Training curves.
            fig_curve = ui.line_figure("Test error during training", "step", "test error", log_y=True, height=380)
            for i, ((r, h), res) in enumerate(sorted(results.items())):
                fig_curve.add_scatter(
                    x=res.curve_steps,
                    y=res.curve,
                    mode="lines",
                    name=f"r={r}, H={h}",
                    line={"color": ui.method_colour(i)},
                )
            ui.show_figure(fig_curve, "training_curves", key="curves")
            with st.expander("Numbers behind the charts"):
                st.dataframe(table, hide_index=True, width="stretch")
                st.caption(
                    "For r = d the last two columns are the Fig. 2 analogue: the angle between the learned K Qᵀ (times "
                    "c) and I, near 0° for the nearest target and near 180° for the farthest, and its size."
                )

# ------------------------------------------------------------------------------------------------ N sweep
with tab_n:
    st.markdown(
        f"Full rank against rank 1 at equal parameters (r·d·H = d²): one head of rank {d} against {d} heads of "
        "rank 1, on N i.i.d. uniform points (the paper's Fig. 4 asks the same with two layers at d = 64)."
    )
    n_values = sorted(int(n) for n in ui.multiselect("N values", "nsweep", N_SWEEP, ["2", "4", "16", "64"]))
    sweep_cells = [(r, h, n) for n in n_values for r, h in ((d, 1), (1, d))]

    def n_key(r: int, h: int, n: int) -> tuple[Any, ...]:
        return ("n_sweep", target, d, n, steps, seeds, seed, device.type, r, h)

    missing = [c for c in sweep_cells if lookup(n_key(*c)) is None]
    n_estimate = sum(rh.estimate_seconds(d, [(r, h)], steps, seeds=seeds, device=device.type) for r, h, _ in missing)
    st.caption(f"{len(sweep_cells)} runs; about {n_estimate:.0f} s still to train.")
    n_ok = ui.state.within_limits(
        lambda: limits.check(
            "Steps",
            steps,
            STEPS,
            lambda t: limits.Estimate(
                0, sum(rh.estimate_seconds(d, [(r, h)], t, seeds=seeds, device=device.type) for r, h, _ in missing)
            ),
        )
    )
    go_n = st.button("Train the N sweep", key="train_n", disabled=not missing or not n_ok)
    if missing and n_ok and (go_n or (auto and n_estimate <= AUTO_SECONDS / 3)):
        status = st.status("Training the N sweep…", expanded=False)
        prog = status.progress(0.0)
        for index, (r, h, n) in enumerate(missing):

            def run_n(r: int = r, h: int = h, n: int = n) -> rh.TrainResult:
                def train(job: Any) -> rh.TrainResult:
                    return rh.train_best_of(
                        d,
                        n,
                        r,
                        h,
                        steps,
                        seeds=seeds,
                        device=device,
                        target=target,
                        first_seed=seed,
                        distribution="uniform",
                        progress=lambda step, of: job(step / of, f"step {step}/{of}"),
                    )

                estimate = rh.estimate_seconds(d, [(r, h)], steps, seeds=seeds, device=device.type)
                return ui.run_heavy("rank_heads_n", n_key(r, h, n), train, estimate, title=f"Training N = {n}")

            train_cached(n_key(r, h, n), run_n)
            prog.progress((index + 1) / len(missing), text=f"N = {n}, r = {r}, H = {h}")
        status.update(label="N sweep trained", state="complete")
    elif missing:
        st.info("Press **Train the N sweep** to start.")
    rows = []
    for r, h, n in sweep_cells:
        found = lookup(n_key(r, h, n))
        if found is not None:
            rows.append({"N": n, "rank": r, "heads": h, "error": found.error, "device": found.device})
    if rows:
        frame = pd.DataFrame(rows)
        fig_n = ui.line_figure("Error against the number of points N", "N", "test error", log_x=True, log_y=True)
        for i, (r, h) in enumerate(((d, 1), (1, d))):
            part = frame[(frame["rank"] == r) & (frame["heads"] == h)]
            fig_n.add_scatter(
                x=part["N"],
                y=part["error"],
                mode="lines+markers",
                name=f"r = {r}, H = {h}",
                line={"color": ui.method_colour(i)},
            )
        ui.show_figure(fig_n, "error_vs_n", data=frame, key="vs_n")
        frame["setting"] = [f"r = {r}, H = {h}" for r, h in zip(frame["rank"], frame["heads"], strict=True)]
        st.dataframe(frame.pivot(index="N", columns="setting", values="error"), width="stretch")

# ------------------------------------------------------------------------------------------------ Fact 1
with tab_c:
    st.markdown(
        "Fact 1: one full-rank head with V = I and W_Q W_Kᵀ = c·I. With hardmax (c = ∞) it returns the nearest "
        "point exactly, for any d and N; with softmax its error falls like 1/c, and near hardmax it is about "
        "0.2 × the attention entropy. No training: this is the construction itself, on 20 000 fresh samples."
    )
    c_points = ui.int_slider("N for this panel", "cpoints", 2, 256, 16, help="Fact 1 draws N i.i.d. points.")

    def construction_curve(d: int, n: int, target: str) -> dict[str, Any]:
        def work(job: Any) -> dict[str, Any]:  # on a worker thread; construction_sweep checks the job's token
            cs = np.geomspace(1, 4096, 13)
            res = rh.construction_sweep(d, n, list(cs), samples=20_000, target=target)
            hard = rh.full_rank_construction(d, n, math.inf, samples=20_000, target=target)
            return {
                "c": cs,
                "error": np.array([r.error for r in res]),
                "entropy": np.array([r.entropy for r in res]),
                "hardmax": hard,
            }

        estimate = ui.estimate_seconds(14 * 20_000 * n * (d + n))
        title = "Evaluating the construction"
        return ui.run_heavy("rank_heads_construction", (d, n, target), work, estimate, title=title)

    if ui.state.within_limits(
        lambda: limits.check(
            "N for this panel", c_points, range(2, 257), lambda n: limits.construction_estimate(d, n, samples=20_000)
        )
    ):
        cc = construction_curve(d, c_points, target)
        fig_c = ui.line_figure(
            f"Fact 1 head: error against c (d = {d}, N = {c_points})",
            "inverse temperature c",
            "error",
            log_x=True,
            log_y=True,
        )
        fig_c.add_scatter(x=cc["c"], y=cc["error"], mode="lines+markers", name="softmax head, V = I, KQᵀ = c·I")
        guide = cc["error"][-1] * cc["c"][-1] / cc["c"]
        fig_c.add_scatter(x=cc["c"], y=guide, mode="lines", name="∝ 1/c (guide)", line={"dash": "dot", "color": "#999"})
        fig_c.add_scatter(
            x=cc["c"],
            y=0.2 * cc["entropy"],
            mode="lines",
            name="0.2 × attention entropy (nats)",
            line={"dash": "dash", "color": "#e67e22"},
        )
        ui.show_figure(
            fig_c,
            "fact1_temperature",
            data=pd.DataFrame({"c": cc["c"], "error": cc["error"], "entropy_nats": cc["entropy"]}),
            key="fact1",
        )
        st.markdown(
            f"Hardmax (c = ∞): error **{cc['hardmax']:.3g}** — exact. At c = {cc['c'][-1]:.0f}: "
            f"c × error = {cc['c'][-1] * cc['error'][-1]:.2f} (the notes measure ≈ 2.6 at d = 16, N = 16)."
        )

# ------------------------------------------------------------------------------------------------ theory
with tab_theory:
    st.markdown(
        "**Shapes only, unknown constants.** The paper's lower bounds hold with universal constants c, c′, C, C′ that "
        "it does not give, so only how these curves move with d, r and ε means anything; their heights do not."
    )
    eps = ui.log_slider("Target error ε", "eps", [0.05, 0.1, 0.15, 0.2, 0.3], 0.1, help="For Theorem 2(ii).")
    r_axis = [2**i for i in range(0, int(math.log2(d)) + 1) if 2**i < d] or [1]
    fig_t = ui.line_figure(
        f"Heads needed by the lower bounds at d = {d} (shape, unknown constants)",
        "head rank r",
        "heads H (log scale; constants set to 1)",
        log_x=True,
        log_y=True,
    )
    fig_t.add_scatter(
        x=r_axis,
        y=[rh.theorem2_high_accuracy_shape(d, r) for r in r_axis],
        mode="lines+markers",
        name="Thm 2(i): 2^(d − (r+1)·log2(2d/r))",
    )
    fig_t.add_scatter(
        x=r_axis,
        y=[rh.theorem2_high_dimension_shape(d, r, eps) for r in r_axis],
        mode="lines+markers",
        name=f"Thm 2(ii): (d/r)^(1/ε), ε = {eps:g}",
    )
    fig_t.add_scatter(
        x=r_axis,
        y=[d / r for r in r_axis],
        mode="lines",
        name="H = d/r (what transformers use)",
        line={"dash": "dot", "color": "#999"},
    )
    fig_t.update_layout(legend={"y": -0.3})
    ui.show_figure(fig_t, "theorem_shapes", key="theory")
    st.caption(
        "Full rank needs one head (d² parameters); rank r needs H ≳ (d/r)^(1/ε) heads, i.e. about d^(1+1/ε) "
        "parameters at r = 1. Theorem 4 (biased target) has the shape exp(d − r)/d²."
    )

# ------------------------------------------------------------------------------------------------ paper
with tab_paper:
    st.markdown(
        "**The paper's numbers**, read from the authors' figure images (±10–15% on log axes) — not reproduced here. "
        "Setting: d = 64, N = 16 i.i.d. points, farthest neighbour, self-attention in a full Transformer layer, "
        "10⁵ steps of batch 256, best of 5 runs (a GPU for hours). The live grid above is a smaller, cross-attention "
        "version of the same question."
    )
    fig_p = ui.line_figure(
        "The paper's Fig. 1, one layer (d = 64): error against rank at fixed parameters",
        "head rank r",
        "error (paper)",
        log_x=True,
        log_y=True,
    )
    for i, (budget, values) in enumerate(rh.PAPER_FIG1_L1.items()):
        fig_p.add_scatter(
            x=list(values),
            y=list(values.values()),
            mode="lines+markers",
            name=f"paper, r·d·H = {budget}",
            line={"color": ui.method_colour(i)},
        )
    ui.show_figure(
        fig_p,
        "paper_fig1",
        data=pd.DataFrame(
            [{"budget": b, "rank": r, "error": e} for b, v in rh.PAPER_FIG1_L1.items() for r, e in v.items()]
        ),
        key="paper1",
    )
    fig4 = pd.DataFrame(
        [{"rank": r, "N": n, "error (paper)": e} for r, v in rh.PAPER_FIG4.items() for n, e in v.items()]
    )
    st.markdown(
        "**The paper's Fig. 4** (two layers, d = 64, H = d²/r): error by N — full rank stays low, rank 1 does not."
    )
    st.dataframe(fig4.pivot(index="N", columns="rank", values="error (paper)"), width="stretch")

navigation(nav_box)
ui.finish()
