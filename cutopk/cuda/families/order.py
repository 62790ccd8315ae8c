"""order: the K winners (or whole rows) of many rows ordered by global-memory sorting, no library
sort: tiles sorted in shared memory (``order_tiles``), then groups of runs merged
(``order_merge``: pairwise for the sort path, ``ways`` runs at once for multiblock's K winners)
(kernels/order.cu). Steps of the sort path and of multiblock's large K, not a family of its own."""

from __future__ import annotations

import math

import numpy as np

from ..kernel_constants import ORDER_MERGE_THREADS, ORDER_TILE_THREADS
from .common import Scratch, Step, order_bytes, pow2_at_least

MAX_BLOCKS = 1 << 16  # the ordering kernels stride over what a grid this size does not cover
_PAIRS = ("src_key", "src_idx")
ARGUMENTS = {
    "order_tiles": (*_PAIRS, "with_idx", "rows", "len", "tile", "by_index", "dst_key", "dst_idx"),
    "order_merge": (*_PAIRS, "rows", "len", "width", "ways", "by_index", "dst_key", "dst_idx"),
}
SCALAR_TYPES = {"ways": np.int32}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/order.cu


def scratch(name: str, rows: int, length: int) -> list:
    """The two buffers of (key, int64 index) pairs the steps named ``name`` sort through."""
    return [
        Scratch(f"{name}_key", "key", rows * length),
        Scratch(f"{name}_idx", "int64", rows * length),
        Scratch(f"{name}_key2", "key", rows * length),
        Scratch(f"{name}_idx2", "int64", rows * length),
    ]


def merge_ways(length: int, tile: int) -> int:
    """Runs one ``order_merge`` pass merges at once so that 2 passes at most order ``length``
    pairs from tiles of ``tile``: all the runs when there are 8 or fewer, else the power of two
    at or above their square root. Each pair then makes ``ways - 1`` binary searches a pass
    (cached reads) instead of one a pass over log2(runs) passes: fewer launches, and the pairs
    read and written twice at most, whatever K."""
    runs = -(-length // tile)
    return max(2, pow2_at_least(runs) if runs <= 8 else pow2_at_least(math.isqrt(runs - 1) + 1))


def geometry(rows: int, length: int, tile: int, key_bytes: int, ways: int = 2):
    """``(tile, tiles_grid, tiles_block, tiles_shared, merge_grid, widths)`` for ``rows`` rows of
    ``length`` pairs: one ``order_tiles``, then one ``order_merge`` per width (groups of ``ways``
    runs of ``width`` pairs merged)."""
    tile = min(tile, pow2_at_least(length))
    threads = min(ORDER_TILE_THREADS, max(32, tile // 2))
    blocks = max(1, min(rows * -(-length // tile), MAX_BLOCKS))
    widths, width = [], tile
    while width < length:
        widths.append(width)
        width *= ways
    merge_blocks = max(1, min(-(-rows * length // ORDER_MERGE_THREADS), MAX_BLOCKS))
    return tile, (blocks,), threads, tile * (8 + key_bytes), (merge_blocks,), tuple(widths)


def steps(
    name: str, rows: int, length: int, tile: int, key_bytes: int, src: tuple, with_idx: bool, by_index: bool,
    ways: int = 2, final_idx: str | None = None,
):  # fmt: skip
    """``(steps, (key, idx))``: the launches ordering ``rows`` rows of ``length`` pairs held by the
    values ``src`` = ``(key, idx)`` (without ``with_idx``, index = position and ``idx`` is never
    read) through the buffers of :func:`scratch` named ``name``, merging ``ways`` runs a pass,
    and the names of the buffers that hold the result. ``final_idx``: where the last launch
    writes its indices instead (an int64 array of ``rows * length``, e.g. the output)."""
    tile, grid, threads, shared, merge_grid, widths = geometry(rows, length, tile, key_bytes, ways)
    bufs = [(f"{name}_key", f"{name}_idx"), (f"{name}_key2", f"{name}_idx2")]
    key, idx = src
    common = (("rows", rows), ("len", length), ("by_index", int(by_index)))
    tiles_bytes, *merge_bytes = order_bytes(rows, length, key_bytes, len(widths), with_idx)
    seq = [
        Step(
            "order_tiles", True, grid, threads, shared,
            (("src_key", key), ("src_idx", idx), ("with_idx", int(with_idx)),
             ("tile", tile), ("dst_key", bufs[0][0]), ("dst_idx", bufs[0][1]), *common),
            global_bytes=tiles_bytes,
        )
    ]  # fmt: skip
    for width in widths:
        seq.append(
            Step(
                "order_merge", True, merge_grid, ORDER_MERGE_THREADS, 0,
                (("src_key", bufs[0][0]), ("src_idx", bufs[0][1]), ("width", width), ("ways", ways),
                 ("dst_key", bufs[1][0]), ("dst_idx", bufs[1][1]), *common),
                global_bytes=merge_bytes[0],
            )
        )  # fmt: skip
        bufs.reverse()
    if final_idx is not None:  # the last launch writes its indices there
        last = seq[-1]
        seq[-1] = last._replace(args=tuple((p, final_idx if p == "dst_idx" else v) for p, v in last.args))
        bufs[0] = (bufs[0][0], final_idx)
    return seq, bufs[0]
