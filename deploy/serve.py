"""The app's server: Streamlit's own ASGI server (``st.App``) running ``app.py``, with the Plotly bundle and its head
start (``deploy/preload.py``).

    python -m streamlit run deploy/serve.py --server.headless true   # what scripts/run-app.sh and the images run

Everything else is Streamlit's: routes, static files, websocket, gzip and the script runner are unchanged, and
``app.py`` stays the entry point that AppTest and ``streamlit run app.py`` use.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

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

from deploy import warmup  # noqa: E402
from deploy.preload import BUNDLE_VARIABLE, PlotlyBundle  # noqa: E402

os.environ[BUNDLE_VARIABLE] = "served"  # the pages draw their figures with the bundle this server serves
# The warm-up (deploy/warmup.py) starts with the server: every default link computed once, ahead of the first visitor.
app = st.App(REPO_ROOT / "app.py", middleware=[Middleware(PlotlyBundle)], lifespan=warmup.lifespan)
