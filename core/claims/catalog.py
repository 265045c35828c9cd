"""Every paper's claims in one list: the papers in the page's order, then each paper's claims in its module's order."""

from __future__ import annotations

from collections.abc import Sequence

from core.claims import performer_kernels, rank_vs_heads, routed, scatterbrain, vcc
from core.claims.claim import Claim
from core.errors import ParameterError

PAPER_MODULES = (scatterbrain, vcc, performer_kernels, rank_vs_heads, routed)
PAPERS = {module.PAPER.key: module.PAPER.title for module in PAPER_MODULES}
CLAIMS: tuple[Claim, ...] = tuple(claim for module in PAPER_MODULES for claim in module.PAPER.claims)
SKIPPED: tuple[tuple[str, str], ...] = tuple(skip for module in PAPER_MODULES for skip in module.PAPER.skipped)


def get(claim_id: str) -> Claim:
    for claim in CLAIMS:
        if claim.id == claim_id:
            return claim
    raise ParameterError("claim", f"must be one of {[c.id for c in CLAIMS]}, got {claim_id!r}")


def of_papers(paper_keys: Sequence[str]) -> list[Claim]:
    """The claims of the chosen papers (keys of ``PAPERS``), in registry order."""
    return [c for c in CLAIMS if any(c.paper == PAPERS[p] for p in paper_keys)]
