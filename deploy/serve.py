"""The app's server: Streamlit's own ASGI server (``st.App``) running ``app.py``, with the Plotly bundle and its head
start (``deploy/preload.py``).

    python -m streamlit run deploy/serve.py --server.headless true   # what scripts/run-app.sh and the images run

One route of its own: ``GET /_room/{code}/version`` (``deploy/room_version.py``). Everything else is Streamlit's:
routes, static files, websocket, gzip and the script runner are unchanged, and
``app.py`` stays the entry point that AppTest and ``streamlit run app.py`` use.

At start it checks every ``ATTN_EXPLORER_*`` variable (``core.config``: a bad value stops the start with its
message), and its lifespan makes the process-wide installs of ``ui/serving.py`` that a class of sessions needs
(importing ``ui`` changes nothing in Streamlit), then starts the warm-up.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

# Set before torch loads (the pages import it): OpenMP threads that finish their share of an operation sleep at once
# instead of spinning. The server shares its cores between sessions, its event loop and, on one machine, a browser;
# spinning threads took those cores (on the 2-core reference CPU a new temperature on Compare drew in about 1.4 s
# with spinning threads and about 0.9 s without). core/__init__.py sets the same default, but only where core is
# imported before torch: a page run alone (Streamlit runs only the visited page's script) often imports torch first.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The heavy libraries every page imports load here, at start-up, instead of inside the first visitor's script run
# (about 1.5 s of it on the 2-core reference CPU). Third-party modules only: the app's own modules declare
# st.cache_data functions, which belong to the runtime that starts after this file is read.
import pandas  # noqa: F401
import plotly.graph_objects  # noqa: F401
import scipy.linalg  # noqa: F401
import streamlit as st
import torch  # noqa: F401
from starlette.middleware import Middleware

REPO_ROOT = Path(__file__).resolve().parent.parent
# The pages import `ui` and `core` from the repo root, as `streamlit run app.py` has it.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from core import config  # noqa: E402
from core.errors import ConfigError  # noqa: E402
from deploy import room_version, warmup  # noqa: E402
from deploy.preload import BUNDLE_VARIABLE, PlotlyBundle  # noqa: E402

os.environ[BUNDLE_VARIABLE] = "served"  # the pages draw their figures with the bundle this server serves

# Every ATTN_EXPLORER_* variable checked now: a bad value stops the start with its message, not a visitor's page later.
try:
    config.validate_environment()
except ConfigError as error:
    sys.exit(f"attention explorer: not started, a setting is out of range (python -m core.config lists them):\n{error}")
for unknown in config.unknown_variables():
    print(
        f"attention explorer: {unknown} is set but is not a setting (python -m core.config lists them)", file=sys.stderr
    )


@contextlib.asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    """The server's process-wide installs (``ui/serving.py``: lock-free config reads, the frozen import heap, the
    idle trimmer, developer messages refused), then the warm-up (``deploy/warmup.py``: every default link computed
    once, ahead of the first visitor). Here, not at import: the app's modules declare ``st.cache_data`` functions,
    which belong to the runtime, and st.App has started it when its lifespan hook runs."""
    from ui import serving

    serving.install()
    async with warmup.lifespan(app):
        yield None


# GET /_room/{code}/version beside the app, on the same port (deploy/room_version.py); the flags are read by now.
_routes = room_version.routes(str(st.get_option("server.baseUrlPath") or ""))
app = st.App(REPO_ROOT / "app.py", routes=_routes, middleware=[Middleware(PlotlyBundle)], lifespan=lifespan)
