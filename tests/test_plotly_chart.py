"""ui/plotly_chart.py: where the app's server serves the Plotly bundle, every figure is drawn by the component (its
figure JSON whole, keyed so that a new figure updates the chart in place); elsewhere by ``st.plotly_chart``."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from deploy import preload
from ui import plotly_chart


def compare(open_compare: Callable[..., AppTest], tau: str | None = None) -> AppTest:
    return open_compare(n="64", methods=["nystrom", "performer"], **({"tau": tau} if tau else {}))


def test_served_pages_draw_every_figure_with_the_component(monkeypatch: pytest.MonkeyPatch, open_compare) -> None:
    monkeypatch.setenv(preload.BUNDLE_VARIABLE, "served")
    at = compare(open_compare)
    assert not at.exception
    assert not at.get("plotly_chart"), "a figure went to st.plotly_chart, which loads Streamlit's whole plotly.js"
    figures = plotly_chart.figures_in(at)
    assert len(figures) >= 3  # exact attention and each method's maps
    heatmaps = [trace for figure in figures for trace in figure["data"] if trace["type"] == "heatmap"]
    assert heatmaps and all("z" in trace for trace in heatmaps)
    charts = plotly_chart.charts_in(at)
    assert all(json.loads(e.proto.json)["config"]["displaylogo"] is False for e in charts)

    # A new temperature: the same elements (keys) carry new figures, so the browser updates them in place.
    keys = [e.proto.id for e in charts]
    before = [json.dumps(figure["data"], sort_keys=True) for figure in figures]
    at.select_slider(key="tau").set_value(1.0).run()
    charts_after = plotly_chart.charts_in(at)
    assert [e.proto.id for e in charts_after] == keys
    after = [json.dumps(figure["data"], sort_keys=True) for figure in plotly_chart.figures_in(at)]
    assert after != before


def test_without_the_served_bundle_figures_go_to_st_plotly_chart(monkeypatch: pytest.MonkeyPatch, open_compare) -> None:
    monkeypatch.delenv(preload.BUNDLE_VARIABLE, raising=False)
    at = compare(open_compare)
    assert not at.exception
    assert at.get("plotly_chart") and not plotly_chart.figures_in(at)
