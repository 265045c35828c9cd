"""A method swapped into the real model (core.model_swap): exact everywhere is the model itself, a swap changes only
its layer and those after it, retrieval scores on known embeddings, the corpus, refusals and cancellation."""

from __future__ import annotations

import pytest
import torch

from core import cancel, limits, model_swap
from core.errors import ParameterError

TEXT = (
    "Attention weighs every token of a sentence against every other one; an approximation keeps a budget of those "
    "weights, and the model built on top of it has to live with what is left out."
)


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return model_swap.encode(TEXT)


@pytest.fixture(scope="module")
def exact_run(ids: torch.Tensor) -> model_swap.ForwardRun:
    return model_swap.forward(ids, model_swap.Swap("exact"))


@pytest.fixture(scope="module")
def unswapped(ids: torch.Tensor) -> model_swap.ForwardRun:
    """The model with nothing swapped (softmax attention in every layer): the baseline each swap is compared with."""
    return model_swap.forward(ids)


def test_exact_in_every_layer_is_the_model_itself(ids: torch.Tensor, exact_run: model_swap.ForwardRun) -> None:
    _, model = model_swap._model_on("cpu")
    with torch.no_grad():
        own = model(input_ids=ids[None], output_hidden_states=True)
    # Swap("exact") runs the registry's exact method in all six layers.
    assert exact_run.hidden[-1].shape == own.last_hidden_state[0].shape
    for layer in range(model_swap.LAYERS):
        mine, theirs = exact_run.hidden[layer], own.hidden_states[layer + 1][0]
        # float32 rounding: the two paths sum in different orders (measured 3e-6 on outputs of size ~5)
        assert torch.allclose(mine, theirs, rtol=0, atol=2e-5), (layer, float((mine - theirs).abs().max()))
    pooled = own.last_hidden_state[0].mean(0)
    assert torch.allclose(exact_run.embedding, pooled / pooled.norm(), atol=1e-6)


def test_a_method_in_one_layer_changes_that_layer_and_those_after_only(
    ids: torch.Tensor, unswapped: model_swap.ForwardRun
) -> None:
    run = model_swap.forward(ids, model_swap.Swap("nystrom", layers=(3,), fraction=1 / 8))
    for layer in range(3):
        assert torch.equal(run.hidden[layer], unswapped.hidden[layer]), layer
        assert torch.equal(run.context[layer], unswapped.context[layer]), layer
    for layer in range(3, model_swap.LAYERS):
        change = model_swap._relative(run.hidden[layer], unswapped.hidden[layer])
        assert change > 1e-3, (layer, change)
    assert float(run.embedding @ unswapped.embedding) < 1 - 1e-4


def test_chosen_heads_only_are_replaced(ids: torch.Tensor, unswapped: model_swap.ForwardRun) -> None:
    run = model_swap.forward(ids, model_swap.Swap("local", layers=(1,), heads=(2, 5), fraction=1 / 8))
    changed = [h for h in range(model_swap.HEADS) if not torch.equal(run.context[1][h], unswapped.context[1][h])]
    assert changed == [2, 5]


def test_layer_errors_are_zero_below_the_swap_and_own_errors_only_where_swapped(ids: torch.Tensor) -> None:
    rows = model_swap.layer_errors(ids, [model_swap.Swap("performer", layers=(2,), fraction=1 / 8, seed=1)])
    assert [r["layer"] for r in rows] == list(range(model_swap.LAYERS))
    for r in rows:
        if r["layer"] < 2:
            assert r["hidden_error"] == 0 and r["inside_attention_error"] == 0
        else:
            assert r["hidden_error"] > 0
        assert (r["own_map_error"] == r["own_map_error"]) == (r["layer"] == 2)  # nan except where swapped
    swapped = rows[2]
    # In the layer it enters, the method sees exactly the inputs it would see alone.
    assert swapped["inside_attention_error"] == pytest.approx(swapped["own_output_error"], rel=1e-5)


def test_retrieval_scores_on_known_embeddings() -> None:
    eye = torch.eye(6)
    exact = model_swap.retrieval_scores(eye, eye, eye, eye)
    assert (exact.top1, exact.top5, exact.cosine, exact.agree_top1, exact.agree_top5) == (1, 1, 1, 1, 1)
    # Documents rolled by one: every query's nearest is another passage's second half, and not the exact model's.
    rolled = torch.roll(eye, 1, dims=0)
    scores = model_swap.retrieval_scores(eye, rolled, eye, eye)
    assert scores.top1 == 0
    assert scores.agree_top1 == 0
    assert scores.cosine == pytest.approx(0.5)  # queries agree with exact (1), documents are orthogonal to it (0)


def test_retrieval_on_a_slice_of_the_corpus_puts_exact_first() -> None:
    passages = model_swap.corpus()[:3]
    rows = model_swap.retrieval(passages, ["local"], [1 / 4], layers=(5,))
    assert [r["method"] for r in rows] == ["exact", "local"]
    assert rows[0]["cosine"] == pytest.approx(1.0) and rows[0]["agree_top1"] == 1.0
    assert 0 < rows[1]["cosine"] < 1


def test_the_corpus_ships_about_200_passages_of_200_to_500_tokens() -> None:
    passages = model_swap.corpus()
    assert 180 <= len(passages) <= 220
    lengths = [len(model_swap.tokenizer()(p, add_special_tokens=False)["input_ids"]) for p in passages]
    assert min(lengths) >= 200 and max(lengths) <= 500


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"method": "learned_kernel"}, "method"),
        ({"method": "no_such_method"}, "method"),
        ({"method": "performer", "layers": (6,)}, "layers"),
        ({"method": "performer", "heads": (12,)}, "heads"),
        ({"method": "performer", "heads": ()}, "heads"),
        ({"method": "performer", "fraction": 0}, "fraction"),
    ],
)
def test_bad_swaps_name_the_parameter(kwargs: dict, param: str) -> None:
    with pytest.raises(ParameterError) as err:
        model_swap.Swap(**kwargs)
    assert err.value.parameter == param


def test_a_cancelled_job_stops_the_forward_pass(ids: torch.Tensor) -> None:
    token = cancel.CancelToken()
    token.cancel("tab closed")
    with cancel.active(token), pytest.raises(cancel.Cancelled):
        model_swap.forward(ids, model_swap.Swap("performer"))


def test_the_retrieval_estimate_grows_with_the_work_and_the_check_names_the_knob(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    few = model_swap.retrieval_estimate([300] * 8, ["performer"], [1 / 8], 6, 12, 1)
    more = model_swap.retrieval_estimate([300] * 16, ["performer"], [1 / 8], 6, 12, 1)
    seeds = model_swap.retrieval_estimate([300] * 8, ["performer"], [1 / 8], 6, 12, 3)
    assert more.seconds > 1.9 * few.seconds and seeds.seconds > few.seconds
    monkeypatch.setenv(limits.SECONDS_ENV, str(few.seconds * 1.01))
    with pytest.raises(ParameterError) as err:
        limits.check(
            "passages",
            16,
            range(2, 17),
            lambda count: model_swap.retrieval_estimate([300] * count, ["performer"], [1 / 8], 6, 12, 1),
        )
    assert err.value.parameter == "passages" and "the largest passages that fits is 8" in str(err.value)
