"""``cupy.cuda`` of the stand-in: devices, streams and capture, memory and allocators."""

from __future__ import annotations

import contextlib
import time

from .. import _state
from . import memory, runtime
from .memory import (
    BaseMemory,
    Memory,
    MemoryPointer,
    MemoryPool,
    OutOfMemoryError,
    UnownedMemory,
    alloc,
    get_allocator,
    set_allocator,
)

__all__ = [
    "BaseMemory",
    "Device",
    "Event",
    "ExternalStream",
    "Graph",
    "Memory",
    "MemoryPointer",
    "MemoryPool",
    "OutOfMemoryError",
    "Stream",
    "UnownedMemory",
    "alloc",
    "get_allocator",
    "get_current_stream",
    "get_elapsed_time",
    "memory",
    "runtime",
    "set_allocator",
    "set_pinned_memory_allocator",
    "using_allocator",
]


class Device:
    """A device; ``with Device(i):`` makes it current and restores the previous one after."""

    def __init__(self, device=None):
        if device is None:
            device = _state.THREAD.device
        elif isinstance(device, Device):
            device = device.id
        self.id = _state.check_device(device)
        self._previous: list[int] = []

    def __enter__(self):
        self._previous.append(_state.THREAD.device)
        _state.THREAD.device = self.id
        return self

    def __exit__(self, *exc):
        _state.THREAD.device = self._previous.pop()

    def use(self):
        _state.THREAD.device = self.id

    def synchronize(self):
        _state.host_waits("sync", "cudaDeviceSynchronize")

    @property
    def attributes(self) -> dict:
        facts = _state.DEVICES[self.id]
        return {k: v for k, v in facts.items() if k[0].isupper()}

    @property
    def compute_capability(self) -> str:
        return _state.DEVICES[self.id]["compute_capability"]

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __int__(self):
        return self.id

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


class Event:
    """``cupy.cuda.Event``: recording or a stream waiting on it is device-side; ``synchronize``
    makes the host wait (counted in ``_state.HOST_WAITS``, refused while a stream captures).
    The time it records is the host's clock when the stream reaches it (kernels run at once on
    the simulator, or at a graph's replay): ``get_elapsed_time`` works, its numbers meaningless."""

    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.recorded = False
        self.disable_timing = disable_timing
        self.time: float | None = None

    def record(self, stream=None):
        self.recorded = True
        (stream or get_current_stream()).enqueue(self._stamp)

    def _stamp(self) -> None:
        self.time = time.perf_counter()

    def synchronize(self):
        _state.host_waits("sync", "cudaEventSynchronize")

    @property
    def done(self) -> bool:  # cudaEventQuery: the host asks, it does not wait
        return True


class Graph:
    """What ``end_capture`` returns: the launches recorded on the stream, run by ``launch``."""

    def __init__(self, work: list):
        self._work = list(work)

    def launch(self, stream=None):
        for run in self._work:
            run()

    def upload(self, stream=None):
        pass


class _BaseStream:
    ptr: int
    device_id: int

    def __enter__(self):
        self._check_device()
        _state.THREAD.streams.setdefault(_state.THREAD.device, []).append(self)
        return self

    def __exit__(self, *exc):
        _state.THREAD.streams[_state.THREAD.device].pop()

    def use(self):
        self._check_device()
        stack = _state.THREAD.streams.setdefault(_state.THREAD.device, [])
        if stack:
            stack[-1] = self
        else:
            stack.append(self)
        return self

    def _check_device(self):
        current = _state.THREAD.device
        if self.device_id not in (-1, current):
            raise RuntimeError(
                f"The current device ({current}) differs from the device of the stream ({self.device_id})"
            )

    def synchronize(self):
        _state.host_waits("sync", "cudaStreamSynchronize")

    def record(self, event=None):
        """An event recorded on this stream (a device-side mark: no wait)."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event):
        """The stream waits for ``event`` on the device: the host does not wait."""

    def is_capturing(self) -> bool:
        return self.ptr in _state.CAPTURING

    def begin_capture(self, mode=None):
        if self.ptr == 0:
            raise _state.CUDARuntimeError(
                900, "cudaErrorStreamCaptureUnsupported", "the legacy default stream cannot be captured"
            )
        _state.CAPTURING.add(self.ptr)
        _CAPTURED[self.ptr] = []

    def end_capture(self) -> Graph:
        _state.CAPTURING.discard(self.ptr)
        return Graph(_CAPTURED.pop(self.ptr, []))

    def enqueue(self, run) -> None:
        """Run ``run`` (a kernel) on this stream: recorded while it captures, else run now. While
        another stream captures, the legacy default stream may not be used (CUDA's implicit
        synchronisation would join the capture)."""
        if self.ptr in _state.CAPTURING:
            _CAPTURED[self.ptr].append(run)
            return
        if _state.CAPTURING and self.ptr == 0:
            raise _state.CUDARuntimeError(
                906, "cudaErrorStreamCaptureImplicit", "a launch on the legacy default stream during capture"
            )
        run()

    def __eq__(self, other):
        return isinstance(other, _BaseStream) and other.ptr == self.ptr

    def __hash__(self):
        return self.ptr

    def __repr__(self):
        return f"<{type(self).__name__} {self.ptr} (device {self.device_id})>"


_CAPTURED: dict[int, list] = {}


class Stream(_BaseStream):
    def __init__(self, null=False, non_blocking=False, ptr=0, priority=None):
        self.device_id = _state.THREAD.device
        self.ptr = 0 if null else _state.new_stream_ptr()
        self.non_blocking = non_blocking


class ExternalStream(_BaseStream):
    def __init__(self, ptr, device_id=-1):
        self.ptr = int(ptr)
        self.device_id = int(device_id)


Stream.null = Stream(null=True)


def get_elapsed_time(start_event: Event, end_event: Event) -> float:
    """Milliseconds between two recorded events (cudaEventElapsedTime's errors where it fails)."""
    for event in (start_event, end_event):
        if event.disable_timing:
            raise _state.CUDARuntimeError(6, "cudaErrorInvalidResourceHandle", "an event without timing")
        if event.time is None:
            raise _state.CUDARuntimeError(600, "cudaErrorNotReady", "an event not recorded (or not reached)")
    assert start_event.time is not None and end_event.time is not None
    return (end_event.time - start_event.time) * 1e3


def get_current_stream(device_id=None) -> _BaseStream:
    device = _state.THREAD.device if device_id is None else _state.check_device(device_id)
    stack = _state.THREAD.streams.get(device)
    if stack:
        return stack[-1]
    stream = ExternalStream(0, device)
    return stream


@contextlib.contextmanager
def using_allocator(allocator=None):
    """As CuPy's: a thread-local allocator (None: plain cudaMalloc, no pool)."""
    previous = _state.THREAD.allocator
    _state.THREAD.allocator = allocator if allocator is not None else memory._malloc
    try:
        yield
    finally:
        _state.THREAD.allocator = previous


def set_pinned_memory_allocator(allocator=None) -> None:
    pass
