"""Every skip for a missing tool, peer package or OS feature goes through ``ci_env`` (fail under CI, skip elsewhere),
so CI cannot pass by skipping. The only plain skips allowed are for a CUDA device, which CI's machines never have."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PLAIN_SKIP = re.compile(r"pytest\.importorskip\(|pytest\.skip\(|mark\.skipif\(")
CUDA_ONLY = re.compile(r"skipif\(not torch\.cuda\.is_available\(\)")


def plain_skips(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name in ("ci_env.py", Path(__file__).name):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PLAIN_SKIP.search(line) and not CUDA_ONLY.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_every_tool_or_peer_skip_goes_through_ci_env() -> None:
    assert plain_skips(TESTS) == []


def test_the_rule_sees_a_plain_skip(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text('peer = pytest.importorskip("reformer_pytorch")\n')
    (tmp_path / "test_y.py").write_text('@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA")\n')
    assert plain_skips(tmp_path) == ['test_x.py:1: peer = pytest.importorskip("reformer_pytorch")']
