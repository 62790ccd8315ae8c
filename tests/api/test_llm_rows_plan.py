"""Issue 37's CPU-side target for latency-bound rows: with an H100's facts (132 SMs, 227 KB of
opt-in shared memory, thread-block clusters), ``cutopk.plan()`` lists one launch and at most
1.1 x (input + output bytes) of global traffic, for rows in {1, 4, 16, 64, 256}, n in {8192, 32000,
65536, 131072, 262144}, k in {1, 50, 256, 512, 1024, 2048} with k <= n / 4, float32 and float16.

The block_row family (a row in one 1024-thread block's shared memory, issue 51) covers the rows
that fit it (about 42.6K float32 or 90K float16 keys on an H100), resident the rows up to its own
52K / 104K, except the 32000-wide rows with K <= 1024, which radix serves in one launch too
(resident measured slower there on an H100); the streaming family (a block per row, the row read
once through a ring of copies, issue 52) 32 rows or more of 65536 and longer, and the cluster
family (a thread-block cluster of 8 blocks per row, sm_90) the fewer longer ones, so the whole grid
is covered on an H100. On sm_75/sm_80 (no clusters) the split family (several blocks per row, the last to arrive
merging their candidates) takes the longer rows in one launch where the earlier families took
several, up to 16 rows: on an H100 (benchmarks/results/2026-11-26-nvidia-h100-80gb-hbm3) split
won on 1 and 8 rows and lost on 128 and 256 to what multiblock had measured on an H200, so more
rows keep multiblock's launches. The candidates split passes through global memory put the cases
listed in OVER_TRAFFIC_WITHOUT_CLUSTERS (float32 rows, K = 2048) just above 1.1 x; a test checks
that the list is exactly the cases that miss the target, so neither a regression nor a newly
covered case goes unseen."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import cutopk
from cutopk._core import call as _call
from cutopk.cuda import device as _device
from cutopk.cuda import dispatch as _dispatch

H100 = _dispatch.Device(
    sm_count=132, shared_bytes=_dispatch.shared_limit(48 * 1024, 227 * 1024), clusters=True
)
A100 = _dispatch.Device(
    sm_count=108, shared_bytes=_dispatch.shared_limit(48 * 1024, 163 * 1024), clusters=False
)
T4 = _dispatch.Device(sm_count=40, shared_bytes=_dispatch.shared_limit(48 * 1024, 64 * 1024), clusters=False)
ROWS = (1, 4, 16, 64, 256)
NS = (8192, 32000, 65536, 131072, 262144)
KS = (1, 50, 256, 512, 1024, 2048)
DTYPES = (np.float32, np.float16)
GRID = [
    (rows, n, k, np.dtype(dtype).name)
    for rows, n, k, dtype in itertools.product(ROWS, NS, KS, DTYPES)
    if k <= n // 4
]
# Without clusters, rows too long for one block's shared memory (an A100's 159 KB: about 37K
# float32 or 74K float16 keys) take split (one launch) where the earlier families took several
# (multiblock: fewer rows than 2 per SM, or K beyond 1024), radix (one launch already) else.
# split's candidates (blocks x K pairs through global memory) pass 1.1 x for the largest K: the
# fewest blocks whose slices fit shared memory still publish 8 x 2048 pairs on a float32 row.
LONG_WITHOUT_CLUSTERS = {
    (rows, n, k, dtype)
    for rows, n, k, dtype in GRID
    if (dtype == "float32" and n >= 65536) or (dtype == "float16" and n >= 131072)
}
# Measured on an H100 (benchmarks/results/2026-11-26-nvidia-h100-80gb-hbm3): split wins on few rows
# only, so it takes at most 16; resident loses to radix on 32000-wide rows, which go back to radix
# (one launch too) wherever its K fits.
SPLIT_WITHOUT_CLUSTERS = {
    case
    for case in LONG_WITHOUT_CLUSTERS
    if case[0] <= _dispatch.SPLIT_MAX_ROWS and (case[0] < 2 * 108 or case[2] > 1024)
}
RADIX_ROWS = {(rows, n, k, dtype) for rows, n, k, dtype in GRID if n == 32000 and k <= 1024}
# Many long rows: a block each, the row read once (streaming), on every device whose shared memory
# holds its ring and candidates (an H100's and an A100's, not a T4's).
STREAMING_ROWS = {
    (rows, n, k, dtype)
    for rows, n, k, dtype in GRID
    if rows >= _dispatch.STREAMING_MIN_ROWS and n >= _dispatch.STREAMING_MIN_N
}
OVER_TRAFFIC_WITHOUT_CLUSTERS = {
    (rows, n, k, dtype) for rows, n, k, dtype in SPLIT_WITHOUT_CLUSTERS if k == 2048 and dtype == "float32"
}
LONG = {(rows, n, k, dtype) for rows, n, k, dtype in GRID if n * np.dtype(dtype).itemsize > 200_000}
TRAFFIC_LIMIT = 1.1


def _use(monkeypatch, device):
    monkeypatch.setattr(_device, "device_facts", lambda target, index: device)
    _call.CACHE.clear()  # plans made for another device must not serve these


@pytest.fixture
def h100(monkeypatch):
    _use(monkeypatch, H100)
    yield
    _call.CACHE.clear()


@pytest.fixture
def a100(monkeypatch):
    _use(monkeypatch, A100)
    yield
    _call.CACHE.clear()


@pytest.fixture
def t4(monkeypatch):
    _use(monkeypatch, T4)
    yield
    _call.CACHE.clear()


def _plan(rows, n, k, dtype):
    # np.empty does not touch its pages: the largest input (256 x 262144 float32) costs no memory.
    return cutopk.plan(np.empty((rows, n), dtype), k, backend="sim")


def _meets(plan, rows, n, k, dtype) -> bool:
    moved = _moved(rows, n, k, dtype)  # input, values, int64 indices
    launches = sum(launch.count for launch in plan.launches)
    return launches == 1 and plan.global_bytes <= TRAFFIC_LIMIT * moved


@pytest.mark.parametrize(("rows", "n", "k", "dtype"), sorted(GRID))
def test_one_launch_and_one_read(h100, rows, n, k, dtype):
    plan = _plan(rows, n, k, dtype)
    case = (rows, n, k, dtype)
    key_bytes = np.dtype(dtype).itemsize
    if case in STREAMING_ROWS:
        expected = "streaming"
    elif case in RADIX_ROWS:
        expected = "radix"
    elif _dispatch.why_not("block_row", n, k, key_bytes, H100) is None:
        expected = "block_row"
    elif _dispatch.why_not("resident", n, k, key_bytes, H100) is None:
        expected = "resident"
    else:
        expected = "cluster"
    assert plan.algorithm == expected, plan
    assert _meets(plan, rows, n, k, dtype), plan


def test_the_whole_grid_is_covered_on_an_h100(h100):
    assert len(GRID) == 300
    assert {case for case in GRID if not _meets(_plan(*case), *case)} == set()
    assert len(LONG) == 150


def test_without_clusters_split_takes_few_rows_and_streaming_many(a100):
    plans = {case: _plan(*case) for case in GRID}
    assert all(plan.launch_count == 1 for plan in plans.values())  # no multiblock left on the grid
    assert {case for case, plan in plans.items() if plan.algorithm == "split"} == SPLIT_WITHOUT_CLUSTERS
    assert len(SPLIT_WITHOUT_CLUSTERS) == 90  # the 1, 4 and 16 rows of the cases multiblock took
    assert {case for case, plan in plans.items() if plan.algorithm == "streaming"} == STREAMING_ROWS
    missed = {case for case, plan in plans.items() if not _meets(plan, *case)}
    assert missed == OVER_TRAFFIC_WITHOUT_CLUSTERS
    assert len(OVER_TRAFFIC_WITHOUT_CLUSTERS) == 9
    worst = max(plans[case].global_bytes / _moved(*case) for case in plans)
    assert worst < 1.125  # float32, K = 2048: 8 slices of 32768, each publishing 2048 pairs


def test_on_a_t4_split_takes_one_launch_where_its_candidates_fit(t4):
    # sm_75's 64 KB (60 KB planned) hold a 2048-candidate merge for few blocks only: the longest
    # rows with K >= 1024 (float32) keep multiblock's launches.
    plans = {case: _plan(*case) for case in GRID}
    split = {case for case, plan in plans.items() if plan.algorithm == "split"}
    assert all(plans[case].launch_count == 1 for case in split) and len(split) == 93
    several = {case for case, plan in plans.items() if plan.launch_count != 1}
    unfit = {
        (rows, n, k, dtype)
        for rows, n, k, dtype in GRID
        if rows > _dispatch.SPLIT_MAX_ROWS or _dispatch.why_not("split", n, k, np.dtype(dtype).itemsize, T4)
    }
    assert several and several <= unfit
    assert {plans[case].algorithm for case in several} == {"multiblock"}


def _moved(rows, n, k, dtype) -> int:
    itemsize = np.dtype(dtype).itemsize
    return rows * n * itemsize + rows * k * (itemsize + 8)


@pytest.mark.parametrize("rows", [257, 1024])
def test_more_rows_than_the_route_takes_keep_the_earlier_families(h100, rows):
    assert _plan(rows, 8192, 512, np.float32).algorithm not in ("resident", "block_row")


def test_dispatch_routes_latency_bound_rows_that_fit():
    choose = _dispatch.choose
    assert choose(1, 8192, 512, 4, H100) == "block_row"  # was radix (H200: 64.5 us), then resident
    assert choose(64, 8192, 2048, 4, H100) == "block_row"  # was bitonic (H200: 93.1 us), then resident
    assert choose(256, 32000, 1024, 4, H100) == "radix"  # resident lost to it (H100: 77-94 us at 32000)
    assert choose(256, 32000, 2048, 4, H100) == "block_row"  # K beyond radix's
    assert choose(16, 16384, 512, 4, H100) == "block_row"  # the crossover, unmeasured, kept on chip
    assert choose(16, 46000, 2048, 4, H100) == "resident"  # past block_row's shared memory, in resident's
    assert choose(16, 65536, 512, 2, H100) == "block_row"  # float16: was multiblock, then resident
    assert choose(16, 65536, 512, 4, H100) == "cluster"  # float32: 8 blocks' shared memory
    assert choose(16, 262144, 2048, 4, H100) == "cluster"
    assert choose(256, 262144, 2048, 4, H100) == "streaming"  # many long rows: a block each
    assert choose(16, 65536, 512, 4, A100) == "split"  # no clusters before sm_90: was multiblock
    assert choose(256, 131072, 512, 4, A100) == "streaming"  # was radix
    t4 = _dispatch.Device(sm_count=40, shared_bytes=_dispatch.shared_limit(48 * 1024, 64 * 1024))
    assert choose(1, 131072, 512, 4, t4) == "split"
    assert choose(1, 262144, 2048, 4, t4) == "multiblock"  # 60 KB cannot merge the candidates
    assert choose(4, 4096, 512, 4, H100) not in ("resident", "block_row")  # shorter rows: unchanged
    assert choose(4, 8192, 4096, 4, H100) not in ("resident", "block_row")  # K beyond 2048
    assert choose(4, 8192, 512, 4, _dispatch.Device()) not in ("resident", "block_row")  # 48 KB: no fit
