"""The workspace (cutopk/cuda/workspace.py): a call's scratch in one buffer cached per (device,
stream), reused by warm calls, grown when a call needs more, never allocated during CUDA graph
capture, given back by ``cutopk.release_workspace()``; and a cache hit that plans nothing again."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from support.backends import cuda_is_standin
from support.launches import recording_launches
from support.reference import assert_same

import cutopk
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda import runner as _runner
from cutopk.cuda import workspace as _workspace

# (shape, k, keyword arguments) with scratch: radix's candidate buffer, the sort path, multiblock,
# the tiled transpose of an outer axis, outputs moved to an outer axis.
SCRATCH_CASES = [
    ((4, 100_000), 100, {"algorithm": "radix"}),
    ((3, 200), 7, {"algorithm": "sort", "sorted": "index", "index_dtype": np.int32}),
    ((2, 5000), 40, {"algorithm": "multiblock", "index_dtype": np.int32}),
    ((1, 100_000), 2000, {"algorithm": "multiblock"}),  # a sampled threshold, K large
    ((600, 50), 10, {"algorithm": "radix", "axis": 0}),
    ((2, 20_000), 100, {"algorithm": "split"}),  # candidates in the buffer, tickets beside it
]


@pytest.fixture(autouse=True)
def _fresh_workspaces():
    _workspace.release_workspace()
    yield
    _workspace.release_workspace()


@pytest.mark.parametrize(("shape", "k", "kw"), SCRATCH_CASES, ids=repr)
def test_a_warm_call_allocates_no_scratch(shape, k, kw):
    x = np.zeros(shape, np.float32)
    with recording_launches() as rec:
        cutopk.top_k(x, k, backend="sim", **kw)
        before = rec.allocations
        for _ in range(3):
            cutopk.top_k(x, k, backend="sim", **kw)
        assert rec.allocations - before == 3 * 2  # the values and indices of each call only


def test_the_workspace_is_reused_grown_and_released():
    rng = np.random.default_rng(0)
    small, large = rng.random((4, 300), np.float32), rng.random((4, 3000), np.float32)
    cutopk.top_k(small, 50, backend="sim", algorithm="sort")
    ws, _ = _workspace.current("sim", -1)
    first = ws.buffer
    assert first is not None and cutopk.workspace_info()["buffers"] == 1
    cutopk.top_k(small, 50, backend="sim", algorithm="sort")
    assert ws.buffer is first  # reused
    r = cutopk.top_k(large, 50, backend="sim", algorithm="sort")
    assert ws.buffer is not first and ws.buffer.nbytes > first.nbytes  # grown
    assert_same(r, cutopk.top_k(large, 50))
    grown = ws.buffer
    r = cutopk.top_k(small, 50, backend="sim", algorithm="sort")  # a smaller need: the same buffer
    assert ws.buffer is grown
    assert_same(r, cutopk.top_k(small, 50))
    assert cutopk.release_workspace() == grown.nbytes
    assert ws.buffer is None and cutopk.workspace_info()["bytes"] == 0
    assert cutopk.release_workspace() == 0
    r = cutopk.top_k(small, 50, backend="sim", algorithm="sort")  # allocated again
    assert ws.buffer is not None
    assert_same(r, cutopk.top_k(small, 50))


def test_release_workspace_checks_its_argument():
    with pytest.raises(
        ValueError, match=r"device: expected a CUDA device id \(an int >= 0\) or None, got -1"
    ):
        cutopk.release_workspace(-1)
    with pytest.raises(ValueError, match="device: expected"):
        cutopk.release_workspace("0")


def test_simulator_threads_never_share_a_workspace():
    x = np.random.default_rng(1).random((4, 500), np.float32)
    buffers, results = {}, {}

    def work(i):
        for _ in range(3):
            results[i] = cutopk.top_k(x, 64, backend="sim", algorithm="sort")
        buffers[i] = _workspace.current("sim", -1)[0].buffer

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(b) for b in buffers.values()}) == 3
    for r in results.values():
        assert_same(r, cutopk.top_k(x, 64))


def test_a_cache_hit_plans_and_prepares_nothing_again(monkeypatch):
    x = np.zeros((6, 3000), np.float32)
    cutopk.top_k(x, 50, backend="sim", algorithm="sort")
    planned, prepared = [], []
    plan, init = _dispatch.plan, _runner.Runner.__init__
    monkeypatch.setattr(_dispatch, "plan", lambda *a, **kw: planned.append(a) or plan(*a, **kw))
    monkeypatch.setattr(_runner.Runner, "__init__", lambda self, *a: prepared.append(a) or init(self, *a))
    for _ in range(3):
        cutopk.top_k(x, 50, backend="sim", algorithm="sort")
    assert planned == [] and prepared == []
    cutopk.top_k(x, 51, backend="sim", algorithm="sort")  # a new signature is planned
    assert len(planned) == 1 and len(prepared) == 1


# ---- the CUDA path (the CuPy stand-in without a GPU): streams and graph capture


def _values(seed, shape):
    return np.random.default_rng(seed).permutation(np.prod(shape)).reshape(shape).astype(np.float32)


def test_two_streams_never_share_a_workspace(cupy):
    host = _values(2, (4, 3000))
    x = cupy.asarray(host)
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    buffers = []
    for s in streams:
        with s:
            r = cutopk.top_k(x, 50, algorithm="sort")
            buffers.append(_workspace.current("cuda", 0)[0].buffer)
        assert_same((r.values.get(), r.indices.get()), cutopk.top_k(host, 50))
    assert buffers[0] is not None and buffers[1] is not None
    assert buffers[0].data.ptr != buffers[1].data.ptr
    assert cutopk.workspace_info()["buffers"] == 2
    with streams[0]:  # the first stream's buffer again
        cutopk.top_k(x, 50, algorithm="sort")
        assert _workspace.current("cuda", 0)[0].buffer is buffers[0]


def test_cupy_stream_capture_after_a_warm_up_allocates_nothing(cupy):
    host = _values(3, (4, 3000))
    x = cupy.asarray(host)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        cutopk.top_k(x, 50, algorithm="sort")  # the warm-up grows this stream's workspace
        allocations = cutopk.workspace_info()["allocations"]
        s.begin_capture()
        try:
            r = cutopk.top_k(x, 50, algorithm="sort")
        finally:
            graph = s.end_capture()
        assert cutopk.workspace_info()["allocations"] == allocations
        graph.launch()
    assert_same((r.values.get(), r.indices.get()), cutopk.top_k(host, 50))


def test_a_capture_that_would_grow_the_workspace_says_to_warm_up_first(cupy):
    x = cupy.asarray(_values(4, (4, 3000)))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        cutopk.top_k(x[:, :300], 50, algorithm="sort")  # warm, but for a smaller call
        s.begin_capture()
        try:
            with pytest.raises(
                RuntimeError,
                match=r"capturing a CUDA graph .* run the same call once on this stream before capturing",
            ):
                cutopk.top_k(x, 50, algorithm="sort")
        finally:
            s.end_capture()
        cutopk.top_k(x, 50, algorithm="sort")  # outside the capture it grows


def test_a_buffer_a_capture_used_outlives_a_later_growth(cupy):
    x = cupy.asarray(_values(5, (4, 3000)))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        cutopk.top_k(x[:, :300], 50, algorithm="sort")
        captured = _workspace.current("cuda", 0)[0].buffer
        s.begin_capture()
        try:
            cutopk.top_k(x[:, :300], 50, algorithm="sort")
        finally:
            s.end_capture()
        cutopk.top_k(x, 50, algorithm="sort")  # grows: the graph's buffer is kept
        ws = _workspace.current("cuda", 0)[0]
        assert ws.buffer is not captured and any(b is captured for b in ws.kept)
    held = ws.buffer.nbytes + captured.nbytes
    assert cutopk.workspace_info()["bytes"] == held
    assert cutopk.release_workspace(0) == held and ws.kept == []


def test_torch_graph_capture_without_a_warm_up_on_its_stream_is_refused(cupy, monkeypatch):
    if not cuda_is_standin():
        pytest.skip("the torch stand-in goes with the CuPy stand-in")
    torch = pytest.importorskip("torch")
    from standin import torch_cuda

    torch_cuda.install(monkeypatch)
    t = torch_cuda.to_cuda(_values(6, (4, 3000)))
    cutopk.top_k(t, 50, algorithm="sort")  # warm on the default stream, not the capture's
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="run the same call once on this stream before capturing"):
        with torch.cuda.graph(g):
            cutopk.top_k(t, 50, algorithm="sort")


# ---- the steps around the families, run on the simulator against the reference

EXACT_CASES = [
    ((2, 40_000), 10, {"algorithm": "sort"}),  # int64 indices straight out, order_merge passes
    ((2, 40_000), 10, {"algorithm": "sort", "sorted": "index", "index_dtype": np.uint64}),
    ((40, 30), 5, {"algorithm": "sort", "axis": 0, "index_dtype": np.int32}),
    ((5000, 2), 40, {"algorithm": "multiblock", "index_dtype": np.uint64, "axis": 0}),
    ((2, 5000), 40, {"algorithm": "multiblock", "index_dtype": np.uint32, "sorted": "index"}),
    ((1, 100_000), 2000, {"algorithm": "multiblock", "index_dtype": np.int32}),  # indices converted
    ((300, 7, 40), 4, {"algorithm": "radix", "axis": 0}),  # transposed in, outputs moved back
]


@pytest.mark.parametrize(("shape", "k", "kw"), EXACT_CASES, ids=repr)
def test_staged_copied_and_converted_outputs_are_exact(shape, k, kw):
    from support.reference import reference_top_k

    x = np.random.default_rng(len(shape) * k).permutation(np.prod(shape)).reshape(shape).astype(np.float32)
    x[..., ::7] = 3.0  # ties
    semantics = {name: kw[name] for name in ("axis", "sorted") if name in kw}
    expected = reference_top_k(x, k, **semantics)
    for _ in range(2):  # a cold and a warm workspace
        r = cutopk.top_k(x, k, backend="sim", **kw)
        assert r.indices.dtype == np.dtype(kw.get("index_dtype", np.int64))
        assert_same(
            r, expected, index_dtype=kw.get("index_dtype", np.int64), order=kw.get("sorted", True),
            axis=kw.get("axis", -1),
        )  # fmt: skip
