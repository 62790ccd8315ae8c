"""radix: a block per row, radix select with its candidates in shared memory and, for long rows,
a candidate buffer in global memory (kernels/radix.cu)."""

from __future__ import annotations

from ..kernel_constants import RADIX_THREADS
from .common import OUTPUTS, ROWS, SELECT, Geometry, Scratch, one_read_bytes, pow2_at_least, sectors

MAX_K = 1024
MAX_N = 1 << 32  # a block counts a row in 32-bit shared counters
MAX_CANDIDATES = 4096
# Radix candidate buffer (global scratch): up to n / BUFFER_DIVISOR (key, uint32 index) pairs per
# row, so that the digit passes after the bucket fits it read the buffer instead of the row. 16
# keeps the scratch at most an eighth of a float32 input (the interop test's bound is a quarter);
# writing and re-reading a bucket that large still costs less than one more read of the row.
# Provisional, like every threshold of the dispatcher. The total is capped at SCRATCH_LIMIT.
BUFFER_DIVISOR = 16
SCRATCH_LIMIT = 256 << 20
BUFFER_MAX_N = 1 << 32  # buffer indices are 32-bit
# The kernel's C parameters, in order (kernels/radix.cu; the runner passes them by name).
ARGUMENTS = {"radix_topk": (*ROWS, *SELECT, "cap", "buf_cap", "buf_key", "buf_idx", *OUTPUTS)}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/radix.cu


def cap(k: int, key_bytes: int, device) -> int | None:
    """How many candidates the radix kernel can hold next to its K winners, or None if K is
    too large for it."""
    if k > MAX_K:
        return None
    entry = 8 + key_bytes
    room = device.shared_bytes // entry - pow2_at_least(k)
    if room < 32:
        return None
    return min(MAX_CANDIDATES, 1 << (room.bit_length() - 1))


def buffer(rows: int, n: int, key_bytes: int, cap: int) -> int:
    """Entries per row of the candidate buffer (0: no buffer, the passes re-read the row). Only
    worth having when it holds more than the ``cap`` candidates of shared memory."""
    if n >= BUFFER_MAX_N:
        return 0
    entries = n // BUFFER_DIVISOR
    entries = min(entries, SCRATCH_LIMIT // (max(1, rows) * (key_bytes + 4)))
    return entries if entries > cap else 0


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if k > MAX_K:
        return f"'radix' selects at most k={MAX_K}, got k={k}"
    if cap(k, key_bytes, device) is None:
        return (
            f"'radix' needs shared memory for k={k} winners and 32 candidates of {8 + key_bytes} bytes; "
            f"this device gives a block {device.shared_bytes} bytes"
        )
    if n >= MAX_N:
        return f"'radix' handles rows shorter than 2**32 elements (32-bit counters), this axis has {n}"
    return None


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    c = cap(k, key_bytes, device)
    assert c is not None, "why_not() refuses a request whose K winners do not fit"
    shared = (pow2_at_least(k) + c) * (8 + key_bytes)
    params = {"cap": c, "buffer": buffer(rows, n, key_bytes, c)}
    return Geometry("radix_topk", rows, RADIX_THREADS, shared, params)


def scratch(rows: int, n: int, k: int, params: dict) -> tuple:
    """The candidate buffer (none without one: the kernel then gets placeholders it never reads)."""
    entries = rows * params["buffer"]
    if not entries:
        return ()
    return (Scratch("buf_key", "key", entries), Scratch("buf_idx", "uint32", entries))


def kernel_name(params: dict, cxx: str) -> str:
    return f"radix_topk<{cxx}>"


def global_bytes(rows: int, n: int, k: int, key_bytes: int, index_bytes: int, params: dict) -> int:
    """Global bytes of the launch: the input once, the outputs, and with a candidate buffer the
    top digit's bucket written to it and read back (about n / 256 keys per row for keys spread
    over their range; each sector once)."""
    entries = rows * min(params.get("buffer", 0), -(-n // 256))
    return (
        one_read_bytes(rows, n, k, key_bytes, index_bytes)
        + sectors(entries * key_bytes)
        + sectors(entries * 4)
    )
