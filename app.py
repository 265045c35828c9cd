"""Attention Explorer: home page (entry point). Run with `streamlit run app.py`.

The other pages live in pages/ and are discovered by Streamlit's file-based multipage mechanism
(st.navigation is deliberately not used: with a folder named pages/ it breaks deep links on a fresh server).
"""

from __future__ import annotations

import streamlit as st

import ui
from core import device as core_device
from ui import home
from ui import lessons as ui_lessons
from ui.presets import PRESETS

ui.page("Attention Explorer", icon=":material/explore:", url_path="")
s = ui.sidebar()

st.markdown(
    "Softmax attention compares every token with every other token, so it stores an n × n matrix. "
    "Efficient methods keep only part of it: a **sparse** method keeps the few largest entries of each row "
    "(hashing similar queries and keys together), a **low-rank** method keeps a smooth summary of every row "
    "(random features or landmarks), and **sparse + low-rank** methods such as Scatterbrain combine both. "
    "Which one wins depends on the temperature: peaked rows (low τ, low entropy) favour sparse, flat rows "
    "(high τ, high entropy) favour low rank, and the middle needs both. Every page below runs the real "
    "engine at equal memory budget; every setting lives in the link, so you can share exactly what you see."
)
ui.explain(
    "Throughout the app the temperature τ divides the logits, β = 1/τ is the inverse temperature, and the "
    "mean row entropy H says how spread out each row is (0 = one key, ln n = uniform).",
    r"A_{ij} = \frac{\exp(q_i\cdot k_j/\tau)}{\sum_{l}\exp(q_i\cdot k_l/\tau)},\qquad "
    r"H = -\frac{1}{n}\sum_{i,j} A_{ij}\ln A_{ij}",
)

# Links are anchors that open in this tab (ui/home.py); a markdown link would open a new one.
st.subheader("Start here: preset links")
cols = st.columns(2)
for index, preset in enumerate(PRESETS):
    with cols[index % 2].container(border=True):
        st.markdown(home.preset_html(preset), unsafe_allow_html=True)
        st.caption(f"`{home.preset_target(preset)}`")

st.subheader("Guided lessons")
st.caption(
    "In teaching order. Each lesson walks a class through a few views with Next and Previous; the link keeps the step."
)
all_lessons = list(ui_lessons.lessons().values())
for start in range(0, len(all_lessons), 3):  # row by row, so the page reads them in teaching order
    lesson_cols = st.columns(3)
    for column, lesson in zip(lesson_cols, all_lessons[start : start + 3], strict=False):
        with column.container(border=True):
            st.markdown(home.lesson_html(lesson), unsafe_allow_html=True)
            st.caption(f"{len(lesson.steps)} steps · {lesson.source}")

st.subheader("Pages")
st.markdown(home.page_list_html(home.page_entries()), unsafe_allow_html=True)
st.subheader("For teachers: lesson links")
st.markdown(
    "Set up a page, copy its link from **Share this view** in the sidebar, and add `lesson=1&hide=...` with the "
    "controls students should not touch, for example `&lesson=1&hide=seed,device,n,d,heads,budget`. Hidden "
    "controls keep the link's values; everything else stays live. Any control's URL name works in `hide` "
    "(hover a control's :material/help: to see what it does; the share box shows the names in use)."
)
st.info(
    f"Computing on **{core_device.describe(s.device_used)}**. Available devices: "
    f"{', '.join(core_device.available_devices())}."
)
with st.expander("Running your own copy"):
    st.markdown(home.OWN_COPY)
ui.finish()
