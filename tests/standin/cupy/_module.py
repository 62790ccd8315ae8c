"""``cupy.RawModule`` of the stand-in: the source compiled for the CPU simulator, loaded per
device, launched with CuPy's argument packing on the current stream."""

from __future__ import annotations

import threading

import numpy as np

from . import _state, cuda

_COMPILED: dict[tuple, object] = {}
_LOCK = threading.Lock()


def _simulated(code: str, options: tuple, names: tuple):
    from cutopk import sim

    key = (code, options, names)
    with _LOCK:
        mod = _COMPILED.get(key)
        if mod is None:
            mod = _COMPILED[key] = sim.RawModule(code=code, options=options, name_expressions=names)
    return mod


class RawModule:
    """``cupy.RawModule(code=..., options=..., name_expressions=...)``; compiled on first use."""

    def __init__(
        self,
        code=None,
        path=None,
        options=(),
        backend="nvrtc",
        translate_cucomplex=False,
        *,
        enable_cooperative_groups=False,
        name_expressions=None,
        jitify=False,
    ):
        if (code is None) == (path is None):
            raise TypeError("Exactly one of `code` and `path` keyword arguments should be given.")
        if path is not None:
            raise NotImplementedError("the stand-in compiles source code only (code=...)")
        if not isinstance(options, tuple):
            raise TypeError(f"options must be a tuple, got {type(options).__name__}")
        self.code, self.options = code, options
        self.name_expressions = tuple(name_expressions) if name_expressions is not None else None
        self._functions: dict[tuple, Function] = {}

    def get_function(self, name: str):
        """A kernel of the module loaded on the current device: a name expression exactly as
        given, or an ``extern "C"`` name."""
        names = self.name_expressions or ()
        if "<" in name and name not in names:
            raise _state.CUDADriverError(
                f"CUDA_ERROR_NOT_FOUND: named symbol not found ({name!r} is not one of the name expressions)"
            )
        device = _state.THREAD.device
        key = (name, device)
        fn = self._functions.get(key)
        if fn is None:
            sim_fn = _simulated(self.code, self.options, names).get_function(name)
            fn = self._functions[key] = Function(sim_fn, name, device)
        return fn


def _scalar(x):
    """A Python or NumPy scalar as CuPy's CScalar packs it."""
    if type(x) is bool:
        return np.bool_(x)
    if type(x) is int:
        return np.uint64(x) if x >= 1 << 63 else np.int64(x)
    if type(x) is float:
        return np.float64(x)
    if type(x) is complex:
        return np.complex128(x)
    if isinstance(x, np.generic):
        return x
    raise TypeError(f"Unsupported type {type(x)}")


class Function:
    """A kernel loaded on one device; ``fn(grid, block, args, shared_mem=, stream=)``."""

    def __init__(self, sim_fn, name: str, device: int):
        self._sim, self.name, self._device = sim_fn, name, device
        self._max_shared = 48 * 1024

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        return self._max_shared

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value: int) -> None:
        limit = _state.DEVICES[self._device]["MaxSharedMemoryPerBlockOptin"]
        if not 0 <= int(value) <= limit:
            raise _state.CUDADriverError(
                f"CUDA_ERROR_INVALID_VALUE: max_dynamic_shared_size_bytes={value} is above the device's {limit}"
            )
        self._max_shared = int(value)

    def _pack(self, x):
        from . import ndarray

        if x is None:
            return None
        if isinstance(x, ndarray):
            if x._device != self._device:
                raise _state.CUDADriverError(
                    f"CUDA_ERROR_ILLEGAL_ADDRESS: an array of device {x._device} passed to a launch on "
                    f"device {self._device}"
                )
            return x._host()
        if isinstance(x, cuda.MemoryPointer):
            raise NotImplementedError("the stand-in does not pass raw MemoryPointer arguments")
        if isinstance(x, np.ndarray):
            if x.size == 1:
                return x.reshape(()).dtype.type(x.reshape(())[()])
            raise TypeError(
                f"You are trying to pass a numpy.ndarray of shape {x.shape} as a kernel parameter. "
                "Only numpy.ndarrays of size one can be passed by value. If you meant to pass a pointer "
                "to __global__ memory, you need to pass a cupy.ndarray instead."
            )
        return _scalar(x)

    def __call__(self, grid, block, args, shared_mem=0, stream=None, enable_cooperative_groups=False):
        current = _state.THREAD.device
        if current != self._device:
            raise _state.CUDADriverError(
                f"CUDA_ERROR_INVALID_HANDLE: kernel {self.name!r} was loaded on device {self._device}, "
                f"launched on device {current}"
            )
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"args must be a tuple or a list, got {type(args).__name__}")
        packed = tuple(self._pack(x) for x in args)
        if stream is None:
            stream = cuda.get_current_stream()
        elif stream.device_id not in (-1, current):
            raise _state.CUDADriverError("CUDA_ERROR_INVALID_HANDLE: a stream of another device")
        limit, sim_fn = self._max_shared, self._sim

        def run():
            sim_fn.max_dynamic_shared_size_bytes = limit
            sim_fn(grid, block, packed, shared_mem=shared_mem)

        _state.LAUNCHES.append(("kernel", self.name))
        stream.enqueue(run)
