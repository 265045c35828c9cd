"""Settings shared by every test: a fixed torch thread count and seeded global RNGs, plus the repo root."""

from __future__ import annotations

import atexit
import os
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parent.parent

# Tests never read or fill the app's own result cache: a fresh shared-cache directory per test run, removed when the
# run ends (a full run leaves about 300 MB there; left behind, repeated runs filled the disk).
if "ATTN_EXPLORER_CACHE_DIR" not in os.environ:
    _run_cache_dir = tempfile.mkdtemp(prefix="attn-explorer-test-cache-")
    os.environ["ATTN_EXPLORER_CACHE_DIR"] = _run_cache_dir
    atexit.register(shutil.rmtree, _run_cache_dir, ignore_errors=True)
# No work done ahead in the background (ui/prefetch.py) while other tests count computations or swap cache folders;
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


@pytest.fixture(autouse=True)
def _seed_global_rngs() -> None:
    """Tests seed their own draws; this only pins any incidental use of the global generators."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
