"""``cupy.cuda.memory`` of the stand-in: memory objects, the pool, the allocator in use."""

from __future__ import annotations

import threading
import weakref

from .. import _state


class OutOfMemoryError(MemoryError):
    """As CuPy's: ``Out of memory allocating {size:,} bytes (allocated so far: ...)``."""

    def __init__(self, size, total, limit=0):
        self._size, self._total, self._limit = size, total, limit
        msg = f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes"
        msg += f", limit set to: {limit:,} bytes)." if limit else ")."
        super().__init__(msg)


class BaseMemory:
    """Memory on a device: ``ptr``, ``size``, ``device_id``."""

    ptr: int
    size: int
    device_id: int

    def __int__(self):
        return self.ptr

    @property
    def device(self):
        from . import Device

        return Device(self.device_id)

    def _host(self):
        """The host bytes standing for this memory."""
        raise NotImplementedError


class Memory(BaseMemory):
    """``cudaMalloc`` on the current device."""

    def __init__(self, size: int):
        self.size = int(size)
        self.device_id = _state.THREAD.device
        self._region = _state.device_malloc(self.size, self.device_id)
        self.ptr = self._region.ptr if self.size else 0

    def _host(self):
        return self._region.host


class UnownedMemory(BaseMemory):
    """Memory CuPy does not own (``owner`` keeps it alive); ``device_id=-1``: looked up from the
    pointer (cudaPointerGetAttributes), which fails for memory that is on no device."""

    def __init__(self, ptr: int, size: int, owner, device_id: int = -1):
        if device_id < 0:
            if ptr == 0:
                raise RuntimeError("UnownedMemory requires explicit device ID for a null pointer.")
            region = _state.lookup(ptr, max(1, size))
            if region is None:
                raise _state.CUDARuntimeError(
                    1, "cudaErrorInvalidValue", f"pointer {ptr:#x} is not device memory (host memory?)"
                )
            device_id = region.device
        self.ptr, self.size, self.device_id, self._owner = int(ptr), int(size), int(device_id), owner
        self._bytes = _state.host_bytes(self.ptr, self.size)

    def _host(self):
        return self._bytes


class MemoryPointer:
    """A pointer into a memory: ``mem``, ``ptr`` (``mem.ptr + offset``), ``device_id``."""

    def __init__(self, mem: BaseMemory, offset: int):
        if not isinstance(mem, BaseMemory):
            raise TypeError(f"mem: expected a cupy.cuda.memory.BaseMemory, got {type(mem).__name__}")
        self.mem, self.offset = mem, int(offset)
        self.ptr = mem.ptr + self.offset
        self.device_id = mem.device_id

    @property
    def device(self):
        return self.mem.device

    def __int__(self):
        return self.ptr

    def __add__(self, offset: int):
        return MemoryPointer(self.mem, self.offset + int(offset))


class _PooledMemory(Memory):
    def __init__(self, region, size):
        self.size, self.device_id, self._region = size, region.device, region
        self.ptr = region.ptr if size else 0


class MemoryPool:
    """The default allocator, as CuPy's: a freed block goes back to a free list of its device and
    of the stream it was allocated on, and a malloc takes a block of its rounded size from the
    current stream's list, else calls cudaMalloc (refused while a stream captures). So a capture
    allocates without error only where the same sizes were freed on the capturing stream before."""

    def __init__(self):
        self._lock = threading.Lock()
        self._used: dict[int, int] = {}
        self._free: dict[tuple, list] = {}
        self._limit = 0

    def malloc(self, size: int) -> MemoryPointer:
        from . import get_current_stream

        size = int(size)
        rounded = -(-size // 512) * 512
        arena = (_state.THREAD.device, get_current_stream().ptr, rounded)
        with self._lock:
            total = sum(self._used.values())
            if self._limit and total + rounded > self._limit:
                raise OutOfMemoryError(size, total, self._limit)
            cached = self._free.get(arena)
            region = cached.pop() if cached else None
        if region is None:
            region = _state.device_malloc(rounded, _state.THREAD.device)
        mem = _PooledMemory(region, rounded)
        key = id(mem)
        with self._lock:
            self._used[key] = rounded
        weakref.finalize(mem, self._release, key, arena, region)
        return MemoryPointer(mem, 0)

    def _release(self, key, arena, region):
        with self._lock:
            self._used.pop(key, None)
            self._free.setdefault(arena, []).append(region)

    def used_bytes(self) -> int:
        with self._lock:
            return sum(self._used.values())

    def free_bytes(self) -> int:
        with self._lock:
            return sum(r.size for regions in self._free.values() for r in regions)

    def total_bytes(self) -> int:
        return self.used_bytes() + self.free_bytes()

    def free_all_blocks(self, stream=None) -> None:
        with self._lock:
            self._free.clear()

    def set_limit(self, size=None, fraction=None) -> None:
        self._limit = int(size or 0)

    def get_limit(self) -> int:
        return self._limit


def _malloc(size: int) -> MemoryPointer:
    return MemoryPointer(Memory(size), 0)


_POOL = MemoryPool()
_ALLOCATOR = [_POOL.malloc]


def get_default_memory_pool() -> MemoryPool:
    return _POOL


def set_allocator(allocator=None) -> None:
    _ALLOCATOR[0] = _malloc if allocator is None else allocator


def get_allocator():
    return _state.THREAD.allocator or _ALLOCATOR[0]


def alloc(size: int) -> MemoryPointer:
    """What every array allocation calls: the thread's allocator (``using_allocator``), else
    the global one."""
    ptr = get_allocator()(size)
    if not isinstance(ptr, MemoryPointer):
        raise TypeError(f"the allocator returned {type(ptr).__name__}, not a cupy.cuda.MemoryPointer")
    return ptr
