"""The shared sidebar's controls (input, sizes, temperature, seed, device, budget) and the method knobs from the
registry. The fields they draw are declared in ``ui.fields``; what they return is a ``ui.settings.Settings``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import streamlit as st
import torch

import core
import core.uploads
from core import device as core_device
from core import registry
from core.registry import CAUSAL
from service import compute, placement, uploads
from service.views import InputSpec
from ui import computed, page_lifecycle, url_params, widgets
from ui.fields import (
    DEFAULTS,
    MAX_HEADS,
    MAX_N,
    REAL_D,
    REAL_DEFAULTS,
    REAL_HEADS,
    REAL_NOTE,
    SHARED_FIELDS,
    SOURCE_LABELS,
    SOURCES,
    UPLOAD_DEFAULTS,
    field_range,
    fmt_fraction,
    fmt_tau,
    max_heads,
)
from ui.navigation import navigation
from ui.settings import Settings

_SOURCE_KEY = "_ui_previous_source"
UPLOADER_KEY = "_ui_heads_upload"  # + a counter: a new key after each upload frees the file from the session
_UPLOADER_COUNT = "heads_uploads"  # session store: how many files this session has uploaded
_UPLOAD_MESSAGE = "upload_message"  # session store: (kind, text) of the last upload, shown under the uploader


def _causal_asked(page: page_lifecycle.PageState) -> bool:
    """Whether this run computes under the causal mask, read before its toggle is drawn: a causal view defaults to
    position order, where the mask is the triangle below the diagonal (in cluster order it scatters into a mesh)."""
    if "causal" in st.session_state:
        return bool(st.session_state["causal"])
    raw = page.raw.get("causal") or url_params.raw_params().get("causal")
    return raw is not None and len(raw) > 0 and str(raw[-1]).strip().lower() in registry.TRUE_TEXTS


def _follow_source_switch(page: page_lifecycle.PageState, source: str, base: dict[str, Any], show_budget: bool) -> None:
    """When the user switches to or from the real model, put τ and the budget at the new input's defaults.

    Runs before those controls exist in this run, so it may set their values. A link's own values win on its
    first run (nothing switched yet); later switches are the user's, and they reset both to the defaults.
    """
    previous = st.session_state.get(_SOURCE_KEY, {}).get(page.page)
    st.session_state.setdefault(_SOURCE_KEY, {})[page.page] = source
    if previous is None or previous == source or not {"real", "upload"} & {previous, source}:
        return
    hidden = page_lifecycle.hidden_keys()
    for key in ("tau", "budget") if show_budget else ("tau",):
        if key not in hidden:
            st.session_state[key] = base[key]


def device_control(where: Any, default: str = "auto", *, workers: bool = False) -> tuple[str, torch.device]:
    """The Device control bound to ``?device=``: (requested name, device actually used here; CPU if absent, or when
    a cluster worker computes: ``service.placement``). With ``workers`` (the shared sidebar, whose views carry
    ``Settings.device_name``), a worker's device (``cpu@worker``, ``cuda@worker``) is offered where a scheduler's
    worker has it. Pages with their own Device control (Scaling, Rank vs heads, Inside a model) offer this server's
    devices; with a scheduler their heavy jobs may still run on a worker (``service.placement.where``)."""
    offered = placement.offered() if workers else []
    options = [
        c for c in SHARED_FIELDS["device"].choices if not placement.is_remote_name(c) or c in offered + [default]
    ]
    device = widgets.choice(
        "Device",
        "device",
        options,
        default,
        where=where,
        help="auto picks CUDA when present (here, else on a CUDA worker). Available here: "
        + ", ".join(core_device.available_devices())
        + ("; on the cluster's workers: " + ", ".join(offered) if offered else ""),
    )
    if workers and placement.for_device(device) is not None:
        return device, torch.device("cpu")  # the page's views compute on the worker (Settings.device_name)
    try:
        return device, core_device.resolve_device(device)
    except core.ParameterError:
        page_lifecycle.notice(f"**Device**: `{device}` is not available on this machine; using the CPU.")
        return device, torch.device("cpu")


def real_token_count(text: str) -> int:
    """The text's token count; the model runs on a new text (kept in the service), with a spinner after 0.5 s."""
    with st.spinner("Running the MiniLM model on the text…"):
        return compute.real_token_count(text)


def sidebar(
    *,
    sources: tuple[str, ...] = SOURCES,
    max_n: int = MAX_N,
    show_head: bool = True,
    show_heads: bool = True,
    show_budget: bool = True,
    defaults: dict[str, Any] | None = None,
    causal: bool = False,
) -> Settings:
    """Draw the shared sidebar and return the settings. Every control is bound to the URL.

    causal: the page computes under the causal mask when asked (it draws the toggle); elsewhere there is none.

    sources: which inputs the page supports; max_n: the largest n the page allows (clamped with a notice);
    show_head / show_heads: draw the "head shown" / "heads" controls (pages with one head hide them);
    defaults: per-page default overrides (e.g. {"n": 256}); a different default changes what the URL omits.
    """
    page = page_lifecycle.current()
    base = dict(DEFAULTS)
    base.update(defaults or {})
    bar = st.sidebar
    nav_box = bar.container()
    if page_lifecycle.lesson_mode():
        bar.info("Lesson mode: your teacher fixed some settings. Open the link without `lesson=1` to see them all.")
    bar.header("Input")
    source = widgets.choice(
        "Input",
        "input",
        list(sources),
        base["input"] if base["input"] in sources else sources[0],
        where=bar,
        help="clustered: the Scatterbrain paper's generative model (tight clusters near the unit "
        "sphere). gaussian: unstructured q and k. real: a pretrained MiniLM on your text.",
    )
    bar.caption(SOURCE_LABELS.get(source, source))
    if "upload" in sources:
        _uploader(bar if source == "upload" else bar.expander("Bring your own heads (upload a file)"), page.page)
    if source in ("real", "upload"):
        chosen = REAL_DEFAULTS if source == "real" else UPLOAD_DEFAULTS
        base.update({k: v for k, v in chosen.items() if k not in (defaults or {})})
    _follow_source_switch(page, source, base, show_budget)
    text = ""
    layer = 0
    upload = ""
    if source == "upload":
        n, d, heads, upload = _upload_input(bar, nav_box, page, base, show_heads, max_n)
        clusters, spread = base["clusters"], base["spread"]
        sort_clusters = False
    elif source == "real":
        text = widgets.text_area(
            "Text", "text", core.data.default_text(), where=bar, max_chars=3000, help="Up to 512 tokens are used."
        )
        layer = widgets.int_slider(
            "Layer",
            "layer",
            *field_range("layer"),
            base["layer"],
            where=bar,
            help="MiniLM has 6 layers of 12 heads, head dimension 32.",
        )
        try:
            tokens = real_token_count(text)
        except core.ParameterError as exc:
            page_lifecycle.notice(f"The text could not be used ({exc}); using the default text.")
            text = core.data.default_text()
            tokens = real_token_count(text)
        n, d, heads = tokens, REAL_D, REAL_HEADS
        bar.caption(f"n = {tokens} tokens, d = {REAL_D}, {REAL_HEADS} heads (fixed by the model).")
        clusters, spread = base["clusters"], base["spread"]
        sort_clusters = False
    else:
        n = widgets.int_slider(
            "Sequence length n",
            "n",
            field_range("n")[0],
            min(max_n, field_range("n")[1]),
            min(base["n"], max_n),
            step=16,
            where=bar,
            help=f"Tokens (rows of the attention matrix). At most {max_n} here, because the views "
            "draw the full n × n matrix.",
        )
        d = widgets.int_slider("Head dimension d", "d", *field_range("d"), base["d"], where=bar)
        # The memory cap is the slider's maximum, so a link asking for more is clamped like any other
        # out-of-range value: with a notice, and the clamped value written back to the address bar.
        heads_max = field_range("heads", n)[1]
        heads = (
            min(base["heads"], heads_max)
            if not show_heads
            else widgets.int_slider(
                "Heads",
                "heads",
                1,
                heads_max,
                base["heads"],
                where=bar,
                help="Independent draws of q, k, v (one per head)."
                + (
                    f" At most {heads_max} at n = {n}: {n} × {n} attention per head must fit this app's memory budget."
                    if heads_max < MAX_HEADS
                    else ""
                ),
            )
        )
        clusters, spread = base["clusters"], base["spread"]
        sort_clusters = False
        if source == "clustered":
            clusters = widgets.int_slider(
                "Clusters",
                "clusters",
                *field_range("clusters", n),
                min(base["clusters"], n),
                where=bar,
                help="Number of cluster centres (equal sizes; members at random positions).",
            )
            spread = widgets.float_slider(
                "Cluster spread σ",
                "spread",
                *field_range("spread"),
                base["spread"],
                step=0.05,
                where=bar,
                help="Distance of points from their centre, relative to the "
                "centre's norm (≈ 1). Small σ: tight clusters.",
            )
            sort_clusters = widgets.toggle(
                "Order positions by cluster",
                "sort_clusters",
                bool(base["sort_clusters"]) and not (causal and _causal_asked(page)),
                where=bar,
                help="Display only: draw heatmaps with positions sorted by cluster, so clusters show as blocks. "
                "Cluster members sit at random positions, and every method computes on those real positions. "
                "Off: position order.",
            )
    bar.header("Temperature")
    tau = widgets.log_slider(
        "Temperature τ",
        "tau",
        list(SHARED_FIELDS["tau"].grid),
        base["tau"],
        fmt=fmt_tau,
        where=bar,
        help="logits = q·k / τ. Low τ: peaked rows (sparse-friendly). High τ: flat rows "
        "(low-rank-friendly). For the real model τ = 1 is the model's own attention.",
    )
    temp_box = bar.container()
    if source == "real" and "tau" not in (defaults or {}):
        st.caption(REAL_NOTE)
    bar.header("Run")
    seed = widgets.int_input(
        "Seed",
        "seed",
        *field_range("seed"),
        base["seed"],
        where=bar,
        help="Every random draw (data, features, hashes) comes from this seed.",
    )
    device, device_used = device_control(bar, base["device"], workers=True)
    bar.caption(f"Running on **{placement.describe_choice(device, device_used)}**")
    fraction = base["budget"]
    if show_budget:
        fraction = widgets.log_slider(
            "Memory budget (fraction of full attention)",
            "budget",
            SHARED_FIELDS["budget"].grid,
            base["budget"],
            fmt=fmt_fraction,
            where=bar,
            help="Every method gets this fraction of the n² numbers full attention stores "
            "(per head). Methods are linked to it unless you unlink them.",
        )
    if not causal:  # a link made on a page that applies the mask: say so here instead of "unknown parameter"
        asked = page.raw.pop("causal", None)
        if asked and str(asked[-1]).strip().lower() in registry.TRUE_TEXTS:
            page_lifecycle.notice(
                "**Causal mask**: this page computes without it (Compare, Error vs entropy and the Regime map "
                "apply it)."
            )
    masked = causal and widgets.toggle(
        "Causal mask (decoder)",
        "causal",
        bool(base["causal"]),
        where=bar,
        help="Query i sees only keys j ≤ i, as in a decoder. Each method then runs its own causal form (prefix sums, "
        "a causal window, causal chunks) and is compared with causally masked exact attention; a method without "
        "one says why.",
    )
    if source == "real":
        head = widgets.int_slider("Head", "head", 0, REAL_HEADS - 1, min(base["head"], REAL_HEADS - 1), where=bar)
    elif show_head and heads > 1:
        head = widgets.int_slider(
            "Head shown",
            "head",
            0,
            heads - 1,
            min(base["head"], heads - 1),
            where=bar,
            help="Single-head views show this head.",
        )
    else:
        head = 0
    page.link_box = bar.container()
    spec = InputSpec(
        source=source,
        n=int(n),
        d=int(d),
        heads=int(heads),
        clusters=int(clusters),
        spread=float(spread),
        seed=int(seed),
        text=text if source == "real" else "",
        layer=int(layer),
        upload=upload,
    )
    settings = Settings(
        spec=spec,
        tau=tau,
        device=device,
        device_used=device_used,
        fraction=float(fraction),
        head=int(head),
        sort_clusters=bool(sort_clusters),
        causal=bool(masked),
    )
    with temp_box:
        _temperature_readout(settings)
    navigation(nav_box)
    return settings


def upload_limits() -> core.uploads.UploadLimits:
    """What an upload may hold: n up to the dense views' MAX_N, d up to the d slider's top (bytes: the config)."""
    return core.uploads.UploadLimits(max_n=MAX_N, max_d=int(field_range("d")[1]))


def _uploader(where: Any, page: str) -> None:
    """The file uploader of q, k, v (or logits), with its own size limit (the app's other uploads keep the global
    1 MB of .streamlit/config.toml), and the outcome of the last upload."""
    key = f"{UPLOADER_KEY}_{page_lifecycle.session_store().get(_UPLOADER_COUNT, 0)}"
    # Streamlit's upload route enforces only the server's maxUploadSize (.streamlit/config.toml), whatever a widget
    # announces: never announce more than it lets through.
    route_mb = int(st.get_option("server.maxUploadSize"))
    where.file_uploader(
        "Your heads: q, k, v or logits (.safetensors or .npz)",
        type=list(core.uploads.FORMATS),
        key=key,
        on_change=_heads_uploaded,
        args=(page, key),
        max_upload_size=min(core.uploads.upload_limit_mb(), route_mb),
        help="Arrays named q, k, v (or query, key, value), each (heads, n, d) or (n, d), as your model's projections "
        "give them (q is divided by √d here, so τ = 1 is your model's attention); or one layer's logits, "
        "(heads, n, n) or (n, n). The README shows how to export them from a Hugging Face model. The file is kept "
        f"{core.uploads.upload_hours():g} hours, and links carry its sha256.",
    )
    message = page_lifecycle.session_store().get(_UPLOAD_MESSAGE, {}).get(page)
    if message is not None:
        kind, text = message
        (where.success if kind == "success" else where.error)(text)


def _heads_uploaded(page: str, key: str) -> None:
    """The uploader's callback (it runs before the script, so it may switch the input to the upload)."""
    file = st.session_state.get(key)
    store = page_lifecycle.session_store()
    messages = store.setdefault(_UPLOAD_MESSAGE, {})
    if file is None:
        messages.pop(page, None)
        return
    try:
        upload = core.uploads.read_upload(file.getvalue(), file.name, upload_limits())
        if not uploads.store(upload):
            raise core.ParameterError(
                "upload", "the shared result cache did not keep it (it does not answer, or it is too small); try again"
            )
    except core.ParameterError as exc:
        reason = str(exc).removeprefix("upload: ")
        messages[page] = ("error", f"**{url_params.cut_value(file.name)}** was not used: {reason}")
        return
    kind = "logits" if upload.kind == "logits" else "q, k, v"
    messages[page] = (
        "success",
        f"Uploaded {kind}: {upload.heads} head(s), n = {upload.n}, d = {upload.d}. Its link works on every server "
        f"sharing this cache for {core.uploads.upload_hours():g} hours.",
    )
    # The arrays are in the shared cache now: a fresh uploader lets Streamlit drop the file from this session.
    store[_UPLOADER_COUNT] = store.get(_UPLOADER_COUNT, 0) + 1
    st.session_state["input"] = "upload"
    st.session_state["upload"] = upload.sha256
    # The address bar too: from an input without the upload field, the sha would otherwise reach it only once the field
    # is drawn and changed, and a link copied from the bar said "Upload a file" (#42).
    url_params.replace_url_value("input", "upload")
    url_params.replace_url_value("upload", upload.sha256)
    for key in ("heads", "head"):  # the new file's own head count is the default
        st.session_state.pop(key, None)


def _stop_input(bar: Any, nav_box: Any, page: page_lifecycle.PageState, kind: str, message: str) -> None:
    """End the page here: the input cannot be used (no upload chosen, or it has expired)."""
    st.info(message) if kind == "info" else st.error(message)
    page.link_box = bar.container()
    navigation(nav_box)
    # The page's own controls were not drawn: their link values are not unknown, and the next run (after an
    # upload) reads the link again as a first visit, so they still apply.
    page.first_run = False
    page_lifecycle.session_store()["seen"].discard(page.page)
    page_lifecycle.finish_page()
    st.stop()


def _upload_input(
    bar: Any, nav_box: Any, page: page_lifecycle.PageState, base: dict[str, Any], show_heads: bool, max_n: int
) -> tuple[int, int, int, str]:
    """(n, d, heads, sha256) of the uploaded heads named by ``?upload=``; ends the page with a message when there
    is none or it has expired."""
    sha = widgets.text_line(
        "Upload id (sha256)",
        "upload",
        "",
        max_chars=64,
        where=bar,
        help="The uploaded file's sha256. A link carries it, and every server sharing this result cache finds "
        "the upload by it while it is kept.",
    ).strip()
    if not sha:
        _stop_input(bar, nav_box, page, "info", "Upload a .safetensors or .npz file of your heads in the sidebar.")
    if not core.uploads.is_sha256(sha):
        _stop_input(bar, nav_box, page, "error", "**Upload id**: must be a sha256 (64 lowercase hexadecimal digits).")
    try:
        info = uploads.describe(sha)
    except core.ParameterError as exc:
        _stop_input(bar, nav_box, page, "error", f"**Upload**: {str(exc).removeprefix('upload: ')}")
    n, d = int(info["n"]), int(info["d"])
    if n > max_n:
        _stop_input(
            bar, nav_box, page, "error",
            f"This page draws up to n = {max_n}; your upload has n = {n}. Compare and Error vs entropy take it.",
        )  # fmt: skip
    heads_max = min(int(info["heads"]), max_heads(n))
    if show_heads:
        heads = widgets.int_slider(
            "Heads",
            "heads",
            1,
            heads_max,
            heads_max,
            where=bar,
            help=f"The first heads of your file (it has {info['heads']}); at most {max_heads(n)} at n = {n}, "
            "so that n × n attention per head fits this app's memory budget.",
        )
    else:
        heads = min(int(base["heads"]), heads_max)
    caption = f"n = {n}, d = {d}, {info['heads']} head(s) in the file ({info['format']}, {info['dtype']})."
    if info["kind"] == "logits":
        caption += (
            f" Logits only: q and k are an exact factorisation of them (rank {info['rank']}), so exact attention and "
            "the oracles see your matrix; hashing and random-feature methods see this factorisation, not your "
            "model's projections, and v holds seeded random values."
        )
    else:
        caption += " q is divided by √d: τ = 1 is your model's own attention."
    bar.caption(caption)
    return n, d, int(heads), sha


def _temperature_readout(settings: Settings) -> None:
    try:
        entropy = computed.entropy(settings)
    except core.ParameterError:
        entropy = float("nan")
    top = math.log(settings.n)
    st.markdown(f"β = 1/τ = **{settings.beta:.3g}**  \nmean row entropy **{entropy:.2f}** nats (max ln n = {top:.2f})")


# ------------------------------------------------------------------ method knobs


def registered_methods() -> dict[str, core.MethodSpec]:
    """All registered methods, in registry order (the same as ``core.methods()``)."""
    return registry.methods()


def method_label(method: str) -> str:
    return registered_methods()[method].label


def param_key(method: str, name: str) -> str:
    """The URL key of a method knob, e.g. performer_features."""
    return f"{method}_{name}"


def _log_grid(low: float, high: float, default: float, points: int = 25) -> list[float]:
    low = max(low, 1e-6)
    grid = {float(f"{x:.3g}") for x in np.geomspace(low, high, points)}
    grid.add(float(default))
    return sorted(g for g in grid if low <= g <= high)


def budget_or_nothing(method: str, n: int, d: int, fraction: float) -> dict[str, Any]:
    """``core.budget_params``, or {} where the budget does not apply at these sizes."""
    try:
        return core.budget_params(method, n, d, fraction)
    except core.ParameterError:
        return {}


def linked_params(method: str, n: int, d: int, fraction: float) -> dict[str, Any]:
    """The parameters ``method_controls`` returns for a link that sets none of the method's knobs: its defaults,
    with the budgeted ones following the budget."""
    spec = registered_methods()[method]
    budget = budget_or_nothing(method, n, d, fraction)
    values = {
        p.name: budget.get(p.name, spec.validate({}, n, d).get(p.name, p.default))
        for p in spec.params
        if p.name != CAUSAL
    }
    return spec.validate({k: v for k, v in values.items() if v is not None}, n, d)


def method_controls(settings: Settings, method: str, where: Any = None) -> dict[str, Any]:
    """Controls for one method's parameters, generated from its ParamSpecs and bound to the URL.

    Budgeted parameters follow ``core.budget_params`` while the method is linked to the budget (the default);
    unlinking shows them as free controls starting from the budget value. Returns validated parameters.
    """
    where = where or st
    spec = registered_methods()[method]
    n, d = settings.n, settings.d
    budget = budget_or_nothing(method, n, d, settings.fraction)
    budgeted = [p for p in spec.params if p.budgeted]
    linked = True
    if budgeted:
        linked = widgets.toggle(
            "Linked to budget",
            param_key(method, "linked"),
            True,
            where=where,
            help="While linked, the budgeted knobs follow the memory budget in the sidebar.",
        )
    values: dict[str, Any] = {}
    fixed_notes = []
    for p in spec.params:
        if p.name == CAUSAL:  # the sidebar's one causal toggle sets it for every method (Settings.method_run)
            continue
        key = param_key(method, p.name)
        start = budget.get(p.name, spec.validate({}, n, d).get(p.name, p.default))
        if p.budgeted and linked:
            values[p.name] = start
            fixed_notes.append(f"{p.name} = {start}")
            continue
        value = _param_widget(p, key, start, n, d, where)
        if value is not None:  # an empty list means "the method's default"
            values[p.name] = value
    if fixed_notes:
        where.caption(f"From the {fmt_fraction(settings.fraction)} budget: " + ", ".join(fixed_notes))
    try:
        return spec.validate(values, n, d)
    except core.ParameterError as exc:
        page_lifecycle.notice(f"**{spec.label}**: {exc}; using the budget values.")
        return spec.validate({k: v for k, v in budget.items()}, n, d)


def _param_widget(p: core.ParamSpec, key: str, start: Any, n: int, d: int, where: Any) -> Any:
    label = p.name.replace("_", " ")
    low, high = p.bounds(n, d)
    if p.kind == "bool":
        return widgets.toggle(label, key, bool(start), help=p.help, where=where)
    if p.kind == "choice":
        return widgets.choice(label, key, list(p.choices), start, help=p.help, where=where)
    if p.kind == "int":
        lo = int(math.ceil(low)) if low is not None else 0
        hi = int(high) if high is not None else max(lo + 1, int(start) * 8, 1024)
        if hi - lo <= 64 and not p.log:
            return widgets.int_slider(label, key, lo, hi, int(start), help=p.help, where=where)
        return widgets.int_input(label, key, lo, hi, int(start), help=p.help, where=where)
    if p.kind == "float":
        lo_f = float(low) if low is not None else 0.0
        hi_f = float(high) if high is not None else max(lo_f + 1.0, float(start) * 10)
        if p.log and lo_f > 0:
            return widgets.log_slider(
                label, key, _log_grid(lo_f, hi_f, float(start)), float(start), help=p.help, where=where
            )
        return widgets.float_slider(
            label, key, lo_f, hi_f, float(start), step=(hi_f - lo_f) / 100 or 0.01, help=p.help, where=where
        )
    # int_list: comma-separated integers
    if start is None:
        start_text = ""
    else:
        start_text = ",".join(str(x) for x in (start if isinstance(start, list) else [start]))
    text = widgets.text_line(
        label,
        key,
        start_text,
        max_chars=200,
        help=p.help + " (comma-separated integers; empty = the method's default)",
        where=where,
    )
    try:
        numbers = [int(x) for x in text.replace(" ", "").split(",") if x]
        return numbers or None
    except ValueError:
        page_lifecycle.notice(f"**{label}**: `{text[:40]}` is not a list of integers; using {start}.")
        return start


def causal_only(settings: Settings, methods: list[str]) -> list[str]:
    """Under the causal mask, the methods that have a causal form; each one left out is named in a notice, with why."""
    if not settings.causal:
        return methods
    kept = [m for m in methods if registered_methods()[m].causal_form]
    for method in methods:
        if method not in kept:
            spec = registered_methods()[method]
            page_lifecycle.notice(
                f"**{spec.label}** is left out under the causal mask: {spec.no_causal_reason or 'no causal form'}."
            )
    return kept


def method_picker(
    label: str,
    key: str,
    default: list[str],
    *,
    families: tuple[str, ...] | None = None,
    exclude: tuple[str, ...] = ("exact",),
    max_n: int | None = None,
    where: Any = None,
    n: int | None = None,
) -> list[str]:
    """A multiselect of registered methods (by registry order), bound to ``?key=a&key=b``."""
    names = [
        name
        for name, spec in registered_methods().items()
        if name not in exclude
        and (families is None or spec.family in families)
        and (n is None or spec.max_n is None or n <= spec.max_n)
    ]
    help_text = "; ".join(f"{name}: {registered_methods()[name].label}" for name in names)
    return widgets.multiselect(label, key, names, [m for m in default if m in names], where=where, help=help_text)
