"""``ui/figures`` builds figures from data and imports no Streamlit, neither itself nor through another ``ui`` module
(``ui.figure_display`` is where figures meet Streamlit). Read from the source, so nothing is imported to check it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIGURES = sorted((ROOT / "ui" / "figures").rglob("*.py"))


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The file of a repository module such as "ui.figures.axes" (a package: its __init__.py), or None."""
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Every module ``path`` imports at any depth of its code (function-level imports included)."""
    own = module_name(path, root)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            found.add(source)
            found |= {f"{source}.{a.name}" for a in node.names if module_file(f"{source}.{a.name}", root)}
    return found


def streamlit_route(path: Path, root: Path = ROOT) -> list[str] | None:
    """The chain of repository modules by which ``path`` imports Streamlit, or None when it does not."""
    seen: set[Path] = set()
    stack: list[tuple[Path, list[str]]] = [(path, [module_name(path, root)])]
    while stack:
        current, route = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        for name in sorted(imported_modules(current, root)):
            if name.split(".")[0] == "streamlit":
                return [*route, name]
            target = module_file(name, root) if name.split(".")[0] in ("ui", "core") else None
            if target is not None:
                stack.append((target, [*route, name]))
    return None


@pytest.mark.parametrize("path", FIGURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_figure_module_imports_no_streamlit(path: Path) -> None:
    route = streamlit_route(path)
    assert route is None, " -> ".join(route or [])


def test_the_check_follows_imports_through_other_modules(tmp_path: Path) -> None:
    assert len(FIGURES) >= 9
    (tmp_path / "ui" / "figures").mkdir(parents=True)
    (tmp_path / "ui" / "__init__.py").write_text("")
    (tmp_path / "ui" / "drawing.py").write_text("def draw():\n    import streamlit as st\n")
    (tmp_path / "ui" / "figures" / "__init__.py").write_text("from .. import drawing\n")
    (tmp_path / "ui" / "figures" / "pure.py").write_text("import numpy\nfrom ui.figures import GridCell\n")
    (tmp_path / "ui" / "figures" / "heat.py").write_text("from ui.figures import pure\n")
    route = streamlit_route(tmp_path / "ui" / "figures" / "heat.py", tmp_path)
    assert route is not None and route[0] == "ui.figures.heat" and route[-2:] == ["ui.drawing", "streamlit"], route
    (tmp_path / "ui" / "figures" / "__init__.py").write_text("")
    assert streamlit_route(tmp_path / "ui" / "figures" / "heat.py", tmp_path) is None
