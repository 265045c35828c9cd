"""Inside a model: a method swapped into the real MiniLM model in place of softmax attention, and what the model's own
output does: the error through the layers, the sentence embedding and a retrieval task with known answers."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import streamlit as st

import service.views
import ui
from core import limits, model_swap
from service import model_code
from ui.figures import model_swap as swap_figs

BUDGETS = ["1/32", "1/16", "1/8", "1/4", "1/2"]
DEFAULT_BUDGETS = ["1/8", "1/4"]
DEFAULT_METHODS = ["performer", "nystrom"]
# Oracles that build the n x n matrix and run SVDs per head (slow, and not something one would swap in), and the
# kernel that trains on each head first.
NOT_OFFERED = ("exact", *model_swap.NOT_SWAPPABLE, "rpca")
# The default slice of the corpus: its retrieval runs in about half a minute cold on the 2-core reference machine.
DEFAULT_PASSAGES = 8
LAYER_NAMES = [str(i + 1) for i in range(model_swap.LAYERS)]
HEAD_NAMES = [str(i + 1) for i in range(model_swap.HEADS)]
PASSAGE_COUNT = len(model_swap.corpus())

ui.page("Inside a model", icon=":material/model_training:")
ui.navigation(st.sidebar)
_, device = ui.device_control(st.sidebar)
first_seed = ui.int_input(
    "Seed",
    "seed",
    0,
    2**31 - 1,
    0,
    where=st.sidebar,
    help="The first seed of the randomised methods: they run with this seed and the next ones (see Seeds).",
)
ui.explain(
    "A method is usually judged by how far its attention matrix is from softmax, one head at a time. Here it is "
    "put back into the pretrained all-MiniLM-L6-v2 model (6 layers × 12 heads) in place of softmax attention, at "
    "the model's own temperature and the chosen budget, with every other weight unchanged. The left chart follows "
    "the error up the layers; the right one puts the method's error on its own beside its error inside the model. "
    "Below, each passage's first half must find its own second half among all second halves by the model's "
    "sentence embedding: a task whose answers are known.",
    r"e_\ell = \frac{\lVert \tilde h_\ell - h_\ell \rVert_F}{\lVert h_\ell \rVert_F},\qquad "
    r"\text{top-}k = \frac{1}{N}\sum_i \mathbb{1}\left[\,i \in \operatorname{top}_k \cos(e(a_i), e(b_j))\,\right]",
)

row = st.columns([2.4, 1.4, 1.6])
methods = ui.method_picker("Methods swapped in", "methods", DEFAULT_METHODS, where=row[0], exclude=NOT_OFFERED)
budgets = ui.multiselect(
    "Budgets (fraction of the n² scores)",
    "budgets",
    BUDGETS,
    DEFAULT_BUDGETS,
    where=row[1],
    help="Every method gets the same budget: its knobs are set so that it stores about this fraction of full "
    "attention's n² scores at each input's n. The layer chart uses the first (smallest) budget.",
)
layer_names = ui.multiselect(
    "Layers swapped",
    "layers",
    LAYER_NAMES,
    LAYER_NAMES,
    where=row[2],
    help="The method replaces softmax in these layers; the others keep exact attention.",
)
row = st.columns([2.4, 1, 1, 1.6])
head_names = ui.multiselect(
    "Heads swapped in each chosen layer",
    "heads",
    HEAD_NAMES,
    HEAD_NAMES,
    where=row[0],
    help="All 12 by default; the others keep exact attention.",
)
seeds = ui.int_slider(
    "Seeds",
    "seeds",
    1,
    5,
    2,
    where=row[1],
    help="Randomised methods (random features, hashes, sampled landmarks) run once per seed: the band and the "
    "error bars span the seeds.",
)
passages = ui.int_slider(
    "Passages",
    "passages",
    2,
    PASSAGE_COUNT,
    DEFAULT_PASSAGES,
    where=row[2],
    help=f"The first passages of the shipped corpus ({PASSAGE_COUNT} passages of the Python Language Reference, "
    "200-500 tokens each). The retrieval task's candidates are their second halves. The default is small so that "
    "it runs within the job limits on a 2-core server.",
)
text = ui.text_area(
    "Text for the layer chart",
    "text",
    model_swap.long_text(),
    where=row[3],
    max_chars=4000,
    height=100,
    help="Up to 512 tokens are used. The default is long (493 tokens) so that the budgets mean something.",
)

fractions = sorted(float(Fraction(b)) for b in budgets)
layers = tuple(sorted(int(name) - 1 for name in layer_names))
heads = None if len(head_names) == model_swap.HEADS else tuple(sorted(int(name) - 1 for name in head_names))
head_count = model_swap.HEADS if heads is None else len(heads)
labels = {m: ui.method_label(m) for m in methods}
colours = {m: ui.method_colour(m) for m in methods}

if not methods or not fractions or not layers:
    st.info("Pick at least one method, one budget and one layer.")
    ui.finish()
    st.stop()

model_code.import_in_steps()  # the tokenizer's code, imported by one thread at a time (the warm-up may be at it)
n = len(model_swap.encode(text))
st.caption(
    f"The layer chart's text: **n = {n} tokens** (d = 32 per head); budget {ui.fmt_fraction(fractions[0])} of n² "
    f"in layer(s) {', '.join(LAYER_NAMES[i] for i in layers)}, {head_count} head(s) each; "
    "temperature: the model's own (τ = 1)."
)


def layer_estimate(seed_count: int) -> limits.Estimate:
    return model_swap.layer_errors_estimate(n, methods, fractions[0], len(layers), head_count, seed_count)


verdict_rows: list[dict] = []
if ui.within_limits(lambda: limits.check("seeds", seeds, range(1, seeds + 1), layer_estimate)):
    view = service.views.SwapLayerErrors(
        text, tuple(methods), fractions[0], layers, heads, int(seeds), int(first_seed), str(device)
    )
    try:
        verdict_rows = service.views.run(
            view, layer_estimate(seeds).seconds, title="Running the model with each method"
        )
    except (ValueError, RuntimeError) as exc:
        st.error(f"The model could not run with these settings: {exc}")
    if verdict_rows:
        ui.show_figure(
            swap_figs.layer_error_figure(verdict_rows, labels, colours),
            "inside_a_model_layers",
            data=pd.DataFrame(verdict_rows),
            caption=f"n = {n} tokens. Left: relative error of each layer's output against the exact model "
            "(zero below the first swapped layer, so not drawn there). Right, in the swapped layers: the method "
            "alone on the exact model's q, k, v (dotted: attention map; dashed: attention output) and its attention "
            "output inside the model (solid), which also carries the errors of the layers below. Randomised "
            "methods: mean over seeds, band from lowest to highest.",
        )

corpus_tokens = [len(model_swap.tokenizer()(p)["input_ids"]) for p in model_swap.corpus()[:passages]]


def retrieval_estimate(count: int, seed_count: int) -> limits.Estimate:
    return model_swap.retrieval_estimate(corpus_tokens[:count], methods, fractions, len(layers), head_count, seed_count)


retrieval_rows: list[dict] = []
if ui.within_limits(
    lambda: limits.check_knobs(
        [
            ("passages", passages, range(2, passages + 1), lambda p: retrieval_estimate(p, seeds)),
            ("seeds", seeds, range(1, seeds + 1), lambda s: retrieval_estimate(passages, s)),
        ]
    )
):
    view = service.views.SwapRetrieval(
        passages, tuple(methods), tuple(fractions), layers, heads, int(seeds), int(first_seed), str(device)
    )
    try:
        retrieval_rows = service.views.run(
            view, retrieval_estimate(passages, seeds).seconds, title="Embedding every half with each method"
        )
    except (ValueError, RuntimeError) as exc:
        st.error(f"The retrieval could not run with these settings: {exc}")
    if retrieval_rows:
        if verdict_rows:
            st.markdown("**" + model_swap.verdict(verdict_rows, retrieval_rows, fractions[0]) + "**")
        # One tile per method: the sentence embedding's cosine to the exact model's at the smallest budget (seed mean).
        st.caption(f"Sentence-embedding cosine to the exact model's, at {ui.fmt_fraction(fractions[0])} of the budget")
        tiles = st.columns(len(methods))
        for tile, method in zip(tiles, methods, strict=True):
            cosines = [r["cosine"] for r in retrieval_rows if r["method"] == method and r["fraction"] == fractions[0]]
            if cosines:
                tile.metric(labels[method], f"{sum(cosines) / len(cosines):.3f}")
        table = pd.DataFrame(retrieval_rows)
        ui.show_figure(
            swap_figs.retrieval_figure(retrieval_rows, labels, colours),
            "inside_a_model_retrieval",
            data=table,
            caption=f"{passages} passages (n = {min(corpus_tokens) // 2}-{max(corpus_tokens) // 2 + 1} tokens per "
            f"half): each first half ranks all {passages} second halves by cosine; top-1 and top-5 count how often "
            "its own is first or among the first five; the last panel counts how often its nearest is the exact "
            "model's nearest. Dashed: the exact model. The table of benchmarks/results/model_swap.md runs the same "
            "task on 64 passages.",
        )
        with ui.on_demand("Numbers behind the charts", "numbers_swap") as open_:
            if open_:
                st.dataframe(table, hide_index=True, width="stretch")
                if verdict_rows:
                    st.dataframe(pd.DataFrame(verdict_rows), hide_index=True, width="stretch")

ui.finish()
