"""cluster: a thread-block cluster of blocks per row (sm_90), each holding a slice of the row in
shared memory, read from global memory once; resident's radix select with the counts added up
through distributed shared memory, the K winners ordered by the cluster's first block in the same
launch (kernels/cluster.cu)."""

from __future__ import annotations

import numpy as np

from ..kernel_constants import CLUSTER_BLOCKS as _CLUSTER_BLOCKS
from ..kernel_constants import RESIDENT_THREADS
from .common import OUTPUTS, ROWS, SELECT, Facts, Geometry, Part, Step, no_scratch, read_once_bytes
from .resident import BINS, MAX_K, STATIC_BYTES, _round16
from .resident import front_bytes as _resident_front

# The kernel's C parameters, in order (kernels/cluster.cu; the runner passes them by name).
ARGUMENTS = {"cluster_topk": (*ROWS, *SELECT, "slice", *OUTPUTS)}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/cluster.cu
SCALAR_TYPES = {"slice": np.int32}
# The entry point names its cluster shape at compile time (cutopk/cuda/kernel_source.py).
CLUSTER_BLOCKS = {"cluster_topk": _CLUSTER_BLOCKS}
BLOCKS = CLUSTER_BLOCKS["cluster_topk"]
SLICE_ALIGN = 32  # elements: slices start on whole 16-byte vectors of every element type
__all__ = ["MAX_K"]


def front_bytes(k: int, key_bytes: int) -> int:
    """Shared bytes before a block's slice: its counts and the cluster's sums (2 x 2^12 32-bit
    counters), which the K winners' keys and indices overlay in block 0 (kernels/cluster.cu)."""
    return max(2 * BINS * 4, _resident_front(k, key_bytes))


def slice_of(n: int) -> int:
    """Elements per block: the row cut into BLOCKS slices, each a multiple of SLICE_ALIGN."""
    return -(-max(1, -(-n // BLOCKS)) // SLICE_ALIGN) * SLICE_ALIGN


def shared_bytes(n: int, k: int, key_bytes: int) -> int:
    return front_bytes(k, key_bytes) + _round16(slice_of(n) * key_bytes)


def max_n(k: int, key_bytes: int, device) -> int:
    """The longest row whose slices fit the device's shared memory (a multiple of the cluster)."""
    per_block = (device.shared_bytes - STATIC_BYTES - front_bytes(k, key_bytes)) // key_bytes
    return max(0, per_block // SLICE_ALIGN * SLICE_ALIGN * BLOCKS)


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if not getattr(device, "clusters", False):
        return "'cluster' needs thread-block clusters (sm_90 or later); this device has none"
    if k > MAX_K:
        return f"'cluster' selects at most k={MAX_K}, got k={k}"
    if shared_bytes(n, k, key_bytes) + STATIC_BYTES > device.shared_bytes:
        return (
            f"'cluster' holds a row in the shared memory of {BLOCKS} blocks: {device.shared_bytes} bytes per "
            f"block hold at most {max_n(k, key_bytes, device)} {key_bytes * 8}-bit keys with k={k}, this axis "
            f"has {n}"
        )
    return None


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    params = {"slice": slice_of(n), "cluster": BLOCKS}
    return Geometry("cluster_topk", rows * BLOCKS, RESIDENT_THREADS, shared_bytes(n, k, key_bytes), params)


def kernel_name(params: dict, cxx: str) -> str:
    return f"cluster_topk<{cxx}>"


# No scratch; the input read once and the outputs written: the slices stay on chip, the counts
# and winners move through distributed shared memory, never global memory.
scratch, global_bytes = no_scratch, read_once_bytes


def part(facts: Facts) -> Part:
    """One launch of ``rows`` clusters, the slice length passed as a constant."""
    f = facts
    moved = global_bytes(f.rows, f.n, f.k, f.key_bytes, f.index_dtype.itemsize, f.params)
    step = Step(
        kernel_name(f.params, f.cxx), True, (f.grid,), f.block, f.shared_bytes,
        args=(("slice", f.params["slice"]),), global_bytes=moved,
    )  # fmt: skip
    return Part([step])
