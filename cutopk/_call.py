"""The one preamble of :func:`cutopk.top_k` and :func:`cutopk.plan`: the input as the backend
takes it, the argument checks and the plan, cached per call signature.

The first call with a signature (array type, shape, strides, dtype, k, axis, mode, sorted, nan,
index dtype, backend, algorithm, device) checks every argument and plans; a repeated call looks
its plan up and does only the per-call work: wrap the input, check ``out``, allocate the outputs
and launch. A call that raises is never cached, so errors keep their types and messages and are
raised before any work on every call. The key holds the *types* of the scalar arguments too:
``k=True`` or ``sorted=1`` hash and compare equal to ``1`` and must not find a valid call's plan.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from . import _api, _layout
from ._plan import Launch, Plan

CACHE_SIZE = 1024


class PlanCache:
    """A bounded, thread-safe map from call signatures to prepared calls.

    A lookup is one dict read (atomic in CPython, no lock on the hot path); inserts take a lock
    and evict the oldest entries beyond ``maxsize``. The counters are statistics only."""

    def __init__(self, maxsize: int = CACHE_SIZE):
        self.maxsize = maxsize
        self._entries: dict = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key):
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def put(self, key, entry) -> None:
        with self._lock:
            self._entries[key] = entry
            while len(self._entries) > self.maxsize:  # dicts keep insertion order: oldest first
                del self._entries[next(iter(self._entries))]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def info(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "size": len(self._entries), "maxsize": self.maxsize}


CACHE = PlanCache()


class NumpyCall:
    """A checked request on the NumPy backend (its work is all per call)."""

    def __init__(self, shape, strides, dtype, req: _api.Request):
        from . import _numpy

        if req.algorithm not in ("auto", *_numpy.ALGORITHMS):
            raise ValueError(
                f"algorithm: expected 'auto' or one of {_numpy.ALGORITHMS} for backend 'numpy', "
                f"got {req.algorithm!r}"
            )
        self.req = req
        self.run_numpy = _numpy.top_k
        self.shape, self.strides, self.dtype = tuple(shape), tuple(strides), np.dtype(dtype)
        self.result_shape = tuple(req.k if i == req.axis else s for i, s in enumerate(self.shape))

    def run(self, a, out=None):
        values, indices = self.run_numpy(a, self.req)
        if out is None:
            return values, indices
        np.copyto(out[0], values)
        np.copyto(out[1], indices)
        return out

    def describe(self, cached: bool) -> Plan:
        req, itemsize = self.req, self.dtype.itemsize
        rows = int(np.prod([s for i, s in enumerate(self.shape) if i != req.axis], dtype=np.int64))
        copies = {}
        if rows and req.k:
            if not self.dtype.isnative:
                copies["input: byte-swapped to native order"] = rows * req.n * itemsize
            elif _layout.row_strides(self.shape, self.strides, itemsize, req.axis) is None:
                copies["input: rows copied to row-major"] = rows * req.n * itemsize
            if req.axis != len(self.shape) - 1:
                copies[f"outputs: moved to axis {req.axis}"] = (
                    rows * req.k * (itemsize + req.index_dtype.itemsize)
                )
        return Plan(
            "numpy", "select", rows, req.n, req.k, (), _copy_lines(copies), sum(copies.values()), cached
        )


def _copy_lines(copies: dict) -> tuple[str, ...]:
    return tuple(f"{what} ({size} bytes)" for what, size in copies.items())


def _signature(tp, arr, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm, device):
    return (
        tp, arr.shape, arr.strides, arr.dtype, type(k), k, type(axis), axis, mode, type(sorted_), sorted_,
        nan, index_dtype, backend, algorithm, device,
    )  # fmt: skip


def _wrap(a, backend):
    """``(array, back, scope, device)``: the input as its backend takes it (NumPy, or CuPy
    without a copy), the function returning results as the caller's array type, the device/stream
    scope to launch in, and the device id (-1 on the CPU)."""
    if type(a) is np.ndarray:
        return a, None, None, -1
    kind = _api.array_kind(a)
    _api.resolve_backend(backend, kind, a)  # a backend/array mismatch is reported before anything else
    from . import _interop

    if kind == "numpy":
        arr, back = _interop.as_host(a)
        return arr, (None if back is _interop.identity else back), None, -1
    arr, back, scope = _interop.as_cupy(a)
    return arr, (None if back is _interop.identity else back), scope, arr.device.id


def prepare(a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm):
    """``(arr, back, scope, call, cached)`` for one call: see :func:`_wrap`; ``call`` is the
    prepared call (``.req``, ``.run(arr, out)``, ``.describe(cached)``)."""
    arr, back, scope, device = _wrap(a, backend)
    try:
        key = _signature(type(a), arr, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm, device)
        call = CACHE.get(key)
    except TypeError:  # an unhashable argument: checked (and refused or served) uncached
        key = call = None
    if call is not None:
        return arr, back, scope, call, True
    req = _api.normalize(arr, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm)
    if req.backend == "numpy":
        call = NumpyCall(arr.shape, arr.strides, arr.dtype, req)
    else:
        from . import _gpu

        with scope if scope is not None else contextlib.nullcontext():
            call = _gpu.GpuCall(arr.shape, arr.strides, arr.dtype, req, device)
    if key is not None:
        CACHE.put(key, call)
    return arr, back, scope, call, False


def describe_gpu_call(call, cached: bool) -> Plan:
    """The public plan of a :class:`cutopk._gpu.GpuCall`."""
    from . import _gpu

    req, p = call.req, call.plan
    copies = {}
    item = call.dtype.itemsize
    if call.launches:
        if call.native is not call.dtype:
            copies["input: byte-swapped to native order"] = call.rows * req.n * item
        if p.copy:
            why = "rows along an outer axis" if call.strides is not None else "batch axes do not collapse"
            copies[f"input: copied to row-major ({why})"] = call.rows * req.n * item
        if not call.last_axis:
            copies[f"outputs: moved to axis {req.axis}"] = (
                call.rows * req.k * (item + req.index_dtype.itemsize)
            )
    # The dispatcher's scratch already counts its copy of the input.
    scratch = p.scratch_bytes + sum(v for c, v in copies.items() if not c.startswith("input: copied"))
    return Plan(
        req.backend, p.algorithm, call.rows, req.n, req.k, tuple(_gpu.launches(call)) if call.launches else (),
        _copy_lines(copies), scratch if call.launches else 0, cached, dict(p.params),
    )  # fmt: skip


def describe(call, cached: bool) -> Plan:
    if isinstance(call, NumpyCall):
        return call.describe(cached)
    return describe_gpu_call(call, cached)


__all__ = ["CACHE", "Launch", "Plan", "describe", "prepare"]
