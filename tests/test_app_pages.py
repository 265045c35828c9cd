"""AppTest checks of the explorer pages: they render, their controls exist, the URL seeds them, bad URL values
become notices, and moving a control changes the numbers.

Each test keeps n small through the URL so the whole file stays within about a minute on two cores.
"""

from __future__ import annotations

import pytest
from render_params import RENDER_PARAMS
from streamlit.testing.v1 import AppTest

from ui import page_registry, share_box

PAGES = [p.file for p in page_registry.ALL_PAGES]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def warnings(at: AppTest) -> str:
    return "\n".join(w.value for w in at.warning)


def share_link(at: AppTest) -> str:
    links = share_box.links_in(at)
    assert links, "no share link box on the page"
    return links[-1]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_without_exception(path: str, open_page) -> None:
    at = open_page(path, **RENDER_PARAMS[path])
    assert not at.exception, [e.value for e in at.exception]
    assert at.title, f"{path} has no title"
    assert share_link(at)  # every page ends with ui.finish(): notices, link, settings
    # deploy/preload.py gives the Plotly head start to exactly the pages that open on a Plotly chart
    page = page_registry.by_file(path)
    assert page is not None and bool(at.get("plotly_chart")) is page.opens_on_chart, path


def test_compare_controls_exist_and_the_url_seeds_them(open_page) -> None:
    at = open_page(
        "pages/1_Compare.py",
        n="128",
        tau="0.5",
        seed="7",
        budget="1/4",
        methods=["performer", "lsh"],
        heads="2",
        clusters="8",
        spread="0.5",
    )
    assert not at.exception
    assert at.slider(key="n").value == 128
    assert at.select_slider(key="tau").value == 0.5
    assert at.number_input(key="seed").value == 7
    assert at.select_slider(key="budget").value == 0.25
    assert at.multiselect(key="methods").value == ["performer", "lsh"]
    assert at.slider(key="clusters").value == 8
    assert at.slider(key="spread").value == 0.5
    for key in ("input", "device"):
        assert at.selectbox(key=key).value
    assert at.toggle(key="logc").value is True
    # Method knobs come from the registry: a "linked to budget" toggle per budgeted method.
    assert at.toggle(key="performer_linked").value is True
    got = metrics(at)
    assert set(got) >= {"Performer (FAVOR+)", "LSH sparse (Reformer/SMYRF)"}, got
    link = share_link(at)
    for part in ("n=128", "tau=0.5", "seed=7", "budget=1/4", "methods=performer", "methods=lsh"):
        assert part in link, (part, link)
    assert not warnings(at)


def test_compare_metrics_follow_the_temperature(open_page) -> None:
    at = open_page("pages/1_Compare.py", n="64", heads="1", methods=["performer", "lsh"])
    before = metrics(at)
    at.select_slider(key="tau").set_value(2.0).run()
    assert not at.exception
    after = metrics(at)
    assert before.keys() == after.keys()
    assert before != after, "the metrics did not change with the temperature"


def test_unlinking_a_method_changes_only_that_method(open_page) -> None:
    at = open_page("pages/1_Compare.py", n="128", heads="1", methods=["performer", "lsh"])
    before = metrics(at)
    at.toggle(key="performer_linked").set_value(False).run()
    features = at.number_input(key="performer_features")
    import core

    expected = core.budget_params("performer", 128, 64, 1 / 8)["features"]
    assert features.value == expected, "an unlinked knob starts at the budget value"
    features.set_value(4).run()
    assert not at.exception
    after = metrics(at)
    assert after["Performer (FAVOR+)"] != before["Performer (FAVOR+)"]
    assert after["LSH sparse (Reformer/SMYRF)"] == before["LSH sparse (Reformer/SMYRF)"]
    assert "performer_linked=false" in share_link(at) and "performer_features=4" in share_link(at)


def test_garbage_url_gives_notices_not_exceptions(open_page) -> None:
    at = open_page(
        "pages/1_Compare.py",
        n="abc",
        tau="-5",
        seed="\x00",
        zz="1",
        d="9999",
        heads="1",
        methods=["performer", "no_such_method"],
        input="x" * 5000,
        clusters="1e9",
    )
    assert not at.exception
    text = warnings(at)
    assert "Sequence length n" in text and "not a number" in text
    assert "Temperature τ" in text and "greater than 0" in text
    assert "Seed" in text
    assert "Head dimension d" in text and "maximum 256" in text
    assert "unknown URL parameter" in text and "zz" in text
    assert "no_such_method" in text
    assert "x" * 100 not in text, "a hostile long value must be cut in the notice"
    assert at.slider(key="n").value == 512 and at.select_slider(key="tau").value == 0.2
    assert at.slider(key="d").value == 256, "out-of-range values are clamped, not dropped"
    assert at.number_input(key="seed").value == 0
    assert at.multiselect(key="methods").value == ["performer"]
    assert at.selectbox(key="input").value == "clustered"


def test_off_grid_temperature_snaps_with_a_notice(open_page) -> None:
    at = open_page("pages/1_Compare.py", n="64", heads="1", tau="0.47", methods=["performer"])
    assert not at.exception
    assert at.select_slider(key="tau").value == 0.5
    assert "nearest value 0.5" in warnings(at)
    assert "tau=0.5" in share_link(at)


def test_lesson_mode_hides_controls_and_keeps_their_values(open_page) -> None:
    at = open_page(
        "pages/1_Compare.py", n="64", heads="1", seed="5", methods=["performer"], lesson="1", hide="seed,device,n"
    )
    assert not at.exception
    keys = {w.key for w in at.number_input} | {w.key for w in at.selectbox} | {w.key for w in at.slider}
    assert not keys & {"seed", "device", "n"}, keys
    assert "d" in keys
    link = share_link(at)
    assert "seed=5" in link and "n=64" in link and "lesson=1" in link and "hide=device,n,seed" in link
    assert any("Lesson mode" in i.value for i in at.info)


def test_real_model_head_reproduces_the_model_at_temperature_one(open_page) -> None:
    at = open_page("pages/1_Compare.py", input="real", tau="1", layer="1", head="2", methods=["performer"])
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "tokens" in captions and "12 heads" in captions
    gap = [c.value for c in at.caption if "reproduces the model's own attention" in c.value]
    assert gap, "the τ = 1 check is missing"
    value = float(gap[0].split("max difference")[1].strip(" .").split()[0])
    assert value < 1e-4


def test_sparse_plus_low_rank_page_shows_the_split_and_fig4(open_page) -> None:
    at = open_page("pages/2_Sparse_plus_low_rank.py", n="128", heads="1", f4_draws="2", f4_m="16")
    assert not at.exception
    got = metrics(at)
    assert {"Entries in Ω", "Attention mass inside Ω", "Scatterbrain error", "Naive-sum error"} <= set(got), got
    assert at.slider(key="f4_m").value == 16 and at.slider(key="f4_draws").value == 2
    assert float(got["Scatterbrain error"]) >= 0
    headers = " ".join(h.value for h in at.header)
    for part in ("hash buckets", "The split", "robust PCA", "Singular values", "Fig. 4"):
        assert part in headers, (part, headers)
    before = got["Scatterbrain error"]
    at.select_slider(key="tau").set_value(1.0).run()
    assert not at.exception
    assert metrics(at)["Scatterbrain error"] != before


def test_error_vs_entropy_sweeps_and_reports_the_crossover_or_none(open_page) -> None:
    at = open_page("pages/3_Error_vs_entropy.py", n="64", heads="1", points="5", taus=["0.03", "3"])
    assert not at.exception
    assert at.slider(key="points").value == 5
    assert at.select_slider(key="taus").value == (0.03, 3.0)
    assert any("Sweep done: 5 temperatures × 3 methods" in c.value for c in at.caption)
    got = metrics(at)
    assert len(got) == 3
    texts = " ".join(m.value for m in at.markdown)
    assert "cross at H ≈" in texts or "No crossover" in texts
    at.toggle(key="oracles").set_value(True).run()
    assert not at.exception
    assert len(metrics(at)) == 5, "top-k and SVD oracles are added"


def test_regime_map_counts_every_cell(open_page) -> None:
    at = open_page("pages/4_Regime_map.py", n="64", nb="3", ns="2")
    assert not at.exception
    assert counted_cells(metrics(at)) == 6
    assert at.select_slider(key="betas").value == (1.0, 50.0)
    at.slider(key="nb").set_value(2).run()
    assert not at.exception
    assert counted_cells(metrics(at)) == 4


def counted_cells(tiles: dict[str, str]) -> int:
    """The cells won clearly (the "cells won by" tiles) plus those whose winner is within the seeds' noise."""
    clear = sum(int(v) for k, v in tiles.items() if k.startswith("cells won by"))
    return clear + int(tiles["winner within noise"].split("/")[0])
