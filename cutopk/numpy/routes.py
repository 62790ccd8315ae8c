"""The NumPy backend's choice of route, and the tuning constants it rests on.

Which route a 2-D ``(rows, n)`` call takes (``plan()``'s ``route``), on how many threads, in
blocks of how many rows, and why: a pure function of the shape, strides, dtype and K (and of the
thread pool's measured costs), kept apart from the routes themselves so that a threshold and
the measurement behind it are read in one place, RAFT's ``select_k`` choice beside its
algorithms. The compiled route's own thresholds are in :mod:`cutopk.numpy.compiled_choice`; the routes
are :mod:`cutopk.numpy.short_rows`, :mod:`cutopk.numpy.pivot_filter`,
:mod:`cutopk.numpy.outer_axis`, :mod:`cutopk.numpy.long_rows` and the exact path
(:mod:`cutopk.numpy.exact`), run by :mod:`cutopk.numpy.backend`.

Tests patch the constants here (``BLOCK_BYTES``, ``PARALLEL_MIN_ELEMENTS``, ...): every function
reads them when it runs.
"""

from __future__ import annotations

import numpy as np

from . import compiled_choice as _compiled_choice
from . import compiled_threads as _compiled_threads
from . import long_rows as _long_rows
from . import threads as _threads

# Below this row length, or when K is a large share of the row, the pivot pass cannot discard
# enough to pay for itself (see benchmarks/cpu_numpy.py).
PREFILTER_MIN_N = 512
PREFILTER_MAX_K_SHARE = 1 / 16
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
# the last axis, runs a function made for its shape (``short_rows.runner``): 1x128 k=8 in some
# 10 us where the general way takes 20 us.
TINY_MAX_ELEMENTS = 1 << 13
TINY_MAX_N = 256
# Up to this row length a full stable sort of each row is the cheapest exact route
# (65536x16 float32, k=8: 6.7 ms sorting against 9.0 ms for partition + tie resolution).
SORT_MAX_N = 16
# Blocks of an outer axis are filtered in place: wide blocks keep NumPy's inner loops long
# (4096x256 float32 columns: 1.4 ms per comparison pass; whole 4096x512 rows: 0.8 ms per 1M).
OUTER_BLOCK_BYTES = 16 << 20
# Below this many elements a call never splits, whatever the cost model says; on the compiled
# route (a handover of some microseconds, see compiled_threads.pool_costs) below COMPILED_PARALLEL_MIN_ELEMENTS.
PARALLEL_MIN_ELEMENTS = 1 << 16
COMPILED_PARALLEL_MIN_ELEMENTS = 1 << 14
# The work of each route for the thread cost model (``_threads.threads_for``), in
# vectorised passes over the input: its one-thread time per element over the probe's time
# per element (a comparison and a count), rounded down: the ratio of two NumPy loops' speeds
# moves far less between machines than either speed does. The compiled route's methods are
# timed against the probe's loop in the same process, both by CPU time. The ratios per shape:
# benchmarks/results/2026-12-02-cpu-compiled-choice.md.
ROUTE_PASSES = {
    "sorted": 9,
    "sort": 20,
    "composite": 5,
    "all": 5,
    "exact": 10,
    "filter": 1,
    "filter-outer": 6,
    "long-rows": 1,
    "compiled": 1,
    "compiled-insert": 2,
    "compiled-rank": 3,
    "compiled-count": 1.5,
    "compiled-columns": 2.5,  # rows side by side in vector lanes
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
}
# The compiled route's calls are split by compiled.c's own pool, on its own costs (see
# compiled_threads): not in ROUTE_SPLIT.


def route(x: np.ndarray, k: int, threads: int) -> tuple[str, int, int, str]:
    """How :func:`cutopk.numpy.backend.select` handles ``x`` (2-D): the route's name, the threads it uses, the rows
    per block (0 for the long-row path), and why that many threads."""
    rows, n = x.shape
    threads, capped = _threads.usable_threads(threads)
    if capped:  # more threads asked for than CPUs: the route as on the CPUs, the plan says so
        name, useful, step, why = route(x, k, threads)
        return name, useful, step, why + capped
    name, planned, step = route_on(x, k, threads)
    least = (
        COMPILED_PARALLEL_MIN_ELEMENTS if name in _compiled_choice.COMPILED_METHODS else PARALLEL_MIN_ELEMENTS
    )
    if threads > 1 and rows * n < least:
        return (*route_on(x, k, 1), f"1 of {threads}: a small problem ({rows * n} elements)")
    useful, why = split(name, rows, n, step, threads)
    if useful != threads:  # the route may differ on fewer threads (a row split for every core)
        name, planned, step = route_on(x, k, useful)
        if useful > 1:
            useful, why = split(name, rows, n, step, useful)
    useful, why = _threads.verdict(shape_key(x, k), useful, threads, why)
    if useful != planned:
        name, planned, step = route_on(x, k, useful)
    return name, useful, step, why


def shape_key(x: np.ndarray, k: int) -> tuple:
    """What a split's trials are kept by (``threads.trial``): the call's shape, layout, dtype, K."""
    return x.shape, x.strides, x.dtype.str, k


def split(name: str, rows: int, n: int, step: int, threads: int) -> tuple[int, str]:
    """``threads.threads_for`` for route ``name`` on ``rows`` rows of ``n`` in blocks of ``step``
    rows (0: the long-row path's column ranges)."""
    blocks = -(-rows // step) if step else rows * -(-n // _long_rows.RANGE_ELEMENTS)
    if blocks == 1 and threads > 1:  # nothing to share (a single row on the compiled route)
        return 1, f"1 of {threads}: one block ({rows} x {n})"
    if name in _compiled_choice.COMPILED_METHODS:  # one C call: its pool shares the blocks out
        return _compiled_threads.threads_for(threads, rows * n * ROUTE_PASSES[name], blocks)
    return _threads.threads_for(threads, rows * n * ROUTE_PASSES[name], *ROUTE_SPLIT[name], blocks)


def route_on(x: np.ndarray, k: int, threads: int) -> tuple[str, int, int]:
    """:func:`route` on exactly ``threads`` threads."""
    rows, n = x.shape
    native_order = x.dtype == x.dtype.newbyteorder("=")
    method = _compiled_choice.choose_method(x, k) if native_order else None
    if method is not None:  # one C call; its pool shares rows (columns: CHUNK-row groups) out
        step = _compiled_choice.COLUMNS_BLOCK if method == "columns" else 1
        return _compiled_choice.COMPILED_ROUTES[method], threads, step
    if _long_rows.takes(rows, n, threads):
        return "long-rows", threads, 0
    filtered = n >= PREFILTER_MIN_N and k <= n * PREFILTER_MAX_K_SHARE
    # An outer axis (the batch contiguous, the selected axis strided): filter the input as it
    # lies, a block of columns at a time, instead of copying it transposed. Half floats
    # compare slowly: they are copied and filtered on their keys.
    outer = filtered and native_order and x.strides[0] == x.itemsize and n > 1 and x.itemsize >= 4
    block_bytes = OUTER_BLOCK_BYTES if outer else FILTER_BLOCK_BYTES if filtered else BLOCK_BYTES
    step = max(1, block_bytes // max(1, n * x.itemsize))
    step = min(step, -(-rows // threads))  # at least one block per thread
    if outer:
        name = "filter-outer"
    elif takes_sorted(n, k, x.itemsize, x.size):
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


def takes_sorted(n: int, k: int, itemsize: int, elements: int) -> bool:
    """Whether rows of ``n`` (``elements`` in all) go through ``short_rows.select_sorted``."""
    return (
        k < n and itemsize <= 4 and (n <= SORTED_MAX_N or (n <= TINY_MAX_N and elements <= TINY_MAX_ELEMENTS))
    )
