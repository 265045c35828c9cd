"""Regime map: which family wins over (beta, sigma) on clustered inputs, and the gain of sparse + low rank."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import service.views
import ui
from core import limits, regime
from ui import computed
from ui.controls.regime import regime_controls
from ui.figures import regime as figs
from ui.panels import regime as panels

ui.page("Regime map", icon=":material/grid_on:")
s = ui.sidebar(
    sources=("clustered", "real", "upload"),
    show_head=False,
    show_heads=False,
    defaults={"n": 256, "heads": 1},
    causal=True,
)

if s.spec.source in ("real", "upload"):
    s = computed.with_every_uploaded_head(s)
    what = "the 72 heads of MiniLM (6 layers × 12)" if s.spec.source == "real" else f"the {s.heads} uploaded heads"
    ui.explain(
        f"The map below is drawn on clustered inputs; here {what} are placed on its β axis instead. Each head "
        "gets the β at which a clustered input of the same n and d is as peaked (same mean row entropy), and the "
        "colour of the family (sparse, low rank, sparse + low rank) whose method has the lowest error on that head "
        "at the sidebar's budget.",
        r"\hat\beta(h) = \beta \text{ such that } H_{\text{clustered}}(\beta) = H(h)",
    )
    c = regime_controls(s, real=True)
    metric = ui.choice("Error of", "metric", ["attention", "output"], "attention", widget="radio")
    result = panels.real_heads_regime(s, c.roles, c.params, metric)
    panels.draw_real_heads(s, result, c.roles, metric)
    ui.finish()
    st.stop()

ui.explain(
    "Clustered inputs have two knobs: β (how sharply a query prefers its own cluster) and σ (how tight the "
    "clusters are). Each cell below runs a sparse, a low-rank and a sparse + low-rank method at the same budget "
    "and colours the cell by the winner; the second panel shows how much sparse + low rank cuts the error of "
    "the better single method (blue) or adds to it (red). The theorem's promise is about the best possible "
    "matrices (the oracles); the estimators, which must find those entries and features, often fall short of it.",
    r"\text{gain} = \frac{\min(e_{\text{sparse}}, e_{\text{low rank}}) - e_{\text{S+L}}}"
    r"{\min(e_{\text{sparse}}, e_{\text{low rank}})}",
)

c = regime_controls(s)
betas, spreads, seeds, roles = c.betas, c.spreads, c.seeds, c.roles
# Fewer seeds first (the oracles' robust PCA fits at the default n with fewer), then n.
if not ui.within_limits(
    lambda: limits.check_knobs(
        [
            (
                "seeds",
                seeds,
                range(1, seeds + 1),
                lambda k: limits.regime_estimate(c.params, s.n, s.d, len(betas), len(spreads), k),
            ),
            (
                "n",
                s.n,
                limits.sizes_up_to(s.n),
                lambda n: limits.regime_estimate(c.params, n, s.d, len(betas), len(spreads), seeds),
            ),
        ]
    )
):
    ui.finish()
    st.stop()
status = ui.StatusLine(f"Computing {len(betas) * len(spreads)} cells × {seeds} seed(s)…")
view = service.views.RegimeMap(
    n=s.n,
    d=s.d,
    clusters=s.spec.clusters,
    betas=tuple(map(float, betas)),
    spreads=tuple(map(float, spreads)),
    roles=tuple(roles.items()),
    fraction=s.fraction,
    seed=s.seed,
    params=service.views.method_params(c.params, c.params),
    device=s.device_name,
    seeds=seeds,
    causal=s.causal,
)
try:
    res: regime.AveragedRegimeMap = service.views.run(
        view,
        ui.estimate_seconds(regime.work_estimate(s.n, len(betas) * len(spreads), seeds, roles)),
        title="The regime map",
    )
except (ValueError, RuntimeError) as exc:
    status.update(label="The map failed", state="error")
    st.error(f"The regime map could not run with these settings: {exc}")
    ui.finish()
    st.stop()
status.update(label=f"Done: {len(betas)} × {len(spreads)} cells, {seeds} seed(s) each", state="complete")

hover = figs.hover_text(
    betas, spreads, res.entropy, res.errors, res.stats.stderr, roles, res.gain, res.stats.within_noise, seeds
)
boundaries = regime.theorem_boundaries(s.n, s.d)
view = figs.MapView(betas, spreads, hover, list(zip(boundaries, ("β ≈ ln n / ln d", "β ≈ ln n"), strict=True)))
view.star = (1 / s.tau, s.spec.spread)
table = pd.DataFrame(res.rows())
panels.draw_maps(res, view, table, seeds)
panels.draw_summary(res, seeds, s.seed)
panels.draw_theorem(s, seeds, boundaries)
with ui.on_demand("Numbers behind the maps", "numbers_regime") as open_:
    if open_:
        st.dataframe(table, hide_index=True, width="stretch")

ui.finish()
