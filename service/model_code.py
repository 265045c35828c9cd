"""The real model's Python code (transformers), imported a piece at a time with a cancellation check before each.

The first job that needs MiniLM in a process imports transformers' BERT code: one import of 2-5 s on the 2-core
machine, which no cancel token can interrupt. A closed tab must stop its work within 2 s, so the jobs that load the
model import it here first, in pieces of at most about 1.2 s there, and stop between them once their token is
cancelled. Once imported, each call costs a dictionary lookup per piece."""

from __future__ import annotations

import importlib
import sys
import threading

from core import cancel as core_cancel

# In the order the BERT model's import reaches them; each is what a piece adds to the ones before it.
PIECES = (
    "transformers",
    "torch.distributed.tensor",
    "transformers.core_model_loading",
    "transformers.integrations.flash_attention",
    "transformers.modeling_utils",
    "transformers.models.bert.modeling_bert",
)


# transformers' lazy module is not safe to import from two threads at once: with the warm-up importing the BERT code
# while a visitor's page loaded the model, `from transformers import AutoModel` failed with "cannot import name
# 'AutoModel'" (4 of 4 fresh interpreters). So one thread at a time imports, and the names core.data takes from
# transformers are resolved here too, under the lock: afterwards core.data's import only reads them. Every path that
# loads the model calls import_in_steps first (service.compute, service.views, the Inside a model page).
IMPORT_LOCK = threading.Lock()
MODEL_NAMES = ("AutoModel", "AutoTokenizer")  # what core.data imports from transformers


def _locked_import(name: str, attributes: tuple[str, ...] = ()) -> None:
    while not IMPORT_LOCK.acquire(timeout=0.25):  # another thread's import: a cancelled job still stops at once
        core_cancel.check()
    try:
        module = importlib.import_module(name)
        for attribute in attributes:
            getattr(module, attribute)
    except (ImportError, AttributeError):  # another transformers layout: loading the model imports what it needs
        pass
    finally:
        IMPORT_LOCK.release()


def import_in_steps() -> None:
    """Import the model's code, checking this thread's cancel token before each piece (``Cancelled`` once cancelled)."""
    for name in PIECES:
        if name in sys.modules:
            continue
        core_cancel.check()
        _locked_import(name)
    transformers = sys.modules.get("transformers")
    if transformers is not None and not all(name in vars(transformers) for name in MODEL_NAMES):
        core_cancel.check()
        _locked_import("transformers", MODEL_NAMES)
    core_cancel.check()
