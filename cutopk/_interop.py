"""Zero-copy exchange with other GPU array libraries (torch first), and device/stream scoping.

The CUDA backend works on CuPy arrays. A torch CUDA tensor (or any array with DLPack or
``__cuda_array_interface__``) is wrapped as a CuPy array without a copy, the work runs on that
array's device and on the caller's current stream (torch's, for a torch tensor, so the result is
ordered after the work that produced the input), and the outputs are handed back as the caller's
array type, again without a copy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any


def _module_of(a) -> str:
    return type(a).__module__.split(".")[0]


def import_cupy():
    """Import CuPy, or raise the RuntimeError of SPEC.md saying what is missing."""
    try:
        import cupy
    except ImportError as exc:
        raise RuntimeError(
            "backend: 'cuda' needs CuPy and a CUDA GPU, but CuPy is not installed "
            f"({exc}); install cutopk[cuda12] or cutopk[cuda13]"
        ) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CuPy raises several driver/runtime error types
        raise RuntimeError(f"backend: 'cuda' needs a usable CUDA GPU, but CuPy reports: {exc}") from None
    if count == 0:
        raise RuntimeError("backend: 'cuda' needs a CUDA GPU, but CuPy found none")
    return cupy


def as_cupy(a) -> tuple[Any, Callable[[Any], Any], contextlib.AbstractContextManager]:
    """Wrap a GPU array as CuPy without a copy.

    Returns ``(array, back, scope)``: ``back`` converts a CuPy result to the caller's array type,
    and ``scope`` is a context manager that makes the array's device and the caller's stream
    current while the kernels are launched.
    """
    cupy = import_cupy()
    if isinstance(a, cupy.ndarray):
        return a, _identity, _device_scope(cupy, a.device.id, None)
    if _module_of(a) == "torch":
        import torch

        arr = cupy.from_dlpack(a.detach())
        stream = torch.cuda.current_stream(a.device)
        external = cupy.cuda.ExternalStream(stream.cuda_stream, a.device.index)
        return arr, torch.from_dlpack, _device_scope(cupy, a.device.index, external)
    if hasattr(a, "__cuda_array_interface__"):
        arr = cupy.asarray(a)  # zero-copy for __cuda_array_interface__ producers
        return arr, _identity, _device_scope(cupy, arr.device.id, None)
    arr = cupy.from_dlpack(a)
    return arr, _identity, _device_scope(cupy, arr.device.id, None)


def host_result_converter(a) -> Callable[[Any], Any]:
    """For a CPU input: return NumPy results as the caller's type (torch CPU tensor in, torch
    tensor out, sharing memory); NumPy arrays and anything else get NumPy arrays."""
    if _module_of(a) == "torch":
        import torch

        return torch.from_numpy
    return _identity


def _identity(x):
    return x


@contextlib.contextmanager
def _device_scope(cupy, device_id: int, stream):
    with cupy.cuda.Device(device_id):
        if stream is None:
            yield
        else:
            with stream:
                yield
