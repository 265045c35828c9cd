"""Parts served from the shared disk cache look like freshly computed ones (the Sparse + low rank page's crash:
``int(parts["factor"])`` raised once a memory-cache miss was answered by the disk cache)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service import compute, result_cache, views
from service.views import MethodParts, MethodRun


def test_method_parts_factor_survives_the_disk_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    spec = views.InputSpec("clustered", 64, 16, 1, 4, 0.3, 0)
    params = views.params_key({"features": 8, "rounds": 1, "buckets": 4})
    parts = MethodParts(MethodRun(spec, 5.0, "cpu", "scatterbrain", params, 0), 0, ("support", "attention"))
    result_cache.memory().clear()
    fresh = compute.method_parts(parts)
    result_cache.memory().clear()  # the memory cache forgets it; the disk cache answers
    assert views.lookup(parts) is not None
    again = compute.method_parts(parts)
    assert int(fresh["factor"]) == int(again["factor"]) == 1
    for name in ("support", "attention"):
        assert again[name].shape == fresh[name].shape == (64, 64)
        np.testing.assert_array_equal(again[name], fresh[name])
