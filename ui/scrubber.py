"""The temperature scrubber: a Plotly figure whose frames hold every view at a grid of temperatures.

Dragging its slider or pressing ▶ changes the picture in the browser (Plotly frames), with no server round trip.
``scrub_figure`` is a pure builder, ``(views) -> go.Figure``; ``scrubber_section`` draws it on a page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from core.scrub import ScrubViews, SplitViews
from service.scheduler import estimate_seconds
from service.views import SplitScrub, TemperatureScrub, method_params, params_key
from service.views import run as run_view
from ui.figures.palette import method_colour, other_colour
from ui.plotly_chart import plotly_chart

LOG_FLOOR = 1e-6  # attention maps are drawn as log10(weight), floored here


def _log(a: np.ndarray) -> np.ndarray:
    return np.log10(np.maximum(a, LOG_FLOOR)).astype(np.float32)


def frame_title(views: ScrubViews, index: int, labels: Mapping[str, str]) -> str:
    errors = " · ".join(f"{labels.get(m, m)} {views.error[m][index]:.3f}" for m in views.attention)
    return f"τ = {views.taus[index]:g}, H = {views.entropy[index]:.2f} nats · error: {errors}"


def short_labels(labels: Mapping[str, str]) -> dict[str, str]:
    return {m: label.split(" (")[0] for m, label in labels.items()}


def scrub_figure(
    views: ScrubViews, labels: Mapping[str, str] | None = None, *, start: int = 0, height: int = 620
) -> go.Figure:
    """Exact and each method (top row), the error-vs-entropy curves and each error map (bottom row), one frame per
    temperature. Colour ranges are fixed over all frames so colours compare across temperatures."""
    # Short names ("Scatterbrain", not "Scatterbrain (sparse + low-rank)"): four panels share one row.
    labels = short_labels(labels or {})
    methods = list(views.attention)
    columns = 1 + len(methods)
    titles = ["Exact softmax", *(labels.get(m, m) for m in methods), "Error vs entropy"]
    titles += [f"{labels.get(m, m)} − exact" for m in methods]
    fig = make_subplots(rows=2, cols=columns, subplot_titles=titles, horizontal_spacing=0.04, vertical_spacing=0.12)
    bound = max((float(np.abs(e).max()) for e in views.error_map.values()), default=1.0) or 1.0
    attention_style = {"colorscale": "Viridis", "zmin": np.log10(LOG_FLOOR), "zmax": 0.0, "showscale": False}
    error_style = {"colorscale": "RdBu_r", "zmin": -bound, "zmax": bound, "zmid": 0.0, "showscale": False}

    def heatmaps(index: int) -> list[go.Heatmap]:
        traces = [go.Heatmap(z=_log(views.exact[index]), name="exact", **attention_style)]
        traces += [go.Heatmap(z=_log(views.attention[m][index]), name=m, **attention_style) for m in methods]
        traces += [go.Heatmap(z=views.error_map[m][index], name=f"{m} error", **error_style) for m in methods]
        return traces

    def markers(index: int) -> list[go.Scatter]:
        return [
            go.Scatter(
                x=[views.entropy[index]],
                y=[views.error[m][index]],
                mode="markers",
                marker={"size": 13, "color": method_colour(m), "line": {"width": 2, "color": "black"}},
                showlegend=False,
                hoverinfo="skip",
            )
            for m in methods
        ]

    first = heatmaps(start)
    for column, trace in enumerate(first[:columns], start=1):
        fig.add_trace(trace, row=1, col=column)
    for column, trace in enumerate(first[columns:], start=2):
        fig.add_trace(trace, row=2, col=column)
    for m in methods:
        fig.add_trace(
            go.Scatter(
                x=views.entropy,
                y=views.error[m],
                mode="lines",
                name=labels.get(m, m),
                line={"color": method_colour(m)},
            ),
            row=2,
            col=1,
        )
    for trace in markers(start):
        fig.add_trace(trace, row=2, col=1)
    moving = list(range(columns + len(methods))) + [columns + 2 * len(methods) + i for i in range(len(methods))]
    fig.frames = [
        go.Frame(
            name=str(index),
            data=[*heatmaps(index), *markers(index)],
            traces=moving,
            layout={"title": {"text": frame_title(views, index, labels)}},
        )
        for index in range(len(views.taus))
    ]
    for row, column in [(1, c) for c in range(1, columns + 1)] + [(2, c) for c in range(2, columns + 1)]:
        fig.update_yaxes(autorange="reversed", showticklabels=False, row=row, col=column)
        fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False, row=row, col=column)
        fig.update_yaxes(showgrid=False, zeroline=False, row=row, col=column)
        fig.update_yaxes(scaleanchor=f"x{(row - 1) * columns + column}", row=row, col=column)
    fig.update_xaxes(title_text="entropy H (nats)", row=2, col=1)
    fig.update_yaxes(title_text="relative error", rangemode="tozero", row=2, col=1)
    fig.update_layout(
        title={"text": frame_title(views, start, labels), "font": {"size": 15}},
        height=height,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        legend={
            "orientation": "v",
            "x": 0.005,
            "xanchor": "left",
            "y": 0.42,
            "yanchor": "top",
            "bgcolor": "rgba(255,255,255,0.7)",
        },
        **_slider_and_play(views.taus, start),
    )
    return fig


def split_frame_title(views: SplitViews, index: int) -> str:
    return (
        f"τ = {views.taus[index]:g} · error: Scatterbrain {views.error['attention'][index]:.3f}, "
        f"naive sum {views.error['naive_sum'][index]:.3f} · naive on Ω ≈ {views.double_count[index]:.2f} × exact"
    )


def _slider_and_play(views_taus: np.ndarray, start: int) -> dict[str, object]:
    """The layout's slider and ▶ / ❚❚ buttons that animate the frames named "0", "1", …"""
    steps = [
        {
            "label": f"{tau:g}",
            "method": "animate",
            "args": [
                [str(index)],
                {"mode": "immediate", "frame": {"duration": 0, "redraw": True}, "transition": {"duration": 0}},
            ],
        }
        for index, tau in enumerate(views_taus)
    ]
    play = {"frame": {"duration": 450, "redraw": True}, "fromcurrent": True, "transition": {"duration": 0}}
    return {
        "sliders": [
            {
                "active": start,
                "x": 0.18,
                "len": 0.82,
                "currentvalue": {"prefix": "τ = ", "font": {"size": 15}, "xanchor": "right"},
                "pad": {"t": 40},
                "steps": steps,
            }
        ],
        "updatemenus": [
            {
                "type": "buttons",
                "direction": "left",
                "x": 0,
                "y": 0,
                "xanchor": "left",
                "yanchor": "top",
                "pad": {"t": 50, "r": 10},
                "buttons": [
                    {"label": "▶ Play", "method": "animate", "args": [None, play]},
                    {
                        "label": "❚❚",
                        "method": "animate",
                        "args": [[None], {"mode": "immediate", "frame": {"duration": 0, "redraw": False}}],
                    },
                ],
            }
        ],
    }


def split_scrub_figure(views: SplitViews, *, start: int = 0, height: int = 640) -> go.Figure:
    """Scatterbrain's split at every temperature: exact, S + L and the naive sum (top row), the sparse correction S,
    the low-rank part L and both errors against the temperature (bottom row). Fixed colour ranges over frames."""
    titles = ["Exact softmax", "S + L (Scatterbrain)", "Naive sum (double counts)", "Sparse correction S"]
    titles += ["Low-rank part L", "Error vs τ"]
    fig = make_subplots(rows=2, cols=3, subplot_titles=titles, horizontal_spacing=0.05, vertical_spacing=0.12)
    bound = (
        float(np.quantile(np.abs(views.parts["sparse"][views.parts["sparse"] != 0]), 0.99))
        if np.any(views.parts["sparse"])
        else 1.0
    )
    attention_style = {"colorscale": "Viridis", "zmin": np.log10(LOG_FLOOR), "zmax": 0.0, "showscale": False}
    signed_style = {"colorscale": "RdBu_r", "zmin": -bound, "zmax": bound, "zmid": 0.0, "showscale": False}
    placed = [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2)]

    def heatmaps(index: int) -> list[go.Heatmap]:
        return [
            go.Heatmap(z=_log(views.exact[index]), name="exact", **attention_style),
            go.Heatmap(z=_log(views.parts["attention"][index]), name="S + L", **attention_style),
            go.Heatmap(z=_log(views.parts["naive_sum"][index]), name="naive sum", **attention_style),
            go.Heatmap(z=views.parts["sparse"][index], name="S", **signed_style),
            go.Heatmap(z=_log(np.maximum(views.parts["low_rank"][index], 0.0)), name="L", **attention_style),
        ]

    curves = {
        "attention": ("Scatterbrain (S + L)", method_colour("scatterbrain")),
        "naive_sum": ("naive sum", other_colour(0)),  # not a method
    }

    def markers(index: int) -> list[go.Scatter]:
        return [
            go.Scatter(
                x=[views.taus[index]],
                y=[views.error[name][index]],
                mode="markers",
                marker={"size": 13, "color": colour, "line": {"width": 2, "color": "black"}},
                showlegend=False,
                hoverinfo="skip",
            )
            for name, (_, colour) in curves.items()
        ]

    for (row, column), trace in zip(placed, heatmaps(start), strict=True):
        fig.add_trace(trace, row=row, col=column)
    for name, (label, colour) in curves.items():
        fig.add_trace(
            go.Scatter(x=views.taus, y=views.error[name], mode="lines", name=label, line={"color": colour}),
            row=2,
            col=3,
        )
    for trace in markers(start):
        fig.add_trace(trace, row=2, col=3)
    moving = [0, 1, 2, 3, 4, 7, 8]  # the five maps and the two markers (traces 5, 6 are the fixed curves)
    fig.frames = [
        go.Frame(
            name=str(index),
            data=[*heatmaps(index), *markers(index)],
            traces=moving,
            layout={"title": {"text": split_frame_title(views, index)}},
        )
        for index in range(len(views.taus))
    ]
    for row, column in placed:
        axis = (row - 1) * 3 + column
        fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False, row=row, col=column)
        fig.update_yaxes(
            autorange="reversed", showticklabels=False, showgrid=False, zeroline=False, row=row, col=column
        )
        fig.update_yaxes(scaleanchor=f"x{axis}" if axis > 1 else "x", row=row, col=column)
    fig.update_xaxes(title_text="temperature τ", type="log", row=2, col=3)
    fig.update_yaxes(title_text="relative error", rangemode="tozero", row=2, col=3)
    fig.update_layout(
        title={"text": split_frame_title(views, start), "font": {"size": 15}},
        height=height,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
        legend={"orientation": "h", "x": 1.0, "xanchor": "right", "y": 0.44, "yanchor": "bottom"},
        **_slider_and_play(views.taus, start),
    )
    return fig


# ------------------------------------------------------------------ drawing on a page (Streamlit)

GRID_HALF_WIDTH = 6  # temperatures each side of the current one: one decade of the slider's grid


def tau_grid(tau: float, options: list[float], half_width: int = GRID_HALF_WIDTH) -> list[float]:
    """Consecutive values of the server slider's grid centred on ``tau`` (so grid frames match slider values)."""
    centre = min(range(len(options)), key=lambda i: abs(np.log(options[i] / tau)))
    low = max(0, min(centre - half_width, len(options) - (2 * half_width + 1)))
    return list(options[low : low + 2 * half_width + 1])


def scrubber_section(settings: object, methods: list[str], params: Mapping[str, Mapping[str, object]]) -> None:
    """A toggle; when on, precompute every view on a temperature grid once and animate it in the browser."""
    from ui import widgets
    from ui.fields import TAU_OPTIONS
    from ui.sidebar import method_label

    s = settings  # ui.Settings
    on = widgets.toggle(
        "Scrub the temperature in the browser",
        "scrub",
        False,
        help="Precomputes every view below at 13 temperatures in one batched call, then the slider and ▶ Play "
        "move through them in your browser with no server round trip. The sidebar's τ still sets any other value.",
    )
    if not on or not methods:
        return
    side = int(
        widgets.choice(
            "Scrubber pixels",
            "scrub_px",
            [32, 48, 64, 96],
            48,
            help="Side of each map in the scrubber (block maximum). The payload grows with its square.",
        )
    )
    taus = tau_grid(s.tau, list(TAU_OPTIONS))  # type: ignore[attr-defined]
    view = TemperatureScrub(
        inputs=s.spec,  # type: ignore[attr-defined]
        head=s.head,  # type: ignore[attr-defined]
        device=s.device_name,  # type: ignore[attr-defined]
        methods=tuple(methods),
        params=method_params(methods, params),
        betas=tuple(1.0 / t for t in taus),
        seed=s.seed,  # type: ignore[attr-defined]
        side=side,
        by_cluster=s.by_cluster,  # type: ignore[attr-defined]
    )
    # Exact and each method at every temperature of the grid, on one head (a few passes over n x n each).
    estimate = estimate_seconds(len(taus) * (1 + len(methods)) * view.inputs.n**2 * 4)
    try:
        with st.spinner("Precomputing every temperature…"):
            views = cast(ScrubViews, run_view(view, estimate, title="Precomputing every temperature"))
    except ValueError as exc:  # core.ParameterError: n too large, a bad knob
        st.error(f"Temperature scrubber: {exc}")
        return
    labels = {m: method_label(m) for m in methods}
    start = int(np.argmin(np.abs(np.log(views.taus / s.tau))))  # type: ignore[attr-defined]
    fig = scrub_figure(views, labels, start=start)
    plotly_chart(fig, key="scrubber_chart", config={"displaylogo": False})
    st.caption(
        f"{len(taus)} temperatures from τ = {taus[0]:g} to {taus[-1]:g}, head {s.head}, maps {side} × {side} "  # type: ignore[attr-defined]
        f"(block {views.factor}): {views.payload_bytes() / 1e6:.2f} MB of numbers sent once; scrubbing needs no "
        "server. Colours are fixed across frames: attention as log₁₀ weight, errors on one symmetric scale. "
        + s.order_note()  # type: ignore[attr-defined]
    )


SPLIT_MAX_N = 1024  # several n x n parts per temperature are materialised


def split_scrubber_section(settings: object, params: Mapping[str, object]) -> None:
    """The Sparse + low rank page's scrubber: Scatterbrain's split at every temperature of a grid, in the browser."""
    from ui import widgets
    from ui.fields import TAU_OPTIONS

    s = settings  # ui.Settings
    on = widgets.toggle(
        "Scrub the temperature in the browser",
        "scrub",
        False,
        help="Precomputes S, L, S + L and the naive sum at 13 temperatures in one batched call, then the slider and "
        "▶ Play move through them in your browser with no server round trip.",
    )
    if not on:
        return
    n = int(s.n)  # type: ignore[attr-defined]
    if n > SPLIT_MAX_N:
        st.info(f"The split scrubber works up to n = {SPLIT_MAX_N} (n is {n}); lower n in the sidebar to use it.")
        return
    side = int(widgets.choice("Scrubber pixels", "scrub_px", [32, 48, 64, 96], 48, help="Side of each map."))
    taus = tuple(tau_grid(s.tau, list(TAU_OPTIONS)))  # type: ignore[attr-defined]
    view = SplitScrub(
        inputs=s.spec,  # type: ignore[attr-defined]
        head=s.head,  # type: ignore[attr-defined]
        device=s.device_name,  # type: ignore[attr-defined]
        params=params_key(dict(params)),
        betas=tuple(1.0 / t for t in taus),
        seed=s.seed,  # type: ignore[attr-defined]
        side=side,
        by_cluster=s.by_cluster,  # type: ignore[attr-defined]
    )
    head = view.head

    # About 0.7 s per temperature at n = 512 on two CPU cores, growing with n².
    estimate = len(taus) * 0.7 * (n / 512) ** 2
    try:
        views = run_view(view, estimate, title="Precomputing every temperature")
    except ValueError as exc:  # core.ParameterError: a bad knob
        st.error(f"Temperature scrubber: {exc}")
        return
    start = int(np.argmin(np.abs(np.log(views.taus / s.tau))))  # type: ignore[attr-defined]
    plotly_chart(split_scrub_figure(views, start=start), key="split_scrubber", config={"displaylogo": False})
    st.caption(
        f"{len(taus)} temperatures from τ = {taus[0]:g} to {taus[-1]:g}, head {head}, maps {side} × {side} "
        f"(block {views.factor}): {views.payload_bytes() / 1e6:.2f} MB of numbers sent once; scrubbing needs no "
        "server. The title gives both errors and the naive sum's double counting on Ω at each temperature. "
        + s.order_note()  # type: ignore[attr-defined]
    )
