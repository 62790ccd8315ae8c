"""The cluster family (kernels/cluster.cu: a thread-block cluster of 2, 4 or 8 blocks per row,
each holding a slice in shared memory, the histogram reduced by owner and the winners and
candidates gathered into block 0 through distributed shared memory) on the simulator's clusters
(and a GPU with them when present), bit for bit against the reference, values and indices: every
dtype, each way the select ends (candidates that hold just the winners; ties at the K-th place
taken by block 0 from the candidates, split across the slices; a bin that overflows the
candidates, resolved over the whole cluster), every cluster size, NaN rules, -0.0, ``lengths=``
(slices past a row's length are empty), CSR segments, rows no longer than K, strided and
misaligned rows, all three orders. Rows are a few thousand elements on an H100's facts: 8 blocks
of 1024 threads per row on the simulator, the same code path as the long rows' (only the slices
are shorter)."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, to_backend, to_host
from support.backends import require_clusters as require
from support.family_checks import LENGTHS_ORDERS, check_lengths, signed_zeros_and_nans
from support.inputs import DTYPES, dtype_of, make_values
from support.reference import assert_same_padded, reference_segments
from test_kernels import run_case
from test_kernels_rows import H100_SHARED, use_device

import cutopk
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda.families import cluster as _cluster

GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]
ALGO = {"algorithm": "cluster"}
ORDERS = (True, "index", False)


@pytest.fixture
def h100(monkeypatch):
    """Plans and launches on an H100's facts (132 SMs, 223 KB of shared memory a block, clusters)."""

    def use(backend, **facts):
        return use_device(monkeypatch, backend, H100_SHARED, clusters=True, **facts)

    return use


def forced(backend, x, k, blocks=8, **kw):
    plan = cutopk.plan(to_backend(x, backend), k, backend=backend, **ALGO, **kw)
    assert plan.algorithm == "cluster" and len(plan.launches) == 1, plan
    launch = plan.launches[0]
    assert launch.kernel.endswith(f", {blocks}>") and launch.grid == (x.size // x.shape[-1] * blocks,), plan
    return plan


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype(backend, dtype, h100):
    require(backend)
    h100(backend)
    rng = np.random.default_rng(31)
    x = make_values(rng, dtype_of(dtype), (2, 6000), "nan" if "float" in dtype else "few_distinct")
    forced(backend, x, 700)
    run_case(backend, x, 700, nan="largest", **ALGO)
    run_case(backend, x, 2048, mode="smallest", sorted="index", index_dtype=np.int32, **ALGO)
    run_case(backend, make_values(rng, dtype_of(dtype), (1, 6000), "uniform"), 5, sorted=False, **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_ties_split_across_the_slices_through_the_candidates(backend, h100):
    # Values 0..599 about ten times each: bin t of the first digit holds a few dozen keys (within
    # the candidates), the K-th key is shared by keys of several slices, block 0 takes the ties of
    # lowest index from the candidates alone.
    require(backend)
    h100(backend)
    rng = np.random.default_rng(32)
    x = rng.integers(0, 600, (2, 6000)).astype(np.float32)
    for k in (1, 95, 100, 1000):
        for order in ORDERS:
            run_case(backend, x, k, sorted=order, **ALGO)
    # One run of ties astride the slices' boundaries (slices of 768): positions 700-899 and
    # 1500-1599 hold 5.0, above every other value but 100 of 7.0 at the row's end; K = 250 takes
    # the 7.0s and the 150 ties of lowest index, so the cut falls inside slice 1.
    y = rng.random((1, 6000)).astype(np.float32)
    y[0, 700:900] = 5.0
    y[0, 1500:1600] = 5.0
    y[0, -100:] = 7.0
    for order in ORDERS:
        run_case(backend, y, 250, sorted=order, **ALGO)
        run_case(backend, -y, 250, mode="smallest", sorted=order, **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_bins_that_overflow_the_candidates(backend, h100):
    # A bin of the first digit with more keys than block 0's candidates: the exact select over the
    # whole cluster from the key's top bit, the winners placed in index order.
    require(backend)
    h100(backend)
    rng = np.random.default_rng(33)
    equal = np.full((2, 6000), 3.0, np.float32)  # every slice's members ranked after the earlier slices'
    for k in (1, 700, 2048):
        for order in ORDERS:
            run_case(backend, equal, k, sorted=order, **ALGO)
    x = np.where(rng.random((2, 6000)) < 0.03, rng.random((2, 6000)) + 2, 1.5).astype(np.float32)
    for k in (1, 150, 181, 1000):
        run_case(backend, x, k, **ALGO)
        run_case(backend, x, k, sorted="index", mode="smallest", **ALGO)
    near = (1.25 + rng.random((1, 6000)) * 1e-4).astype(np.float32)  # distinct keys, one bin: no ties
    run_case(backend, near, 700, **ALGO)
    run_case(backend, near, 700, mode="smallest", sorted=False, **ALGO)
    z = (np.int64(2**62) + np.arange(6000, dtype=np.int64) % 37).reshape(1, -1)  # every digit refined
    run_case(backend, z, 700, **ALGO)
    run_case(backend, equal.astype(np.float16), 2048, mode="smallest", sorted="index", **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize(("sms", "rows", "blocks"), [(8, 1, 8), (8, 2, 4), (8, 4, 2)])
def test_every_cluster_size(backend, h100, sms, rows, blocks):
    # On 8 SMs one cluster of 8 fits at once, two of 4, four of 2: the rows choose the size.
    require(backend)
    h100(backend, sm_count=sms)
    rng = np.random.default_rng(34)
    x = rng.standard_normal((rows, 6000)).astype(np.float32)
    x[:, ::5] = np.round(x[:, ::5])  # ties at the K-th place for K = 1000
    forced(backend, x, 300, blocks=blocks)
    for k, order in ((300, True), (1000, "index"), (2048, False)):
        run_case(backend, x, k, sorted=order, **ALGO)
    run_case(backend, np.full((rows, 6000), 1.0, np.float32), 500, **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_nan_rules_and_signed_zeros(backend, h100):
    require(backend)
    h100(backend)
    x = signed_zeros_and_nans(np.random.default_rng(35), 2, 5000)  # row 1: zeros only, ties by index
    for mode in ("largest", "smallest"):
        for nan in ("last", "largest"):
            run_case(backend, x, 900, mode=mode, nan=nan, **ALGO)
    run_case(backend, x.astype(np.float16), 900, nan="largest", sorted="index", **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "uint64"])
def test_lengths_read_by_the_kernel(backend, dtype, h100):
    require(backend)
    h100(backend)
    rng = np.random.default_rng(36)
    x = make_values(rng, dtype_of(dtype), (6, 6000), "nan" if "float" in dtype else "few_distinct")
    x[5, :4321] = x[5, 0]  # a row cut short whose bin overflows the candidates
    lengths = np.array([6000, 0, 1, 500, 751, 4321])  # slices of 768: some empty, one cut short
    k = 500
    plan = forced(backend, x, k, lengths=to_backend(lengths, backend))
    assert plan.batch.startswith("lengths read by the kernels"), plan
    check_lengths(backend, x, k, lengths, (*LENGTHS_ORDERS, (False, "largest", "largest")), **ALGO)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_csr_segments_rows_no_longer_than_k_and_strided_rows(backend, h100):
    require(backend)
    h100(backend)
    rng = np.random.default_rng(37)
    data = rng.standard_normal(14_000).astype(np.float32)
    data[::9] = np.nan
    offsets = np.array([0, 3, 6003, 6003, 8501, 14_000])  # unaligned starts, one empty segment
    for order, nan in ((True, "last"), ("index", "largest")):
        got = cutopk.segmented_top_k(
            to_backend(data, backend), offsets, 150, backend=backend, sorted=order, nan=nan, **ALGO
        )
        want = reference_segments(data, offsets, 150, sorted=order, nan=nan)
        assert_same_padded(tuple(to_host(a) for a in got), want, order=order)
    x = make_values(rng, np.int16, (2, 1500), "few_distinct")
    run_case(backend, x, 1500, **ALGO)  # every element wins, from all 8 slices
    run_case(backend, x[:, ::-3], 200, sorted="index", **ALGO)  # a negative column stride: plain loads
    run_case(backend, x[:, 1:], 200, index_dtype=np.int32, **ALGO)  # 2 bytes off a 16-byte boundary
    h = rng.standard_normal((1, 6003)).astype(np.float16)  # a tail of 3 elements past the vectors
    run_case(backend, h, 333, **ALGO)


def test_the_size_by_rows_and_the_limits():
    h100 = _dispatch.Device(shared_bytes=H100_SHARED, clusters=True)
    # Next to the histogram, the winners and at least 1024 candidates: 8 slices of about 46K
    # float32 keys at K = 2048 (the rows reach 262144).
    assert 360_000 < _cluster.max_n(2048, 4, h100) < 390_000
    assert _cluster.max_n(1024, 2, h100) > 2 * 262144
    assert _cluster.slice_of(262144, 8) == 32768 and _cluster.slice_of(1000, 8) == 128
    assert _cluster.slice_of(1000, 2) == 512
    # One wave of clusters: 8 blocks a row up to 16 rows, then 4 (33 fit) where the slices fit,
    # then 2 (past the 32 rows that auto gives streaming); the longest float32 rows keep 8 (a
    # quarter of the row passes a block's memory).
    assert [_cluster.size(r, 131072, 50, 4, h100) for r in (1, 16, 17, 31)] == [8, 8, 4, 4]
    assert [_cluster.size(r, 262144, 50, 4, h100) for r in (1, 17, 31)] == [8, 8, 8]
    assert [_cluster.size(r, 262144, 50, 2, h100) for r in (16, 17, 31)] == [8, 4, 4]
    # (34 rows: 3 waves of 8 beat one wave of 2 on 68 of the 132 SMs; 66 rows fill them.)
    assert [_cluster.size(r, 65536, 2048, 2, h100) for r in (31, 34, 66, 67)] == [4, 8, 2, 8]
    reported = _dispatch.Device(shared_bytes=H100_SHARED, clusters=True, active_clusters=((8, 14),))
    assert _cluster.size(15, 131072, 50, 4, reported) == 4  # the device's count, not the estimate
    # Candidates: a quarter of the row up to 16384, fewer where the slice leaves less room.
    assert _cluster.cap(6000, 700, 4, 8, h100) == 1504
    assert _cluster.cap(131072, 2048, 2, 8, h100) == 16384
    assert 7000 < _cluster.cap(262144, 2048, 4, 8, h100) < 8192
    p = _dispatch.plan(4, 262144, 2048, 4, h100, copy=False, algorithm="cluster")
    assert (p.kernel, p.block, p.grid, p.params["cluster"]) == ("cluster_topk", 1024, 32, 8)
    assert p.shared_bytes + _cluster.STATIC_BYTES <= h100.shared_bytes
    assert _dispatch.plan(1, 262144, 50, 1, h100, copy=False, algorithm="cluster").block == 512
    assert _dispatch.plan(1, 262144, 50, 2, h100, copy=False, algorithm="cluster").block == 1024
    reason = _dispatch.why_not("cluster", 10**6, 10, 4, h100)
    assert reason is not None and "8 blocks" in reason
    assert "thread-block clusters" in _dispatch.why_not("cluster", 9000, 10, 4, _dispatch.Device())


def test_auto_sends_few_long_rows_to_cluster_and_many_to_streaming():
    h100 = _dispatch.Device(shared_bytes=H100_SHARED, clusters=True)
    for rows in (1, 8, 31):
        for n in (65536, 131072, 262144):
            assert _dispatch.choose(rows, n, 1024, 4, h100) == "cluster", (rows, n)
    assert _dispatch.choose(32, 131072, 1024, 4, h100) == "streaming"
    assert _dispatch.choose(8, 131072, 1024, 4, _dispatch.Device(shared_bytes=H100_SHARED)) == "split"
