"""The NumPy backend's outer-axis route (``filter-outer``): the pivot filter down the columns
of a C array, where they lie.

Axis 0 of a C array (the batch contiguous, the selected axis strided) would need a transposing
copy for the row routes; here a sample of whole rows gives each column its pivot, one
contiguous pass keeps the candidates, and a sort of their few positions groups them by column
(:func:`select_outer`). Its own module because it reads memory in the other direction from
every row route (its blocks are columns, ``routes.OUTER_BLOCK_BYTES`` wide), though it shares the
filter's steps (:mod:`cutopk.numpy.pivot_filter`). Which calls come here: :mod:`cutopk.numpy.routes`.
"""

from __future__ import annotations

import numpy as np

from .._request.keys import preference_keys
from . import pivot_filter as _pivot_filter
from .exact import order_winners, select_exact, true_positions


def select_outer(y: np.ndarray, k: int, largest: bool, nan_first: bool, order: str) -> np.ndarray:
    """Top K down each column of ``y`` (``(n, columns)``, rows contiguous, native byte order):
    the ``(columns, k)`` row indices, ordered as ``order`` asks. The pivot filter of
    :func:`cutopk.numpy.pivot_filter.select_prefiltered` on the input as it lies in memory (an outer axis), without
    transposing it: a sample of whole rows gives each column its pivot, one contiguous pass
    keeps the candidates, and they are grouped by column by a stable sort of their few
    positions. Columns the pivot does not settle are copied out and go the exact way."""
    n, cols_n = y.shape
    where = _pivot_filter.sample_positions(n)
    sample = np.ascontiguousarray(y[where].T) if where is not None else np.ascontiguousarray(y.T)
    pivot = np.ascontiguousarray(
        _pivot_filter.pivot_of(sample, k, n, largest).reshape(1, -1)
    )  # fast broadcast
    if nan_first and y.dtype.kind == "f":
        pivot[np.isnan(pivot)] = np.inf  # see pivot_filter.select_prefiltered
    keep = _pivot_filter.beyond(y, pivot, largest, False, nan_first)
    i, j = np.divmod(true_positions(keep), cols_n)
    del keep
    counts = np.bincount(j, minlength=cols_n)
    fine = (counts >= k) & (counts <= n * _pivot_filter.PREFILTER_MAX_KEEP_SHARE)
    if not fine.all():
        sel = fine[j]
        i, j = i[sel], j[sel]
        counts[~fine] = 0
    # Group by column, rows ascending within one: a sort of the distinct j * n + i (NumPy's
    # plain sort of int64 is several times faster than a stable argsort of j).
    packed = j * n
    packed += i
    packed.sort()
    j, i = np.divmod(packed, n)
    out = np.empty((cols_n, k), dtype=np.int64)
    in_order = True
    if i.size:
        values = _gather(y, i, j)
        cand, in_order = _pivot_filter.select_candidates(
            values, j, i, counts, cols_n, n, k, largest, nan_first, order
        )
        out[fine] = cand[fine]
    if not fine.all():
        rest = ~fine
        out[rest] = select_exact(preference_keys(np.ascontiguousarray(y[:, rest].T), largest, nan_first), k)
    unordered = ~fine if in_order else np.ones(cols_n, dtype=bool)
    if order == "value" and unordered.any():
        part = out[unordered]
        keys = preference_keys(_gather(y, part, np.flatnonzero(unordered)[:, None]), largest, nan_first)
        out[unordered] = order_winners(part, keys, order)
    return out


def _gather(y: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """``y[i, j]`` for a 2-D ``y`` whose rows are contiguous (a block of columns of a C array),
    through a flat view of the memory it spans: NumPy's 2-D fancy indexing is several times
    slower than a 1-D take."""
    rows, cols = y.shape
    row_step = y.strides[0] // y.itemsize
    if y.strides[1] != y.itemsize or y.strides[0] % y.itemsize or row_step < cols:
        return y[i, j]
    # From y's first element to its last: memory y's own array holds.
    span = np.lib.stride_tricks.as_strided(y, shape=((rows - 1) * row_step + cols,), strides=(y.itemsize,))
    return span[i * row_step + j]
