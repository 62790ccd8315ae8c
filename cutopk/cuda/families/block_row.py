"""block_row: a 1024-thread block per row holds the row's keys in shared memory, every load of the
row issued at entry (16-byte copies in chunks, each counted as it lands); a first digit that
splits real data (a float16-style view of 32/64-bit float keys), the K-th key's bin refined as
shared-memory candidates, the K winners ordered in the same launch (kernels/block_row.cu)."""

from __future__ import annotations

import numpy as np

from ..kernel_constants import BLOCK_ROW_8BIT_THREADS, BLOCK_ROW_CAP, BLOCK_ROW_THREADS, RESIDENT_DIGIT_BITS
from . import order_winners as _order
from .common import OUTPUTS, ROWS, SELECT, Geometry, no_scratch, pow2_at_least, read_once_bytes, round16

# The K winners are ordered in shared memory (winners::finish_winners, order_winners.cuh), as resident's.
MAX_K = 2048
BINS = 1 << RESIDENT_DIGIT_BITS
# The kernel's static shared memory (its bucket, two block scans' scratch, two slot counters, a
# block min/max's 64 words: about 950 bytes), kept out of the dynamic shared memory it is planned with.
STATIC_BYTES = 1024
# The kernel's C parameters, in order (kernels/block_row.cu; the runner passes them by name).
ARGUMENTS = {"block_row_topk": (*ROWS, *SELECT, *OUTPUTS)}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/block_row.cu


def candidate_cap(n: int) -> int:
    """The candidate pairs a block of rows planned ``n`` long holds: a quarter of the row rounded
    up to 16, at most BLOCK_ROW_CAP (``candidate_cap`` in kernels/block_row.cu)."""
    return min(BLOCK_ROW_CAP, round16(-(-n // 4)))


def front_bytes(n: int, k: int, key_bytes: int) -> int:
    """Shared bytes before the row's keys: the histogram (2^12 32-bit counters), the winners
    (pow2(K) keys and 32-bit indices) and the candidates (``layout`` in kernels/block_row.cu)."""
    kp = pow2_at_least(max(1, k))
    cap = candidate_cap(n)
    return BINS * 4 + round16(kp * key_bytes) + round16(kp * 4) + round16(cap * key_bytes) + round16(cap * 4)


def shared_bytes(n: int, k: int, key_bytes: int) -> int:
    """The layout's bytes, or more where the ordering's scratch (order_winners.scratch_bytes, over
    the candidates and the row's keys once they are dead) needs more than those two hold."""
    kp = pow2_at_least(max(1, k))
    before_candidates = BINS * 4 + round16(kp * key_bytes) + round16(kp * 4)
    return max(
        front_bytes(n, k, key_bytes) + round16(n * key_bytes), before_candidates + _order.scratch_bytes(n)
    )


def max_n(k: int, key_bytes: int, device) -> int:
    """The longest row that fits the device's shared memory with its histogram, winners and
    candidates (``shared_bytes`` grows with n, so a bisection finds it)."""
    lo, hi = 0, max(1, device.shared_bytes // key_bytes)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if shared_bytes(mid, k, key_bytes) + STATIC_BYTES <= device.shared_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if k > MAX_K:
        return f"'block_row' selects at most k={MAX_K}, got k={k}"
    if shared_bytes(n, k, key_bytes) + STATIC_BYTES > device.shared_bytes:
        return (
            f"'block_row' holds a row in shared memory: {device.shared_bytes} bytes per block hold at "
            f"most {max_n(k, key_bytes, device)} {key_bytes * 8}-bit keys with k={k}, this axis has {n}"
        )
    return None


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    threads = BLOCK_ROW_THREADS if key_bytes > 1 else BLOCK_ROW_8BIT_THREADS  # the kernel's launch bounds
    return Geometry("block_row_topk", rows, threads, shared_bytes(n, k, key_bytes), {})


def kernel_name(params: dict, cxx: str) -> str:
    return f"block_row_topk<{cxx}>"


# No scratch; the input read once and the outputs written (plan()'s Launch.global_bytes): the
# candidates, later digits and the collection read the shared copy, and the winners' values
# re-read from the input hit sectors the load already counted.
scratch, global_bytes = no_scratch, read_once_bytes


# kernels/first_digit.cuh's FloatView per float dtype name: (VIEW_SHIFT, LO6, CAP).
FLOAT_VIEWS = {
    "float16": (4, 0, 0x7C00 >> 4),
    "bfloat16": (4, 0, 0x7F80 >> 4),
    "float32": (17, 112 << 6, 2047),
    "float64": (46, 1008 << 6, 2047),
}


def first_digit(keys: np.ndarray, dtype) -> np.ndarray:
    """The NumPy twin of kernels/first_digit.cuh: the first digit (int64) of unsigned keys
    (cutopk/_request/keys.py's) of the element type ``dtype`` (their width). Floats: 2048 + c(x)
    where the key's top bit is 1, 2048 - c(~x) where it is 0 (x the other bits, c the view of
    FLOAT_VIEWS); other types: the key's top 12 bits (all 8 of an 8-bit key)."""
    keys = np.asarray(keys)
    width = keys.dtype.itemsize * 8
    wide = keys.astype(np.uint64)
    view = FLOAT_VIEWS.get(np.dtype(dtype).name)
    if view is None:
        bits = min(12, width)
        return (wide >> np.uint64(width - bits)).astype(np.int64)
    shift, lo6, cap = view
    low = np.uint64((1 << (width - 1)) - 1)
    top = (wide >> np.uint64(width - 1)).astype(bool)

    def c(x):
        return np.clip((x >> np.uint64(shift)).astype(np.int64) - lo6, 0, cap)

    return np.where(top, 2048 + c(wide & low), 2048 - c(~wide & low))
