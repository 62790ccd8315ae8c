"""The NumPy (CPU) backend: exact top-K in O(n) per row, on every core, in bounded memory.

The rows (the input viewed as a 2-D array ``(rows, n)``) are cut into blocks of whole rows that
fit in the CPU cache; the blocks run on a thread pool (``threads``: NumPy releases the GIL
in the loops below; ``CUTOPK_NUM_THREADS`` sets the most threads). A call uses more than one
thread only where the pool's cost model, measured on the running machine, predicts a gain
(``routes.route``, ``threads.threads_for``) and the first calls of its shape, timed on one thread and
split by turns, confirm it (``threads.trial``; ``plan().params["threads_why"]`` says why). A row too long
for one block goes to ``long_rows``, which cuts it into column ranges instead and merges their
candidates exactly. Every block writes its own rows of the result, so the answer is the same
for every thread count. A cached call on a small C-contiguous input runs a function made for
its shape (its runner: ``short_rows.runner``): no checks, no thread count, one stable argsort of the values (or
of composite keys). Within a block, by row length:

- **At least 8192, K at most a 64th of the row and at most 512: the compiled route** (``compiled``,
  ``compiled.c`` built when the package is installed): one C call per block reads each row
  once against a running threshold (see ``compiled.py``); where it cannot run (not built at
  install, ``CUTOPK_COMPILED=0``), the NumPy routes below, with the same answers. The compiled
  route's call takes every row at once and shares them between threads itself (the C file's
  pool: no block goes through the Python pool, a handover costs microseconds).
- **Shorter rows, and an outer axis, on the compiled route too** (``compiled_choice.choose_method``):
  8-bit elements by counting (``compiled-count``; 16-bit ones too where K is large against the
  row, on long rows above the threshold scan's K, and K = 1), K up to 8 by the ranks of the candidates
  above a bound (``compiled-rank``; 64-bit elements: sorted lists, ``compiled-insert``), larger K up to an eighth of the row by the threshold scan (``compiled``);
  rows side by side in memory (an outer axis) 64 at a time where they lie, no transposed copy
  (``compiled-columns``, K up to 64). Where the route cannot run, the NumPy routes below.

- **Up to 64, elements of up to 32 bits** (and up to 256 in a small call): one sort of int64
  composites per row (``short_rows.select_sorted``: the element's number in preference order, then its
  column), the same ten NumPy calls for a block of any number of rows; rows with a NaN go on.
- **Up to 16 otherwise** (64-bit elements): one stable argsort of the keys per row.
- **Up to 511, keys of up to 32 bits**: one partition of composite keys (preference key in the
  high bits, inverted column in the low bits): composites are distinct and a larger one is the
  preferred element, so the partition's top K, sorted, is the answer, ties included.
- **Longer, K small against N: discard most of each row first.** A sample of columns of each
  row gives a pivot value that, with overwhelming probability, has at least K elements at or
  beyond it; one vectorised comparison keeps only those candidates (typically a few K per row),
  and one sort of (row, inverted key, column) composites orders every row's candidates at once
  (64-bit keys: a padded candidate matrix and step 2 instead). When the pivot itself is the K-th
  value (ties at K, rows of equal values), the elements beyond it and the first ones equal to it
  are the answer at once. Rows whose candidates fall short of K (an unlucky sample, many NaNs)
  go to step 2 whole, so the result never depends on the sample. Half floats are filtered on
  their keys (NumPy compares them one element at a time). An outer axis (axis 0 of a C array)
  is filtered in place, without a transposing copy (``outer_axis.select_outer``).
- **Otherwise: exact selection** on order-preserving unsigned keys (``_request.keys.preference_keys``):
  the K-th key ``t`` of each row comes from ``np.partition``; when no key below the K boundary
  equals ``t`` (the partition tells), the keys at or above ``t`` are the answer; otherwise every
  key above ``t`` is taken and, of the keys equal to ``t``, the first ones in index order: the
  SPEC.md lower-index rule exactly at the K boundary. A stable argsort of the K winners' inverted
  keys orders them for ``sorted=True``.

Memory: besides the outputs, one block's temporaries per thread (a few MB), and at most one
input-sized copy (rows that are not contiguous along the axis are copied block by block; only
an axis that no 2-D view can describe, such as the middle axis of a 3-D array, is copied whole).
Measured on one 1 x 50,000,000 float32 row: see benchmarks/results/2026-11-23-cpu-numpy.md.

The modules, one per route: the choice and its tuning constants in ``routes`` (the compiled
route's in ``compiled_choice``), ``short_rows``, ``pivot_filter``, ``outer_axis``, ``long_rows``,
``exact``, ``compiled`` (the compiled route); this one holds the entry points (:func:`top_k`, :func:`runner`, :func:`describe`)
and the blocks' loop (:func:`select`, :func:`select_rows`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from .._request import dtypes as _dtypes
from .._request.checks import Request, check_algorithm
from .._request.keys import preference_keys
from . import compiled as _compiled
from . import compiled_choice as _compiled_choice
from . import long_rows as _long_rows
from . import outer_axis as _outer_axis
from . import pivot_filter as _pivot_filter
from . import routes as _routes
from . import short_rows as _short_rows
from . import threads as _threads
from .exact import order_winners, select_exact

ALGORITHMS = ("select",)


def top_k(a, req: Request) -> tuple[np.ndarray, np.ndarray]:
    """Top-K of a NumPy array along ``req.axis``; returns C-contiguous ``(values, indices)``."""
    check_algorithm(req.algorithm, "numpy", ALGORITHMS)
    a = np.asarray(a)
    last = req.axis == a.ndim - 1
    x, batch_shape, _copied = _rows(a, req)
    rows = x.shape[0]
    out_shape = (*batch_shape, req.k)
    if req.k == 0 or rows == 0:
        idx, values = np.zeros((rows, req.k), dtype=np.int64), None
    else:
        idx, values = select(x, req.k, req.largest, req.nan_first, req.order, _threads.get_num_threads())
    if values is None:  # the compiled route writes them itself, from the rows it just read
        values = _values_of(x, idx, req.n)
    indices = idx.astype(req.index_dtype, copy=False)

    def finish(arr):
        if last:
            return arr.reshape(out_shape)  # C-contiguous already
        return np.ascontiguousarray(np.moveaxis(arr.reshape(out_shape), -1, req.axis))

    return finish(values), finish(indices)


def _values_of(x: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    """The elements of the 2-D ``x`` at the ``(rows, k)`` column indices ``idx``."""
    rows = x.shape[0]
    if not (x.flags.c_contiguous and idx.size):
        return np.take_along_axis(x, idx, axis=1)
    if rows == 1:  # a flat take: take_along_axis builds 2-D index grids
        return x.ravel().take(idx)
    # Row offsets added in place and taken off again: a temporary the size of the indices would
    # be fresh pages of memory on every call (131072x16 k=4: 1000 page faults, a tenth of the call).
    offsets = _row_starts(rows, n)
    idx += offsets
    values = x.ravel().take(idx)
    idx -= offsets
    return values


_ROW_STARTS: dict = {}
ROW_STARTS_MAX_ROWS = 1 << 20


def _row_starts(rows: int, n: int) -> np.ndarray:
    """``(rows, 1)`` int64 offsets of the rows' starts in a flat ``(rows, n)`` array, the last
    shape's kept (read-only): made afresh, they came as new pages on every call (65536x8: 128
    page faults, some 0.2 ms)."""
    starts = _ROW_STARTS.get((rows, n))
    if starts is None:
        starts = np.arange(0, rows * n, n)[:, None]
        starts.flags.writeable = False
        if rows <= ROW_STARTS_MAX_ROWS:
            _ROW_STARTS.clear()
            _ROW_STARTS[(rows, n)] = starts
    return starts


def runner(shape: tuple, strides: tuple, dtype: np.dtype, req: Request) -> Callable[[np.ndarray], tuple]:
    """The runner of ``req`` on arrays of this shape, strides and dtype: the function a cached call
    runs (see ``cutopk._core.call``). For a small C-contiguous input along its last axis, one with
    everything but the data worked out once (``short_rows.runner``), else :func:`top_k`."""

    def general(a):
        return top_k(a, req)

    run = _short_rows.runner(shape, strides, dtype, req, general)
    return general if run is None else run


def _rows(a: np.ndarray, req: Request):
    """The input as a 2-D ``(rows, n)`` array, a view where one exists (the middle axis of a
    3-D array has none: then a copy), the batch shape, and whether it was copied."""
    moved = a if req.axis == a.ndim - 1 else np.moveaxis(a, req.axis, -1)
    batch_shape = moved.shape[:-1]
    shape = (math.prod(batch_shape), req.n)  # reshape(-1, n) is ambiguous when n == 0
    try:
        return np.reshape(moved, shape, copy=False), batch_shape, False
    except ValueError:
        return moved.reshape(shape), batch_shape, True


def describe(a, req: Request) -> dict:
    """What :func:`top_k` does with ``a`` (for ``cutopk.plan``), without touching the data:
    ``route`` (``sort``, ``composite``, ``filter``, ``filter-outer``, ``exact``, ``all``,
    ``long-rows``, ``compiled``: the compiled route), ``compiled`` (None where the compiled
    route can run, else why not), ``threads``, ``copy`` (the whole input is copied once: an axis no 2-D view
    describes) and ``block_copies`` (rows are copied a block at a time, at most one block per
    thread at once: rows not contiguous, or a non-native byte order). A small call's prepared
    function (:func:`runner`) takes none of these routes: ``NumpyCall.describe`` names it."""
    a = np.asarray(a)
    x, _, copied = _rows(a, req)
    compiled = _compiled.unavailable_reason()
    if req.k == 0 or x.size == 0:
        return {
            "route": "none",
            "threads": 1,
            "threads_why": "no work",
            "copy": False,
            "block_copies": False,
            "compiled": compiled,
        }
    name, threads, _, why = _routes.route(x, req.k, _threads.get_num_threads())
    native = x.dtype == x.dtype.newbyteorder("=")
    in_place = ("filter-outer", "long-rows", *_compiled_choice.COMPILED_METHODS)
    blocks = name not in in_place and not (x.flags.c_contiguous and native)
    return {
        "route": name,
        "threads": threads,
        "threads_why": why,
        "copy": copied,
        "block_copies": blocks,
        "compiled": compiled,
    }


def select(x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str, threads: int) -> tuple:
    """``(indices, values)``: the ``(rows, k)`` int64 column indices of the top K of each row of
    the 2-D ``x`` (any strides and byte order), ordered as ``order`` asks, and their values where
    the route wrote them too (the compiled route), else None; blocks of rows run on ``threads``."""
    name, threads, step, _ = _routes.route(x, k, threads)
    trial = _threads.trial(_routes.shape_key(x, k), threads) if threads > 1 else 0
    if not trial:
        return _select_on(x, k, largest, nan_first, order, name, threads, step)
    if trial == 1:
        name, threads, step = _routes.route_on(x, k, 1)
    start = time.perf_counter()
    found = _select_on(x, k, largest, nan_first, order, name, threads, step)
    _threads.record(_routes.shape_key(x, k), trial, time.perf_counter() - start)
    return found


def _select_on(x, k: int, largest: bool, nan_first: bool, order: str, name: str, threads: int, step: int):
    """:func:`select` on route ``name`` with ``threads`` threads and blocks of ``step`` rows."""
    rows = x.shape[0]
    if name == "long-rows" and rows == 1:  # the row's own result: no copy of a K-sized array
        return _long_rows.select_row(x[0], k, largest, nan_first, order, threads)[None, :], None
    idx = np.empty((rows, k), dtype=np.int64)
    if name in _compiled_choice.COMPILED_METHODS:  # one call: the C file shares the rows out
        method = _compiled_choice.COMPILED_METHODS[name]
        values = np.empty((rows, k), dtype=x.dtype)
        _compiled.select(x, k, largest, nan_first, order, idx, method=method, threads=threads, values=values)
        return idx, values
    if name == "long-rows":
        for r in range(rows):
            idx[r] = _long_rows.select_row(x[r], k, largest, nan_first, order, threads)
        return idx, None
    outer = name == "filter-outer"
    native = x.dtype.newbyteorder("=")
    starts = range(0, rows, step)

    def one(start: int) -> None:
        block = x[start : start + step]
        if outer:
            idx[start : start + step] = _outer_axis.select_outer(block.T, k, largest, nan_first, order)
            return
        if block.dtype != native or not block.flags.c_contiguous:
            block = np.ascontiguousarray(block, dtype=native)  # one block's copy, in cache
        idx[start : start + step] = select_rows(block, k, largest, nan_first, order)

    _threads.run(one, starts, threads)
    return idx, None


def select_rows(
    x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str, sort_ok: bool = True
) -> np.ndarray:
    """Return the ``(rows, k)`` int64 column indices of the top K of each row of ``x``.

    ``x`` is 2-D, C-contiguous, with native byte order; ``1 <= k <= x.shape[1]``. The result is
    ordered as ``order`` asks ("value", "index"; "none" gives index order). ``sort_ok``: False
    for the rows ``short_rows.select_sorted`` hands back (NaN rows), which go another way.
    """
    rows, n = x.shape
    if sort_ok and _routes.takes_sorted(n, k, x.itemsize, x.size):
        return _short_rows.select_sorted(x, k, largest, nan_first, order, _rows_unsorted)
    if n <= _routes.SORT_MAX_N:
        # Tiny rows (MoE routing): one stable sort per row beats partition + tie resolution.
        keys = preference_keys(x, largest, nan_first)
        cols = np.argsort(~keys, axis=1, kind="stable")[:, :k]
        return np.sort(cols, axis=1) if order != "value" else cols
    if k == n:
        if order == "value":
            keys = preference_keys(x, largest, nan_first)
            return np.argsort(~keys, axis=1, kind="stable")
        return np.ascontiguousarray(np.broadcast_to(np.arange(n), (rows, n)))
    if n <= _routes.COMPOSITE_MAX_N and x.itemsize <= 4:
        return _short_rows.select_composite(preference_keys(x, largest, nan_first), k, order)
    if n >= _routes.PREFILTER_MIN_N and k <= n * _routes.PREFILTER_MAX_K_SHARE:
        if x.itemsize < 4 and _dtypes.info(x.dtype).is_float:
            return _pivot_filter.select_half(x, k, largest, nan_first, order)
        return _pivot_filter.select_prefiltered(x, k, largest, nan_first, order)
    keys = preference_keys(x, largest, nan_first)
    cols = select_exact(keys, k)
    return order_winners(cols, np.take_along_axis(keys, cols, axis=1) if order == "value" else None, order)


def _rows_unsorted(x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str) -> np.ndarray:
    """:func:`select_rows` without the short rows' sort (for the rows it hands back: a NaN)."""
    return select_rows(x, k, largest, nan_first, order, sort_ok=False)
