"""Sections of the Sparse + low rank page: the support Ω, the split S + L, the RPCA oracle, the spectrum, Fig. 4."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

import core
import service.views
import ui
from core import limits, sparse_lowrank
from ui import computed
from ui.controls import sparse_lowrank as controls
from ui.figures import sparse_lowrank as figs
from ui.figures.palette import other_colour


def intro() -> None:
    ui.explain(
        "Scatterbrain approximates exp(q·k/τ) with random features everywhere (a low-rank matrix L), then fixes "
        "the entries a hash finds to be large: on that support Ω it adds a sparse correction S = exact − L, so "
        "the sum is exact on Ω and low rank elsewhere. Both parts share one row normaliser.",
        r"\hat A_{\text{un}} = \underbrace{\phi(Q)\phi(K)^\top}_{L} + \underbrace{\big(e^{QK^\top/\tau} - "
        r"\phi(Q)\phi(K)^\top\big)\odot \mathbf 1_\Omega}_{S},\qquad \hat A = \mathrm{diag}(\hat A_{\text{un}}"
        r"\mathbf 1)^{-1}\hat A_{\text{un}}",
    )


@dataclass(frozen=True)
class MapView:
    """How the shown head's (n, n) maps are drawn: display order, block-reduced to the chosen resolution."""

    s: ui.Settings
    factor: int  # the engine's block size (1 = full resolution)
    options: controls.MapControls

    def shown(self, a: np.ndarray, mode: str = "max") -> tuple[np.ndarray, int]:
        """The map as drawn: block-reduced to at most `resolution` per side; returns it and its total block size."""
        a = computed.drawn(self.s, a)  # display only: cluster order when the sidebar asks for it
        extra = max(1, -(-a.shape[-1] // self.options.resolution))
        return ui.block_reduce(a, extra, mode), self.factor * extra


# ------------------------------------------------------------------ 1. LSH buckets and support
def support_section(
    view: MapView, params: dict[str, Any], parts: dict[str, Any], summary: sparse_lowrank.CorrectionSummary | None
) -> None:
    st.header("1. Where the sparse part lives: hash buckets and the support Ω")
    if params["support"] == "lsh":
        _lsh_support(view, params, parts, summary)
    else:
        st.info(f"The support is `{params['support']}` (set in the knobs); switch it to `lsh` to see hash buckets.")
        union = parts["support"].astype(np.float32)
        drawn, drawn_factor = view.shown(union, "mean")
        ui.show_figure(
            ui.heatmap(drawn, "Support Ω", kind="mask", factor=drawn_factor, colorbar=False),
            "support_union",
            data={"support": union},
            key="support_union",
        )
        if view.s.order_note():
            st.caption(view.s.order_note())


def _lsh_support(
    view: MapView, params: dict[str, Any], parts: dict[str, Any], summary: sparse_lowrank.CorrectionSummary | None
) -> None:
    ui.explain(
        "Each round hashes every query and key with random rotations, sorts the positions by hash code and cuts "
        "the sorted order into equal chunks, the buckets; a query attends to the keys of its own chunk. More rounds "
        "find more of the large entries. The support Ω is the union over rounds.",
        r"\Omega = \bigcup_{r=1}^{R}\{(i,j) : c_r(q_i) = c_r(k_j)\},\qquad c_r(x) = \text{the chunk of } x "
        r"\text{ in round } r\text{'s order by hash code}",
    )
    rounds = int(params["rounds"])
    which = controls.round_shown(rounds)
    buckets = computed.parts(view.s, "lsh", {"rounds": rounds, "buckets": params["buckets"]}, ("buckets",)).get(
        "buckets"
    )
    cols = st.columns(3)
    for col, name, title, mask in (
        (cols[0], "support_round", f"Support of round {which}", parts["support_rounds"][which - 1].astype(np.float32)),
        (cols[1], "support_union", "Support Ω (all rounds)", parts["support"].astype(np.float32)),
    ):
        with col:
            drawn, drawn_factor = view.shown(mask, "mean")
            fig = ui.heatmap(drawn, title, kind="mask", factor=drawn_factor, hover_label="share of pairs in Ω")
            png = lambda m=mask: ui.png_bytes(m, "mask")  # noqa: E731
            ui.show_figure(fig, name, data={"support": mask}, key=name, png=png)
    with cols[2]:
        if buckets is not None:
            _bucket_chart(view.s, buckets[which - 1], which, int(params["buckets"]))
    if summary is not None:
        st.caption(f"**Head {view.s.head}**, all {view.s.n} rows:")  # what the numbers are of, next to them
        c1, c2, c3 = st.columns(3)
        c1.metric("Entries in Ω", f"{100 * summary.omega_share:.1f}%", help="Share of the n² pairs in the support.")
        c2.metric(
            "Attention mass inside Ω",
            f"{100 * summary.omega_mass:.1f}%",
            help="Mean over rows of the exact attention weight that falls on the support.",
        )
        c3.metric(
            "Hash rounds × buckets",
            f"{rounds} × {params['buckets']}",
            help="Each round sorts the positions by their hash code (the chart beside the support maps) and cuts the "
            "sorted order into this many equal chunks, the method's buckets; a query attends to the keys of its own "
            "chunk.",
        )


def _bucket_chart(s: ui.Settings, round_buckets: np.ndarray, which: int, buckets_knob: int) -> None:
    """One round's query hash codes by position (``round_buckets``: (2, n), queries then keys: the plan's raw hash
    buckets, which only sort the positions before the ``buckets_knob`` equal chunks are cut)."""
    fig = figs.buckets_figure(
        round_buckets[0],
        computed.inputs(s).labels,
        ui.method_colour("lsh"),
        f"Hash codes in round {which}",
        order=computed.cluster_order(s),
    )
    table = {"position": np.arange(s.n), "query_hash_code": round_buckets[0], "key_hash_code": round_buckets[1]}
    ui.show_figure(fig, "buckets", data=pd.DataFrame(table), key="buckets")
    st.caption(
        "Support maps: colour = share of each drawn block's pairs that are in Ω (1 = all). "
        "Hash chart: each query's hash code, the key its round sorts the positions by before cutting them into "
        f"{buckets_knob} equal chunks (the buckets knob); dot colour = cluster of the position (clustered input); "
        "same-cluster positions share hash codes when the hash works. " + s.order_note()
    )


# ------------------------------------------------------------------ 2. the split
SPLIT_VIEWS = (  # (part, title, heatmap kind), drawn in two rows of three
    # The point first: exact, the naive sum beside it, and Scatterbrain's corrected sum; then its two parts.
    ("exact", "Exact", "attention"),
    ("naive_sum", "Naive sum (double counts)", "attention"),
    ("attention", "S + L (Scatterbrain)", "attention"),
    ("sparse", "Sparse correction S", "error"),
    ("low_rank", "Low-rank part L", "attention"),
    ("naive_minus", "Naive sum − Scatterbrain", "error"),
)


def split_section(
    view: MapView, parts: dict[str, Any], exact_map: np.ndarray, summary: sparse_lowrank.CorrectionSummary | None
) -> None:
    st.header("2. The split: S + L, next to exact and the naive sum")
    ui.explain(
        "The low-rank part L is Performer's estimate divided by the row normaliser; S is only non-zero on Ω and "
        "can be negative (it removes what L already put there). Adding the exact entries on Ω to Performer's "
        "estimate naively counts every support pair twice: before normalising it holds about 2·exp(q·k) there, "
        "and normalising cannot undo that, because the rest of the row was not doubled.",
        r"\text{naive on }\Omega:\ e^{q_i\cdot k_j/\tau} + \phi(q_i)^\top\phi(k_j)\ \approx\ 2\,e^{q_i\cdot k_j/\tau}"
        r"\qquad\text{Scatterbrain on }\Omega:\ e^{q_i\cdot k_j/\tau}\ \text{exactly}",
    )
    log_colour = view.options.log_colour
    matrices = {"exact": exact_map, "naive_minus": parts["naive_sum"] - parts["attention"]}
    cells: list[ui.GridCell | None] = []
    exports: dict[str, dict[str, Any]] = {}
    shown = {
        name: view.shown(matrices[name] if name in matrices else parts[name], "absmax" if kind == "error" else "max")
        for name, _, kind in SPLIT_VIEWS
    }
    # One colour range for every attention map (exact's, the naive sum's, S + L's, L's): the naive sum's double weight
    # on Ω shows as brighter squares, which maps each on its own range would hide.
    top = max(ui.attention_top(shown[name][0], log_colour) for name, _, kind in SPLIT_VIEWS if kind == "attention")
    for name, title, kind in SPLIT_VIEWS:
        matrix = matrices[name] if name in matrices else parts[name]
        log = log_colour and kind == "attention"
        drawn, drawn_factor = shown[name]
        zmax = top if kind == "attention" else None
        cells.append(
            ui.GridCell(title, drawn, kind=kind, log=log, factor=drawn_factor, name=title, x_title=True, zmax=zmax)
        )
        exports[title] = {
            "png": lambda m=matrix, k=kind, lg=log: ui.png_bytes(m, k, log=lg),
            "png_label": "PNG (full resolution)",
            "data": {name: matrix},
        }
    # One figure of six maps (two rows of three) instead of six charts: the browser draws it in one pass.
    fig = ui.heatmap_grid([cells[:3], cells[3:]], columns=3, map_px=200 if ui.presenter_mode() else None)
    ui.show_figure(
        fig,
        "split",
        key="split",
        parts=exports,
        data=lambda: {name: matrices[name] if name in matrices else parts[name] for name, _, _ in SPLIT_VIEWS},
        data_note="Data: all six maps of the shown head, as the engine returned them.",
    )
    if summary is not None:
        st.caption(f"**Head {view.s.head}**, the one drawn above:")  # what the numbers are of, next to them
        _split_metrics(summary)
        _verdict(summary)
    st.caption(
        ui.downsample_caption(view.s.n, view.shown(exact_map)[1]) + " S uses a red-blue scale because it can be "
        "negative (range: the 99th percentile of its non-zero |entries|). " + view.s.order_note()
    )


def _split_metrics(summary: sparse_lowrank.CorrectionSummary) -> None:
    m1, m2, m3 = st.columns(3)
    m1.metric("Scatterbrain error", f"{summary.sb_error:.3f}", help="‖Â − A‖_F / ‖A‖_F for the shown head.")
    m2.metric(
        "Naive-sum error",
        f"{summary.naive_error:.3f}",
        delta=f"{summary.naive_error - summary.sb_error:+.3f} vs Scatterbrain",
        delta_color="inverse",
    )
    m3.metric(
        "Naive sum on Ω before normalising",
        f"{summary.ratio_mean:.2f} × exact",
        help="Mean of (exp(q·k) + φ(q)·φ(k)) / exp(q·k) over the support: the double counting (≈ 2 in "
        "expectation, because the random features are unbiased). The median is "
        f"{summary.ratio_median:.2f}: with few features the estimate is usually small and occasionally huge.",
    )


def _verdict(summary: sparse_lowrank.CorrectionSummary) -> None:
    """Whether the correction matters at these settings, and if not, why and where it does."""
    if summary.matters:
        st.success(f"**The correction matters here**: the naive sum's error is {summary.factor:.1f}× Scatterbrain's.")
    else:
        st.warning(
            f"**At these settings the correction does not matter**: the naive sum's error ({summary.naive_error:.3f}) "
            f"is within {100 * (sparse_lowrank.MATTERS_FACTOR - 1):.0f}% of Scatterbrain's ({summary.sb_error:.3f}), "
            "because " + "; and ".join(summary.reasons()) + ". Flatter rows and more features show it: "
            f"τ = {sparse_lowrank.PAGE_DEFAULTS['tau']:g} with budget "
            f"{ui.fmt_fraction(sparse_lowrank.PAGE_DEFAULTS['budget'])} (this page's defaults)."
        )


# ------------------------------------------------------------------ 3. RPCA oracle
def rpca_cost(n: int, iterations: int) -> str:
    """What the RPCA oracle costs at ``n`` by the server's own estimate, and whether it runs here."""
    seconds = limits.rpca_estimate(n, 1, iterations).seconds
    estimate = lambda size: limits.rpca_estimate(size, 1, iterations)  # noqa: E731
    fitting = limits.largest_fitting(limits.sizes_up_to(n), estimate)
    allowed = f"this server allows {limits.job_seconds():g} s per computation"
    if estimate(n).fits():
        return f"RPCA at n = {n}: about {seconds:,.0f} s ({iterations} SVDs of an n × n matrix); {allowed}."
    largest = f"n ≤ {fitting}" if fitting is not None else "no n"
    return f"RPCA at n = {n}: about {seconds:,.0f} s, over the limit ({allowed}): it runs here for {largest}."


def rpca_section(s: ui.Settings, exact_head: np.ndarray | None, log_colour: bool) -> None:
    st.header("3. The oracle: robust PCA's best split")
    ui.explain(
        "Robust PCA searches for the sparse matrix S and the low-rank matrix L whose sum is closest to the exact "
        "attention. It is far too slow for a model (it needs the whole matrix and many SVDs), but it shows how "
        "good any sparse + low-rank method could be at this budget.",
        r"\min_{S,L}\ \lVert L\rVert_* + \lambda \lVert S\rVert_1\quad\text{s.t.}\quad S + L \approx A",
    )
    rpca_params = core.budget_params("rpca", s.n, s.d, s.fraction) if "rpca" in ui.registered_methods() else {}
    rpca_steps = int(rpca_params.get("iterations", 500))
    cost = rpca_cost(s.n, rpca_steps)
    st.caption(cost)  # the truth before the switch: what it costs here, and the largest n this server runs it at
    if not controls.rpca_toggle(cost):
        return
    if "rpca" not in ui.registered_methods():
        st.info("The RPCA oracle is not available in this engine yet.")
    elif ui.within_limits(
        lambda: limits.check("n", s.n, limits.sizes_up_to(s.n), lambda n: limits.rpca_estimate(n, 1, rpca_steps))
    ):
        with st.spinner("Running robust PCA…"):
            rp = computed.parts(s, "rpca", rpca_params, ("sparse", "low_rank", "attention"))
        cols = st.columns(3)
        for col, name, title, kind in zip(
            cols,
            ("sparse", "low_rank", "attention"),
            ("RPCA sparse S", "RPCA low rank L", "S + L"),
            ("error", "attention", "attention"),
            strict=True,
        ):
            with col:
                drawn = computed.drawn(s, rp[name])  # full resolution when sorted (computed.parts): reduce after
                fig = ui.heatmap(
                    ui.display(drawn, "absmax" if kind == "error" else "max"),
                    title,
                    kind=kind,
                    log=log_colour and kind == "attention",
                    factor=int(rp["factor"]) * ui.block_factor(drawn.shape[-1]),
                    height=300,
                    colorbar=False,
                )
                ui.show_figure(fig, f"rpca_{name}", data={name: rp[name]}, key=f"rpca_{name}")
        if exact_head is not None and int(rp["factor"]) == 1:
            st.metric("RPCA error (the oracle)", f"{sparse_lowrank.relative_error(rp['attention'], exact_head):.3f}")
        st.caption("Parameters from the budget: " + ", ".join(f"{k} = {v}" for k, v in rpca_params.items()))


# ------------------------------------------------------------------ 4. spectrum
def spectrum_section(s: ui.Settings, exact_head: np.ndarray | None, low_rank: np.ndarray | None) -> None:
    """``low_rank``: Scatterbrain's L at full resolution, for its spectrum beside the exact one (None: skip it)."""
    st.header("4. Singular values of the exact matrix")
    ui.explain(
        "A matrix is well approximated by rank k when its singular values fall fast after the k-th. Flat rows "
        "(high τ) give one big singular value and a quick drop; peaked rows (low τ) give a long flat spectrum, "
        "which no small rank can capture.",
        r"\min_{\mathrm{rank}\,B\le k}\lVert A - B\rVert_F^2 = \sum_{i>k}\sigma_i^2",
    )
    if exact_head is None:
        return
    budget_rank = sparse_lowrank.budget_rank(s.n, s.d, s.fraction)
    sv, energy, best_error = sparse_lowrank.spectrum(exact_head, budget_rank)
    sv_l = sparse_lowrank.singular_values(low_rank) if low_rank is not None else None
    fig = figs.spectrum_figure(sv, sv_l, budget_rank, [ui.method_colour("exact"), ui.method_colour("performer")])
    table = pd.DataFrame({"index": np.arange(1, len(sv) + 1), "singular_value": sv})
    ui.show_figure(fig, "spectrum", data=table, key="spectrum")
    st.caption(
        f"The top {budget_rank} singular values hold {100 * energy:.1f}% of ‖A‖²_F, so the best rank-"
        f"{budget_rank} matrix has relative error {best_error:.3f}."
    )


# ------------------------------------------------------------------ 5. Fig. 4
FIG4_PAIRS = 256


def fig4_seconds(view: service.views.Fig4Measure) -> float:
    """A rough time of the measurement: per draw, three estimators over the pairs' (pairs x pairs) scores."""
    return ui.estimate_seconds(view.draws * 3 * view.pairs**2 * max(view.m, view.rounds * view.d) / 16)


def fig4_section(s: ui.Settings) -> None:
    st.header("5. The paper's Fig. 4: error of each estimator against q·k")
    ui.explain(
        "For unit vectors q and k, each method estimates the single number exp(q·k). Performer's random-feature "
        "estimate is unbiased but its variance explodes for large q·k; LSH is exact when the pair lands in a "
        "bucket and misses it (error exp(q·k)²) otherwise; Scatterbrain keeps Performer's estimate only for "
        "missed pairs, so its error is Performer's times the miss probability (Theorem 2).",
        r"\mathrm{MSE}_{\text{SB}}(x) = (1 - P_\Omega(x))\,\frac{e^{\lVert q+k\rVert^2} e^{2x}"
        r"\big(1 - e^{-\lVert q+k\rVert^2}\big)}{m},\quad \mathrm{MSE}_{\text{LSH}}(x) = (1-P_\Omega(x))\,e^{2x}",
    )
    f4 = controls.fig4_controls()
    view = service.views.Fig4Measure(f4.d, f4.m, f4.rounds, f4.buckets, f4.draws, FIG4_PAIRS, f4.orthogonal, s.seed)
    with st.spinner("Measuring the estimators over random draws…"):
        res = service.views.run(view, fig4_seconds(view), title="Measuring the estimators")
    curves = sparse_lowrank.fig4_curves(res, f4.d, f4.m)
    labels = {name: ui.method_label(name) for name in curves.measured}
    fig = figs.fig4_figure(curves, labels, [ui.method_colour(m) for m in ("performer", "lsh", "scatterbrain")])
    ui.show_figure(fig, "fig4_mse_vs_qk", data=pd.DataFrame(curves.table()), key="fig4")
    st.caption(
        f"Points: mean over {f4.draws} draws and the pairs in each q·k bin ({FIG4_PAIRS} pairs, d = {f4.d}), "
        "± one standard error across draws: the squared errors are heavy-tailed, so with few draws a point can sit "
        "far above its line, and its bar says how far chance alone reaches. Lines: Theorem 2 "
        "with Performer's variance formula and this LSH's measured collision rate P_Ω(x); the dotted curves "
        "(click them in the legend) use the paper's cross-polytope bound with 4 tables of 23 hashes. The engine's "
        "LSH uses balanced chunks, so its collision rate differs from the paper's."
    )


# ------------------------------------------------------------------ 6. the hash: angular or SMYRF's
HASHING_SEEDS = 3


def hashing_section(s: ui.Settings) -> None:
    """Angular LSH against SMYRF's XBOX+ / E2LSH hashing on this input: computed only while the section is open."""
    st.header("6. Which keys does the hash find?")
    ui.explain(
        "The sparse side keeps only the scores inside each query's hash chunks. Angular LSH (Reformer) hashes "
        "directions, so it groups queries and keys by cosine. SMYRF, the sparse side Scatterbrain's paper runs, "
        "first maps queries and keys to one common norm with its asymmetric XBOX+ transform, then hashes with "
        "E2LSH, so it groups by the inner product itself, which is what softmax ranks by. Both get the same "
        "rounds and buckets here (the method knob `hashing` switches them everywhere).",
        r"\mathrm{XBOX}^+:\ k \mapsto [k,\ \sqrt{M^2-\lVert k\rVert^2},\ 0],\quad "
        r"q \mapsto [q,\ 0,\ \sqrt{M^2-\lVert q\rVert^2}],\qquad h(x) = \lfloor (a\cdot x + b)/r \rfloor",
    )
    with ui.on_demand("Compare the two hashings on this input (3 hash seeds)", "hashing") as open_:
        if not open_:
            return
        view = service.views.HashingComparison(s.spec, s.beta, s.fraction, s.device_name, HASHING_SEEDS)
        work = 2 * 2 * HASHING_SEEDS * s.heads * s.n**2 * 4  # methods x hashings x seeds, a few passes each
        rows = service.views.run(view, ui.estimate_seconds(work), title="The hashing comparison")
        labels = {m: ui.method_label(m) for m in ("lsh", "scatterbrain")}
        fig = figs.hashing_figure(rows, labels, [other_colour(0), other_colour(3)])  # hashings: not methods
        table = pd.DataFrame(
            [
                {
                    "method": row["method"],
                    "hashing": hashing,
                    "output_error": row[hashing]["output_error"],
                    "top_key_recall": row[hashing]["top_key_recall"],
                    "chance_recall": row["chance_recall"],
                }
                for row in rows
                for hashing in figs.HASHING_LABELS
            ]
        )
        ui.show_figure(fig, "hashing", data=table, key="hashing")
        st.caption(
            f"Output error: median over the {s.heads} head(s), mean over {HASHING_SEEDS} hash seeds; top keys: each "
            "query's top min(8, n/8) keys by q·k inside the method's support. The app's default stays angular: on "
            "the clustered inputs it finds more of the top keys (benchmarks/results/hashing.md: 0.91 against 0.75 "
            "at σ = 0.1, n = 1024), while SMYRF's hashing finds more where key norms vary around a shared offset, "
            "as trained heads' keys do."
        )
