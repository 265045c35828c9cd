"""The Inside a model page through AppTest: it says n, draws both charts and a verdict from the numbers, and refuses
a corpus slice over the job limit before starting, naming the knob and the largest value that fits."""

from __future__ import annotations

import pytest

PAGE = "pages/11_Inside_a_model.py"
CHEAP = {"passages": "3", "seeds": "1", "layers": "6", "budgets": "1/4", "text": "A short text about attention."}


def test_the_page_says_n_draws_both_charts_and_a_verdict(open_page) -> None:
    at = open_page(PAGE, **CHEAP)
    assert not at.exception, [e.value for e in at.exception]
    captions = " ".join(c.value for c in at.caption)
    assert "n = 8 tokens" in captions  # [CLS] A short text about attention . [SEP]
    assert "3 passages (n = " in captions
    assert len(at.get("plotly_chart")) == 2
    verdicts = [m.value for m in at.markdown if m.value.startswith("**At 1/4 of the budget")]
    assert len(verdicts) == 1 and "(exact: " in verdicts[0], [m.value[:80] for m in at.markdown]


def test_a_slice_over_the_job_limit_is_refused_naming_passages(open_page, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_JOB_SECONDS", "20")
    at = open_page(PAGE, **{**CHEAP, "passages": "192", "methods": "nystrom"})
    assert not at.exception, [e.value for e in at.exception]
    refused = [e.value for e in at.error if "Refused before starting" in e.value]
    assert len(refused) == 1 and "passages: 192 would need" in refused[0], [e.value for e in at.error]
    assert "the largest passages that fits is" in refused[0]
    assert len(at.get("plotly_chart")) == 1  # the layer chart still runs; only the retrieval is refused


def test_the_page_imports_the_model_code_through_the_service_before_it_tokenizes(
    open_page, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page tokenized its text itself, importing transformers in the page's thread while the warm-up imported it
    in another: transformers' lazy module raised "cannot import name 'AutoModel'" on a fresh server's first visit
    (4 of 4 fresh interpreters, with one thread in service.model_code.import_in_steps and one loading the model)."""
    from core import model_swap
    from service import model_code

    calls: list[str] = []
    import_in_steps, encode = model_code.import_in_steps, model_swap.encode
    monkeypatch.setattr(model_code, "import_in_steps", lambda: (calls.append("import"), import_in_steps())[1])
    monkeypatch.setattr(model_swap, "encode", lambda *a, **k: (calls.append("encode"), encode(*a, **k))[1])
    at = open_page(PAGE, **CHEAP)
    assert not at.exception, [e.value for e in at.exception]
    assert "encode" in calls and "import" in calls[: calls.index("encode")], calls
