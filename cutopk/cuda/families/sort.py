"""sort: the reference path. The keys of whole rows (compute_keys), each row ordered by the
tile-and-merge kernels (order.cu, no library sort), its first K kept, values gathered
(kernels/sort.cu, order.cu). Its launches are :func:`steps`, run by cutopk/cuda/runner.py and
listed by plan() from the same list."""

from __future__ import annotations

from ..kernel_constants import KEYS_THREADS
from . import order
from .common import ROWS, Geometry, Scratch, Step, order_tile

COMPUTE_KEYS = (*ROWS, "largest", "nan_first", "out")
ARGUMENTS = {"compute_keys": COMPUTE_KEYS, "gather_values": (*ROWS, "k", "idx", "out")}


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    return None  # any row, any K


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    grid = max(1, min(-(-(rows * n) // KEYS_THREADS), device.sm_count * 8))
    return Geometry("compute_keys", grid, KEYS_THREADS, 0, {"order_tile": order_tile(n, key_bytes, device)})


def scratch(rows: int, n: int, k: int, params: dict, by_index: bool = False) -> tuple:
    """Every array the path uses (one buffer of the workspace): the keys, the ordering of whole
    rows, the first K pairs copied out, their ordering by index."""
    # The first ordering has no indices yet (index = position): a one-element placeholder.
    table = [
        Scratch("keys", "key", rows * n),
        *order.scratch("order", rows, n),
        Scratch("no_idx", "int64", 1),
    ]
    if k < n:
        table += [Scratch("first_key", "key", rows * k), Scratch("first_idx", "int64", rows * k)]
    if by_index:
        table += order.scratch("by_index", rows, k)
    return tuple(table)


def steps(rows: int, n: int, k: int, key_bytes: int, params: dict, grid: int, by_index: bool) -> list:
    """The launches: keys, whole rows ordered, the first K kept (and ordered by index), values
    gathered through the int64 indices, the indices copied out in the index dtype."""
    tile = params["order_tile"]
    seq = [Step("compute_keys", True, (grid,), KEYS_THREADS, 0, (("out", "keys"),))]
    ordered, (key, idx) = order.steps("order", rows, n, tile, key_bytes, ("keys", "no_idx"), False, False)
    seq += ordered
    if k < n:
        seq += [
            Step("", False, (), 0, library="copy of the first K keys", copy=("first_key", key, rows, n, k)),
            Step(
                "", False, (), 0, library="copy of the first K indices", copy=("first_idx", idx, rows, n, k)
            ),
        ]
        key, idx = "first_key", "first_idx"
    if by_index:
        ordered, (key, idx) = order.steps("by_index", rows, k, tile, key_bytes, (key, idx), True, True)
        seq += ordered
    gather = max(1, min(-(-(rows * k) // KEYS_THREADS), grid))
    seq.append(Step("gather_values", True, (gather,), KEYS_THREADS, 0, (("idx", idx), ("out", "out_vals"))))
    seq.append(Step("", False, (), 0, library="the K indices copied out", copy=("out_idx", idx, rows, k, k)))
    return seq
