"""Issue 37's CPU-side target for latency-bound rows: with an H100's facts (132 SMs, 227 KB of
opt-in shared memory, thread-block clusters), ``cutopk.plan()`` lists one launch and at most
1.1 x (input + output bytes) of global traffic, for rows in {1, 4, 16, 64, 256}, n in {8192, 32000,
65536, 131072, 262144}, k in {1, 50, 256, 512, 1024, 2048} with k <= n / 4, float32 and float16.

The resident family (a row in one block's shared memory) covers the rows that fit on chip: n up to
about 52K float32 or 104K float16 keys; the cluster family (a thread-block cluster of 8 blocks per
row, sm_90) the longer ones, so the whole grid is covered on an H100. On sm_75/sm_80 (no clusters)
the one-launch fallback for the longer rows is not written yet: those cases are listed in
NOT_COVERED_WITHOUT_CLUSTERS, and a test checks that the list is exactly the cases that miss the
target on an A100's facts, so neither a regression nor a newly covered case goes unseen."""

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
# float32 or 74K float16 keys) take the earlier families: multiblock (several launches) for fewer
# rows than 2 per SM or K beyond 1024; radix (one launch, its small candidate buffer within the
# traffic bound) else.
NOT_COVERED_WITHOUT_CLUSTERS = {
    (rows, n, k, dtype)
    for rows, n, k, dtype in GRID
    if ((dtype == "float32" and n >= 65536) or (dtype == "float16" and n >= 131072))
    and (rows < 2 * 108 or k > 1024)
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


def _plan(rows, n, k, dtype):
    # np.empty does not touch its pages: the largest input (256 x 262144 float32) costs no memory.
    return cutopk.plan(np.empty((rows, n), dtype), k, backend="sim")


def _meets(plan, rows, n, k, dtype) -> bool:
    itemsize = np.dtype(dtype).itemsize
    moved = rows * n * itemsize + rows * k * (itemsize + 8)  # input, values, int64 indices
    launches = sum(launch.count for launch in plan.launches)
    return launches == 1 and plan.global_bytes <= TRAFFIC_LIMIT * moved


@pytest.mark.parametrize(("rows", "n", "k", "dtype"), sorted(GRID))
def test_one_launch_and_one_read(h100, rows, n, k, dtype):
    plan = _plan(rows, n, k, dtype)
    assert plan.algorithm == (
        "resident" if (rows, n, k, dtype) not in NOT_COVERED_WITHOUT_CLUSTERS else "cluster"
    ) or (plan.algorithm in ("resident", "cluster")), plan
    assert _meets(plan, rows, n, k, dtype), plan


def test_the_whole_grid_is_covered_on_an_h100(h100):
    assert len(GRID) == 300
    assert {case for case in GRID if not _meets(_plan(*case), *case)} == set()
    assert len(LONG) == 150


def test_without_clusters_the_cases_not_covered_are_exactly_those_listed(a100):
    missed = {case for case in GRID if not _meets(_plan(*case), *case)}
    assert missed == NOT_COVERED_WITHOUT_CLUSTERS
    assert len(NOT_COVERED_WITHOUT_CLUSTERS) == 125  # the sm_75/80 one-launch fallback is not written


@pytest.mark.parametrize("rows", [257, 1024])
def test_more_rows_than_the_route_takes_keep_the_earlier_families(h100, rows):
    assert _plan(rows, 8192, 512, np.float32).algorithm != "resident"


def test_dispatch_routes_latency_bound_rows_that_fit():
    choose = _dispatch.choose
    assert choose(1, 8192, 512, 4, H100) == "resident"  # was radix (H200: 64.5 us)
    assert choose(64, 8192, 2048, 4, H100) == "resident"  # was bitonic (H200: 93.1 us)
    assert choose(256, 32000, 1024, 4, H100) == "resident"  # was radix
    assert choose(16, 65536, 512, 2, H100) == "resident"  # float16: was multiblock
    assert choose(16, 65536, 512, 4, H100) == "cluster"  # float32: 8 blocks' shared memory
    assert choose(256, 262144, 2048, 4, H100) == "cluster"
    assert choose(16, 65536, 512, 4, A100) == "multiblock"  # no clusters before sm_90
    assert choose(4, 4096, 512, 4, H100) != "resident"  # shorter rows: unchanged
    assert choose(4, 8192, 4096, 4, H100) != "resident"  # K beyond 2048
    assert choose(4, 8192, 512, 4, _dispatch.Device()) != "resident"  # 48 KB: does not fit
