"""The "Order positions by cluster" sidebar toggle only reorders what is drawn; numbers stay on real positions."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import core  # noqa: E402

TIMEOUT = 240


def run_compare(**params: str | list[str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.switch_page("pages/1_Compare.py")
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def _z(trace: dict[str, Any]) -> np.ndarray:
    z = trace["z"]
    if isinstance(z, dict):  # plotly's binary encoding of numpy arrays
        flat = np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"]))
        return flat.reshape([int(s) for s in str(z["shape"]).split(",")])
    return np.asarray(z, dtype=np.float64)


def first_heatmap(at: AppTest) -> np.ndarray:
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        for trace in spec["data"]:
            if trace.get("type") == "heatmap":
                return _z(trace).astype(np.float64)
    raise AssertionError("no heatmap on the page")


def test_sorting_reorders_the_heatmap_and_leaves_the_metrics_alone() -> None:
    common = {"n": "64", "heads": "1", "clusters": "8", "methods": ["local"]}
    real = run_compare(**common)
    ordered = run_compare(**common, sort_clusters="true")
    assert not real.exception and not ordered.exception
    assert ordered.toggle(key="sort_clusters").value is True
    assert real.metric and {m.label: m.value for m in real.metric} == {m.label: m.value for m in ordered.metric}
    table_real, table_sorted = real.dataframe[0].value, ordered.dataframe[0].value
    assert list(table_real["attention error"]) == list(table_sorted["attention error"])
    labels = core.data.clustered(64, 64, 8, 0.3, seed=0).labels
    assert labels is not None
    order = np.argsort(labels.numpy(), kind="stable")
    shown_real, shown_sorted = first_heatmap(real), first_heatmap(ordered)
    assert not np.allclose(shown_real, shown_sorted)
    np.testing.assert_allclose(shown_sorted, shown_real[order][:, order], equal_nan=True)
