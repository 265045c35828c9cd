"""The share box's link with a copy button: a small ``st.components.v2`` component instead of ``st.code``.

``st.code`` makes every page load Streamlit's syntax-highlighter chunk (1.5 MB of JavaScript) to show one URL, and
on a cold visit that work lands right beside the first chart (``python -m benchmarks.first_visit --baseline REF``
measures such a change).
This component is plain HTML, about 1 KB of script, mounted in the page (no iframe).

The link is set as text nodes, never as HTML: it carries the URL's parameters, which a stranger may write.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import streamlit as st

COMPONENT_NAME = "attention_explorer.share_link"
TEST_ID = "aeShareLink"  # the box's data-testid, for browser tests and page scripts

HTML = (
    f'<div class="ae-share-link" data-testid="{TEST_ID}">'
    '<code class="ae-share-url"></code>'
    '<button type="button" class="ae-share-copy" title="Copy the link" aria-label="Copy the link">'
    '<svg viewBox="0 0 24 24" width="16" height="16" aria-hidden="true"><path fill="currentColor" d="M16 1H4a2 2 0 '
    "0 0-2 2v14h2V3h12V1zm3 4H8a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h11a2 2 0 0 0 2-2V7a2 2 0 0 0-2-2zm0 16H8V7h11v14z"
    '"/></svg></button><span class="ae-share-status" role="status"></span></div>'
)

# The theme's own variables (Streamlit sets --st-* for v2 components), so the box matches light and dark themes.
CSS = """
.ae-share-link { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 0.25rem 0.5rem;
  background: var(--st-secondary-background-color); border-radius: var(--st-base-radius);
  padding: 0.6rem 0.5rem 0.6rem 0.75rem; }
.ae-share-url { flex: 1 1 0; min-width: 0; font-family: var(--st-code-font); font-size: 0.8rem;
  color: var(--st-text-color); background: transparent; overflow-wrap: anywhere; white-space: pre-wrap; }
.ae-share-copy { flex: none; border: none; background: transparent; color: var(--st-text-color); opacity: 0.7;
  cursor: pointer; padding: 0.1rem; line-height: 0; }
.ae-share-copy:hover, .ae-share-copy:focus-visible { opacity: 1; }
.ae-share-status { flex-basis: 100%; font-size: 0.75rem; color: var(--st-text-color); opacity: 0.7; }
.ae-share-status:empty { display: none; }
"""

# navigator.clipboard exists only in secure contexts (https, localhost). Over plain http the link is selected and
# copied with execCommand, which browsers still honour on a click; if that fails too the selection stays for Ctrl+C.
JS = """
export default function ({ data, parentElement }) {
  const url = parentElement.querySelector(".ae-share-url");
  const button = parentElement.querySelector(".ae-share-copy");
  const status = parentElement.querySelector(".ae-share-status");
  // Text nodes with a line-break opportunity after each "/", "?" and "&", so a long link wraps between its parts.
  url.replaceChildren(
    ...data.url.split(/(?<=[/?&])/).flatMap((part, index) => [
      ...(index ? [document.createElement("wbr")] : []),
      document.createTextNode(part),
    ])
  );
  button.onclick = async () => {
    let copied = false;
    try {
      await navigator.clipboard.writeText(data.url);
      copied = true;
    } catch (error) {
      const range = document.createRange();
      range.selectNodeContents(url);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      try { copied = document.execCommand("copy"); } catch (ignored) { copied = false; }
    }
    status.textContent = copied ? "Link copied." : "Selected: press Ctrl+C (⌘C) to copy.";
    clearTimeout(button.statusTimer);
    button.statusTimer = setTimeout(() => { status.textContent = ""; }, 2500);
  };
}
"""


@functools.cache
def renderer() -> Any:
    """The component's mount command, registered once per process (a name registered twice only logs a warning,
    but there is no reason to re-register it on every run)."""
    return st.components.v2.component(COMPONENT_NAME, html=HTML, css=CSS, js=JS, isolate_styles=False)


def share_link_box(url: str, key: str) -> None:
    """Draw ``url`` in a code-styled box with a copy button, where the current container is."""
    renderer()(data={"url": url}, key=key, height="content")


def links_in(app_test: Any) -> list[str]:
    """The links of every share box in a ``streamlit.testing`` AppTest run, in page order."""
    return [
        json.loads(element.proto.json)["url"]
        for element in app_test.get("bidi_component")
        if element.proto.component_name == COMPONENT_NAME
    ]
