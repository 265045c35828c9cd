"""Every private or internal Streamlit and diskcache API the app uses, in one place.

An upgrade of either library is a change in this file: ``tests/test_streamlit_compat.py`` fails when the installed
version differs from the one recorded here and lists the internals to re-check (``INTERNALS``), and it checks that
each of them still exists. The rest of the app calls the functions below, never ``streamlit.runtime``,
``streamlit.config``'s private names or diskcache's ``_sql`` directly.

Importing this module changes nothing in Streamlit; ``install_config_readers`` and ``wrap_handle_backmsg`` do,
and only ``ui.serving.install`` (called at the server's start, ``deploy/serve.py``) calls them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.diskcache_compat import DISKCACHE_VERSION, oldest_entry_key

# The versions these internals were read in (requirements.txt pins them).
STREAMLIT_VERSION = "1.67.0"

# name -> (library, what the app uses it for). tests/test_streamlit_compat.py checks each one exists.
INTERNALS: dict[str, tuple[str, str]] = {
    "streamlit.config._config_options": ("streamlit", "lock-free config reads (ui/serving.py)"),
    "streamlit.config.get_config_options": ("streamlit", "the first parse of the config (ui/serving.py)"),
    "streamlit.config.get_option": ("streamlit", "replaced by the lock-free reader (ui/serving.py)"),
    "streamlit.config.get_options_for_section": ("streamlit", "replaced by the lock-free reader (ui/serving.py)"),
    "streamlit.runtime.app_session.AppSession.handle_backmsg": (
        "streamlit",
        "wrapped to refuse the developer menu's messages (ui/serving.py)",
    ),
    "streamlit.runtime.scriptrunner_utils.script_run_context.get_script_run_ctx": (
        "streamlit",
        "the page run on this thread (ui/jobs.py, ui/page_lifecycle.py)",
    ),
    "streamlit.runtime.scriptrunner_utils.script_run_context.ScriptRunContext.script_requests": (
        "streamlit",
        "the run's pending requests (ui/jobs.py)",
    ),
    "streamlit.runtime.scriptrunner_utils.script_run_context.ScriptRunContext.session_id": (
        "streamlit",
        "a job's owner (ui/jobs.py)",
    ),
    "streamlit.runtime.scriptrunner_utils.script_run_context.ScriptRunContext.fragment_ids_this_run": (
        "streamlit",
        "a fragment rerun (ui/page_lifecycle.py)",
    ),
    "streamlit.runtime.scriptrunner_utils.script_run_context.ThreadState": (
        "streamlit",
        "the fragment this run is in (ui/jobs.py, ui/page_lifecycle.py)",
    ),
    "streamlit.runtime.scriptrunner_utils.script_run_context.FragmentThreadState.fragment_id": (
        "streamlit",
        "the fragment this run is in (ui/jobs.py, ui/page_lifecycle.py)",
    ),
    "streamlit.runtime.scriptrunner_utils.script_requests.ScriptRequests._state": (
        "streamlit",
        "a stopped page run, a pending rerun (ui/jobs.py)",
    ),
    "streamlit.runtime.scriptrunner_utils.script_requests.RerunData.fragment_id_queue": (
        "streamlit",
        "a click that waits in this fragment (ui/jobs.py)",
    ),
    "streamlit.runtime.exists": ("streamlit", "a running server, not a test (ui/jobs.py)"),
    "streamlit.runtime.get_instance": ("streamlit", "the server's runtime (ui/jobs.py)"),
    "streamlit.runtime.Runtime.is_active_session": ("streamlit", "a job's owner still connected (ui/jobs.py)"),
    "streamlit.runtime.state.session_state_proxy.get_session_state": (
        "streamlit",
        "the query params Streamlit seeds widgets from (ui/url_params.py)",
    ),
    "streamlit.runtime.state.safe_session_state.SafeSessionState.query_params": (
        "streamlit",
        "the session's QueryParams (ui/url_params.py)",
    ),
    "streamlit.runtime.state.query_params.QueryParams.unbind_widget": (
        "streamlit",
        "releasing widgets' URL bindings before a class room's student follows the teacher (ui/room.py)",
    ),
    "streamlit.runtime.state.query_params.QueryParams._initial_query_params": (
        "streamlit",
        "rewriting a URL value before its widget exists (ui/url_params.py)",
    ),
    "streamlit.proto.ForwardMsg_pb2.ForwardMsg": ("streamlit", "reading the server's messages (deploy/warmup.py)"),
    "streamlit.proto.BackMsg_pb2.BackMsg": ("streamlit", "sending a page request (deploy/warmup.py)"),
    "diskcache.Cache._sql": ("diskcache", "the least recently used entry (service/diskcache_compat.py)"),
    "diskcache.Cache._disk": ("diskcache", "the key of a stored row (service/diskcache_compat.py)"),
}


# ------------------------------------------------------------------ script runs


def script_run_ctx() -> Any:
    """The ``ScriptRunContext`` of the page run on this thread, or None off a script thread."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    return get_script_run_ctx(suppress_warning=True)


def script_thread_state() -> Any:
    """This thread's ``FragmentThreadState`` (``.fragment_id``: the fragment this run is in, None on a full run).
    Raises RuntimeError off a script thread."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState

    return ThreadState.get()


def script_request_state(requests: Any) -> str | None:
    """The name of a ``ScriptRequests``' pending request ("CONTINUE", "STOP", "RERUN"); None where Streamlit no
    longer has it (then a caller carries on as if nothing were pending)."""
    return getattr(getattr(requests, "_state", None), "name", None)


def pending_rerun_fragment_ids(requests: Any) -> tuple[str, ...]:
    """The fragments a pending rerun of ``requests`` will run (empty when no rerun is pending)."""
    if script_request_state(requests) != "RERUN":
        return ()
    try:
        return tuple(requests._rerun_data.fragment_id_queue)
    except (AttributeError, TypeError):
        return ()


def session_active(session_id: str) -> bool | None:
    """True/False from the Streamlit runtime; None where there is no runtime (tests, bare scripts)."""
    from streamlit import runtime

    if not runtime.exists():
        return None
    return bool(runtime.get_instance().is_active_session(session_id))


# ------------------------------------------------------------------ session state and the URL


def session_state() -> Any:
    """The session's ``SessionState`` (``.query_params()`` is a context manager over its ``QueryParams``)."""
    from streamlit.runtime.state.session_state_proxy import get_session_state

    return get_session_state()


def release_query_bindings() -> None:
    """Unbind every widget of this session from its URL parameter: ``st.switch_page`` refuses to set a bound one."""
    with session_state().query_params() as params:
        for widget_id in list(getattr(params, "_bindings_by_widget", {})):
            params.unbind_widget(widget_id)


def initial_query_params(query_params: Any) -> dict[str, list[str]] | None:
    """The snapshot of the URL that Streamlit seeds widgets from (it has no public setter), or None where
    Streamlit no longer keeps one. Changes to the returned dict are what the widgets see."""
    initial = getattr(query_params, "_initial_query_params", None)
    return initial if isinstance(initial, dict) else None


# ------------------------------------------------------------------ config and the server's sessions


def config_options() -> dict[str, Any]:
    """Streamlit's parsed options (name -> ``ConfigOption``), parsing them first (under Streamlit's lock) if needed.
    Read the dict once per call: a reparse swaps in a whole new one."""
    from streamlit import config

    options = config._config_options
    return options if options is not None else config.get_config_options()


def _replaceable(function: Any, own_module: str) -> bool:
    # Only Streamlit's own functions (or ours): AppTest swaps in a mock get_option for the length of a run.
    return getattr(function, "__module__", None) in ("streamlit.config", own_module)


def install_config_readers(
    get_option: Callable[..., Any], get_options_for_section: Callable[..., dict[str, Any]]
) -> None:
    """Route ``streamlit.config.get_option`` / ``get_options_for_section`` to the given readers (process-wide)."""
    from streamlit import config

    if _replaceable(config.get_option, get_option.__module__):
        config.get_option = get_option
    if _replaceable(config.get_options_for_section, get_options_for_section.__module__):
        config.get_options_for_section = get_options_for_section


def wrap_handle_backmsg(wrap: Callable[[Callable[[Any, Any], Any]], Callable[..., Any]]) -> None:
    """Replace ``AppSession.handle_backmsg`` (every browser message to a session) by ``wrap(original)``."""
    from streamlit.runtime.app_session import AppSession

    AppSession.handle_backmsg = wrap(AppSession.handle_backmsg)  # type: ignore[method-assign]


# ------------------------------------------------------------------ the websocket protocol


def forward_msg() -> Any:
    """A new, empty ``ForwardMsg`` (server -> browser)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    return ForwardMsg()


def back_msg() -> Any:
    """A new, empty ``BackMsg`` (browser -> server)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    return BackMsg()


# ------------------------------------------------------------------ diskcache (service/diskcache_compat.py)

__all__ = ["DISKCACHE_VERSION", "INTERNALS", "STREAMLIT_VERSION", "oldest_entry_key"]
