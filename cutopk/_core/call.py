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
import math
import operator
import sys
import threading

import numpy as np

from .._request import checks as _checks
from .._request import layout as _layout
from .._request.plan import Launch, Plan

CACHE_SIZE = 1024


class CallCache:
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

    def hit(self, key):
        """The entry of ``key``, counted as a hit; None, uncounted, when there is none (the caller
        then goes the way that counts the miss)."""
        entry = self._entries.get(key)
        if entry is not None:
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


CACHE = CallCache()


def algorithm_names(backend: str) -> tuple[str, ...]:
    """The algorithms of a backend (a checked name: "numpy", "cuda" or "sim"), as its own module
    lists them."""
    if backend == "numpy":
        from ..numpy import backend as _numpy_backend

        return _numpy_backend.ALGORITHMS
    from ..cuda import launcher as _launcher

    return _launcher.ALGORITHMS


class NumpyCall:
    """A checked request on the NumPy backend (its work is all per call)."""

    def __init__(self, shape, strides, dtype, req: _checks.Request):
        from ..numpy import backend as _numpy_backend

        _checks.check_algorithm(req.algorithm, "numpy", _numpy_backend.ALGORITHMS)
        self.req = req
        self.shape, self.strides, self.dtype = tuple(shape), tuple(strides), np.dtype(dtype)
        self.run_numpy = _numpy_backend.runner(self.shape, self.strides, self.dtype, req)
        self.result_shape = tuple(req.k if i == req.axis else s for i, s in enumerate(self.shape))

    def run(self, a, out=None):
        if out is None:
            return self.run_numpy(a)
        values, indices = self.run_numpy(a)
        np.copyto(out[0], values)
        np.copyto(out[1], indices)
        return out

    def describe(self, cached: bool, arr) -> Plan:
        """The NumPy backend's route for ``arr`` (read from its shape and strides only: the data is
        never touched, and an input that needs a copy is described by a C-contiguous stand-in)."""
        import dataclasses

        from ..numpy import backend as _numpy_backend
        from ..numpy import compiled as _native  # the compiled route (issue 40: one name)

        req, itemsize = self.req, self.dtype.itemsize
        rows = math.prod(s for i, s in enumerate(self.shape) if i != req.axis)
        in_place = _layout.row_strides(self.shape, self.strides, itemsize, req.axis) is not None
        with _native.planning():  # a plan never builds the compiled route, nor loads it
            if in_place:
                info = _numpy_backend.describe(arr, req)
            else:  # the copy _numpy_backend makes is C-contiguous rows: describe one over a single element
                stand_in = np.lib.stride_tricks.as_strided(
                    np.zeros(1, self.dtype), (rows, req.n), (req.n * itemsize, itemsize), writeable=False
                )
                info = _numpy_backend.describe(stand_in, dataclasses.replace(req, axis=1))
        copies = {}
        if rows and req.k:
            if not in_place:
                copies["input: rows copied to row-major (no 2-D view of them)"] = rows * req.n * itemsize
            elif info["block_copies"]:
                copies["blocks of rows copied one at a time, in cache (strided or byte-swapped rows)"] = 0
            if req.axis != len(self.shape) - 1:
                copies[f"outputs: moved to axis {req.axis}"] = (
                    rows * req.k * (itemsize + req.index_dtype.itemsize)
                )
        params = {"route": info["route"], "threads": info["threads"], "threads_why": info["threads_why"]}
        if info["compiled"] is not None:  # why the compiled route cannot run here
            params["compiled_unavailable"] = info["compiled"]
        else:  # whether it is built and loaded, and which compiler built it (or would)
            params.update(_native.status())
        return Plan(
            "numpy",
            "select",
            rows,
            req.n,
            req.k,
            (),
            _copy_lines(copies),
            sum(copies.values()),
            cached,
            params,
        )


def _copy_lines(copies: dict) -> tuple[str, ...]:
    return tuple(f"{what} ({size} bytes)" if size else what for what, size in copies.items())


def _value_of(k):
    """What the cache key holds for ``k``: its value, never the object. A 0-d tensor or array is
    mutable (``k.fill_(5)``) and a torch tensor hashes by identity, so its type, dtype, shape and
    integer value stand for it (the dtype and shape keep a bool or 1-element array, which the
    checks refuse, apart from an accepted one). TypeError where there is no integer value: the
    call is then checked uncached (and refused)."""
    if type(k) is int:
        return k
    return (type(k), str(getattr(k, "dtype", "")), tuple(getattr(k, "shape", ())), operator.index(k))


def _signature(tp, arr, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm, device):
    return (
        tp, arr.shape, arr.strides, arr.dtype, type(k), _value_of(k), type(axis), axis, mode, type(sorted_),
        sorted_, nan, index_dtype, backend, algorithm, device,
    )  # fmt: skip


def cached_ndarray(a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm):
    """The prepared call of a NumPy array's signature when it is cached, else None: the short
    path of :func:`cutopk.top_k` (no wrapping, no scope, results returned as they are)."""
    try:
        return CACHE.hit(
            _signature(np.ndarray, a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm, -1)
        )
    except TypeError:  # an unhashable argument: prepare() checks it
        return None


def cached_cupy(a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm):
    """The prepared call of a CuPy array's signature when it is cached and the array lies on the
    current device, else None: the short path of :func:`cutopk.top_k` on a GPU array (issue 39).

    Only an exact ``cupy.ndarray`` (its array kind is its type's, so the checks of the cached
    signature's first call hold for it) on the current device (no device scope to enter) takes
    it: no wrapping, no CuPy probe, the result arrays returned as they are. CuPy is not imported
    here: an array of it exists only once it is."""
    cupy = sys.modules.get("cupy")
    # getattr: a module named "cupy" that is not CuPy has no ndarray (and no array is one of it).
    if cupy is None or type(a) is not getattr(cupy, "ndarray", None):
        return None
    device = a.data.device_id
    if device != cupy.cuda.runtime.getDevice():
        return None  # prepare() makes the array's device current first
    try:
        return CACHE.hit(
            _signature(type(a), a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm, device)
        )
    except TypeError:  # an unhashable argument: prepare() checks it
        return None


def _wrap(a, backend):
    """``(array, back, scope, device)``: the input as its backend takes it (NumPy, or CuPy
    without a copy), the function returning results as the caller's array type, the device/stream
    scope to launch in, and the device id (-1 on the CPU). A plain NumPy array never comes here:
    :func:`prepare` takes it as it is."""
    kind = _checks.array_kind(a)
    _checks.resolve_backend(backend, kind, a)  # a backend/array mismatch is reported before anything else
    from .. import _interop

    if kind == "numpy":
        arr, back = _interop.as_host(a)
        return arr, (None if back is _interop.identity else back), None, -1
    arr, back, scope = _interop.as_cupy(a)
    return arr, (None if back is _interop.identity else back), scope, arr.device.id


def prepare(a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm):
    """``(arr, back, scope, call, cached)`` for one call: see :func:`_wrap`; ``call`` is the
    prepared call (``.req``, ``.run(arr, out)``, ``.describe(cached)``)."""
    if type(a) is np.ndarray:  # the common case, in as few steps as it takes
        arr, back, scope, device = a, None, None, -1
    else:
        arr, back, scope, device = _wrap(a, backend)
    try:
        key = _signature(type(a), arr, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm, device)
        call = CACHE.get(key)
    except TypeError:  # an unhashable argument: checked (and refused or served) uncached
        key = call = None
    if call is not None:
        return arr, back, scope, call, True
    req = _checks.normalize(arr, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm)
    if req.backend == "numpy":
        call = NumpyCall(arr.shape, arr.strides, arr.dtype, req)
    else:
        from ..cuda import launcher as _launcher

        with scope if scope is not None else contextlib.nullcontext():
            call = _launcher.GpuCall(arr.shape, arr.strides, arr.dtype, req, device)
    if key is not None:
        CACHE.put(key, call)
    return arr, back, scope, call, False


def describe_gpu_call(call, cached: bool) -> Plan:
    """The public plan of a :class:`cutopk.cuda.launcher.GpuCall`."""
    from ..cuda import launcher as _launcher

    req, p = call.req, call.plan
    copies = {}
    item = call.dtype.itemsize
    if call.launches:
        if call.native is not call.dtype:
            copies["input: byte-swapped to native order"] = call.rows * req.n * item
        if p.transpose:
            copies["input: rows along an outer axis copied to row-major by a tiled transpose"] = (
                call.rows * req.n * item
            )
        elif p.copy:
            why = "rows along an outer axis" if call.strides is not None else "batch axes do not collapse"
            copies[f"input: copied to row-major ({why})"] = call.rows * req.n * item
        if not call.last_axis:
            copies[f"outputs: moved to axis {req.axis}"] = (
                call.rows * req.k * (item + req.index_dtype.itemsize)
            )
    # The call's one workspace buffer (the family's table, the copy of the input, staged outputs),
    # and the simulator's byte-swapped copy of a non-native input.
    swapped = call.rows * req.n * item if call.native is not call.dtype else 0
    scratch = call.workspace_bytes + swapped
    return Plan(
        req.backend, p.algorithm, call.rows, req.n, req.k, tuple(_launcher.launches(call)) if call.launches else (),
        _copy_lines(copies), scratch if call.launches else 0, cached, dict(p.params),
    )  # fmt: skip


def describe(call, cached: bool, arr) -> Plan:
    if isinstance(call, NumpyCall):
        return call.describe(cached, arr)
    return describe_gpu_call(call, cached)


__all__ = ["CACHE", "Launch", "Plan", "describe", "prepare"]
