"""Interop: torch tensors in and out (CPU here, CUDA on a GPU machine), arrays that only expose
__cuda_array_interface__, streams, CUDA graph capture and multiple devices. GPU tests skip with
the reason when no GPU is usable."""

from __future__ import annotations

import numpy as np
import pytest
from backends import cuda_unavailable_reason

import cutopk
from cutopk import _api


def _torch():
    return pytest.importorskip("torch", reason="torch is not installed")


def test_torch_cpu_tensor_in_torch_tensor_out():
    torch = _torch()
    t = torch.tensor([[3.0, 1.0, 3.0, 2.0]])
    r = cutopk.top_k(t, 2)
    assert isinstance(r.values, torch.Tensor) and isinstance(r.indices, torch.Tensor)
    assert r.indices.tolist() == [[0, 2]]


def test_cpu_dlpack_objects_are_host_arrays():
    class CpuDlpack:
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, **kw):
            return self.arr.__dlpack__(**kw)

        def __dlpack_device__(self):
            return (1, 0)

    obj = CpuDlpack(np.array([1.0, 5.0, 2.0]))
    assert _api.array_kind(obj) == "numpy"
    assert cutopk.top_k(obj, 1).indices.tolist() == [1]


def _cuda():
    reason = cuda_unavailable_reason()
    if reason:
        pytest.skip(f"needs a CUDA GPU: {reason}")
    import cupy

    return cupy


def _torch_cuda():
    cupy = _cuda()
    torch = _torch()
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return cupy, torch


@pytest.mark.gpu
def test_torch_cuda_in_torch_cuda_out_without_copy():
    _, torch = _torch_cuda()
    t = torch.randn(64, 1000, device="cuda")
    before = t.data_ptr()
    r = cutopk.top_k(t, 10)
    assert isinstance(r.values, torch.Tensor) and r.values.device == t.device
    ref = torch.topk(t, 10)
    assert torch.equal(r.values, ref.values)
    assert t.data_ptr() == before


@pytest.mark.gpu
def test_torch_bfloat16_on_gpu():
    _, torch = _torch_cuda()
    t = torch.randn(8, 300, device="cuda").to(torch.bfloat16)
    try:
        r = cutopk.top_k(t, 5)
    except (TypeError, ValueError) as exc:
        pytest.xfail(f"bfloat16 through DLPack is not supported by this CuPy: {exc}")
    assert torch.equal(r.values, torch.topk(t, 5).values)


@pytest.mark.gpu
def test_runs_on_the_current_torch_stream():
    _, torch = _torch_cuda()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.randn(16, 5000, device="cuda")
        r = cutopk.top_k(t, 7)
    s.synchronize()
    assert torch.equal(r.values, torch.topk(t, 7).values)


@pytest.mark.gpu
def test_cuda_graph_capture():
    cupy = _cuda()
    x = cupy.random.random((32, 4096), dtype=cupy.float32)
    cutopk.top_k(x, 16)  # compile before capture
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        r = cutopk.top_k(x, 16)
        graph = stream.end_capture()
    graph.launch(stream)
    stream.synchronize()
    assert (r.values == cutopk.top_k(x, 16).values).all()


@pytest.mark.gpu
def test_array_on_device_1_is_processed_on_device_1():
    cupy = _cuda()
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    with cupy.cuda.Device(1):
        x = cupy.random.random((4, 1000))
    r = cutopk.top_k(x, 3)
    assert r.values.device.id == 1


@pytest.mark.gpu
def test_cuda_array_interface_only_object():
    cupy = _cuda()
    base = cupy.arange(100, dtype=cupy.float32)

    class Cai:
        __cuda_array_interface__ = base.__cuda_array_interface__

    r = cutopk.top_k(Cai(), 3)
    assert r.indices.get().tolist() == [99, 98, 97]
