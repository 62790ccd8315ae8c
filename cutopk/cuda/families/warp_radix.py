"""warp_radix: a warp per row, radix select with its own shared histogram, no block barrier
(kernels/warp_radix.cu)."""

from __future__ import annotations

from ..kernel_constants import WARP_RADIX_MAX_K, WARP_RADIX_WARPS
from .common import OUTPUTS, ROWS, SELECT, Geometry, no_scratch, read_once_bytes

MAX_K = WARP_RADIX_MAX_K
# The kernel's C parameters, in order (kernels/warp_radix.cu; the runner passes them by name).
ARGUMENTS = {"warp_radix_topk": (*ROWS, *SELECT, *OUTPUTS)}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/warp_radix.cu


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if k > MAX_K:
        return f"'warp_radix' selects at most k={MAX_K}, got k={k}"
    if n >= 2**31:
        return f"'warp_radix' handles rows shorter than 2**31 elements, this axis has {n}"
    return None


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    return Geometry("warp_radix_topk", -(-rows // WARP_RADIX_WARPS), WARP_RADIX_WARPS * 32, 0, {})


def kernel_name(params: dict, cxx: str) -> str:
    return f"warp_radix_topk<{cxx}>"


# No scratch; the input read once and the outputs written (plan()'s Launch.global_bytes).
scratch, global_bytes = no_scratch, read_once_bytes
