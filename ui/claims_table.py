"""The Paper claims page's table: one row per claim with what was measured, its verdict and a link to the view that
shows it. The measurements come from ``core.claims``; the links to the app's pages live here, not in core."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from core import claims
from ui.url_params import keep_presenter

SB_LINK = "Sparse_plus_low_rank?n=512&d=64&clusters=32&spread=0.3"
EVE_LINK = "Error_vs_entropy?n=1024&d=64&clusters=64&spread=0.3&budget=1/32&oracles=true&taus=0.03&taus=1"

# Each claim's view: the page path and URL query that show it.
VIEW_LINKS: dict[str, str] = {
    "scatterbrain-1": SB_LINK,
    "scatterbrain-2": SB_LINK,
    "scatterbrain-3": SB_LINK,
    "scatterbrain-4": "Compare?n=512&d=64&clusters=32&spread=0.3&methods=performer&methods=scatterbrain",
    "scatterbrain-5": SB_LINK,
    "scatterbrain-6": SB_LINK,
    "scatterbrain-9": SB_LINK,
    "scatterbrain-10": "Sparse_plus_low_rank?f4_d=16&f4_m=44",
    "scatterbrain-11": EVE_LINK,
    "scatterbrain-12": EVE_LINK,
    "scatterbrain-13": EVE_LINK,
    "scatterbrain-13b": EVE_LINK.replace("clusters=64", "clusters=32"),
    "scatterbrain-13c": EVE_LINK,
    # Fits the default 60 s job limit (the oracles include robust PCA); 8 per cluster, as in the claim.
    "scatterbrain-14": "Regime_map?n=96&clusters=12&family=oracles&seeds=1",
    "scatterbrain-15": "Regime_map?n=512&clusters=32",
    "scatterbrain-16": EVE_LINK,
    "scatterbrain-18": "Error_vs_entropy?n=1024&d=64&clusters=32&spread=0.1&methods=performer&methods=lsh"
    "&methods=scatterbrain",
    "scatterbrain-budget": "Error_vs_entropy?n=1024&d=64&clusters=32&spread=0.3&methods=performer&methods=lsh"
    "&methods=scatterbrain",
    "vcc-7": "VCC?n=512&clusters=16",
    "vcc-8": "VCC?n=512&clusters=16&tau=100",
    "vcc-9": "VCC?n=512&clusters=16",
    "vcc-11": "VCC?n=512&clusters=16",
    "vcc-14": "VCC?n=512&clusters=16",
    "vcc-15": "VCC?n=512&clusters=16&selector=random",
    "vcc-16": "VCC?n=512&clusters=16",
    "vcc-18": "VCC?n=512&clusters=16",
    "kernels-E1": "Kernels?draws=5000&length=0.5",
    "kernels-E3": "Kernels?draws=5000&length=0.5",
    "kernels-E4": "Kernels?n=512",
    "kernels-E5": "Kernels?n=512",
    "kernels-E7": "Kernels?n=512",
    "kernels-E8": "Kernels?draws=5000&length=0.5",
    "kernels-E12": "Kernels?n=512",
    "kernels-E13": "Kernels?n=512",
    "rank-vs-heads-1": "Rank_vs_heads",
    "rank-vs-heads-3": "Rank_vs_heads?target=nearest",
    "rank-vs-heads-5": "Rank_vs_heads",
    "rank-vs-heads-6": "Rank_vs_heads",
    "rank-vs-heads-7": "Rank_vs_heads?cpoints=16",
    "rank-vs-heads-15": "Rank_vs_heads",
    "moba-sparsity": "Block_sparsity?n=1024&methods=moba&methods=lsh",
}

MEASURED_COLUMNS = ["measured now (clustered)", "measured now (real MiniLM heads)"]
SHOWN_COLUMNS = ["claim", *MEASURED_COLUMNS, "threshold", "verdict", "view"]  # the CSV has every column
VERDICT_COLOURS = {
    claims.HOLDS: "background-color: rgba(46, 160, 67, 0.25)",
    claims.REGIME: "background-color: rgba(210, 153, 34, 0.30)",
    claims.FAILS: "background-color: rgba(218, 54, 51, 0.28)",
}

# A slow claim left out of this run (the page's toggle).
NOT_RUN = {"value": None, "verdict": "not run", "detail": "slow: turn on the slow claims"}


def view_link(claim: claims.Claim) -> str:
    """The page path and URL query of the view that shows ``claim``."""
    return VIEW_LINKS[claim.id]


def fmt_cell(got: dict[str, Any] | None) -> str:
    """A measured value with its verdict, e.g. "0.012 (holds)"; "–" where the input does not apply. A value from
    the committed table says so."""
    if got is None:
        return "–"
    value = "–" if got["value"] is None else claims.fmt_value(claims.Measurement(got["value"], "", ""))
    return f"{value} ({got['verdict']}{', committed' if got.get('committed') else ''})"


def link_with_seed(link: str, seed: int) -> str:
    """A claim's view link, carrying the seed when it is not the default 0."""
    return link + (("&" if "?" in link else "?") + f"seed={seed}" if seed else "")


def page_rows(
    selected: Sequence[claims.Claim], found: dict[str, dict[str, Any]], with_real: bool, seed: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """The page's table, one row per claim (claims missing from ``found`` are "not run"), and the ids of claims
    that hold on the clustered model but not on the real heads."""
    rows: list[dict[str, Any]] = []
    failing_real: list[str] = []
    for claim in selected:
        got = {w: found.get(claims.result_key(claim.id, w), NOT_RUN) for w in claims.inputs_for(claim, with_real)}
        verdicts = [g["verdict"] for g in got.values() if g["verdict"] in claims.VERDICTS]
        verdict = claims.combine(verdicts) if verdicts else got["clustered"]["verdict"]
        real = got.get("real")
        if real is not None and real["verdict"] != claims.HOLDS and got["clustered"]["verdict"] == claims.HOLDS:
            failing_real.append(claim.id)
        rows.append(
            {
                "paper": claim.paper,
                "claim": f"{claim.id}: {claim.statement}",
                "measured now (clustered)": fmt_cell(got["clustered"]),
                "measured now (real MiniLM heads)": fmt_cell(real),
                "threshold": claim.threshold,
                "verdict": verdict,
                "view": link_with_seed(view_link(claim), seed),
                "how it was measured": " | ".join(f"{w}: {g['detail']}" for w, g in got.items()),
            }
        )
    return rows, failing_real


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The columns the page shows, each view as a Markdown link (a static table renders it)."""
    shown = table[[c for c in SHOWN_COLUMNS if c in table.columns]].copy()
    if "view" in shown:
        shown["view"] = [f"[open]({keep_presenter(link)})" if link else "" for link in shown["view"]]
    return shown


def verdict_colour(value: Any) -> str:
    """The background of a verdict cell."""
    return VERDICT_COLOURS.get(value, "")


def measured_colour(value: Any) -> str:
    """The background of a measured cell, by the verdict it ends with: cells read "<value> (<verdict>)"."""
    return next((c for k, c in VERDICT_COLOURS.items() if str(value).endswith(f"({k})")), "")
