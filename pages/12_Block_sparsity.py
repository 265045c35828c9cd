"""Block sparsity: each sparse or routed method's support as a block-sparse kernel sees it, in tiles of 64 or 128
positions, with the time that costs on this device and a FlexAttention file that builds the same BlockMask."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import core
import service.compute
import service.views
import ui
from core import block_sparsity, flex_export, limits
from ui.figures import block_sparsity as block_figs

DEFAULT_METHODS = ["lsh", "local", "nsa", "moba"]

ui.page("Block sparsity", icon=":material/grid_view:")
s = ui.sidebar(max_n=block_sparsity.MAX_N, show_head=False, defaults={"n": 1024, "heads": 2}, causal=True)
ui.explain(
    "A GPU kernel computes attention in tiles of 64 × 64 or 128 × 128 scores, and it can skip a tile only when "
    "none of its entries is in the support. So what a sparse method saves on a GPU is the fraction of TILES it "
    "touches, not the fraction of entries it keeps: an LSH support that keeps 1/8 of the entries, scattered over "
    "random positions, touches nearly every tile; a window or a routed support of the same size can touch far "
    "fewer. Here each method runs at the sidebar budget, and its support is cut into tiles.",
    r"\text{tiles touched} = \frac{|\{(I,J) : \exists\, (i,j) \in S,\ i \in I,\ j \in J\}|}{\lceil n/b \rceil^2}"
    r"\ \ge\ \text{entries kept} = \frac{|S|}{n^2}",
)
registered = list(ui.registered_methods())
offered = block_sparsity.support_methods()
c = st.columns([2.6, 1.2, 1.4])
methods = ui.multiselect(
    "Methods (those with a sparse support)",
    "methods",
    offered,
    DEFAULT_METHODS,
    where=c[0],
    help="Sparse, routed-sparse and sparse + low-rank methods: their supports (for NSA its selected blocks and window, "
    "for Scatterbrain and Based their exact part).",
)
block = ui.choice(
    "Kernel tile (b × b)",
    "block",
    list(block_sparsity.BLOCK_SIZES),
    block_sparsity.DEFAULT_BLOCK,
    where=c[1],
    help="FlashAttention and FlexAttention use 64 or 128 (FlexAttention's default BlockMask tile is 128).",
)
shown = ui.choice("Maps of", "maps_of", methods or offered, (methods or offered)[0], where=c[2])
colours = {m: ui.method_colour(m) for m in offered}
labels = {m: ui.method_label(m) for m in offered}


def study_estimate(n: int) -> limits.Estimate:
    # each method once with its n x n support, and the timed block-sparse runs on one head
    return limits.compare_estimate({m: {} for m in methods}, n, s.d, s.heads)


if not methods:
    st.info("Pick at least one method.")
elif ui.within_limits(lambda: limits.check_knobs([("n", s.n, limits.sizes_up_to(s.n), study_estimate)])):
    view = service.views.BlockSparsityStudy(
        inputs=s.spec,
        beta=s.beta,
        fraction=s.fraction,
        methods=tuple(methods),
        block=int(block),
        causal=s.causal,
        seed=s.seed,
        device=s.device_name,
    )
    try:
        study: block_sparsity.BlockStudy = service.views.run(
            view, study_estimate(s.n).seconds, title="Cutting the supports into tiles and timing them"
        )
    except (ValueError, RuntimeError) as exc:
        st.error(f"The block view could not run with these settings: {exc}")
        ui.finish()
        st.stop()
    metric_cols = st.columns(len(study.rows))
    for col, row in zip(metric_cols, study.rows, strict=True):
        col.metric(
            labels[row["method"]],
            f"{100 * row['blocks_touched']:.0f}% of tiles",
            f"{100 * row['entries_kept']:.1f}% of entries",
            delta_color="off",
            help="Tiles a block-sparse kernel computes at this tile size, and (below) the entries the support keeps.",
        )
    # Side by side on a screen; stacked on a projector, where each chart needs the full width for its larger legend.
    left, right = (st.container(), st.container()) if ui.presenter_mode() else st.columns(2)
    with left:
        ui.show_figure(
            block_figs.fractions_figure(study.rows, labels, colours), "block_fractions", key="block_fractions"
        )
    with right:
        ui.show_figure(
            block_figs.timing_figure(study.rows, labels, colours, device=study.device),
            "block_timing",
            key="block_timing",
        )
    st.caption(
        f"Time: one head, the fastest of a few warm runs on this server ({study.device}), of the same PyTorch "
        "block-sparse computation (one fused SDPA call per row of query tiles, over the key tiles that row "
        "touches) on each method's tiles and on every tile, beside dense SDPA. It follows the tiles touched, not "
        "the entries kept. A measurement of this machine at this moment, not a promise for a GPU kernel."
    )
    if shown in study.entry_maps:
        ui.show_figure(
            block_figs.maps_figure(
                study.entry_maps[shown],
                study.block_maps[shown],
                label=labels[shown],
                block=study.block,
                factor=study.map_factor,
            ),
            "block_maps",
            key="block_maps",
        )
        st.subheader("Export to FlexAttention")
        support, params = block_sparsity.method_support(
            shown, *service.compute.tensors(s.spec, service.compute.resolve(s.device_name)), scale=s.beta,
            fraction=s.fraction, seed=s.seed, causal=s.causal,
        )  # fmt: skip
        try:
            source = flex_export.flex_file(
                support,
                block=study.block,
                scale=float(s.beta),
                method=shown,
                summary=f"{labels[shown]} at budget {ui.fmt_fraction(s.fraction)}, n = {s.n}, "
                f"{'causal, ' if s.causal else ''}parameters: " + ", ".join(f"{k}={v}" for k, v in params.items()),
            )
        except core.ParameterError as exc:
            st.info(f"No export at this size: {exc}")
        else:
            st.download_button(
                f"Download flex_{shown}.py",
                source,
                file_name=f"flex_{shown}.py",
                mime="text/x-python",
                key="flex_export",
                icon=":material/download:",
                help="A runnable file: it decodes this support, builds the same BlockMask at this tile size and calls "
                "torch.nn.attention.flex_attention (softmax over the support). Run it with no arguments to check it "
                "against a masked softmax, or with IN.pt OUT.pt for your q, k, v.",
            )
            st.caption(
                f"{len(source) / 1024:.0f} KiB, generated from the support alone: {s.heads} head(s) × {s.n}² bits, "
                "compressed, with the tile size and the scale."
            )
    with ui.on_demand("Numbers behind the charts", "numbers_block") as open_:
        if open_:
            st.dataframe(pd.DataFrame(study.rows), hide_index=True)
ui.finish()
