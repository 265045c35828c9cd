"""Attention Explorer: home page (entry point). Run with `streamlit run app.py`.

The other pages live in pages/ and are discovered by Streamlit's file-based multipage mechanism
(st.navigation is deliberately not used: with a folder named pages/ it breaks deep links on a fresh server).
"""

from __future__ import annotations

import streamlit as st

import ui
from core import device as core_device
from ui import lessons as ui_lessons

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

PRESETS = [
    (
        "Low temperature: sparse wins",
        "Compare",
        "tau=0.05&clusters=32&methods=performer&methods=lsh&methods=scatterbrain",
        "Rows are peaked on the few keys of the same cluster. LSH finds them; random features smear them out.",
    ),
    (
        "High temperature: low rank wins",
        "Compare",
        "tau=1&clusters=32&methods=performer&methods=lsh&methods=scatterbrain",
        "Rows are nearly flat. A few random features describe them well; a sparse pattern misses most of the mass.",
    ),
    (
        "The middle: sparse + low rank wins",
        "Compare",
        "tau=0.2&clusters=32&methods=performer&methods=lsh&methods=scatterbrain",
        "Rows have a peak inside the cluster and a broad background. Scatterbrain keeps the peak exactly and "
        "estimates the background, beating both parts alone.",
    ),
    (
        "A real MiniLM head",
        "Compare",
        "input=real&layer=2&head=3&tau=1&methods=performer&methods=lsh&methods=scatterbrain&methods=nystrom",
        "The pretrained all-MiniLM-L6-v2 model on a paragraph of text; τ = 1 is the model's own attention.",
    ),
    (
        "Scatterbrain's split, step by step",
        "Sparse_plus_low_rank",
        "tau=0.2&clusters=32",
        "The hash buckets, the sparse correction, the low-rank part, and why adding them naively double-counts.",
    ),
    (
        "Error vs entropy sweep",
        "Error_vs_entropy",
        "clusters=32",
        "Sweep the temperature and watch the sparse and low-rank curves cross (the paper's Fig. 1).",
    ),
    (
        "Who wins where: the (β, σ) map",
        "Regime_map",
        "clusters=32",
        "The winner over inverse temperature and cluster spread, with Theorem 1's regimes.",
    ),
]

st.subheader("Start here: preset links")
base = ""
try:
    base = (st.context.url or "").rstrip("/")
except Exception:  # noqa: BLE001 - no browser context (tests)
    base = ""
cols = st.columns(2)
for index, (title, path, query, text) in enumerate(PRESETS):
    url = f"{base}/{path}?{query}" if base else f"{path}?{query}"
    with cols[index % 2].container(border=True):
        st.markdown(f"**[{title}]({url})**  \n{text}")
        st.caption(f"`{path}?{query}`")

st.subheader("Guided lessons")
st.caption("Each lesson walks a class through a few views with Next and Previous; the link keeps the step.")
lesson_cols = st.columns(3)
for index, lesson in enumerate(ui_lessons.lessons().values()):
    with lesson_cols[index % 3].container(border=True):
        st.markdown(f"**[{lesson.title}]({lesson.step_url(0)})**  \n{lesson.summary}")
        st.caption(f"{len(lesson.steps)} steps · {lesson.source}")

st.subheader("Pages")
st.markdown(
    "- **Compare**: exact attention next to each method's heatmap and error map, with a metrics table.\n"
    "- **Sparse plus low rank**: Scatterbrain's split — LSH buckets, support, sparse and low-rank parts, the "
    "naive double-counting sum, the robust-PCA oracle, the spectrum, and the paper's Fig. 4.\n"
    "- **Error vs entropy**: a temperature sweep with the crossover marked (or 72 heads of the real model).\n"
    "- **Regime map**: which method wins over (β, σ), and by how much sparse + low rank helps."
)
st.subheader("For teachers: lesson links")
st.markdown(
    "Set up a page, copy its link from **Share this view** in the sidebar, and add `lesson=1&hide=...` with the "
    "controls students should not touch, for example `&lesson=1&hide=seed,device,n,d,heads,budget`. Hidden "
    "controls keep the link's values; everything else stays live. Any control's URL name works in `hide` "
    "(hover a control's ❔ to see what it does; the share box shows the names in use)."
)
st.info(
    f"Computing on **{core_device.describe(s.device_used)}**. Available devices: "
    f"{', '.join(core_device.available_devices())}."
)
ui.finish()
