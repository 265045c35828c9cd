"""Readable text on coloured cells: black or white per cell, whichever contrasts more with the cell's colour (WCAG 2
relative luminance). The better of the two always reaches 4.58:1, above WCAG AA's 4.5:1 for normal text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.colors as pcolors

BLACK, WHITE = "#000000", "#ffffff"
AA_RATIO = 4.5


def _channel(c: float) -> float:
    c = c / 255.0
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def relative_luminance(rgb: Sequence[float]) -> float:
    """WCAG 2 relative luminance of an sRGB colour given as 0-255 channels."""
    r, g, b = (_channel(float(c)) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """WCAG 2 contrast ratio of two sRGB colours (1 to 21)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def parse_colour(colour: str) -> tuple[float, float, float]:
    """'#rrggbb', 'rgb(r, g, b)' or 'rgba(...)' as 0-255 channels."""
    colour = colour.strip()
    if colour.startswith("#"):
        return pcolors.hex_to_rgb(colour)
    inside = colour[colour.index("(") + 1 : colour.rindex(")")]
    r, g, b = (float(v) for v in inside.split(",")[:3])
    return r, g, b


def text_colour(cell: str | Sequence[float]) -> str:
    """Black or white, whichever contrasts more with ``cell`` (a colour string or 0-255 channels)."""
    rgb = parse_colour(cell) if isinstance(cell, str) else tuple(cell)
    return BLACK if contrast_ratio(rgb, (0, 0, 0)) >= contrast_ratio(rgb, (255, 255, 255)) else WHITE


def cell_text_colours(z: np.ndarray, colorscale: str, zmin: float, zmax: float) -> np.ndarray:
    """Each cell's text colour for a heatmap of ``z`` on ``colorscale`` over [zmin, zmax] (NaN cells: black)."""
    z = np.asarray(z, dtype=float)
    span = (zmax - zmin) or 1.0
    unit = np.clip((np.nan_to_num(z, nan=zmin) - zmin) / span, 0.0, 1.0)
    colours = pcolors.sample_colorscale(colorscale, unit.ravel().tolist()) if unit.size else []
    return np.asarray([text_colour(c) for c in colours], dtype=object).reshape(z.shape)
