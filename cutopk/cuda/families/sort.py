"""sort: the reference path. The keys of whole rows (compute_keys), each row ordered by the
tile-and-merge kernels (order.cu, no library sort), its first K kept, values gathered
(kernels/sort.cu, order.cu; the launches are cutopk/cuda/launcher.py's ``_sort_path``)."""

from __future__ import annotations

from ..kernel_constants import KEYS_THREADS
from .common import ROWS, Geometry, Scratch, order_tile

COMPUTE_KEYS = (*ROWS, "largest", "nan_first", "out")


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    return None  # any row, any K


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    grid = max(1, min(-(-(rows * n) // KEYS_THREADS), device.sm_count * 8))
    return Geometry("compute_keys", grid, KEYS_THREADS, 0, {"order_tile": order_tile(n, key_bytes, device)})


def _pairs(name: str, rows: int, length: int) -> list:
    """order_pairs' two buffers of (key, int64 index) pairs."""
    return [
        Scratch(f"{name}_key", "key", rows * length),
        Scratch(f"{name}_idx", "int64", rows * length),
        Scratch(f"{name}_key2", "key", rows * length),
        Scratch(f"{name}_idx2", "int64", rows * length),
    ]


def scratch(rows: int, n: int, k: int, params: dict, by_index: bool = False) -> tuple:
    """Every array the path allocates (their sum bounds what is held at any one time): the keys,
    the ordering of whole rows, the first K pairs copied out, their ordering by index."""
    # The first ordering has no indices yet (index = position): a one-element placeholder.
    table = [Scratch("keys", "key", rows * n), *_pairs("order", rows, n), Scratch("no_idx", "int64", 1)]
    if k < n:
        table += [Scratch("first_key", "key", rows * k), Scratch("first_idx", "int64", rows * k)]
    if by_index:
        table += _pairs("by_index", rows, k)
    return tuple(table)
