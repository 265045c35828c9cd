"""service.model_code: the real model's code is imported in pieces, and a cancelled job stops between them (a closed
tab during the first model load of a process stops within 2 s: tests/browser/test_heavy_links.py, paper_claims)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from service import model_code

ROOT = Path(__file__).resolve().parent.parent


def test_every_piece_is_a_module_of_the_pinned_transformers() -> None:
    missing = [name for name in model_code.PIECES if importlib.util.find_spec(name) is None]
    assert not missing, missing


def test_a_job_cancelled_during_the_import_stops_at_the_next_piece() -> None:
    # A fresh interpreter: in this one the pieces may be imported already. The token is cancelled once the second
    # piece is in; the third must not be imported, and the call must raise Cancelled.
    script = textwrap.dedent(
        """
        import sys
        from core import cancel
        from service import model_code

        token = cancel.CancelToken(watch=lambda: "tab closed" if model_code.PIECES[1] in sys.modules else None)
        try:
            with cancel.active(token):
                model_code.import_in_steps()
        except cancel.Cancelled as exc:
            print("cancelled:", exc)
        print("imported:", [name in sys.modules for name in model_code.PIECES])
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cancelled: tab closed" in done.stdout, done.stdout
    assert "imported: [True, True, False, False, False, False]" in done.stdout, done.stdout


def test_without_a_token_it_imports_the_model_code() -> None:
    script = (
        "import sys; from service import model_code; model_code.import_in_steps(); "
        "print(all(n in sys.modules for n in model_code.PIECES))"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr[-2000:]


def test_a_job_waiting_for_another_threads_import_stops_once_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    from core import cancel

    monkeypatch.setattr(model_code, "PIECES", ("attention_explorer_no_such_module",))
    token = cancel.CancelToken()
    with model_code.IMPORT_LOCK:  # another thread's import in flight
        started = time.monotonic()
        threading.Timer(0.3, token.cancel).start()
        with pytest.raises(cancel.Cancelled), cancel.active(token):
            model_code.import_in_steps()
    assert time.monotonic() - started < 1.0
