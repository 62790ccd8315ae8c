"""How a request's rows lie in memory: pure functions of shape, strides and axis.

A batch of rows is the array with the selection axis moved last. The kernels (and the NumPy
backend's 2-D view) read it in place when the other axes collapse into one row stride; otherwise
it must be copied first. Nothing here touches array data, so the checks and plans that use it
cost no work.
"""

from __future__ import annotations

import itertools


def row_strides(shape, strides, itemsize: int, axis: int) -> tuple[int, int] | None:
    """``(row_stride, col_stride)`` in elements of the rows along ``axis``, or None when the batch
    axes (all but ``axis``) do not collapse into a single stride (the rows must be copied)."""
    if any(st % itemsize for st in strides):
        return None
    batch = [
        (size, st // itemsize)
        for i, (size, st) in enumerate(zip(shape, strides, strict=True))
        if i != axis and size != 1
    ]
    # Each batch axis must step by the extent of the axes inside it (C order over the others).
    for (_, outer), (inner_size, inner) in itertools.pairwise(batch):
        if outer != inner * inner_size:
            return None
    return (batch[-1][1] if batch else 0), strides[axis] // itemsize


def is_outer(rows: int, row_stride: int, col_stride: int) -> bool:
    """Rows along an outer axis: adjacent rows are adjacent in memory, a row's elements are not."""
    return rows > 1 and row_stride == 1 and col_stride not in (0, 1)  # 0: one address per row


def c_strides(shape, itemsize: int) -> tuple[int, ...]:
    """The byte strides of a C-contiguous array of ``shape`` (the layout of a copy in C order)."""
    strides, step = [], itemsize
    for size in reversed(tuple(shape)):
        strides.append(step)
        step *= max(1, size)
    return tuple(reversed(strides))
