"""Export a method's sparse support as a runnable FlexAttention file (torch.nn.attention.flex_attention).

The file is generated from the support alone: the (heads, n, n) boolean mask, packed to bits, zlib-compressed and
base64-encoded into the source, plus the tile size and the scale. Nothing the user typed goes into it, so the app
only ever offers it for download and never runs it. The file decodes the mask, builds the ``mask_mod`` and the
``BlockMask`` at that tile size (``create_block_mask``) and calls ``flex_attention``: softmax over the support,
the method's sparse part (for LSH, local, MoBA the whole method; for NSA, Scatterbrain and Based the exact part
that their other terms are added to).
"""

from __future__ import annotations

import base64
import textwrap
import zlib

import numpy as np
import torch

from core.block_sparsity import check_block
from core.errors import ParameterError

MAX_EXPORT_ENTRIES = 2**26  # heads x n^2 bits: 8 MiB before compression
LINE = 76

TEMPLATE = '''"""FlexAttention with {method}'s support on one input (Attention Explorer export).

{summary}

Generated from the support only (a boolean mask, packed below). Needs torch >= 2.5.
    python {filename}                 seeded random q, k, v: prints the BlockMask and checks flex_attention
                                        against a masked softmax
    python {filename} IN.pt OUT.pt    q, k, v (B, {heads}, {n}, d) from the dict IN.pt; the output to OUT.pt
Add --eager to skip torch.compile (slow, for checking only).
"""

import base64
import sys
import zlib

import numpy as np
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

HEADS, N, BLOCK = {heads}, {n}, {block}
SCALE = {scale!r}
_PACKED = (
{packed}
)


def support() -> torch.Tensor:
    """The (HEADS, N, N) boolean support: True where query i may attend to key j."""
    raw = np.frombuffer(zlib.decompress(base64.b64decode("".join(_PACKED))), dtype=np.uint8)
    bits = np.unpackbits(raw)[: HEADS * N * N].reshape(HEADS, N, N)
    return torch.from_numpy(bits.astype(bool))


SUPPORT = support()


def mask_mod(b, h, q_idx, kv_idx):
    return SUPPORT[h, q_idx, kv_idx]


def block_mask(device="cpu"):
    """The BlockMask at the exported tile size: a tile is computed when any of its entries is in the support."""
    global SUPPORT
    SUPPORT = SUPPORT.to(device)
    return create_block_mask(mask_mod, B=None, H=HEADS, Q_LEN=N, KV_LEN=N, device=device, BLOCK_SIZE=BLOCK)


def attend(q, k, v, scale=SCALE, compiled=True):
    """softmax(scale q k^T) on the support, applied to v; q, k, v: (B, HEADS, N, d)."""
    attention = torch.compile(flex_attention) if compiled else flex_attention
    return attention(q, k, v, block_mask=block_mask(q.device), scale=scale)


def masked_reference(q, k, v, scale=SCALE):
    scores = (scale * q @ k.transpose(-1, -2)).masked_fill(~SUPPORT.to(q.device), float("-inf"))
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v


def main(argv):
    compiled = "--eager" not in argv
    paths = [a for a in argv if not a.startswith("--")]
    if len(paths) == 2:
        given = torch.load(paths[0])
        torch.save(attend(given["q"], given["k"], given["v"], compiled=compiled), paths[1])
        return
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, N, 32, generator=generator) for _ in range(3))
    print(block_mask())
    gap = (attend(q, k, v, compiled=compiled) - masked_reference(q, k, v)).abs().max()
    print(f"entries kept {{float(SUPPORT.float().mean()):.4f}}; largest gap to the masked softmax {{float(gap):.2e}}")


if __name__ == "__main__":
    main(sys.argv[1:])
'''


def _docstring_safe(text: str) -> str:
    """The summary (the app's own words) without what could end the generated docstring or escape in it."""
    return text.replace('"', "'").replace(chr(92), "/")


def pack_support(support: torch.Tensor) -> str:
    """base64 of the zlib-compressed bits of a bool tensor (C order)."""
    bits = np.packbits(support.to(torch.bool).cpu().numpy().reshape(-1))
    return base64.b64encode(zlib.compress(bits.tobytes(), 9)).decode("ascii")


def flex_file(support: torch.Tensor, *, block: int, scale: float, method: str, summary: str = "") -> str:
    """The Python source of the export for a (heads, n, n) support (any leading shape is flattened into heads)."""
    check_block(block)
    if support.dim() < 2 or support.shape[-1] != support.shape[-2]:
        raise ParameterError("support", f"must be (..., n, n), got {tuple(support.shape)}")
    n = int(support.shape[-1])
    support = support.reshape(-1, n, n)
    heads = int(support.shape[0])
    if heads * n * n > MAX_EXPORT_ENTRIES:
        raise ParameterError(
            "n", f"the export packs heads x n^2 = {heads * n * n} bits; the most is {MAX_EXPORT_ENTRIES}"
        )
    if not isinstance(scale, (int, float)) or not np.isfinite(scale) or scale <= 0:
        raise ParameterError("scale", f"must be a positive number, got {scale!r}")
    if not method.replace("_", "").isalnum():
        raise ParameterError("method", f"must be a registered method name, got {method!r}")
    packed = "\n".join(f'    "{line}"' for line in textwrap.wrap(pack_support(support), LINE)) or '    ""'
    return TEMPLATE.format(
        method=method,
        summary=_docstring_safe(summary or f"{method}'s support at tile size {block}."),
        filename=f"flex_{method}.py",
        heads=heads,
        n=n,
        block=block,
        scale=float(scale),
        packed=packed,
    )
