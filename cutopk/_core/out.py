"""``top_k(..., out=(values, indices))``: checks that the preallocated outputs fit the call, before
any work, and views them as the backend's arrays."""

from __future__ import annotations

import numpy as np

from .._interop import is_torch_tensor


def _fail(exc, name: str, message: str):
    return exc(f"out: {name} {message}")


def _overlap(a, b) -> bool:
    """Whether the memory ranges of two arrays of one backend overlap (bounds only: cheap)."""
    if isinstance(a, np.ndarray):
        return np.may_share_memory(a, b)
    import cupy

    return cupy.may_share_memory(a, b)


def _as_backend_array(obj, name: str, dtype, arr):
    """The output ``obj`` as an array of the input's backend (a view of the same memory)."""
    if isinstance(arr, np.ndarray):
        if isinstance(obj, np.ndarray) and not isinstance(obj, np.ma.MaskedArray):
            return obj
        if is_torch_tensor(obj) and obj.device.type == "cpu":
            return _torch_view(obj, name, "cpu", dtype)
        raise _fail(TypeError, name, f"must be a NumPy array like the input, got {type(obj).__qualname__}")
    if is_torch_tensor(obj) and obj.device.type == "cuda":
        return _torch_view(obj, name, "cuda", dtype)
    if type(obj).__module__.split(".")[0] != "cupy":
        raise _fail(
            TypeError,
            name,
            f"must be a GPU array like the input, got {type(obj).__module__}.{type(obj).__qualname__}",
        )
    return obj


def _torch_view(t, name: str, device: str, dtype):
    import torch

    if t.layout is not torch.strided or t.is_quantized:
        raise _fail(TypeError, name, f"must be a dense tensor, got layout {t.layout}, dtype {t.dtype}")
    if t.dtype == torch.bfloat16 and dtype.name != "bfloat16":
        # Refused by its torch dtype: viewing it would need ml_dtypes, only to refuse it then.
        raise _fail(TypeError, name, f"must have dtype {dtype}, got bfloat16")
    if t.is_neg() or t.is_conj():
        raise _fail(ValueError, name, "is a lazily negated or conjugated view; pass a plain tensor")
    if t.requires_grad:
        raise _fail(ValueError, name, "requires grad; outputs written in place cannot carry a gradient")
    if device == "cpu":
        from .._interop import host_view

        return host_view(t)
    import cupy

    from .._interop import from_dlpack

    with cupy.cuda.Device(t.device.index):
        return from_dlpack(cupy, t, f"out: {name}")


def check(out, call, arr):
    """``(values, indices)`` of ``out`` as the backend's arrays, after checking that each is an
    array of the input's kind and device, of the result's shape and dtype, C-contiguous, writeable,
    and overlapping neither the input nor the other output."""
    if type(out) not in (tuple, list) or len(out) != 2:
        raise TypeError(f"out: expected a pair (values, indices) of arrays, got {type(out).__name__}")
    shape = call.result_shape
    views = (
        _checked(out[0], "values", call.dtype, shape, arr),
        _checked(out[1], "indices", call.req.index_dtype, shape, arr),
    )
    if call.req.backend != "numpy":  # the kernels write whole elements: a misaligned one faults
        for name, view in zip(("values", "indices"), views, strict=True):
            ptr = view.ctypes.data if isinstance(view, np.ndarray) else view.data.ptr
            if ptr % view.dtype.itemsize:
                raise _fail(
                    ValueError,
                    name,
                    f"must be aligned to its element size ({view.dtype.itemsize} bytes) on backend "
                    f"{call.req.backend!r}, got an address {ptr % view.dtype.itemsize} bytes past a multiple of it",
                )
    if _overlap(*views):
        raise ValueError("out: values and indices overlap each other")
    return views


def _checked(obj, name: str, dtype, shape, arr):
    view = _as_backend_array(obj, name, dtype, arr)
    if view.shape != shape:
        raise _fail(ValueError, name, f"must have shape {shape}, got {tuple(view.shape)}")
    if view.dtype != dtype:
        raise _fail(TypeError, name, f"must have dtype {dtype}, got {view.dtype}")
    flags = view.flags
    if not flags.c_contiguous:
        raise _fail(ValueError, name, "must be C-contiguous")
    if isinstance(view, np.ndarray):
        if not flags.writeable:
            raise _fail(ValueError, name, "is read-only")
    elif view.device.id != arr.device.id:
        raise _fail(ValueError, name, f"is on device {view.device.id}, the input on device {arr.device.id}")
    if _overlap(view, arr):
        raise _fail(ValueError, name, "overlaps the input")
    return view
