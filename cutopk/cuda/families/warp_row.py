"""warp_row: a warp per row, ITEMS keys per lane in registers, lane r keeps the r-th winner
(kernels/warp_row.cu)."""

from __future__ import annotations

from ..kernel_constants import WARP_ROW_THREADS
from .common import OUTPUTS, ROWS, SELECT, Geometry, no_scratch, pow2_at_least, read_once_bytes

MAX_N = 1024  # ITEMS = 32 keys per lane in registers (95 for float64 on sm_90, no spills)
MAX_K = 32  # lane r keeps the r-th winner
# The kernel's C parameters, in order (kernels/warp_row.cu; the runner passes them by name).
ARGUMENTS = {"warp_row_topk": (*ROWS, *SELECT, *OUTPUTS)}
# The kernels of kernels/warp_row.cu, and the ITEMS each is instantiated for (keys per lane: n /
# 32 rounded up to a power of two).
KERNELS = tuple(ARGUMENTS)
TEMPLATE_VALUES = {"warp_row_topk": (1, 2, 4, 8, 16, 32)}


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if n > MAX_N:
        return f"'warp_row' handles rows of at most {MAX_N} elements, this axis has {n}"
    if k > MAX_K:
        return f"'warp_row' selects at most k={MAX_K}, got k={k}"
    return None


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    items = max(1, pow2_at_least(-(-n // 32)))
    per_block = WARP_ROW_THREADS // 32
    return Geometry("warp_row_topk", -(-rows // per_block), WARP_ROW_THREADS, 0, {"ITEMS": items})


def kernel_name(params: dict, cxx: str) -> str:
    return f"warp_row_topk<{cxx}, {params['ITEMS']}>"


# No scratch; the input read once and the outputs written (plan()'s Launch.global_bytes).
scratch, global_bytes = no_scratch, read_once_bytes
