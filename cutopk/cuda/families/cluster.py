"""cluster: a thread-block cluster of 2, 4 or 8 blocks per row (sm_90), each holding a slice of the
row in shared memory, read from global memory once; block_row's steps with the histogram reduced
across the cluster by owner and the winners and candidates gathered into the cluster's first
block, which orders the K in the same launch (kernels/cluster.cu)."""

from __future__ import annotations

import numpy as np

from ..kernel_constants import BLOCK_ROW_8BIT_THREADS, BLOCK_ROW_THREADS, RESIDENT_DIGIT_BITS
from ..kernel_constants import CLUSTER_BLOCKS as _MAX_BLOCKS
from . import order_winners as _order
from .common import (
    OUTPUTS,
    ROWS,
    SELECT,
    Geometry,
    Part,
    Planned,
    Step,
    no_scratch,
    pow2_at_least,
    read_once_bytes,
    round16,
)

MAX_K = 2048  # as block_row's: the ordering's pow2 front
BINS = 1 << RESIDENT_DIGIT_BITS
# The cluster sizes compiled (one entry point each; 8 is CUDA's portable maximum), largest first.
SIZES = (_MAX_BLOCKS, _MAX_BLOCKS // 2, _MAX_BLOCKS // 4)
# The kernel's C parameters, in order (kernels/cluster.cu; the runner passes them by name).
ARGUMENTS = {"cluster_topk": (*ROWS, *SELECT, "slice", "cap", *OUTPUTS)}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/cluster.cu
SCALAR_TYPES = {"slice": np.int32, "cap": np.int32}
TEMPLATE_VALUES = {"cluster_topk": tuple(sorted(SIZES))}
# Each entry point names its cluster shape at compile time, the value of its template parameter
# BLOCKS (cutopk/cuda/kernel_source.py): CuPy's plain launch gives no cluster dimension.
CLUSTER_BLOCKS = {"cluster_topk": "BLOCKS"}
SLICE_ALIGN = 32  # elements: slices start on whole 16-byte vectors of every element type
# The kernel's static shared memory (its bucket, two block scans' scratch, three slot counters,
# the earlier blocks' counts: about 500 bytes), kept out of the dynamic shared memory.
STATIC_BYTES = 1024
# Block 0's candidates: a quarter of the row at most, and at most MAX_CAP, fewer where the
# shared memory left by the slice holds fewer (at least MIN_CAP, or the quarter when smaller).
# More candidates keep more rows off the exact path over the whole cluster (two cluster barriers
# per digit): a bin of 16384 keys is 16 keys a thread for block 0 alone. A design estimate.
MAX_CAP = 16384
MIN_CAP = 1024
__all__ = ["MAX_K"]


def slice_of(n: int, blocks: int) -> int:
    """Elements per block: the row cut into ``blocks`` slices, each a multiple of SLICE_ALIGN."""
    return -(-max(1, -(-n // blocks)) // SLICE_ALIGN) * SLICE_ALIGN


def winners_bytes(k: int, key_bytes: int) -> int:
    """Shared bytes of the winners (pow2(K) keys and 32-bit indices), the layout's first part."""
    kp = pow2_at_least(max(1, k))
    return round16(kp * key_bytes) + round16(kp * 4)


def front_bytes(k: int, key_bytes: int) -> int:
    """Shared bytes before the candidates: the winners and the histogram (2^12 32-bit counters,
    this block's and then the cluster's; ``layout`` in kernels/cluster.cu)."""
    return winners_bytes(k, key_bytes) + BINS * 4


def _layout_bytes(n: int, k: int, key_bytes: int, blocks: int, cap: int) -> int:
    # The slice's keys hold block 0's inverted tie indices after the split (cap 32-bit words).
    keys = max(round16(slice_of(n, blocks) * key_bytes), round16(cap * 4))
    return front_bytes(k, key_bytes) + round16(cap * key_bytes) + round16(cap * 4) + keys


def layout_shared_bytes(n: int, k: int, key_bytes: int, blocks: int, cap: int) -> int:
    """The layout's bytes, or more where block 0's ordering scratch (order_winners.scratch_bytes
    over the row's n positions, over its dead histogram, candidates and keys) needs more."""
    return max(
        _layout_bytes(n, k, key_bytes, blocks, cap), winners_bytes(k, key_bytes) + _order.scratch_bytes(n)
    )


def cap(n: int, k: int, key_bytes: int, blocks: int, device) -> int | None:
    """Block 0's candidates for rows planned ``n`` long on clusters of ``blocks``: a multiple of 16,
    as many as fit up to min(MAX_CAP, n / 4); None where fewer than min(MIN_CAP, n / 4) fit."""
    want = min(MAX_CAP, round16(-(-n // 4)))
    room = device.shared_bytes - STATIC_BYTES
    lo, hi = 0, want // 16
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if layout_shared_bytes(n, k, key_bytes, blocks, 16 * mid) <= room:
            lo = mid
        else:
            hi = mid - 1
    got = 16 * lo
    return got if got >= min(want, MIN_CAP) and got > 0 else None


def shared_bytes(n: int, k: int, key_bytes: int, blocks: int, device) -> int | None:
    c = cap(n, k, key_bytes, blocks, device)
    return None if c is None else layout_shared_bytes(n, k, key_bytes, blocks, c)


def clusters_that_fit(blocks: int, device) -> int:
    """Clusters of ``blocks`` blocks (one block per SM) resident at once: the device's report
    (``Device.active_clusters``: cudaOccupancyMaxActiveClusters), else an estimate, the SMs
    divided by the cluster's blocks (a GPC holding no whole cluster makes the real count lower)."""
    reported = dict(getattr(device, "active_clusters", ()))
    return max(1, reported.get(blocks) or device.sm_count // blocks)


def size(rows: int, n: int, k: int, key_bytes: int, device) -> int | None:
    """The cluster size for ``rows`` rows: of the sizes whose slices fit shared memory, the one
    whose waves of clusters take the least time, a wave's time taken as the slice's length (each
    block reads and counts its slice), ties to the smaller cluster (fewer blocks exchanging).
    So one row takes 8 blocks, and rows past the clusters of 8 that fit at once (16 on an H100's
    132 SMs by the estimate) smaller clusters in one wave, where their slices fit. A design
    estimate: no GPU has timed a cluster size."""
    fits = [b for b in SIZES if shared_bytes(n, k, key_bytes, b, device) is not None]
    if not fits:
        return None
    return min(fits, key=lambda b: (-(-rows // clusters_that_fit(b, device)) * slice_of(n, b), b))


def max_n(k: int, key_bytes: int, device) -> int:
    """The longest row whose slices fit clusters of the largest size (a bisection: the layout
    grows with n)."""
    lo, hi = 0, SIZES[0] * max(1, device.shared_bytes // key_bytes)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if shared_bytes(mid, k, key_bytes, SIZES[0], device) is not None:
            lo = mid
        else:
            hi = mid - 1
    return lo


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if not getattr(device, "clusters", False):
        return "'cluster' needs thread-block clusters (sm_90 or later); this device has none"
    if k > MAX_K:
        return f"'cluster' selects at most k={MAX_K}, got k={k}"
    if shared_bytes(n, k, key_bytes, SIZES[0], device) is None:
        return (
            f"'cluster' holds a row in the shared memory of {SIZES[0]} blocks: {device.shared_bytes} bytes per "
            f"block hold at most {max_n(k, key_bytes, device)} {key_bytes * 8}-bit keys with k={k}, this axis "
            f"has {n}"
        )
    return None


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    blocks = size(rows, n, k, key_bytes, device) or SIZES[0]
    c = cap(n, k, key_bytes, blocks, device) or 16
    params = {"slice": slice_of(n, blocks), "cap": c, "cluster": blocks}
    threads = BLOCK_ROW_THREADS if key_bytes > 1 else BLOCK_ROW_8BIT_THREADS  # the kernel's launch bounds
    shared = layout_shared_bytes(n, k, key_bytes, blocks, c)
    return Geometry("cluster_topk", rows * blocks, threads, shared, params)


def kernel_name(params: dict, cxx: str) -> str:
    return f"cluster_topk<{cxx}, {params['cluster']}>"


# No scratch; the input read once and the outputs written: the slices stay on chip, the counts,
# candidates and winners move through distributed shared memory, never global memory.
scratch, global_bytes = no_scratch, read_once_bytes


def part(planned: Planned) -> Part:
    """One launch of ``rows`` clusters, the slice length and the candidates' capacity passed."""
    f = planned
    moved = global_bytes(f.rows, f.n, f.k, f.key_bytes, f.index_dtype.itemsize, f.params)
    step = Step(
        kernel_name(f.params, f.cxx), True, (f.grid,), f.block, f.shared_bytes,
        args=(("slice", f.params["slice"]), ("cap", f.params["cap"])), global_bytes=moved,
    )  # fmt: skip
    return Part([step])
