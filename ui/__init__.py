"""Shared UI helpers for the Attention Explorer pages. A small, stable API; pages stay thin.

Guide for page authors
======================

A page (``pages/N_Title.py``, auto-discovered; never call ``st.navigation``; declare it in ``ui/page_registry.py``,
which the sidebar, Home, the lessons and the tests read) looks like this::

    import streamlit as st
    import ui

    ui.page("Compare", icon=":material/compare:")  # FIRST: page config + URL-state bookkeeping for this run
    s = ui.sidebar()                          # the shared sidebar -> ui.Settings (every control in the URL)
                                              # (a page with its own controls calls ui.navigation(st.sidebar))
    ui.explain("Two or three plain sentences for a student.", r"\\mathrm{softmax}(\\beta QK^\\top)")
    rank = ui.int_slider("Rank", "rank", 1, 64, 8)          # page control bound to ?rank=
    res = ui.computed.run(s, "performer", ui.method_controls(s, "performer"))   # cached engine call
    ui.show_figure(ui.heatmap(res.attention[s.head], "Performer", factor=res.factor),
                   "performer_heatmap", data={"attention": res.attention[s.head]})
    ui.finish()                               # LAST: notices, share link, settings download/upload

Shared settings (``ui.Settings`` from ``ui.sidebar()``; it parses and holds, it computes nothing)
    ``s.spec`` (hashable ``InputSpec``: source, n, d, heads, clusters, spread, seed, text, layer), ``s.tau``,
    ``s.beta`` (= 1/tau, pass as ``scale``), ``s.seed``, ``s.device_used``, ``s.fraction`` (budget), ``s.head``;
    the views it builds: ``s.exact_view()``, ``s.entropy_view()``, ``s.method_run(method, params)``.
    What a page asks the service for (``ui/computed.py``): ``computed.inputs(s)`` -> numpy q, k, v (H, n, d);
    ``computed.exact(s)``; ``computed.entropy(s)``; ``computed.run(s, method, params)`` -> ``MethodResult``
    (block-reduced attention/error maps, per-head metrics, memory, FLOPs, seconds); ``computed.parts(s, method,
    params, names)`` -> dense parts of the shown head; ``computed.drawn(s, matrix)`` in the display order. The field
    declarations are ``ui/fields.py``, the page links ``ui/navigation.py``. Keyword options of ``ui.sidebar``:
    ``sources=("clustered", "gaussian")`` to refuse the real model, ``max_n=1024``, ``show_budget=False``,
    ``defaults={"n": 256}``.

Fragments (a control reruns only the part of the page it affects)
    Put the controls and the results they drive in one ``@st.fragment`` function and call
    ``ui.finish_fragment()`` at its end: it redraws the sidebar's share link with the fragment's controls (and shows
    notices raised during a fragment rerun). ``ui.finish()`` still ends the page. Controls outside the fragment
    (the sidebar) rerun the whole page as before. A heavy view (``service.views.run``) works inside a fragment: a
    click there (Cancel, a knob) stops its wait at once, and a stopped job ends only the fragment on a fragment rerun.

Caching (the engine service, ``service/``: no Streamlit there)
    Every cached computation is a view (``service/views.py``): a frozen dataclass of every setting its result depends
    on, whose ``compute(report)`` reads only its own fields. Its cache key and job key are derived from the fields;
    never build a key by hand, and never call ``run_heavy`` or the result cache from a page (tests/test_view_keys.py
    checks both). ``service.views.run(view, estimate_seconds)`` checks the result cache (this process's memory
    layer, then the shared disk or Redis store), then computes at once (light) or in the process-wide scheduler
    (``service/scheduler.py``; the page shows the queue place, a progress bar and Cancel, drawn by ``ui/jobs.py``);
    ``service.views.lookup(view)`` only reads the cache. ``s.method_run(method, params)`` is the view of one method
    at the sidebar's settings; ``computed.run`` and ``computed.parts`` use it. No page or ``ui`` module caches a
    result with ``st.cache_data`` / ``st.cache_resource`` (tests/test_view_keys.py checks): make it a view, so the
    shared cache and ``service.placement`` (here, or a worker's device) apply. A measurement of the machine keys
    its host (``MethodWarmTiming``) or stays a process-local memo (``service.compute.gemm_gflops``).

Controls bound to the URL (``key`` = URL parameter; letters, digits and ``_`` only)
    ``ui.int_slider``, ``ui.int_input``, ``ui.float_slider``, ``ui.log_slider`` (numbers snap to options),
    ``ui.range_slider``, ``ui.choice`` (selectbox/radio/select_slider), ``ui.toggle``, ``ui.text_area``,
    ``ui.text_line``, ``ui.multiselect``, ``ui.method_picker``. All take ``help=`` and ``where=`` (a
    container, e.g. ``st.sidebar`` or a column). Bad URL values are clamped/snapped/reset with a visible
    notice; call ``ui.notice(msg)`` for your own.
    Method knobs: ``ui.method_controls(s, method, where=...)`` builds controls from the method's ParamSpecs,
    with keys ``<method>_<param>`` and a "Linked to budget" toggle ``<method>_linked``.
    Inside ``st.fragment`` functions the controls work the same way (the fragment reruns alone; the browser
    URL follows at once, the sidebar's share box on the next full rerun).

Figures and export
    ``ui.heatmap(matrix, title, kind="attention"|"error"|"mask"|"signed", log=..., factor=...)`` (Plotly,
    <= 512 x 512, block-reduce with ``ui.display(a)`` / ``ui.block_reduce``; caption with
    ``ui.downsample_caption(n, factor)``); ``ui.line_figure(title, x, y)`` for curves (add traces with
    ``ui.method_colour(name)``). ``ui.show_figure(fig, name, data=..., png=callable)`` draws it with an Export menu:
    full-resolution PNG (``png=lambda: ui.png_bytes(full_matrix, kind)``), HTML, data as CSV (DataFrame) or NPZ
    (dict of arrays, or a callable returning one), and settings JSON. Several maps side by side go in one
    figure, ``ui.heatmap_grid([[ui.GridCell(title, z, kind=...), ...], ...], columns=3)`` (one chart draws
    faster than many), with ``show_figure(..., parts={map name: {"png": ..., "data": ...}})`` for each map's
    own exports.

On-demand sections
    ``with ui.on_demand("Numbers behind the chart", "numbers_x") as open_: if open_: st.dataframe(...)``: an
    expander whose content is made and sent only once it is opened (a click reruns the page or fragment). For
    tables and other extras after a page's first chart, which would otherwise load in the browser with it.

Explanations
    ``ui.explain(text, latex)``: 2-3 plain sentences and the formula. Keep one per view.

Lesson mode
    ``?lesson=1&hide=seed,device,n`` hides those controls (any key, including page controls and method knobs);
    hidden controls keep the link's values. Nothing to do in a page: every ``ui`` control honours it.

Presenter view
    ``?present=1``: no sidebar, larger text, and the first chart or table of the page (and of each fragment, tab or
    expander) drawn first, under the title; the intro and controls follow it (``PRESENTER_CSS``). Nothing to do in a
    page, but a wide ``st.dataframe`` there scrolls columns out of view: draw a static ``st.table`` instead when
    ``ui.presenter_mode()``.

Temperature convention: logits = q.k / tau, beta = 1/tau. Synthetic inputs: ``scale=s.beta``. Real model:
q is pre-scaled, so tau = 1 is the model's own attention, and ``scale=s.beta`` again.
"""

from __future__ import annotations

import contextlib
import html
import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

import streamlit as st

import core  # noqa: F401 - before service.compute loads torch: core sets OpenMP's passive wait (deploy/serve.py sets it for the server)
from service.compute import MethodResult, display
from service.downsampling import DISPLAY_MAX, block_factor, block_reduce
from service.views import InputSpec, params_key
from ui import computed
from ui.fields import TAU_OPTIONS, fmt_fraction
from ui.figure_display import explain, show_figure
from ui.figures import (
    GridCell,
    attention_top,
    downsample_caption,
    heatmap,
    heatmap_grid,
    line_figure,
    method_colour,
    png_bytes,
)
from ui.jobs import estimate_seconds, run_heavy
from ui.navigation import navigation
from ui.page_lifecycle import (
    finish_fragment,
    fragment_rerun,
    hidden_keys,
    lesson_mode,
    notice,
    page_url,
    presenter_mode,
    settings_payload,
    within_limits,
)
from ui.settings import Settings
from ui.sidebar import (
    causal_only,
    device_control,
    method_controls,
    method_label,
    method_picker,
    param_key,
    registered_methods,
    sidebar,
)
from ui.widgets import (
    choice,
    float_slider,
    int_input,
    int_slider,
    log_slider,
    multiselect,
    range_slider,
    text_area,
    text_line,
    toggle,
)

__all__ = [
    "computed",
    "DISPLAY_MAX",
    "InputSpec",
    "MethodResult",
    "Settings",
    "StatusLine",
    "TAU_OPTIONS",
    "block_factor",
    "block_reduce",
    "choice",
    "device_control",
    "display",
    "GridCell",
    "attention_top",
    "downsample_caption",
    "estimate_seconds",
    "explain",
    "finish",
    "finish_fragment",
    "float_slider",
    "fragment_rerun",
    "fmt_fraction",
    "heatmap",
    "heatmap_grid",
    "hidden_keys",
    "int_input",
    "int_slider",
    "lesson_mode",
    "line_figure",
    "presenter_mode",
    "log_slider",
    "method_colour",
    "method_controls",
    "method_label",
    "causal_only",
    "method_picker",
    "navigation",
    "multiselect",
    "notice",
    "on_demand",
    "page",
    "page_url",
    "param_key",
    "params_key",
    "png_bytes",
    "range_slider",
    "registered_methods",
    "run_heavy",
    "settings_payload",
    "show_figure",
    "sidebar",
    "text_area",
    "text_line",
    "toggle",
    "within_limits",
]


# Presenter view: no sidebar, and every font (Streamlit sizes text in rem) larger for a projector. The main chart
# comes first: in each block (the page, a fragment, a tab; not inside columns) the first child holding a chart or a
# table moves up by CSS order, just under the title row, so on a 1280 x 720 screen it is in view before the intro
# and controls (they follow it). The exit link sits in the title row, in the page flow, so it covers nothing.
PRESENTER_CSS = """<style>
html {font-size: 21px;}
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"]
  {display: none !important;}
[data-testid="stMetricValue"] {font-size: 2.4rem;}
[data-testid="stMainBlockContainer"] {padding-top: 3.9rem; max-width: 100%;}
:has(> .st-key-ae_present_top) {order: -3;}
.st-key-ae_present_top h1 {padding: 0; font-size: 2.2rem;}
:has(> .st-key-ae_lesson) {order: -3;}
.st-key-ae_lesson {gap: 0.15rem; padding: 0.45rem 0.8rem !important;}
.st-key-ae_lesson h3 {font-size: 1.15rem; padding: 0; line-height: 1.4;}
.st-key-ae_lesson [data-testid="stMarkdownContainer"], .st-key-ae_lesson [data-testid="stHeading"],
  .st-key-ae_lesson [data-testid="stCaptionContainer"], .st-key-ae_lesson h3, .st-key-ae_lesson p
  {margin: 0 !important;}
.st-key-ae_lesson p, .st-key-ae_lesson a, .st-key-ae_lesson span {font-size: 0.74rem; line-height: 1.35;}
.st-key-ae_lesson .ae-lesson-nav a, .st-key-ae_lesson .ae-lesson-nav span {padding: 0.15rem 0.7rem;}
[data-testid="stMain"] [data-testid="stVerticalBlock"]:not([data-testid="stColumn"] *)
  > :nth-child(1 of :has([data-testid="aePlotlyChart"], [data-testid="stPlotlyChart"], [data-testid="stDataFrame"],
  [data-testid="stTable"])) {order: -1;}
.ae-exit-present {font-size: 0.7rem; padding: 0.2rem 0.6rem; border-radius: 0.4rem; color: inherit;
  border: 1px solid rgba(151, 166, 195, 0.6); text-decoration: none; white-space: nowrap;}
</style>"""


# Every page: Streamlit's own page list hidden (the shared sidebar draws links that keep the settings), metric
# labels wrapped instead of cut ("LSH sparse (Reformer/SMYRF)" ended in "…" on a 1280 px screen), a
# multiselect's chips wrapped onto more lines instead of scrolled out of a narrow field ("nystro…"), and an uploader's
# limits line wrapped ("64MB per file • SAFETENSORS, N…" in the sidebar's expander).
PAGE_CSS = """<style>
[data-testid='stSidebarNav'], [data-testid='stSidebarNavSeparator'] {display: none;}
[data-testid='stMetricLabel'], [data-testid='stMetricLabel'] * {white-space: normal !important;
  overflow: visible !important; text-overflow: clip !important; height: auto !important;}
[data-testid='stMultiSelectTagsContainer'] {flex-wrap: wrap !important; overflow: visible !important;
  height: auto !important;}
div:has(> [data-testid='stMultiSelectTagsContainer']) {height: auto !important; max-height: none !important;}
[data-testid='stFileUploaderDropzoneInstructions'] * {white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important;}
</style>"""


def page(title: str, icon: str = ":material/insights:", url_path: str | None = None) -> Any:
    """Start a page: page config, then URL-state bookkeeping. Call first on every page.

    icon: a Material icon name such as ":material/compare:" (emoji need an emoji font on the viewer's machine).
    url_path: the page's URL path (defaults to the title with spaces as underscores, as Streamlit names
    files in pages/, e.g. "Sparse_plus_low_rank").
    """
    from ui import lessons, page_lifecycle, url_params

    st.set_page_config(page_title=f"{title} · Attention Explorer", page_icon=icon, layout="wide")
    # The shared sidebar draws its own navigation (Home instead of "app", and links that keep the settings).
    st.set_option("client.showSidebarNavigation", False)
    # On a fresh server the first page has already been sent Streamlit's own navigation; PAGE_CSS hides it there too.
    st.html(PAGE_CSS)
    if page_lifecycle.presenter_mode():
        st.html(PRESENTER_CSS)
        focus = url_params.plain_param(url_params.FOCUS_KEY) or ""
        if re.fullmatch(r"[A-Za-z0-9_]{1,40}", focus):  # ?focus=split: that figure first (before the first chart)
            st.html(
                '<style>[data-testid="stMain"] [data-testid="stVerticalBlock"]:not([data-testid="stColumn"] *)'
                f" > :is(.st-key-chart_{focus}, :has(.st-key-chart_{focus})) {{order: -2;}}</style>"
            )
        kept = [(k, v) for k, values in url_params.raw_params().items() if k != url_params.PRESENT_KEY for v in values]
        top = st.container(horizontal=True, vertical_alignment="center", key="ae_present_top")
        top.title(title)
        top.markdown(
            f'<a class="ae-exit-present" href="?{html.escape(urllib.parse.urlencode(kept, safe=",/"), quote=True)}" '
            'target="_self">Exit presenter view</a>',
            unsafe_allow_html=True,
            width="content",
        )
    else:
        st.title(title)
    page_state = page_lifecycle.begin_page(title, url_path if url_path is not None else title.replace(" ", "_"))
    withheld = False  # a class room's open question: the step's text, which explains its answer, waits for Reveal
    if url_params.plain_param(url_params.ROOM_KEY) is not None or "_ae_room" in st.session_state:
        from ui import room

        room.begin(page_state.url_path)
        withheld = room.answers_hidden()
    lessons.lesson_panel(
        url_params.plain_param(url_params.GUIDE_KEY), url_params.plain_param(url_params.STEP_KEY), withheld
    )
    return page_state


class StatusLine:
    """A one-line status for a computation (running, then complete or error), drawn as a caption.

    ``st.status`` in Streamlit 1.67 sleeps 50 ms when it is created (so that a quick update is not lost), and on the
    2-core reference machine a py-spy profile of a cold Error vs entropy open spent about 0.09 s there, before the
    sweep. This line costs one element and no wait.
    """

    ICONS = {
        "running": ":material/progress_activity:",
        "complete": ":material/check_circle:",
        "error": ":material/error:",
    }

    def __init__(self, label: str) -> None:
        self._slot = st.empty()
        self.update(label, "running")

    def update(self, label: str, state: str = "running") -> None:
        self._slot.caption(f"{self.ICONS[state]} {label}")


@contextlib.contextmanager
def on_demand(label: str, key: str) -> Iterator[bool]:
    """An expander whose content is made and sent only while it is open: ``with ui.on_demand(...) as open_: if
    open_: ...``. Opening it reruns the page (or its fragment). For tables behind a chart: a closed expander's
    ``st.dataframe`` still loads and mounts the grid in the browser, and on a cold first visit that took the same
    cores as the chart it follows. ``key`` (session state ``open_<key>``) lets a test open it."""
    box = st.expander(label, key=f"open_{key}", on_change="rerun")
    with box:
        yield bool(box.open)


def finish() -> None:
    """End a page: show notices, the share link and settings download/upload. Call last on every page."""
    from ui import page_lifecycle

    page_lifecycle.finish_page()
