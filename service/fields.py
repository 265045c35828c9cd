"""The shared settings' fields, declared once: kinds, ranges, defaults and formats; and the pages' own defaults beside
them. The sidebar draws its controls from them, the URL parser checks a link against them, and ``Settings`` holds
their values. Plain data: here in the service (no Streamlit) so that a bare host, the GPU check
(``benchmarks/gpu.py``) above all, reads the defaults without importing the ``ui`` package, whose ``__init__`` loads
Streamlit; ``ui.fields`` and ``ui.presets`` re-export them for the pages."""

from __future__ import annotations

from typing import Any

import core

SOURCES = ("clustered", "gaussian", "real", "upload")
SOURCE_LABELS = {
    "clustered": "Clustered (Scatterbrain Process 1)",
    "gaussian": "Gaussian (independent q, k)",
    "real": "Real model (MiniLM on a text)",
    "upload": "Your own heads (an uploaded file)",
}
MAX_N = 4096  # the dense views build n x n matrices
MAX_HEADS = 16
# heads * n^2 above this is refused (each dense n x n view per method is kept in memory and sent to the views).
MAX_DENSE_ELEMENTS = 2**25
# Log-spaced temperatures: 1, 1.5, 2, 3, 5, 7 per decade.
TAU_OPTIONS = sorted({round(m * 10.0**e, 6) for e in range(-2, 2) for m in (1, 1.5, 2, 3, 5, 7)} | {100.0})
BUDGET_OPTIONS = (1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2)
DEVICES = ("auto", "cpu", "cuda", "cpu@worker", "cuda@worker")  # X@worker: X on a cluster worker
REAL_LAYERS, REAL_HEADS, REAL_D = 6, 12, 32

# The real model: τ = 1 is the model's own attention (q is pre-scaled), and its short texts (n = 51 tokens for
# the default one) leave a 1/8 budget only about 3 random features per method; 1/2 is the largest budget.
# Applied when the input is the real model, unless the page overrides the key or the link sets it.
REAL_DEFAULTS: dict[str, Any] = {"tau": 1.0, "budget": 1 / 2}
REAL_NOTE = (
    "Real model: τ starts at 1, the model's own temperature (its queries are already scaled), and the budget "
    "at 1/2, because a short text has few tokens and a smaller budget leaves each method only a few features. "
    "Move either slider to change them."
)
# An upload's q is divided by sqrt(d) (core.uploads.load), so τ = 1 is the model's own attention, as for MiniLM.
UPLOAD_DEFAULTS: dict[str, Any] = {"tau": 1.0}


def max_heads(n: int) -> int:
    """The most heads of n x n attention the dense views may hold (heads * n^2 <= MAX_DENSE_ELEMENTS)."""
    return max(1, min(MAX_HEADS, MAX_DENSE_ELEMENTS // (n * n)))


# The shared input fields, declared once: their kinds, ranges and defaults. The sidebar draws its controls with
# these ranges (a page may narrow one, e.g. n up to 1024), the URL parser checks a link's values against them, and
# DEFAULTS comes from them. Bounds that depend on the input take (n, d). Defaults chosen so that the default views
# show what the pages say (tests/test_teaching_defaults.py pins them): with 32 tight clusters (σ = 0.1, as in the
# Scatterbrain paper's Process 1 experiments) at n = 512 and a 1/8 budget, τ = 0.05 is won by sparse (LSH),
# τ = 0.2 by sparse + low rank (Scatterbrain), τ = 1 by low rank.
SHARED_FIELDS: dict[str, core.ParamSpec] = {
    spec.name: spec
    for spec in (
        core.ParamSpec("input", "choice", "clustered", "What q, k, v come from.", choices=SOURCES),
        core.ParamSpec("n", "int", 512, "Tokens (rows of the attention matrix).", low=16, high=MAX_N),
        core.ParamSpec("d", "int", 64, "Head dimension.", low=2, high=256),
        core.ParamSpec("heads", "int", 4, "Independent draws of q, k, v.", low=1, high=lambda n, d: max_heads(n)),
        core.ParamSpec("tau", "float", 0.2, "Temperature: logits = q·k / τ.", grid=tuple(TAU_OPTIONS), log=True),
        core.ParamSpec("spread", "float", 0.1, "Cluster spread σ.", low=0.0, high=2.0),
        core.ParamSpec("clusters", "int", 32, "Cluster centres.", low=1, high=lambda n, d: min(n, 256)),
        core.ParamSpec("seed", "int", 0, "Every random draw.", low=0, high=2**31 - 1),
        core.ParamSpec("device", "choice", "auto", "Where the engine runs.", choices=DEVICES),
        core.ParamSpec("budget", "float", 1 / 8, "Memory budget.", grid=BUDGET_OPTIONS, log=True),
        core.ParamSpec("causal", "bool", False, "Causal (decoder) mask: query i sees keys j <= i."),
        core.ParamSpec("layer", "int", 0, "The real model's layer.", low=0, high=REAL_LAYERS - 1),
        core.ParamSpec("upload", "text", "", "The uploaded file's sha256.", high=64),
        core.ParamSpec("head", "int", 0, "The head shown.", low=0, high=MAX_HEADS - 1),
        # Display only: clustered input is drawn in cluster order, so the clusters show as blocks at first glance.
        core.ParamSpec("sort_clusters", "bool", True, "Draw positions sorted by cluster."),
    )
}
# The one set of defaults every page starts from (a page may override some with ``sidebar(defaults=...)``).
DEFAULTS: dict[str, Any] = {name: spec.default for name, spec in SHARED_FIELDS.items()}


def field_range(name: str, n: int = 0, d: int = 0) -> tuple[Any, Any]:
    """The allowed (low, high) of a shared field at input size (n, d)."""
    return SHARED_FIELDS[name].bounds(n, d)


def fmt_fraction(x: float) -> str:
    return f"1/{round(1 / x)}" if x < 1 else "1"


def fmt_tau(x: float) -> str:
    return f"{x:g}"


SHARED_KEYS = (
    "input",
    "n",
    "d",
    "heads",
    "tau",
    "clusters",
    "spread",
    "seed",
    "device",
    "budget",
    "causal",
    "text",
    "layer",
    "upload",
    "head",
    "sort_clusters",
)

# Page defaults beside the shared sidebar defaults (the pages import them from ui.presets; the tests pin what they
# show).
COMPARE_METHODS = ["performer", "lsh", "scatterbrain", "nystrom"]
EVE_METHODS = ["lsh", "performer", "scatterbrain"]
EVE_TAUS = (0.03, 3.0)
EVE_POINTS = 12
EVE_REDRAWS = 3  # draws of each randomised method: the band around its curve
COMPARE_REDRAWS = 3  # and the ± under its tile on Compare
MAX_REDRAWS = 10
