"""The Inside a model page's pure parts: the verdict sentence from hand-made numbers, and the two figures."""

from __future__ import annotations

from typing import Any

from core import model_swap
from ui.figures import model_swap as figs

LABELS = {"performer": "Performer", "nystrom": "Nyström"}
COLOURS = {"performer": "#0072B2", "nystrom": "#E69F00"}


def layer_rows(method: str, own: float, seeds: int = 1) -> list[dict[str, Any]]:
    return [
        {
            "method": method,
            "fraction": 0.125,
            "seed": seed,
            "layer": layer,
            "swapped": True,
            "own_map_error": own * (1 + 0.1 * seed),
            "own_output_error": own / 2,
            "inside_attention_error": own / 2 + 0.01 * layer,
            "hidden_error": 0.05 * (layer + 1) * (1 + 0.1 * seed),
            "embedding_cosine": 0.9,
            "n": 400,
        }
        for seed in range(seeds)
        for layer in range(model_swap.LAYERS)
    ]


def retrieval_rows(top1: dict[str, float]) -> list[dict[str, Any]]:
    rows = [
        {"method": "exact", "fraction": 1.0, "seed": 0, "top1": 0.80, "top5": 1.0, "cosine": 1.0, "agree_top1": 1.0}
    ]
    for method, value in top1.items():
        for fraction in (0.125, 0.25):
            rows.append(
                {
                    "method": method,
                    "fraction": fraction,
                    "seed": 0,
                    "top1": value,
                    "top5": 1.0,
                    "cosine": 0.9,
                    "agree_top1": 0.5,
                }
            )
    return rows


def test_the_verdict_says_a_larger_error_alone_costs_the_same_inside() -> None:
    rows = layer_rows("performer", 0.6) + layer_rows("nystrom", 0.2)
    sentence = model_swap.verdict(rows, retrieval_rows({"performer": 0.78, "nystrom": 0.78}), 0.125)
    assert "Performer (FAVOR+)'s attention-map error on its own is 3.0×" in sentence
    assert "yet top-1 retrieval drops 2 points for both" in sentence
    assert "(exact: 80%)" in sentence and "At 1/8 of the budget" in sentence


def test_the_verdict_names_each_drop_when_they_differ() -> None:
    rows = layer_rows("performer", 0.6) + layer_rows("nystrom", 0.2)
    sentence = model_swap.verdict(rows, retrieval_rows({"performer": 0.40, "nystrom": 0.70}), 0.125)
    assert "and top-1 retrieval drops 40 points for Performer (FAVOR+) and drops 10 points for" in sentence


def test_the_verdict_of_one_method_gives_its_errors_and_its_drop() -> None:
    sentence = model_swap.verdict(layer_rows("nystrom", 0.2), retrieval_rows({"nystrom": 0.80}), 0.125)
    assert "map is 20% off on its own" in sentence and "last layer's output is 30% off" in sentence
    assert "stays where it was" in sentence


def test_the_layer_figure_draws_a_band_for_seeds_and_each_layer_once() -> None:
    fig = figs.layer_error_figure(layer_rows("performer", 0.6, seeds=3) + layer_rows("nystrom", 0.2), LABELS, COLOURS)
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names == ["Performer", "Nyström"]
    bands = [t for t in fig.data if t.fill == "toself"]
    assert len(bands) == 1  # only the randomised method with 3 seeds has a band
    line = next(t for t in fig.data if t.name == "Performer")
    assert list(line.x) == [1, 2, 3, 4, 5, 6]
    assert abs(line.y[0] - 0.05 * 1.1) < 1e-12  # mean over seeds 0..2: factors 1, 1.1, 1.2
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis2.type == "log"


def test_the_retrieval_figure_puts_the_exact_model_in_each_of_its_four_panels() -> None:
    fig = figs.retrieval_figure(retrieval_rows({"performer": 0.5, "nystrom": 0.7}), LABELS, COLOURS)
    exact = [t for t in fig.data if t.legendgroup == "exact"]
    assert len(exact) == 4 and all(t.line.dash == "dash" for t in exact)
    performer = [t for t in fig.data if t.name == "Performer"]
    assert len(performer) == 4 and list(performer[0].x) == [0.125, 0.25]
    assert list(fig.layout.xaxis.ticktext) == ["1/8", "1/4"]
