"""Every page of the app, declared once: its script, URL path, label, one-line summary, and whether it opens on a chart.

The sidebar's links, the Home page's list, the lessons' page check, the Plotly head start (``deploy/preload.py``), the
warm-up's links, the tests and the benchmarks all read this list; ``tests/test_page_registry.py`` checks that it names
exactly the files in ``pages/``. Streamlit still discovers the scripts itself (file-based multipage app), so a page's
URL path is its file name less the number prefix, and the order here is Streamlit's order (by that number).

Cheap to import: it imports nothing from Streamlit or the rest of ``ui``, and reads no file until a summary is asked
for.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Page:
    file: str  # script relative to the app root: "app.py" for Home, else "pages/N_Name.py"
    url_path: str  # "" for Home, else the file name less its number prefix, e.g. "Sparse_plus_low_rank"
    label: str  # the sidebar's and Home's name for it
    # Draws a Plotly chart at open: deploy/preload.py gives those the Plotly head start; tests/test_app_pages.py checks
    # it against what each page draws.
    opens_on_chart: bool

    @property
    def script(self) -> Path:
        return ROOT / self.file

    @property
    def summary(self) -> str:
        """What the page shows, one sentence or two: the first paragraph of the script's docstring, less "<label>: "."""
        return _summary(self.file, self.label)


HOME = Page("app.py", "", "Home", opens_on_chart=False)
PAGES: tuple[Page, ...] = (
    Page("pages/1_Compare.py", "Compare", "Compare", opens_on_chart=True),
    Page("pages/2_Sparse_plus_low_rank.py", "Sparse_plus_low_rank", "Sparse + low rank", opens_on_chart=True),
    Page("pages/3_Error_vs_entropy.py", "Error_vs_entropy", "Error vs entropy", opens_on_chart=True),
    Page("pages/4_Regime_map.py", "Regime_map", "Regime map", opens_on_chart=True),
    Page("pages/5_VCC.py", "VCC", "VCC", opens_on_chart=True),
    Page("pages/6_Rank_vs_heads.py", "Rank_vs_heads", "Rank vs heads", opens_on_chart=True),
    Page("pages/7_Kernels.py", "Kernels", "Kernels", opens_on_chart=True),
    Page("pages/8_Scaling.py", "Scaling", "Scaling", opens_on_chart=True),
    Page("pages/9_Paper_claims.py", "Paper_claims", "Paper claims", opens_on_chart=False),  # tables only
    Page("pages/10_Error_vs_cost.py", "Error_vs_cost", "Error vs cost", opens_on_chart=True),
    Page("pages/11_Inside_a_model.py", "Inside_a_model", "Inside a model", opens_on_chart=True),
    Page("pages/12_Block_sparsity.py", "Block_sparsity", "Block sparsity", opens_on_chart=True),
)
ALL_PAGES: tuple[Page, ...] = (HOME, *PAGES)  # Home first, as the sidebar lists them

# Cheap URL parameters per page for smoke runs (AppTest, the GPU check's CPU dry run): a small n, and each page's
# heaviest default knob turned down. Unknown keys on other pages only produce a notice.
SMOKE_PARAMS: dict[str, dict[str, str]] = {p.file: {"n": "64"} for p in ALL_PAGES} | {
    "pages/2_Sparse_plus_low_rank.py": {"n": "64", "f4_draws": "1"},
    "pages/3_Error_vs_entropy.py": {"n": "64", "points": "4"},
    "pages/4_Regime_map.py": {"n": "64", "nb": "2", "ns": "2"},
    "pages/6_Rank_vs_heads.py": {"n": "64", "steps": "20", "nsweep": "2"},
    "pages/7_Kernels.py": {"n": "64", "draws": "250", "lk_steps": "10"},
    "pages/9_Paper_claims.py": {"n": "64", "papers": "rank-vs-heads"},
    "pages/10_Error_vs_cost.py": {"n": "64", "runs": "1"},
    "pages/11_Inside_a_model.py": {
        "passages": "3",
        "seeds": "1",
        "layers": "6",
        "budgets": "1/4",
        "text": "A short text.",
    },
    "pages/12_Block_sparsity.py": {"n": "64", "block": "16"},
}

# URL paths ("" is Home) of the pages that open without a Plotly chart.
NO_CHART_AT_OPEN = frozenset(p.url_path for p in ALL_PAGES if not p.opens_on_chart)


def url_paths() -> dict[str, str]:
    """URL path -> script (relative to the app root), Home first, then pages/ in the app's order."""
    return {p.url_path: p.file for p in ALL_PAGES}


def by_url_path(url_path: str) -> Page | None:
    """The page served at ``url_path`` ("" for Home), or None."""
    return next((p for p in ALL_PAGES if p.url_path == url_path), None)


def by_file(file: str) -> Page | None:
    """The page whose script is ``file`` (relative to the app root, e.g. "pages/1_Compare.py"), or None."""
    return next((p for p in ALL_PAGES if p.file == file), None)


@functools.cache
def _summary(file: str, label: str) -> str:
    script = ROOT / file
    # Read from the compiled code, not ast.parse: on CPython 3.11 building Python AST objects in two threads at
    # once can fail ("AST constructor recursion depth mismatch", gh-106905), and Streamlit parses pages in
    # session threads. A module's docstring is its first constant, stored to __doc__.
    code = compile(script.read_text(encoding="utf-8"), str(script), "exec", dont_inherit=True)
    first = code.co_consts[0] if code.co_consts else None
    doc = inspect.cleandoc(first) if "__doc__" in code.co_names and isinstance(first, str) else ""
    line = " ".join(doc.split("\n\n")[0].split())
    head, sep, rest = line.partition(": ")
    if sep and head.lower() in (label.lower(), script.stem.split("_", 1)[-1].replace("_", " ").lower()):
        line = rest
    return line[:1].upper() + line[1:]
