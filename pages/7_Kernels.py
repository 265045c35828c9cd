"""Kernels: the Performer's random features (positive vs trig, orthogonal vs iid) and a trainable feature map."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

import core
import ui
from core import kernel_study as study
from core import kernels as K
from core import limits
from ui import compute, result_cache
from ui.figures import kernels as figs

AUTO_SECONDS = 3.0  # work estimated above this waits for its button: the first charts never wait long
DRAWS = [250, 500, 1000, 2000, 5000]
LK_STEPS = [10, 25, 50, 100, 200, 400]

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


def on_demand(name: str, key: Any, work: Callable[[Any], Any], seconds: float, label: str) -> Any | None:
    """The shared cache's value; else run ``work`` through ``ui.run_heavy`` at once when cheap, or on a button."""
    found = result_cache.get(name, key)
    if found is not None:
        return found
    if seconds <= AUTO_SECONDS or st.button(label, key=f"go_{name}", type="primary"):
        return ui.run_heavy(name, key, work, seconds, title=label)
    st.info(f"Estimated {seconds:.0f} s: press **{label}** to start (it is cached afterwards).")
    return None


def tensors(spec: compute.InputSpec, device_name: str, seed_offset: int = 0) -> study.QKV:
    if seed_offset:
        spec = compute.InputSpec(**{**spec.__dict__, "seed": spec.seed + seed_offset})
    return study.QKV(*compute.tensors(spec, compute.resolve(device_name)))


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
    theory = study.kernel_mse_theory(s.d, length, angle)
    chart = st.empty()  # the closed forms at once; the measured points join them when the Monte Carlo is done
    ui.show_figure(figs.kernel_mse(s.d, theory), "kernel_mse_vs_m", key="mse_theory", where=chart.container())
    ratio = K.mse_ratio(angle, length)
    winner = (
        "positive features win — the kernel value is small." if ratio > 1 else "trig features win — the value is large."
    )
    st.markdown(f"At this pair MSE_trig / MSE_positive = **{ratio:.3g}** (same number of frequencies): {winner}")
    with st.expander("Where each kernel wins: the Performer paper's Fig. 2 (closed form)"):
        ui.show_figure(figs.ratio_map(study.mse_ratio_map(), angle, length), "mse_ratio_map", key="ratio")
    mc_args = (s.d, length, angle, draws, s.seed)
    measured = on_demand(
        "kernels_mse_curves",
        mc_args,
        lambda job: study.kernel_mse_at_pair(*mc_args, progress=job),
        study.kernel_mse_seconds(s.d, draws),
        f"Measure with {draws} draws",
    )
    if measured is not None:
        fig = figs.kernel_mse(s.d, theory, measured)
        ui.show_figure(fig, "kernel_mse_vs_m", data=figs.kernel_mse_table(measured), key="mse", where=chart.container())

with tabs[1]:
    st.markdown(
        "Median relative error |Â − A| / A of the normalised Performer attention, binned by the true entry's size "
        "in units of the uniform weight 1/n. Softmax attention is mostly small entries: positive features keep "
        "those accurate, trig features blow up on them and are only good on the few large ones. The contrast is "
        "clearest near τ = 2 on the gaussian input; at low τ both degrade (trig rows are dominated by a few huge "
        "entries, so most weights collapse toward 0)."
    )
    c1, c2 = st.columns(2)
    entry_m = int(ui.choice("Features m", "entry_m", study.ATTENTION_FEATURES, 64, where=c1))
    entry_redraws = ui.int_slider("Redraws", "entry_redraws", 1, 8, 3, where=c2)

    @st.cache_data(show_spinner="Binning the entries…", max_entries=16)
    def entry_bins(spec: compute.InputSpec, beta: float, m: int, redraws: int, seed: int, device: str) -> Any:
        inputs = tensors(spec, device)
        return K.entry_error_by_size(inputs.q, inputs.k, beta, m, redraws=redraws, seed=seed)

    bins = entry_bins(s.spec, s.beta, entry_m, entry_redraws, s.seed, s.device_name)
    fig = figs.entry_error(bins, entry_m, s.tau)
    ui.show_figure(fig, "error_by_entry_size", data=figs.entry_error_table(bins), key="entries")
    counts = zip(bins.bin_labels(), bins.counts, strict=True)
    st.caption("Entries per bin: " + ", ".join(f"{b}: {c}" for b, c in counts))

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
    def trig_fraction(spec: compute.InputSpec, ms: tuple[int, ...], orthogonal: bool, seed: int, device: str) -> Any:
        inputs = tensors(spec, device)
        return study.trig_fraction(inputs.q, inputs.k, ms, orthogonal=orthogonal, seed=seed)

    if trig_ms:
        frac = trig_fraction(s.spec, tuple(trig_ms), trig_orth, s.seed, s.device_name)
        rows = [
            {"m": m, "tau": t, "fraction": float(frac[i, j])}
            for i, m in enumerate(trig_ms)
            for j, t in enumerate(study.TAU_SWEEP)
        ]
        fig = figs.trig_nonpositive(frac, trig_ms, study.TAU_SWEEP, s.tau)
        ui.show_figure(fig, "trig_nonpositive", data=pd.DataFrame(rows), key="trig")
    else:
        st.info("Pick at least one feature count.")

with tabs[3]:
    st.markdown(
        "The whole attention matrix at the sidebar's input and temperature: mean row total variation between the "
        "Performer's normalised attention and softmax (line: median over redraws, band: 10–90%). TV above 1 is only "
        "possible with negative (trig) weights. ELU+1 linear attention, with its fixed m = d, is the cross."
    )
    att_redraws = ui.int_slider("Redraws", "att_redraws", 1, 10, 4)
    att_args = (s.spec, s.beta, att_redraws, s.seed, s.device_name)

    def attention_work(job: Any) -> study.AttentionStudy:
        inputs = tensors(s.spec, s.device_name)
        return study.attention_study(inputs.q, inputs.k, inputs.v, s.beta, att_redraws, s.seed, progress=job)

    seconds = study.attention_seconds(s.n, s.spec.heads, att_redraws)
    att = on_demand(
        "kernels_attention_curves",
        att_args,
        attention_work,
        seconds,
        "Run the Performer at every m",
    )
    if att is not None:
        fig = figs.attention_error(att, s.d, s.tau)
        ui.show_figure(fig, "attention_error_vs_m", data=figs.attention_error_table(att), key="attention")

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
    steps = int(ui.log_slider("Steps", "lk_steps", LK_STEPS, 100, where=c3))
    penalty = float(ui.choice("Penalty λ", "lk_lambda", list(study.PENALTIES), 0.0, where=c4))
    lr = float(ui.log_slider("Learning rate", "lk_lr", [0.005, 0.01, 0.02, 0.05, 0.1, 0.2], 0.05))
    fits = 2 * len(variants) + len(study.PENALTIES)  # each variant on this input and a fresh one, then the λ sweep

    def fit_estimate(t: int) -> limits.Estimate:
        params = {"features": features, "steps": t}
        return limits.scaled(limits.method_estimate("learned_kernel", s.n, s.d, s.heads, params, dense=True), fits)

    def compare_work(job: Any) -> K.KernelComparison:
        fresh = None if s.spec.source == "real" else tensors(s.spec, s.device_name, seed_offset=1)
        fit_on = tensors(s.spec, s.device_name)
        return study.compare_on_inputs(fit_on, fresh, s.beta, features, variants, steps, penalty, lr, s.seed)

    def sweep_work(job: Any) -> K.PenaltySweep:
        i = tensors(s.spec, s.device_name)
        return K.penalty_sweep(i.q, i.k, i.v, s.beta, features, study.PENALTIES, steps=steps, lr=lr, seed=s.seed)

    cmp_args = (s.spec, s.beta, features, tuple(variants), steps, penalty, lr, s.seed, s.device_name)
    cmp = None
    if not variants:
        st.info("Pick at least one variant.")
    elif ui.state.within_limits(lambda: limits.check("Steps", steps, LK_STEPS, fit_estimate)):
        cmp = on_demand(
            "kernels_comparison",
            cmp_args,
            compare_work,
            study.comparison_seconds(len(variants), steps),
            "Fit the kernels",
        )
    if cmp is not None:
        table = pd.DataFrame(cmp.rows)
        ui.show_figure(figs.fitting_curve(cmp.curves, cmp.rows), "learned_kernel_curve", data=table, key="lk_curve")
        fig = figs.comparison_bars(cmp.rows, features, heldout=s.spec.source != "real")
        ui.show_figure(fig, "kernel_comparison", data=table, key="lk_bars")
        st.dataframe(table, hide_index=True, width="stretch")
        st.caption(
            "ELU+1 always has m = d features. 'Fresh draw': the kernel fitted on this input, applied unchanged to a "
            "new input from the same generator; it shows the map is not just memorising this input."
        )
        st.subheader("Orthogonality penalty sweep")
        sweep_args = (s.spec, s.beta, features, steps, lr, s.seed, s.device_name)
        sw = on_demand(
            "kernels_penalty_sweep", sweep_args, sweep_work, study.penalty_seconds(steps), "Refit at every λ"
        )
        if sw is not None:
            c1, c2 = st.columns(2)
            data = pd.DataFrame({"lambda": sw.penalties, "tv": sw.tv, "kl": sw.kl})
            ui.show_figure(
                figs.penalty_quality(sw.penalties, sw.tv), "penalty_sweep", data=data, key="lk_penalty", where=c1
            )
            fig = figs.penalty_spectrum(sw.penalties, sw.singular_values)
            ui.show_figure(fig, "penalty_spectrum", key="lk_spectrum", where=c2)
            st.caption(
                "The penalty pulls W toward an orthogonal matrix (singular values → 1). An orthogonal W cannot rescale "
                "its input, so it cannot sharpen attention: fitting to softmax gets worse as λ grows. Inside a "
                "Transformer W_Q and W_K can absorb the scale, which is why the paper can afford it."
            )

with tabs[5]:
    st.markdown(
        "**Reported by the paper** (Yorsh & Kovalenko 2022, Table 1): Long Range Arena accuracy (%), means of five "
        "runs, no standard deviations; † = significant run-to-run variance. The Transformer row is the LRA paper's "
        "own number. **Not reproduced here.** The LRA paper's Performer and Linear Transformer rows are added for "
        "context (a different pipeline)."
    )
    paper = pd.DataFrame(K.PAPER_TABLE1 + K.LRA_BASELINES, columns=list(K.PAPER_TABLE1_COLUMNS))
    ui.show_figure(figs.paper_table1(paper), "paper_table1", data=paper, key="table1")
    st.dataframe(paper, hide_index=True, width="stretch")

ui.finish()
