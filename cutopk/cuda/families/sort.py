"""sort: the reference path. The keys of whole rows (compute_keys), each row ordered by the
tile-and-merge kernels (order.cu, no library sort), its first K kept, values gathered
(kernels/sort.cu, order.cu). Its launches are :func:`steps` (:func:`part` gives them to
cutopk/cuda/runner.py, which runs them and lists them in plan() from the same list)."""

from __future__ import annotations

import numpy as np

from ..kernel_constants import KEYS_THREADS
from . import order
from .common import ROWS, Geometry, Part, Planned, Scratch, Step, copy_step, gather_bytes, order_tile, sectors

COMPUTE_KEYS = (*ROWS, "largest", "nan_first", "out")
ARGUMENTS = {"compute_keys": COMPUTE_KEYS, "gather_values": (*ROWS, "k", "idx", "out")}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/sort.cu


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    return None  # any row, any K


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    grid = max(1, min(-(-(rows * n) // KEYS_THREADS), device.sm_count * 8))
    return Geometry("compute_keys", grid, KEYS_THREADS, 0, {"order_tile": order_tile(n, key_bytes, device)})


def _first_k(k: int, n: int, by_index: bool, int64: bool) -> tuple[bool, bool]:
    """Whether the first K keys, and the first K indices, are copied out of the ordered rows: the
    keys only to be ordered again by index, the indices for that or to gather through int64
    (indices of another type are written from them at the end; int64 ones go straight out)."""
    return k < n and by_index, k < n and (by_index or not int64)


def scratch(rows: int, n: int, k: int, params: dict, by_index: bool = False, int64: bool = False) -> tuple:
    """Every array the path uses (one buffer of the workspace): the keys, the ordering of whole
    rows, the first K pairs copied out (see :func:`_first_k`), their ordering by index."""
    # The first ordering has no indices yet (index = position): a one-element placeholder.
    table = [
        Scratch("keys", "key", rows * n),
        *order.scratch("order", rows, n),
        Scratch("no_idx", "int64", 1),
    ]
    keys, indices = _first_k(k, n, by_index, int64)
    if keys:
        table.append(Scratch("first_key", "key", rows * k))
    if indices:
        table.append(Scratch("first_idx", "int64", rows * k))
    if by_index:
        table += order.scratch("by_index", rows, k)
    return tuple(table)


def part(planned: Planned) -> Part:
    """The sort path's steps and scratch for a call (cutopk/cuda/runner.py runs them)."""
    f = planned
    by_index, int64 = f.order == "index", f.index_dtype == np.int64
    seq = steps(f.rows, f.n, f.k, f.key_bytes, f.params, f.grid, by_index, int64, f.index_dtype.itemsize)
    return Part(seq, scratch(f.rows, f.n, f.k, f.params, by_index, int64))


def steps(
    rows: int, n: int, k: int, key_bytes: int, params: dict, grid: int, by_index: bool,
    int64: bool = False, index_bytes: int = 8,
) -> list:  # fmt: skip
    """The launches: keys, whole rows ordered, the first K kept (and ordered by index), values
    gathered through int64 indices. ``int64``: the output indices are int64, so the first K
    indices go straight to them and the gather reads them there; otherwise they are written
    from the int64 ones at the end (``index_bytes`` each)."""
    tile = params["order_tile"]
    keys_bytes = 2 * sectors(rows * n * key_bytes)  # the input read, its keys written
    seq = [Step("compute_keys", True, (grid,), KEYS_THREADS, 0, (("out", "keys"),), global_bytes=keys_bytes)]
    ordered, (key, idx) = order.steps("order", rows, n, tile, key_bytes, ("keys", "no_idx"), False, False)
    seq += ordered
    length = n
    copy_keys, copy_indices = _first_k(k, n, by_index, int64)
    if copy_keys:
        seq.append(
            copy_step("copy of the first K keys", "first_key", key, (rows, n, k), key_bytes, key_bytes)
        )
        key = "first_key"
    if copy_indices:
        seq.append(copy_step("copy of the first K indices", "first_idx", idx, (rows, n, k), 8, 8))
        idx, length = "first_idx", k
    if by_index:
        ordered, (key, idx) = order.steps("by_index", rows, k, tile, key_bytes, (key, idx), True, True)
        seq += ordered
        length = k
    out = copy_step("the K indices copied out", "out_idx", idx, (rows, length, k), index_bytes, 8)
    gather = max(1, min(-(-(rows * k) // KEYS_THREADS), grid))
    if int64:  # the indices first, then the gather reads them where they are
        seq.append(out)
        idx = "out_idx"
    moved = gather_bytes(rows, k, n, key_bytes)
    args = (("idx", idx), ("out", "out_vals"))
    seq.append(Step("gather_values", True, (gather,), KEYS_THREADS, 0, args, global_bytes=moved))
    if not int64:
        seq.append(out)
    return seq
