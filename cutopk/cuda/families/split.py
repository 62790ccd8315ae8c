"""split: the one-launch fallback for rows too long for one block's shared memory on GPUs without
thread-block clusters (sm_75, sm_80). Several blocks per row, each holding a slice of the row in
shared memory (read from global memory once) and selecting its K best pairs on chip; the block of
the row that arrives last (an arrival ticket) merges the blocks' candidates and orders the K
winners, in the same launch (kernels/split.cu)."""

from __future__ import annotations

import math

import numpy as np

from ..kernel_constants import RESIDENT_THREADS, SPLIT_MAX_BLOCKS
from .common import (
    OUTPUTS,
    ROWS,
    SELECT,
    Geometry,
    Part,
    Planned,
    Scratch,
    Step,
    read_once_bytes,
    round16,
    sectors,
)
from .resident import MAX_K
from .resident import front_bytes as _front_bytes

# The kernel's C parameters, in order (kernels/split.cu; the runner passes them by name).
ARGUMENTS = {
    "split_topk": (
        *ROWS, *SELECT, "slice", "blocks", "cand_key", "cand_idx", "cand_count", "tickets", *OUTPUTS,
    )
}  # fmt: skip
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/split.cu
SCALAR_TYPES = {"slice": np.int32, "blocks": np.int32}
# Blocks per row at most (kernels/constants.cuh: the merge scans one count per thread).
MAX_BLOCKS = SPLIT_MAX_BLOCKS
# The kernel's static shared memory (its Shared struct: bucket, two block scans' scratch, the
# merge's 257 bases: about 1.6 KB), kept out of the dynamic shared memory it is planned with.
STATIC_BYTES = 2048
SLICE_ALIGN = 32  # elements: slices start on whole 16-byte vectors of every element type
# Elements a block aims to hold: more blocks per row spread a long row over more SMs, but every
# block adds up to K candidates that the merging block reads again (global traffic and its work).
# A design estimate (32 keys per thread of 512): no GPU has measured the family yet.
TARGET_SLICE = 16384
# The candidates' share of the row's bytes that the block count aims to stay within (blocks x
# min(K, slice) x (key + 4) bytes, written, then read back by the merge), so long rows with a large K
# take fewer, longer slices (down to the fewest that fit shared memory), keeping the launch near
# one read of the row (the goal: 1.1 x input and output bytes). A design estimate too.
CANDIDATE_SHARE = 0.1
__all__ = ["MAX_K"]


def _slice(n: int, blocks: int) -> int:
    return -(-max(1, -(-n // blocks)) // SLICE_ALIGN) * SLICE_ALIGN


def _held(n: int, k: int, blocks: int) -> int:
    """Keys a block holds at most: its slice, or (the merging block) every block's candidates."""
    part = _slice(n, blocks)
    return max(part, blocks * min(k, part))


def _room(k: int, key_bytes: int, device) -> int:
    """Keys that fit a block's shared memory after the histogram / winners and the static part."""
    return (device.shared_bytes - STATIC_BYTES - _front_bytes(k, key_bytes)) // key_bytes


def blocks_of(n: int, k: int, key_bytes: int, device) -> int | None:
    """Blocks per row for a row of ``n``: about n / TARGET_SLICE, fewer where the candidates would
    pass CANDIDATE_SHARE of the row's bytes, at least enough that a slice fits and few enough that
    the candidates fit the merging block; None when no count fits."""
    room = _room(k, key_bytes, device)
    if room <= 0:
        return None
    least = max(1, math.ceil(n / max(1, room // SLICE_ALIGN * SLICE_ALIGN)))
    if least > MAX_BLOCKS:
        return None  # (and the search below stays within MAX_BLOCKS steps)
    per_block = min(k, TARGET_SLICE) * (key_bytes + 4)  # candidate bytes per block
    frugal = max(1, math.floor(CANDIDATE_SHARE * n * key_bytes / max(1, per_block)))
    want = max(least, min(math.ceil(n / TARGET_SLICE), frugal, MAX_BLOCKS))
    for blocks in range(want, least - 1, -1):  # the first that fits, from the wanted count down
        if blocks <= MAX_BLOCKS and _held(n, k, blocks) <= room:
            return blocks
    return None


def shared_bytes(n: int, k: int, key_bytes: int, blocks: int) -> int:
    return _front_bytes(k, key_bytes) + round16(_held(n, k, blocks) * key_bytes)


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if k > MAX_K:
        return f"'split' selects at most k={MAX_K}, got k={k}"
    if n >= 2**31:
        return f"'split' counts a row's positions in 32 bits: at most 2^31 - 1 elements, this axis has {n}"
    if blocks_of(n, k, key_bytes, device) is None:
        return (
            f"'split' holds a row in the shared memory of at most {MAX_BLOCKS} blocks, and all their "
            f"candidates in one: {device.shared_bytes} bytes per block do not hold {n} "
            f"{key_bytes * 8}-bit keys with k={k}"
        )
    return None


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    blocks = blocks_of(n, k, key_bytes, device)
    assert blocks is not None, "geometry() follows why_not(), which refuses rows no block count holds"
    params = {"slice": _slice(n, blocks), "blocks": blocks}
    return Geometry(
        "split_topk", rows * blocks, RESIDENT_THREADS, shared_bytes(n, k, key_bytes, blocks), params
    )


def kernel_name(params: dict, cxx: str) -> str:
    return f"split_topk<{cxx}>"


def scratch(rows: int, n: int, k: int, params: dict) -> tuple:
    """Each block's candidates (up to K keys and 32-bit indices) and their count, and one arrival
    ticket per row: ``"ticket"`` entries come from the stream's zeroed ticket array, which the
    kernel leaves zeroed (cutopk/cuda/workspace.py), not from the scratch buffer."""
    slots = rows * params["blocks"]
    return (
        Scratch("cand_key", "key", max(1, slots * k)),
        Scratch("cand_idx", "uint32", max(1, slots * k)),
        Scratch("cand_count", "uint32", slots),
        Scratch("tickets", "ticket", rows),
    )


def global_bytes(rows: int, n: int, k: int, key_bytes: int, index_bytes: int, params: dict) -> int:
    """The input read once and the outputs written, plus the candidates (each block's min(K, slice)
    keys and 32-bit indices), their counts and the tickets: each sector once, as every family
    counts (the merging block reads back sectors the launch wrote moments before)."""
    blocks = params["blocks"]
    candidates = rows * blocks * min(k, params["slice"])
    moved = sectors(candidates * key_bytes) + sectors(candidates * 4) + sectors(rows * blocks * 4)
    return read_once_bytes(rows, n, k, key_bytes, index_bytes, params) + moved + sectors(rows * 4)


def part(planned: Planned) -> Part:
    """One launch of ``blocks`` blocks per row, the slice and block count passed as constants."""
    f = planned
    moved = global_bytes(f.rows, f.n, f.k, f.key_bytes, f.index_dtype.itemsize, f.params)
    args = (("slice", f.params["slice"]), ("blocks", f.params["blocks"]))
    step = Step(
        kernel_name(f.params, f.cxx), True, (f.grid,), f.block, f.shared_bytes, args=args, global_bytes=moved
    )
    return Part([step], scratch(f.rows, f.n, f.k, f.params))
