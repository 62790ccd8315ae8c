"""transpose: rows along an outer axis copied to row-major (rows, n) by 32 x 32 tiles through
shared memory, so that both the reads (adjacent rows) and the writes (adjacent columns) are
coalesced (kernels/transpose.cu). A step before any family's launches, planned with the call."""

from __future__ import annotations

from ..kernel_constants import TRANSPOSE_THREADS
from .common import Scratch, Step, sectors
from .order import MAX_BLOCKS

ARGUMENTS = {"transpose_rows": ("in", "rows", "n", "row_stride", "col_stride", "out")}
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/transpose.cu


def scratch(rows: int, n: int) -> list:
    return [Scratch("row_major", "value", rows * n)]  # the input, row-major


def steps(rows: int, n: int, value_bytes: int) -> list:
    """The one launch: ``in`` (its strides ``row_stride``, ``col_stride``) to ``row_major``; the
    input read once and written once."""
    tiles = -(-rows // 32) * -(-n // 32)
    grid = (max(1, min(tiles, MAX_BLOCKS)),)
    moved = 2 * sectors(rows * n * value_bytes)
    return [
        Step("transpose_rows", True, grid, TRANSPOSE_THREADS, 0, (("out", "row_major"),), global_bytes=moved)
    ]


def copy_steps(rows: int, n: int, value_bytes: int) -> list:
    """The array library's copy of the input to ``row_major`` (where no tiled transpose serves:
    batch axes that do not collapse to one stride)."""
    moved = 2 * sectors(rows * n * value_bytes)
    what = "copy of the input to row-major"
    return [Step("", False, (), 0, library=what, copy=("row_major", "input"), global_bytes=moved)]
