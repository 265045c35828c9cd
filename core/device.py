"""Device choice: CUDA when available, then MPS, otherwise CPU."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from core.errors import ParameterError

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")
# Entries of a (temperatures, ..., n, n) stack that batched temperature loops (core.sweeps, core.scrub) compute at
# once. Their elementwise passes are bound by memory traffic: on a CPU a stack that stays near the processor's
# cache (4M float32 entries, 16 MiB) ran the default 12-temperature sweep 1.5-2.5x faster than a 32M-entry stack
# (benchmarks/chunking.py). A GPU keeps the large stack: fewer, larger kernels.
CPU_CHUNK_ELEMENTS = 2**22
GPU_CHUNK_ELEMENTS = 2**25


def cuda_available() -> bool:
    return bool(torch.cuda.is_available())


def mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def available_devices() -> list[str]:
    """Device names that can be used on this machine, 'auto' first."""
    names = ["auto", "cpu"]
    if cuda_available():
        names.append("cuda")
    if mps_available():
        names.append("mps")
    return names


def resolve_device(name: str | torch.device | None = "auto") -> torch.device:
    """Turn 'auto' | 'cpu' | 'cuda' | 'mps' into a usable torch.device; refuse one that is absent."""
    if isinstance(name, torch.device):
        name = name.type
    if name is None or name == "auto":
        if cuda_available():
            return torch.device("cuda")
        if mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name not in DEVICE_CHOICES:
        raise ParameterError("device", f"must be one of {', '.join(DEVICE_CHOICES)}, got {name!r}")
    if name == "cuda" and not cuda_available():
        raise ParameterError("device", "cuda was asked for but no CUDA device is available; use 'auto' or 'cpu'")
    if name == "mps" and not mps_available():
        raise ParameterError("device", "mps was asked for but it is not available; use 'auto' or 'cpu'")
    return torch.device(name)


def describe(device: torch.device) -> str:
    """A human-readable name, e.g. 'cuda (NVIDIA H100)' or 'cpu (2 threads)'."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    if device.type == "cpu":
        return f"cpu ({torch.get_num_threads()} threads)"
    return device.type


def chunk_elements(device: torch.device) -> int:
    """How many attention entries a batched temperature loop computes at once on ``device``."""
    return CPU_CHUNK_ELEMENTS if device.type == "cpu" else GPU_CHUNK_ELEMENTS


# Row-blocked passes (Performer's features, Nystrom's kernels, VCC's compressed softmax) fill an n x m result block by
# block of rows, so their temporaries are block-sized and on a CPU each block stays in a core's cache between
# passes (512 KiB of float32); a GPU takes large blocks, few kernels. Blocks hold a multiple of MIN_BLOCK_ROWS rows
# and a short remainder joins the last block: a matmul of only a few rows takes another BLAS path whose last bits
# differ, and with this the blocked results were bit-identical to whole-matrix ones.
CPU_BLOCK_ENTRIES = 2**17
GPU_BLOCK_ENTRIES = 2**24
MIN_BLOCK_ROWS = 16
BLOCKS_PER_PASS = 4


def row_blocks(rows: int, width: int, device: torch.device) -> list[slice]:
    """Slices that cut ``rows`` rows of ``width`` entries into the blocks of a row-blocked pass on ``device``."""
    entries = CPU_BLOCK_ENTRIES if device.type == "cpu" else GPU_BLOCK_ENTRIES
    # A block holds at most a quarter of the whole pass (at least CPU_BLOCK_ENTRIES): a GPU's large block would
    # otherwise outgrow a small matrix and its method's memory model (VCC measured 3.1x its model at n = 4096).
    entries = min(entries, max(CPU_BLOCK_ENTRIES, rows * width // BLOCKS_PER_PASS))
    step = max(1, entries // max(width, 1) // MIN_BLOCK_ROWS) * MIN_BLOCK_ROWS
    starts = list(range(0, rows, step))
    if len(starts) > 1 and rows - starts[-1] < MIN_BLOCK_ROWS:
        starts.pop()
    return [slice(start, end) for start, end in zip(starts, [*starts[1:], rows][: len(starts)], strict=True)]


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels, so wall-clock timings are honest on GPUs."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


@contextlib.contextmanager
def cpu_threads(count: int, device: torch.device | None = None) -> Iterator[None]:
    """Run with ``count`` intra-op CPU threads, then restore (a no-op on other devices).

    Training loops of many small products run much faster on one thread: on a loaded 2-core machine,
    100 learned-kernel steps at n = 256 took 0.17 s with one thread and 3 s with two.
    """
    if device is not None and device.type != "cpu":
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
