"""order: the K winners (or whole rows) of many rows ordered by global-memory sorting, no library
sort: tiles sorted in shared memory (``order_tiles``), then runs merged pairwise (``order_merge``)
(kernels/order.cu). Steps of the sort path and of multiblock's long K, not a family of its own."""

from __future__ import annotations

from ..kernel_constants import ORDER_MERGE_THREADS, ORDER_TILE_THREADS
from .common import Scratch, Step, order_bytes, pow2_at_least

MAX_BLOCKS = 1 << 16  # the ordering kernels stride over what a grid this size does not cover
_PAIRS = ("src_key", "src_idx")
ARGUMENTS = {
    "order_tiles": (*_PAIRS, "with_idx", "rows", "len", "tile", "by_index", "dst_key", "dst_idx"),
    "order_merge": (*_PAIRS, "rows", "len", "width", "by_index", "dst_key", "dst_idx"),
}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/order.cu


def scratch(name: str, rows: int, length: int) -> list:
    """The two buffers of (key, int64 index) pairs the steps named ``name`` sort through."""
    return [
        Scratch(f"{name}_key", "key", rows * length),
        Scratch(f"{name}_idx", "int64", rows * length),
        Scratch(f"{name}_key2", "key", rows * length),
        Scratch(f"{name}_idx2", "int64", rows * length),
    ]


def geometry(rows: int, length: int, tile: int, key_bytes: int):
    """``(tile, tiles_grid, tiles_block, tiles_shared, merge_grid, widths)`` for ``rows`` rows of
    ``length`` pairs: one ``order_tiles``, then one ``order_merge`` per width (runs of ``width``
    pairs merged pairwise)."""
    tile = min(tile, pow2_at_least(length))
    threads = min(ORDER_TILE_THREADS, max(32, tile // 2))
    blocks = max(1, min(rows * -(-length // tile), MAX_BLOCKS))
    widths, width = [], tile
    while width < length:
        widths.append(width)
        width *= 2
    merge_blocks = max(1, min(-(-rows * length // ORDER_MERGE_THREADS), MAX_BLOCKS))
    return tile, (blocks,), threads, tile * (8 + key_bytes), (merge_blocks,), tuple(widths)


def steps(
    name: str, rows: int, length: int, tile: int, key_bytes: int, src: tuple, with_idx: bool, by_index: bool
):
    """``(steps, (key, idx))``: the launches ordering ``rows`` rows of ``length`` pairs held by the
    values ``src`` = ``(key, idx)`` (without ``with_idx``, index = position and ``idx`` is never
    read) through the buffers of :func:`scratch` named ``name``, and the names of the buffers
    that hold the result."""
    tile, grid, threads, shared, merge_grid, widths = geometry(rows, length, tile, key_bytes)
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
                (("src_key", bufs[0][0]), ("src_idx", bufs[0][1]), ("width", width),
                 ("dst_key", bufs[1][0]), ("dst_idx", bufs[1][1]), *common),
                global_bytes=merge_bytes[0],
            )
        )  # fmt: skip
        bufs.reverse()
    return seq, bufs[0]
