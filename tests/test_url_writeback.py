"""AppTest checks that clamped and snapped link values are written back to the URL at once, and stay there.

The browser test (tests/browser/test_address_bar.py) checks the address bar itself and a reload; this one checks
what the app sends: ``AppTest.query_params`` is the query string the script left at the end of its run.
"""

from __future__ import annotations

from ui.fields import MAX_DENSE_ELEMENTS, MAX_HEADS, max_heads


def test_max_heads_keeps_every_head_within_the_dense_budget() -> None:
    assert max_heads(64) == MAX_HEADS
    assert max_heads(4096) == 2
    assert max_heads(2048) == 8
    for n in (16, 512, 1024, 1500, 2048, 3000, 4096):
        assert 1 <= max_heads(n) <= MAX_HEADS
        assert max_heads(n) * n * n <= MAX_DENSE_ELEMENTS or max_heads(n) == 1


def test_clamped_and_snapped_values_are_written_back_and_survive_a_later_change(open_compare) -> None:
    at = open_compare(n="5000", tau="0.13", heads="16", methods="lsh")
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params.get("n") == "4096"
    assert at.query_params.get("tau") == "0.15"
    assert at.query_params.get("methods") == "lsh"
    # 16 heads of 4096 x 4096 do not fit: 2 is both the maximum and the default there, so the URL may omit it.
    assert at.query_params.get("heads", "2") == "2"
    assert at.slider(key="heads").value == 2
    warnings = "\n".join(w.value for w in at.warning)
    assert "above the maximum 4096" in warnings and "nearest value 0.15" in warnings and "maximum 2" in warnings
    first = {m.label: m.value for m in at.metric}

    at.toggle(key="logc").set_value(False).run()
    assert at.query_params.get("n") == "4096" and at.query_params.get("tau") == "0.15"
    # (AppTest has no browser: the browser itself adds a user's own change, logc=false, to the address bar.)
    assert {m.label: m.value for m in at.metric} == first

    # The URL the app left reproduces the same settings and numbers without any notice.
    again = open_compare(**at.query_params)
    assert again.slider(key="n").value == 4096 and again.select_slider(key="tau").value == 0.15
    assert {m.label: m.value for m in again.metric} == first
    assert not any("adjusted" in w.value for w in again.warning)


def test_heads_above_the_slider_are_clamped_in_the_url(open_compare) -> None:
    at = open_compare(n="64", heads="40", methods="lsh")
    assert at.query_params.get("heads") == str(MAX_HEADS)
    assert at.slider(key="heads").value == MAX_HEADS
