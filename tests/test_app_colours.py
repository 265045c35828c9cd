"""Every page opened in presenter view (AppTest, small n): no method and no family is drawn in two colours (or in any
colour but its own from ui/figures/palette.py), and every link to another view of the app keeps ``present=1``.

A trace is a method's when its name is the method's registry name or label (or starts with the label, e.g.
"Performer (FAVOR+): 3 draws"); a family's when it says "<family> wins". New pages are covered by page_registry."""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from typing import Any

import pytest
from render_params import RENDER_PARAMS

from core import registry
from ui import page_registry
from ui.figures import palette
from ui.figures.regime import ROLE_NAMES

PAGES = [p.file for p in page_registry.ALL_PAGES]
FAMILY_OF_ROLE = {"sparse": "sparse", "low_rank": "low-rank", "sparse_low_rank": "sparse+low-rank"}
WINS = re.compile(
    r"^(" + "|".join(re.escape(n) for n in sorted(ROLE_NAMES.values(), key=len, reverse=True)) + r") wins"
)
ANCHOR = re.compile(r"<a\s[^>]*>")
HREF = re.compile(r'href="([^"]*)"')


def _owner(name: str) -> tuple[str, str] | None:
    """("method", name) or ("family", name) for a trace's name; None for anything else."""
    found = WINS.match(name)
    if found:
        role = next(r for r, n in ROLE_NAMES.items() if n == found.group(1))
        return "family", FAMILY_OF_ROLE[role]
    for method, spec in registry.methods().items():
        if (
            name == method
            or name == spec.label
            or name.startswith(spec.label + " ")
            or name.startswith(spec.label + ":")
        ):
            return "method", method
    return None


def _colours(trace: dict[str, Any]) -> set[str]:
    found = set()
    for part in ("line", "marker"):
        colour = (trace.get(part) or {}).get("color")
        if isinstance(colour, str) and colour.startswith("#"):
            found.add(colour.lower())
    return found


def drawn_colours(specs: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """(kind, name) -> every colour its traces are drawn in, over the given Plotly figure specs."""
    seen: dict[tuple[str, str], set[str]] = {}
    for spec in specs:
        for trace in spec.get("data", []):
            owner = _owner(str(trace.get("name") or ""))
            if owner is not None and trace.get("type", "scatter") in ("scatter", "scattergl", "bar"):
                seen.setdefault(owner, set()).update(_colours(trace))
    return seen


def wrong_colours(seen: dict[tuple[str, str], set[str]]) -> dict[tuple[str, str], set[str]]:
    declared = {"method": palette.METHOD_COLOURS, "family": palette.FAMILY_COLOURS}
    return {
        key: colours
        for key, colours in seen.items()
        if colours and (len(colours) > 1 or colours != {declared[key[0]][key[1]].lower()})
    }


def test_the_colour_check_catches_a_method_in_two_colours() -> None:
    specs = [
        {"data": [{"type": "scatter", "name": "Performer (FAVOR+)", "line": {"color": "#0072B2"}}]},
        {"data": [{"type": "scatter", "name": "Performer (FAVOR+): 3 draws", "marker": {"color": "#E69F00"}}]},
        {"data": [{"type": "scatter", "name": "sparse wins (3 heads)", "marker": {"color": "#E69F00"}}]},
    ]
    assert set(wrong_colours(drawn_colours(specs))) == {("method", "performer")}


def _links(at: Any) -> list[str]:
    texts = [m.value for m in at.markdown] + [str(getattr(h, "proto", "")) for h in at.get("html")]
    anchors = [a for text in texts for a in ANCHOR.findall(str(text)) if 'target="_self"' in a]
    hrefs = [html.unescape(h) for a in anchors if "ae-exit-present" not in a for h in HREF.findall(a)]
    return [h for h in hrefs if not re.match(r"^[a-z]+:", h)]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_keeps_one_colour_per_method_and_the_presenter_view(path: str, open_page) -> None:
    at = open_page(path, **RENDER_PARAMS[path], present="1")
    assert not at.exception, [e.value for e in at.exception]
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    assert not wrong_colours(drawn_colours(specs)), wrong_colours(drawn_colours(specs))
    links = _links(at)
    missing = [h for h in links if urllib.parse.parse_qs(urllib.parse.urlsplit(h).query).get("present") != ["1"]]
    assert not missing, f"{path}: links that drop the presenter view: {missing}"
