"""The NumPy (CPU) backend: exact top-K in O(n) per row, with no Python loop over rows.

Algorithm, for a batch of rows viewed as a 2-D array ``(rows, n)``:

1. **Discard most of each row first** (when K is small against N). A sample of columns of each row
   gives a pivot value that, with overwhelming probability, has at least K elements at or beyond
   it; one vectorised comparison against the pivot keeps only those candidates (typically a few
   K per row) and ``nonzero`` packs them, in index order, into a padded candidate matrix. Rows
   whose candidates fall short of K (an unlucky sample, many NaNs) go to step 2 whole, so the
   result never depends on the sample.
2. **Exact selection** on order-preserving unsigned keys (``_keys.preference_keys``): the K-th
   key ``t`` of each row comes from ``np.partition``; every key above ``t`` is taken, and of the
   keys equal to ``t`` the first ones in index order (a cumulative count), which is the SPEC.md
   lower-index rule exactly at the K boundary.
3. **Ordering** of the K winners: a stable argsort of the inverted keys (ties stay in ascending
   index) for ``sorted=True``; the winners are already in index order for ``"index"``/``False``.
"""

from __future__ import annotations

import math

import numpy as np

from . import _dtypes
from ._api import Request
from ._keys import is_nan, preference_keys

ALGORITHMS = ("select",)

# Below this row length, or when K is a large share of the row, the pivot pass cannot discard
# enough to pay for itself (see benchmarks/cpu_numpy.py).
PREFILTER_MIN_N = 512
PREFILTER_MAX_K_SHARE = 1 / 16
# When the candidates exceed this share of the input (heavy ties at the pivot), the filtered
# path would do more work than the plain exact path, so it is abandoned.
PREFILTER_MAX_KEEP_SHARE = 1 / 4
CHUNK_BYTES = 4 << 20
# Up to this row length a full stable sort of each row is the cheapest exact route
# (65536x16 float32, k=8: 6.7 ms sorting against 9.0 ms for partition + tie resolution).
SORT_MAX_N = 16
# Tie resolution keeps one int64 running count per element of a block of this many elements.
TIE_BLOCK_ELEMENTS = 1 << 22


def top_k(a, req: Request) -> tuple[np.ndarray, np.ndarray]:
    """Top-K of a NumPy array along ``req.axis``; returns C-contiguous ``(values, indices)``."""
    if req.algorithm not in ("auto", *ALGORITHMS):
        raise ValueError(
            f"algorithm: expected 'auto' or one of {ALGORITHMS} for backend 'numpy', got {req.algorithm!r}"
        )
    a = np.asarray(a)
    native = a.dtype.newbyteorder("=")
    rows_view = np.moveaxis(a, req.axis, -1)
    batch_shape = rows_view.shape[:-1]
    rows = math.prod(batch_shape)  # reshape(-1, n) is ambiguous when n == 0
    x = rows_view.reshape(rows, req.n).astype(native, copy=False)
    out_shape = (*batch_shape, req.k)
    if req.k == 0 or x.shape[0] == 0:
        idx = np.zeros((x.shape[0], req.k), dtype=np.int64)
    else:
        idx = np.empty((x.shape[0], req.k), dtype=np.int64)
        # Blocks of rows small enough to stay in cache across the several passes of each step
        # (measured on 4096x4096 float32: 91 ms in one block, 65 ms in 4 MB blocks).
        step = max(1, CHUNK_BYTES // max(1, req.n * x.itemsize))
        for start in range(0, x.shape[0], step):
            block = slice(start, start + step)
            idx[block] = select_rows(x[block], req.k, req.largest, req.nan_first, req.order)
    values = np.take_along_axis(x, idx, axis=1).astype(a.dtype, copy=False)
    indices = idx.astype(req.index_dtype, copy=False)

    def finish(arr):
        return np.ascontiguousarray(np.moveaxis(arr.reshape(out_shape), -1, req.axis))

    return finish(values), finish(indices)


def select_rows(x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str) -> np.ndarray:
    """Return the ``(rows, k)`` int64 column indices of the top K of each row of ``x``.

    ``x`` is 2-D with native byte order; ``1 <= k <= x.shape[1]``. The result is ordered as
    ``order`` asks ("value", "index"; "none" gives index order).
    """
    rows, n = x.shape
    if n <= SORT_MAX_N:
        # Tiny rows (MoE routing): one stable sort per row beats partition + tie resolution.
        keys = preference_keys(x, largest, nan_first)
        cols = np.argsort(~keys, axis=1, kind="stable")[:, :k]
        return np.sort(cols, axis=1) if order != "value" else cols
    if k == n:
        idx = np.broadcast_to(np.arange(n), (rows, n))
        if order == "value":
            keys = preference_keys(x, largest, nan_first)
            return np.argsort(~keys, axis=1, kind="stable")
        return np.ascontiguousarray(idx)
    if n >= PREFILTER_MIN_N and k <= n * PREFILTER_MAX_K_SHARE:
        found = _select_prefiltered(x, k, largest, nan_first)
        if found is not None:
            cols, keys = found
            return _order_winners(cols, keys, order)
    keys = preference_keys(x, largest, nan_first)
    cols = _select_exact(keys, k)
    return _order_winners(cols, np.take_along_axis(keys, cols, axis=1), order)


def _order_winners(cols: np.ndarray, keys: np.ndarray, order: str) -> np.ndarray:
    """Order winners given in ascending index order, with their keys."""
    if order != "value":
        return cols
    # ~key turns "largest key first" into an ascending sort; stability keeps ties in index order.
    return np.take_along_axis(cols, np.argsort(~keys, axis=1, kind="stable"), axis=1)


def _select_exact(keys: np.ndarray, k: int) -> np.ndarray:
    """Positions (ascending, int64) of the K largest keys per row, ties to lower positions."""
    rows, m = keys.shape
    kth = np.partition(keys, m - k, axis=1)[:, m - k : m - k + 1]
    above = keys > kth
    at = keys == kth
    needed = k - np.count_nonzero(above, axis=1)
    if np.array_equal(np.count_nonzero(at, axis=1), needed):
        take = above | at  # no row has more ties at the K-th key than it needs (the usual case)
    else:
        take = above | _first_true(at, needed)
    # Every row has exactly k winners; a flat search is cheaper than a 2-D nonzero.
    return (np.flatnonzero(take) % m).reshape(rows, k)


def _first_true(mask: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The first ``counts[r]`` True entries of each row ``r`` of ``mask`` (the lower-index rule
    for ties at the K-th key). Runs over blocks of columns so that the running count needs
    memory for one block, not one int64 per element of a huge row."""
    rows, m = mask.shape
    out = np.zeros_like(mask)
    seen = np.zeros((rows, 1), dtype=np.int64)
    block = max(1, TIE_BLOCK_ELEMENTS // max(1, rows))
    for start in range(0, m, block):
        part = mask[:, start : start + block]
        running = np.cumsum(part, axis=1, dtype=np.int64)
        running += seen
        out[:, start : start + block] = part & (running <= counts[:, None])
        seen = running[:, -1:]
    return out


def _sample_columns(x: np.ndarray, size: int = 256, runs: int = 16) -> np.ndarray:
    """A copy of ``size`` columns of ``x``: ``runs`` short runs of adjacent columns spread evenly
    over the row. Runs read whole cache lines (a plain stride would touch one line per element)
    and, spread out, still see every part of a sorted or clustered row."""
    n = x.shape[1]
    if n <= size:
        return x
    run = size // runs
    starts = np.arange(runs) * (n // runs)
    cols = (starts[:, None] + np.arange(run)).ravel()
    return np.take(x, cols, axis=1)


def _keep_flat(x: np.ndarray, k: int, largest: bool, nan_first: bool) -> np.ndarray | None:
    """Flat (row-major) positions of the elements at or beyond a per-row pivot taken from a
    sample of columns, chosen so that at least K elements of each row are kept with overwhelming
    probability; None when too many elements would be kept."""
    _rows, n = x.shape
    sample = _sample_columns(x)
    s = sample.shape[1]
    # The pivot falls short only when `rank` sample points land among the row's top K-1
    # elements, a binomial with mean k*s/n: a margin of 3 standard deviations makes that rare
    # (about 1 row in 2000 for k=64, n=4096), and a shortfall only sends that row to the plain
    # exact path, never gives a wrong answer.
    mean = k * s / n
    rank = min(s, math.ceil(mean + 3 * math.sqrt(mean) + 2))
    # The pivot comes from a partition of the raw sample, not of its keys (a third of the cost).
    # NumPy orders NaN above every number and -0.0 with +0.0; where that differs from the NaN
    # policy (largest with nan="last"), NaNs only raise the pivot: fewer candidates, at worst a
    # short row sent to the exact path.
    at = s - rank if largest else rank - 1
    pivot = np.partition(sample, at, axis=1)[:, at : at + 1]
    with np.errstate(invalid="ignore"):  # NaN compares False: NaNs are added below if preferred
        keep = x >= pivot if largest else x <= pivot
    if nan_first:
        keep |= is_nan(x)
    if np.count_nonzero(keep) > keep.size * PREFILTER_MAX_KEEP_SHARE:
        return None  # heavy ties at the pivot: cheaper to skip the filter than to pack them
    return np.flatnonzero(keep)


def _select_prefiltered(x: np.ndarray, k: int, largest: bool, nan_first: bool):
    """Exact top-K through a candidate pass; returns ``(cols, keys)`` in index order per row,
    or None when the pivot pass cannot discard enough of the input."""
    rows, n = x.shape
    flat = _keep_flat(x, k, largest, nan_first)
    if flat is None:
        return None
    r, c = np.divmod(flat, n)
    counts = np.bincount(r, minlength=rows)
    short = counts < k
    if short.any():
        keep = ~short[r]
        r, c = r[keep], c[keep]
        counts[short] = 0
    # Pack the candidates, still in index order, into a (rows, width) matrix. Padding has key 0
    # and column n, so it ranks below every candidate with key 0 too: it is never selected
    # while a row has at least K real candidates.
    width = max(k, int(counts.max()))
    starts = np.zeros(rows, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    slot = np.arange(r.size) - starts[r]
    # Flat indexing: NumPy's 2-D fancy indexing is several times slower.
    dest = r * width + slot
    cand_cols = np.full((rows, width), n, dtype=np.int64)
    cand_cols.ravel()[dest] = c
    key_t = _dtypes.info(x.dtype).key_dtype
    cand_keys = np.zeros((rows, width), dtype=key_t)
    values = x.ravel()[flat if not short.any() else r * n + c] if x.flags.c_contiguous else x[r, c]
    cand_keys.ravel()[dest] = preference_keys(values, largest, nan_first)
    pos = _select_exact(cand_keys, k)
    cols = np.take_along_axis(cand_cols, pos, axis=1)
    keys = np.take_along_axis(cand_keys, pos, axis=1)
    if short.any():
        full_keys = preference_keys(x[short], largest, nan_first)
        short_cols = _select_exact(full_keys, k)
        cols[short] = short_cols
        keys[short] = np.take_along_axis(full_keys, short_cols, axis=1)
    return cols, keys
