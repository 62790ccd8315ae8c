"""What the family modules share: the scratch table's entries and the kernels' common
parameter lists."""

from __future__ import annotations

import math
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


SECTOR = 32  # bytes: the unit in which global memory moves


def sectors(nbytes: int) -> int:
    """``nbytes`` of one array, rounded up to whole 32-byte sectors (arrays start sector-aligned)."""
    return -(-nbytes // SECTOR) * SECTOR


def one_read_bytes(rows: int, n: int, k: int, key_bytes: int, index_bytes: int) -> int:
    """Global bytes of a launch that reads the input (rows x n) and writes the K values and
    indices of each row: each sector once (a second pass over a row, and the winners' values
    read back, hit sectors already counted)."""
    return sectors(rows * n * key_bytes) + sectors(rows * k * key_bytes) + sectors(rows * k * index_bytes)


def gathered(count: int, source_bytes: int) -> int:
    """Bytes moved reading ``count`` elements at random places of an array of ``source_bytes``:
    the expected number of distinct sectors among ``count`` drawn from the array's."""
    total = sectors(source_bytes) // SECTOR
    if not total:
        return 0
    return round(total * -math.expm1(-count / total)) * SECTOR


def order_bytes(rows: int, length: int, key_bytes: int, merges: int, with_indices: bool = True) -> list:
    """Global bytes of order_pairs' launches over ``rows`` rows of ``length`` pairs
    (kernels/order.cu): order_tiles reads the keys (and their int64 indices) and writes the
    pairs; each of the ``merges`` order_merge launches reads and writes the pairs."""
    keys, indices = sectors(rows * length * key_bytes), sectors(rows * length * 8)
    tiles = keys + (indices if with_indices else 0) + keys + indices
    return [tiles] + [2 * (keys + indices)] * merges


def gather_bytes(rows: int, k: int, n: int, value_bytes: int) -> int:
    """Global bytes of gather_values: the K int64 indices of each row, the values at them
    (scattered over the input), the values written."""
    count = rows * k
    return sectors(count * 8) + gathered(count, rows * n * value_bytes) + sectors(count * value_bytes)
