"""The Kernels page's sections: its texts, cached inputs and measurements, and the work that waits for a button."""

from __future__ import annotations

from typing import Any

import streamlit as st

import core
import ui
from core import kernel_study as study
from core import kernels as K
from core import limits
from service import views
from ui.controls.kernels import DRAWS, LK_STEPS, FitControls
from ui.figures import kernels as figs

AUTO_SECONDS = 3.0  # work estimated above this waits for its button: the first charts never wait long
INTRO = (
    "Linear attention replaces exp(q·k/τ) by a dot product of feature vectors φ(q)·φ(k), so the n × n matrix is never "
    "built. The Performer draws φ at random so that the estimate is unbiased: positive features exp(w·x − |x|²/2) "
    "never go negative, trigonometric ones (sin, cos) can. Their errors differ exactly where attention lives: on the "
    "many small entries. A trainable φ (a small feed-forward map) can instead be fitted."
)
FORMULA = (
    r"\exp(x\cdot y)=\mathbb{E}_{w\sim\mathcal N(0,I)}\big[e^{w\cdot x-\lVert x\rVert^2/2}\,"
    r"e^{w\cdot y-\lVert y\rVert^2/2}\big],\qquad x=\sqrt{\beta}\,q,\; y=\sqrt{\beta}\,k"
)
TABS = [
    "Kernel MSE vs m",
    "Error by entry size",
    "Trig normalisers",
    "Attention error vs m",
    "Trainable kernel",
    "The paper's Table 1",
]
PAIR_TEXT = (
    "One pair x, y at the kernel's scale (length l, angle φ). Points: the measured mean squared error of the raw "
    "estimate of exp(x·y) over independent feature draws; dashed lines: Lemma 2 of the Performer paper (iid "
    "features, exactly 1/m); dotted: the orthogonal-feature bound (positive, m ≤ d). Trig features use m/2 "
    "frequencies (a sin and a cos each), as in the Performer method."
)
ENTRY_TEXT = (
    "Median relative error |Â − A| / A of the normalised Performer attention, binned by the true entry's size "
    "in units of the uniform weight 1/n. Softmax attention is mostly small entries: positive features keep "
    "those accurate, trig features blow up on them and are only good on the few large ones. The contrast is "
    "clearest near τ = 2 on the gaussian input; at low τ both degrade (trig rows are dominated by a few huge "
    "entries, so most weights collapse toward 0)."
)
TRIG_TEXT = (
    "A trig estimate can be negative, and so can a row's normaliser φ(qᵢ)·Σⱼφ(kⱼ): that row's attention is then "
    "meaningless (negative or huge weights). Positive features never do this. The share of such rows grows as "
    "the temperature falls and as m shrinks."
)
ATTENTION_TEXT = (
    "The whole attention matrix at the sidebar's input and temperature: mean row total variation between the "
    "Performer's normalised attention and softmax (line: median over redraws, band: 10–90%). TV above 1 is only "
    "possible with negative (trig) weights. ELU+1 linear attention, with its fixed m = d, is the cross."
)
FIT_WARNING = (
    "**What is fitted here is not what the paper does.** Yorsh & Kovalenko train the feature map end to end, "
    "inside a Transformer, on the task's loss (Long Range Arena). Here, as a demonstration, φ is fitted directly "
    "to this input's softmax attention (Adam on the row-wise KL divergence) and then used for linear attention."
)
VARIANTS_TEXT = (
    "Variants: **ff** φ(x) = Softplus(xW); **glu** Softplus(xW_f) ⊙ σ(xW_g); **oglu** the same with W_f "
    "orthogonally initialised; **aoglu** oglu with a rank-m/4 gate W_g = AB (1.5 m² instead of 2 m² parameters). "
    "The orthogonality penalty λ·mean((WWᵀ − I)²) is the paper's regulariser."
)
COMPARISON_CAPTION = (
    "ELU+1 always has m = d features. 'Fresh draw': the kernel fitted on this input, applied unchanged to a "
    "new input from the same generator; it shows the map is not just memorising this input."
)
PENALTY_CAPTION = (
    "The penalty pulls W toward an orthogonal matrix (singular values → 1). An orthogonal W cannot rescale "
    "its input, so it cannot sharpen attention: fitting to softmax gets worse as λ grows. Inside a "
    "Transformer W_Q and W_K can absorb the scale, which is why the paper can afford it."
)
PAPER_TEXT = (
    "**Reported by the paper** (Yorsh & Kovalenko 2022, Table 1): Long Range Arena accuracy (%), means of five "
    "runs, no standard deviations; † = significant run-to-run variance. The Transformer row is the LRA paper's "
    "own number. **Not reproduced here.** The LRA paper's Performer and Linear Transformer rows are added for "
    "context (a different pipeline)."
)


def input_caption(s: ui.Settings) -> None:
    st.caption(
        f"Input: {s.spec.describe()}; τ = {s.tau:g} (β = {s.beta:.3g}). Attention-level panels run on "
        f"**{core.device.describe(s.device_used)}**; the pair-level Monte Carlo runs on the CPU."
    )


def on_demand(view: views.View, seconds: float, label: str) -> Any | None:
    """The shared cache's value; else computed through the scheduler at once when cheap, or on a button."""
    found = views.lookup(view)
    if found is not None:
        return found
    if seconds <= AUTO_SECONDS or st.button(label, key=f"go_{view.cache_name}", type="primary"):
        return views.run(view, seconds, title=label)
    st.info(f"Estimated {seconds:.0f} s: press **{label}** to start (it is cached afterwards).")
    return None


def pair_measurement(s: ui.Settings, length: float, angle: float, draws: int) -> list[K.KernelMSECurve] | None:
    """The pair's Monte Carlo (cached): refused over the limits naming the draws that fit, else on demand."""
    if not ui.within_limits(
        lambda: limits.check("Feature draws", draws, DRAWS, lambda x: study.kernel_mse_estimate(s.d, x))
    ):
        return None
    view = views.KernelPairCurves(s.d, length, angle, draws, s.seed)
    seconds = study.kernel_mse_seconds(s.d, draws)
    return on_demand(view, seconds, f"Measure with {draws} draws")


def ratio_line(ratio: float) -> None:
    winner = (
        "positive features win — the kernel value is small." if ratio > 1 else "trig features win — the value is large."
    )
    st.markdown(f"At this pair MSE_trig / MSE_positive = **{ratio:.3g}** (same number of frequencies): {winner}")


def entry_bins(s: ui.Settings, m: int, redraws: int) -> K.EntryErrorBins | None:
    """The entry bins (cached): refused over the limits, at once when cheap, else on a button (never computed in
    the page run's own thread when heavy, where a closed tab could not stop it mid-call)."""
    heads = s.spec.heads
    if not ui.within_limits(
        lambda: limits.check_knobs(
            [
                ("Features m", m, study.ATTENTION_FEATURES, lambda x: study.entry_estimate(s.n, heads, x, redraws)),
                ("Redraws", redraws, range(1, 9), lambda x: study.entry_estimate(s.n, heads, m, x)),
                ("n", s.n, limits.sizes_up_to(s.n), lambda x: study.entry_estimate(x, heads, m, 1)),
            ]
        )
    ):
        return None

    view = views.KernelEntryBins(s.spec, s.beta, m, redraws, s.seed, s.device_name)
    seconds = study.entry_estimate(s.n, heads, m, redraws).seconds
    return on_demand(view, seconds, "Bin the entries")


def bin_counts(bins: K.EntryErrorBins) -> None:
    counts = zip(bins.bin_labels(), bins.counts, strict=True)
    st.caption("Entries per bin: " + ", ".join(f"{b}: {c}" for b, c in counts))


def trig_fraction(s: ui.Settings, ms: tuple[int, ...], orthogonal: bool) -> Any | None:
    """Share of non-positive trig normalisers (cached): refused over the limits, on a button when heavy."""
    heads, top = s.spec.heads, max(ms)
    rest = [m for m in ms if m != top]
    if not ui.within_limits(
        lambda: limits.check_knobs(
            [
                ("Features m", top, ms, lambda x: study.trig_estimate(s.n, heads, s.d, [*rest, x])),
                ("n", s.n, limits.sizes_up_to(s.n), lambda x: study.trig_estimate(x, heads, s.d, ms)),
            ]
        )
    ):
        return None

    view = views.KernelTrigFraction(s.spec, tuple(ms), orthogonal, s.seed, s.device_name)
    seconds = study.trig_estimate(s.n, heads, s.d, ms).seconds
    return on_demand(view, seconds, "Count the non-positive normalisers")


def attention_curves(s: ui.Settings, redraws: int) -> study.AttentionStudy | None:
    """The Performer at every m on the sidebar's input (cached, at once when cheap, else on its button)."""
    seconds = study.attention_seconds(s.n, s.spec.heads, redraws)
    if not ui.within_limits(
        lambda: limits.check_knobs(
            [
                ("Redraws", redraws, range(1, 11), lambda x: study.attention_estimate(s.n, s.spec.heads, x)),
                ("n", s.n, limits.sizes_up_to(s.n), lambda x: study.attention_estimate(x, s.spec.heads, 1)),
            ]
        )
    ):
        return None
    view = views.KernelAttentionCurves(s.spec, s.beta, redraws, s.seed, s.device_name)
    return on_demand(view, seconds, "Run the Performer at every m")


def kernel_comparison(s: ui.Settings, fit: FitControls) -> K.KernelComparison | None:
    """The learned variants against ELU+1 and the Performer: checked against the job limit, then on demand."""
    fits = 2 * len(fit.variants) + len(study.PENALTIES)  # each variant on this input and a fresh one, then the λ sweep

    def fit_estimate(t: int) -> limits.Estimate:
        params = {"features": fit.features, "steps": t}
        return limits.scaled(limits.method_estimate("learned_kernel", s.n, s.d, s.heads, params, dense=True), fits)

    if not fit.variants:
        st.info("Pick at least one variant.")
        return None
    if not ui.within_limits(lambda: limits.check("Steps", fit.steps, LK_STEPS, fit_estimate)):
        return None
    view = views.KernelComparison(
        s.spec, s.beta, fit.features, tuple(fit.variants), fit.steps, fit.penalty, fit.lr, s.seed, s.device_name
    )
    seconds = study.comparison_seconds(len(fit.variants), fit.steps, s.n, s.spec.heads, fit.features)
    return on_demand(view, seconds, "Fit the kernels")


def penalty_section(s: ui.Settings, fit: FitControls) -> None:
    """The ff variant refitted at every λ (on demand): fit quality and W's singular values side by side."""
    st.subheader("Orthogonality penalty sweep")
    view = views.KernelPenaltySweep(s.spec, s.beta, fit.features, fit.steps, fit.lr, s.seed, s.device_name)
    seconds = study.penalty_seconds(fit.steps, n=s.n, heads=s.spec.heads, features=fit.features)
    sw = on_demand(view, seconds, "Refit at every λ")
    if sw is None:
        return
    c1, c2 = st.columns(2)
    quality = figs.penalty_quality(sw.penalties, sw.tv)
    ui.show_figure(quality, "penalty_sweep", data=figs.penalty_sweep_table(sw), key="lk_penalty", where=c1)
    ui.show_figure(
        figs.penalty_spectrum(sw.penalties, sw.singular_values), "penalty_spectrum", key="lk_spectrum", where=c2
    )
    st.caption(PENALTY_CAPTION)
