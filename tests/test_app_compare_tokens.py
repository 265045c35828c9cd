"""Compare on the real input: choose query tokens and see each method's row errors on them (bertviz #125)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core import token_rows
from core.errors import ParameterError


def test_row_errors_of_a_hand_made_head() -> None:
    exact = torch.tensor([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.25, 0.25, 0.5]])
    approx = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.25, 0.25, 0.5]])
    out = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    approx_out = torch.tensor([[1.0, 1.0], [0.0, 2.0], [1.0, 1.0]])
    errors = token_rows.row_errors(exact, approx, out, approx_out)
    assert errors["row_l1"] == pytest.approx([1.0, 0.0, 0.0])
    # 0.5 ln(0.5 / 1) + 0.5 ln(0.5 / 1e-12): exact's mass where approx has none costs ln(1 / floor)
    assert errors["row_kl"][0] == pytest.approx(0.5 * np.log(0.5) + 0.5 * (np.log(0.5) - np.log(1e-12)))
    assert errors["row_kl"][1:] == pytest.approx([0.0, 0.0])
    assert errors["row_output_error"] == pytest.approx([1.0, 0.0, 0.0])
    summary = token_rows.summarise_rows(errors, [0, 1])
    assert summary["row_l1_mean"] == pytest.approx(0.5) and summary["row_l1_sum"] == pytest.approx(1.0)
    with pytest.raises(ParameterError, match="rows"):
        token_rows.summarise_rows(errors, [3])
    with pytest.raises(ParameterError, match="rows"):
        token_rows.summarise_rows(errors, [])


def test_compare_shows_the_row_errors_of_the_chosen_tokens(open_page: Callable[..., AppTest]) -> None:
    at = open_page("pages/1_Compare.py", timeout=300, input="real", methods=["topk", "performer"], head="3")
    assert not at.exception, [e.value for e in at.exception]
    assert not any("Query tokens" == m.label for m in at.multiselect)  # not computed until opened
    at.session_state["open_token_rows"] = True
    at.run(timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    picker = next(m for m in at.multiselect if m.label == "Query tokens")
    picker.set_value(picker.options[1:4]).run(timeout=300)
    frame = next(df.value for df in at.dataframe if "row_l1_mean" in df.value.columns)
    assert list(frame["method"]) == ["Top-k (sparse oracle)", "Performer (FAVOR+)"]
    assert (frame["row_l1_mean"] > 0).all()
    assert np.allclose(frame["row_l1_sum"], 3 * frame["row_l1_mean"], atol=1e-3)
