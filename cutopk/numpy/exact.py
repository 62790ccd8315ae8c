"""The exact selection by keys of the NumPy backend, shared by its row routes (:mod:`cutopk.numpy.backend`,
:mod:`cutopk.numpy.pivot_filter`, :mod:`cutopk.numpy.outer_axis`) and its long-row route
(:mod:`cutopk.numpy.long_rows`), and the ordering of winners found in index order."""

from __future__ import annotations

import numpy as np

# Widest chunk of columns the tie rule counts through at once (its int32 running count).
FIRST_TRUE_MAX_COLUMNS = 1 << 16


def select_exact(keys: np.ndarray, k: int) -> np.ndarray:
    """Positions (ascending, int64) of the K largest keys per row, ties to lower positions."""
    rows, m = keys.shape
    # NumPy's partition of 8-bit keys is 15-30 times slower than of 16-bit ones (1024x1000:
    # 6.7 ms against 0.45 ms widened; 1x2**20: 5.5 ms against 0.18 ms).
    part = np.partition(keys if keys.itemsize > 1 else keys.astype(np.uint16), m - k, axis=1)
    kth = part[:, m - k : m - k + 1].astype(keys.dtype, copy=False)
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


# A mask whose words holding a True exceed this share of its words is listed by NumPy's own
# nonzero. NumPy's nonzero is slowest on masks of a few per cent (a branch per byte it cannot
# predict); a 1M mask: 0.5% True 134 us against 61 us through the words (4% of the words hit),
# 5% 755 against 262 us (34%), 10% 1437 against 408 us (57%), 20% 357 against 636 us (83%).
SPARSE_MAX_WORD_SHARE = 0.6


def true_words(mask: np.ndarray) -> np.ndarray | None:
    """The positions of the 8-byte words of the C-contiguous bool ``mask`` (read flat) that hold
    a True, or None where the mask is no whole number of words (or its words are not aligned).
    One comparison of a word a time: some 8 times faster than listing the bytes (a 1M mask:
    30 us against 120 us), and at most 8 times the True count, so it bounds that count."""
    flat = mask.reshape(-1)
    if flat.size % 8 or not flat.flags.aligned or flat.ctypes.data % 8:
        return None
    return np.flatnonzero(flat.view(np.uint64) != 0)


def true_positions(mask: np.ndarray, words: np.ndarray | None = None) -> np.ndarray:
    """``np.flatnonzero(mask)`` for a C-contiguous bool ``mask``; ``words``: its
    :func:`true_words`, where already known. A sparse mask (the pivot filter's: a few
    thousand candidates among a million elements) is listed through its words that hold a True:
    only their bytes are read one by one (8x128256: 50 us against NumPy's 120 us; see
    ``SPARSE_MAX_WORD_SHARE``)."""
    flat = mask.reshape(-1)
    if words is None:
        words = true_words(flat)
    if words is None or words.size > flat.size // 8 * SPARSE_MAX_WORD_SHARE:
        return np.flatnonzero(flat)
    inner = np.flatnonzero(flat.view(np.uint64).take(words).view(np.bool_))  # ascending
    pos = words.take(inner >> 3)
    pos <<= 3
    pos += inner & 7
    return pos


def order_winners(cols: np.ndarray, keys: np.ndarray | None, order: str) -> np.ndarray:
    """Order winners given in ascending index order, with their keys (``order`` "value": by
    key, ties in index order; else as they are). Shared by every route that finds its winners
    in index order."""
    if order != "value":
        return cols
    assert keys is not None, "an order by value comes with the winners' keys"
    rows, k = cols.shape
    bits = max(1, (k - 1).bit_length())
    if 8 * keys.itemsize + bits > 64:
        # ~key turns "largest key first" into an ascending sort; stability keeps ties in index order.
        return np.take_along_axis(cols, np.argsort(~keys, axis=1, kind="stable"), axis=1)
    # One sort of composites (inverted key, winner's place): distinct, so the sort needs no
    # stability and NumPy's SIMD sort of uint64 serves (256x64: 36 us against 169 us for the
    # stable argsort; 4x512: 10 against 21 us).
    comp = np.invert(keys).astype(np.uint64)
    comp <<= np.uint64(bits)
    comp |= np.arange(k, dtype=np.uint64)
    comp.sort(axis=1)
    comp &= np.uint64((1 << bits) - 1)
    place = comp.astype(np.int64)
    if rows > 1:
        place += np.arange(0, rows * k, k)[:, None]
    return np.ascontiguousarray(cols).ravel().take(place)
