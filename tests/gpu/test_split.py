"""The split family (kernels/split.cu: several blocks per row, each selecting its slice's K best on
chip; the row's last block to arrive merges their candidates and orders the K, one launch; the
fallback for long rows on GPUs without clusters) on the simulator (and a GPU when present), bit for
bit against the reference: every dtype, ties across slices, NaN rules, -0.0, ``lengths=``,
rows no longer than K, strided rows, blocks started in shuffled orders, the tickets left zeroed.

The slice target is lowered and the candidates' traffic left unbounded (``small_slices``), so that
rows of a few thousand elements take several blocks on the simulator: each block is 512 simulated
threads."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, require, to_backend
from support.family_checks import check_lengths, signed_zeros_and_nans
from support.inputs import DTYPES, dtype_of, make_values
from support.reference import assert_same
from test_kernels import run_case

import cutopk
from cutopk._core import call as _call
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda import launcher as _gpu
from cutopk.cuda import workspace as _workspace
from cutopk.cuda.families import split as _split

GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]
SLICE = 1024  # elements per block in these tests: a 6000-long row takes 6 blocks


@pytest.fixture(autouse=True)
def small_slices(monkeypatch):
    monkeypatch.setattr(_split, "TARGET_SLICE", SLICE)
    monkeypatch.setattr(_split, "CANDIDATE_SHARE", 100.0)  # the candidates' traffic: no bound here
    _call.CACHE.clear()  # plans made with the family's own target must not serve these
    yield
    _call.CACHE.clear()


def forced(backend, x, k, **kw):
    plan = cutopk.plan(to_backend(x, backend), k, backend=backend, algorithm="split", **kw)
    assert plan.algorithm == "split" and len(plan.launches) == 1, plan
    blocks = plan.params["blocks"]  # about n / SLICE: fewer where K's candidates fill a block
    assert 2 <= blocks <= -(-x.shape[-1] // SLICE) and plan.params["slice"] * blocks >= x.shape[-1]
    assert plan.launches[0].grid == (x.size // x.shape[-1] * blocks,), plan
    return plan


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype(backend, dtype):
    require(backend)
    rng = np.random.default_rng(41)
    x = make_values(rng, dtype_of(dtype), (2, 6000), "nan" if "float" in dtype else "few_distinct")
    forced(backend, x, 700)
    run_case(backend, x, 700, algorithm="split", nan="largest")
    large = 2048 if x.itemsize <= 4 else 1000  # 64-bit keys: 48 KB holds fewer candidates
    forced(backend, x, large)
    run_case(backend, x, large, algorithm="split", mode="smallest", sorted="index", index_dtype=np.int32)
    run_case(backend, x, 5, algorithm="split", sorted=False)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_ties_across_slices(backend):
    require(backend)
    equal = np.full((2, 6000), 3.0, np.float32)  # every block's candidates tie: block order decides
    for k in (1, 700, 2048):
        for order in (True, "index"):
            run_case(backend, equal, k, algorithm="split", sorted=order)
    rng = np.random.default_rng(42)
    x = np.where(rng.random((2, 6000)) < 0.03, rng.random((2, 6000)) + 2, 1.5).astype(np.float32)
    for k in (1, 150, 181, 1000):  # the K-th place inside the run of 1.5s, spread over the blocks
        run_case(backend, x, k, algorithm="split")
        run_case(backend, x, k, algorithm="split", sorted="index", mode="smallest")
    y = (np.int64(2**62) + np.arange(6000, dtype=np.int64) % 37).reshape(1, -1)  # every digit refined
    run_case(backend, y, 700, algorithm="split")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_nan_rules_and_signed_zeros(backend):
    require(backend)
    x = signed_zeros_and_nans(np.random.default_rng(43), 2, 5000)
    for mode in ("largest", "smallest"):
        for nan in ("last", "largest"):
            run_case(backend, x, 900, mode=mode, nan=nan, algorithm="split")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "uint64"])
def test_lengths_read_by_the_kernel(backend, dtype):
    require(backend)
    rng = np.random.default_rng(44)
    x = make_values(rng, dtype_of(dtype), (6, 6000), "nan" if "float" in dtype else "few_distinct")
    lengths = np.array([6000, 0, 1, 500, 1025, 4321])  # slices of 1024: empty ones, one cut short
    k = 500
    plan = forced(backend, x, k, lengths=to_backend(lengths, backend))
    assert plan.batch.startswith("lengths read by the kernels"), plan
    check_lengths(backend, x, k, lengths, algorithm="split")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_rows_no_longer_than_k_and_strided_rows(backend):
    require(backend)
    rng = np.random.default_rng(45)
    x = make_values(rng, np.int16, (2, 1500), "few_distinct")
    run_case(backend, x, 1500, algorithm="split")  # every element wins, from both blocks
    run_case(backend, x[:, ::-3], 200, algorithm="split", sorted="index")  # a negative column stride
    run_case(backend, np.ascontiguousarray(x.T), 300, axis=0, algorithm="split")  # rows along axis 0


@pytest.mark.parametrize("block_seed", [1, 2, 3])
def test_any_block_may_arrive_last(monkeypatch, block_seed):
    # Blocks started in shuffled orders: whichever block of a row arrives last merges.
    monkeypatch.setenv("CUTOPK_SIM_BLOCK_SEED", str(block_seed))
    with mock.patch.dict(_gpu._MODULES, clear=True):
        _call.CACHE.clear()
        rng = np.random.default_rng(block_seed)
        x = np.where(rng.random((3, 5000)) < 0.05, 2.0, 1.0).astype(np.float32)
        x[2] = 1.0
        for k in (1, 300, 1024):
            run_case("sim", x, k, algorithm="split")
            run_case("sim", x, k, algorithm="split", sorted="index", mode="smallest")
        (mod,) = _gpu._MODULES.values()
        assert [m.block_seed for m in mod.raw.modules.values()] == [block_seed]
        _call.CACHE.clear()


def test_tickets_are_left_zeroed_for_the_next_call():
    # No memset between calls: each launch's last block resets its row's ticket.
    rng = np.random.default_rng(46)
    x = rng.standard_normal((3, 5000)).astype(np.float32)
    run_case("sim", x, 100, algorithm="split")
    ws, _ = _workspace.current("sim", -1)
    assert ws.tickets is not None and ws.tickets.size >= 3 and not ws.tickets.any()
    before = ws.tickets
    run_case("sim", x[::-1].copy(), 100, algorithm="split", mode="smallest")  # the same tickets again
    assert ws.tickets is before and not ws.tickets.any()
    ws.tickets[:] = 1  # a ticket not reset would hand the merge to the wrong block: caught
    got = cutopk.top_k(x, 100, backend="sim", algorithm="split")
    assert not np.array_equal(got.indices, cutopk.top_k(x, 100, backend="numpy").indices)
    ws.tickets[:] = 0


def test_blocks_and_limits():
    a100 = _dispatch.Device(sm_count=108, shared_bytes=_dispatch.shared_limit(48 * 1024, 163 * 1024))
    t4 = _dispatch.Device(sm_count=40, shared_bytes=_dispatch.shared_limit(48 * 1024, 64 * 1024))
    for device in (a100, t4):
        for n in (8192, 65536, 262144):
            for k in (1, 50, 1024, 2048):
                blocks = _split.blocks_of(n, k, 4, device)
                if blocks is None:
                    continue
                geo = _split.geometry(2, n, k, 4, device)
                assert geo.grid == 2 * blocks and blocks * geo.params["slice"] >= n
                assert geo.shared_bytes + _split.STATIC_BYTES <= device.shared_bytes
    assert _split.blocks_of(262144, 2048, 4, a100) is not None  # the longest rows, K = 2048
    reason = _dispatch.why_not("split", 262144, 2048, 4, t4)  # 60 KB cannot merge 2048 x blocks
    assert reason is not None and "candidates" in reason
    assert "at most k=2048" in _dispatch.why_not("split", 10**5, 4096, 4, a100)


def test_a_captured_graph_replays_with_the_tickets_it_left_zeroed(cupy):
    host = np.random.default_rng(47).standard_normal((3, 5000)).astype(np.float32)
    x = cupy.asarray(host)
    want = cutopk.top_k(host, 100, backend="numpy")
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        cutopk.top_k(x, 100, algorithm="split")  # the warm-up: the scratch buffer and the tickets
        s.begin_capture()
        try:
            r = cutopk.top_k(x, 100, algorithm="split")
        finally:
            graph = s.end_capture()
        for _ in range(3):  # no memset between replays: each one's last blocks reset the tickets
            graph.launch()
            s.synchronize()
            assert_same((r.values.get(), r.indices.get()), want)
        assert not _workspace.current("cuda", 0)[0].tickets.get().any()


def test_a_capture_that_would_grow_the_tickets_says_to_warm_up_first(cupy):
    x = cupy.asarray(np.random.default_rng(48).standard_normal((200, 1500)).astype(np.float32))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        cutopk.top_k(x, 50, algorithm="sort")  # a scratch buffer large enough, no tickets yet
        cutopk.top_k(x[:2], 50, algorithm="split")  # the fewest tickets: fewer than 200 rows
        s.begin_capture()
        try:
            with pytest.raises(
                RuntimeError, match=r"arrival tickets .* capturing a CUDA graph .* run the same"
            ):
                cutopk.top_k(x, 50, algorithm="split")
        finally:
            s.end_capture()
