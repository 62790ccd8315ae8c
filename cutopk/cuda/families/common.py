"""What the family modules share: the scratch table's entries and the kernels' common
parameter lists."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Scratch(NamedTuple):
    """One scratch array of a launch: its name (the kernel parameter it is passed as), its element
    type (a NumPy dtype name, or ``"key"`` for the unsigned key of the input's width) and its
    number of elements."""

    name: str
    dtype: str
    count: int

    def resolve(self, key_dtype) -> np.dtype:
        return np.dtype(key_dtype) if self.dtype == "key" else np.dtype(self.dtype)

    def nbytes(self, key_bytes: int) -> int:
        return self.count * (key_bytes if self.dtype == "key" else np.dtype(self.dtype).itemsize)


class Geometry(NamedTuple):
    """A family's launch for one request: the kernel template, grid and block (1-D), dynamic
    shared memory per block and the family's parameters."""

    kernel: str
    grid: int
    block: int
    shared_bytes: int
    params: dict


def scratch_bytes(table, key_bytes: int) -> int:
    """The bytes of a scratch table: what the launcher allocates from it, and what plan() reports."""
    return sum(entry.nbytes(key_bytes) for entry in table)


def allocate(xp, table, key_dtype) -> dict:
    """Each array of a scratch table, by name (1-D, C-contiguous)."""
    return {entry.name: xp.empty(entry.count, dtype=entry.resolve(key_dtype)) for entry in table}


def pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# The parameters the single-launch kernels share, by their C names (kernels/<family>.cu): the
# input and its rows (kernels/row_extent.cuh), the selection, the outputs.
ROWS = ("in", "rows", "n", "row_stride", "col_stride", "extents", "rows_kind")
SELECT = ("k", "largest", "nan_first", "by_index")
OUTPUTS = ("out_vals", "out_idx", "index_bytes")


def order_tile(length: int, key_bytes: int, device) -> int:
    """Pairs per tile of the global-memory ordering (kernels/order.cu): the largest power of
    two whose (key, 64-bit index) pairs fit shared memory, at most ``length`` rounded up to one."""
    tile = 1 << ((device.shared_bytes // (8 + key_bytes)).bit_length() - 1)
    return max(2, min(tile, pow2_at_least(length)))
