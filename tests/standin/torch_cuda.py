"""torch CUDA tensors on the CPU build of torch, over the CuPy stand-in's two devices.

A CUDA tensor here is a CPU tensor of a subclass (one per device) whose ``device`` says
``cuda:i`` and ``is_cuda`` True, so torch's own ``__cuda_array_interface__`` runs (and raises
RuntimeError for a tensor that requires grad, as on a GPU). :func:`install` patches what cutopk
touches: ``torch.cuda.current_stream``, ``torch.empty(..., device="cuda")`` (the caching
allocator: legal during capture), ``torch.from_dlpack`` of a stand-in CuPy array,
``torch.cuda.graph``/``CUDAGraph`` (a capture on ``stream=`` or torch's default capture stream
that records the stand-in's launches; ``replay`` runs them), ``torch.cuda.Stream`` and
``torch.cuda.stream``. ``__dlpack__`` refuses, during a capture, a consumer stream
other than torch's current one: torch would insert a cross-stream wait, which breaks capture.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from .cupy import _dlpack, _state
from .cupy import cuda as _cuda

# Per device, the stack of streams made current (by torch.cuda.graph); empty: the default stream.
_STREAMS: dict[int, list[int]] = {0: [], 1: []}


class _Stream:
    def __init__(self, ptr: int, device: int):
        self.cuda_stream, self.device_index = ptr, device
        self.device = torch.device("cuda", device)

    def synchronize(self):
        _state.host_waits("sync", "torch: cudaStreamSynchronize")

    def wait_stream(self, other):
        """Device-side ordering: the host does not wait."""


def synchronize(device=None) -> None:
    """``torch.cuda.synchronize``: the host waits for the device."""
    _state.host_waits("sync", "torch: cudaDeviceSynchronize")


def current_stream(device=None) -> _Stream:
    index = device.index if isinstance(device, torch.device) else device
    index = _state.THREAD.device if index is None else int(index)
    stack = _STREAMS[index]
    return _Stream(stack[-1] if stack else 0, index)


class CudaTensor(torch.Tensor):
    """Base of the per-device classes below."""

    _index = 0

    @property
    def device(self):
        return torch.device("cuda", self._index)

    @property
    def is_cuda(self):
        return True

    def __dlpack_device__(self):
        return (_dlpack.KDL_CUDA, self._index)

    def __dlpack__(self, stream=None, **kwargs):
        if stream is not None and type(stream) is not int:
            raise TypeError("stream must be ``int`` or ``none``")
        ours = current_stream(self._index).cuda_stream
        theirs = 0 if stream in (None, 1, 2) else stream
        if theirs != ours and ours in _state.CAPTURING:
            raise RuntimeError(
                "torch would make the consumer's stream wait on the capturing stream: "
                "operation not permitted when stream is capturing"
            )
        if self.requires_grad:
            raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
        plain = self.as_subclass(torch.Tensor)
        if plain.dtype == torch.bfloat16:
            capsule = plain.view(torch.int16).__dlpack__()
            _dlpack.managed(capsule).dl_tensor.dtype = _dlpack.DLDataType(_dlpack.KDL_BFLOAT, 16, 1)
        else:
            capsule = plain.__dlpack__()
        _dlpack.managed(capsule).dl_tensor.device = _dlpack.DLDevice(_dlpack.KDL_CUDA, self._index)
        return capsule

    # The host reading the device (each waits for the stream): counted in the CuPy stand-in's
    # _state.HOST_WAITS and refused while a stream captures, as on a GPU.

    def _read(self, what: str) -> torch.Tensor:
        _state.host_waits("read", f"torch: {what} of a CUDA tensor of shape {tuple(self.shape)}")
        return self.as_subclass(torch.Tensor)

    def cpu(self, *args, **kwargs):
        return self._read("cpu()").clone()

    def numpy(self, *args, **kwargs):
        raise TypeError(
            "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
        )

    def item(self):
        return self._read("item()").item()

    def tolist(self):
        return self._read("tolist()").tolist()

    def __bool__(self):
        return bool(self._read("bool()"))

    def __int__(self):
        return int(self._read("int()"))

    def __float__(self):
        return float(self._read("float()"))

    def __index__(self):
        return self._read("operator.index()").__index__()

    def detach(self):
        # Inside a custom operator (torch.ops.cutopk.*) torch disables subclass dispatch, so the
        # inherited detach would return a plain CPU tensor; a real CUDA tensor stays on its device.
        return super().detach().as_subclass(type(self))


class CudaTensor0(CudaTensor):
    _index = 0


class CudaTensor1(CudaTensor):
    _index = 1


_CLASSES = (CudaTensor0, CudaTensor1)
for _cls in (CudaTensor, *_CLASSES):
    _cls.__module__ = "torch"  # what cutopk (and any library) reads to tell a torch tensor


def on_device(t: torch.Tensor, index: int = 0) -> CudaTensor:
    """The CPU tensor ``t``'s memory as a tensor on ``cuda:index`` (no copy)."""
    out = t.as_subclass(_CLASSES[index])
    storage = t.untyped_storage()
    if storage.nbytes():
        ptr = storage.data_ptr()
        _state.register(
            _state.Region(ptr, storage.nbytes(), index, _state.host_bytes(ptr, storage.nbytes()), t)
        )
    return out


def to_cuda(x, index: int = 0, **kwargs) -> CudaTensor:
    """A copy of ``x`` (NumPy array or CPU tensor) on ``cuda:index``."""
    t = torch.as_tensor(np.asarray(x) if isinstance(x, np.ndarray) else x, **kwargs).clone()
    return on_device(t, index)


def _cuda_index(device) -> int | None:
    if device is None:
        return None
    device = torch.device(device) if not isinstance(device, torch.device) else device
    if device.type != "cuda":
        return None
    return _state.THREAD.device if device.index is None else device.index


class CUDAGraph:
    def __init__(self):
        self._graph = None

    def replay(self):
        self._graph.launch()


class Stream(_Stream):
    """``torch.cuda.Stream``: a new stream on the current device (``cuda_stream``: its pointer)."""

    def __init__(self, device=None, priority=0):
        index = _cuda_index(device) if device is not None else _state.THREAD.device
        super().__init__(_cuda.Stream(non_blocking=True).ptr, index)


@contextlib.contextmanager
def stream(s):
    """``torch.cuda.stream``: ``s`` current on its device for the block (None: no change)."""
    if s is None:
        yield
        return
    _STREAMS[s.device_index].append(s.cuda_stream)
    try:
        yield
    finally:
        _STREAMS[s.device_index].pop()


_CAPTURE_STREAMS: dict[int, int] = {}  # torch's default capture stream, one per device


@contextlib.contextmanager
def graph(cuda_graph: CUDAGraph, pool=None, stream=None, capture_error_mode="global"):
    """``torch.cuda.graph``: capture on ``stream`` if given, else on torch's default capture
    stream (a side stream of the current device, made once and shared by every graph)."""
    device = _state.THREAD.device if stream is None else stream.device_index
    if stream is None:
        if device not in _CAPTURE_STREAMS:
            _CAPTURE_STREAMS[device] = _cuda.Stream(non_blocking=True).ptr
        ptr = _CAPTURE_STREAMS[device]
    else:
        ptr = stream.cuda_stream
    side = _cuda.ExternalStream(ptr, device)
    _STREAMS[device].append(ptr)
    side.begin_capture()
    try:
        yield
    finally:
        cuda_graph._graph = side.end_capture()
        _STREAMS[device].pop()


def install(monkeypatch) -> None:
    """Patch torch for the duration of a test (``monkeypatch``: pytest's fixture)."""
    empty = torch.empty
    from_dlpack = torch.from_dlpack

    def patched_empty(*size, device=None, **kwargs):
        index = _cuda_index(device)
        if index is None:
            return empty(*size, device=device, **kwargs)
        return on_device(empty(*size, **kwargs), index)

    def patched_from_dlpack(x):
        import cupy

        if isinstance(x, cupy.ndarray):
            host = x._host()
            if host.dtype.name == "bfloat16":
                t = torch.from_numpy(host.view(np.int16)).view(torch.bfloat16)
            else:
                t = torch.from_numpy(host)
            return t.as_subclass(_CLASSES[x.device.id])
        return from_dlpack(x)

    monkeypatch.setattr(torch, "empty", patched_empty)
    monkeypatch.setattr(torch, "from_dlpack", patched_from_dlpack)
    monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "stream", stream)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", CUDAGraph)
    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(_state.DEVICES))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: _state.THREAD.device)
    for stack in _STREAMS.values():
        stack.clear()
