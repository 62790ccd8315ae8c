"""The exact selection by keys of the NumPy backend, shared by its row routes (:mod:`cutopk.numpy.backend`)
and its long-row route (:mod:`cutopk.numpy.long_rows`)."""

from __future__ import annotations

import numpy as np

# Widest chunk of columns the tie rule counts through at once (its int32 running count).
FIRST_TRUE_MAX_COLUMNS = 1 << 16


def select_exact(keys: np.ndarray, k: int) -> np.ndarray:
    """Positions (ascending, int64) of the K largest keys per row, ties to lower positions."""
    rows, m = keys.shape
    part = np.partition(keys, m - k, axis=1)
    kth = part[:, m - k : m - k + 1]
    # The partition leaves every key below the boundary <= t: when none of them equals t (their
    # maximum is below it), the keys >= t are exactly K per row (the usual case), no tie to break.
    if m == k or (part[:, : m - k].max(axis=1, keepdims=True) < kth).all():
        take = keys >= kth
    else:
        above = keys > kth
        take = above | first_true(keys == kth, k - count_rows(above))
    # Every row has exactly k winners; a flat search is cheaper than a 2-D nonzero.
    return (np.flatnonzero(take) % m).reshape(rows, k)


# Up to this many rows, a row's True count is one whole-row count each (NumPy's SIMD count);
# beyond, one sum of the bytes along the rows (count_nonzero with an axis is several times
# slower than either: 4x65536: 80 us, against 8 us a row at a time and 50 us summed).
COUNT_ROWS_ONE_BY_ONE = 32


def count_rows(mask: np.ndarray) -> np.ndarray:
    """The True count of each row of the 2-D bool ``mask``, as int64."""
    rows = mask.shape[0]
    if rows <= COUNT_ROWS_ONE_BY_ONE:
        return np.fromiter((np.count_nonzero(row) for row in mask), dtype=np.int64, count=rows)
    return mask.view(np.uint8).sum(axis=1, dtype=np.int32).astype(np.int64)


def first_true(mask: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The first ``counts[r]`` True entries of each row ``r`` of ``mask`` (the lower-index rule
    for ties at the K-th key; ``counts[r]`` is at most the row's True count). A running count
    over chunks of columns that double in width, stopping once every row has its count: a few
    needed among many ties (an all-equal row) reads only the row's start, and the count's
    memory is one chunk's, not one int per element of the block."""
    m = mask.shape[1]
    out = np.zeros_like(mask)
    left = counts.astype(np.int64)
    start, width = 0, 1024
    while start < m and left.any():
        part = mask[:, start : start + width]
        running = np.cumsum(part, axis=1, dtype=np.int32)  # a chunk holds fewer than 2**31
        out[:, start : start + width] = part & (running <= left[:, None])
        left -= np.minimum(running[:, -1], left)
        start += width
        width = min(2 * width, FIRST_TRUE_MAX_COLUMNS)
    return out
