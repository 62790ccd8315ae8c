"""The scratch memory of the kernel launches: one buffer per (device, stream), reused by every call
on that stream and grown when a call needs more.

A call takes its whole scratch (the family's named table, the copy of the input, staged outputs)
as views of that one buffer (``families.common.carve``), so a call whose workspace is already
large enough allocates no scratch at all. Calls on one stream run in stream order, so they can
share a buffer; two streams never do (their work may overlap). The simulator target runs on the
calling thread, so there the "stream" is the thread.

Memory comes from the array library's allocator at the time of growth: CuPy's pool, or torch's
caching allocator for a call on torch tensors (``_interop.DeviceScope``).

CUDA graphs: while the stream captures (CuPy stream capture, ``torch.cuda.graph``) nothing may be
allocated, so a call that would have to grow the workspace then raises :class:`RuntimeError`
telling to run the call once on that stream before capturing. A buffer a capture used is kept
alive after a later growth (the graph's replays still write to it) until
:func:`release_workspace`. Graphs captured on one stream share its buffer: replay them one after
another on one stream, as graphs sharing a memory pool must be.

Memory goes back with :func:`release_workspace` (public as ``cutopk.release_workspace``): every
workspace of a device, or of all devices, is dropped, and its memory returns to the allocator's
pool (``cupy.get_default_memory_pool().free_all_blocks()`` or ``torch.cuda.empty_cache()`` then
give it back to the driver). Do not release while graphs captured over it will be replayed.
"""

from __future__ import annotations

import threading
import types
from typing import Any

import numpy as np

GROWTH = 1.25  # a buffer grows to at least this times its size: few regrowths on rising needs
MIN_TICKETS = 64  # arrival tickets allocated at least: one small array serves most batches


class Workspace:
    """The buffer of one (device, stream): ``buffer`` (a 1-D uint8 array, None before the first
    use), and ``kept``, the buffers replaced after a capture used them."""

    __slots__ = ("buffer", "captured", "kept", "tickets")

    def __init__(self) -> None:
        self.buffer: Any = None  # a NumPy or CuPy array
        self.tickets: Any = None  # uint32 arrival tickets, zeroed (see :func:`tickets`)
        self.captured = False
        self.kept: list = []

    @property
    def nbytes(self) -> int:
        return 0 if self.buffer is None else self.buffer.nbytes


_LOCK = threading.Lock()
_CUDA: dict[tuple[int, int], Workspace] = {}  # (device, stream pointer) -> workspace
_SIM = threading.local()  # the simulator target: one workspace per thread
_SIM_ALL: dict[int, Workspace] = {}  # by thread id, for release and statistics
ALLOCATIONS = [0]  # buffers allocated since the process started (statistics and tests)


def current(target: str, device: int) -> tuple[Workspace, Any]:
    """``(workspace, stream)`` of the current stream on ``device`` (stream None on the simulator)."""
    if target == "sim":
        ws = getattr(_SIM, "ws", None)
        if ws is None:
            ws = _SIM.ws = Workspace()
            with _LOCK:
                _SIM_ALL[threading.get_ident()] = ws
        return ws, None
    import cupy

    stream = cupy.cuda.get_current_stream()
    key = (device, stream.ptr)
    ws = _CUDA.get(key)
    if ws is None:
        with _LOCK:
            ws = _CUDA.setdefault(key, Workspace())
    return ws, stream


def take(xp: types.ModuleType, target: str, device: int, nbytes: int, count: int = 0) -> tuple[Any, Any]:
    """``(buffer, tickets)`` for one call on the current stream of ``device``, from one look-up of
    the stream's workspace: a 1-D uint8 buffer of at least ``nbytes`` bytes (:func:`_buffer`;
    None for none) and a 1-D uint32 array of at least ``count`` zeroed arrival tickets
    (:func:`_tickets`; None for none)."""
    ws, stream = current(target, device)
    buffer = _buffer(ws, stream, xp, device, nbytes) if nbytes else None
    return buffer, (_tickets(ws, stream, xp, device, count) if count else None)


def _buffer(ws: Workspace, stream: Any, xp: types.ModuleType, device: int, nbytes: int) -> Any:
    """The stream's workspace buffer, grown first (by ``xp.empty``) when it is smaller than
    ``nbytes`` (never while the stream captures a graph: then RuntimeError)."""
    buffer = ws.buffer
    capturing = stream is not None and stream.is_capturing()
    if buffer is not None and buffer.nbytes >= nbytes:
        if capturing:
            ws.captured = True
        return buffer
    if capturing:
        raise RuntimeError(
            f"top_k: this call needs {nbytes} bytes of cutopk workspace on stream {stream.ptr:#x} of "
            f"device {device}, which is capturing a CUDA graph (nothing may be allocated then), and "
            f"the stream's workspace has {ws.nbytes}; run the same call once on this stream before "
            "capturing (a warm-up; with torch.cuda.graph, pass the warm-up stream as its stream=)"
        )
    size = max(nbytes, int(ws.nbytes * GROWTH), 1)
    size = -(-size // 256) * 256
    new = xp.empty(size, dtype=np.uint8)
    ALLOCATIONS[0] += 1
    if ws.captured and buffer is not None:
        ws.kept.append(buffer)  # a captured graph still writes to it
        ws.captured = False
    ws.buffer = new
    return new


def _tickets(ws: Workspace, stream: Any, xp: Any, device: int, count: int) -> Any:
    """The stream's arrival tickets, at least ``count`` of them, every one 0. The kernels that
    take tickets (kernels/split.cu) leave each one 0 when they finish, so the array is zeroed
    once, by ``xp.zeros`` when it is allocated or grown, never by a memset per call (a call stays
    one launch, and a CUDA graph's replays find them 0). Per stream, like the workspace: calls on
    two streams may run at once and never share a ticket. Never grown while the stream captures a
    graph (then RuntimeError, as :func:`_buffer`)."""
    held = ws.tickets
    if held is not None and held.size >= count:
        return held
    if stream is not None and stream.is_capturing():
        raise RuntimeError(
            f"top_k: this call needs {count} arrival tickets on stream {stream.ptr:#x} of device {device}, "
            "which is capturing a CUDA graph (nothing may be allocated then); run the same call once on "
            "this stream before capturing"
        )
    if held is not None and ws.captured:
        ws.kept.append(held)  # a captured graph still uses them
    ws.tickets = xp.zeros(max(count, 2 * (0 if held is None else held.size), MIN_TICKETS), dtype=np.uint32)
    return ws.tickets


def release_workspace(device: int | None = None) -> int:
    """Drop the cached scratch buffers of ``device`` (a CUDA device id; None: every device and the
    simulator's), returning their memory to the allocator's pool. Returns the bytes released.

    Calls after it allocate their workspace again. Do not call it while CUDA graphs captured over
    a workspace are still to be replayed: they would write to memory given back."""
    if device is not None and (type(device) is not int or device < 0):
        raise ValueError(f"device: expected a CUDA device id (an int >= 0) or None, got {device!r}")
    released = 0
    with _LOCK:
        spaces = [ws for (dev, _), ws in _CUDA.items() if device is None or dev == device]
        if device is None:
            _CUDA.clear()
            spaces += list(_SIM_ALL.values())
        else:
            for key in [key for key in _CUDA if key[0] == device]:
                del _CUDA[key]
        for ws in spaces:
            released += ws.nbytes + sum(b.nbytes for b in ws.kept)
            released += 0 if ws.tickets is None else ws.tickets.nbytes
            ws.buffer, ws.kept, ws.captured, ws.tickets = None, [], False, None
    return released


def workspace_info() -> dict:
    """``{"buffers": ..., "bytes": ..., "allocations": ...}``: the cached workspaces now (kept
    buffers included) and the buffers allocated since the process started."""
    with _LOCK:
        spaces = [*_CUDA.values(), *_SIM_ALL.values()]
        held = [ws for ws in spaces if ws.buffer is not None]
        nbytes = sum(ws.nbytes + sum(b.nbytes for b in ws.kept) for ws in spaces)
    return {"buffers": len(held), "bytes": nbytes, "allocations": ALLOCATIONS[0]}
