"""Static export through kaleido on the system Chromium: PNG and SVG carry the axes, title and colour bar."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from ui import export, figures


def _heatmap() -> object:
    rng = np.random.default_rng(0)
    matrix = rng.random((64, 64)).astype(np.float32)
    matrix /= matrix.sum(axis=1, keepdims=True)
    return figures.heatmap(matrix, "Exact softmax")


def test_svg_export_has_title_axes_and_colour_bar() -> None:
    assert export.chromium_path() is not None
    svg = export.static_image(_heatmap(), "svg").decode("utf-8")  # type: ignore[arg-type]
    assert svg.startswith("<svg")
    assert "Exact softmax" in svg  # the title
    assert "key j" in svg and "query i" in svg  # axis titles
    assert "colorbar" in svg  # the colour bar


def test_png_export_is_the_whole_figure_not_the_bare_matrix() -> None:
    fig = _heatmap()
    png = export.static_image(fig, "png", width=600, height=500)  # type: ignore[arg-type]
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG"
    assert image.size == (1200, 1000)  # drawn at 2x: the figure's size, not the 64 x 64 matrix
    pixels = np.asarray(image.convert("L"))
    # Margins hold white background and dark text (axes, title), not only the colour map.
    assert (pixels > 245).mean() > 0.2 and (pixels < 60).mean() > 0.001


def test_bad_format_is_refused() -> None:
    with pytest.raises(ValueError, match="format must be"):
        export.static_image(_heatmap(), "gif")  # type: ignore[arg-type]
