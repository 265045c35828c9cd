"""The shared settings' fields, declared once: kinds, ranges, defaults and formats. The sidebar draws its controls
from them, the URL parser checks a link against them, and ``Settings`` holds their values.

Declared in ``service/fields.py`` (plain data, no Streamlit, so the GPU check and other bare-host tools read the
defaults without importing this package, whose ``__init__`` loads Streamlit); the pages and ``ui`` read them here.
"""

from __future__ import annotations

from service.fields import (
    BUDGET_OPTIONS,
    DEFAULTS,
    DEVICES,
    MAX_DENSE_ELEMENTS,
    MAX_HEADS,
    MAX_N,
    REAL_D,
    REAL_DEFAULTS,
    REAL_HEADS,
    REAL_LAYERS,
    REAL_NOTE,
    SHARED_FIELDS,
    SHARED_KEYS,
    SOURCE_LABELS,
    SOURCES,
    TAU_OPTIONS,
    UPLOAD_DEFAULTS,
    field_range,
    fmt_fraction,
    fmt_tau,
    max_heads,
)

__all__ = [
    "BUDGET_OPTIONS",
    "DEFAULTS",
    "DEVICES",
    "MAX_DENSE_ELEMENTS",
    "MAX_HEADS",
    "MAX_N",
    "REAL_D",
    "REAL_DEFAULTS",
    "REAL_HEADS",
    "REAL_LAYERS",
    "REAL_NOTE",
    "SHARED_FIELDS",
    "SHARED_KEYS",
    "SOURCE_LABELS",
    "SOURCES",
    "TAU_OPTIONS",
    "UPLOAD_DEFAULTS",
    "field_range",
    "fmt_fraction",
    "fmt_tau",
    "max_heads",
]
