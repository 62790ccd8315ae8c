"""Zero-copy exchange with other GPU array libraries (torch first), and device/stream scoping.

The CUDA backend works on CuPy arrays. A torch CUDA tensor (or any array with DLPack or
``__cuda_array_interface__``) is wrapped as a CuPy array without a copy, the work runs on that
array's device and on the caller's current stream (torch's, for a torch tensor, so the result is
ordered after the work that produced the input), and the outputs are handed back as the caller's
array type, again without a copy.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

import numpy as np


def is_torch_tensor(a: object) -> bool:
    """Whether ``a`` is a torch tensor, a subclass's too: the one place that decides it. Torch is
    never imported here: where the caller has not imported it, no object can be a tensor
    (TorchDynamo folds this test on a traced tensor)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, getattr(torch, "Tensor", ()))


def requires_grad(*arrays: object) -> bool:
    """Whether one of ``arrays`` may be a tensor autograd records (torch is not imported here:
    :mod:`cutopk._core.autograd` makes the exact check)."""
    return any(type(a) is not np.ndarray and getattr(a, "requires_grad", False) for a in arrays)


def import_cupy():
    """Import CuPy, or raise the RuntimeError of docs/SPEC.md saying what is missing."""
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
    and ``scope`` is a :class:`DeviceScope` that makes the array's device (and for a torch
    tensor, torch's current stream and caching allocator) current while the kernels are launched.
    A scope can be entered any number of times, nested too: a first call plans in it, then
    launches in it again. For a CuPy array on the current device it does nothing (CuPy's current
    stream and allocator are already the caller's).
    """
    cupy = import_cupy()
    if isinstance(a, cupy.ndarray):
        device = a.device.id
        if device == cupy.cuda.runtime.getDevice():
            return a, identity, NO_SCOPE
        return a, identity, DeviceScope(cupy, device)
    if is_torch_tensor(a):
        import torch

        a = exportable_tensor(a)
        device = a.device.index
        stream = torch.cuda.current_stream(a.device)
        external = cupy.cuda.ExternalStream(stream.cuda_stream, device)
        # Exported on its own device and stream: torch refuses a tensor of another device than
        # the current one, and a stream mismatch would make it insert a cross-stream wait
        # (which breaks CUDA graph capture).
        with cupy.cuda.Device(device), external:
            arr = from_dlpack(cupy, a)  # exportable_tensor detached it
        return (
            arr,
            torch.from_dlpack,
            DeviceScope(cupy, device, external, _torch_allocator(torch, cupy, device)),
        )
    if hasattr(a, "__cuda_array_interface__"):
        arr = cupy.asarray(a)  # zero-copy for __cuda_array_interface__ producers
        return arr, identity, DeviceScope(cupy, arr.device.id)
    arr = from_dlpack(cupy, a)
    return arr, identity, DeviceScope(cupy, arr.device.id)


def from_dlpack(cupy, obj, name: str = "a"):
    """``cupy.from_dlpack(obj)``, with the NotImplementedError of a CuPy without bfloat16 (before
    14.0, or without ml_dtypes) turned into a TypeError that names the argument and the fix."""
    try:
        return cupy.from_dlpack(obj)
    except NotImplementedError as exc:
        if "bfloat16" not in str(exc):
            raise
        raise TypeError(
            f"{name}: bfloat16 on the GPU needs CuPy >= 14.0 with ml_dtypes installed, but this is "
            f"CuPy {cupy.__version__} ({exc}); upgrade CuPy or pass float16/float32"
        ) from None


NO_SCOPE = contextlib.nullcontext()  # re-enterable, and does nothing


class DeviceScope:
    """The device, stream and allocator a call on a GPU array launches with.

    Each ``with`` enters fresh CuPy contexts (a context manager made by
    :func:`contextlib.contextmanager` can be entered once only; this one is entered to plan and
    again to launch). ``allocator``: CuPy allocator for every array made in the scope (outputs,
    scratch): for torch inputs, torch's caching allocator, which serves memory during CUDA graph
    capture, where CuPy's pool would call cudaMalloc, which capture forbids."""

    def __init__(self, cupy, device_id: int, stream=None, allocator=None):
        self._cupy, self.device_id, self.stream, self.allocator = cupy, device_id, stream, allocator
        self._entered: list[contextlib.ExitStack] = []

    def __enter__(self):
        cuda = self._cupy.cuda
        with contextlib.ExitStack() as stack:
            stack.enter_context(cuda.Device(self.device_id))
            if self.stream is not None:
                stack.enter_context(self.stream)
            if self.allocator is not None:
                stack.enter_context(cuda.using_allocator(self.allocator))
            self._entered.append(stack.pop_all())
        return self

    def __exit__(self, *exc):
        return self._entered.pop().__exit__(*exc)


def _torch_allocator(torch, cupy, device_id: int):
    """A CuPy allocator taking memory from torch's caching allocator on ``device_id`` (each block
    a uint8 tensor, kept alive by the CuPy memory that wraps it)."""
    device = torch.device("cuda", device_id)
    cuda = cupy.cuda

    def allocate(size: int):
        block = torch.empty(size, dtype=torch.uint8, device=device)
        return cuda.MemoryPointer(cuda.UnownedMemory(block.data_ptr(), size, block, device_id), 0)

    return allocate


def as_host(a) -> tuple[Any, Callable[[Any], Any]]:
    """A CPU input as NumPy without a copy, and the function that returns NumPy results as the
    caller's type (torch CPU tensor in, torch tensor out, sharing memory).

    Torch tensors are detached first (torch refuses to export a tensor that requires grad), and
    bfloat16 ones cross as int16 bits reinterpreted as ``ml_dtypes.bfloat16`` (NumPy's DLPack has
    no bfloat16)."""
    from ._request.checks import as_host_array

    if not is_torch_tensor(a):
        return as_host_array(a), identity
    import torch

    t = exportable_tensor(a)
    if t.dtype != torch.bfloat16:
        return np.from_dlpack(t), torch.from_numpy
    import ml_dtypes

    def back(result):
        if result.dtype == ml_dtypes.bfloat16:
            return torch.from_numpy(result.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(result)

    return host_view(t), back


def host_view(t):
    """A NumPy view of a strided torch CPU tensor's memory; a bfloat16 one crosses as int16 bits
    reinterpreted as ``ml_dtypes.bfloat16`` (NumPy's DLPack has no bfloat16). Every caller has
    refused bfloat16 before where ml_dtypes is missing (bfloat16 is then no supported dtype)."""
    import torch

    if t.dtype != torch.bfloat16:
        return np.from_dlpack(t)
    import ml_dtypes

    return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)


def exportable_tensor(t, name: str = "a"):
    """A torch tensor as DLPack can export it faithfully: detached (torch refuses to export one
    that requires grad), with its lazy negation and conjugation applied. DLPack carries neither
    bit, so a view such as ``x.conj().imag`` would otherwise be read with the wrong sign. Sparse
    and quantized tensors have no strided memory to share and are refused."""
    import torch

    if t.layout is not torch.strided:
        raise TypeError(
            f"{name}: expected a dense (strided) tensor, got layout {t.layout}; call .to_dense() first"
        )
    check_untransformed(t, name)
    if t.is_quantized:
        raise TypeError(
            f"{name}: unsupported dtype {t.dtype} (expected one of {_supported_names()}; "
            "quantized tensors: call .dequantize() first)"
        )
    _check_torch_dtype(t.dtype, name)
    t = t.detach()
    if t.is_neg():
        t = t.resolve_neg()
    if t.is_conj():
        t = t.resolve_conj()
    return t


def check_untransformed(t, name: str) -> None:
    """Refuse a tensor a ``torch.func`` transform wraps where a call reads its memory or runs
    autograd's path (which ``torch.func`` refuses): only the calls that cross cutopk's torch
    operators work under a transform (cutopk/_core/transforms.py), and this says how to make one."""
    import torch

    if torch._C._functorch.is_functorch_wrapped_tensor(t):
        raise TypeError(
            f"{name}: under a torch.func transform, cutopk takes only the arguments its torch operators "
            "take: k and axis as ints, sorted as a bool or str, lengths and offsets as tensors or NumPy "
            "arrays, merge parts of tensors; no out= and no max_length="
        )


def _check_torch_dtype(dtype, name: str) -> None:
    """Refuse, before any work, a torch dtype that DLPack cannot carry faithfully: float8, complex32
    and bits types have no DLPack export (torch raises from inside), and uint1..uint7 /
    int1..int7 would be read as 8-bit integers. NumPy's own bool and complex dtypes go on to the
    usual checks and their messages (an argument's own, such as ``offsets``'); a dtype that
    only ml_dtypes gives NumPy (complex32, float8: ``isbuiltin`` 2) does not cross."""
    from ._request import dtypes as _dtypes

    try:
        dt = _dtypes.as_numpy_dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or (dt not in _dtypes.SUPPORTED and not (dt.kind in "bc" and dt.isbuiltin == 1)):
        raise TypeError(f"{name}: unsupported dtype {dtype} (expected one of {_supported_names()})")


def _supported_names() -> str:
    from ._request import dtypes as _dtypes

    return ", ".join(i.name for i in _dtypes.SUPPORTED.values())


def identity(x):
    return x


def misaligned(a) -> bool:
    """Whether a CuPy array has an element at an address that is no multiple of its size (a
    view some bytes into its buffer): CuPy's own kernels, a copy among them, fault reading it."""
    size = a.dtype.itemsize
    return a.size > 0 and (a.data.ptr % size != 0 or any(st % size for st in a.strides))


def aligned_copy(a):
    """A C-ordered copy of the CuPy array ``a`` in new memory, read byte by byte. CuPy's copy
    reads whole elements, so copying a misaligned view (see :func:`misaligned`) faults on a GPU
    (cudaErrorMisalignedAddress); a copy of its bytes viewed as uint8
    cannot, and new memory is aligned for every dtype."""
    cupy = sys.modules[type(a).__module__.split(".")[0]]
    size = a.dtype.itemsize
    as_bytes = cupy.ndarray((*a.shape, size), np.uint8, memptr=a.data, strides=(*a.strides, 1))
    # copy(), not ascontiguousarray(): the bytes of a contiguous array are contiguous already.
    return as_bytes.copy(order="C").view(a.dtype).reshape(a.shape)


def array_module(of):
    """The array module (NumPy or CuPy) of an array, or of a name: ``"cupy"`` and the launcher's
    ``"cuda"`` target give CuPy; ``"numpy"`` and ``"sim"`` (the simulator works on NumPy arrays)
    give NumPy. An array's own module is read from its type, so CuPy is never imported for a
    NumPy array."""
    if isinstance(of, str):
        if of in ("cupy", "cuda"):
            import cupy

            return cupy
        return np
    if isinstance(of, np.ndarray):
        return np
    return sys.modules[type(of).__module__.split(".")[0]]
