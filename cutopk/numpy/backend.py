"""The NumPy (CPU) backend: exact top-K in O(n) per row, on every core, in bounded memory.

The rows (the input viewed as a 2-D array ``(rows, n)``) are cut into blocks of whole rows that
fit in the CPU cache; the blocks run on a thread pool (``_threads``: NumPy releases the GIL
in the loops below; ``CUTOPK_NUM_THREADS`` sets the most threads). A call uses more than one
thread only where the pool's cost model, measured on the running machine, predicts a gain
(``_route``, ``threads.threads_for``) and the first calls of its shape, timed on one thread and
split by turns, confirm it (``threads.trial``; ``plan().params["threads_why"]`` says why). A row too long
for one block goes to ``_long_rows``, which cuts it into column ranges instead and merges their
candidates exactly. Every block writes its own rows of the result, so the answer is the same
for every thread count. A cached call on a small C-contiguous input runs a function prepared
for its shape (``prepared``): no checks, no thread count, one stable argsort of the values (or
of composite keys). Within a block, by row length:

- **At least 8192, K at most a 64th of the row and at most 512: the compiled route** (``native``,
  ``select_rows.c`` built with the machine's C compiler on first use): one C call per block
  reads each row once against a running threshold (see ``native.py``); where it cannot run (no
  compiler, ``CUTOPK_NATIVE=0``), the NumPy routes below, with the same answers.
- **Shorter rows, and an outer axis, on the compiled route too** (issue 42; ``_compiled_method``):
  8-bit elements by counting (``native-count``; 16-bit ones too where K is large against the
  row, on long rows above the threshold scan's K, and K = 1), K up to 8 by the ranks of the candidates
  above a bound (``native-rank``; 64-bit elements: sorted lists, ``native-insert``), larger K up to an eighth of the row by the threshold scan (``native``);
  rows side by side in memory (an outer axis) 64 at a time where they lie, no transposed copy
  (``native-columns``, K up to 64). Where the route cannot run, the NumPy routes below.

- **Up to 64, elements of up to 32 bits** (and up to 256 in a small call): one sort of int64
  composites per row (``select_sorted``: the element's number in preference order, then its
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
  is filtered in place, without a transposing copy (``_select_outer``).
- **Otherwise: exact selection** on order-preserving unsigned keys (``_keys.preference_keys``):
  the K-th key ``t`` of each row comes from ``np.partition``; when no key below the K boundary
  equals ``t`` (the partition tells), the keys at or above ``t`` are the answer; otherwise every
  key above ``t`` is taken and, of the keys equal to ``t``, the first ones in index order: the
  SPEC.md lower-index rule exactly at the K boundary. A stable argsort of the K winners' inverted
  keys orders them for ``sorted=True``.

Memory: besides the outputs, one block's temporaries per thread (a few MB), and at most one
input-sized copy (rows that are not contiguous along the axis are copied block by block; only
an axis that no 2-D view can describe, such as the middle axis of a 3-D array, is copied whole).
Measured on one 1 x 50,000,000 float32 row: see benchmarks/results/2026-11-23-cpu-numpy.md.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from .._request import dtypes as _dtypes
from .._request.checks import Request, check_algorithm
from .._request.keys import preference_keys
from . import long_rows as _long_rows
from . import native as _native
from . import threads as _threads
from .exact import count_rows as _count_rows
from .exact import first_true as _first_true
from .exact import select_exact as _select_exact
from .exact import true_positions as _true_positions
from .exact import true_words as _true_words

ALGORITHMS = ("select",)

# Below this row length, or when K is a large share of the row, the pivot pass cannot discard
# enough to pay for itself (see benchmarks/cpu_numpy.py).
PREFILTER_MIN_N = 512
PREFILTER_MAX_K_SHARE = 1 / 16
# When the candidates exceed this share of the input (heavy ties at the pivot), the filtered
# path would do more work than the plain exact path, so it is abandoned for those rows.
PREFILTER_MAX_KEEP_SHARE = 1 / 4
# Rows per block: about this many bytes of input, so that the several passes of the exact path
# hit the cache (16384x128 float32, k=8, one thread: 21-26 ms in 256 KB-1 MB blocks, 60 ms in 4 MB).
BLOCK_BYTES = 1 << 20
# The pivot filter reads each row once and works on few candidates: larger blocks spread its
# fixed cost of some 60 NumPy calls per block (20x100000, k=10: 7.5 ms in 1 MB blocks, 4.8 in 4 MB).
FILTER_BLOCK_BYTES = 4 << 20
# Up to this row length, keys of up to 32 bits go through one partition of composite keys
# (key, inverted column) instead of a partition and a tie pass (2048x128 float32, k=8: 1.45 ms
# against 1.8-2.0 ms, one thread).
COMPOSITE_MAX_N = 511
# Its blocks: this many bytes of input (16384x128 k=8: 4.5-4.8 ms in 256 KB blocks, 6.3 ms in
# 1 MB ones, whose 2 MB of composites came as fresh pages on every block: 1000 page faults).
COMPOSITE_BLOCK_BYTES = 1 << 18
# Up to this row length, elements of up to 32 bits go through one sort of int64 composites per
# row (``select_sorted``), in blocks of this many elements (1 MB of composites: 131072x16 k=4
# took 6.4 ms in these, 7.0 ms in blocks of 32768).
SORTED_MAX_N = 64
SORTED_BLOCK_ELEMENTS = 1 << 17
# A cached call on at most this many elements, rows of at most TINY_MAX_N, C-contiguous along
# the last axis, runs a function prepared for its shape (``prepared``): 1x128 k=8 in some
# 10 us where the general way takes 20 us.
TINY_MAX_ELEMENTS = 1 << 13
TINY_MAX_N = 256
# Up to this row length a full stable sort of each row is the cheapest exact route
# (65536x16 float32, k=8: 6.7 ms sorting against 9.0 ms for partition + tie resolution).
SORT_MAX_N = 16
# Blocks of an outer axis are filtered in place: wide blocks keep NumPy's inner loops long
# (4096x256 float32 columns: 1.4 ms per comparison pass; whole 4096x512 rows: 0.8 ms per 1M).
OUTER_BLOCK_BYTES = 16 << 20
# Below this many elements a call never splits, whatever the cost model says.
PARALLEL_MIN_ELEMENTS = 1 << 16
# The work of each route for the thread cost model (``_threads.threads_for``), in
# vectorised passes over the input: its one-thread time per element over the probe's time
# per element (a comparison and a count), rounded down (2-core EPYC, NumPy 2.4; the ratio of
# two NumPy loops' speeds moves far less between machines than either speed does).
ROUTE_PASSES = {
    "sorted": 9,  # 65536x8 k=2: 11; 131072x16 k=4: 10
    "sort": 20,
    "composite": 5,  # 16384x128 k=8: 5.6
    "all": 5,
    "exact": 10,  # 1024x1000 k=500: 56
    "filter": 1,  # 8x128256 k=50: 1.0; 16x65536 k=512: 2.1; 1024x4096 int8 k=64: 5.1
    "filter-outer": 6,  # 4096x512 k=16 along axis 0: 14.7
    "long-rows": 1,  # 1x2**21 k=64: 1.5
    "native": 0.5,  # 8x128256 k=50: 0.45; 1x2**21 k=64: 0.39; 4x32000 float16 k=50: 0.8; 16x65536 k=512: 1.6
    # Issue 42's methods (loaded machine, against the probe measured in the same run, 0.71 ns):
    "native-insert": 6,  # as native-rank, of which it is the 64-bit twin (not measured apart)
    "native-rank": 6,  # 16384x128 k=8: 6.7; 65536x8 k=2: 18; 131072x16 k=4: 15
    "native-count": 2,  # 1024x4096 int8 k=64: 2.0
    "native-columns": 8,  # 2048x1024 k=16 along axis 0: 9.4; 1024x1024: 8.2; 512x4096: 8.6
}
# Each route's probe family for the thread model (``threads.PROBES``) and the NumPy calls of one
# of its blocks (or column ranges), some 1-3 us each whatever the block's size: a split adds them.
ROUTE_SPLIT = {
    "sorted": ("sort", 12),
    "sort": ("sort", 8),
    "composite": ("scan", 12),
    "all": ("scan", 4),
    "exact": ("scan", 12),
    "filter": ("scan", 60),
    "filter-outer": ("scan", 40),
    "long-rows": ("scan", 10),
    "native": ("scan", 1),
    "native-insert": ("scan", 1),
    "native-rank": ("scan", 1),
    "native-count": ("scan", 1),
    "native-columns": ("scan", 1),
}
# The compiled route (``native``) takes rows at least this long with K at most this share of
# them and at most NATIVE_MAX_K, where its sampled threshold scan beats the NumPy routes (one
# thread, 2-core EPYC with AVX-512, benchmarks/results/2026-11-25-cpu-compiled-route.md:
# 8x128256 k=50 1.4x, 20x100000 k=10 1.75x, 1x2**21 k=64 3.8x, 4x32000 float16 k=50 2.8x, with
# a tenth NaN 6x, 4x65536 k=512 ties at K 2.7x; uniform 16x65536 k=512 0.9-1.0x, kept for the
# ties). Shorter rows stay on the NumPy routes, whose per-block calls cost less than its
# per-row selection there (1M elements in rows of 512-4096: float32 0.64-1.58x, int8
# 0.75-1.94x, float16 0.73-1.00x; at 8192 with K <= n/64, 1.2-2.3x).
NATIVE_MIN_N = 8192
NATIVE_MAX_K_SHARE = 1 / 64
NATIVE_MAX_K = 512
# Shorter rows (issue 42) take the compiled route too, by the C file's other methods (each
# exact on any input; chosen here by speed, benchmarks/results/2026-11-26-cpu-short-rows.md):
# 8-bit elements in rows of at least COUNT_MIN_N a counting selection ("count"); K up to
# RANK_MAX_K the ranks of the candidates at or above a bound ("rank"; 64-bit elements, K up to
# INSERT_MAX_K, a sorted list of the K best, "insert"); larger K up to SHORT_MAX_K_SHARE of the
# row the threshold scan from the same bound. C alone, one thread, loaded 2-core EPYC with
# AVX2, CPU time, rank / threshold: 16384x128 k=4 4.2 / 7.0 ms, k=8 5.6 / 7.1, k=16 11.5 / 9.4;
# 2048x1024 k=8 3.4 / 5.7, k=16 3.8 / 3.4; 65536x8 k=2 3.1 / 5.3; uint64 16384x128 insert /
# threshold k=4 7.1 / 9.8, k=8 12.9 / 12.1. An outer axis: the rows side by side in memory,
# COLUMNS_BLOCK at a time, read where they lie ("columns", K up to COLUMNS_MAX_K: its sorted
# lists cost O(K) an entry).
COUNT_MIN_N = 256
# 16-bit elements are counted in two levels (the high byte, then the low byte of the K-th key's
# bin: ``count_row_16``), whose fixed cost per row (two sets of 4 x 256 counts) the selection
# methods beat on short rows and small K. The counts take: rows of at least 8192 with K above
# the threshold scan's, 8-bit ones too (against the NumPy routes before: 64x16384 int16 k=1024
# 2.9x, k=2048 4.6x; 16x65536 k=4096 2.8x; float16 3.5-6.4x; int8 64x65536 k=4096 4.1x,
# 256x16384 k=1024 4.1x); shorter rows of at least COUNT16_MIN_N with K at least
# COUNT16_MIN_K_SHARE of them (against the threshold scan, uniform int16: 1024 k=64 1.6x, k=128
# 2.0x; 4096 k=256 2.3x; 20 distinct values 1024 k=64 0.8x, k=128 1.3x; beyond N/8, against
# the NumPy routes, 5-5.7x); and K = 1 from COUNT_MIN_N (the ranks' bound is then the row's
# maximum, over slices of one: 1024 k=1 3.6x, 4096 4.9x, 256 1.8x; 20 values 1.0-1.1x). Rows of
# 256 with more K, 128-element rows and K of 2-32 elsewhere keep their methods (count 0.4-1.2x).
# CPU time, one thread, loaded 2-core EPYC with AVX2: benchmarks/results/2026-11-26-cpu-short-rows.md.
COUNT16_MIN_N = 1024
COUNT16_MIN_K_SHARE = 1 / 16
# Counts and columns are 32-bit in the C file.
COUNT_MAX_N = (1 << 32) - 1
RANK_MAX_K = 8
INSERT_MAX_K = 4
SHORT_MAX_K_SHARE = 1 / 8
COLUMNS_MAX_K = 64
# Fewer rows side by side than this keep the NumPy routes: each step of the C loop would read
# a few elements for the cost of a call (4 rows of 10**6 along axis 0: long-row ranges).
COLUMNS_MIN_ROWS = 16
COLUMNS_BLOCK = 64
# The route names (plan()'s "route") of the compiled route's methods, and back.
COMPILED_ROUTES = {
    "threshold": "native",
    "insert": "native-insert",
    "rank": "native-rank",
    "count": "native-count",
    "columns": "native-columns",
}
COMPILED_METHODS = {route: method for method, route in COMPILED_ROUTES.items()}
# Above this many candidates in a block, or a quarter of it (equal rows, a pivot among ties),
# rows tied at the pivot are settled on their masks before the rest are listed: listing every
# element as an int64 position (and its row, column, value) takes some 40 bytes per element.
FLAT_MAX_CANDIDATES = 1 << 19
# The filter's first look at its candidates: this many columns of each row (see _filter).
FILTER_HEAD_COLUMNS = 1024
# Rows at least this long get a sample of 1024 columns for the pivot instead of 256.
SAMPLE_LARGE_MIN_N = 16384


def top_k(a, req: Request) -> tuple[np.ndarray, np.ndarray]:
    """Top-K of a NumPy array along ``req.axis``; returns C-contiguous ``(values, indices)``."""
    check_algorithm(req.algorithm, "numpy", ALGORITHMS)
    a = np.asarray(a)
    last = req.axis == a.ndim - 1
    x, batch_shape, _copied = _rows(a, req)
    rows = x.shape[0]
    out_shape = (*batch_shape, req.k)
    if req.k == 0 or rows == 0:
        idx = np.zeros((rows, req.k), dtype=np.int64)
    else:
        idx = select(x, req.k, req.largest, req.nan_first, req.order, _threads.get_num_threads())
    if x.flags.c_contiguous and idx.size:  # a flat take: take_along_axis builds 2-D index grids
        if rows == 1:
            values = x.ravel().take(idx)
        else:
            # Row offsets added in place and taken off again: a temporary the size of the
            # indices would be fresh pages of memory on every call (131072x16 k=4: 1000 page
            # faults, a tenth of the call).
            offsets = _row_starts(rows, req.n)
            idx += offsets
            values = x.ravel().take(idx)
            idx -= offsets
    else:
        values = np.take_along_axis(x, idx, axis=1)
    indices = idx.astype(req.index_dtype, copy=False)

    def finish(arr):
        if last:
            return arr.reshape(out_shape)  # C-contiguous already
        return np.ascontiguousarray(np.moveaxis(arr.reshape(out_shape), -1, req.axis))

    return finish(values), finish(indices)


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


def prepared(shape: tuple, strides: tuple, dtype: np.dtype, req: Request):
    """The function that runs ``req`` on arrays of this shape, strides and dtype (a cached call's
    work: see ``cutopk._call``): :func:`top_k`, or for a small C-contiguous input along its last
    axis a function with everything but the data worked out once (no checks, no thread count:
    a small problem never splits): one stable argsort of the values, or one sort of composite
    keys per row (:func:`select_sorted`) where NaN is preferred or NumPy does not compare the
    dtype itself (bfloat16)."""
    n, k = req.n, req.k
    rows = math.prod(shape) // n if n else 0
    c_strides = tuple(
        dtype.itemsize * math.prod(shape[i + 1 :]) for i in range(len(shape))
    )  # C order, as NumPy gives it for every axis of length > 1
    small = (
        req.axis == len(shape) - 1
        and rows > 0  # an empty batch: top_k's own early answer (the NaN checks index its rows)
        and 0 < k < n <= TINY_MAX_N
        and rows * n <= TINY_MAX_ELEMENTS
        and dtype.itemsize <= 4
        and dtype == dtype.newbyteorder("=")
        and all(s == c for s, c, d in zip(strides, c_strides, shape, strict=True) if d > 1)
    )
    if not small:
        return lambda a: top_k(a, req)
    col_bits = max(1, (n - 1).bit_length())
    shift, mask = _I64[col_bits], np.int64((1 << col_bits) - 1)
    largest, order, index_dtype = req.largest, req.order, req.index_dtype
    columns = _columns(n)
    bounds = _number_bounds(dtype)
    lo, hi = (bounds[0] << col_bits, (bounds[1] << col_bits) | int(mask)) if bounds else (None, None)
    offsets = np.arange(0, rows * n, n)[:, None] if rows > 1 else None
    out_shape = (*shape[:-1], k)

    if dtype.kind in "fiu":
        # NumPy's own float16/32 and integers: a stable argsort of the values (negated, or
        # bit-inverted for integers, for largest) is the SPEC.md order outright. Floats
        # compare -0.0 equal to +0.0 (stability keeps their index order) and NumPy sorts NaN
        # last, where the "last" rule puts it; values come from the input, bit for bit. Where
        # NaN is preferred, a call whose rows end in a NaN in that order goes the general way.
        # Three NumPy calls where the composite keys take eight (1x128 k=8: 5.5 us against 7).
        flip = (np.negative if dtype.kind == "f" else np.invert) if largest else None
        same_shape = out_shape == (rows, k)
        cast = index_dtype != np.int64
        nan_check = req.nan_first and dtype.kind == "f"
        row_starts = np.arange(0, rows * n, n) if rows > 1 else None

        def run_argsort(a):
            # Methods, not functions, and no reshape or cast that changes nothing: each NumPy
            # call costs some 0.2-0.4 us here, as much as the sort of a short row.
            x = a.reshape(rows, n)
            full = (flip(x) if flip is not None else x).argsort(axis=1, kind="stable")
            if nan_check:  # NumPy sorts NaN last: a row with one ends in one
                if rows == 1:
                    worst = x[0, full[0, -1]]
                    if worst != worst:
                        return top_k(a, req)
                elif np.isnan(x.ravel().take(full[:, -1] + row_starts)).any():
                    return top_k(a, req)
            cols = full[:, :k]
            if rows > 1:
                cols = cols.copy()  # C-contiguous
            if order != "value":
                cols.sort(axis=1)
            values = x.ravel().take(cols if offsets is None else cols + offsets)
            if cast:
                cols = cols.astype(index_dtype)
            if same_shape:
                return values, cols
            return values.reshape(out_shape), cols.reshape(out_shape)

        if rows == 1 and not (cast or nan_check or order != "value"):
            # One row, the plain request: the first K of the argsort are the indices in the
            # result's shape already (the last axis cut to K), and a flat take of the input
            # gives their values in that shape: no reshape (2.23 us a call to 2.05, 1x128 k=8).
            if flip is None:

                def run_one_row(a):
                    cols = a.argsort(kind="stable")[..., :k]
                    return a.take(cols), cols

            else:

                def run_one_row(a):
                    cols = flip(a).argsort(kind="stable")[..., :k]
                    return a.take(cols), cols

            return run_one_row
        return run_argsort

    def run(a):
        x = a.reshape(rows, n)
        comp = _order_numbers(x, largest)
        comp <<= shift
        comp |= columns
        comp.sort(axis=1)
        if lo is not None and (
            (comp[0, 0] < lo or comp[0, -1] > hi)
            if rows == 1
            else (comp[:, 0].min() < lo or comp[:, -1].max() > hi)
        ):
            return top_k(a, req)  # a NaN: the general way
        cols = np.bitwise_and(comp[:, :k], mask)
        if order != "value":
            cols.sort(axis=1)
        values = x.ravel().take(cols if offsets is None else cols + offsets)
        return values.reshape(out_shape), cols.astype(index_dtype, copy=False).reshape(out_shape)

    return run


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


def _route(x: np.ndarray, k: int, threads: int) -> tuple[str, int, int, str]:
    """How :func:`select` handles ``x`` (2-D): the route's name, the threads it uses, the rows
    per block (0 for the long-row path), and why that many threads."""
    rows, n = x.shape
    threads, capped = _threads.usable_threads(threads)
    if capped:  # more threads asked for than CPUs: the route as on the CPUs, the plan says so
        name, useful, step, why = _route(x, k, threads)
        return name, useful, step, why + capped
    if threads > 1 and rows * n < PARALLEL_MIN_ELEMENTS:
        return (*_route_on(x, k, 1), f"1 of {threads}: a small problem ({rows * n} elements)")
    name, planned, step = _route_on(x, k, threads)
    useful, why = _split(name, rows, n, step, threads)
    if useful != threads:  # the route may differ on fewer threads (a row split for every core)
        name, planned, step = _route_on(x, k, useful)
        if useful > 1:
            useful, why = _split(name, rows, n, step, useful)
    useful, why = _threads.verdict(_shape_key(x, k), useful, threads, why)
    if useful != planned:
        name, planned, step = _route_on(x, k, useful)
    return name, useful, step, why


def _shape_key(x: np.ndarray, k: int) -> tuple:
    """What a split's trials are kept by (``threads.trial``): the call's shape, layout, dtype, K."""
    return x.shape, x.strides, x.dtype.str, k


def _split(name: str, rows: int, n: int, step: int, threads: int) -> tuple[int, str]:
    """``threads.threads_for`` for route ``name`` on ``rows`` rows of ``n`` in blocks of ``step``
    rows (0: the long-row path's column ranges)."""
    blocks = -(-rows // step) if step else rows * -(-n // _long_rows.RANGE_ELEMENTS)
    if blocks == 1 and threads > 1:  # nothing to share (a single row on the compiled route)
        return 1, f"1 of {threads}: one block ({rows} x {n})"
    return _threads.threads_for(threads, rows * n * ROUTE_PASSES[name], *ROUTE_SPLIT[name], blocks)


def _route_on(x: np.ndarray, k: int, threads: int) -> tuple[str, int, int]:
    """:func:`_route` on exactly ``threads`` threads."""
    rows, n = x.shape
    native = x.dtype == x.dtype.newbyteorder("=")
    method = _compiled_method(x, k) if native else None
    if method is not None:
        step = min(max(1, FILTER_BLOCK_BYTES // (n * x.itemsize)), -(-rows // threads))
        if method == "columns":  # whole blocks of the C file's CHUNK rows side by side
            step = -(-step // COLUMNS_BLOCK) * COLUMNS_BLOCK
        return COMPILED_ROUTES[method], threads, step
    if _long_rows.takes(rows, n, threads):
        return "long-rows", threads, 0
    filtered = n >= PREFILTER_MIN_N and k <= n * PREFILTER_MAX_K_SHARE
    # An outer axis (the batch contiguous, the selected axis strided): filter the input as it
    # lies, a block of columns at a time, instead of copying it transposed. Half floats
    # compare slowly: they are copied and filtered on their keys.
    outer = filtered and native and x.strides[0] == x.itemsize and n > 1 and x.itemsize >= 4
    block_bytes = OUTER_BLOCK_BYTES if outer else FILTER_BLOCK_BYTES if filtered else BLOCK_BYTES
    step = max(1, block_bytes // max(1, n * x.itemsize))
    step = min(step, -(-rows // threads))  # at least one block per thread
    if outer:
        name = "filter-outer"
    elif _sorts(n, k, x.itemsize, x.size):
        name = "sorted"
        step = max(1, min(step, SORTED_BLOCK_ELEMENTS // n))
    elif n <= SORT_MAX_N:
        name = "sort"
    elif k == n:
        name = "all"
    elif n <= COMPOSITE_MAX_N and x.itemsize <= 4:
        name = "composite"
        step = max(1, min(step, COMPOSITE_BLOCK_BYTES // (n * x.itemsize)))
    else:
        name = "filter" if filtered else "exact"
    return name, threads, step


def _compiled_method(x: np.ndarray, k: int) -> str | None:
    """How the compiled route (``native.select``) selects ``x`` (2-D, native byte order), one of
    ``native.METHODS``, or None where it does not take it (or is not built, or turned off)."""
    rows, n = x.shape
    if k >= n:
        return None  # every element (the "all" route) or a row shorter than K: no selection
    outer = rows > 1 and x.strides[0] == x.itemsize
    if outer:  # rows read side by side, a block of CHUNK at a time, where they lie
        method = "columns" if k <= COLUMNS_MAX_K and rows >= COLUMNS_MIN_ROWS else None
    elif n >= NATIVE_MIN_N:
        if k <= min(NATIVE_MAX_K, n * NATIVE_MAX_K_SHARE):
            method = "threshold"
        else:  # a larger K: 8- and 16-bit keys counted, the rest on the NumPy routes
            method = "count" if x.itemsize <= 2 and n <= COUNT_MAX_N else None
    elif x.itemsize == 1 and n >= COUNT_MIN_N:
        method = "count"
    elif (
        x.itemsize == 2
        and n >= COUNT_MIN_N
        and (k == 1 or (n >= COUNT16_MIN_N and k >= n * COUNT16_MIN_K_SHARE))
    ):
        method = "count"
    elif k <= (RANK_MAX_K if x.itemsize <= 4 else INSERT_MAX_K):
        method = "rank" if x.itemsize <= 4 else "insert"
    else:
        method = "threshold" if k <= n * SHORT_MAX_K_SHARE else None
    return method if method is not None and _native.available() else None


def describe(a, req: Request) -> dict:
    """What :func:`top_k` does with ``a`` (for ``cutopk.plan``), without touching the data:
    ``route`` (``sort``, ``composite``, ``filter``, ``filter-outer``, ``exact``, ``all``,
    ``long-rows``, ``native``: the compiled route), ``compiled`` (None where the compiled
    route can run, else why not), ``threads``, ``copy`` (the whole input is copied once: an axis no 2-D view
    describes) and ``block_copies`` (rows are copied a block at a time, at most one block per
    thread at once: rows not contiguous, or a non-native byte order)."""
    a = np.asarray(a)
    x, _, copied = _rows(a, req)
    compiled = _native.unavailable_reason()
    if req.k == 0 or x.size == 0:
        return {
            "route": "none",
            "threads": 1,
            "threads_why": "no work",
            "copy": False,
            "block_copies": False,
            "compiled": compiled,
        }
    name, threads, _, why = _route(x, req.k, _threads.get_num_threads())
    native = x.dtype == x.dtype.newbyteorder("=")
    in_place = ("filter-outer", "long-rows", *COMPILED_METHODS)
    blocks = name not in in_place and not (x.flags.c_contiguous and native)
    return {
        "route": name,
        "threads": threads,
        "threads_why": why,
        "copy": copied,
        "block_copies": blocks,
        "compiled": compiled,
    }


def select(x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str, threads: int) -> np.ndarray:
    """The ``(rows, k)`` int64 column indices of the top K of each row of the 2-D ``x`` (any
    strides and byte order), ordered as ``order`` asks; blocks of rows run on ``threads``."""
    name, threads, step, _ = _route(x, k, threads)
    trial = _threads.trial(_shape_key(x, k), threads) if threads > 1 else 0
    if not trial:
        return _select_on(x, k, largest, nan_first, order, name, threads, step)
    if trial == 1:
        name, threads, step = _route_on(x, k, 1)
    start = time.perf_counter()
    idx = _select_on(x, k, largest, nan_first, order, name, threads, step)
    _threads.record(_shape_key(x, k), trial, time.perf_counter() - start)
    return idx


def _select_on(x, k: int, largest: bool, nan_first: bool, order: str, name: str, threads: int, step: int):
    """:func:`select` on route ``name`` with ``threads`` threads and blocks of ``step`` rows."""
    rows = x.shape[0]
    if name == "long-rows" and rows == 1:  # the row's own result: no copy of a K-sized array
        return _long_rows.select_row(x[0], k, largest, nan_first, order, threads)[None, :]
    idx = np.empty((rows, k), dtype=np.int64)
    if name == "long-rows":
        for r in range(rows):
            idx[r] = _long_rows.select_row(x[r], k, largest, nan_first, order, threads)
        return idx
    outer = name == "filter-outer"
    native = x.dtype.newbyteorder("=")
    starts = range(0, rows, step)

    def one(start: int) -> None:
        block = x[start : start + step]
        if name in COMPILED_METHODS:  # the rows as they lie, any strides
            method = COMPILED_METHODS[name]
            _native.select(block, k, largest, nan_first, order, idx[start : start + step], method=method)
            return
        if outer:
            idx[start : start + step] = _select_outer(block.T, k, largest, nan_first, order)
            return
        if block.dtype != native or not block.flags.c_contiguous:
            block = np.ascontiguousarray(block, dtype=native)  # one block's copy, in cache
        idx[start : start + step] = select_rows(block, k, largest, nan_first, order)

    _threads.run(one, starts, threads)
    return idx


def select_rows(
    x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str, sort_ok: bool = True
) -> np.ndarray:
    """Return the ``(rows, k)`` int64 column indices of the top K of each row of ``x``.

    ``x`` is 2-D, C-contiguous, with native byte order; ``1 <= k <= x.shape[1]``. The result is
    ordered as ``order`` asks ("value", "index"; "none" gives index order). ``sort_ok``: False
    for the rows :func:`select_sorted` hands back (NaN rows), which go another way.
    """
    rows, n = x.shape
    if sort_ok and _sorts(n, k, x.itemsize, x.size):
        return select_sorted(x, k, largest, nan_first, order)
    if n <= SORT_MAX_N:
        # Tiny rows (MoE routing): one stable sort per row beats partition + tie resolution.
        keys = preference_keys(x, largest, nan_first)
        cols = np.argsort(~keys, axis=1, kind="stable")[:, :k]
        return np.sort(cols, axis=1) if order != "value" else cols
    if k == n:
        if order == "value":
            keys = preference_keys(x, largest, nan_first)
            return np.argsort(~keys, axis=1, kind="stable")
        return np.ascontiguousarray(np.broadcast_to(np.arange(n), (rows, n)))
    if n <= COMPOSITE_MAX_N and x.itemsize <= 4:
        return _select_composite(preference_keys(x, largest, nan_first), k, order)
    if n >= PREFILTER_MIN_N and k <= n * PREFILTER_MAX_K_SHARE:
        if x.itemsize < 4 and _dtypes.info(x.dtype).is_float:
            return _select_half(x, k, largest, nan_first, order)
        return _select_prefiltered(x, k, largest, nan_first, order)
    keys = preference_keys(x, largest, nan_first)
    cols = _select_exact(keys, k)
    return _order_winners(cols, np.take_along_axis(keys, cols, axis=1) if order == "value" else None, order)


_I64 = {b: np.int64(b) for b in range(64)}  # typed shift counts: a Python int costs a ufunc 0.2 us
_MAGNITUDE = {size: np.int64((1 << (8 * size - 1)) - 1) for size in (1, 2, 4)}


def _order_numbers(x: np.ndarray, largest: bool, scratch: bool = False) -> np.ndarray:
    """int64 numbers, ascending in preference order, of the elements of ``x`` (native byte
    order, at most 32 bits): ascending values for ``smallest``, descending for ``largest``.
    -0.0 and +0.0 get the same number (0); a NaN's lies outside :func:`_number_bounds`. Five
    passes for floats (a sign-magnitude number made two's complement), one or two for ints.
    ``scratch``: the numbers (and the float's sign words) are written into this thread's
    scratch memory (:func:`_scratch`), valid until its next use in this thread."""
    if scratch:
        out = _scratch(2 * x.size)
        s, sign = out[: x.size].reshape(x.shape), out[x.size :].reshape(x.shape)
    if not _dtypes.info(x.dtype).is_float:
        if scratch:
            np.copyto(s, x)
        else:
            s = x.astype(np.int64)
        if largest:
            np.negative(s, out=s)
        return s
    words = x.view(f"i{x.itemsize}")
    if scratch:
        bits = s
        np.copyto(bits, words)  # sign-extended
        np.right_shift(bits, _I64[63], out=sign)  # 0, or -1 for a negative number
    else:
        bits = words.astype(np.int64)  # sign-extended
        sign = bits >> _I64[63]  # 0, or -1 for a negative number
    np.bitwise_and(bits, _MAGNITUDE[x.itemsize], out=bits)  # the magnitude
    # (m ^ sign) - sign is m or -m by the sign; sign - (m ^ sign) its negation (for largest).
    bits ^= sign
    if largest:
        np.subtract(sign, bits, out=bits)
    else:
        bits -= sign
    return bits


# Each thread's scratch memory for the short-row sorts: the int64 composites of a block, kept
# between calls. Fresh memory of this size comes from the system as new pages on every call
# where the allocator hands it back (glibc, as the main thread's heap shrinks): 65536x8 k=2 on
# the main thread of a fresh process took 6.0 ms, 2400 page faults, against 2.2 ms.
_SCRATCH = threading.local()
SCRATCH_MAX_ELEMENTS = 2 * SORTED_BLOCK_ELEMENTS


def _scratch(size: int) -> np.ndarray:
    """``size`` int64 of this thread's scratch memory (kept up to ``SCRATCH_MAX_ELEMENTS``)."""
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.size < size:
        buf = np.empty(size, dtype=np.int64)
        if size <= SCRATCH_MAX_ELEMENTS:
            _SCRATCH.buf = buf
    return buf[:size]


def _number_bounds(dtype: np.dtype) -> tuple[int, int] | None:
    """The least and greatest :func:`_order_numbers` of a number, in either mode (a NaN's lies
    outside them); None for integers."""
    if not _dtypes.info(dtype).is_float:
        return None
    inf = int(np.array(np.inf, dtype=dtype).view(f"i{dtype.itemsize}")[()])
    return -inf, inf


def select_sorted(x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str) -> np.ndarray:
    """Top K of short rows (``x``: C-contiguous, native, at most 32 bits per element) through
    one sort of composite keys per row: the element's number in preference order
    (:func:`_order_numbers`) in the high bits and its column in the low bits. Composites are
    distinct, so the first K of the ascending sort are the answer in the SPEC.md order, ties by
    lower index included: some ten NumPy calls per block, whatever the rows. Rows holding a NaN
    (their composites fall outside the numbers' range) go the general way."""
    n = x.shape[1]
    col_bits = max(1, (n - 1).bit_length())
    comp = _order_numbers(x, largest, scratch=True)
    comp <<= _I64[col_bits]
    comp |= _columns(n)
    comp.sort(axis=1)
    mask = (1 << col_bits) - 1
    cols = np.bitwise_and(comp[:, :k], np.int64(mask))
    bounds = _number_bounds(x.dtype)
    if bounds is not None:
        lo, hi = bounds[0] << col_bits, (bounds[1] << col_bits) | mask
        bad = comp[:, 0] < lo
        bad |= comp[:, -1] > hi
        if bad.any():
            cols[bad] = select_rows(x[bad], k, largest, nan_first, "value", sort_ok=False)
    if order != "value":
        cols.sort(axis=1)
    return cols


_COLUMNS: dict = {}


def _columns(n: int) -> np.ndarray:
    """``0 .. n-1`` as int64, cached (read-only constants)."""
    cols = _COLUMNS.get(n)
    if cols is None:
        cols = np.arange(n)
        cols.flags.writeable = False
        if len(_COLUMNS) < 4096:
            _COLUMNS[n] = cols
    return cols


def _sorts(n: int, k: int, itemsize: int, elements: int) -> bool:
    """Whether rows of ``n`` (``elements`` in all) go through :func:`select_sorted`."""
    return (
        k < n and itemsize <= 4 and (n <= SORTED_MAX_N or (n <= TINY_MAX_N and elements <= TINY_MAX_ELEMENTS))
    )


def _select_composite(keys: np.ndarray, k: int, order: str) -> np.ndarray:
    """Top K of short rows through one partition of composite keys: the preference key in the
    high half, the inverted column in the low half. Composites are distinct, and a larger one is
    a preferred key or, for equal keys, a lower column: the partition's top K is the answer and
    a sort of those K is the SPEC.md order, with no tie to resolve afterwards."""
    n = keys.shape[1]
    key_bits = 8 * keys.itemsize
    comp_bits = next(b for b in (16, 32, 64) if b - key_bits >= 0 and (1 << (b - key_bits)) >= n)
    comp_t = np.dtype(f"u{comp_bits // 8}")
    low = comp_bits - key_bits
    ones = comp_t.type((1 << low) - 1)
    comp = keys.astype(comp_t)
    comp <<= comp_t.type(low)
    comp |= ones - np.arange(n, dtype=comp_t)
    comp.partition(n - k, axis=1)
    top = comp[:, n - k :]
    if order == "value":
        top = np.sort(top, axis=1)[:, ::-1]  # descending composite: preferred first
    cols = (ones - (top & ones)).astype(np.int64)
    if order != "value":
        cols.sort(axis=1)
    return cols


def _order_winners(cols: np.ndarray, keys: np.ndarray | None, order: str) -> np.ndarray:
    """Order winners given in ascending index order, with their keys."""
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


def _sample_positions(n: int) -> np.ndarray | None:
    """Positions of a sample of a row of ``n``: short runs of adjacent positions spread evenly
    over the row (None: the whole row, when it is not longer than the sample). Runs read whole
    cache lines (a plain stride would touch one line per element) and, spread out, still see
    every part of a sorted or clustered row. Long rows get a larger sample: a tighter pivot,
    fewer candidates (8x128256, k=50: about 2000 candidates per row from 256 samples, 600
    from 1024)."""
    size, runs = (256, 16) if n < SAMPLE_LARGE_MIN_N else (1024, 32)
    if n <= size:
        return None
    run = size // runs
    starts = np.arange(runs) * (n // runs)
    return (starts[:, None] + np.arange(run)).ravel()


def _pivot(x: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """A ``(rows, 1)`` pivot per row, from a sample of columns, chosen so that at least K
    elements of each row lie at or beyond it with overwhelming probability."""
    where = _sample_positions(x.shape[1])
    return _pivot_of(x if where is None else np.take(x, where, axis=1), k, x.shape[1], largest)


def _pivot_of(sample: np.ndarray, k: int, n: int, largest: bool) -> np.ndarray:
    """The ``(rows, 1)`` pivots from a ``(rows, s)`` sample of rows of length ``n``."""
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
    if sample.itemsize == 1:
        # NumPy's partition of 8-bit integers is some 15 times slower than of 16-bit ones
        # (256x256 int8: 410 us against 23 us widened).
        return np.partition(sample.astype(np.int16), at, axis=1)[:, at : at + 1].astype(sample.dtype)
    return np.partition(sample, at, axis=1)[:, at : at + 1]


def _beyond(x: np.ndarray, pivot: np.ndarray, largest: bool, strict: bool, nan_first: bool):
    """Mask of the elements at (``strict`` False) or strictly beyond the pivot in the preferred
    direction. NaN compares False, so where NaN is preferred (largest only) the mask is the
    negated opposite comparison, True for NaN: one pass, no NaN mask."""
    with np.errstate(invalid="ignore"):
        if nan_first:
            keep = np.less_equal(x, pivot) if strict else np.less(x, pivot)
            return np.logical_not(keep, out=keep)
        if largest:
            return x > pivot if strict else x >= pivot
        return x < pivot if strict else x <= pivot


def _select_half(x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str) -> np.ndarray:
    """The pivot filter for half floats (float16, bfloat16), whose comparisons NumPy makes one
    element at a time through float32 (its 16-bit integers: in SIMD).

    Where the top of every row lies on one side of zero, the filter runs on the elements' bits
    as 16-bit integers, with no pass to make keys: the positive numbers' bits, as int16, are
    in their numeric order, the negative numbers' bits, as uint16, in the reverse order. A row
    is answered so only when its K winners in that integer order are all numbers of that side
    (not zero, not NaN): every element left out then has bits at or beyond the K-th's, so it is
    a number of the same side, no better, or a NaN or zero that ranks below them too; and equal
    bits are equal numbers. The other rows (a NaN or a zero among the winners, a top across
    zero), and calls where NaN is preferred and the input holds a NaN with its sign bit set,
    go the general way: bfloat16 through float32 (one
    fast pass in ml_dtypes: a shift, exact), float16 through its keys (NumPy's float16 cast is
    slow: 1.2 ms for 1M elements)."""
    inf = int(np.array(np.inf, dtype=x.dtype).view(np.int16)[()])
    # Where NaN is preferred, every NaN must be among the winners, and a NaN whose sign bit is
    # set would be missed (its bits, as int16, lie below every number's; as uint16 above
    # -inf's): one pass (a maximum) makes sure there is none. A NaN of the other sign sorts
    # first in the integer order: a winner, found below.
    if not nan_first or x.view(np.uint16).max() <= (0x8000 | inf):
        rows, n = x.shape
        where = _sample_positions(n)
        positive = x.view(np.int16)
        sample = positive if where is None else positive.take(where, axis=1)
        # The positive side: int16 bits, the preference direction as asked.
        pivot = _pivot_of(sample, k, n, largest)
        view: np.ndarray | None
        view, view_largest, low, high = positive, largest, 1, inf
        if not (pivot > 0).all():
            # The negative side: uint16 bits, larger magnitudes larger, so the direction flips.
            view = x.view(np.uint16)
            sample = sample.view(np.uint16)
            pivot = _pivot_of(sample, k, n, not largest)
            view_largest, low, high = not largest, 0x8001, 0x8000 | inf
            if not ((pivot >= low) & (pivot <= high)).all():
                view = None
        if view is not None:
            cols = _select_prefiltered(view, k, view_largest, False, order, pivot)
            won = view.ravel().take(cols + np.arange(0, rows * n, n)[:, None] if rows > 1 else cols)
            bad = (won < low) | (won > high)
            if not bad.any():
                return cols
            bad_rows = bad.any(axis=1)
            cols[bad_rows] = _select_half_general(x[bad_rows], k, largest, nan_first, order)
            return cols
    return _select_half_general(x, k, largest, nan_first, order)


def _select_half_general(x, k: int, largest: bool, nan_first: bool, order: str) -> np.ndarray:
    """:func:`_select_half`'s general way (see there)."""
    if x.dtype.kind != "f":
        with np.errstate(invalid="ignore"):  # a signalling NaN stays a NaN, quietly
            return _select_prefiltered(x.astype(np.float32), k, largest, nan_first, order)
    return _select_prefiltered(preference_keys(x, largest, nan_first), k, True, False, order)


def _select_prefiltered(
    x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str, pivot: np.ndarray | None = None
) -> np.ndarray:
    """Exact top-K through a pivot pass: the ``(rows, k)`` columns, ordered as ``order`` asks.
    Rows that the pivot does not settle (too many candidates that do not tie at K, too few
    candidates) go to the plain exact path. ``pivot``: :func:`_pivot`'s, where already known."""
    rows, n = x.shape
    if pivot is None:
        pivot = _pivot(x, k, largest)
    cols = np.empty((rows, k), dtype=np.int64)
    done = np.zeros(rows, dtype=bool)
    if nan_first and x.dtype.kind == "f":
        nan_pivot = np.isnan(pivot[:, 0])
        if nan_pivot.any():
            # A NaN pivot (many NaNs in the sample, NaN preferred): nothing ranks above NaN and
            # NaNs tie, so a row with K NaNs takes its first K, found in its first columns.
            sel = np.flatnonzero(nan_pivot)
            part = x if sel.size == rows else x[sel]
            # The first K NaNs of such a row usually lie in its first columns: look there first
            # (4x32000 k=50, a tenth NaN: 77 us to 62 us), then in the whole rows.
            head = min(n, max(FILTER_HEAD_COLUMNS, 16 * k))
            nans = np.isnan(part[:, :head])
            enough = _count_rows(nans) >= k
            if head < n and not enough.all():
                nans = np.isnan(part)
                enough = _count_rows(nans) >= k
            if enough.any():
                if not enough.all():
                    sel, nans = sel[enough], nans[enough]
                first = _first_true(nans, np.full(sel.size, k))
                cols[sel] = (_true_positions(first) % nans.shape[1]).reshape(-1, k)
                done[sel] = True
            # For the others +inf keeps the NaNs and the infinities, the K best wherever there
            # are K of them (a NaN pivot would keep every element).
            pivot[nan_pivot] = np.inf
    all_nan = done.copy()  # rows answered by K NaNs: in order already (NaNs tie)
    in_order, light = True, np.zeros(rows, dtype=bool)
    if not done.all():
        light, in_order = _filter(x, pivot, k, largest, nan_first, order, cols, done)
    if in_order and light.all():
        return cols
    if not done.all():
        rest = ~done
        cols[rest] = _select_exact(preference_keys(x[rest], largest, nan_first), k)
    # Rows in index order still (settled at the pivot, the exact path, or candidates that
    # could not be packed with their keys) get ordered by their keys.
    unordered = ~light if in_order else np.ones(rows, dtype=bool)
    unordered &= ~all_nan  # their K NaNs tie: index order is their order
    if order == "value" and unordered.any():
        if unordered.all():
            keys = preference_keys(np.take_along_axis(x, cols, axis=1), largest, nan_first)
            return _order_winners(cols, keys, order)
        part = cols[unordered]
        keys = preference_keys(np.take_along_axis(x[unordered], part, axis=1), largest, nan_first)
        cols[unordered] = _order_winners(part, keys, order)
    return cols


def _filter(x, pivot, k: int, largest: bool, nan_first: bool, order: str, cols, done):
    """The pivot filter proper for the rows not ``done``: writes their columns into ``cols``
    (settled rows marked ``done``); returns the rows settled through their sorted candidates
    and whether those are in the order asked for."""
    rows, n = x.shape
    keep = _beyond(x, pivot, largest, False, nan_first)
    if done.any():
        keep[done] = False
    limit = min(FLAT_MAX_CANDIDATES, keep.size * PREFILTER_MAX_KEEP_SHARE)
    # The words holding a candidate bound their count (at most 8 each): the usual few
    # candidates need no count of their own (8x128256: 25 us). Where the rows' first columns
    # hold many already (ties at the pivot), the words would only be counted in vain.
    head = keep[:, :FILTER_HEAD_COLUMNS]
    dense = np.count_nonzero(head) > head.size * PREFILTER_MAX_KEEP_SHARE / 2
    words = None if dense else _true_words(keep)
    if (words is None or words.size * 8 > limit) and np.count_nonzero(keep) > limit:
        # Candidates everywhere (equal rows, a pivot among ties): settle the rows tied at the
        # pivot on their masks, then list the candidates of the rows left (4x65536, a third
        # tied at K: 1.2 ms against 3.2 ms listing them all; 64x8192 equal: 4.2 against 20 ms).
        counts = _count_rows(keep)
        heavy = counts > n * PREFILTER_MAX_KEEP_SHARE
        _settle_at_pivot_masks(x, keep, counts, heavy, pivot, k, largest, nan_first, cols, done)
        if done.all():  # every row tied at its pivot: nothing left to list
            return np.zeros(rows, dtype=bool), True
        keep[done | heavy] = False
        words = None
    flat = _true_positions(keep, words)  # row-major: rows in order, columns ascending within a row
    del keep
    r, c = np.divmod(flat, n)
    counts = np.bincount(r, minlength=rows)
    heavy = counts > n * PREFILTER_MAX_KEEP_SHARE
    if heavy.any():
        # Many elements at the pivot: when the pivot is the K-th value itself (ties at K, equal
        # values), the elements strictly beyond it and the first that equal it are the answer.
        hf, hr = (flat, r) if heavy.all() else (flat[heavy[r]], r[heavy[r]])
        strict = _beyond(x.ravel()[hf], pivot[hr, 0], largest, True, nan_first)
        above = np.bincount(hr[strict], minlength=rows)
        at_pivot = heavy & (above < k) & (counts >= k)
        if at_pivot.any():
            if not at_pivot[hr].all():
                sel = at_pivot[hr]
                hf, hr, strict = hf[sel], hr[sel], strict[sel]
            # Running count of the ties within each row: a global count less the row's start.
            ties = np.cumsum(~strict, dtype=np.int64)
            per_row = counts[at_pivot]
            first = np.zeros(per_row.size, dtype=np.int64)
            np.cumsum(per_row[:-1], out=first[1:])
            ties -= np.repeat(ties[first] - ~strict[first], per_row)
            need = (k - above)[hr]
            win = strict | (ties <= need)
            cols[at_pivot] = (hf[win] - hr[win] * n).reshape(-1, k)
            done |= at_pivot
    light = ~done & (counts >= k) & ~heavy
    in_order = True
    if light.any():
        if not light.all():
            sel = light[r]
            flat, r, c = flat[sel], r[sel], c[sel]
        counts[~light] = 0
        cand, in_order = _select_candidates(
            x.ravel()[flat], r, c, counts, rows, n, k, largest, nan_first, order
        )
        cols[light] = cand[light]
        done |= light
    return light, in_order


def _settle_at_pivot_masks(x, keep, counts, heavy, pivot, k, largest, nan_first, cols, done) -> None:
    """For the ``heavy`` rows whose pivot is the K-th value (fewer than K beyond it, K or more
    at or beyond it), write their columns into ``cols`` and mark them ``done``: the elements
    strictly beyond the pivot, then the first ones equal to it. Works on the rows' masks."""
    if not heavy.any():
        return
    every = heavy.all()  # then no row copies
    sel = np.flatnonzero(heavy)
    strict = _beyond(x if every else x[sel], pivot if every else pivot[sel], largest, True, nan_first)
    above = _count_rows(strict)
    at_pivot = (above < k) & (counts[sel] >= k)
    if not at_pivot.any():
        return
    if not at_pivot.all():
        sel, strict, above, every = sel[at_pivot], strict[at_pivot], above[at_pivot], False
    # Every row settled here: the caller drops all of keep after, so it may serve as the ties.
    tied = keep if every else keep[sel]
    tied &= ~strict
    strict |= _first_true(tied, k - above)
    cols[sel] = (_true_positions(strict) % x.shape[1]).reshape(-1, k)
    done[sel] = True


def _select_candidates(
    values, r, c, counts, rows: int, n: int, k: int, largest: bool, nan_first: bool, order: str
):
    """The ``(rows, k)`` columns of the top K of each row among its candidates: ``values`` at row
    ``r`` and column ``c``, grouped by row and in ascending column within a row, ``counts`` per
    row (rows with fewer than K get garbage). Returns the columns and whether they are in the
    order asked for (else in index order)."""
    keys = preference_keys(values, largest, nan_first)
    key_bits = 8 * keys.itemsize
    col_bits = max(1, (n - 1).bit_length())
    row_bits = max(1, (rows - 1).bit_length())
    if key_bits + col_bits + row_bits <= 64:
        # One sort of composites (row, inverted key, column): each row's candidates come out
        # preferred first, ties by lower column; its first K are the answer, in order.
        comp = r.astype(np.uint64)
        comp <<= np.uint64(key_bits)
        comp |= ~keys  # the inverted key: ascending order is preferred first
        comp <<= np.uint64(col_bits)
        comp |= c.astype(np.uint64)
        comp.sort()
        starts = np.zeros(rows, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        take = np.minimum(starts[:, None] + np.arange(k), max(0, comp.size - 1))
        cols = (comp[take] & np.uint64((1 << col_bits) - 1)).astype(np.int64)
        if order != "value":
            cols.sort(axis=1)
        return cols, True
    # 64-bit keys: pack the candidates, still in index order, into a (rows, width) matrix.
    # Padding has key 0 and column n, so it ranks below every candidate with key 0 too: it is
    # never selected while a row has at least K real candidates.
    width = max(k, int(counts.max()))
    starts = np.zeros(rows, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    slot = np.arange(r.size) - starts[r]
    # Flat indexing: NumPy's 2-D fancy indexing is several times slower.
    dest = r * width + slot
    cand_cols = np.full((rows, width), n, dtype=np.int64)
    cand_cols.ravel()[dest] = c
    cand_keys = np.zeros((rows, width), dtype=keys.dtype)
    cand_keys.ravel()[dest] = keys
    pos = _select_exact(cand_keys, k)
    return np.take_along_axis(cand_cols, pos, axis=1), False


def _select_outer(y: np.ndarray, k: int, largest: bool, nan_first: bool, order: str) -> np.ndarray:
    """Top K down each column of ``y`` (``(n, columns)``, rows contiguous, native byte order):
    the ``(columns, k)`` row indices, ordered as ``order`` asks. The pivot filter of
    :func:`_select_prefiltered` on the input as it lies in memory (an outer axis), without
    transposing it: a sample of whole rows gives each column its pivot, one contiguous pass
    keeps the candidates, and they are grouped by column by a stable sort of their few
    positions. Columns the pivot does not settle are copied out and go the exact way."""
    n, cols_n = y.shape
    where = _sample_positions(n)
    sample = np.ascontiguousarray(y[where].T) if where is not None else np.ascontiguousarray(y.T)
    pivot = np.ascontiguousarray(_pivot_of(sample, k, n, largest).reshape(1, -1))  # fast broadcast
    if nan_first and y.dtype.kind == "f":
        pivot[np.isnan(pivot)] = np.inf  # see _select_prefiltered
    keep = _beyond(y, pivot, largest, False, nan_first)
    i, j = np.divmod(_true_positions(keep), cols_n)
    del keep
    counts = np.bincount(j, minlength=cols_n)
    fine = (counts >= k) & (counts <= n * PREFILTER_MAX_KEEP_SHARE)
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
        cand, in_order = _select_candidates(values, j, i, counts, cols_n, n, k, largest, nan_first, order)
        out[fine] = cand[fine]
    if not fine.all():
        rest = ~fine
        out[rest] = _select_exact(preference_keys(np.ascontiguousarray(y[:, rest].T), largest, nan_first), k)
    unordered = ~fine if in_order else np.ones(cols_n, dtype=bool)
    if order == "value" and unordered.any():
        part = out[unordered]
        keys = preference_keys(_gather(y, part, np.flatnonzero(unordered)[:, None]), largest, nan_first)
        out[unordered] = _order_winners(part, keys, order)
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
