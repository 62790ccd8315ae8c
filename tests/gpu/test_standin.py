"""The CuPy stand-in (tests/standin/cupy) refuses what CuPy and CUDA refuse: the CUDA-path tests
are only as strict as it is."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import cuda_is_standin

pytestmark = pytest.mark.skipif(not cuda_is_standin(), reason="checks the CuPy stand-in, not installed here")

KERNEL = r"""
template <typename T> __global__ void twice(T* x, long long n) {
    for (long long i = threadIdx.x; i < n; i += blockDim.x) x[i] *= 2;
}
extern "C" __global__ void fill(float* x, int n, float v) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = v;
}
"""


@pytest.fixture
def cupy():
    import cupy

    return cupy


def test_an_array_is_not_a_numpy_array(cupy):
    x = cupy.arange(6, dtype=cupy.float32)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(x)
    with pytest.raises(TypeError):
        np.add(x, 1)
    with pytest.raises(TypeError, match="Unsupported type"):
        x + np.ones(6, np.float32)
    host = x.get()
    host[0] = 99  # a copy
    assert type(host) is np.ndarray and int(x[0]) == 0


def test_views_share_memory(cupy):
    x = cupy.arange(12, dtype=cupy.int32).reshape(3, 4)
    for view in (x.T, x[1:, ::2], x.view(cupy.uint32), cupy.moveaxis(x, 0, 1), x.reshape(12)):
        assert cupy.may_share_memory(view, x)
    x.T[0, 0] = 100
    assert int(x[0, 0]) == 100
    assert x[1].data.ptr == x.data.ptr + 16
    s = cupy.lib.stride_tricks.as_strided(x, shape=(2, 2), strides=(16, 4))
    assert s.get().tolist() == [[100, 1], [4, 5]]
    assert not cupy.may_share_memory(x.astype(cupy.int64), x)


def test_only_the_functions_cutopk_uses_exist(cupy):
    with pytest.raises(AttributeError):
        cupy.partition  # noqa: B018
    with pytest.raises(AttributeError):
        cupy.cuda.Device().mem_info  # noqa: B018


def test_two_devices_and_the_current_device(cupy):
    assert cupy.cuda.runtime.getDeviceCount() == 2
    with cupy.cuda.Device(1):
        y = cupy.zeros(4)
        assert cupy.cuda.runtime.getDevice() == 1
    assert y.device.id == 1 and cupy.cuda.Device().id == 0
    with pytest.raises(ValueError, match=r"resides \(1\) is different from the current device \(0\)"):
        y + 1
    with pytest.raises(Exception, match="invalid device ordinal"):
        cupy.cuda.Device(2)
    assert (
        cupy.cuda.Device(1).attributes["MaxSharedMemoryPerBlockOptin"]
        < (cupy.cuda.Device(0).attributes["MaxSharedMemoryPerBlockOptin"])
    )


def test_a_launch_runs_on_the_simulator_and_packs_arguments_as_cupy(cupy):
    mod = cupy.RawModule(code=KERNEL, options=("-std=c++17",), name_expressions=["twice<float>"])
    x = cupy.arange(5, dtype=cupy.float32)
    mod.get_function("twice<float>")((1,), (32,), (x, 5))  # a Python int is a long long
    assert x.get().tolist() == [0, 2, 4, 6, 8]
    fill = mod.get_function("fill")
    with pytest.raises(Exception, match="argument 1"):
        fill((1,), (32,), (x, 5, np.float32(1)))  # an int64 for an int
    with pytest.raises(TypeError, match="Unsupported type"):
        fill((1,), (32,), (x, np.int32(5), "1"))
    with pytest.raises(TypeError, match=r"Only numpy\.ndarrays of size one"):
        fill((1,), (32,), (np.zeros(5, np.float32), np.int32(5), np.float32(1)))
    with pytest.raises(Exception, match="NOT_FOUND"):
        mod.get_function("twice< float >")  # a name expression is looked up as it was given


def test_a_launch_refuses_arrays_and_kernels_of_another_device(cupy):
    mod = cupy.RawModule(code=KERNEL, name_expressions=["twice<float>"])
    fn = mod.get_function("twice<float>")
    with cupy.cuda.Device(1):
        y = cupy.zeros(4, dtype=cupy.float32)
        with pytest.raises(Exception, match="INVALID_HANDLE"):
            fn((1,), (32,), (y, 4))
    with pytest.raises(Exception, match="ILLEGAL_ADDRESS"):
        fn((1,), (32,), (y, 4))


def test_opt_in_above_the_devices_limit_is_refused(cupy):
    fn = cupy.RawModule(code=KERNEL, name_expressions=["twice<float>"]).get_function("twice<float>")
    with pytest.raises(Exception, match="INVALID_VALUE"):
        fn.max_dynamic_shared_size_bytes = 300 * 1024


def test_capture_records_launches_and_refuses_cudamalloc_and_copies(cupy):
    x = cupy.ones(8, dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        try:
            with pytest.raises(Exception, match="cudaErrorStreamCaptureUnsupported"):
                cupy.empty(1000)  # the pool has no free block of this stream: cudaMalloc
            with pytest.raises(RuntimeError, match="capturing"):
                x.get()
            x.fill(3)  # a kernel: recorded, run by the graph's launch
        finally:
            graph = stream.end_capture()
    assert x.get().tolist() == [1.0] * 8
    graph.launch()
    assert x.get().tolist() == [3.0] * 8


def test_the_pool_serves_freed_blocks_of_the_same_stream(cupy):
    pool = cupy.get_default_memory_pool()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        cupy.empty(256, dtype=cupy.uint8)  # freed at once, its block back to this stream's list
        stream.begin_capture()
        cupy.empty(256, dtype=cupy.uint8)  # a freed block of this stream: no cudaMalloc
        stream.end_capture()
    pool.set_limit(size=1024)
    try:
        with pytest.raises(cupy.cuda.OutOfMemoryError):
            cupy.empty(4096, dtype=cupy.uint8)
    finally:
        pool.set_limit(size=0)


def test_using_allocator_serves_allocations_in_its_scope(cupy):
    calls = []

    def allocator(size):
        calls.append(size)
        return cupy.cuda.memory._malloc(size)

    with cupy.cuda.using_allocator(allocator):
        cupy.empty(10, dtype=cupy.float32)
    cupy.empty(10, dtype=cupy.float32)
    assert calls == [40]


def test_streams_belong_to_a_device(cupy):
    with cupy.cuda.Device(1):
        stream = cupy.cuda.Stream()
    with pytest.raises(RuntimeError, match="differs from the device of the stream"):
        with stream:
            pass
    with cupy.cuda.ExternalStream(1234, 0) as s:
        assert cupy.cuda.get_current_stream() is s


def test_interchange_both_ways(cupy):
    x = cupy.arange(6, dtype=cupy.float32)[::2]
    cai = x.__cuda_array_interface__
    assert cai["data"][0] == x.data.ptr and cai["strides"] == (8,) and cai["version"] == 3

    class Cai:
        __cuda_array_interface__ = cai

    y = cupy.asarray(Cai())
    assert y.data.ptr == x.data.ptr and y.get().tolist() == [0.0, 2.0, 4.0]

    class Dl:
        def __dlpack__(self, **kw):
            return x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    z = cupy.from_dlpack(Dl())
    assert z.data.ptr == x.data.ptr and z.strides == x.strides
    with pytest.raises((RuntimeError, BufferError)):
        np.from_dlpack(Dl())  # the capsule says CUDA: NumPy refuses it


def test_cupy_13_has_no_bfloat16(cupy, monkeypatch):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    monkeypatch.setitem(cupy._state.VERSION, "major", 13)
    with pytest.raises(NotImplementedError, match="bfloat16"):
        cupy.zeros(3, dtype=ml_dtypes.bfloat16)
