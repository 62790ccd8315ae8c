"""What the family modules share: the scratch table's entries and the kernels' common
parameter lists."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class Scratch(NamedTuple):
    """One scratch array of a launch: its name (the kernel parameter it is passed as), its element
    type (a NumPy dtype name, ``"key"`` for the unsigned key of the input's width, or ``"value"``
    for the input's own type, of the same width) and its number of elements."""

    name: str
    dtype: str
    count: int

    def resolve(self, key_dtype, value_dtype=None) -> np.dtype:
        if self.dtype == "value" and value_dtype is not None:
            return np.dtype(value_dtype)
        return np.dtype(key_dtype) if self.dtype in ("key", "value") else np.dtype(self.dtype)

    def nbytes(self, key_bytes: int) -> int:
        return self.count * (key_bytes if self.dtype in ("key", "value") else np.dtype(self.dtype).itemsize)


class Geometry(NamedTuple):
    """A family's launch for one request: the kernel template, grid and block (1-D), dynamic
    shared memory per block and the family's parameters."""

    kernel: str
    grid: int
    block: int
    shared_bytes: int
    params: dict


# Each scratch array starts at a multiple of this many bytes of its call's one buffer (CUDA's
# own allocations are 256-byte aligned: every vector load and every element type is aligned).
ALIGN = 256


def offsets(table, key_bytes: int) -> tuple[tuple[int, ...], int]:
    """``(offsets, total)``: where each entry of a scratch table starts in the call's one buffer
    (each at a multiple of ALIGN), and the bytes of that buffer."""
    starts, end = [], 0
    for entry in table:
        starts.append(end)
        end += -(-entry.nbytes(key_bytes) // ALIGN) * ALIGN
    return tuple(starts), end


def scratch_bytes(table, key_bytes: int) -> int:
    """The bytes of a scratch table as one buffer (each entry aligned): what the launcher takes
    from the workspace for it, and what plan() reports."""
    return offsets(table, key_bytes)[1]


def carve(buffer, table, key_dtype, value_dtype=None) -> dict:
    """Each array of a scratch table, by name (1-D, C-contiguous), as views of ``buffer`` (a 1-D
    uint8 array of at least :func:`scratch_bytes` bytes, itself aligned)."""
    key_dtype = np.dtype(key_dtype)
    starts, _ = offsets(table, key_dtype.itemsize)
    out = {}
    for entry, start in zip(table, starts, strict=True):
        dtype = entry.resolve(key_dtype, value_dtype)
        out[entry.name] = buffer[start : start + entry.count * dtype.itemsize].view(dtype)
    return out


def allocate(xp, table, key_dtype) -> dict:
    """Each array of a scratch table, by name (1-D, C-contiguous), carved from one allocation of
    ``xp.empty`` (the launcher's ``xp`` takes it from the call's cached workspace)."""
    total = scratch_bytes(table, np.dtype(key_dtype).itemsize)
    return carve(xp.empty(max(1, total), dtype=np.uint8), table, key_dtype)


class Step(NamedTuple):
    """One launch of a family's sequence, as data: the runner (cutopk/cuda/runner.py) launches it
    and plan() lists it, from the same list.

    ``kernel``: the kernel's name (its C parameters are its descriptor's, by name), or "" for a
    step of the array library. ``templated``: instantiated for the element type. ``args``:
    ``(parameter, value)`` pairs where a parameter takes another value than the one named as
    itself: a str names a value of the call (a scratch array, ``"in"``, ...), anything else is
    a constant. A library step says what it does in ``library`` and copies ``copy`` =
    ``(dst, src, rows, src_len, dst_len)``: the first ``dst_len`` of each of ``rows`` rows of
    ``src`` into ``dst`` (converting the element type)."""

    kernel: str
    templated: bool
    grid: tuple
    block: int
    shared_bytes: int = 0
    args: tuple = ()
    library: str = ""
    copy: tuple = ()


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
