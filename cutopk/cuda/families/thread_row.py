"""thread_row: a thread per row, its K winners in registers (kernels/thread_row.cu)."""

from __future__ import annotations

from ..kernel_constants import THREAD_ROW_THREADS
from .common import OUTPUTS, ROWS, SELECT, Geometry, no_scratch, pow2_at_least, read_once_bytes

MAX_K = 8  # winners kept in registers by one thread (16 spills on sm_90)
# The kernel's C parameters, in order (kernels/thread_row.cu; the runner passes them by name).
ARGUMENTS = {"thread_row_topk": (*ROWS, *SELECT, *OUTPUTS)}
# The kernels of kernels/thread_row.cu, and the KMAX each is instantiated for (K rounded up to a
# power of two).
KERNELS = tuple(ARGUMENTS)
TEMPLATE_VALUES = {"thread_row_topk": (1, 2, 4, 8)}


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if k > MAX_K:
        return f"'thread_row' selects at most k={MAX_K}, got k={k}"
    if n >= 2**31:
        return f"'thread_row' handles rows shorter than 2**31 elements, this axis has {n}"
    return None


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    grid = -(-rows // THREAD_ROW_THREADS)
    return Geometry("thread_row_topk", grid, THREAD_ROW_THREADS, 0, {"KMAX": pow2_at_least(k)})


def kernel_name(params: dict, cxx: str) -> str:
    return f"thread_row_topk<{cxx}, {params['KMAX']}>"


# No scratch; the input read once and the outputs written (plan()'s Launch.global_bytes).
scratch, global_bytes = no_scratch, read_once_bytes
