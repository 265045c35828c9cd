"""AppTest of the Block sparsity page: the URL seeds the tile size and the methods, each method shows its tiles and
entries, and the FlexAttention export is offered for the method whose maps are drawn."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

PAGE = "pages/12_Block_sparsity.py"


def test_tiles_and_entries_per_method_and_the_export_button(open_page) -> None:
    at: AppTest = open_page(PAGE, n="128", block="32", methods=["lsh", "local", "moba"], maps_of="moba")
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="block").value == 32
    shown = {m.label: (m.value, m.delta) for m in at.metric}
    assert set(shown) == {"LSH sparse (Reformer/SMYRF)", "Local window", "MoBA (block routing)"}, shown
    for tiles, entries in shown.values():
        assert tiles.endswith("% of tiles") and entries.endswith("% of entries")
        assert float(tiles.split("%")[0]) >= float(entries.split("%")[0])  # a tile is touched by any entry in it
    assert len(at.get("plotly_chart")) == 3  # fractions, timing, the maps
    buttons = at.get("download_button")
    assert buttons and "flex_moba.py" in buttons[0].proto.label


def test_a_causal_link_and_a_tile_of_128(open_page) -> None:
    at: AppTest = open_page(PAGE, n="256", block="128", causal="true", methods=["nsa", "based"])
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="block").value == 128
    assert {m.label for m in at.metric} == {"NSA (native sparse)", "Based (Taylor + window)"}
