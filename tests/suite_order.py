"""pytest plugin of the parallel part: scripts/test.sh loads it (``-p tests.suite_order``) with pytest-xdist's
``--no-loadscope-reorder``, so the workers take the longest files first (tests/suite_parts.py's ``longest_first``).

Longest first is the usual rule for sharing jobs between machines evenly: what is left at the end, when one worker
may wait for the other, is the short files.
"""

from __future__ import annotations

import pytest

from tests.suite_parts import longest_first


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = longest_first(items, config.rootpath.resolve())
