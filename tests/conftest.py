"""What every test shares: a fixed torch thread count, seeded global RNGs and the repo root; and the fixtures
many test files use: ``open_page`` and ``open_compare`` (an AppTest run of one page with URL parameters),
``one_thread`` (torch on one thread for the test) and ``random_qkv`` (small seeded query, key and value tensors)."""

from __future__ import annotations

import atexit
import functools
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch
from suite_parts import PARTS, holds_no_test_of, is_serial

if TYPE_CHECKING:  # imported where used: engine-only test runs need not load Streamlit
    from streamlit.testing.v1 import AppTest

REPO_ROOT = Path(__file__).resolve().parent.parent
# The first run of a page imports torch and computes on a slow, shared CPU.
APPTEST_TIMEOUT_S = 240

# Tests never read or fill the app's own result cache: a fresh shared-cache directory per test run, removed when the
# run ends (a full run leaves about 300 MB there; left behind, repeated runs filled the disk). Under pytest-xdist each
# worker makes its own (the one the controller made is in the inherited environment, marked by _RUN_CACHE_MARK), so a
# worker's tests see the same cache a serial run of them would: nothing another worker computed meanwhile.
_RUN_CACHE_MARK = "ATTN_TESTS_RUN_CACHE_DIR"  # not ATTN_EXPLORER_*: core.config refuses undeclared names of its own
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if "ATTN_EXPLORER_CACHE_DIR" not in os.environ or (
    _WORKER and os.environ.get(_RUN_CACHE_MARK) == os.environ["ATTN_EXPLORER_CACHE_DIR"]
):
    _run_cache_dir = tempfile.mkdtemp(
        prefix=f"attn-explorer-test-cache-{_WORKER}-" if _WORKER else "attn-explorer-test-cache-"
    )
    os.environ["ATTN_EXPLORER_CACHE_DIR"] = _run_cache_dir
    os.environ[_RUN_CACHE_MARK] = _run_cache_dir
    atexit.register(shutil.rmtree, _run_cache_dir, ignore_errors=True)
# No work done ahead in the background (service/prefetch.py) while other tests count computations or swap cache folders;
# tests/test_prefetch.py turns it on for itself.
os.environ.setdefault("ATTN_EXPLORER_PREFETCH", "0")
# No heap trimming thread (ui/serving.py) racing the tests that measure this process's resident memory;
# tests/test_serving_trim.py checks it starts when enabled.
os.environ.setdefault("ATTN_EXPLORER_TRIM", "0")
# No warm-up sessions (deploy/warmup.py) in the servers the browser tests start: they count CPU, sessions and cache
# hits. tests/browser/test_warmup.py turns it on for its own server.
os.environ.setdefault("ATTN_EXPLORER_WARMUP", "0")

# CI has 2 cores; a fixed count also keeps float reductions reproducible between machines.
torch.set_num_threads(2)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--torch-device",
        default=None,
        help="torch's default device for the run (torch.set_default_device), e.g. cuda: the GPU check runs the "
        "engine tests with it, so the inputs that core.data and random_qkv draw (on the CPU, seeded) live there",
    )
    parser.addoption(
        "--part",
        choices=PARTS,
        default="all",
        help="which part of the suite to run: all (default); parallel, the tests that may share the machine with "
        "other tests (scripts/test.sh runs them under pytest-xdist); serial, the rest (marker serial, or a file in "
        "tests/suite_parts.py's SERIAL_FILES), which scripts/test.sh runs alone afterwards. The two together are all",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """--part: a test file that can hold no test of the part is not imported (the serial part's collection took 10 s,
    most of it importing files it then deselected whole)."""
    if holds_no_test_of(config.getoption("--part", default="all"), collection_path, REPO_ROOT):
        return True
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--part: keep only the parallel or the serial part (tests/suite_parts.py); trylast, after tests/browser/
    marks its items."""
    part = config.getoption("--part", default="all")
    if part == "all":
        return
    keep = [item for item in items if is_serial(item, REPO_ROOT) == (part == "serial")]
    dropped = [item for item in items if is_serial(item, REPO_ROOT) != (part == "serial")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_configure(config: pytest.Config) -> None:
    device = config.getoption("--torch-device", default=None)
    if device:
        torch.set_default_device(device)


@pytest.fixture(autouse=True)
def _seed_global_rngs() -> None:
    """Tests seed their own draws; this only pins any incidental use of the global generators."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


def open_app_page(path: str = "app.py", /, *, timeout: float = APPTEST_TIMEOUT_S, **params: str | list[str]) -> AppTest:
    """Run one page the way `streamlit run app.py` does (app.py is the entry point, ``path`` is switched to), opened
    on the URL parameters ``params``."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=timeout)
    if path != "app.py":
        at.switch_page(path)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


@pytest.fixture(scope="session")
def open_page() -> Callable[..., AppTest]:
    """``open_page(path, timeout=..., **params)``: the AppTest of page ``path`` after its first run."""
    return open_app_page


@pytest.fixture(scope="session")
def opened_page() -> Callable[..., AppTest]:
    """``opened_page(path, **params)``: like ``open_page``, but one AppTest per (page, link) for the whole session,
    shared by the tests that only read what the page shows (its tiles, its text). Never click or type in it."""
    opened: dict[tuple[str, tuple[tuple[str, str], ...]], AppTest] = {}

    def get(path: str, /, **params: str | list[str]) -> AppTest:
        key = (path, tuple(sorted((k, repr(v)) for k, v in params.items())))
        if key not in opened:
            opened[key] = open_app_page(path, timeout=300, **params)
        return opened[key]

    return get


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch on one thread for this test: small matrices (dense SVDs above all) get many times slower when two
    threads share a busy 2-core box, and one thread fixes the order of float reductions."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def draw_qkv(
    shape: tuple[int, ...],
    n: int,
    d: int,
    dv: int | None = None,
    *,
    seed: int,
    dtype: torch.dtype = torch.float64,
    unit_logits: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Standard normal q, k of shape ``(*shape, n, d)`` and v of ``(*shape, n, dv)`` (``dv`` defaults to ``d``),
    drawn in float64 from one generator seeded with ``seed`` and then cast to ``dtype``, so a dtype never changes
    the draw. ``unit_logits`` divides q and k by d ** 0.25, giving q . k unit variance."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(*shape, n, d, generator=generator, dtype=torch.float64, device="cpu")
    k = torch.randn(*shape, n, d, generator=generator, dtype=torch.float64, device="cpu")
    v = torch.randn(*shape, n, d if dv is None else dv, generator=generator, dtype=torch.float64, device="cpu")
    if unit_logits:
        q, k = q / d**0.25, k / d**0.25
    device = torch.empty(0).device  # torch's default device (--torch-device)
    return q.to(device, dtype), k.to(device, dtype), v.to(device, dtype)


@pytest.fixture(scope="session")
def random_qkv() -> Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``random_qkv(shape, n, d, dv=None, *, seed, dtype=float64, unit_logits=False)``: see ``draw_qkv``."""
    return draw_qkv


@pytest.fixture(scope="session")
def open_compare() -> Callable[..., AppTest]:
    """``open_compare(**params)``: the Compare page, the one most tests open, after its first run."""
    return functools.partial(open_app_page, "pages/1_Compare.py")
