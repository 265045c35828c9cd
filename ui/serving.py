"""Process-level tuning for serving a class: many sessions at once on one server process.

Two Streamlit 1.67 behaviours made 40 cached sessions of one link take 10-25 s together while one alone takes
well under a second; ``install()`` (run once, when the ``ui`` package is first imported) removes both.

1. The import heap in every post-run garbage collection. Streamlit runs ``gc.collect(2)`` after every script run
   (``runner.postScriptGC``): a full collection over every tracked object, about 0.15 s for the 256,000 objects
   that torch, plotly, pandas and the app's modules leave behind, holding the GIL. A class of 40 sessions pays it
   40 times in a row. ``gc.freeze()`` after those imports moves them to the permanent generation, so the
   collection only walks what sessions created since; the collection itself (and what it frees) is unchanged.

2. Lock-free reads of Streamlit's config options.

Streamlit 1.67 takes one process-wide ``RLock`` in ``config.get_option`` and ``config.get_options_for_section``.
They are called for every element a script sends (``forward_msg_cache.populate_hash_if_needed``), for every
``st.*`` call (usage metrics) and, on the event-loop thread, for every new session's theme message. With a class
of 40 sessions running at once on 2 cores, the lock became a convoy: a thread holding it is preempted by the GIL
switch, every other thread (the event loop included) queues behind it, and a py-spy profile of 40 cached
Compare sessions put most of the server's samples inside those two functions.

After Streamlit has parsed its config, the options dict is only read, and reading a dict is atomic under the GIL,
so the readers skip the lock. Before the first parse they let Streamlit parse (under its lock), and an unknown key
raises Streamlit's own error. ``install()`` is idempotent.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

from streamlit import config


def _options() -> dict[str, Any]:
    options = config._config_options  # noqa: SLF001  (read once: a reparse swaps in a whole new dict)
    return options if options is not None else config.get_config_options()  # parses, under the lock


def get_option(key: str) -> Any:
    option = _options().get(key)
    if option is None:
        raise RuntimeError(f'Config key "{key}" not defined.')  # Streamlit's own message
    return option.value


def get_options_for_section(section: str) -> dict[str, Any]:
    return {option.name: option.value for option in list(_options().values()) if option.section == section}


_frozen = threading.Event()


def freeze_import_heap() -> int:
    """Move every object tracked so far (the imported modules) out of future collections; once per process.
    Returns how many objects the permanent generation holds."""
    if not _frozen.is_set():
        _frozen.set()
        gc.collect(2)  # free what is already garbage first: frozen garbage would never be freed
        gc.freeze()
    return gc.get_freeze_count()


def install() -> None:
    """Route Streamlit's own config reads (``config.get_option`` / ``get_options_for_section``) to the lock-free
    readers, and freeze the import heap."""
    # Only over Streamlit's own functions: AppTest swaps in a mock get_option for the length of a run (to set
    # global.appTest), and that mock must stay in charge.
    if getattr(config.get_option, "__module__", None) in ("streamlit.config", __name__):
        config.get_option = get_option
    if getattr(config.get_options_for_section, "__module__", None) in ("streamlit.config", __name__):
        config.get_options_for_section = get_options_for_section
    freeze_import_heap()
