"""The app's server: Streamlit's own ASGI server (``st.App``) running ``app.py``, with the Plotly head start of
``deploy/preload.py``.

    python -m streamlit run deploy/serve.py --server.headless true   # what scripts/run-app.sh and the images run

Everything else is Streamlit's: routes, static files, websocket, gzip and the script runner are unchanged, and
``app.py`` stays the entry point that AppTest and ``streamlit run app.py`` use.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

REPO_ROOT = Path(__file__).resolve().parent.parent
# The pages import `ui` and `core` from the repo root, as `streamlit run app.py` has it.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from deploy.preload import PreloadPlotly  # noqa: E402

app = st.App(REPO_ROOT / "app.py", middleware=[Middleware(PreloadPlotly)])
