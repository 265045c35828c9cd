"""The URL settings the render tests open each page with (tests/test_app_pages.py, tests/test_app_colours.py).

Rank vs heads at the smoke settings trains its default grid and N sweep on its first run (17 trainings: 18 s on a
quiet machine, 31 to 63 s on a loaded one). The render tests check that the page renders (title, link, charts,
colours), no number that depends on the grid's size: one rank, one head count and one N train 4 runs. Both files use
these same settings, so an xdist worker that runs both trains once.
"""

from __future__ import annotations

from ui import page_registry

RANK_PAGE = "pages/6_Rank_vs_heads.py"
RENDER_PARAMS = page_registry.SMOKE_PARAMS | {
    RANK_PAGE: {**page_registry.SMOKE_PARAMS[RANK_PAGE], "ranks": "1", "hv": "1", "nsweep": "2"}
}
