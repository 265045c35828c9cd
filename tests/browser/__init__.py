"""Real-browser tests (Playwright driving the system Chromium); fixtures in conftest.py, helpers in helpers.py."""
