from __future__ import annotations

import math

import plotly.graph_objects as go
import pytest

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


def labelled_ticks(settings: dict, low: float, high: float) -> list[float]:  # type: ignore[type-arg]
    """The labelled tick values a log axis with ``settings`` shows over the data range [low, high]."""
    if "tickvals" in settings:
        return [t for t in settings["tickvals"] if low <= t <= high or "range" in settings]
    step = settings["dtick"]
    first, last = math.ceil(math.log10(low) - 1e-9), math.floor(math.log10(high) + 1e-9)
    return [10.0**e for e in range(first, last + 1) if e % step == 0]


@pytest.mark.parametrize(
    "values",
    [[0.81, 0.89], [0.12, 0.35], [2.0, 40.0], [1.0], [3.0, 3.0], [1, 2, 4, 8], [1e3, 4e3], [256, 4096], [0.1, 1e9]],
)
def test_every_log_axis_gets_two_labelled_ticks_at_least(values: list[float]) -> None:
    """The issue's axes: Rank vs heads labelled only at 0.1, Scaling's x only at 10³."""
    settings = decade_axis(values)
    assert len(labelled_ticks(settings, min(values), max(values))) >= 2, settings


def test_decades_are_all_labelled_up_to_eight_and_round_numbers_read_plainly() -> None:
    assert decade_axis([1e-4, 1e3])["dtick"] == 1
    assert decade_axis([1e-3, 1e9])["dtick"] == 2
    narrow = decade_axis([0.16, 0.5])
    assert narrow["tickvals"] == [0.2, 0.3, 0.5] and narrow["ticktext"] == ["0.2", "0.3", "0.5"]
    assert decade_axis([1, 2, 4, 8], ticks=[1, 2, 4, 8])["tickvals"] == [1, 2, 4, 8]  # the plotted head counts


def test_round_labels_read_as_plain_numbers() -> None:
    """Scaling's sizes 256 .. 4096 hold one decade: labels 300 .. 3000, never "1e+03"."""
    axis = decade_axis([256, 4096])
    assert "1000" in axis["ticktext"] and all("e" not in t for t in axis["ticktext"])
    assert decade_axis([0.012, 0.05])["ticktext"][:2] == ["0.02", "0.03"]
