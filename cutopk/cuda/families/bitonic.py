"""bitonic: a block per row sorts the padded row in shared memory (kernels/bitonic.cu)."""

from __future__ import annotations

from ..kernel_constants import BITONIC_THREADS
from .common import OUTPUTS, ROWS, SELECT, Geometry, no_scratch, pow2_at_least, read_once_bytes

# The kernel's C parameters, in order (kernels/bitonic.cu; the runner passes them by name).
ARGUMENTS = {"bitonic_topk": (*ROWS, *SELECT, "size", *OUTPUTS)}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/bitonic.cu


def size(n: int, key_bytes: int, device) -> int | None:
    """The padded sort size for a row of ``n``, or None when it does not fit in shared memory."""
    padded = max(32, pow2_at_least(n))
    return padded if padded * (4 + key_bytes) <= device.shared_bytes else None


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if size(n, key_bytes, device) is None:
        return (
            f"'bitonic' sorts a row in {device.shared_bytes} bytes of shared memory; a row of {n} "
            f"{key_bytes * 8}-bit keys does not fit"
        )
    return None


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    padded = size(n, key_bytes, device)
    assert padded is not None, "why_not() refuses a row that does not fit"
    # One thread per compare-exchange pair (size / 2), at most BITONIC_THREADS: a short row
    # does not hold a block of 512 threads that mostly wait at the barriers.
    threads = min(BITONIC_THREADS, max(32, padded // 2))
    return Geometry("bitonic_topk", rows, threads, padded * (4 + key_bytes), {"size": padded})


def kernel_name(params: dict, cxx: str) -> str:
    return f"bitonic_topk<{cxx}>"


# No scratch; the input read once and the outputs written (plan()'s Launch.global_bytes).
scratch, global_bytes = no_scratch, read_once_bytes
