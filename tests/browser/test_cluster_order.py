"""Issue #28, "first glance teaches": the default Compare link draws clustered input in cluster order, so the exact
heatmap shows blocks; ``?sort_clusters=false`` gives position order (speckle). Read from the chart in the browser."""

from __future__ import annotations

import numpy as np
from playwright.sync_api import Page

from .helpers import PLOTLY_CHART, wait_for_app

# The numbers plotly.js draws in the "Exact softmax" chart (log10 weights), as rows; null until the chart is drawn.
READ_EXACT = """() => {
  const plot = [...document.querySelectorAll(".js-plotly-plot")].find((p) => {
    const title = p.layout && p.layout.title;
    return (title && (title.text || title)) === "Exact softmax";
  });
  const trace = plot && plot._fullData && plot._fullData.find((t) => t.type === "heatmap");
  return trace && trace.z ? Array.from(trace.z, (row) => Array.from(row)) : null;
}"""


def shown_exact(page: Page, url: str) -> np.ndarray:
    page.goto(url)
    wait_for_app(page)
    page.locator(f"{PLOTLY_CHART} .main-svg").first.wait_for(timeout=90_000)
    page.wait_for_function(f"({READ_EXACT})() !== null", timeout=90_000)
    return np.asarray(page.evaluate(READ_EXACT), dtype=np.float64)


def adjacent_row_correlation(z: np.ndarray) -> float:
    """Mean Pearson correlation of each drawn row with the next: high when neighbouring rows are one cluster."""
    rows = [r for r in np.nan_to_num(z, nan=z[np.isfinite(z)].min()) if r.std() > 0]
    return float(np.mean([np.corrcoef(a, b)[0, 1] for a, b in zip(rows[:-1], rows[1:], strict=True)]))


def test_the_default_compare_link_shows_the_clusters_as_blocks(page: Page, app_server: str) -> None:
    z = shown_exact(page, app_server + "/Compare")
    assert z.shape == (128, 128)  # n = 512 drawn at 128 pixels: blocks of 4 positions, sorted before reducing
    assert adjacent_row_correlation(z) > 0.5
    assert page.get_by_text("Drawn in cluster order", exact=False).first.is_visible()
    assert "sort_clusters" not in page.url  # the default keeps the link short


def test_sort_clusters_false_draws_the_positions_in_their_real_order(page: Page, app_server: str) -> None:
    z = shown_exact(page, app_server + "/Compare?sort_clusters=false")
    assert z.shape == (128, 128)
    assert abs(adjacent_row_correlation(z)) < 0.2
    assert page.get_by_text("Drawn in cluster order", exact=False).count() == 0
