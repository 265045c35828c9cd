"""The Home page's preset links, as data, with what each one teaches (tests/test_teaching_defaults.py pins it).

Every preset starts from the shared sidebar defaults (service/fields.py's DEFAULTS) and names only what it changes.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

# Page defaults beside the shared sidebar defaults (the pages import them from here; the tests pin what they show),
# declared with the shared fields in service/fields.py, which imports no Streamlit.
from service.fields import (
    COMPARE_METHODS,
    COMPARE_REDRAWS,
    EVE_METHODS,
    EVE_POINTS,
    EVE_REDRAWS,
    EVE_TAUS,
    MAX_REDRAWS,
)

__all__ = [
    "COMPARE_METHODS",
    "COMPARE_REDRAWS",
    "EVE_METHODS",
    "EVE_POINTS",
    "EVE_REDRAWS",
    "EVE_TAUS",
    "MAX_REDRAWS",
    "METHODS",
    "PRESETS",
    "Preset",
]


@dataclass(frozen=True)
class Preset:
    title: str
    page: str  # URL path of the page
    query: str  # what the link sets on top of the shared defaults
    text: str
    # The registry family that must have the lowest error among the link's methods (None: nothing to pin).
    winner_family: str | None = None
    # What the view shows, checked against the page's own tiles (ui/step_claims.py: "lsh < performer"); or why not.
    claims: tuple[str, ...] = ()
    no_claim: str = ""

    def params(self) -> dict[str, list[str]]:
        return urllib.parse.parse_qs(self.query)


METHODS = "methods=performer&methods=lsh&methods=scatterbrain"

PRESETS = [
    Preset(
        "Low temperature: sparse wins",
        "Compare",
        f"tau=0.05&{METHODS}",
        "Rows are peaked on the few keys of the same cluster. LSH finds them; random features smear them out.",
        "sparse",
        claims=("lsh < performer",),
    ),
    Preset(
        "High temperature: low rank wins",
        "Compare",
        f"tau=1&{METHODS}",
        "Rows are nearly flat. A few random features describe them well; a sparse pattern misses most of the mass.",
        "low-rank",
        claims=("performer < lsh",),
    ),
    Preset(
        "The middle: sparse + low rank wins",
        "Compare",
        f"tau=0.2&{METHODS}",
        "Rows have a peak inside the cluster and a broad background. Scatterbrain keeps the peak exactly and "
        "estimates the background, beating both parts alone.",
        "sparse+low-rank",
        claims=("scatterbrain < lsh", "scatterbrain < performer"),
    ),
    Preset(
        "A real MiniLM head",
        "Compare",
        f"input=real&layer=2&head=3&{METHODS}&methods=nystrom",
        "The pretrained all-MiniLM-L6-v2 model on a paragraph of text, at the model's own temperature τ = 1 "
        "and a 1/2 budget (the text is short, so smaller budgets leave each method only a few features).",
        no_claim="It says which input and budget the view uses, not who wins: it claims no number.",
    ),
    Preset(
        "Under a decoder's causal mask",
        "Compare",
        f"tau=0.2&causal=true&{METHODS}&methods=nystrom",
        "Query i sees only keys j ≤ i. Each method runs its own causal form: LSH masks inside its chunks and so keeps "
        "about half its keys, and its error rises; Scatterbrain's prefix-sum low-rank part still covers the past keys "
        "its buckets miss. Nyström refuses: its landmarks mix past and future.",
        claims=("scatterbrain < lsh",),
    ),
    Preset(
        "Routing vs hashing: MoBA and NSA beside LSH",
        "Compare",
        "tau=0.05&methods=lsh&methods=moba&methods=nsa",
        "MoBA and NSA route each query to key blocks by the block's mean key. Here cluster members sit at random "
        "positions, so every block mixes clusters and LSH, which hashes each token wherever it is, wins; the "
        "routing lesson shows where routing wins (real heads) and what a kernel pays for (tiles).",
        "sparse",
        claims=("lsh < moba", "lsh < nsa"),
    ),
    Preset(
        "Scatterbrain's split, step by step",
        "Sparse_plus_low_rank",
        "tau=2",  # where the correction matters (at 0.2 the naive sum is within 2 % of Scatterbrain)
        "The hash buckets, the sparse correction, the low-rank part, and why adding them naively double-counts.",
        claims=("Naive sum on Ω before normalising > 1.5", "Naive-sum error > 1.5 × Scatterbrain error"),
    ),
    Preset(
        "Error vs entropy sweep",
        "Error_vs_entropy",
        "",
        "Sweep the temperature and watch the sparse and low-rank curves cross (the paper's Fig. 1).",
        claims=("scatterbrain < lsh", "scatterbrain < performer"),
    ),
    Preset(
        "Who wins where: the (β, σ) map",
        "Regime_map",
        "",
        "The winner over inverse temperature and cluster spread, with Theorem 1's regimes.",
        claims=("cells won by sparse > 0", "cells won by low rank > 0", "cells won by sparse + low rank > 0"),
    ),
    Preset(
        "Swapped into a real model",
        "Inside_a_model",
        "passages=4&seeds=1",  # the lesson's cheap slice: the page's default slice is twice the work
        "Performer and Nyström in place of softmax in all six layers of MiniLM: the error through the layers, alone "
        "and inside the model, and what it does to a retrieval task with known answers.",
        claims=("performer < nystrom",),  # the tiles: sentence-embedding cosine to the exact model's
    ),
]
