"""Plotly figures drawn by a small ``st.components.v2`` component with Plotly's cartesian bundle, updated in place.

Why not ``st.plotly_chart``:
- Streamlit 1.67 gives a chart a new identity whenever its figure changes, even with a key, so every temperature
  step remounts every chart and Plotly draws each one from scratch. This component keeps its element (a keyed v2
  component's identity is its key) and applies a new figure with ``Plotly.react``, which redraws only what changed.
- Streamlit bundles all of plotly.js (4.7 MB, about 0.85 s to evaluate in headless Chromium on the 2-core reference
  machine). The app draws only scatter and heatmap traces, which Plotly's own cartesian partial bundle carries in
  1.5 MB (about 0.36 s).

The bundle is vendored (``assets/vendor``, from the npm package ``plotly.js-cartesian-dist-min``, the same plotly.js
version as the ``plotly`` Python package's, which builds the figures) and served by the app's server
(``deploy/serve.py`` with ``deploy/preload.py``), which also sets ``BUNDLE_VARIABLE``. Under plain
``streamlit run app.py`` and in AppTest nothing serves it, so figures go to ``st.plotly_chart`` as before.
"""

from __future__ import annotations

import contextlib
import functools
import json
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from core import config
from ui.figure_memo import figure_json
from ui.plotly_bundle import LOADER

COMPONENT_NAME = "attention_explorer.plotly_chart"
TEST_ID = "aePlotlyChart"
DEFAULT_HEIGHT = 450  # Plotly's (and st.plotly_chart's) height for a figure that sets none

HTML = f'<div class="ae-plotly-chart" data-testid="{TEST_ID}"></div>'
CSS = ".ae-plotly-chart { width: 100%; }"
JS = f"""
export default function ({{ data, parentElement }}) {{
  {LOADER}
  const plot = parentElement.querySelector(".ae-plotly-chart");
  const figure = JSON.parse(data.figure);
  const layout = {{ ...figure.layout, autosize: true }};
  plot.style.height = `${{layout.height || {DEFAULT_HEIGHT}}}px`;
  window.__aePlotly.then((Plotly) => {{
    // Plotly.react applies only what changed; frames (the temperature scrubber) come with the figure.
    Plotly.react(plot, {{ data: figure.data, layout, frames: figure.frames || [], config: data.config }});
    if (!plot.aeResize) {{  // the window, and the sidebar opening or closing, change the container's width
      // Only a shown chart whose width changed: the observer's first report comes right after the chart was drawn at
      // its width, and a hidden chart cannot be laid out.
      plot.aeResize = new ResizeObserver(() => {{
        const width = plot._fullLayout && plot._fullLayout.width;
        const fits = width && Math.abs(width - plot.clientWidth) <= 1;
        if (plot.data && plot.offsetParent !== null && !fits) Plotly.Plots.resize(plot).catch(() => {{}});
      }});
      plot.aeResize.observe(plot);
    }}
    // Chromium reports no size at all to a ResizeObserver for some charts (a Kernels chart, not even the first one):
    // one observer of the page's main column lays out again every shown chart that is not as wide as its box.
    if (!window.__aeFitCharts) {{
      window.__aeFitCharts = () => {{
        for (const shown of document.querySelectorAll(".ae-plotly-chart.js-plotly-plot")) {{
          const width = shown._fullLayout && shown._fullLayout.width;
          if (shown.data && shown.offsetParent !== null && width && Math.abs(width - shown.clientWidth) > 1) {{
            Plotly.Plots.resize(shown).catch(() => {{}});
          }}
        }}
      }};
      const column = document.querySelector("[data-testid='stMain']") || document.documentElement;
      let columnWidth = -1;  // the column grows taller with every element a run adds: only its width matters here
      new ResizeObserver((entries) => {{
        const width = entries[entries.length - 1].contentRect.width;
        if (Math.abs(width - columnWidth) < 1) return;
        columnWidth = width;
        window.__aeFitCharts();
      }}).observe(column);
    }}
  }}).catch((error) => {{ plot.textContent = `This chart could not be drawn: ${{error.message}}.`; }});
}}
"""


def bundle_served() -> bool:
    return config.read("plotly_bundle") == "served"  # deploy.preload.BUNDLE_VARIABLE


@functools.cache
def renderer() -> Any:
    """The component's mount command, registered once per process."""
    return st.components.v2.component(COMPONENT_NAME, html=HTML, css=CSS, js=JS, isolate_styles=False)


def plotly_chart(fig: go.Figure, *, key: str, config: dict[str, Any], where: Any = None) -> None:
    """Draw ``fig`` full width in ``where`` (a container, a column or an ``st.empty`` slot; by default where the
    script is)."""
    if not bundle_served():
        (where or st).plotly_chart(fig, theme=None, config=config, key=key, width="stretch")
        return
    # The chart's height is reserved before the script draws it: nothing below it moves when it appears.
    height = int(fig.layout.height or DEFAULT_HEIGHT)
    with contextlib.nullcontext() if where is None or where is st else where:
        renderer()(data={"figure": figure_json(fig), "config": config}, key=key, height=height)


def charts_in(app_test: Any) -> list[Any]:
    """The elements of every chart this component drew in a ``streamlit.testing`` AppTest run."""
    return [element for element in app_test.get("bidi_component") if element.proto.component_name == COMPONENT_NAME]


def figures_in(app_test: Any) -> list[dict[str, Any]]:
    """The figures (Plotly JSON) of every chart this component drew in a ``streamlit.testing`` AppTest run."""
    return [json.loads(json.loads(element.proto.json)["figure"]) for element in charts_in(app_test)]
