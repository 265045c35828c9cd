"""The README is a user's document: its sections in order, short, no commit hashes, every benchmark table it quotes
committed, and every local link it (or a page of docs/) gives leading to a file. The Quick start's two commands are
checked by tests/test_tooling.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
README = REPO_ROOT / "README.md"
DOCUMENTS = [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]
SECTIONS = ["Quick start", "Teaching", "The pages", "Deploying", "The engine API", "Benchmarks"]
MAX_README_LINES = 250
# A hex word of 7 to 40 characters with a digit and a letter: how git abbreviates a commit.
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
RESULTS_PATH = re.compile(r"benchmarks/results/[\w.*-]+")
LOCAL_LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s#]+)")


def _name(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def test_readme_has_the_user_sections_in_order_and_stays_short() -> None:
    text = README.read_text()
    headings = re.findall(r"^## (.+?)\s*$", text, flags=re.M)
    assert headings[: len(SECTIONS)] == SECTIONS, f"README sections {headings}, expected to start with {SECTIONS}"
    lines = len(text.splitlines())
    assert lines <= MAX_README_LINES, f"README has {lines} lines; move longer material to docs/"


@pytest.mark.parametrize("document", DOCUMENTS, ids=_name)
def test_document_quotes_no_commit_hash(document: Path) -> None:
    hashes = COMMIT_HASH.findall(document.read_text())
    assert not hashes, f"{_name(document)} quotes commit hashes {hashes}: history lives in git"


def test_every_benchmark_table_the_readme_names_is_committed() -> None:
    named = sorted(set(RESULTS_PATH.findall(README.read_text())))
    assert named, "the README's Benchmarks section names no table in benchmarks/results/"
    missing = [path for path in named if not any(REPO_ROOT.glob(path))]
    assert not missing, f"README quotes tables that are not committed: {missing}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=_name)
def test_local_links_lead_to_files(document: Path) -> None:
    targets = LOCAL_LINK.findall(document.read_text())
    missing = [target for target in targets if not (document.parent / target).exists()]
    assert not missing, f"{_name(document)} links to missing files: {missing}"
