"""GPU calls that never wait for the host (docs/SPEC.md, "Streams"): after the first call of a
signature, ``top_k`` (with and without ``lengths=``, with ``out=``), ``segmented_top_k`` and
``merge_top_k``, on CuPy arrays and torch CUDA tensors, make no device-to-host read and no
synchronisation, and each can be captured in a CUDA graph whose replay recomputes from the
inputs' current contents.

Run on the CuPy stand-in (tests/standin/cupy), which counts every read (``get``, ``asnumpy``,
``item``, ``tolist``, a device scalar made a bool/int/float/index; torch's ``cpu``, ``item``...)
and every synchronisation (stream, device, event) in ``_state.HOST_WAITS``, and refuses them
while a stream captures, as CUDA does. On a real GPU the counts cannot be observed: skipped.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import cuda_is_standin, require
from support.reference import assert_same, assert_same_padded, reference_with_lengths

import cutopk

pytestmark = pytest.mark.gpu

N, K = 3000, 20
LENGTHS = np.array([0, 1, K - 1, K, 2999, 3000, 700, 5])
OFFSETS = np.array([0, 10, 10, 300, 2999, 3000])


@pytest.fixture
def cupy():
    require("cuda")
    if not cuda_is_standin():
        pytest.skip("counting the host's waits needs the CuPy stand-in (tests/standin/cupy)")
    import cupy

    return cupy


@pytest.fixture
def torch_cuda(cupy, monkeypatch):
    torch = pytest.importorskip("torch")
    from standin import torch_cuda

    torch_cuda.install(monkeypatch)
    return torch, torch_cuda


def _values(seed, shape, dtype=np.float32):
    return np.random.default_rng(seed).permutation(np.prod(shape)).reshape(shape).astype(dtype)


def _waits(call):
    """``(reads, syncs, log)`` of the host waits one call makes (after a first call)."""
    from cupy import _state

    call()  # the first call of the signature: compiles and plans, may grow the workspace
    with _state.WaitCounter() as seen:
        call()
    return seen.reads, seen.syncs, seen.log


# ---- the stand-in counts what a GPU makes the host wait for


def test_the_standin_counts_reads_and_syncs_and_refuses_them_while_capturing(cupy):
    from cupy import _state

    a = cupy.asarray(np.array([3, 1, 2]))
    one = a[:1].reshape(())
    with _state.WaitCounter() as seen:
        a.get(), cupy.asnumpy(a), a.tolist(), one.item(), bool(one), int(one), float(one)
        [0, 1, 2, 3][one]  # operator.index
        cupy.cuda.get_current_stream().synchronize()
        cupy.cuda.Device().synchronize()
        cupy.cuda.Event().synchronize()
        cupy.cuda.runtime.deviceSynchronize()
    assert (seen.reads, seen.syncs) == (8, 4), seen.log
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        try:
            for wait in (a.get, one.item, lambda: bool(one), s.synchronize, cupy.cuda.Event().synchronize):
                with pytest.raises((RuntimeError, _state.CUDARuntimeError), match="capturing"):
                    wait()
        finally:
            s.end_capture()


def test_the_torch_standin_counts_its_reads(torch_cuda):
    from cupy import _state

    torch, tc = torch_cuda
    t = tc.to_cuda(np.array([4.0, 5.0]))
    with _state.WaitCounter() as seen:
        t.cpu(), t[0].item(), t.tolist(), bool(t[0]), float(t[1]), int(t[0])
        torch.cuda.synchronize()
    assert (seen.reads, seen.syncs) == (6, 1), seen.log


# ---- no read, no synchronisation per call, on every entry point


def _cupy_calls(cupy):
    """(name, call) of each entry point on CuPy arrays, each call returning its TopK."""
    x = cupy.asarray(_values(1, (8, N)))
    lengths = cupy.asarray(LENGTHS)
    data = cupy.asarray(_values(2, (N,)))
    offsets = cupy.asarray(OFFSETS)
    out = (cupy.empty((8, K), np.float32), cupy.empty((8, K), np.int64))
    parts = [cutopk.top_k(x[:, j : j + 1000], K) for j in range(0, N, 1000)]
    parts = [(v, i + j * 1000) for j, (v, i) in enumerate(parts)]
    return {
        "top_k": lambda: cutopk.top_k(x, K),
        "top_k axis=0": lambda: cutopk.top_k(x, 3, axis=0),
        "top_k out=": lambda: cutopk.top_k(x, K, out=out),
        "top_k lengths= (device)": lambda: cutopk.top_k(x, K, lengths=lengths),
        "top_k lengths= (host)": lambda: cutopk.top_k(x, K, lengths=LENGTHS),
        "top_k lengths= out=": lambda: cutopk.top_k(x, K, lengths=lengths, out=out),
        "segmented (device offsets)": lambda: cutopk.segmented_top_k(data, offsets, K),
        "segmented (device offsets, max_length)": lambda: cutopk.segmented_top_k(
            data, offsets, K, max_length=3000
        ),
        "segmented (host offsets)": lambda: cutopk.segmented_top_k(data, OFFSETS, K),
        "merge_top_k": lambda: cutopk.merge_top_k(parts, K),
    }


CUPY_CASES = [
    "top_k", "top_k axis=0", "top_k out=", "top_k lengths= (device)", "top_k lengths= (host)",
    "top_k lengths= out=", "segmented (device offsets)", "segmented (device offsets, max_length)",
    "segmented (host offsets)", "merge_top_k",
]  # fmt: skip


@pytest.mark.parametrize("case", CUPY_CASES)
def test_no_host_wait_per_call_on_cupy_arrays(cupy, case):
    reads, syncs, log = _waits(_cupy_calls(cupy)[case])
    assert (reads, syncs) == (0, 0), log


@pytest.mark.parametrize(
    "family", ["warp_row", "thread_row", "warp_radix", "bitonic", "radix", "split", "multiblock", "sort"]
)
def test_no_host_wait_with_device_lengths_on_every_family(cupy, family):
    n = 1000 if family == "warp_row" else N  # warp_row takes rows of at most 1024
    k = 6 if family in ("thread_row", "warp_row") else K
    host = _values(3, (8, n))
    x = cupy.asarray(host)
    lengths = np.array([0, 1, k - 1, k, n - 1, n, n // 2, 5])
    on_device = cupy.asarray(lengths)
    call = lambda: cutopk.top_k(x, k, lengths=on_device, algorithm=family)  # noqa: E731
    reads, syncs, log = _waits(call)
    assert (reads, syncs) == (0, 0), log
    assert_same_padded(_host(call()), reference_with_lengths(host, k, lengths))


def test_no_host_wait_per_call_on_torch_tensors(torch_cuda):
    torch, tc = torch_cuda
    t = tc.to_cuda(_values(4, (8, N)))
    lengths = tc.to_cuda(LENGTHS)
    data, offsets = tc.to_cuda(_values(5, (N,))), tc.to_cuda(OFFSETS)
    out = (tc.to_cuda(torch.zeros(8, K)), tc.to_cuda(torch.zeros(8, K, dtype=torch.int64)))
    parts = [cutopk.top_k(t[:, j : j + 1000], K) for j in range(0, N, 1000)]
    parts = [(v, i + j * 1000) for j, (v, i) in enumerate(parts)]
    for call in (
        lambda: cutopk.top_k(t, K),
        lambda: cutopk.top_k(t, K, out=out),
        lambda: cutopk.top_k(t, K, lengths=lengths),
        lambda: cutopk.segmented_top_k(data, offsets, K),
        lambda: cutopk.merge_top_k(parts, K),
    ):
        reads, syncs, log = _waits(call)
        assert (reads, syncs) == (0, 0), log


# ---- capture and replay: the graph recomputes from the inputs' current contents


def _host(r):
    return tuple(a.get() for a in r)


CAPTURABLE = [c for c in CUPY_CASES if "host" not in c]  # a host array's copy to the device is not


@pytest.mark.parametrize("case", CAPTURABLE)
def test_cupy_stream_capture_and_replay_on_new_contents(cupy, case):
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        calls = _cupy_calls(cupy)  # made on the stream that captures: its pool has their blocks
        call = calls[case]
        call(), call()  # the first call compiles and grows the workspace; their blocks are freed
        s.begin_capture()
        try:
            captured = call()
        finally:
            graph = s.end_capture()
        # New contents in every input the call reads, in place: the replay must read them.
        for cell in call.__closure__ or ():
            _scramble(cupy, cell.cell_contents)
        graph.launch(s)
        got = _host(captured)  # before the uncaptured call (with out=, it writes the same arrays)
        want = _host(call())
    if "lengths" in case or "segmented" in case:
        assert_same_padded(got, want)
    else:
        assert_same(got, want)


def _scramble(cupy, value):
    """New contents, in place, for a device input (its values rotated along the last axis; a
    list of parts: each part's values); other values as they are."""
    if isinstance(value, cupy.ndarray) and value.dtype.kind == "f" and value.size:
        value[...] = value[..., ::-1].copy()
    elif isinstance(value, list):
        for part in value:
            _scramble(cupy, part[0])


def test_torch_graph_capture_and_replay_of_lengths_segments_and_merge(torch_cuda):
    torch, tc = torch_cuda
    host = _values(6, (8, N))
    t = tc.to_cuda(host)
    lengths = tc.to_cuda(LENGTHS)
    data_host = _values(7, (N,))
    data, offsets = tc.to_cuda(data_host), tc.to_cuda(OFFSETS)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        parts = [cutopk.top_k(t[:, j : j + 1000], K) for j in range(0, N, 1000)]
        parts = [(v, i + j * 1000) for j, (v, i) in enumerate(parts)]
        calls = (
            lambda: cutopk.top_k(t, K, lengths=lengths),
            lambda: cutopk.segmented_top_k(data, offsets, K),
            lambda: cutopk.merge_top_k(parts, K),
        )
        for call in calls:
            call()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        got = [call() for call in calls]
    host, data_host = host[:, ::-1].copy(), data_host[::-1].copy()
    t.copy_(torch.from_numpy(host))
    data.copy_(torch.from_numpy(data_host))
    for v, _ in parts:
        v.copy_(torch.from_numpy(v.cpu().numpy()[:, ::-1].copy()))
    g.replay()
    assert_same_padded(tuple(a.cpu().numpy() for a in got[0]), reference_with_lengths(host, K, LENGTHS))
    want = cutopk.segmented_top_k(data_host, OFFSETS, K)
    assert_same_padded(tuple(a.cpu().numpy() for a in got[1]), tuple(want))
    merged = cutopk.merge_top_k([(v.cpu().numpy(), i.cpu().numpy()) for v, i in parts], K)
    assert_same(tuple(a.cpu().numpy() for a in got[2]), tuple(merged))


# ---- lengths and offsets on the device out of range: rows of padding, no error, no wait


def test_device_lengths_out_of_range_give_rows_of_padding(cupy):
    host = _values(8, (6, N))
    bad = np.array([-1, N + 1, 2**40, 4, -(2**40), N])
    r = cutopk.top_k(cupy.asarray(host), K, lengths=cupy.asarray(bad))
    inside = np.where((bad >= 0) & (bad <= N), bad, 0)
    assert_same_padded(_host(r), reference_with_lengths(host, K, inside))
    with pytest.raises(ValueError, match=r"lengths: expected 0 <= lengths\[r\] <= 3000"):
        cutopk.top_k(cupy.asarray(host), K, lengths=bad)  # on the host: checked before any work


def test_device_offsets_out_of_order_or_range_give_rows_of_padding(cupy):
    data = _values(9, (100,))
    offsets = np.array([0, 30, 20, 101, 50, 50, 100])  # segments 1, 2, 3 bad; 4 empty; 5 fine
    r = cutopk.segmented_top_k(cupy.asarray(data), cupy.asarray(offsets), 4)
    values, indices = _host(r)
    assert (indices[1:5] == -1).all() and (values[1:5] == 0).all()
    assert_same((values[0], indices[0]), cutopk.top_k(data[:30], 4))
    assert_same((values[5], indices[5]), cutopk.top_k(data[50:100], 4))
    with pytest.raises(ValueError, match="offsets: expected non-decreasing positions"):
        cutopk.segmented_top_k(cupy.asarray(data), offsets, 4)


def test_max_length_plans_device_offsets_on_the_bound(cupy):
    """Device offsets are planned on len(data) (warp_row cannot take rows that long), or on
    max_length where given: the cheap family of short segments, and a segment longer than the
    bound is padding. With host offsets a segment longer than max_length is a ValueError."""
    data = _values(10, (N,))
    offsets = np.array([0, 40, 100, 130, 3000])
    planned = [
        cutopk.plan(cupy.asarray(data), 5, offsets=cupy.asarray(offsets), max_length=m) for m in (None, 64)
    ]
    long = cutopk.segmented_top_k(cupy.asarray(data), cupy.asarray(offsets), 5)
    short = cutopk.segmented_top_k(cupy.asarray(data), cupy.asarray(offsets), 5, max_length=64)
    assert [p.n for p in planned] == [N, 64]
    assert planned[1].algorithm == "warp_row"
    want = cutopk.segmented_top_k(data, offsets, 5)
    assert_same_padded(_host(long), tuple(want))
    values, indices = _host(short)
    assert_same_padded((values[:3], indices[:3]), (want.values[:3], want.indices[:3]))
    assert (indices[3] == -1).all() and (values[3] == 0).all()  # 2870 elements > 64
    with pytest.raises(ValueError, match="offsets: expected segments of at most max_length=64 elements"):
        cutopk.segmented_top_k(cupy.asarray(data), offsets, 5, max_length=64)
    with pytest.raises(ValueError, match="max_length: expected None or an int >= 0"):
        cutopk.segmented_top_k(cupy.asarray(data), offsets, 5, max_length=-1)


def test_device_lengths_and_offsets_on_another_device_are_refused(cupy):
    x = cupy.asarray(_values(11, (8, N)))
    data = cupy.asarray(_values(12, (N,)))
    with cupy.cuda.Device(1):
        lengths, offsets = cupy.asarray(LENGTHS), cupy.asarray(OFFSETS)
    with pytest.raises(ValueError, match="lengths: expected an array on the input's device 0, got device 1"):
        cutopk.top_k(x, K, lengths=lengths)
    with pytest.raises(ValueError, match="offsets: expected an array on data's device 0, got device 1"):
        cutopk.segmented_top_k(data, offsets, K)


def test_max_length_on_torch_tensors_is_checked_as_on_numpy():
    """A torch tensor with max_length takes the registered operator (max_length is on its
    schema): the bound is still checked, never silently dropped."""
    torch = pytest.importorskip("torch")
    data = _values(13, (N,))
    offsets = np.array([0, 40, 100, 130, 3000])
    tensor = torch.from_numpy(data).requires_grad_()  # a call the operator would serve
    with pytest.raises(ValueError, match="offsets: expected segments of at most max_length=64 elements"):
        cutopk.segmented_top_k(tensor, offsets, 5, max_length=64)
    got = cutopk.segmented_top_k(tensor, offsets, 5, max_length=3000)
    want = cutopk.segmented_top_k(data, offsets, 5)
    assert_same_padded((got.values.detach().numpy(), got.indices.numpy()), tuple(want))


def test_segmented_with_max_length_and_gradients_on_torch_tensors_makes_no_host_wait(torch_cuda):
    """``max_length=`` with data that requires grad takes the registered operator: the segments'
    starts for the backward come from the device offsets as they lie, never read back (a bad
    segment is padding, which passes no gradient)."""
    _, tc = torch_cuda
    host = _values(5, (N,))
    data = tc.to_cuda(host).requires_grad_()
    offsets = tc.to_cuda(OFFSETS)

    def call():
        return cutopk.segmented_top_k(data, offsets, K, max_length=N)

    reads, syncs, log = _waits(call)
    assert (reads, syncs) == (0, 0), log
    values, indices = call()
    values.sum().backward()
    want = np.zeros(N, dtype=np.float32)
    for s, lo in enumerate(OFFSETS[:-1]):
        for i in indices[s].cpu().numpy():
            if i >= 0:
                want[lo + i] += 1
    np.testing.assert_array_equal(data.grad.cpu().numpy(), want)
    assert want.sum() > 0
