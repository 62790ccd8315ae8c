"""streaming: many long rows in one launch, a block per row reading its row once through a ring of
asynchronous copies, against a threshold sampled from the row; the few keys that reach it are
selected on chip (kernels/streaming.cu)."""

from __future__ import annotations

import math

from ..kernel_constants import (
    MULTIBLOCK_SAMPLES,
    STREAMING_STAGES,
    STREAMING_THREAD_VECS,
    STREAMING_THREADS,
)
from .common import OUTPUTS, ROWS, SELECT, Geometry, no_scratch, read_once_bytes, round16

# The K winners (pow2(K) keys and 32-bit indices) and the selection's histogram overlay the ring
# once it is dead: at K = 2048 with 8-byte keys, 24 KB of its 48 KB.
MAX_K = 2048
MAX_N = 1 << 31  # 32-bit candidate positions and counts
STAGE_BYTES = STREAMING_THREADS * STREAMING_THREAD_VECS * 16
RING_BYTES = STREAMING_STAGES * STAGE_BYTES
# The kernel's static shared memory (its bucket, two block scans' scratch: about 430 bytes), kept
# out of the dynamic shared memory it is planned with.
STATIC_BYTES = 512
# Blocks per SM the kernel is built for (its launch bounds); the candidates are sized so that two
# blocks' shared memory fits an SM where the device allows it.
BLOCKS_PER_SM = 2
# The candidates: at least the sample (its keys and histogram overlay them), and this many times
# the keys expected to reach the threshold, so that an overflow (the exact path's slower reads) is
# rare: the count reaching the sample's rank-r key varies by about 1 / sqrt(r + 1) of itself.
CANDIDATE_MARGIN = 1.5
CANDIDATE_ALIGN = 256
# The kernel's C parameters, in order (kernels/streaming.cu; the runner passes them by name).
ARGUMENTS = {"streaming_topk": (*ROWS, *SELECT, "cap", *OUTPUTS)}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/streaming.cu


def sample_rank(n: int, k: int) -> int:
    """The rank of the threshold in the sample (the kernel computes the same from each row's own
    length): multiblock's rule, m + 4 sqrt(m) + 8 with m = K x samples / n."""
    m = k * MULTIBLOCK_SAMPLES // max(1, n)
    return min(MULTIBLOCK_SAMPLES - 1, m + 4 * math.isqrt(m) + 8)


def expected_candidates(n: int, k: int) -> int:
    """Keys expected to reach the threshold on a row of spread keys: (rank + 1) x n / samples."""
    return -(-(sample_rank(n, k) + 1) * n // MULTIBLOCK_SAMPLES)


def _candidate_bytes(cap: int, key_bytes: int) -> int:
    return round16(cap * key_bytes) + cap * 4


def cap(n: int, k: int, key_bytes: int, device) -> int | None:
    """The candidates a block holds: CANDIDATE_MARGIN times the expected count (at least the
    sample), fewer where two blocks per SM would not fit, never fewer than the expected count;
    None where that does not fit the device's shared memory."""
    want = max(MULTIBLOCK_SAMPLES, math.ceil(CANDIDATE_MARGIN * expected_candidates(n, k)))
    want = -(-want // CANDIDATE_ALIGN) * CANDIDATE_ALIGN
    least = max(MULTIBLOCK_SAMPLES, expected_candidates(n, k))
    room = device.shared_bytes - STATIC_BYTES - RING_BYTES
    two = device.shared_bytes // BLOCKS_PER_SM - STATIC_BYTES - RING_BYTES
    for budget in (two, room):
        fits = budget // (key_bytes + 4) // CANDIDATE_ALIGN * CANDIDATE_ALIGN
        if fits >= least:
            return min(want, fits)
    return None


def blocks_per_sm(shared: int, key_bytes: int, device) -> int:
    """Blocks of the kernel an SM holds: its launch bounds' (one for 8-bit keys, whose registers
    allow no more), as many as the shared memory fits."""
    per_sm = device.shared_bytes + 4096  # the per-block limit is the SM's less its reserve
    bound = 1 if key_bytes == 1 else BLOCKS_PER_SM
    return max(1, min(bound, per_sm // (shared + STATIC_BYTES + 1024)))


def bytes_in_flight(shared: int, key_bytes: int, device) -> int:
    """Bytes of copies in flight per SM by construction while a tile is filtered: the ring's
    other stages, times the blocks an SM holds."""
    blocks = blocks_per_sm(shared, key_bytes, device)
    return (STREAMING_STAGES - 1) * STAGE_BYTES * blocks


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if k > MAX_K:
        return f"'streaming' selects at most k={MAX_K}, got k={k}"
    if n >= MAX_N:
        return f"'streaming' handles rows shorter than 2**31 elements, this axis has {n}"
    if cap(n, k, key_bytes, device) is None:
        return (
            f"'streaming' needs {RING_BYTES} bytes of ring and {expected_candidates(n, k)} candidates of "
            f"{key_bytes + 4} bytes in shared memory; this device gives a block {device.shared_bytes} bytes"
        )
    return None


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    c = cap(n, k, key_bytes, device)
    assert c is not None, "why_not() refuses a request whose candidates do not fit"
    shared = RING_BYTES + _candidate_bytes(c, key_bytes)
    params = {
        "cap": c,
        "stages": STREAMING_STAGES,
        "stage_bytes": STAGE_BYTES,
        "blocks_per_sm": blocks_per_sm(shared, key_bytes, device),
        "bytes_in_flight_per_sm": bytes_in_flight(shared, key_bytes, device),
    }
    return Geometry("streaming_topk", rows, STREAMING_THREADS, shared, params)


def kernel_name(params: dict, cxx: str) -> str:
    return f"streaming_topk<{cxx}>"


# No scratch; the input read once (the sample's sectors are sectors of the row, which the filter
# reads again: counted once per launch) and the outputs written. Rows whose threshold fails read
# the row again per digit (not in this estimate: rare on spread keys).
scratch, global_bytes = no_scratch, read_once_bytes
