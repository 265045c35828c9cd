"""Bring your own heads, in Chromium: a file made here goes through the sidebar's real uploader, Compare runs on it,
and its share link, opened on a fresh server that shares the result cache (another replica), shows the same numbers.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

import numpy as np
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from safetensors.numpy import save

from deploy.processes import app_server

from .helpers import REPO_ROOT, metric_tiles, share_link, wait_for_app

METRIC = "[data-testid='stMetric']"


def heads_file() -> bytes:
    """3 MB: above the 1 MB every other upload of the app is limited to."""
    rng = np.random.default_rng(11)
    return save({name: rng.standard_normal((4, 512, 128)).astype(np.float32) for name in ("q", "k", "v")})


def shown_metrics(page: Page) -> dict[str, str]:
    expect(page.locator(METRIC).first).to_be_visible(timeout=90_000)
    return metric_tiles(page)


def test_an_uploaded_file_reproduces_on_another_server_sharing_the_cache(page: Page, tmp_path: Path) -> None:
    data = heads_file()
    assert len(data) > 3 * 2**20
    sha = hashlib.sha256(data).hexdigest()
    env = {**os.environ, "ATTN_EXPLORER_CACHE_DIR": str(tmp_path / "shared-cache")}
    with app_server(REPO_ROOT, env=env) as first:
        page.goto(f"{first.url}/Compare?input=upload&methods=topk&methods=performer")
        wait_for_app(page)
        expect(page.get_by_text("Upload a .safetensors or .npz file")).to_be_visible()
        uploader = page.locator("[data-testid='stFileUploader']").filter(has_text="Your heads")
        uploader.locator("input[type='file']").set_input_files(
            {"name": "heads.safetensors", "mimeType": "application/octet-stream", "buffer": data}
        )
        wait_for_app(page)
        expect(page.get_by_text("Uploaded q, k, v: 4 head(s), n = 512, d = 128")).to_be_visible(timeout=60_000)
        # The arrays are in the shared cache: the file itself left the session (a fresh, empty uploader).
        expect(uploader.locator("[data-testid='stFileUploaderFile']")).to_have_count(0)
        before = shown_metrics(page)
        # The link's methods waited for the upload: they are applied, not reported as unknown.
        expect(page.get_by_text("Ignored unknown URL parameter")).to_have_count(0)
        link = share_link(page, containing=sha)
        assert f"upload={sha}" in link and "input=upload" in link, link
        assert f"upload={sha}" in page.url, "the address bar does not carry the upload"
    assert len(before) == 2, before

    with app_server(REPO_ROOT, env=env) as second:  # a replica that never saw the upload
        page.goto(link.replace(first.url, second.url, 1))
        wait_for_app(page)
        assert shown_metrics(page) == before


def test_an_upload_from_compares_own_input_puts_its_sha_in_the_address_bar(page: Page, tmp_path: Path) -> None:
    # #42: from Compare on its default input, the address bar kept only "input=upload", and a student given that link
    # saw "Upload a file".
    data = heads_file()
    sha = hashlib.sha256(data).hexdigest()
    env = {**os.environ, "ATTN_EXPLORER_CACHE_DIR": str(tmp_path / "shared-cache")}
    with app_server(REPO_ROOT, env=env) as server:
        page.goto(f"{server.url}/Compare?methods=performer")
        wait_for_app(page)
        page.get_by_text("Bring your own heads (upload a file)").click()
        uploader = page.locator("[data-testid='stFileUploader']").filter(has_text="Your heads")
        uploader.locator("input[type='file']").set_input_files(
            {"name": "heads.safetensors", "mimeType": "application/octet-stream", "buffer": data}
        )
        wait_for_app(page)
        expect(page.get_by_text("Uploaded q, k, v: 4 head(s), n = 512, d = 128")).to_be_visible(timeout=60_000)
        page.wait_for_function("(sha) => window.location.href.includes('upload=' + sha)", arg=sha, timeout=30_000)
        assert "input=upload" in page.url, page.url


CUT_TEXT = """() => [...document.querySelectorAll("[data-testid='stFileUploaderDropzoneInstructions'] *")]
  .filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.innerText)"""


def test_the_uploaders_limits_line_is_not_cut(page: Page, app_server: str) -> None:
    # #42: in the sidebar's "Bring your own heads" expander at 1400 x 1000 it read "64MB per file • SAFETENSORS, N…".
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{app_server}/Compare")
    wait_for_app(page)
    page.get_by_text("Bring your own heads (upload a file)").click()
    expect(page.get_by_text("SAFETENSORS, NPZ", exact=False)).to_be_visible(timeout=15_000)
    # The expander opens with an animation; under load (CI, beside another worker) a check at its first frame found
    # the line cut. Wait up to 10 s for the opened layout, then check it.
    with contextlib.suppress(PlaywrightTimeoutError):
        page.wait_for_function(f"({CUT_TEXT})().length === 0", timeout=10_000)
    assert page.evaluate(CUT_TEXT) == []
