"""Interop: which objects are taken as host or GPU arrays (DLPack devices, __cuda_array_interface__),
torch tensors in and torch tensors out, and on a GPU: no copy of the input, the caller's device
and current stream (torch's or CuPy's), CUDA graph capture and a second device.

The CPU tests run everywhere. The GPU tests carry the ``gpu`` marker and skip, with the reason,
without CuPy, torch with CUDA or a GPU; they are written against the public API and SPEC.md
("a torch CUDA tensor is accepted without a copy", "same array type as the input", "kernels run on
CuPy's current stream of the input's device; no host synchronisation").
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from support.backends import cuda_unavailable_reason, hardware_only
from support.reference import assert_same

import cutopk
from cutopk._request import checks as _checks

ORDERS = (True, "index", False)


def _torch():
    return pytest.importorskip("torch", reason="torch is not installed")


# ---------------------------------------------------------------------------------------------
# Classification of foreign objects (CPU only: nothing is ever read from a fake GPU pointer)


class FakeDlpack:
    """A DLPack producer that reports ``device_type``; on the CPU it exports a NumPy array."""

    def __init__(self, arr: np.ndarray, device_type: int, device_id: int = 0):
        self.arr, self.device = arr, (device_type, device_id)
        self.shape, self.dtype = arr.shape, arr.dtype

    def __dlpack__(self, **kw):
        if self.device[0] != 1:
            raise AssertionError("a GPU DLPack object was exported on a machine without a GPU")
        return self.arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.device


class FakeCudaArray:
    """Exposes only ``__cuda_array_interface__``, with a pointer nothing may dereference."""

    shape, dtype = (4,), np.dtype(np.float32)

    @property
    def __cuda_array_interface__(self):
        return {"shape": (4,), "typestr": "<f4", "data": (0xDEAD0000, False), "version": 3}


def test_cpu_dlpack_object_is_a_host_array_and_gives_numpy_results():
    obj = FakeDlpack(np.array([1.0, 5.0, 2.0, 5.0]), device_type=1)  # kDLCPU
    assert _checks.array_kind(obj) == "numpy"
    r = cutopk.top_k(obj, 2)
    assert isinstance(r.values, np.ndarray) and r.indices.tolist() == [1, 3]
    with pytest.raises(
        TypeError,
        match=r"backend='cuda' expects a CuPy/CUDA array, got a CPU array \(test_interop.FakeDlpack\)",
    ):
        cutopk.top_k(obj, 1, backend="cuda")


def test_cuda_dlpack_object_is_a_gpu_array():
    obj = FakeDlpack(np.zeros(3), device_type=2)  # kDLCUDA
    assert _checks.array_kind(obj) == "cupy"
    for backend in ("numpy", "sim"):
        with pytest.raises(TypeError, match=f"backend='{backend}' expects a NumPy array, got a GPU array"):
            cutopk.top_k(obj, 1, backend=backend)


@pytest.mark.parametrize("device_type", [3, 4, 7, 8, 13, 14])  # CUDAHost, OpenCL, Vulkan, Metal, ...
def test_other_dlpack_devices_are_refused(device_type):
    obj = FakeDlpack(np.zeros(3), device_type=device_type)
    with pytest.raises(TypeError, match="expected a NumPy array, a CuPy array or a CUDA array"):
        _checks.array_kind(obj)
    with pytest.raises(TypeError, match="FakeDlpack"):
        cutopk.top_k(obj, 1)


def test_a_failing_dlpack_device_query_is_a_type_error():
    class Broken(FakeDlpack):
        def __dlpack_device__(self):
            raise RuntimeError("no device")

    with pytest.raises(TypeError, match=r"got test_interop\..*Broken"):
        cutopk.top_k(Broken(np.zeros(3), 1), 1)


def test_cuda_array_interface_object_is_a_gpu_array():
    assert _checks.array_kind(FakeCudaArray()) == "cupy"
    for backend in ("numpy", "sim"):
        with pytest.raises(TypeError, match=f"backend='{backend}' expects a NumPy array, got a GPU array"):
            cutopk.top_k(FakeCudaArray(), 1, backend=backend)
        with pytest.raises(TypeError, match="expects a NumPy array, got a GPU array"):
            cutopk.plan(FakeCudaArray(), 1, backend=backend)


def test_cuda_array_without_cupy_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)  # import cupy fails
    for backend in ("auto", "cuda"):
        with pytest.raises(RuntimeError, match="needs CuPy and a CUDA GPU, but CuPy is not installed"):
            cutopk.top_k(FakeCudaArray(), 1, backend=backend)


@pytest.mark.parametrize("obj", [[1.0, 2.0], 3.0, object(), "abc"], ids=lambda o: type(o).__name__)
def test_objects_that_are_not_arrays_are_refused(obj):
    with pytest.raises(TypeError, match=f"got builtins.{type(obj).__name__}"):
        cutopk.top_k(obj, 1)


# ---------------------------------------------------------------------------------------------
# torch on the CPU: the NumPy backend, torch tensors back


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "int64", "uint8"])
def test_torch_cpu_tensor_in_torch_tensor_out(dtype):
    torch = _torch()
    x = np.random.default_rng(0).integers(-3, 4, (3, 40)).astype(dtype)  # many ties
    t = torch.from_numpy(x)
    for order, mode, index_dtype in itertools.product(ORDERS, ("largest", "smallest"), (np.int64, np.int32)):
        r = cutopk.top_k(t, 7, sorted=order, mode=mode, index_dtype=index_dtype)
        assert isinstance(r.values, torch.Tensor) and isinstance(r.indices, torch.Tensor)
        assert r.values.dtype == t.dtype and r.values.device == t.device
        assert r.indices.dtype == {np.int64: torch.int64, np.int32: torch.int32}[index_dtype]
        expected = cutopk.top_k(x, 7, sorted=order, mode=mode, index_dtype=index_dtype)
        assert_same((r.values.numpy(), r.indices.numpy()), expected, index_dtype=index_dtype, order=order)


def test_torch_cpu_strided_tensors():
    torch = _torch()
    base = torch.arange(60.0).reshape(3, 20) % 7
    for t in (base.T, base[:, ::3], base[::2]):
        for axis in (0, -1):
            r = cutopk.top_k(t, 2, axis=axis)
            expected = cutopk.top_k(t.numpy(), 2, axis=axis)
            assert_same((r.values.numpy(), r.indices.numpy()), expected, axis=axis)


def test_torch_cpu_tensor_errors_are_the_numpy_ones():
    torch = _torch()
    with pytest.raises(TypeError, match="unsupported dtype bool"):
        cutopk.top_k(torch.tensor([True, False]), 1)
    with pytest.raises(ValueError, match="rank >= 1"):
        cutopk.top_k(torch.tensor(1.0), 1)
    with pytest.raises(ValueError, match="k: expected 0 <= k <= 3"):
        cutopk.top_k(torch.zeros(3), 4)
    # A torch CPU tensor is named for what it is, not as the NumPy array it is wrapped in.
    with pytest.raises(
        TypeError, match=r"backend='cuda' expects a CuPy/CUDA array, got a CPU array \(torch.Tensor\)"
    ):
        cutopk.top_k(torch.zeros(3), 1, backend="cuda")


def test_torch_cpu_tensor_that_requires_grad():
    torch = _torch()
    t = torch.tensor([1.0, 3.0, 2.0], requires_grad=True)
    assert cutopk.top_k(t, 1).indices.tolist() == [1]


@pytest.mark.parametrize("index_dtype", ["int64", "int32", "uint32", "uint64"])
@pytest.mark.parametrize("numpy_name", [True, False])
def test_the_gradient_flows_for_every_index_dtype(index_dtype, numpy_name):
    torch = _torch()
    t = torch.tensor([[1.0, 3.0, 2.0, 0.5], [4.0, -1.0, 4.0, 0.0]], requires_grad=True)
    dt = np.dtype(index_dtype) if numpy_name else getattr(torch, index_dtype)
    r = cutopk.top_k(t, 2, index_dtype=dt)
    (r.values * torch.tensor([[1.0, 10.0]])).sum().backward()
    assert t.grad.tolist() == [[0.0, 1.0, 10.0, 0.0], [1.0, 0.0, 10.0, 0.0]]


TORCH_DTYPES_WITHOUT_A_FAITHFUL_EXPORT = [
    "float8_e4m3fn", "float8_e5m2", "complex32", "bits8", "uint1", "uint3", "uint7", "int1", "int4", "int7",
]  # fmt: skip


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("name", TORCH_DTYPES_WITHOUT_A_FAITHFUL_EXPORT)
def test_torch_dtypes_without_order_or_dlpack_export_are_a_type_error(name):
    torch = _torch()
    dtype = getattr(torch, name, None)
    if dtype is None:
        pytest.skip(f"this torch has no {name}")
    try:
        t = torch.zeros(4, dtype=dtype)
    except (RuntimeError, TypeError):  # some have no constructor: an empty one of the dtype
        t = torch.empty(4, dtype=torch.uint8).view(dtype) if name.startswith("bits") else pytest.skip(name)
    message = rf"a: unsupported dtype {re.escape(str(dtype))} \(expected one of float16, .*uint64"
    with pytest.raises(TypeError, match=message):
        cutopk.top_k(t, 2)
    with pytest.raises(TypeError, match=message.replace("a:", "data:")):
        cutopk.segmented_top_k(t, [0, 4], 2)
    with pytest.raises(TypeError, match=r"parts\[0\]\.values: unsupported dtype"):
        cutopk.merge_top_k([(t, torch.arange(4))], 2)


def test_torch_cpu_bfloat16():
    torch = _torch()
    pytest.importorskip("ml_dtypes", reason="bfloat16 on the CPU needs ml_dtypes")
    t = torch.tensor([1.0, -0.0, 3.0, float("nan"), 3.0]).to(torch.bfloat16)
    r = cutopk.top_k(t, 2)
    assert r.values.dtype == torch.bfloat16 and r.indices.tolist() == [2, 4]


# ---------------------------------------------------------------------------------------------
# GPU: torch CUDA tensors and CuPy arrays


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
        pytest.skip("torch has no CUDA device (a CPU-only torch build?)")
    return cupy, torch


def _host(t):
    """A torch tensor (any device) as NumPy, bfloat16 through ml_dtypes, sharing nothing."""
    torch = _torch()
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 reference needs ml_dtypes")
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _check_against_host(t, k, **kw):
    """cutopk.top_k on a torch CUDA tensor against the NumPy backend on its host copy, bit for bit;
    the result must be torch tensors on the input's device."""
    torch = _torch()
    r = cutopk.top_k(t, k, **kw)
    assert isinstance(r.values, torch.Tensor) and isinstance(r.indices, torch.Tensor)
    assert r.values.device == t.device and r.indices.device == t.device
    assert r.values.dtype == t.dtype
    expected = cutopk.top_k(_host(t), k, **kw)
    got = (_host(r.values), _host(r.indices))
    assert_same(got, expected, index_dtype=kw.get("index_dtype", np.int64), order=kw.get("sorted", True),
                axis=kw.get("axis", -1))  # fmt: skip
    return r


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int32", "int64", "uint8"])
def test_torch_cuda_in_torch_cuda_out(dtype):
    _, torch = _torch_cuda()
    g = torch.Generator(device="cuda").manual_seed(0)
    t = torch.randint(-3, 4, (8, 3000), device="cuda", generator=g).to(getattr(torch, dtype))  # ties
    for order, mode in itertools.product(ORDERS, ("largest", "smallest")):
        _check_against_host(t, 33, sorted=order, mode=mode)
    r = _check_against_host(t, 5, index_dtype=np.int32)
    assert r.indices.dtype == torch.int32


@pytest.mark.gpu
def test_torch_cuda_nan_and_signed_zeros():
    _, torch = _torch_cuda()
    t = torch.tensor([[0.0, -0.0, float("nan"), 1.0, float("-inf"), -float("nan"), float("inf")] * 50],
                     device="cuda")  # fmt: skip
    for nan, mode, order in itertools.product(("last", "largest"), ("largest", "smallest"), ORDERS):
        _check_against_host(t, 60, nan=nan, mode=mode, sorted=order)


@pytest.mark.gpu
def test_torch_cuda_strided_and_empty():
    _, torch = _torch_cuda()
    base = torch.randn(64, 1000, device="cuda")
    for t in (base.T, base[:, ::3], base[::2, 100:700]):
        for axis in (0, 1):
            _check_against_host(t, 9, axis=axis)
    r = cutopk.top_k(base, 0)
    assert r.values.shape == (64, 0) and r.values.device == base.device


@pytest.mark.gpu
def test_torch_cuda_input_is_read_in_place_not_copied():
    cupy, torch = _torch_cuda()
    t = torch.randn(256, 65536, device="cuda")  # 64 MiB
    before = t.clone()
    assert not cutopk.plan(t, 8).copy  # a contiguous row-major input is read where it is
    cutopk.top_k(t, 8)  # build the kernels, warm the pool
    torch.cuda.synchronize()
    pool = cupy.get_default_memory_pool()
    torch_before, cupy_before = torch.cuda.memory_allocated(), pool.used_bytes()
    r = cutopk.top_k(t, 8)
    torch.cuda.synchronize()
    # Neither torch (a .contiguous() copy, say) nor CuPy's pool may hold a copy of the input: the
    # only new memory is the outputs (and bounded scratch, far below the input's 64 MiB).
    assert torch.cuda.memory_allocated() - torch_before < t.nbytes // 4
    assert pool.used_bytes() - cupy_before < t.nbytes // 4
    assert torch.equal(t, before)  # the input is untouched
    assert torch.equal(r.values, torch.topk(t, 8).values)


@pytest.mark.gpu
def test_torch_bfloat16_on_gpu():
    _, torch = _torch_cuda()
    t = torch.randn(8, 300, device="cuda").to(torch.bfloat16)
    try:
        r = cutopk.top_k(t, 5)
    except (TypeError, ValueError) as exc:
        pytest.xfail(f"bfloat16 through DLPack is not supported by this CuPy: {exc}")
    assert r.values.dtype == torch.bfloat16
    _check_against_host(t, 5)


@pytest.mark.gpu
def test_runs_on_the_current_torch_stream():
    """The input is written on a side stream after a long sleep; if cutopk ran on any other
    stream it would read the input before it is written."""
    _, torch = _torch_cuda()
    t = torch.zeros(16, 5000, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time
        t.copy_(torch.arange(5000.0, device="cuda").expand(16, 5000))
        r = cutopk.top_k(t, 3)
    s.synchronize()
    assert r.indices.tolist() == [[4999, 4998, 4997]] * 16


_SPIN_THEN_FILL = r"""
extern "C" __global__ void spin_then_fill(long long cycles, float* x, int n) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
    for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = (float)i;
}
"""


@pytest.mark.gpu
def test_runs_on_the_current_cupy_stream():
    """As above with CuPy's current stream (non-blocking, so the legacy default stream would
    not wait for it)."""
    cupy = _cuda()
    hardware_only("a kernel that spins on clock64() while another stream runs")
    fill = cupy.RawKernel(_SPIN_THEN_FILL, "spin_then_fill")
    x = cupy.zeros(5000, dtype=cupy.float32)
    cutopk.top_k(x, 3)  # build the kernels first
    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        fill((1,), (256,), (np.int64(200_000_000), x, np.int32(x.size)))
        r = cutopk.top_k(x, 3)
    stream.synchronize()
    assert r.indices.get().tolist() == [4999, 4998, 4997]


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay_on_new_data():
    cupy = _cuda()
    rng = np.random.default_rng(1)
    host = rng.random((32, 4096), dtype=np.float32)
    x = cupy.asarray(host)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        # Build the kernels and warm the pool before capture, on the capturing stream: CuPy's
        # pool keeps freed blocks per stream, and a capture may not call cudaMalloc.
        cutopk.top_k(x, 16)
        stream.synchronize()
        stream.begin_capture()
        r = cutopk.top_k(x, 16)  # a host synchronisation here would break the capture
        graph = stream.end_capture()
    for _ in range(2):
        graph.launch(stream)
        stream.synchronize()
        assert_same((r.values.get(), r.indices.get()), cutopk.top_k(host, 16))
        host = rng.random((32, 4096), dtype=np.float32)  # the replay reads the input in place
        x[...] = cupy.asarray(host)
        cupy.cuda.Device().synchronize()


@pytest.mark.gpu
def test_torch_cuda_graph_capture():
    """Captured with torch's own API. Every stream CuPy and torch touch while wrapping the tensor
    and handing the results back must be the capturing stream: a DLPack exchange that asks torch
    or CuPy to order against another stream (the legacy default one, say) breaks the capture."""
    _, torch = _torch_cuda()
    t = torch.rand(32, 4096, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up (kernels, pools) on a side stream, as torch recommends
        cutopk.top_k(t, 16)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        r = cutopk.top_k(t, 16)
    t.copy_(torch.rand(32, 4096, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(r.values, torch.topk(t, 16).values)


@pytest.mark.gpu
def test_array_on_device_1_is_processed_on_device_1():
    cupy = _cuda()
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    with cupy.cuda.Device(1):
        x = cupy.random.random((4, 1000))
    assert cupy.cuda.Device().id == 0
    r = cutopk.top_k(x, 3)
    assert r.values.device.id == 1 and r.indices.device.id == 1
    assert cupy.cuda.Device().id == 0  # the caller's current device is restored
    assert_same((r.values.get(), r.indices.get()), cutopk.top_k(x.get(), 3))


@pytest.mark.gpu
def test_torch_tensor_on_cuda_1_stays_on_cuda_1():
    _, torch = _torch_cuda()
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    t = torch.randn(4, 1000, device="cuda:1")
    r = _check_against_host(t, 3)
    assert r.values.device == torch.device("cuda:1") and torch.cuda.current_device() == 0


@pytest.mark.gpu
def test_cuda_array_interface_only_object():
    cupy = _cuda()
    base = cupy.arange(100, dtype=cupy.float32)

    class Cai:
        __cuda_array_interface__ = base.__cuda_array_interface__

    r = cutopk.top_k(Cai(), 3)
    assert r.indices.get().tolist() == [99, 98, 97]


@pytest.mark.gpu
def test_dlpack_only_gpu_object():
    cupy = _cuda()
    base = cupy.arange(100, dtype=cupy.float32) % 10

    class OnlyDlpack:
        def __dlpack__(self, **kw):
            return base.__dlpack__(**kw)

        def __dlpack_device__(self):
            return base.__dlpack_device__()

    r = cutopk.top_k(OnlyDlpack(), 3)
    assert cupy.asnumpy(r.indices).tolist() == [9, 19, 29]


@pytest.mark.gpu
def test_gpu_arrays_refuse_the_numpy_backend():
    cupy, torch = _torch_cuda()
    for a in (cupy.zeros(3), torch.zeros(3, device="cuda")):
        with pytest.raises(TypeError, match="backend='numpy' expects a NumPy array, got a GPU array"):
            cutopk.top_k(a, 1, backend="numpy")


def test_one_array_module_helper_answers_for_names_and_arrays():
    # The launcher passes its target, the merge an array kind, lengths and dask an array.
    from cutopk._interop import array_module

    assert array_module("numpy") is np and array_module("sim") is np
    assert array_module(np.zeros(3)) is np
    if cuda_unavailable_reason() is None:
        import cupy

        assert array_module("cuda") is cupy and array_module("cupy") is cupy
        assert array_module(cupy.zeros(3)) is cupy


def test_a_forced_algorithm_name_is_checked_alike_on_every_route():
    # One check (cutopk._request.checks.check_algorithm): top_k, segmented_top_k and algorithms() agree.
    message = "algorithm: expected 'auto' or one of ('select',) for backend 'numpy', got 'nope'"
    for call in (
        lambda: cutopk.top_k(np.zeros(4), 1, algorithm="nope"),
        lambda: cutopk.segmented_top_k(np.zeros(4), np.array([0, 4]), 1, algorithm="nope"),
    ):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            call()
    with pytest.raises(
        ValueError, match=r"^algorithm: expected 'auto' or an algorithm name \(a str\), got 3$"
    ):
        cutopk.top_k(np.zeros(4), 1, algorithm=3)
