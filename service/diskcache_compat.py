"""The private diskcache API the result cache uses, in one place (the service imports no Streamlit, so this is not in
``ui/streamlit_compat.py``, which lists it among the internals to re-check: ``tests/test_streamlit_compat.py``)."""

from __future__ import annotations

from typing import Any

DISKCACHE_VERSION = "5.6.3"  # the version this was read in (requirements.txt pins it)


def oldest_entry_key(cache: Any) -> Any:
    """The key of the least recently used entry of a ``diskcache.Cache`` (None when it is empty). diskcache has
    no public way to read it; its own eviction uses the same query."""
    with cache.transact(retry=True):
        row = cache._sql("SELECT key, raw FROM Cache ORDER BY access_time LIMIT 1").fetchone()
    if row is None:
        return None
    stored, raw = row
    return cache._disk.get(stored, raw)
