"""Every colour that stands for a method or a family, declared once: a colour means the same thing on every page.

A method keeps its colour in every figure (curves, bands, markers, rings, legends); a family's colour is the colour of
the method that represents it in the lessons (sparse = LSH, low rank = Performer, sparse + low rank = Scatterbrain), so
"sparse wins" is drawn in LSH's orange wherever it appears. Quantities that are not methods (µ, block length, rank,
kernel variants, the naive sum, error) take colours from ``OTHER`` and the sequential scales below, which no method
uses. ``tests/test_palette.py`` holds the rules: every registered method and every family has a colour, no two methods
or two families share one, and no figure draws a method or a family in another colour.

Colour-blind safe where it matters most: the lessons' methods take Okabe-Ito colours, the rest Paul Tol's.
"""

from __future__ import annotations

# Methods, by registry name. Names not registered yet are declared ahead of their methods (a branch adding them).
METHOD_COLOURS: dict[str, str] = {
    "exact": "#000000",
    "performer": "#0072B2",  # Okabe-Ito blue
    "lsh": "#E69F00",  # Okabe-Ito orange
    "scatterbrain": "#009E73",  # Okabe-Ito bluish green
    "nystrom": "#CC79A7",  # Okabe-Ito reddish purple
    "local": "#D55E00",  # Okabe-Ito vermillion
    "linformer": "#56B4E9",  # Okabe-Ito sky blue
    "vcc": "#882255",  # Tol wine
    "topk": "#999933",  # Tol olive
    "topk_renormalized": "#DDCC77",  # Tol sand
    "svd": "#44AA99",  # Tol teal
    "rpca": "#332288",  # Tol indigo
    "learned_kernel": "#AA4499",  # Tol purple
    "linear_elu": "#CC6677",  # Tol rose
    "nsa": "#EE3377",  # Tol magenta
    "moba": "#117733",  # Tol green
    "hedgehog": "#88CCEE",  # Tol cyan
    "based": "#8C564B",  # brown
}

# Families (core.registry.FAMILIES, and those declared ahead): the representative method's colour, or one no method has.
FAMILY_COLOURS: dict[str, str] = {
    "exact": METHOD_COLOURS["exact"],
    "sparse": METHOD_COLOURS["lsh"],
    "low-rank": METHOD_COLOURS["performer"],
    "sparse+low-rank": METHOD_COLOURS["scatterbrain"],
    "compression": METHOD_COLOURS["vcc"],
    "routed-sparse": METHOD_COLOURS["nsa"],
    "oracle": "#999999",  # grey: no method has it
}

# Colours for what is not a method or a family (several curves of one quantity, variants, reference lines): greys and
# dark neutrals no method or family uses.
OTHER: tuple[str, ...] = ("#4D4D4D", "#A0A0A0", "#2F4F4F", "#8B6F47", "#6A5ACD", "#C8B8A0")
# Ordered quantities (µ, block length, rank, head count): sequential scales, sampled by ``sequence_colours``.
SEQUENCE_SCALE = "Cividis"
UNKNOWN = "#333333"  # a name the palette does not know (never a method colour)


def method_colour(name: str) -> str:
    """The colour of method ``name`` (registry name) in every figure."""
    return METHOD_COLOURS.get(name, UNKNOWN)


def family_colour(family: str) -> str:
    """The colour of a registry family ("sparse", "low-rank", ...) in every figure."""
    return FAMILY_COLOURS.get(family, UNKNOWN)


def other_colour(index: int) -> str:
    """The ``index``-th colour for curves that are not methods (the naive sum, kernel variants, selectors)."""
    return OTHER[index % len(OTHER)]


def sequence_colours(count: int) -> list[str]:
    """``count`` colours along the sequential scale, for an ordered quantity (rank, µ, block length)."""
    import plotly.colors as pcolors

    if count <= 1:
        return [pcolors.sample_colorscale(SEQUENCE_SCALE, [0.3])[0]]
    return list(pcolors.sample_colorscale(SEQUENCE_SCALE, [0.9 * i / (count - 1) for i in range(count)]))
