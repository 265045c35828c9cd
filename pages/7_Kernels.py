"""Kernels: the Performer's random features (positive vs trig, orthogonal vs iid) and a trainable feature map."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch

import core
import ui
from core import kernels as K
from core import limits
from ui import compute

FEATURE_GRID = [4, 8, 16, 32, 64, 128, 256]
ATTENTION_FEATURES = [8, 16, 32, 64, 128, 256, 512, 1024]
DRAWS = [250, 500, 1000, 2000, 5000]
TAU_SWEEP = [0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0]
PENALTIES = (0.0, 0.01, 0.1, 1.0)
VARIANT_LABELS = {
    "positive iid": "#1f77b4",
    "positive orthogonal": "#2ca02c",
    "trig iid": "#d62728",
    "trig orthogonal": "#ff7f0e",
}

ui.page("Kernels", icon=":material/functions:")
s = ui.sidebar(
    max_n=1024,
    show_budget=False,
    show_head=False,
    defaults={"input": "gaussian", "n": 256, "d": 16, "heads": 1, "tau": 1.0},
)
ui.explain(
    "Linear attention replaces exp(q·k/τ) by a dot product of feature vectors φ(q)·φ(k), so the n × n matrix is never "
    "built. The Performer draws φ at random so that the estimate is unbiased: positive features exp(w·x − |x|²/2) "
    "never go negative, trigonometric ones (sin, cos) can. Their errors differ exactly where attention lives: on the "
    "many small entries. A trainable φ (a small feed-forward map) can instead be fitted.",
    r"\exp(x\cdot y)=\mathbb{E}_{w\sim\mathcal N(0,I)}\big[e^{w\cdot x-\lVert x\rVert^2/2}\,"
    r"e^{w\cdot y-\lVert y\rVert^2/2}\big],\qquad x=\sqrt{\beta}\,q,\; y=\sqrt{\beta}\,k",
)
st.caption(
    f"Input: {s.spec.describe()}; τ = {s.tau:g} (β = {s.beta:.3g}). Attention-level panels run on "
    f"**{core.device.describe(s.device_used)}**; the pair-level Monte Carlo runs on the CPU."
)


tabs = st.tabs(
    [
        "Kernel MSE vs m",
        "Error by entry size",
        "Trig normalisers",
        "Attention error vs m",
        "Trainable kernel",
        "The paper's Table 1",
    ]
)

# ------------------------------------------------------------------------------------------------ kernel MSE
with tabs[0]:
    st.markdown(
        "One pair x, y at the kernel's scale (length l, angle φ). Points: the measured mean squared error of the raw "
        "estimate of exp(x·y) over independent feature draws; dashed lines: Lemma 2 of the Performer paper (iid "
        "features, exactly 1/m); dotted: the orthogonal-feature bound (positive, m ≤ d). Trig features use m/2 "
        "frequencies (a sin and a cos each), as in the Performer method."
    )
    c1, c2, c3 = st.columns(3)
    length = ui.float_slider("Length l = |x| = |y|", "length", 0.1, 2.0, 1.0, step=0.05, where=c1)
    angle_deg = ui.float_slider("Angle φ (degrees)", "angle", 0.0, 180.0, 145.0, step=1.0, where=c2)
    draws = int(ui.choice("Feature draws", "draws", DRAWS, 1000, where=c3, help="Monte Carlo repetitions per point."))
    angle = math.radians(angle_deg)

    @st.cache_data(show_spinner="Drawing features…", max_entries=32)
    def mse_curves(d: int, length: float, angle: float, draws: int, seed: int) -> list[dict[str, Any]]:
        x, y = K.pair_at(d, length, angle)
        curves = K.kernel_mse_curves(x, y, FEATURE_GRID, draws=draws, seed=seed)
        return [
            {"label": c.label, "measured": c.measured, "theory": c.theory, "bound": c.bound, "true": c.true_value}
            for c in curves
        ]

    curves = mse_curves(s.d, length, angle, draws, s.seed)
    sm = curves[0]["true"]
    fig = ui.line_figure(
        f"Kernel MSE against m (d = {s.d}, exp(x·y) = {sm:.3g})",
        "features m",
        "mean squared error",
        log_x=True,
        log_y=True,
        height=440,
    )
    rows = []
    for c in curves:
        colour = VARIANT_LABELS[c["label"]]
        fig.add_scatter(
            x=FEATURE_GRID,
            y=c["measured"],
            mode="markers",
            name=f"{c['label']} (measured)",
            marker={"color": colour, "size": 9, "symbol": "circle" if "iid" in c["label"] else "diamond"},
        )
        if "iid" in c["label"]:
            fig.add_scatter(
                x=FEATURE_GRID,
                y=c["theory"],
                mode="lines",
                name=f"{c['label'].split()[0]}: Lemma 2",
                line={"color": colour, "dash": "dash"},
            )
        bounds = [(m, b) for m, b in zip(FEATURE_GRID, c["bound"], strict=True) if b is not None and b > 0]
        if bounds:
            fig.add_scatter(
                x=[m for m, _ in bounds],
                y=[b for _, b in bounds],
                mode="lines",
                name="positive orthogonal: ORF bound",
                line={"color": colour, "dash": "dot"},
            )
        for m, measured, theory in zip(FEATURE_GRID, c["measured"], c["theory"], strict=True):
            rows.append({"variant": c["label"], "m": m, "measured_mse": measured, "lemma2_iid_mse": theory})
    ui.show_figure(fig, "kernel_mse_vs_m", data=pd.DataFrame(rows), key="mse")
    ratio = K.mse_ratio(angle, length)
    st.markdown(
        f"At this pair MSE_trig / MSE_positive = **{ratio:.3g}** (same number of frequencies): "
        + (
            "positive features win — the kernel value is small."
            if ratio > 1
            else "trig features win — the value is large."
        )
    )
    with st.expander("Where each kernel wins: the Performer paper's Fig. 2 (closed form)"):
        phis = np.linspace(0.02, math.pi - 0.02, 90)
        lengths = np.linspace(0.1, 2.0, 40)
        z = np.array([[math.log10(max(K.mse_ratio(p, lv), 1e-300)) for p in phis] for lv in lengths])
        heat = go.Figure(
            go.Heatmap(
                x=phis,
                y=lengths,
                z=np.clip(z, -8, 8),
                colorscale="RdBu_r",
                zmid=0,
                colorbar={"title": "log10 MSE_trig/MSE_pos"},
                hovertemplate="φ %{x:.2f} rad, l %{y:.2f}<br>log10 ratio %{z:.2f}<extra></extra>",
            )
        )
        heat.add_contour(
            x=phis,
            y=lengths,
            z=z,
            contours={"start": 0, "end": 0, "size": 1, "coloring": "none"},
            line={"color": "black", "width": 2},
            showscale=False,
            name="ratio = 1",
            hoverinfo="skip",
        )
        heat.add_scatter(x=[angle], y=[length], mode="markers", marker={"color": "black", "size": 10}, name="this pair")
        heat.update_layout(
            height=380,
            template="plotly_white",
            margin={"l": 10, "r": 10, "t": 30, "b": 10},
            xaxis={"title": "angle φ (rad)"},
            yaxis={"title": "length l"},
            title={"text": "Red: positive features more accurate; blue: trig more accurate", "font": {"size": 14}},
        )
        ui.show_figure(heat, "mse_ratio_map", key="ratio")

# ------------------------------------------------------------------------------------------------ entry size
with tabs[1]:
    st.markdown(
        "Median relative error |Â − A| / A of the normalised Performer attention, binned by the true entry's size "
        "in units of the uniform weight 1/n. Softmax attention is mostly small entries: positive features keep "
        "those accurate, trig features blow up on them and are only good on the few large ones. The contrast is "
        "clearest near τ = 2 on the gaussian input; at low τ both degrade (trig rows are dominated by a few huge "
        "entries, so most weights collapse toward 0)."
    )
    c1, c2 = st.columns(2)
    entry_m = int(ui.choice("Features m", "entry_m", ATTENTION_FEATURES, 64, where=c1))
    entry_redraws = ui.int_slider("Redraws", "entry_redraws", 1, 8, 3, where=c2)

    @st.cache_data(show_spinner="Binning the entries…", max_entries=16)
    def entry_bins(
        spec: compute.InputSpec, beta: float, m: int, redraws: int, seed: int, device_name: str
    ) -> dict[str, Any]:
        q, k, _ = compute.tensors(spec, compute.resolve(device_name))
        res = K.entry_error_by_size(q, k, beta, m, redraws=redraws, seed=seed)
        return {"labels": res.bin_labels(), "counts": res.counts, "medians": res.medians}

    bins = entry_bins(s.spec, s.beta, entry_m, entry_redraws, s.seed, s.device_name)
    fig_e = ui.line_figure(
        f"Relative error by true entry size (m = {entry_m}, τ = {s.tau:g})",
        "true entry A × n",
        "median |Â − A| / A",
        log_y=True,
        height=420,
    )
    rows = []
    for label, medians in bins["medians"].items():
        fig_e.add_scatter(
            x=bins["labels"],
            y=medians,
            mode="lines+markers",
            name=label,
            line={"color": VARIANT_LABELS[label]},
        )
        rows += [
            {"variant": label, "bin": b, "entries": c, "median_relative_error": m}
            for b, c, m in zip(bins["labels"], bins["counts"], medians, strict=True)
        ]
    fig_e.update_xaxes(type="category")
    ui.show_figure(fig_e, "error_by_entry_size", data=pd.DataFrame(rows), key="entries")
    st.caption(
        "Entries per bin: " + ", ".join(f"{b}: {c}" for b, c in zip(bins["labels"], bins["counts"], strict=True))
    )

# ------------------------------------------------------------------------------------------------ trig normalisers
with tabs[2]:
    st.markdown(
        "A trig estimate can be negative, and so can a row's normaliser φ(qᵢ)·Σⱼφ(kⱼ): that row's attention is then "
        "meaningless (negative or huge weights). Positive features never do this. The share of such rows grows as "
        "the temperature falls and as m shrinks."
    )
    c1, c2 = st.columns(2)
    trig_ms = [
        int(m) for m in ui.multiselect("Features m", "trig_m", ["16", "64", "256"], ["16", "64", "256"], where=c1)
    ]
    trig_orth = ui.toggle("Orthogonal features", "trig_orth", True, where=c2)

    @st.cache_data(show_spinner="Counting non-positive normalisers…", max_entries=16)
    def trig_fraction(
        spec: compute.InputSpec, ms: tuple[int, ...], orthogonal: bool, seed: int, device_name: str
    ) -> np.ndarray:
        q, k, _ = compute.tensors(spec, compute.resolve(device_name))
        return K.trig_nonpositive_fraction(
            q, k, [1 / t for t in TAU_SWEEP], list(ms), orthogonal=orthogonal, redraws=3, seed=seed
        ).numpy()

    if trig_ms:
        frac = trig_fraction(s.spec, tuple(trig_ms), trig_orth, s.seed, s.device_name)
        fig_t = ui.line_figure(
            "Rows with a trig normaliser ≤ 0", "temperature τ", "fraction of rows", log_x=True, height=400
        )
        for i, m in enumerate(trig_ms):
            fig_t.add_scatter(
                x=TAU_SWEEP, y=frac[i], mode="lines+markers", name=f"m = {m}", line={"color": ui.method_colour(i)}
            )
        fig_t.add_vline(x=s.tau, line={"dash": "dot", "color": "#999"}, annotation_text=f"sidebar τ = {s.tau:g}")
        ui.show_figure(
            fig_t,
            "trig_nonpositive",
            data=pd.DataFrame(
                [
                    {"m": m, "tau": t, "fraction": float(frac[i, j])}
                    for i, m in enumerate(trig_ms)
                    for j, t in enumerate(TAU_SWEEP)
                ]
            ),
            key="trig",
        )
    else:
        st.info("Pick at least one feature count.")

# ------------------------------------------------------------------------------------------------ attention error
with tabs[3]:
    st.markdown(
        "The whole attention matrix at the sidebar's input and temperature: mean row total variation between the "
        "Performer's normalised attention and softmax (line: median over redraws, band: 10–90%). TV above 1 is only "
        "possible with negative (trig) weights. ELU+1 linear attention, with its fixed m = d, is the cross."
    )
    att_redraws = ui.int_slider("Redraws", "att_redraws", 1, 10, 4)

    def attention_curves(
        spec: compute.InputSpec, beta: float, redraws: int, seed: int, device_name: str
    ) -> dict[str, Any]:
        q, k, v = compute.tensors(spec, compute.resolve(device_name))
        curves = K.attention_error_vs_features(q, k, v, beta, ATTENTION_FEATURES, redraws=redraws, seed=seed)
        elu = core.approximate("linear_elu", q, k, v, scale=beta)
        exact = core.approximate("exact", q, k, v, scale=beta)
        return {
            "curves": [(c.label, c.tv_median, c.tv_low, c.tv_high, c.output_error_median) for c in curves],
            "elu": K.mean_row_tv(elu.attention(), exact.attention()),
        }

    att_args = (s.spec, s.beta, att_redraws, s.seed, s.device_name)
    att = ui.run_heavy(
        "kernels_attention_curves",
        att_args,
        lambda report: attention_curves(*att_args),
        ui.estimate_seconds(len(ATTENTION_FEATURES) * 4 * att_redraws * s.spec.heads * s.n**2),
        title="Running the Performer at every m",
    )
    fig_a = ui.line_figure(
        f"Attention error against m (τ = {s.tau:g})", "features m", "mean row TV", log_x=True, log_y=True, height=440
    )
    rows = []
    for label, med, low, high, out_err in att["curves"]:
        colour = VARIANT_LABELS[label]
        fig_a.add_scatter(
            x=ATTENTION_FEATURES + ATTENTION_FEATURES[::-1],
            y=list(high) + list(low)[::-1],
            fill="toself",
            line={"width": 0},
            fillcolor=colour,
            opacity=0.15,
            showlegend=False,
            hoverinfo="skip",
        )
        fig_a.add_scatter(x=ATTENTION_FEATURES, y=med, mode="lines+markers", name=label, line={"color": colour})
        rows += [
            {"variant": label, "m": m, "tv_median": a, "tv_p10": b, "tv_p90": c, "output_error_median": e}
            for m, a, b, c, e in zip(ATTENTION_FEATURES, med, low, high, out_err, strict=True)
        ]
    fig_a.add_scatter(
        x=[s.d],
        y=[att["elu"]],
        mode="markers",
        name="ELU+1 linear (m = d)",
        marker={"symbol": "x", "size": 12, "color": "black"},
    )
    ui.show_figure(fig_a, "attention_error_vs_m", data=pd.DataFrame(rows), key="attention")

# ------------------------------------------------------------------------------------------------ trainable
with tabs[4]:
    st.warning(
        "**What is fitted here is not what the paper does.** Yorsh & Kovalenko train the feature map end to end, "
        "inside a Transformer, on the task's loss (Long Range Arena). Here, as a demonstration, φ is fitted directly "
        "to this input's softmax attention (Adam on the row-wise KL divergence) and then used for linear attention.",
        icon=":material/info:",
    )
    st.markdown(
        "Variants: **ff** φ(x) = Softplus(xW); **glu** Softplus(xW_f) ⊙ σ(xW_g); **oglu** the same with W_f "
        "orthogonally initialised; **aoglu** oglu with a rank-m/4 gate W_g = AB (1.5 m² instead of 2 m² parameters). "
        "The orthogonality penalty λ·mean((WWᵀ − I)²) is the paper's regulariser."
    )
    c1, c2, c3, c4 = st.columns(4)
    variants = ui.multiselect("Variants", "variants", ["ff", "glu", "oglu", "aoglu"], ["ff", "oglu", "aoglu"], where=c1)
    features = ui.int_slider("Features m", "lk_m", 2, 256, min(max(s.d, 2), 256), where=c2, help="Default m = d.")
    steps = int(ui.log_slider("Steps", "lk_steps", [10, 25, 50, 100, 200, 400], 100, where=c3))
    penalty = float(ui.choice("Penalty λ", "lk_lambda", list(PENALTIES), 0.0, where=c4))
    lr = float(ui.log_slider("Learning rate", "lk_lr", [0.005, 0.01, 0.02, 0.05, 0.1, 0.2], 0.05))

    def comparison(
        spec: compute.InputSpec,
        beta: float,
        features: int,
        variants: tuple[str, ...],
        steps: int,
        penalty: float,
        lr: float,
        seed: int,
        device_name: str,
    ) -> dict[str, Any]:
        fit_on = compute.tensors(spec, compute.resolve(device_name))
        fresh = None
        if spec.source != "real":
            fresh_spec = compute.InputSpec(**{**spec.__dict__, "seed": spec.seed + 1})
            fresh = compute.tensors(fresh_spec, compute.resolve(device_name))

        class Box:
            def __init__(self, t: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
                self.q, self.k, self.v = t

        res = K.compare_kernels(
            Box(fit_on),
            None if fresh is None else Box(fresh),
            beta,
            features,
            variants=variants,
            steps=steps,
            ortho_penalty=penalty,
            lr=lr,
            seed=seed,
        )
        return {"rows": res.rows, "curves": res.curves}

    fits = 2 * len(variants) + len(PENALTIES)  # each variant on this input and a fresh one, then the λ sweep
    if not variants:
        st.info("Pick at least one variant.")
    elif ui.state.within_limits(
        lambda: limits.check(
            "Steps",
            steps,
            [10, 25, 50, 100, 200, 400],
            lambda t: limits.scaled(
                limits.method_estimate(
                    "learned_kernel", s.n, s.d, s.heads, {"features": features, "steps": t}, dense=True
                ),
                fits,
            ),
        )
    ):
        cmp_args = (s.spec, s.beta, features, tuple(variants), steps, penalty, lr, s.seed, s.device_name)
        cmp = ui.run_heavy(
            "kernels_comparison",
            cmp_args,
            lambda report: comparison(*cmp_args),
            (len(variants) + 1) * steps * 0.02,  # Adam steps, about 20 ms each at the page's sizes
            title="Fitting the kernels",
        )
        table = pd.DataFrame(cmp["rows"])
        ref = {row["method"].split(" (")[0]: row for row in cmp["rows"]}
        fig_c = ui.line_figure(
            "Fitting curve: row-wise KL(A ‖ Â) on this input", "Adam step", "mean row KL (nats)", log_y=True, height=400
        )
        for i, (variant, curve) in enumerate(cmp["curves"].items()):
            fig_c.add_scatter(
                x=list(range(1, len(curve) + 1)),
                y=curve,
                mode="lines",
                name=f"learned {variant}",
                line={"color": ui.method_colour(i)},
            )
        steps_axis = [1, max(len(c) for c in cmp["curves"].values())]
        for name, colour in (("ELU+1 linear", "#111"), ("Performer", "#888")):
            if name in ref:
                # A trace rather than add_hline: Plotly misplaces hline annotations on log axes.
                fig_c.add_scatter(
                    x=steps_axis,
                    y=[ref[name]["kl"]] * 2,
                    mode="lines",
                    name=f"{name} (m = {ref[name]['features']}): {ref[name]['kl']:.3f}",
                    line={"dash": "dash", "color": colour},
                )
        fig_c.update_layout(legend={"y": -0.3})
        ui.show_figure(fig_c, "learned_kernel_curve", data=table, key="lk_curve")

        fig_b = go.Figure()
        labels = [row["method"].split(" (")[0] + f" (m={row['features']})" for row in cmp["rows"]]
        fig_b.add_bar(x=labels, y=[row["tv"] for row in cmp["rows"]], name="on this input (fitted here)")
        if s.spec.source != "real":
            fig_b.add_bar(x=labels, y=[row["tv_heldout"] for row in cmp["rows"]], name="on a fresh draw (seed + 1)")
        fig_b.update_layout(
            title={"text": f"Mean row TV against softmax at m = {features} (lower is better)", "font": {"size": 14}},
            barmode="group",
            height=400,
            template="plotly_white",
            margin={"l": 10, "r": 10, "t": 40, "b": 10},
            yaxis={"title": "mean row TV"},
            legend={"orientation": "h", "yanchor": "top", "y": -0.25, "x": 0},
        )
        ui.show_figure(fig_b, "kernel_comparison", data=table, key="lk_bars")
        st.dataframe(table, hide_index=True, width="stretch")
        st.caption(
            "ELU+1 always has m = d features. 'Fresh draw': the kernel fitted on this input, applied unchanged to a "
            "new input from the same generator; it shows the map is not just memorising this input."
        )

        st.subheader("Orthogonality penalty sweep")

        def sweep(
            spec: compute.InputSpec, beta: float, features: int, steps: int, lr: float, seed: int, device_name: str
        ) -> dict[str, Any]:
            q, k, v = compute.tensors(spec, compute.resolve(device_name))
            res = K.penalty_sweep(q, k, v, beta, features, PENALTIES, steps=steps, lr=lr, seed=seed)
            return {"tv": res.tv, "kl": res.kl, "sv": res.singular_values}

        sweep_args = (s.spec, s.beta, features, steps, lr, s.seed, s.device_name)
        sw = ui.run_heavy(
            "kernels_penalty_sweep",
            sweep_args,
            lambda report: sweep(*sweep_args),
            len(PENALTIES) * steps * 0.02,
            title="Refitting at every λ",
        )
        c1, c2 = st.columns(2)
        fig_p = ui.line_figure("Fit quality against λ (ff variant)", "λ", "mean row TV", height=360)
        fig_p.add_scatter(x=[str(p) for p in PENALTIES], y=sw["tv"], mode="lines+markers", name="TV")
        fig_p.update_xaxes(type="category")
        ui.show_figure(
            fig_p,
            "penalty_sweep",
            data=pd.DataFrame({"lambda": PENALTIES, "tv": sw["tv"], "kl": sw["kl"]}),
            key="lk_penalty",
            where=c1,
        )
        fig_s = ui.line_figure("Singular values of W (first head)", "index", "singular value", log_y=True, height=360)
        for i, (p, values) in enumerate(zip(PENALTIES, sw["sv"], strict=True)):
            fig_s.add_scatter(y=values, mode="lines+markers", name=f"λ = {p}", line={"color": ui.method_colour(i)})
        ui.show_figure(fig_s, "penalty_spectrum", key="lk_spectrum", where=c2)
        st.caption(
            "The penalty pulls W toward an orthogonal matrix (singular values → 1). An orthogonal W cannot rescale its "
            "input, so it cannot sharpen attention: fitting to softmax gets worse as λ grows. Inside a Transformer W_Q "
            "and W_K can absorb the scale, which is why the paper can afford it."
        )

# ------------------------------------------------------------------------------------------------ paper
with tabs[5]:
    st.markdown(
        "**Reported by the paper** (Yorsh & Kovalenko 2022, Table 1): Long Range Arena accuracy (%), means of five "
        "runs, no standard deviations; † = significant run-to-run variance. The Transformer row is the LRA paper's "
        "own number. **Not reproduced here.** The LRA paper's Performer and Linear Transformer rows are added for "
        "context (a different pipeline)."
    )
    paper = pd.DataFrame(K.PAPER_TABLE1 + K.LRA_BASELINES, columns=list(K.PAPER_TABLE1_COLUMNS))
    fig_t1 = go.Figure()
    for i, task in enumerate(K.PAPER_TABLE1_COLUMNS[1:]):
        fig_t1.add_bar(x=paper["Model"], y=paper[task], name=task, marker_color=ui.method_colour(i))
    fig_t1.update_layout(
        title={"text": "Paper's Table 1 (reported, not reproduced)", "font": {"size": 14}},
        barmode="group",
        height=420,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        yaxis={"title": "accuracy (%)"},
        legend={"orientation": "h", "yanchor": "top", "y": -0.3, "x": 0},
    )
    ui.show_figure(fig_t1, "paper_table1", data=paper, key="table1")
    st.dataframe(paper, hide_index=True, width="stretch")

ui.finish()
