"""The real model's Python code (transformers), imported a piece at a time with a cancellation check before each.

The first job that needs MiniLM in a process imports transformers' BERT code: one import of 2-5 s on the 2-core
machine, which no cancel token can interrupt. A closed tab must stop its work within 2 s, so the jobs that load the
model import it here first, in pieces of at most about 1.2 s there, and stop between them once their token is
cancelled. Once imported, each call costs a dictionary lookup per piece."""

from __future__ import annotations

import importlib
import sys

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


def import_in_steps() -> None:
    """Import the model's code, checking this thread's cancel token before each piece (``Cancelled`` once cancelled)."""
    for name in PIECES:
        if name in sys.modules:
            continue
        core_cancel.check()
        try:
            importlib.import_module(name)
        except ImportError:  # another transformers layout: loading the model imports what it needs
            pass
    core_cancel.check()
