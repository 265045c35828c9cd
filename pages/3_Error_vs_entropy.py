"""Error vs entropy: sweep the temperature (or, for the real model, take all 72 heads) at equal budget."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st
import torch

import ui
from core import limits, sweeps
from ui import compute
from ui.presets import EVE_METHODS, EVE_POINTS, EVE_TAUS
from ui.scrubber import scrubber_section

ui.page("Error vs entropy", icon=":material/show_chart:")
s = ui.sidebar()

ORACLES = ["topk", "svd"]
registered = ui.registered_methods()

ui.explain(
    "Lowering the temperature makes every row more peaked, so its entropy falls. Sparse methods like peaked "
    "rows (a few keys hold all the weight) and low-rank methods like flat rows, so their error curves cross; "
    "sparse + low rank aims to stay below both, with the biggest gain in the middle (the paper's Fig. 1).",
    r"H(\tau) = -\frac1n\sum_{i,j} A_{ij}(\tau)\ln A_{ij}(\tau),\qquad A(\tau) = "
    r"\mathrm{softmax}(QK^\top/\tau)",
)

c = st.columns([3, 1, 1])
methods = ui.method_picker(
    "Methods", "methods", EVE_METHODS, n=s.n, where=c[0], exclude=("exact", "topk", "svd", "rpca")
)
oracles = ui.toggle(
    "Oracles (top-k, SVD)",
    "oracles",
    False,
    where=c[1],
    help="The best possible sparse (top-k per row) and low-rank (truncated SVD) matrices at the "
    "same budget, as in the paper's Fig. 1.",
)
metric = ui.choice("Error of", "metric", ["attention", "output"], "attention", where=c[2], widget="radio")
with_rpca = ui.toggle("Add the robust-PCA oracle (sparse + low rank; slow, n ≤ 256)", "rpca", False)

params: dict[str, dict[str, Any]] = {}
chosen = list(methods)
if oracles:
    chosen += [m for m in ORACLES if m in registered and m not in chosen]
if with_rpca and "rpca" in registered:
    if s.n <= 256:
        chosen.append("rpca")
    else:
        ui.notice("**RPCA oracle**: only offered for n ≤ 256 on this page (it runs many SVDs per temperature).")
if chosen:
    with st.expander("Method knobs", expanded=False):
        tabs = st.tabs([ui.method_label(m) for m in chosen])
        for tab, method in zip(tabs, chosen, strict=True):
            with tab:
                params[method] = ui.method_controls(s, method, where=tab)

FAMILY_SPARSE = {"sparse", "oracle"}


def pick(family: str, names: list[str]) -> str | None:
    for name in names:
        if registered[name].family == family:
            return name
    return None


if s.spec.source != "real":
    taus_range = ui.range_slider("Temperature range τ", "taus", ui.TAU_OPTIONS, EVE_TAUS)
    points = ui.int_slider("Temperatures in the sweep", "points", 4, 40, EVE_POINTS)
    log_y = ui.toggle("Log error axis", "logy", False)
    taus = (
        np.geomspace(taus_range[0], taus_range[1], points)
        if taus_range[1] > taus_range[0]
        else np.array([taus_range[0]])
    )

    def sweep(
        spec: compute.InputSpec,
        taus: tuple[float, ...],
        methods: tuple[str, ...],
        fraction: float,
        seed: int,
        params: tuple,
        device_name: str,
        _progress: Any = None,
    ) -> dict[str, Any]:
        dev = compute.resolve(device_name)
        q, k, v = compute.tensors(spec, dev)
        result = sweeps.error_vs_entropy(
            q,
            k,
            v,
            list(methods),
            taus=list(taus),
            fraction=fraction,
            seed=seed,
            method_params={m: dict(compute._params_dict(p)) for m, p in params},
            progress=_progress,
        )
        return {
            "entropy": result.entropy,
            "betas": result.betas,
            "attention": result.attention_error,
            "output": result.output_error,
            "params": result.params,
        }

    if not chosen:
        st.info("Pick at least one method.")
    elif not ui.state.within_limits(
        lambda: limits.check(
            "n",
            s.n,
            limits.sizes_up_to(s.n),
            lambda n: limits.sweep_estimate({m: params[m] for m in chosen}, n, s.d, s.heads, len(taus)),
        )
    ):
        pass
    else:
        status = st.status("Sweeping the temperature…", expanded=False)
        key = tuple((m, ui.params_key(params[m])) for m in chosen)
        try:
            args = (
                s.spec,
                tuple(float(t) for t in taus),
                tuple(chosen),
                s.fraction,
                s.seed,
                key,
                s.device_name,
            )
            work = len(taus) * s.spec.heads * s.spec.n**2 * (len(chosen) + 1)
            res = ui.run_heavy(
                "error_vs_entropy",
                args,
                lambda report: sweep(*args, _progress=report),
                ui.estimate_seconds(work),
                title="The temperature sweep",
            )
        except (ValueError, RuntimeError, torch.cuda.OutOfMemoryError) as exc:
            status.update(label="The sweep failed", state="error")
            st.error(f"The sweep could not run with these settings: {exc}")
            st.stop()
        status.update(label=f"Sweep done: {len(taus)} temperatures × {len(chosen)} methods", state="complete")
        entropy = res["entropy"]
        errors = res[metric]
        fig = ui.line_figure(
            f"{metric.capitalize()} error against mean row entropy (equal budget {ui.fmt_fraction(s.fraction)})",
            "mean row entropy H (nats)",
            f"relative {metric} error",
            log_y=log_y,
            height=460,
        )
        rows = []
        for i, method in enumerate(chosen):
            y = errors[method]
            dash = "dot" if registered[method].family == "oracle" else "solid"
            fig.add_scatter(
                x=entropy,
                y=y,
                mode="lines+markers",
                name=ui.method_label(method),
                line={"color": ui.method_colour(i), "dash": dash},
                customdata=np.stack([1 / res["betas"], res["betas"]], axis=-1),
                hovertemplate="H %{x:.2f} nats<br>τ %{customdata[0]:.3g}, β %{customdata[1]:.3g}"
                "<br>error %{y:.4f}<extra>" + ui.method_label(method) + "</extra>",
            )
            for t, beta in enumerate(res["betas"]):
                rows.append(
                    {
                        "method": method,
                        "tau": 1 / beta,
                        "beta": beta,
                        "entropy": entropy[t],
                        "attention_error": res["attention"][method][t],
                        "output_error": res["output"][method][t],
                    }
                )
        sparse, low_rank = pick("sparse", chosen), pick("low-rank", chosen)
        crossover_text = "Pick a sparse and a low-rank method to see their crossover."
        if sparse and low_rank:
            diff = errors[sparse] - errors[low_rank]
            order = np.argsort(entropy)
            xs, ys = entropy[order], diff[order]
            cross = None
            for j in range(len(xs) - 1):
                if ys[j] == 0 or ys[j] * ys[j + 1] < 0:
                    cross = (
                        float(xs[j] + (xs[j + 1] - xs[j]) * (-ys[j]) / (ys[j + 1] - ys[j]))
                        if ys[j] != 0
                        else float(xs[j])
                    )
                    break
            if cross is not None:
                fig.add_vline(
                    x=cross,
                    line={"dash": "dash", "color": "#444"},
                    annotation_text=f"crossover H ≈ {cross:.2f}",
                    annotation_position="top left",
                )
                crossover_text = (
                    f"{ui.method_label(sparse)} and {ui.method_label(low_rank)} cross at H ≈ "
                    f"{cross:.2f} nats: below it the sparse method wins, above it the low-rank one."
                )
            else:
                winner = sparse if float(np.mean(diff)) < 0 else low_rank
                crossover_text = (
                    f"No crossover in this τ range: {ui.method_label(winner)} wins everywhere. "
                    "Widen the temperature range."
                )
        current = s.entropy()
        fig.add_vline(
            x=current,
            line={"dash": "dot", "color": "#999"},
            annotation_text=f"sidebar τ = {s.tau:g}",
            annotation_position="bottom right",
        )
        fig.add_vline(
            x=float(np.log(s.n)),
            line={"color": "#ccc"},
            annotation_text="ln n (uniform rows)",
            annotation_position="top right",
        )
        table = pd.DataFrame(rows)
        ui.show_figure(fig, "error_vs_entropy", data=table, key="sweep")
        st.markdown(crossover_text)
        cols = st.columns(max(1, len(chosen)))
        for col, method in zip(cols, chosen, strict=False):
            col.metric(
                ui.method_label(method), f"{float(np.mean(errors[method])):.3f}", help="Mean error over the sweep."
            )
        with st.expander("Numbers behind the chart"):
            st.dataframe(table, hide_index=True, width="stretch")
            st.caption(
                "Budgeted parameters used: "
                + "; ".join(
                    f"{ui.method_label(m)}: " + ", ".join(f"{k}={v}" for k, v in p.items())
                    for m, p in res["params"].items()
                )
            )
    st.subheader("The same sweep, frame by frame")
    scrubber_section(s, [m for m in chosen if m != "rpca"], params)
else:
    st.subheader(f"All 72 heads of MiniLM at τ = {s.tau:g}: one point per head and method")
    st.caption(
        "For the real model the entropy comes from the heads themselves: every head of every layer is "
        "one point, computed at the sidebar temperature (τ = 1 is the model's own attention)."
    )
    if not chosen:
        st.info("Pick at least one method.")
    else:
        rows = []
        progress = st.progress(0.0, text="Running every layer…")
        for layer in range(6):
            spec = compute.InputSpec(**{**s.spec.__dict__, "layer": layer})
            exact = compute.exact(spec, s.beta, s.device_name)
            for method in chosen:
                res = compute.run_method_scheduled(
                    spec, s.beta, s.device_name, method, ui.params_key(params[method]), s.seed
                )
                if res.error_message:
                    ui.notice(f"**{ui.method_label(method)}**: {res.error_message}")
                    continue
                for h in range(spec.heads):
                    rows.append(
                        {
                            "method": method,
                            "layer": layer,
                            "head": h,
                            "entropy": float(exact.entropy[h]),
                            "attention_error": float(res.metrics["attention_error"][h]),
                            "output_error": float(res.metrics["output_error"][h]),
                        }
                    )
            progress.progress((layer + 1) / 6, text=f"layer {layer + 1} of 6 done")
        progress.empty()
        table = pd.DataFrame(rows)
        fig = ui.line_figure(
            f"{metric.capitalize()} error of each head against its entropy",
            "mean row entropy H (nats)",
            f"relative {metric} error",
            height=460,
        )
        for i, method in enumerate(chosen):
            part = table[table["method"] == method]
            fig.add_scatter(
                x=part["entropy"],
                y=part[f"{metric}_error"],
                mode="markers",
                name=ui.method_label(method),
                marker={"color": ui.method_colour(i), "size": 7, "opacity": 0.8},
                customdata=np.stack([part["layer"], part["head"]], axis=-1),
                hovertemplate="layer %{customdata[0]}, head %{customdata[1]}<br>H %{x:.2f}<br>error "
                "%{y:.4f}<extra>" + ui.method_label(method) + "</extra>",
            )
        ui.show_figure(fig, "heads_error_vs_entropy", data=table, key="heads")
        cols = st.columns(max(1, len(chosen)))
        for col, method in zip(cols, chosen, strict=False):
            part = table[table["method"] == method]
            col.metric(ui.method_label(method), f"{part[f'{metric}_error'].mean():.3f}", help="Mean over the 72 heads.")
        with st.expander("Numbers behind the chart"):
            st.dataframe(table, hide_index=True, width="stretch")

ui.finish()
