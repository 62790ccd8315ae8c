"""``top_k(..., out=(values, indices))``: checks that the preallocated outputs fit the call, before
any work, and views them as the backend's arrays."""

from __future__ import annotations

import numpy as np

from . import _dtypes


def _fail(exc, name: str, message: str):
    return exc(f"out: {name} {message}")


def _overlap(a, b) -> bool:
    """Whether the memory ranges of two arrays of one backend overlap (bounds only: cheap)."""
    if isinstance(a, np.ndarray):
        return np.may_share_memory(a, b)
    import cupy

    return cupy.may_share_memory(a, b)


def _as_backend_array(obj, name: str, arr):
    """The output ``obj`` as an array of the input's backend (a view of the same memory)."""
    if isinstance(arr, np.ndarray):
        if isinstance(obj, np.ndarray) and not isinstance(obj, np.ma.MaskedArray):
            return obj
        if type(obj).__module__.split(".")[0] == "torch" and obj.device.type == "cpu":
            return _torch_view(obj, name, "cpu")
        raise _fail(TypeError, name, f"must be a NumPy array like the input, got {type(obj).__qualname__}")
    module = type(obj).__module__.split(".")[0]
    if module == "torch" and obj.device.type == "cuda":
        return _torch_view(obj, name, "cuda")
    if module != "cupy":
        raise _fail(
            TypeError,
            name,
            f"must be a GPU array like the input, got {type(obj).__module__}.{type(obj).__qualname__}",
        )
    return obj


def _torch_view(t, name: str, device: str):
    import torch

    if t.layout is not torch.strided or t.is_quantized:
        raise _fail(TypeError, name, f"must be a dense tensor, got layout {t.layout}, dtype {t.dtype}")
    if t.is_neg() or t.is_conj():
        raise _fail(ValueError, name, "is a lazily negated or conjugated view; pass a plain tensor")
    if t.requires_grad:
        raise _fail(ValueError, name, "requires grad; outputs written in place cannot carry a gradient")
    if device == "cpu":
        from ._interop import host_view

        return host_view(t, f"out: {name}")
    import cupy

    with cupy.cuda.Device(t.device.index):
        return cupy.from_dlpack(t)


def check(out, call, arr):
    """``(values, indices)`` of ``out`` as the backend's arrays, after checking that each is an
    array of the input's kind and device, of the result's shape and dtype, C-contiguous, writeable,
    and overlapping neither the input nor the other output."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"out: expected a pair (values, indices) of arrays, got {type(out).__name__}")
    req = call.req
    expected = ((_dtypes_of(arr), "values"), (req.index_dtype, "indices"))
    views = []
    for obj, (dtype, name) in zip(out, expected, strict=True):
        view = _as_backend_array(obj, name, arr)
        if tuple(view.shape) != call.result_shape:
            raise _fail(ValueError, name, f"must have shape {call.result_shape}, got {tuple(view.shape)}")
        if view.dtype != dtype:
            raise _fail(TypeError, name, f"must have dtype {dtype}, got {view.dtype}")
        if not view.flags.c_contiguous:
            raise _fail(ValueError, name, "must be C-contiguous")
        if isinstance(view, np.ndarray) and not view.flags.writeable:
            raise _fail(ValueError, name, "is read-only")
        if not isinstance(view, np.ndarray) and view.device.id != arr.device.id:
            raise _fail(
                ValueError, name, f"is on device {view.device.id}, the input on device {arr.device.id}"
            )
        if _overlap(view, arr):
            raise _fail(ValueError, name, "overlaps the input")
        views.append(view)
    if _overlap(*views):
        raise ValueError("out: values and indices overlap each other")
    return tuple(views)


def _dtypes_of(arr) -> np.dtype:
    return _dtypes.as_numpy_dtype(arr.dtype)
