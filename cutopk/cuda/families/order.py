"""order: the K winners (or whole rows) of many rows ordered by global-memory sorting, no library
sort: tiles sorted in shared memory (``order_tiles``), then groups of runs merged
(``order_merge``: pairwise for the sort path, ``ways`` runs at once for multiblock's K winners)
(kernels/order.cu). Multiblock's K winners can also be picked where its selection left them
(``order_winner_tiles``: tiles of the candidates above the K-th key's bucket and of the
bucket's winners, runs of different lengths) and merged at once by ``order_output``
(:func:`picked_steps`). Steps of the sort path and of multiblock's large K, not a family of
its own."""

from __future__ import annotations

import math

import numpy as np

from ..kernel_constants import ORDER_MERGE_THREADS, ORDER_TILE_THREADS
from .common import Scratch, Step, order_bytes, pow2_at_least, sectors

MAX_BLOCKS = 1 << 16  # the ordering kernels stride over what a grid this size does not cover
_PAIRS = ("src_key", "src_idx")
_MERGE = (*_PAIRS, "rows", "len", "width", "ways", "by_index", "pos_bytes")
_INPUT = ("in", "n", "row_stride", "col_stride", "extents", "rows_kind", "largest")  # order_output's re-reads
_TILES = ("with_idx", "rows", "len", "tile", "by_index", "pos_bytes")
_PICKS = ("cand_key", "cand_idx", "cap", "win_key", "win_idx", "k", "picks")  # multiblock's buffers
ARGUMENTS = {
    "order_tiles": (*_PAIRS, *_TILES, "dst_key", "dst_idx"),
    "order_winner_tiles": (*_PICKS, "rows", "runs", "tile", "by_index", "dst_key", "dst_idx", "run_counts"),
    "order_merge": (*_MERGE, "dst_key", "dst_idx"),
    "order_output": (*_INPUT, *_MERGE, "runs", "run_counts", "out_vals", "out_idx"),
}
SCALAR_TYPES = {"ways": np.int32, "pos_bytes": np.int32, "runs": np.int32, "cap": np.int64}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/order.cu


def scratch(name: str, rows: int, length: int, pos: int = 8) -> list:
    """The two buffers of (key, index of ``pos`` bytes) pairs the steps named ``name`` sort
    through."""
    index = "uint32" if pos == 4 else "int64"
    return [
        Scratch(f"{name}_key", "key", rows * length),
        Scratch(f"{name}_idx", index, rows * length),
        Scratch(f"{name}_key2", "key", rows * length),
        Scratch(f"{name}_idx2", index, rows * length),
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
    # kernels/order.cu finds a pair's run and group by shifts and masks
    assert tile & (tile - 1) == 0 and ways & (ways - 1) == 0, (tile, ways)
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
    ways: int = 2, pos: int = 8, output: bool = False,
):  # fmt: skip
    """``(steps, (key, idx))``: the launches ordering ``rows`` rows of ``length`` pairs held by the
    values ``src`` = ``(key, int64 idx)`` (without ``with_idx``, index = position and ``idx`` is
    never read) through the buffers of :func:`scratch` named ``name`` (indices of ``pos`` bytes),
    merging ``ways`` runs a pass, and the names of the buffers that hold the result. With
    ``output`` the last launch is ``order_output``, a merge that writes the call's ``out_vals``
    and int64 ``out_idx`` instead (the values rebuilt from the keys; one run: a merge of one way,
    a copy): nothing is returned then."""
    tile, grid, threads, shared, merge_grid, widths = geometry(rows, length, tile, key_bytes, ways)
    if output and not widths:
        widths = (tile,)  # one run: order_output only writes the outputs
    bufs = [(f"{name}_key", f"{name}_idx"), (f"{name}_key2", f"{name}_idx2")]
    key, idx = src
    common = (("rows", rows), ("len", length), ("by_index", int(by_index)), ("pos_bytes", pos))
    tiles_bytes, *merge_bytes = order_bytes(rows, length, key_bytes, len(widths), with_idx, pos)
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
    if output:  # the last merge writes the outputs
        last = seq[-1]
        # runs 0: dense runs, run_counts never read (any uint32 array: the source's positions)
        args = (
            *(a for a in last.args if a[0] not in ("dst_key", "dst_idx")),
            ("runs", 0),
            ("run_counts", idx),
        )
        moved = output_bytes(rows, length, key_bytes, pos)
        seq[-1] = last._replace(kernel="order_output", args=args, global_bytes=moved)
        return seq, None
    return seq, bufs[0]


def output_bytes(rows: int, k: int, key_bytes: int, pos: int) -> int:
    """Global bytes of ``order_output``: the pairs read, the values (rebuilt from the keys: the
    input is re-read only at NaN and zero keys, none among spread keys) and int64 indices
    written."""
    pairs = sectors(rows * k * key_bytes) + sectors(rows * k * pos)
    return pairs + sectors(rows * k * key_bytes) + sectors(rows * k * 8)


def picked_runs(cap: int, k: int, tile: int) -> int:
    """Slots of ``tile`` pairs per row of :func:`picked_steps`: the candidates' spans and one for
    the bucket's winners, or the K winners' spans (a row whose selection wrote them all), as a
    power of two (order_output finds a slot's row and run by shifts)."""
    return pow2_at_least(max(-(-cap // tile) + 1, -(-k // tile)))


def picked_scratch(rows: int, runs: int, tile: int) -> list:
    """The slots of :func:`picked_steps` (keys, 4-byte positions) and each slot's count."""
    return [
        Scratch("order_key", "key", rows * runs * tile),
        Scratch("order_idx", "uint32", rows * runs * tile),
        Scratch("run_counts", "uint32", rows * runs),
    ]


def picked_steps(
    rows: int, k: int, cap: int, tile: int, key_bytes: int, by_index: bool, expected: int
) -> list:
    """multiblock's K winners ordered from where its selection left them: ``order_winner_tiles``
    (the candidates above the K-th key's bucket, ``cap`` a row, and the winners' buffer, per each
    row's ``picks``) into :func:`picked_runs` slots of ``tile`` pairs, then ``order_output``
    merging every run of a row at once and writing the outputs. ``expected``: the candidates a
    row of spread keys holds (the tiles read them all), for the launches' global bytes; with
    ``cap`` 0 every row's K pairs are in the winners' buffer (the tiles read those)."""
    runs = picked_runs(cap, k, tile)
    threads = min(ORDER_TILE_THREADS, max(32, tile // 2))
    blocks = max(1, min(rows * runs, MAX_BLOCKS))
    pairs, counts = key_bytes + 4, sectors(rows * runs * 4)
    picks = sectors(rows * 4 * 8)
    # The tiles read each candidate pair (and the few bucket's winners: one sector a row) and
    # write the K pairs; the merge reads them back and writes the values and int64 indices.
    read = sectors(rows * expected * pairs) + rows * 32 if cap else sectors(rows * k * pairs)
    tiles_bytes = picks + read + sectors(rows * k * pairs) + counts
    common = (("rows", rows), ("tile", tile), ("by_index", int(by_index)), ("runs", runs))
    merge_blocks = max(1, min(-(-rows * runs * tile // ORDER_MERGE_THREADS), MAX_BLOCKS))
    return [
        Step(
            "order_winner_tiles", True, (blocks,), threads, tile * (4 + key_bytes),
            (("dst_key", "order_key"), ("dst_idx", "order_idx"), *common),
            global_bytes=tiles_bytes,
        ),
        Step(
            "order_output", True, (merge_blocks,), ORDER_MERGE_THREADS, 0,
            (("src_key", "order_key"), ("src_idx", "order_idx"), ("len", k), ("width", tile), ("ways", runs),
             ("pos_bytes", 4), *common),
            global_bytes=counts + output_bytes(rows, k, key_bytes, 4),
        ),
    ]  # fmt: skip
