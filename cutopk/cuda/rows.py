"""Launch helpers of the row kernels (bitonic, thread_row, the ordering and transposing kernels):
shared memory beyond 48 KB, the ordering of K winners too many for shared memory, and the tiled
transpose of rows along an outer axis. Shared by the CUDA and simulator targets, like ``launcher``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import device as _device
from . import dispatch as _dispatch
from . import kernel_source as _kernel_source
from .kernel_constants import ORDER_MERGE_THREADS, ORDER_TILE_THREADS, TRANSPOSE_THREADS

MAX_BLOCKS = 1 << 16  # the ordering kernels stride over what a grid this size does not cover

# The launches of this module's kernels, and gather_values (the sort and multiblock paths), by the
# kernels' C parameter names (kernels/order.cu, transpose.cu, sort.cu; checked against them by
# tests/gpu/test_kernel_arguments.py).
SCALAR_TYPES = {
    "rows": np.int64, "len": np.int64, "width": np.int64, "n": np.int64, "row_stride": np.int64,
    "col_stride": np.int64, "with_idx": np.int32, "tile": np.int32, "by_index": np.int32,
    "k": np.int32, "rows_kind": np.int32,
}  # fmt: skip
_PAIRS = ("src_key", "src_idx")
ORDER_TILES = _kernel_source.params(
    "order_tiles",
    (*_PAIRS, "with_idx", "rows", "len", "tile", "by_index", "dst_key", "dst_idx"),
    SCALAR_TYPES,
)
ORDER_MERGE = _kernel_source.params(
    "order_merge", (*_PAIRS, "rows", "len", "width", "by_index", "dst_key", "dst_idx"), SCALAR_TYPES
)
TRANSPOSE_ROWS = _kernel_source.params(
    "transpose_rows", ("in", "rows", "n", "row_stride", "col_stride", "out"), SCALAR_TYPES
)
_ROWS = ("in", "rows", "n", "row_stride", "col_stride", "extents", "rows_kind")
GATHER_VALUES = _kernel_source.params("gather_values", (*_ROWS, "k", "idx", "out"), SCALAR_TYPES)


def launch(fn, grid, block, args, shared_bytes: int, target: str) -> None:
    """Launch ``fn`` with ``shared_bytes`` of dynamic shared memory, opting the kernel in first
    when that is more than a block gets by default (see :func:`opt_in`)."""
    opt_in(fn, shared_bytes, target)
    fn(grid, block, args, shared_mem=shared_bytes)


def opt_in(fn, shared_bytes: int, target: str) -> None:
    """Let ``fn`` take ``shared_bytes`` of dynamic shared memory: beyond what a block gets by
    default (48 KB less its static shared memory) the kernel must opt in first.

    The kernel is opted in to the device's whole limit, not to this launch's size, so threads
    launching the same kernel with different sizes never lower each other's limit."""
    if shared_bytes > _dispatch.SHARED_BYTES - _dispatch.STATIC_SHARED_RESERVE:
        limit = _device.device_facts(target, _device.device_id(target)).shared_bytes
        if shared_bytes > limit:
            raise ValueError(
                f"a launch asks for {shared_bytes} bytes of shared memory, the device allows {limit}"
            )
        fn.max_dynamic_shared_size_bytes = limit


def order_pairs(mod, cxx: str, keys, idx, by_index: bool, tile: int, target: str):
    """``(keys, idx)`` of ``rows`` rows sorted within each row by the selection order (larger key,
    then lower index) or, with ``by_index``, by index: tiles sorted in shared memory
    (``order_tiles``), then merged pairwise in global memory (``order_merge``), no library sort.

    ``keys``: a C-contiguous (rows, length) array of keys; ``idx``: a C-contiguous (rows, length)
    int64 array of distinct indices, or None for index = position. Returns new arrays.
    """
    xp = np if isinstance(keys, np.ndarray) else _cupy()
    rows, length = keys.shape
    tiles, merges = order_launches(rows, length, tile, keys.itemsize)
    tile = tiles.tile
    v = {
        "src_key": keys,
        "src_idx": idx if idx is not None else xp.empty(1, np.int64),
        "with_idx": idx is not None,
        "rows": rows,
        "len": length,
        "tile": tile,
        "by_index": by_index,
    }
    bufs = [(xp.empty_like(keys), xp.empty((rows, length), np.int64)) for _ in range(2)]
    v["dst_key"], v["dst_idx"] = bufs[0]
    fn = mod.get_function(f"{ORDER_TILES.kernel}<{cxx}>")
    launch(fn, tiles.grid, tiles.block, ORDER_TILES.pack(v), tiles.shared_bytes, target)
    merge = mod.get_function(f"{ORDER_MERGE.kernel}<{cxx}>")
    for width in merges.widths:
        (v["src_key"], v["src_idx"]), (v["dst_key"], v["dst_idx"]) = bufs
        v["width"] = width
        merge(merges.grid, merges.block, ORDER_MERGE.pack(v))
        bufs.reverse()
    return bufs[0]


class _Tiles(NamedTuple):
    tile: int
    grid: tuple[int]
    block: tuple[int]
    shared_bytes: int


class _Merges(NamedTuple):
    grid: tuple[int]
    block: tuple[int]
    widths: tuple[int, ...]


def order_launches(rows: int, length: int, tile: int, key_bytes: int) -> tuple[_Tiles, _Merges]:
    """The launches of :func:`order_pairs` for ``rows`` rows of ``length`` pairs: one of
    ``order_tiles``, then one ``order_merge`` per width (runs of ``width`` pairs merged pairwise)."""
    tile = min(tile, _dispatch.pow2_at_least(length))
    threads = min(ORDER_TILE_THREADS, max(32, tile // 2))
    blocks = max(1, min(rows * -(-length // tile), MAX_BLOCKS))
    tiles = _Tiles(tile, (blocks,), (threads,), tile * (8 + key_bytes))
    widths, width = [], tile
    while width < length:
        widths.append(width)
        width *= 2
    blocks = max(1, min(-(-rows * length // ORDER_MERGE_THREADS), MAX_BLOCKS))
    return tiles, _Merges((blocks,), (ORDER_MERGE_THREADS,), tuple(widths))


def transpose_rows(mod, cxx: str, moved, strides: tuple[int, int]):
    """Rows along an outer axis of ``moved`` (the row axis last; element strides ``strides``,
    row stride 1) copied to a new row-major (rows, n) array by ``transpose_rows``: 32 x 32 tiles
    through shared memory, so that both the reads (adjacent rows) and the writes (adjacent
    columns) are coalesced, unlike an elementwise copy."""
    xp = np if isinstance(moved, np.ndarray) else _cupy()
    n = moved.shape[-1]
    rows = moved.size // n
    out = xp.empty((rows, n), dtype=moved.dtype)
    tiles = -(-rows // 32) * -(-n // 32)
    v = {"in": moved, "rows": rows, "n": n, "row_stride": strides[0], "col_stride": strides[1], "out": out}
    threads = TRANSPOSE_THREADS
    fn = mod.get_function(f"{TRANSPOSE_ROWS.kernel}<{cxx}>")
    fn((max(1, min(tiles, MAX_BLOCKS)),), (threads,), TRANSPOSE_ROWS.pack(v))
    return out


def _cupy():
    import cupy

    return cupy
