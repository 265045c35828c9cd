"""The committed table, ``benchmarks/results/claims.json`` (written by ``python -m core.claims``): the seconds each
claim took, for estimates, and its measurements, shown until a server has measured a claim itself."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from core.claims.claim import result_key

COMMITTED_TABLE = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "claims.json"
# What the page shows for a claim that is neither measured here nor in the committed table.
NOT_YET = {"value": None, "verdict": "not measured yet", "detail": "waiting for its button"}


@functools.cache
def measured_seconds() -> dict[str, float]:
    """Seconds per claim and input from the last ``python -m core.claims`` on this machine (claims.json): the
    FAST/SLOW guesses made the page's estimate half the measured time (11 s shown, 21.6 s taken)."""
    try:
        rows = json.loads(COMMITTED_TABLE.read_text(encoding="utf-8"))["results"]
        return {str(r["id"]): float(r["seconds"]) / max(1, len(r["measured"]) + len(r.get("errors", {}))) for r in rows}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


@functools.cache
def _committed(path: Path = COMMITTED_TABLE) -> tuple[int | None, dict[str, dict[str, Any]]]:
    """(seed, result_key -> measurement) of the committed table written by ``python -m core.claims``."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        out = {
            result_key(r["id"], which): {
                "value": m["value"],
                "verdict": m["verdict"],
                "detail": f"{m['detail']} (committed table, {COMMITTED_TABLE.name}; not measured on this server yet)",
                "committed": True,
            }
            for r in payload["results"]
            for which, m in r["measured"].items()
        }
        return int(payload["seed"]), out
    except (OSError, ValueError, KeyError, TypeError):
        return None, {}


def committed_or_not_yet(claim_id: str, which: str, seed: int, text: str | None) -> dict[str, Any]:
    """What the table shows for a claim not measured here yet: the committed measurement of the same claim, input
    and seed on the default text (so the page opens on numbers), else "not measured yet"."""
    committed_seed, table = _committed()
    if text is None and seed == committed_seed:
        return table.get(result_key(claim_id, which), NOT_YET)
    return NOT_YET
