"""The page registry names exactly the scripts in pages/, in Streamlit's order and under Streamlit's URL paths, and
imports nothing from Streamlit."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ui import page_registry

ROOT = Path(__file__).resolve().parents[1]


def test_registry_lists_exactly_the_files_in_pages() -> None:
    on_disk = sorted((ROOT / "pages").glob("*.py"), key=lambda p: int(p.name.split("_")[0]))
    assert [p.file for p in page_registry.PAGES] == [f"pages/{p.name}" for p in on_disk]
    assert page_registry.ALL_PAGES[0] == page_registry.HOME and page_registry.HOME.file == "app.py"
    assert all(p.script.is_file() for p in page_registry.ALL_PAGES)


def test_url_paths_are_streamlits() -> None:
    # Streamlit serves pages/N_Name.py at /Name.
    for page in page_registry.PAGES:
        assert page.url_path == re.sub(r"^\d+_", "", Path(page.file).stem), page
    assert list(page_registry.url_paths()) == [p.url_path for p in page_registry.ALL_PAGES]
    assert len(set(page_registry.url_paths())) == len(page_registry.ALL_PAGES)
    assert page_registry.by_url_path("Compare") == page_registry.PAGES[0]
    assert page_registry.by_file("pages/9_Paper_claims.py") == page_registry.by_url_path("Paper_claims")
    assert page_registry.by_url_path("No_such_page") is None


def test_every_page_has_a_label_and_a_summary() -> None:
    for page in page_registry.PAGES:
        assert page.label and page.label == page.label.strip(), page
        assert 20 <= len(page.summary) <= 300 and "\n" not in page.summary, page
        assert not page.summary.lower().startswith(page.label.lower() + ":"), page


def test_registry_imports_no_streamlit() -> None:
    tree = ast.parse((ROOT / "ui" / "page_registry.py").read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if m.split(".")[0] in ("streamlit", "ui", "core", "deploy")}, imported
