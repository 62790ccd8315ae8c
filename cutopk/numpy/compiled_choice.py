"""The compiled route's share of the NumPy backend's choice: which rows ``compiled.c``
(:mod:`cutopk.numpy.compiled`) takes, by which of its methods, and the measurements behind each
threshold.

Kept apart from :mod:`cutopk.numpy.routes` because its thresholds come from their own benchmarks
(the C file against the NumPy routes) and change when the C file does, not when the
NumPy routes do; :func:`choose_method` is the one place that decides, ``routes.route_on`` and
``plan()`` read it.
"""

from __future__ import annotations

import numpy as np

from . import compiled as _compiled

# The compiled route (``compiled``) takes rows at least this long with K at most this share of
# them and at most COMPILED_MAX_K, where its sampled threshold scan beats the NumPy routes
# (benchmarks/results/2026-11-25-cpu-compiled-route.md; uniform rows at the largest K about
# even, kept for the ties). Shorter rows stay on the NumPy routes, whose per-block calls cost
# less than its per-row selection there (benchmarks/results/2026-12-02-cpu-compiled-choice.md).
COMPILED_MIN_N = 8192
COMPILED_MAX_K_SHARE = 1 / 64
COMPILED_MAX_K = 512
# Shorter rows take the compiled route too, by the C file's other methods (each exact on any input;
# chosen here by speed, benchmarks/results/2026-11-26-cpu-short-rows.md): 8-bit elements in rows of
# at least COUNT_MIN_N a counting selection ("count"); K up to RANK_MAX_K the ranks of the
# candidates at or above a bound ("rank"; 64-bit elements, K up to INSERT_MAX_K, a sorted list of
# the K best, "insert"); larger K up to SHORT_MAX_K_SHARE of the row the threshold scan from the
# same bound (C alone, one thread, CPU time: benchmarks/results/2026-12-02-cpu-compiled-choice.md).
# An outer axis: the rows side by side in memory, COLUMNS_BLOCK at a time, read where they lie
# ("columns", K up to COLUMNS_MAX_K: its sorted lists cost O(K) an entry).
COUNT_MIN_N = 256
# 16-bit elements are counted in two levels (the high byte, then the low byte of the K-th key's bin:
# ``count_row_16``), whose fixed cost per row (two sets of 4 x 256 counts) the selection methods
# beat on short rows and small K. The counts take: rows of at least 8192 with K above the threshold
# scan's, 8-bit ones too (where they beat the NumPy routes); shorter rows of at least COUNT16_MIN_N
# with K at least COUNT16_MIN_K_SHARE of them (where they beat the threshold scan). K of 1-4 takes
# the sorted list instead (INSERT_LONG_MIN_N); rows of 256 with more K, 128-element rows and K of
# 2-32 elsewhere keep their methods. CPU time, one thread:
# benchmarks/results/2026-11-26-cpu-short-rows.md,
# benchmarks/results/2026-12-02-cpu-compiled-choice.md.
COUNT16_MIN_N = 1024
COUNT16_MIN_K_SHARE = 1 / 16
# Counts and columns are 32-bit in the C file.
COUNT_MAX_N = (1 << 32) - 1
# K of 9-16 joined the ranks with their count by vectors (16 vectors: 64 candidates in registers and
# beside them), faster than the threshold scan there
# (benchmarks/results/2026-12-02-cpu-compiled-choice.md).
RANK_MAX_K = 16
INSERT_MAX_K = 4
# Rows of at most LANES_MAX_N (at least COLUMNS_MIN_ROWS of them) go side by side, one lane each
# ("columns": every lane's sorted list takes the row's next element in vector steps, without a
# branch per row): up to 64 they beat the best other method, at 128 not always (C alone, one
# thread: benchmarks/results/2026-12-02-cpu-compiled-choice.md).
LANES_MAX_N = 64
# Longer rows with K of at most INSERT_LONG_MAX_K, from INSERT_LONG_MIN_N[K] elements: the sorted
# list of one row at a time ("insert"), whose compare per element rarely lets one in (K ln N / N
# of them on shuffled data; a rising row lets every one in, at most K moves each). Each bound is
# the shortest row where it beat the best other method (K=2 rows of 128 and K=8 stay on the
# ranks; C alone, one thread: benchmarks/results/2026-12-02-cpu-compiled-choice.md).
INSERT_LONG_MAX_K = 4
INSERT_LONG_MIN_N = {1: LANES_MAX_N + 1, 2: 256, 3: 1024, 4: 1024}
SHORT_MAX_K_SHARE = 1 / 8
COLUMNS_MAX_K = 64
# Fewer rows side by side than this keep the NumPy routes: each step of the C loop would read
# a few elements for the cost of a call (4 rows of 10**6 along axis 0: long-row ranges).
COLUMNS_MIN_ROWS = 16
COLUMNS_BLOCK = 64
# The route names (plan()'s "route") of the compiled route's methods, and back.
COMPILED_ROUTES = {
    "threshold": "compiled",
    "insert": "compiled-insert",
    "rank": "compiled-rank",
    "count": "compiled-count",
    "columns": "compiled-columns",
}
COMPILED_METHODS = {route: method for method, route in COMPILED_ROUTES.items()}


def takes_lanes(itemsize: int, n: int, k: int) -> bool:
    """Whether rows of ``n`` elements of ``itemsize`` bytes go side by side ("columns") for K of
    ``k`` (the measurements above LANES_MAX_N)."""
    if n > LANES_MAX_N:
        return False
    if itemsize == 8:  # the sorted list is quicker for K of 1-2 on rows of 16-64
        return n <= 8 or k >= 4
    return itemsize != 1 or n < 64 or k <= 16  # 8-bit rows of 64, K above 16: counting


def choose_method(x: np.ndarray, k: int) -> str | None:
    """How the compiled route (``compiled.select``) selects ``x`` (2-D, native byte order), one of
    ``compiled.METHODS``, or None where it does not take it (or it is not built, or turned off)."""
    rows, n = x.shape
    if k >= n:
        return None  # every element (the "all" route) or a row shorter than K: no selection
    outer = rows > 1 and x.strides[0] == x.itemsize
    if outer:  # rows read side by side, a block of CHUNK at a time, where they lie
        method = "columns" if k <= COLUMNS_MAX_K and rows >= COLUMNS_MIN_ROWS else None
    elif n > LANES_MAX_N and k <= INSERT_LONG_MAX_K and n >= INSERT_LONG_MIN_N[k]:
        method = "insert"  # a few kept: one compare per element, rarely an entry
    elif n >= COMPILED_MIN_N:
        if k <= min(COMPILED_MAX_K, n * COMPILED_MAX_K_SHARE):
            method = "threshold"
        else:  # a larger K: 8- and 16-bit keys counted, the rest on the NumPy routes
            method = "count" if x.itemsize <= 2 and n <= COUNT_MAX_N else None
    elif x.itemsize == 1 and n >= COUNT_MIN_N:
        method = "count"
    elif x.itemsize == 2 and n >= COUNT16_MIN_N and k >= n * COUNT16_MIN_K_SHARE:
        method = "count"
    elif rows >= COLUMNS_MIN_ROWS and takes_lanes(x.itemsize, n, k):
        method = "columns"  # short rows side by side, one lane each
    elif k <= (RANK_MAX_K if x.itemsize <= 4 else INSERT_MAX_K):
        method = "rank" if x.itemsize <= 4 else "insert"
    else:
        method = "threshold" if k <= n * SHORT_MAX_K_SHARE else None
    return method if method is not None and _compiled.available() else None
