from __future__ import annotations

import plotly.graph_objects as go

from ui.figures.axes import decade_axis, use_decades


def test_decade_axis_labels_decades_only_when_the_range_spans_one() -> None:
    wide = decade_axis([1e-3, 0.5, 20.0])
    assert wide["type"] == "log" and wide["dtick"] == 1
    narrow = decade_axis([2.0, 3.0, 7.0])
    assert narrow["type"] == "log" and "dtick" not in narrow


def test_use_decades_sets_every_requested_axis() -> None:
    fig = go.Figure(go.Scatter(x=[1, 10, 1000], y=[1, 2, 3]))
    use_decades(fig, "x", [1, 10, 1000])
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis.dtick == 1
    assert fig.layout.yaxis.type is None
