"""Every number the README and docs/ quote from a benchmark table is in that table, and every CPU table they name
was made by today's engine (benchmarks/refresh.py stamps each with the engine version: a hash of core/). GPU
tables, made on a borrowed host, and the CI-time table may be older if they say their date and commit.

A block (a bullet, a paragraph or a table row) that names tables in benchmarks/results/ is checked against them:
each decimal it quotes (0.146, 2.8×, 3.69 s, n^2.03) must be a value of one of those tables at the quoted
precision, and so must each whole number with a unit of time, memory or ratio (169 s, 1,130 s, 512 MiB, 45 %).
Bare integers (sizes, counts of heads) are not checked this way; the claims' counts are checked below."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import refresh

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TABLE_NAME = re.compile(r"(?:benchmarks/results/)?\b([\w*-]+\.(?:md|json|csv))\b")
DECIMAL = re.compile(r"(?<![\w./-])(\d+\.\d+)(?![\w.]*\.(?:md|json|csv))")
# A whole number (1,130 or 169) followed by a unit: seconds, milliseconds, bytes, a ratio or a percentage.
WHOLE_WITH_UNIT = re.compile(r"(?<![\w.,/^-])(\d{1,3}(?:,\d{3})+|\d+)(?=\s?(?:s|ms|MB|MiB|GB|GiB|×|%)(?!\w))")
# Tables made outside benchmarks.refresh, which may be older if they say their date and commit: the GPU tables (made on
# a borrowed host) and the CI time (about the test suite, not the engine; a 20-minute run of its own).
DATED_TABLE = re.compile(r"gpu_check_|_cuda\b|^ci_time[._]")
# Tables named by the README or docs/ whose refresh is still to run with today's engine (a timing table needs a quiet
# machine; the browser and load benchmarks take minutes of it), each with its refresh command. Empty since
# 2026-11-29. The test fails as soon as one listed here is refreshed (then remove it) or a stale one is not listed.
NOT_YET_REFRESHED: dict[str, str] = {}


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def blocks(text: str) -> list[str]:
    """Bullets (with their continuation lines), paragraphs and table rows, fenced code left out."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    found: list[str] = []
    for line in text.splitlines():
        starts = not line.strip() or line.startswith(("- ", "| ", "#")) or re.match(r"^\d+\. ", line)
        if starts or not found:
            found.append(line)
        else:
            found[-1] += "\n" + line
    return [b for b in found if b.strip()]


def named_tables(block: str) -> list[Path]:
    """The result files a block names (`benchmarks/results/x.md`, or `x.md` alone when such a table exists)."""
    paths: list[Path] = []
    for name in TABLE_NAME.findall(block):
        paths += [p for p in sorted(RESULTS.glob(name)) if p not in paths and p.name != "refresh.json"]
    return paths


def table_values(path: Path) -> list[float]:
    """Every number in a table and its sibling files (the same stem's .md, .json and .csv)."""
    values: list[float] = []
    for sibling in sorted(RESULTS.glob(path.stem + ".*")):
        values += [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", sibling.read_text())]
    return values


def holds(quoted: str, values: list[float]) -> bool:
    """``quoted`` (as written, '0.146') is one of ``values`` rounded to its decimals (or to its 3 significant
    figures written in a shorter form)."""
    places = len(quoted.split(".")[1])
    target = float(quoted)
    return any(abs(round(v, places) - target) < 0.5 * 10**-places + 1e-12 for v in values)


def _prose(block: str) -> str:
    text = TABLE_NAME.sub(" ", block)
    return re.sub(r"`[^`]*`", " ", text)  # commands and paths in code


def quoted_decimals(block: str) -> list[str]:
    return DECIMAL.findall(_prose(block))


def quoted_wholes(block: str) -> list[str]:
    """Whole numbers with a unit (as written, '1,130'): each must be a table's value rounded to a whole."""
    return WHOLE_WITH_UNIT.findall(_prose(block))


def holds_whole(quoted: str, values: list[float]) -> bool:
    target = int(quoted.replace(",", ""))
    return any(abs(v - target) <= 0.5 for v in values)


CASES = [
    (document, index, block)
    for document in DOCUMENTS
    for index, block in enumerate(blocks(document.read_text()))
    if named_tables(block)
]


@pytest.mark.parametrize(("document", "index", "block"), CASES, ids=[f"{_name(d)}-{i}" for d, i, _ in CASES])
def test_every_number_quoted_is_in_its_named_table(document: Path, index: int, block: str) -> None:
    tables = named_tables(block)
    values = [v for table in tables for v in table_values(table)]
    missing = [q for q in quoted_decimals(block) if not holds(q, values)]
    missing += [q for q in quoted_wholes(block) if not holds_whole(q, values)]
    assert not missing, f"{_name(document)} quotes {missing}, in none of {[t.name for t in tables]}:\n{block}"


def _stamped_json(table: Path) -> str:
    entry = refresh.table_of(table.name) or refresh.table_of(table.stem + ".json")
    if entry is None:
        return table.stem + ".json"
    return next(f for f in entry.files if f.endswith(".json"))


NAMED = sorted({t for _, _, block in CASES for t in named_tables(block)})


@pytest.mark.parametrize("table", NAMED, ids=lambda p: p.name)
def test_every_named_table_is_todays_engine_or_a_dated_gpu_run(table: Path) -> None:
    if DATED_TABLE.search(table.name):
        text = table.with_suffix(".md").read_text() if table.with_suffix(".md").exists() else table.read_text()
        assert re.search(r"20\d\d-\d\d-\d\d", text) and "commit" in text, f"{table.name}: a dated table says its date"
        return
    stamped = _stamped_json(table)
    assert refresh.table_of(stamped) is not None, f"{table.name}: benchmarks/refresh.py has no entry making it"
    found = refresh.provenance(stamped)
    if stamped in NOT_YET_REFRESHED:
        assert found is None or found["engine_version"] != refresh.engine_version(), (
            f"{stamped} is refreshed: take it out of NOT_YET_REFRESHED"
        )
        pytest.xfail(f"{stamped} awaits its refresh with today's engine: {NOT_YET_REFRESHED[stamped]}")
    assert found is not None, f"{stamped} records no provenance: python -m benchmarks.refresh --only ..."
    assert found["engine_version"] == refresh.engine_version(), (
        f"{stamped} was made by engine {found['engine_version']}, today's is {refresh.engine_version()}: "
        f"python -m benchmarks.refresh --stale"
    )
    assert {"commit", "device", "temperature"} <= set(found)


def test_the_readme_counts_the_claims_as_the_claims_table_does() -> None:
    results = json.loads((RESULTS / "claims.json").read_text())["results"]
    verdicts = [r["verdict"] for r in results]
    text = " ".join((ROOT / "README.md").read_text().split())
    match = re.search(r"(\d+) measured.*?(\d+) hold, (\d+) hold only in a regime, (\d+) do not hold", text)
    assert match, "the README's claims sentence changed: update this test"
    total, hold, regime, fail = (int(x) for x in match.groups())
    assert total == len(results)
    assert (hold, regime, fail) == (
        verdicts.count("holds"),
        verdicts.count("holds only in a regime"),
        verdicts.count("does not hold"),
    )


def test_the_number_check_can_fail() -> None:
    assert holds("0.146", [0.14608]) and holds("2.8", [2.81]) and not holds("0.146", [0.301, 1.46])
    assert quoted_decimals("Nyström 0.146 (`benchmarks/results/accuracy.csv`, `x 1.5`) n^2.03") == ["0.146", "2.03"]
    quoted = quoted_wholes("ready 169 s after; 1,130 s in all; 512 MiB, 45 % and 3× (n = 4096, 8 heads, `-t 120 s`)")
    assert quoted == ["169", "1,130", "512", "45", "3"]
    assert holds_whole("1,130", [1129.6]) and holds_whole("169", [169.4]) and not holds_whole("169", [168.4, 1690])
