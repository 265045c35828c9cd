"""Text on coloured cells meets WCAG AA: black or white per cell, from the cell colour's relative luminance."""

from __future__ import annotations

import numpy as np
import plotly.colors as pcolors
import pytest

from ui.figures import rank_heads as rfig
from ui.figures.contrast import (
    AA_RATIO,
    BLACK,
    WHITE,
    cell_text_colours,
    contrast_ratio,
    parse_colour,
    relative_luminance,
    text_colour,
)


def test_wcag_luminance_and_ratio_of_the_extremes() -> None:
    assert relative_luminance((0, 0, 0)) == 0 and relative_luminance((255, 255, 255)) == pytest.approx(1)
    assert contrast_ratio((0, 0, 0), (255, 255, 255)) == pytest.approx(21)
    assert contrast_ratio((118, 118, 118), (255, 255, 255)) == pytest.approx(4.54, abs=0.01)  # WCAG's AA grey


def test_dark_red_cells_get_white_text_and_light_ones_black() -> None:
    """The issue: black numbers on the dark-red cells of Rank vs heads' grid."""
    assert text_colour("#800026") == WHITE  # YlOrRd's darkest
    assert text_colour("rgb(255, 255, 204)") == BLACK  # YlOrRd's lightest
    assert text_colour((68, 1, 84)) == WHITE and text_colour("#fde725") == BLACK  # viridis' ends


@pytest.mark.parametrize("scale", ["YlOrRd", "Viridis", "Cividis", "RdBu_r"])
def test_every_colour_of_the_app_scales_gets_aa_text(scale: str) -> None:
    for colour in pcolors.sample_colorscale(scale, list(np.linspace(0, 1, 101))):
        rgb = parse_colour(colour)
        chosen = (0, 0, 0) if text_colour(colour) == BLACK else (255, 255, 255)
        assert contrast_ratio(rgb, chosen) >= AA_RATIO, (scale, colour)


def test_cell_colours_follow_the_colour_range() -> None:
    colours = cell_text_colours(np.array([[0.0, 1.0], [np.nan, 0.5]]), "YlOrRd", 0.0, 1.0)
    assert colours[0][0] == BLACK and colours[0][1] == WHITE and colours[1][0] == BLACK


def test_rank_grid_writes_each_error_in_its_cells_contrast_colour() -> None:
    fig = rfig.grid_heatmap(16, {(1, 1): 0.9, (1, 16): 0.3, (16, 1): 0.001})
    text = next(t for t in fig.data if t.type == "scatter" and t.mode == "text")
    by_value = dict(zip(text.text, text.textfont.color, strict=True))
    assert by_value["0.900"] == WHITE and by_value["0.001"] == BLACK  # the worst error is the darkest red
