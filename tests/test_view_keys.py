"""Every cached result's key is derived from its view (service/views.py), and every field that changes a result is in
it.

Two settings that differ in any field get different keys, for every view the app caches (a property test over
random changes of one field, nested ones included). A key that dropped a field would serve one link's result to
another in the shared cache, with no error; ``test_a_dropped_field_is_caught`` drops each field of each view in turn
and checks that the property finds it. Pages build no key by hand: only service/views.py hands keys to the cache and
the scheduler.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import rank_heads_study
from service import views

ROOT = Path(__file__).resolve().parents[1]

SPEC = views.InputSpec("clustered", 128, 16, 2, 4, 0.1, 0)
RUN = views.MethodRun.of(SPEC, 5.0, "cpu", "performer", {"features": 16, "orthogonal": True}, 0)
TRAIN = rank_heads_study.TrainSettings("nearest", 16, 2, 100, 1, 0, "cpu")
SCORES = (("scatterbrain", (("features", 8), ("rounds", 1))), ("lsh", (("buckets", 4),)))

# One example of every view the app caches; a new view fails test_every_view_has_an_example until it gets one.
EXAMPLES: dict[str, views.View] = {
    "inputs": SPEC,
    "exact": views.ExactAttention(SPEC, 5.0, "cpu"),
    "entropy_readout": views.EntropyReadout(views.ExactAttention(SPEC, 5.0, "cpu")),
    "run_method": RUN,
    "method_parts": views.MethodParts(RUN, 1, ("attention", "sparse"), True),
    "scatterbrain_correction": views.ScatterbrainCorrection(views.MethodParts(RUN, 1, ("attention", "support"), True)),
    "clustered_entropy_curve": views.ClusteredEntropyCurve(51, 32, 4, 0.3, 0),
    "token_row_errors": views.TokenRowErrors(RUN, 1),
    "error_vs_entropy": views.TemperatureSweep(SPEC, (0.1, 1.0), ("lsh", "scatterbrain"), 0.125, 0, SCORES, "cpu"),
    "regime_map": views.RegimeMap(
        128, 16, 4, (1.0, 10.0), (0.1, 0.5), (("sparse", "lsh"), ("s+l", "scatterbrain")), 0.125, 0, SCORES, "cpu", 3
    ),
    "vcc_view": views.VccView(SPEC, 5.0, (("budget", 32), ("selector", "vip")), 0, 1),
    "vcc_error_sweep": views.VccSweep(SPEC, 5.0, (("budget", 32),), 0, 64),
    "temperature_scrub": views.TemperatureScrub(SPEC, 0, "cpu", ("lsh",), SCORES[1:], (0.1, 0.2), 0, 48, True),
    "split_scrub": views.SplitScrub(SPEC, 0, "cpu", (("features", 8),), (0.1, 0.2), 0, 48, False),
    "kernels_mse_curves": views.KernelPairCurves(16, 1.0, 0.5, 1000, 0),
    "kernels_entry_bins": views.KernelEntryBins(SPEC, 5.0, 64, 2, 0, "cpu"),
    "kernels_trig_fraction": views.KernelTrigFraction(SPEC, (8, 16), False, 0, "cpu"),
    "kernels_attention_curves": views.KernelAttentionCurves(SPEC, 5.0, 3, 0, "cpu"),
    "kernels_comparison": views.KernelComparison(SPEC, 5.0, 16, ("ff", "glu"), 100, 0.0, 0.01, 0, "cpu"),
    "kernels_penalty_sweep": views.KernelPenaltySweep(SPEC, 5.0, 16, 100, 0.01, 0, "cpu"),
    "rank_heads_cell": views.RankHeadsCell(TRAIN, 4, 2),
    "rank_heads_n": views.RankHeadsNRun(TRAIN, 4, 2, 16),
    "rank_heads_construction": views.FactOneConstruction(16, 16, "nearest"),
    "paper_claim": views.PaperClaim("scatterbrain_fig1", "clustered", 0, None),
    "hashing_comparison": views.HashingComparison(SPEC, 5.0, 0.125, "cpu", 3),
    "paper_claims": views.PaperClaims("scatterbrain", (("scatterbrain_fig1", "clustered"),), 0, "a text"),
    "scaling": views.ScalingRun(("exact", "performer"), (256, 512), 8, 64, 64, 1.0, 0, "cpu", 10.0, 60.0, 2048.0),
    "error_vs_cost": views.ErrorCostStudy(SPEC, 5.0, ("performer", "lsh"), (0.125, 0.25), True, 3, 0, "cpu", 1),
    "swap_layer_errors": views.SwapLayerErrors("a text", ("performer",), 0.125, (0, 5), (0, 1), 2, 0, "cpu"),
    "swap_retrieval": views.SwapRetrieval(16, ("performer",), (0.125, 0.25), (0, 5), (0, 1), 2, 0, "cpu"),
    "block_sparsity": views.BlockSparsityStudy(SPEC, 5.0, 0.125, ("lsh", "moba"), 64, False, 0, "cpu"),
    "fig4_measure": views.Fig4Measure(16, 44, 4, 16, 8, 256, False, 0),
    "warm_timing": views.MethodWarmTiming(RUN, "host-a"),
}


def _fields(value: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(value)]


def changed(value: Any) -> st.SearchStrategy[Any]:
    """Values of the same shape as ``value`` that differ from it (one nested field changed at a time)."""
    if isinstance(value, bool):
        return st.just(not value)
    if isinstance(value, int):
        return st.integers(-(2**31), 2**31).filter(lambda x: x != value)
    if isinstance(value, float):
        return st.floats(-1e6, 1e6, allow_nan=False).filter(lambda x: x != value)
    if isinstance(value, str):
        return st.text(max_size=12).filter(lambda x: x != value)
    if value is None:
        return st.text(max_size=12)
    if dataclasses.is_dataclass(value):
        names = _fields(value)
        return st.sampled_from(names).flatmap(
            lambda name: changed(getattr(value, name)).map(lambda new: dataclasses.replace(value, **{name: new}))
        )
    if isinstance(value, tuple):
        options = [st.just(value[:-1])] if value else [st.just((1,))]
        if value:
            options.append(st.just((*value, value[-1])))
            options.append(
                st.integers(0, len(value) - 1).flatmap(
                    lambda i: changed(value[i]).map(lambda new: (*value[:i], new, *value[i + 1 :]))
                )
            )
        return st.one_of(options)
    raise TypeError(f"no strategy for {type(value).__name__}")


def field_change(view: views.View) -> st.SearchStrategy[tuple[str, views.View]]:
    """(field name, the view with that field changed)."""
    return st.sampled_from(_fields(view)).flatmap(
        lambda name: changed(getattr(view, name)).map(lambda new: (name, view.replace(**{name: new})))
    )


def test_every_view_has_an_example() -> None:
    assert set(EXAMPLES) == set(views.VIEWS), "add an example of each new view to EXAMPLES"
    for name, view in EXAMPLES.items():
        assert type(view).cache_name == name


def test_every_field_of_every_view_is_in_its_key() -> None:
    """No view declares a display-only field today: every field changes what is computed."""
    for name, cls in views.VIEWS.items():
        assert views.key_fields(cls) == _fields(cls), f"{name}: a field is left out of the key"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_settings_that_differ_in_any_field_have_different_keys(name: str, data: st.DataObject) -> None:
    view = EXAMPLES[name]
    field, other = data.draw(field_change(view))
    assert other != view
    assert other.key() != view.key(), f"{name}: changing {field} leaves the key unchanged"
    assert other.cache_key() != view.cache_key(), f"{name}: changing {field} leaves the cache key unchanged"


def simple_change(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return ""
    if isinstance(value, tuple):
        return (*value, value[-1]) if value else (1,)
    name = _fields(value)[0]
    return dataclasses.replace(value, **{name: simple_change(getattr(value, name))})


def collisions(view: views.View) -> list[str]:
    """The fields whose change leaves the key unchanged (each tried with one simple change)."""
    found = []
    for name in _fields(view):
        if view.replace(**{name: simple_change(getattr(view, name))}).key() == view.key():
            found.append(name)
    return found


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_dropped_field_is_caught(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop each field from the key in turn (as a hand-written key might): the check names exactly that field."""
    view = EXAMPLES[name]
    assert collisions(view) == []
    derive = views.View.key
    for dropped in _fields(view):

        def key_without(self: views.View, dropped: str = dropped) -> tuple:
            return tuple((k, v) for k, v in derive(self) if not (type(self) is type(view) and k == dropped))

        monkeypatch.setattr(views.View, "key", key_without)
        assert collisions(view) == [dropped], f"{name}: dropping {dropped} was not caught"
        monkeypatch.setattr(views.View, "key", derive)


def test_a_view_computes_from_its_own_fields_only() -> None:
    """The run's result changes with the method's seed, the one field a page most easily forgets."""
    first = RUN.compute()
    other = RUN.replace(seed=1).compute()
    assert (first.attention != other.attention).any()


# Modules that may hand a key to the shared cache or the scheduler: everything else goes through a view.
KEY_OWNERS = {
    "service/views.py",
    "service/scheduler.py",
    "ui/jobs.py",
    "service/result_cache.py",
    "service/compute.py",
}
CACHE_CALLS = {"run_heavy", "cached", "get", "contains", "put", "put_soon", "make_key"}


def test_pages_build_no_key_by_hand() -> None:
    offenders = []
    for path in [*ROOT.glob("pages/*.py"), *ROOT.glob("ui/**/*.py"), *ROOT.glob("service/**/*.py")]:
        rel = str(path.relative_to(ROOT))
        if rel in KEY_OWNERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            owner = node.func.value
            owner_name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if owner_name in ("result_cache", "jobs", "scheduler", "ui") and node.func.attr in CACHE_CALLS:
                offenders.append(f"{rel}:{node.lineno} {owner_name}.{node.func.attr}")
            if isinstance(node.func, ast.Attribute) and node.func.attr == "run_heavy":
                offenders.append(f"{rel}:{node.lineno} run_heavy")
    assert offenders == [], "build a service.views view instead of a key: " + ", ".join(offenders)


STREAMLIT_CACHES = {"cache_data", "cache_resource", "experimental_memo", "experimental_singleton"}


def streamlit_caches(paths: list[Path]) -> list[str]:
    """Every use of Streamlit's own caches (``st.cache_data`` and kin) in the given files (code, not prose)."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in STREAMLIT_CACHES:
                found.append(f"{path.name}:{node.lineno} {node.attr}")
    return found


def test_no_result_is_cached_by_streamlit(tmp_path: Path) -> None:
    """Every result goes through the service (a view, the shared result cache, its one memory layer): no page or
    ``ui`` module keeps one in ``st.cache_data`` / ``st.cache_resource``, which no other replica or worker sees."""
    paths = [*ROOT.glob("pages/*.py"), *ROOT.glob("ui/**/*.py"), ROOT / "app.py"]
    assert len(paths) > 20
    assert streamlit_caches(paths) == [], "ask the service for it: a view and service.views.run / cached"
    # The check finds the decorator where it is used, and not the words in a docstring.
    page = tmp_path / "page.py"
    page.write_text(
        '"""st.cache_data is not used here."""\n\nimport streamlit as st\n\n\n'
        "@st.cache_data(max_entries=4)\ndef f(x):\n    return x\n"
    )
    assert streamlit_caches([page]) == ["page.py:6 cache_data"]
