"""One colour per method and one per family, declared once (ui/figures/palette.py), and no colour of a method or a
family reused for something else. ``tests/test_app_colours.py`` checks what every page actually draws."""

from __future__ import annotations

from core import registry
from ui.figures import palette
from ui.figures.cost import FAMILY_COLOURS as COST_FAMILY_COLOURS
from ui.figures.kernels import VARIANT_COLOURS
from ui.figures.regime import ROLE_COLOURS
from ui.figures.vcc import REWRITTEN, SPLIT_RING


def _same(a: str, b: str) -> bool:
    return a.lower() == b.lower()


def test_every_registered_method_and_family_has_a_colour() -> None:
    missing = [m for m in registry.methods() if m not in palette.METHOD_COLOURS]
    assert not missing, f"methods without a colour in ui/figures/palette.py: {missing}"
    missing_families = [f for f in registry.FAMILIES if f not in palette.FAMILY_COLOURS]
    assert not missing_families, f"families without a colour: {missing_families}"


def test_no_two_methods_and_no_two_families_share_a_colour() -> None:
    for table in (palette.METHOD_COLOURS, palette.FAMILY_COLOURS):
        by_colour: dict[str, list[str]] = {}
        for name, colour in table.items():
            by_colour.setdefault(colour.lower(), []).append(name)
        shared = {c: names for c, names in by_colour.items() if len(names) > 1}
        assert not shared, shared


def test_a_family_takes_its_representatives_colour_or_one_no_method_has() -> None:
    methods = {c.lower(): m for m, c in palette.METHOD_COLOURS.items()}
    families = registry.methods()
    for family, colour in palette.FAMILY_COLOURS.items():
        owner = methods.get(colour.lower())
        if owner is not None and owner in families:  # a registered method: it must belong to that family
            assert families[owner].family == family, (family, owner)


def test_what_is_not_a_method_never_takes_a_method_or_family_colour() -> None:
    taken = {c.lower() for c in (*palette.METHOD_COLOURS.values(), *palette.FAMILY_COLOURS.values())}
    others = [*palette.OTHER, *VARIANT_COLOURS.values(), SPLIT_RING, REWRITTEN, palette.UNKNOWN]
    assert not [c for c in others if c.lower() in taken]


def test_figures_read_the_palette() -> None:
    assert COST_FAMILY_COLOURS is palette.FAMILY_COLOURS
    assert _same(ROLE_COLOURS["sparse"], palette.method_colour("lsh"))
    assert _same(ROLE_COLOURS["low_rank"], palette.method_colour("performer"))
    assert _same(ROLE_COLOURS["sparse_low_rank"], palette.method_colour("scatterbrain"))
