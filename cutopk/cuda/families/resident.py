"""resident: a block per row holds the whole row's keys in shared memory, read from global memory
once; a 12-bit radix select refined on that copy, the K winners ordered in the same launch
(kernels/resident.cu)."""

from __future__ import annotations

from ..kernel_constants import RESIDENT_DIGIT_BITS, RESIDENT_THREADS
from . import order_winners as _order
from .common import OUTPUTS, ROWS, SELECT, Geometry, no_scratch, pow2_at_least, read_once_bytes, round16

# The K winners are ordered in shared memory over the histogram's bytes, next to the row (the pow2
# front is kept for the bitonic sort that orders them where a bin of their digit is too long):
# 2048 keeps them (24 KB of 64-bit pairs) small beside an H100's 223 KB for the row. The LLM
# sampling and indexer shapes this family serves (cutopk/_demo/grid.py's llm and indexer cases)
# stop at K = 2048.
MAX_K = 2048
BINS = 1 << RESIDENT_DIGIT_BITS
# The kernel's static shared memory (its bucket and two block scans' scratch: about 420 bytes),
# kept out of the dynamic shared memory it is planned with, so that static and dynamic together
# stay within what the device gives a block (48 KB without opt-in).
STATIC_BYTES = 512
# The kernel's C parameters, in order (kernels/resident.cu; the runner passes them by name).
ARGUMENTS = {"resident_topk": (*ROWS, *SELECT, *OUTPUTS)}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/resident.cu


def front_bytes(k: int, key_bytes: int) -> int:
    """Shared bytes before the row's keys: the histogram (2^12 32-bit counters), which the K
    winners' keys and 32-bit indices later overlay (``front_bytes`` in kernels/resident.cu)."""
    kp = pow2_at_least(max(1, k))
    return max(BINS * 4, round16(kp * key_bytes) + round16(kp * 4))


def max_n(k: int, key_bytes: int, device) -> int:
    """The longest row whose keys fit the device's shared memory next to the histogram (the
    ordering's scratch, over the row's keys, is smaller than the keys of any row that long)."""
    return max(0, (device.shared_bytes - STATIC_BYTES - front_bytes(k, key_bytes)) // key_bytes)


def shared_bytes(n: int, k: int, key_bytes: int) -> int:
    """The front, then the row's keys, which the ordering's scratch overlays once they are dead
    (a short row's keys may take fewer bytes than that scratch)."""
    return front_bytes(k, key_bytes) + max(round16(n * key_bytes), _order.scratch_bytes(n))


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if k > MAX_K:
        return f"'resident' selects at most k={MAX_K}, got k={k}"
    if shared_bytes(n, k, key_bytes) + STATIC_BYTES > device.shared_bytes:
        return (
            f"'resident' holds a row in shared memory: {device.shared_bytes} bytes per block hold at "
            f"most {max_n(k, key_bytes, device)} {key_bytes * 8}-bit keys with k={k}, this axis has {n}"
        )
    return None


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    return Geometry("resident_topk", rows, RESIDENT_THREADS, shared_bytes(n, k, key_bytes), {})


def kernel_name(params: dict, cxx: str) -> str:
    return f"resident_topk<{cxx}>"


# No scratch; the input read once and the outputs written (plan()'s Launch.global_bytes): later
# digits and the collection read the shared copy, and the winners' values re-read from the input
# hit sectors the load already counted.
scratch, global_bytes = no_scratch, read_once_bytes
