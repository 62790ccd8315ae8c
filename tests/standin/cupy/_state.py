"""Devices, streams, capture and memory of the CuPy stand-in: the CUDA runtime it pretends to be.

Device memory is host memory (NumPy byte buffers) tagged with a device id; a pointer is the
host address, so the simulator can run a kernel on it. What CUDA refuses, this refuses too:
an array of one device launched on another, a function of one device launched on another,
allocation (cudaMalloc) and synchronous copies while a stream is capturing, a stream entered
on the wrong device.
"""

from __future__ import annotations

import ctypes
import itertools
import threading

import numpy as np

DEVICES = (
    # Two devices of different kinds, so a plan made for one is wrong for the other.
    {
        "MultiProcessorCount": 132,
        "MaxSharedMemoryPerBlock": 48 * 1024,
        "MaxSharedMemoryPerBlockOptin": 227 * 1024,
        "L2CacheSize": 50 << 20,
        "compute_capability": "90",
        "name": "Stand-in H100",
    },
    {
        "MultiProcessorCount": 108,
        "MaxSharedMemoryPerBlock": 48 * 1024,
        "MaxSharedMemoryPerBlockOptin": 163 * 1024,
        "L2CacheSize": 40 << 20,
        "compute_capability": "80",
        "name": "Stand-in A100",
    },
)
VERSION = {"major": 14}


class CUDARuntimeError(RuntimeError):
    """``cupy_backends.cuda.api.runtime.CUDARuntimeError``: ``<name>: <description>``."""

    def __init__(self, status: int, name: str, description: str):
        self.status = status
        super().__init__(f"{name}: {description}")


class CUDADriverError(RuntimeError):
    """``cupy_backends.cuda.api.driver.CUDADriverError``."""


def invalid_device(device_id) -> CUDARuntimeError:
    return CUDARuntimeError(101, "cudaErrorInvalidDevice", f"invalid device ordinal ({device_id})")


class _Thread(threading.local):
    def __init__(self):
        self.device = 0
        self.streams: dict[int, list] = {}  # device -> stack of streams made current
        self.allocator = None  # using_allocator's


THREAD = _Thread()
_STREAM_PTRS = itertools.count(0x5000)
# Streams capturing now, by pointer (cudaStreamCaptureModeGlobal: while any stream captures,
# cudaMalloc and synchronous calls fail everywhere).
CAPTURING: set[int] = set()
_LOCK = threading.Lock()


def check_device(device_id: int) -> int:
    if type(device_id) is not int and not isinstance(device_id, np.integer):
        raise TypeError(f"an integer is required, got {type(device_id).__name__}")
    device_id = int(device_id)
    if not 0 <= device_id < len(DEVICES):
        raise invalid_device(device_id)
    return device_id


def new_stream_ptr() -> int:
    return next(_STREAM_PTRS)


def capture_error(what: str) -> CUDARuntimeError:
    return CUDARuntimeError(
        900, "cudaErrorStreamCaptureUnsupported", f"operation not permitted when stream is capturing ({what})"
    )


def refuse_during_capture(what: str) -> None:
    if CAPTURING:
        raise capture_error(what)


# ---- the host waiting for the device: counted, so tests can assert a call never does

# Every device-to-host read (``get``, ``asnumpy``, ``item``, ``tolist``, a device scalar made a
# Python bool/int/float/index; torch's ``cpu``/``item``/... of the torch stand-in) and every host
# synchronisation (stream, device, event), in order: ``(kind, what)`` with kind "read" or "sync".
# A read waits for the stream as a synchronisation does, and both break a capture.
HOST_WAITS: list[tuple[str, str]] = []


def host_waits(kind: str, what: str) -> None:
    """Record that the host waits for the device (``kind`` "read" or "sync"); refused while any
    stream captures (cudaStreamCaptureModeGlobal)."""
    refuse_during_capture(what)
    HOST_WAITS.append((kind, what))


# Every kernel launched on a stream, in order: ("kernel", name) for a RawModule function (cutopk's
# kernels), ("library", "") for one of CuPy's own (copies, casts, fills, element-wise operations).
LAUNCHES: list[tuple[str, str]] = []


class WaitCounter:
    """The host waits recorded while it is entered (``with WaitCounter() as seen``): ``seen.reads``
    and ``seen.syncs`` count them, ``seen.log`` names each."""

    def __enter__(self):
        self._start = len(HOST_WAITS)
        self._stop = None
        return self

    def __exit__(self, *exc):
        self._stop = len(HOST_WAITS)

    @property
    def log(self) -> list[tuple[str, str]]:
        return HOST_WAITS[self._start : self._stop]

    @property
    def reads(self) -> int:
        return sum(kind == "read" for kind, _ in self.log)

    @property
    def syncs(self) -> int:
        return sum(kind == "sync" for kind, _ in self.log)


# ---- memory: what cudaMalloc returns, and which device a pointer belongs to


class Region:
    """Host bytes standing for device memory: ``[ptr, ptr + size)`` on ``device``."""

    __slots__ = ("__weakref__", "device", "host", "owner", "ptr", "size")

    def __init__(self, ptr: int, size: int, device: int, host: np.ndarray, owner=None):
        self.ptr, self.size, self.device, self.host, self.owner = ptr, size, device, host, owner


# Live regions, newest last: a pointer is looked up there (cudaPointerGetAttributes). A region
# registered over an older one replaces it (the older memory was freed and its address reused).
_REGIONS: list[Region] = []


def register(region: Region) -> Region:
    with _LOCK:
        lo, hi = region.ptr, region.ptr + max(region.size, 1)
        _REGIONS[:] = [r for r in _REGIONS if r.ptr + max(r.size, 1) <= lo or r.ptr >= hi]
        _REGIONS.append(region)
    return region


def lookup(ptr: int, size: int = 1) -> Region | None:
    with _LOCK:
        for r in reversed(_REGIONS):
            if r.ptr <= ptr and ptr + size <= r.ptr + max(r.size, 1):
                return r
    return None


def device_malloc(size: int, device: int) -> Region:
    """cudaMalloc: 256-byte aligned host bytes on ``device``."""
    refuse_during_capture("cudaMalloc")
    raw = np.zeros(size + 256, dtype=np.uint8)
    start = (-raw.ctypes.data) % 256
    host = raw[start : start + size]
    return register(Region(host.ctypes.data, size, device, host, raw))


def host_bytes(ptr: int, size: int) -> np.ndarray:
    """The host bytes at ``ptr`` (memory somebody else owns)."""
    if size == 0:
        return np.zeros(0, dtype=np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))


def reset() -> str | None:
    """Back to the state of a fresh process (device 0, no stream made current, no capture, no
    thread allocator); returns what was left over, or None."""
    left = []
    if CAPTURING:
        left.append(f"streams still capturing: {sorted(CAPTURING)}")
    if THREAD.device != 0:
        left.append(f"current device {THREAD.device}")
    if any(THREAD.streams.values()):
        left.append("a stream still current")
    if THREAD.allocator is not None:
        left.append("a thread allocator still in use")
    CAPTURING.clear()
    THREAD.device, THREAD.streams, THREAD.allocator = 0, {}, None
    return "; ".join(left) or None
