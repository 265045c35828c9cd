"""ui.serving: the lock-free config readers return exactly what Streamlit's own do and never wait on its config
lock; AppTest's mock stays in charge during a test run; the import heap is frozen out of the post-run collection."""

from __future__ import annotations

import gc
import inspect
import threading
from typing import Any

import ci_env
import pytest
import streamlit as st
from streamlit import config
from streamlit.testing.v1.util import patch_config_options

from ui import serving

# Streamlit's own get_option: st.get_option wraps it. (config.get_option itself may be an AppTest mock left behind
# by overlapping AppTest runs earlier in this pytest process, which restore each other's patches out of order.)
STREAMLIT_GET_OPTION = inspect.unwrap(st.get_option)


@pytest.fixture
def streamlit_own_readers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert STREAMLIT_GET_OPTION.__module__ == "streamlit.config"
    monkeypatch.setattr(config, "get_option", STREAMLIT_GET_OPTION)


def locked_value(key: str):
    with config._config_lock:  # what Streamlit's own get_option does
        return config.get_config_options()[key].value


def test_install_routes_streamlit_config_reads_to_the_readers(streamlit_own_readers: None) -> None:
    serving.install()
    assert config.get_option is serving.get_option
    assert config.get_options_for_section is serving.get_options_for_section


def test_every_option_and_section_matches_streamlit() -> None:
    options = config.get_config_options()
    assert len(options) > 100
    for key in options:
        assert serving.get_option(key) == locked_value(key), key
    for section in {option.section for option in options.values()}:
        expected = {o.name: o.value for o in options.values() if o.section == section}
        assert serving.get_options_for_section(section) == expected, section


def test_unknown_key_raises_as_streamlit_does() -> None:
    with pytest.raises(RuntimeError, match="not defined"):
        serving.get_option("global.noSuchOption")


def test_app_test_mock_stays_in_charge(streamlit_own_readers: None) -> None:
    serving.install()
    with patch_config_options({"global.appTest": True}):
        serving.install()  # as when a page imports ui inside an AppTest run
        assert config.get_option("global.appTest") is True
    assert config.get_option is serving.get_option


def test_reads_do_not_wait_for_the_config_lock() -> None:
    config.get_config_options()  # parsed, as on a running server
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with config._config_lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    answers: list = []
    reader = threading.Thread(
        target=lambda: answers.extend(
            [serving.get_option("global.minCachedMessageSize"), serving.get_options_for_section("theme")]
        )
    )
    reader.start()
    reader.join(2)
    finished_while_locked = not reader.is_alive()
    release.set()
    holder.join()
    reader.join()
    assert finished_while_locked, "a config read waited for Streamlit's config lock"
    assert answers[0] == locked_value("global.minCachedMessageSize")


def test_import_heap_is_frozen_out_of_the_post_run_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    import ui  # noqa: F401  (the app's modules, as the server has them when it installs ui.serving)

    serving.install()  # what deploy/serve.py does at the server's start
    assert gc.get_freeze_count() > 50_000
    # Frozen objects sit in the permanent generation, which gc.collect (and gc.get_objects) never walks.
    assert not any(obj is torch.nn.Module for obj in gc.get_objects())
    # A second call freezes nothing more. (The count itself may fall meanwhile: a frozen object whose last reference
    # another thread drops is freed as usual.)
    freezes: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1))
    serving.freeze_import_heap()
    assert freezes == []


# ------------------------------------------------------------------ ATTN_EXPLORER_MALLOC_MMAP_BYTES


@pytest.mark.parametrize("raw", ["junk", "-1", "1.5", "inf", "nan", "1e12", str(32 * 2**20 + 1)])
def test_a_bad_mmap_threshold_is_named_with_its_range_and_not_applied(
    raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core import profiling
    from core.errors import ConfigError

    calls: list[int] = []
    monkeypatch.setattr(profiling, "set_mmap_threshold", lambda n: calls.append(n) or True)
    with pytest.raises(ConfigError) as refused:
        serving.apply_mmap_threshold({serving.MMAP_BYTES_VARIABLE: raw})
    message = str(refused.value)
    assert "ATTN_EXPLORER_MALLOC_MMAP_BYTES" in message and repr(raw) in message and "0 to 33554432" in message
    assert calls == []


def test_a_good_mmap_threshold_is_applied_and_none_leaves_glibc_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from core import profiling

    calls: list[int] = []
    monkeypatch.setattr(profiling, "set_mmap_threshold", lambda n: calls.append(n) or True)
    assert serving.apply_mmap_threshold({}) is None and calls == []
    assert serving.apply_mmap_threshold({serving.MMAP_BYTES_VARIABLE: "1048576"}) is None
    assert serving.apply_mmap_threshold({serving.MMAP_BYTES_VARIABLE: " 2e6 "}) is None
    assert calls == [1048576, 2_000_000]


# glibc's own count of bytes in mapped blocks (mallinfo2().hblkhd) while 40 arrays of 4 MiB are alive, round by
# round. By default glibc maps only the first round: freeing it raises its threshold above 4 MiB, so later arrays
# come from the heap and stay resident after they are freed (until a trim). With the threshold set they are mapped
# every time, and unmapped at free.
_MAPPED_PER_ROUND = """
import ctypes, sys, numpy as np
from core import profiling
class Mallinfo2(ctypes.Structure):
    names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(n, ctypes.c_size_t) for n in names.split()]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Mallinfo2
if sys.argv[1] == "on":
    assert profiling.set_mmap_threshold(1 << 20)
mapped = []
for attempt in range(3):
    before = libc.mallinfo2().hblkhd
    arrays = [np.ones(2**20, np.float32) for _ in range(40)]
    mapped.append(round((libc.mallinfo2().hblkhd - before) / 2**20))
    del arrays
print(*mapped)
"""


def _has_mallinfo2() -> bool:
    import ctypes

    try:
        return hasattr(ctypes.CDLL("libc.so.6"), "mallinfo2")
    except OSError:
        return False


def test_the_mmap_threshold_maps_large_arrays_every_time() -> None:
    ci_env.require(_has_mallinfo2(), "needs glibc 2.33 or later (mallinfo2)")
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent

    def mapped(mode: str) -> list[int]:
        run = subprocess.run(
            [sys.executable, "-c", _MAPPED_PER_ROUND, mode], cwd=root, capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0, run.stderr
        return [int(x) for x in run.stdout.split()]

    assert mapped("on") == [160, 160, 160]  # MiB: every round mapped, so freed at once
    assert mapped("off")[1:] == [0, 0]  # glibc's default: from the heap after the first round


# ------------------------------------------------------------------ the developer menu's messages


def _backmsg(kind: str) -> Any:
    from streamlit.proto.BackMsg_pb2 import BackMsg

    msg = BackMsg()
    if kind == "rerun_script":
        msg.rerun_script.page_name = "Compare"
    elif kind == "set_run_on_save":
        msg.set_run_on_save = True
    else:
        setattr(msg, kind, True)
    assert msg.WhichOneof("type") == kind
    return msg


@pytest.mark.parametrize("kind", sorted(serving.DEVELOPER_MESSAGES))
def test_a_developer_message_from_a_browser_is_dropped_unless_the_server_allows_it(
    kind: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    handled: list[str] = []
    guarded = serving.refuse_developer_messages(lambda session, msg: handled.append(msg.WhichOneof("type")))
    monkeypatch.delenv(serving.DEVELOPER_VARIABLE, raising=False)
    with caplog.at_level("WARNING", logger="ui.serving"):
        assert guarded(object(), _backmsg(kind)) is None
    assert handled == [] and f"refused a {kind} message" in caplog.text
    monkeypatch.setenv(serving.DEVELOPER_VARIABLE, "1")
    guarded(object(), _backmsg(kind))
    assert handled == [kind]


def test_every_other_message_passes_and_the_guard_wraps_once() -> None:
    handled: list[tuple[object, str]] = []
    session = object()
    guarded = serving.refuse_developer_messages(lambda s, msg: handled.append((s, msg.WhichOneof("type"))) or "ok")
    assert guarded(session, _backmsg("rerun_script")) == "ok"
    assert handled == [(session, "rerun_script")]
    assert serving.refuse_developer_messages(guarded) is guarded
    assert not serving.developer_messages_allowed({serving.DEVELOPER_VARIABLE: "0"})
    assert serving.developer_messages_allowed({serving.DEVELOPER_VARIABLE: " Yes "})


def test_install_guards_every_session_of_the_process() -> None:
    from streamlit.runtime.app_session import AppSession

    serving.install()
    serving.install()
    assert getattr(AppSession.handle_backmsg, "refuses_developer_messages", False)
    assert serving.refuse_developer_messages(AppSession.handle_backmsg) is AppSession.handle_backmsg
