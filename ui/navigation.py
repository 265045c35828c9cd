"""Navigation: links to every page that carry the shared settings (and the lesson flags) to the next page."""

from __future__ import annotations

import html
import re
import urllib.parse
from typing import Any

from ui import page_lifecycle, page_registry, url_params
from ui.fields import SHARED_KEYS

NAV_CSS = """<style>
.ae-nav a {display: block; padding: 0.25rem 0.6rem; margin: 0.05rem 0; border-radius: 0.4rem; color: inherit;
           text-decoration: none; font-size: 0.95rem;}
.ae-nav a:hover {background: rgba(151, 166, 195, 0.15);}
.ae-nav a.ae-current {background: rgba(151, 166, 195, 0.25); font-weight: 600;}
</style>"""


def navigation(where: Any) -> None:
    """Links to every page that carry the shared sidebar settings (and lesson flags) to the next page.

    Plain links (a full page load) rather than st.page_link: Streamlit's in-app page switch drops query
    parameters bound to the previous page's widgets, and a full load gives the address bar the settings.
    """
    page_state = page_lifecycle.current()
    carried: list[tuple[str, str]] = []
    for key in SHARED_KEYS:
        control = page_state.controls.get(key)
        if control is None or control.value == control.default:
            continue
        url_value = control.to_url(control.value)
        carried += [(key, v) for v in (url_value if isinstance(url_value, list) else [url_value])]
    if page_lifecycle.lesson_mode():
        carried.append((url_params.LESSON_KEY, "1"))
        hide = ",".join(sorted(k for k in page_lifecycle.hidden_keys() if re.fullmatch(r"[A-Za-z0-9_]{1,40}", k)))
        if hide:
            carried.append((url_params.HIDE_KEY, hide))
    query = urllib.parse.urlencode(carried, safe=",/")
    items = []
    for path, label in ((p.url_path, p.label) for p in page_registry.ALL_PAGES):
        href = url_params.keep_presenter((path or "./") + (f"?{query}" if query else ""))
        current = ' class="ae-current"' if path == page_state.url_path else ""
        items.append(f'<a href="{html.escape(href, quote=True)}" target="_self"{current}>{html.escape(label)}</a>')
    where.markdown(NAV_CSS + '<nav class="ae-nav">' + "".join(items) + "</nav>", unsafe_allow_html=True)
    present = [(k, v) for k, values in url_params.raw_params().items() if k != url_params.PRESENT_KEY for v in values]
    present_href = "?" + urllib.parse.urlencode([*present, (url_params.PRESENT_KEY, "1")], safe=",/")
    where.markdown(
        f'<nav class="ae-nav"><a href="{html.escape(present_href, quote=True)}" target="_self">'
        "Presenter view (projector)</a></nav>",
        unsafe_allow_html=True,
        help="Hides this sidebar and enlarges every font for the back of a room; the link keeps it.",
    )
    where.divider()
