"""The URL settings the render tests open each page with (tests/test_app_pages.py, tests/test_app_colours.py,
tests/browser/test_app_pages.py).

Rank vs heads at the smoke settings (one N in its sweep) still trains its default grid on its first run. The render
tests check that the page renders (title, link, charts, colours), no number that depends on the grid's size: one rank
and one head count on top of the smoke settings train 4 runs. The files use these same settings, so an xdist worker
that runs several trains once.
"""

from __future__ import annotations

from ui import page_registry

RANK_PAGE = "pages/6_Rank_vs_heads.py"
RENDER_PARAMS = page_registry.SMOKE_PARAMS | {
    RANK_PAGE: {**page_registry.SMOKE_PARAMS[RANK_PAGE], "ranks": "1", "hv": "1"}
}
