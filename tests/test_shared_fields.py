"""The shared sidebar fields are declared once (ui/fields.SHARED_FIELDS, ParamSpecs): the defaults come from them,
the sidebar's controls take their ranges from them, and a link's values are checked against them."""

from __future__ import annotations

from ui import fields as sidebar


def test_every_shared_url_key_but_the_text_is_declared_and_its_default_allowed() -> None:
    assert set(sidebar.SHARED_KEYS) - {"text"} == set(sidebar.SHARED_FIELDS)
    assert sidebar.DEFAULTS == {name: spec.default for name, spec in sidebar.SHARED_FIELDS.items()}
    for name, spec in sidebar.SHARED_FIELDS.items():
        assert spec.validate(spec.default, 512, 64, "sidebar") == spec.default, name


def test_the_sidebar_draws_the_declared_ranges(open_compare) -> None:
    at = open_compare()
    assert not at.exception
    fields = sidebar.SHARED_FIELDS
    for key in ("n", "d", "heads", "clusters", "spread"):
        low, high = fields[key].bounds(512, 64)
        slider = at.slider(key=key)
        assert (slider.min, slider.max) == (low, high), key
    seed = at.number_input(key="seed")
    assert (seed.min, seed.max) == fields["seed"].bounds(0, 0)
    assert [float(o) for o in at.select_slider(key="tau").options] == list(fields["tau"].grid)
    assert len(at.select_slider(key="budget").options) == len(fields["budget"].grid)
    # A worker's device (cpu@worker, cuda@worker) is offered only where a scheduler's worker has it (none here).
    assert at.selectbox(key="device").options == [c for c in fields["device"].choices if "@" not in c]


def test_a_link_is_checked_against_the_declared_range(open_compare) -> None:
    high = sidebar.SHARED_FIELDS["d"].bounds(0, 0)[1]
    at = open_compare(d=str(high * 4))
    assert at.slider(key="d").value == high
    assert any(f"above the maximum {high}" in w.value for w in at.warning)
