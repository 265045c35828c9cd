"""The FlexAttention export (issue #40, item 4): the generated file, run as a script (the CPU compiles
flex_attention), gives the method's sparse part on the same input: softmax over its support."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import core
from core import block_sparsity, flex_export

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _inputs(n: int = 128) -> core.data.Inputs:
    return core.data.clustered(n, 16, clusters=8, spread=0.3, seed=0, heads=2)


def _run(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.parametrize(("method", "compiled"), [("moba", True), ("local", False)])
def test_the_generated_file_gives_the_methods_output_on_its_support(
    tmp_path: Path, method: str, compiled: bool
) -> None:
    x = _inputs()
    support, params = block_sparsity.method_support(method, x.q, x.k, x.v, scale=2.0, fraction=1 / 4)
    result = core.approximate(method, x.q, x.k, x.v, scale=2.0, **params)  # softmax over its support: the method
    script = tmp_path / f"flex_{method}.py"
    script.write_text(flex_export.flex_file(support, block=64, scale=2.0, method=method), encoding="utf-8")
    torch.save({"q": x.q[None], "k": x.k[None], "v": x.v[None]}, tmp_path / "in.pt")
    started = time.perf_counter()
    done = _run(script, str(tmp_path / "in.pt"), str(tmp_path / "out.pt"), *([] if compiled else ["--eager"]))
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-3000:]
    out = torch.load(tmp_path / "out.pt")[0]
    torch.testing.assert_close(out, result.output, rtol=1e-4, atol=1e-5)
    print(f"{method}: the generated file ran in {seconds:.1f} s ({'compiled' if compiled else 'eager'})")


def test_the_file_alone_checks_itself_and_refuses_what_it_cannot_pack(tmp_path: Path) -> None:
    support = torch.zeros(1, 40, 40, dtype=torch.bool)
    support[0].fill_diagonal_(True)
    support[0, :, :3] = True
    script = tmp_path / "flex_local.py"
    script.write_text(flex_export.flex_file(support, block=16, scale=1.0, method="local"), encoding="utf-8")
    done = _run(script, "--eager")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "BlockMask" in done.stdout and "largest gap to the masked softmax" in done.stdout
    gap = float(done.stdout.rsplit(" ", 1)[-1])
    assert gap < 1e-5
    with pytest.raises(core.ParameterError, match="block"):
        flex_export.flex_file(support, block=48, scale=1.0, method="local")
    with pytest.raises(core.ParameterError, match="method"):
        flex_export.flex_file(support, block=16, scale=1.0, method='local"; import os')
    with pytest.raises(core.ParameterError, match="n"):
        flex_export.flex_file(torch.ones(5, 4096, 4096, dtype=torch.bool), block=64, scale=1.0, method="local")
