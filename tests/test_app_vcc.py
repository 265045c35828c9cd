"""The VCC page renders, and its controls move the selection tree (Streamlit AppTest, no browser)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

PAGE = "pages/5_VCC.py"  # relative to the entry point, as AppTest.switch_page wants
TIMEOUT = 180  # cold torch import and the budget sweep on 2 slow cores


@pytest.fixture
def open_vcc(open_page: Callable[..., AppTest]) -> Callable[..., AppTest]:
    def open_with(**query: str) -> AppTest:
        at = open_page(PAGE, timeout=TIMEOUT, **{"n": "64", **query})  # small n keeps the budget sweep quick
        assert not at.exception, [e.value for e in at.exception]
        return at

    return open_with


def metric(at: AppTest, label: str) -> str:
    for m in at.metric:
        if m.label == label:
            return str(m.value)
    raise AssertionError(f"no metric {label!r}; have {[m.label for m in at.metric]}")


def tree_traces(at: AppTest) -> dict[str, Any]:
    """The selection-tree chart's traces by name (the first Plotly chart on the page)."""
    charts = at.get("plotly_chart")
    assert charts, "the page draws no Plotly chart"
    spec = json.loads(charts[0].proto.spec)
    return {trace.get("name"): trace for trace in spec["data"] if trace.get("name")}


def count(trace: dict[str, Any]) -> int:
    x = trace["x"]
    if isinstance(x, dict):  # plotly >= 6 may send typed arrays
        return int(str(x.get("shape", "0")).split(",")[0])
    return len(x)


def test_page_renders_with_tree_heatmaps_and_sweep(open_vcc) -> None:
    at = open_vcc()
    assert at.title[0].value.endswith("VCC")
    r = int(metric(at, "Compressed length r"))
    # Defaults at n = 64: 8 VIP tokens, k = 16 -> 4 blocks (56 tokens, padded to 64), h = 4 clamped by the slider.
    assert 8 < r <= 64
    traces = tree_traces(at)
    assert {"refined (split)", "leaf = compressed row", "VIP token (exact)"} <= set(traces)
    assert count(traces["VIP token (exact)"]) == 8
    charts = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    assert len(charts) >= 5  # tree, the three maps (one figure), error vs budget, cost, storage tree
    maps = [c for c in charts if [t["type"] for t in c["data"]] == ["heatmap"] * 3]
    assert len(maps) == 1, "exact, VCC and their difference should share one figure"
    titles = [a["text"] for a in maps[0]["layout"]["annotations"]]
    assert titles == ["Exact softmax", "VCC (tiles = blocks)", "VCC − exact"]
    subheaders = [h.value for h in at.subheader]
    assert any("Error vs budget" in h for h in subheaders)
    assert any("storage tree" in h.lower() for h in subheaders)
    text = " ".join(m.value for m in at.markdown)
    assert "VIP tokens" in text and "paper's headline numbers" in text


def splits(at: AppTest) -> list[int]:
    """Nodes split per level, root first, from the page's summary caption."""
    text = " ".join(c.value for c in at.caption)
    match = re.search(r"Splits per level \(root first\): \[([0-9, ]*)\]", text)
    assert match, text
    return [int(x) for x in match.group(1).split(",") if x.strip()]


def test_budget_and_mode_controls_move_the_tree(open_vcc) -> None:
    at = open_vcc(vip="16")
    # n = 64, 16 VIP tokens, k = 16: 48 tokens in 3 blocks; the default h (4, clamped to 3) refines all of them.
    assert splits(at) == [1, 3]
    assert int(metric(at, "Compressed length r")) == 64
    at.slider(key="h").set_value(1).run()
    assert not at.exception
    assert splits(at) == [1, 1]
    assert count(tree_traces(at)["refined (split)"]) == 2  # the root and one block
    assert count(tree_traces(at)["leaf = compressed row"]) == 2 + 16
    assert int(metric(at, "Compressed length r")) == 16 + 2 + 16
    at.select_slider(key="k").set_value(8).run()
    assert not at.exception
    h = splits(at)[1]
    assert int(metric(at, "Compressed length r")) == 16 + 6 + 7 * h
    assert count(tree_traces(at)["leaf = compressed row"]) == 6 + 7 * h
    at.radio(key="mode").set_value("tree").run()
    assert not at.exception
    per_level = splits(at)
    assert len(per_level) == 6 and per_level[0] == 1  # 48 tokens -> a 64-slot dyadic tree with 6 split levels
    assert count(tree_traces(at)["refined (split)"]) == sum(per_level)
    leaves = count(tree_traces(at)["leaf = compressed row"])
    assert int(metric(at, "Compressed length r")) == 16 + leaves


def test_vip_positions_and_selector_change_the_selection(open_vcc) -> None:
    at = open_vcc(h="2", k="4", vip_at="0, 20, 40, 63")
    traces = tree_traces(at)
    assert count(traces["VIP token (exact)"]) == 4
    assert int(metric(at, "Compressed length r")) == 4 + 15 + 2 * 3  # 60 tokens in blocks of 4, 2 refined
    chosen = traces["refined (split)"]["text"]
    at.selectbox(key="selector").set_value("bottom").run()
    assert not at.exception
    assert int(metric(at, "Compressed length r")) == 4 + 15 + 2 * 3  # same budget ...
    assert tree_traces(at)["refined (split)"]["text"] != chosen  # ... other blocks
    at.text_area(key="vip_at").input("5, 999, x").run()
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "VIP positions" in warnings and "999" in warnings
    assert count(tree_traces(at)["VIP token (exact)"]) == 1


@pytest.mark.slow
def test_real_model_text_offers_vip_words(open_vcc) -> None:
    at = open_vcc()
    at.selectbox(key="input").set_value("real").run()
    assert not at.exception
    select = at.multiselect(key="vip_words")
    labels = list(select.options)  # shown as "position · token"
    assert labels[0] == "0 · [CLS]"
    cat = next(label for label in labels if label.endswith("· cat")).split(" · ")[0]
    select.set_value([cat]).run()
    assert not at.exception
    assert count(tree_traces(at)["VIP token (exact)"]) == 1
