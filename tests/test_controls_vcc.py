"""ui.controls.vcc: the VCC page's chosen values map to the engine's parameters as the page passed them before."""

from __future__ import annotations

from ui.controls.vcc import VccControls


def controls(**changes: object) -> VccControls:
    values: dict = dict(
        mode="two_level",
        selector="score",
        vip_count=8,
        vip_indices=(),
        n_p=8,
        block_size=16,
        budget=4,
        budget_max=15,
        correction=True,
        share_heads=False,
    )
    return VccControls(**{**values, **changes})


def test_params_name_the_first_vip_tokens_by_count_when_no_positions_are_named() -> None:
    assert controls().params() == {
        "mode": "two_level",
        "selector": "score",
        "block_size": 16,
        "fine_blocks": 4,
        "scale_correction": True,
        "share_heads": False,
        "vip": 8,
    }


def test_named_positions_replace_the_count_as_a_list() -> None:
    params = controls(vip_indices=(0, 5, 9), n_p=3).params()
    assert params["vip_indices"] == [0, 5, 9] and "vip" not in params


def test_the_sweep_varies_selector_d_and_budget_and_holds_the_rest() -> None:
    sweep = controls(vip_indices=(2, 3), share_heads=True).sweep_params()
    assert sweep == {
        "mode": "two_level",
        "block_size": 16,
        "share_heads": True,
        "vip_indices": [2, 3],
    }
