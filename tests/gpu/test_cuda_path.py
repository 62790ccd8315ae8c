"""The lines only CuPy reaches: device scopes, a second device, torch CUDA tensors, graph capture,
a CuPy without bfloat16. Run on a GPU where there is one, else on the CuPy stand-in (and, for
torch CUDA tensors, the torch stand-in: tests/standin/torch_cuda.py)."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import cuda_is_standin
from support.reference import assert_same

import cutopk
from cutopk._core import call as _call

pytestmark = pytest.mark.gpu


@pytest.fixture
def two_devices(cupy):
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    return cupy


@pytest.fixture
def torch_cuda(cupy, monkeypatch):
    """torch with CUDA tensors: the stand-in's (a real CUDA torch is not in CI)."""
    if not cuda_is_standin():
        pytest.skip("the torch stand-in goes with the CuPy stand-in; on a GPU test_interop covers torch")
    torch = pytest.importorskip("torch")
    from standin import torch_cuda

    torch_cuda.install(monkeypatch)
    return torch, torch_cuda


def _values(rng, shape, dtype=np.float32):
    return rng.permutation(np.prod(shape)).reshape(shape).astype(dtype)


# ---- defect: a CuPy array on the current device gave segmented/merge a None scope


def test_segmented_top_k_on_a_cupy_array_of_the_current_device(cupy):
    data = np.array([5.0, 1.0, 7.0, 3.0, 3.0, 9.0], np.float32)
    offsets = np.array([0, 3, 3, 6])
    r = cutopk.segmented_top_k(cupy.asarray(data), cupy.asarray(offsets), 2)
    assert isinstance(r.values, cupy.ndarray)
    expected = cutopk.segmented_top_k(data, offsets, 2)
    assert_same((r.values.get(), r.indices.get()), expected)


def test_merge_top_k_of_cupy_parts_of_the_current_device(cupy):
    x = _values(np.random.default_rng(0), (3, 200))
    left, right = cutopk.top_k(cupy.asarray(x[:, :100]), 5), cutopk.top_k(cupy.asarray(x[:, 100:]), 5)
    r = cutopk.merge_top_k([left, (right.values, right.indices + 100)], 5)
    assert_same((r.values.get(), r.indices.get()), cutopk.top_k(x, 5))


# ---- defect: the device scope of a first call was entered twice (plan, then launch)


def test_first_call_on_an_array_of_another_device(two_devices):
    cupy = two_devices
    x = _values(np.random.default_rng(1), (4, 1000))
    with cupy.cuda.Device(1):
        on_1 = cupy.asarray(x)
    _call.CACHE.clear()
    r = cutopk.top_k(on_1, 3)  # uncached: planned in the scope, then launched in it
    assert r.values.device.id == 1 and r.indices.device.id == 1
    assert cupy.cuda.Device().id == 0  # the caller's current device is restored
    assert_same((r.values.get(), r.indices.get()), cutopk.top_k(x, 3))
    assert cutopk.plan(on_1, 3).cached  # and the plan serves the next call
    r = cutopk.top_k(on_1, 3, sorted="index")
    assert_same((r.values.get(), r.indices.get()), cutopk.top_k(x, 3, sorted="index"), order="index")


def test_a_plan_made_for_one_device_is_not_used_on_the_other(two_devices):
    cupy = two_devices
    x = _values(np.random.default_rng(2), (2, 3000))
    on_0 = cupy.asarray(x)
    with cupy.cuda.Device(1):
        on_1 = cupy.asarray(x)
    for arr in (on_0, on_1, on_0):
        r = cutopk.top_k(arr, 7)
        assert r.values.device.id == arr.device.id
        assert_same((r.values.get(), r.indices.get()), cutopk.top_k(x, 7))


# ---- defect: plan(lengths=) built the lengths variant on the current device


def test_plan_with_lengths_then_top_k_on_another_device(two_devices):
    cupy = two_devices
    rng = np.random.default_rng(3)
    x = _values(rng, (6, 500))
    lengths = np.array([500, 0, 3, 250, 499, 17])
    with cupy.cuda.Device(1):
        on_1, lens_1 = cupy.asarray(x), cupy.asarray(lengths)
    p = cutopk.plan(on_1, 5, lengths=lens_1)  # plans (and loads the kernels) first
    assert p.launch_count >= 1
    r = cutopk.top_k(on_1, 5, lengths=lens_1)
    assert r.values.device.id == 1
    expected = cutopk.top_k(x, 5, lengths=lengths)
    assert_same((r.values.get(), r.indices.get()), expected)


def test_plan_with_lengths_opts_kernels_in_on_the_arrays_device(two_devices):
    """A family with more than 48 KB of shared memory: the lengths variant opts its kernel in to
    the limit of the device it runs on, not of the current one (on the stand-in, device 0 allows
    227 KB and device 1 163 KB; CUDA refuses an opt-in above the device's limit)."""
    cupy = two_devices
    x = _values(np.random.default_rng(9), (2, 16384))
    lengths = np.array([16384, 9000])
    with cupy.cuda.Device(1):
        on_1, lens_1 = cupy.asarray(x), cupy.asarray(lengths)
    p = cutopk.plan(on_1, 1000, lengths=lens_1)  # resident: the row's 64 KB of keys on chip
    assert p.launches[-1].shared_bytes > 48 * 1024
    r = cutopk.top_k(on_1, 1000, lengths=lens_1)
    assert_same((r.values.get(), r.indices.get()), cutopk.top_k(x, 1000, lengths=lengths))


# ---- defect: CuPy 13 and bfloat16


def test_bfloat16_with_a_cupy_without_it_is_a_type_error(cupy, monkeypatch):
    if not cuda_is_standin():
        pytest.skip("switching CuPy versions needs the stand-in")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    base = cupy.asarray(np.arange(10, dtype=ml_dtypes.bfloat16))

    class OnlyDlpack:  # a bfloat16 array of another library, through DLPack
        def __dlpack__(self, **kw):
            return base.__dlpack__(**kw)

        def __dlpack_device__(self):
            return base.__dlpack_device__()

    monkeypatch.setattr(cupy, "__version__", "13.6.0")
    monkeypatch.setitem(cupy._state.VERSION, "major", 13)
    with pytest.raises(TypeError, match=r"a: bfloat16 on the GPU needs CuPy >= 14\.0.*CuPy 13\.6\.0"):
        cutopk.top_k(OnlyDlpack(), 3)


def test_bfloat16_torch_tensor_with_cupy_13_is_a_type_error(cupy, torch_cuda, monkeypatch):
    torch, tc = torch_cuda
    t = tc.to_cuda(torch.arange(10.0).to(torch.bfloat16))
    monkeypatch.setattr(cupy, "__version__", "13.6.0")
    monkeypatch.setitem(cupy._state.VERSION, "major", 13)
    with pytest.raises(TypeError, match=r"a: bfloat16 on the GPU needs CuPy >= 14\.0"):
        cutopk.top_k(t, 3)


# ---- torch CUDA tensors


def test_torch_cuda_tensor_in_torch_cuda_tensor_out(torch_cuda):
    torch, tc = torch_cuda
    x = _values(np.random.default_rng(4), (8, 300))
    t = tc.to_cuda(x)
    _call.CACHE.clear()
    for _ in range(2):  # uncached, then cached
        r = cutopk.top_k(t, 5)
        assert isinstance(r.values, torch.Tensor) and r.values.device == t.device
        assert_same((r.values.cpu().numpy(), r.indices.cpu().numpy()), cutopk.top_k(x, 5))


def test_torch_tensor_on_cuda_1(torch_cuda):
    torch, tc = torch_cuda
    x = _values(np.random.default_rng(5), (4, 1000))
    t = tc.to_cuda(x, 1)
    r = cutopk.top_k(t, 3)
    assert r.values.device == torch.device("cuda", 1)
    assert_same((r.values.cpu().numpy(), r.indices.cpu().numpy()), cutopk.top_k(x, 3))


def test_torch_cuda_tensor_that_requires_grad_under_no_grad(torch_cuda):
    torch, tc = torch_cuda
    x = _values(np.random.default_rng(6), (3, 100))
    t = tc.to_cuda(x).requires_grad_(True)
    with torch.no_grad():
        r = cutopk.top_k(t, 4)
    assert not r.values.requires_grad
    assert_same((r.values.cpu().numpy(), r.indices.cpu().numpy()), cutopk.top_k(x, 4))


def test_torch_cuda_graph_capture_takes_outputs_from_torch_and_scratch_from_the_warm_workspace(torch_cuda):
    torch, tc = torch_cuda
    rng = np.random.default_rng(7)
    host = _values(rng, (32, 4096))
    t = tc.to_cuda(host)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # the warm-up, on the stream that captures: its workspace grows
        cutopk.top_k(t, 16)
        cutopk.top_k(t, 2000, algorithm="multiblock")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        r = cutopk.top_k(t, 16)  # outputs: torch's allocator, not cudaMalloc; no scratch allocated
        cutopk.top_k(t, 2000, algorithm="multiblock")  # scratch from the warm workspace
    for _ in range(2):  # the replay reads the input in place
        g.replay()
        assert_same((r.values.cpu().numpy(), r.indices.cpu().numpy()), cutopk.top_k(host, 16))
        host = _values(rng, (32, 4096))
        t.copy_(torch.from_numpy(host))


def test_out_torch_cuda_tensors(torch_cuda):
    torch, tc = torch_cuda
    x = _values(np.random.default_rng(8), (4, 300))
    t = tc.to_cuda(x)
    out = (tc.to_cuda(torch.zeros(4, 6)), tc.to_cuda(torch.zeros(4, 6, dtype=torch.int64)))
    r = cutopk.top_k(t, 6, out=out)
    assert r.values is out[0]
    assert_same((out[0].cpu().numpy(), out[1].cpu().numpy()), cutopk.top_k(x, 6))


# ---- out= on the CUDA path: the caller's own GPU arrays, checked before any work


def test_out_cupy_arrays_are_written_and_returned(cupy):
    x = _values(np.random.default_rng(11), (3, 200))
    values, indices = cupy.empty((3, 5), np.float32), cupy.empty((3, 5), np.int32)
    r = cutopk.top_k(cupy.asarray(x), 5, index_dtype=np.int32, out=(values, indices))
    assert r.values is values and r.indices is indices
    assert_same((values.get(), indices.get()), cutopk.top_k(x, 5), index_dtype=np.int32)


def test_out_of_host_arrays_for_a_gpu_input_is_a_type_error(cupy):
    x = cupy.asarray(_values(np.random.default_rng(12), (3, 50)))
    with pytest.raises(
        TypeError, match=r"out: values must be a GPU array like the input, got numpy\.ndarray"
    ):
        cutopk.top_k(x, 2, out=(np.empty((3, 2), np.float32), cupy.empty((3, 2), np.int64)))


def test_out_on_another_device_than_the_input_is_a_value_error(two_devices):
    cupy = two_devices
    x = cupy.asarray(_values(np.random.default_rng(13), (3, 50)))
    with cupy.cuda.Device(1):
        values = cupy.empty((3, 2), np.float32)
    with pytest.raises(ValueError, match="out: values is on device 1, the input on device 0"):
        cutopk.top_k(x, 2, out=(values, cupy.empty((3, 2), np.int64)))


def test_out_torch_cuda_tensors_that_cannot_be_written_in_place_are_refused(torch_cuda):
    torch, tc = torch_cuda
    t = tc.to_cuda(_values(np.random.default_rng(14), (2, 40)))
    indices = tc.to_cuda(torch.zeros(2, 3, dtype=torch.int64))
    grad = tc.to_cuda(torch.zeros(2, 3)).requires_grad_()
    with pytest.raises(ValueError, match="out: values requires grad; outputs written in place cannot carry"):
        cutopk.top_k(t, 3, out=(grad, indices))
    sparse = torch.zeros(2, 3).to_sparse()
    with pytest.raises(TypeError, match=r"out: values must be a dense tensor, got layout torch\.sparse_coo"):
        cutopk.top_k(torch.zeros(2, 40), 3, out=(sparse, torch.zeros(2, 3, dtype=torch.int64)))


# ---- backend="cuda" where CuPy cannot reach a GPU: the RuntimeError of docs/SPEC.md


def test_cuda_backend_where_the_driver_fails_says_what_cupy_reports(cupy, monkeypatch):
    def no_driver():
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")

    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", no_driver)
    with pytest.raises(
        RuntimeError, match="backend: 'cuda' needs a usable CUDA GPU, but CuPy reports: cudaError"
    ):
        cutopk.top_k(cupy.asarray(np.arange(5.0)), 2)


def test_cuda_backend_with_no_gpu_found_is_a_runtime_error(cupy, monkeypatch):
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", lambda: 0)
    with pytest.raises(RuntimeError, match="backend: 'cuda' needs a CUDA GPU, but CuPy found none"):
        cutopk.top_k(cupy.asarray(np.arange(5.0)), 2)


def test_a_dlpack_export_failing_for_another_reason_keeps_its_error(cupy):
    class Unexportable:  # an array of another library whose DLPack export is not implemented
        def __dlpack__(self, **kw):
            raise NotImplementedError("this library exports no DLPack capsule")

        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA, device 0

    with pytest.raises(NotImplementedError, match="exports no DLPack capsule"):
        cutopk.top_k(Unexportable(), 1)
