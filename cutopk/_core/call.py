"""The one preamble of :func:`cutopk.top_k` and :func:`cutopk.plan`, and the seam to the
backends: the input as the backend takes it, the argument checks and the prepared call, cached
per call signature.

A prepared call is a :class:`Call` (what the core asks of one: its request, ``plain``, ``run``,
``describe``); each backend has one class of them (:class:`cutopk.numpy.call.NumpyCall`,
:class:`cutopk.cuda.launcher.GpuCall`), made only here (:func:`_new_call`), and every one is kept
in :data:`CACHE` under a key of :func:`cache_key`: regular rows (:func:`prepare`), rows of their own
lengths (:func:`lengths_call`) and CSR segments (:func:`segments_call`); and the merge of partial
results in the GPU backend's kernels (:func:`merge_call`, keyed by its parts' signatures).

The first call with a signature (array type, shape, strides, dtype, k, axis, mode, sorted, nan,
index dtype, backend, algorithm, device, rows) checks every argument and plans; a repeated call
looks its plan up and does only the per-call work: wrap the input, check ``out``, allocate the
outputs and launch. A call that raises is never cached, so errors keep their types and messages
and are raised before any work on every call. The key holds the *types* of the scalar arguments
too: ``k=True`` or ``sorted=1`` hash and compare equal to ``1`` and must not find a valid call's
plan.
"""

from __future__ import annotations

import contextlib
import operator
import sys
import threading
from typing import Any, Protocol

import numpy as np

from .._request import checks as _checks
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

    def get_or_make(self, key, make):
        """The entry of ``key``; where there is none, ``make()``'s, kept under ``key``. Two threads
        missing at once may both make one: the calls are equal, the later one is kept."""
        entry = self.get(key)
        if entry is None:
            entry = make()
            self.put(key, entry)
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


@contextlib.contextmanager
def observe_launches(count_allocations: bool = True):
    """The CUDA code path's launches recorded instead of run (``cutopk/cuda/observe.py``): calls
    on NumPy arrays with ``backend="sim"`` do every step up to the launch; yields the recorder
    (``launches``, ``shapes``, ``allocations``, ``allocated``, ``copies``). The prepared calls are
    emptied before and after, so that none resolves its launches against the other modules."""
    from ..cuda import observe as _observe

    CACHE.clear()
    try:
        with _observe.observe_launches(count_allocations) as recorder:
            yield recorder
    finally:
        CACHE.clear()


def algorithm_names(backend: str) -> tuple[str, ...]:
    """The algorithms of a backend (a checked name: "numpy", "cuda" or "sim"), as its own module
    lists them."""
    if backend == "numpy":
        from ..numpy import backend as _numpy_backend

        return _numpy_backend.ALGORITHMS
    from ..cuda import launcher as _launcher

    return _launcher.ALGORITHMS


class Call(Protocol):
    """A prepared call: one checked request on arrays of one signature, planned once. Each
    backend has one class of them (:class:`cutopk.numpy.call.NumpyCall`,
    :class:`cutopk.cuda.launcher.GpuCall`), made only by :func:`prepare`, :func:`lengths_call` and
    :func:`segments_call` here, kept in :data:`CACHE` under a key of :func:`cache_key`."""

    req: _checks.Request
    dtype: np.dtype  # the input's (the values' dtype)
    result_shape: tuple[int, ...]
    device: int  # -1 on the CPU

    def plain(self, a: Any) -> tuple[Any, Any]:
        """``(values, indices)`` of ``a``: :meth:`run` without ``out`` or extents (a warm call)."""
        ...

    def run(self, a: Any, out: Any = None, extents: Any = None) -> Any:
        """``(values, indices)`` of ``a``, into ``out`` when given (checked to fit); ``extents``:
        the int64 lengths or CSR offsets of a call made with rows ``"lengths"`` or ``"segments"``."""
        ...

    def describe(self, cached: bool, arr: Any) -> Plan:
        """What :func:`cutopk.plan` reports for ``arr`` (of this call's signature)."""
        ...


# The rows of a call (the kernels' ROWS_REGULAR, ROWS_LENGTHS, ROWS_SEGMENTS: kernels/row_extent.cuh):
# every row n long; row r only its first lengths[r] elements; each row a CSR segment of one array.
REGULAR, LENGTHS, SEGMENTS = "regular", "lengths", "segments"


def _new_call(req, shape, strides, dtype, device: int, rows: str = REGULAR, bound: int | None = None) -> Call:
    """The call of ``req`` on arrays of ``shape``, ``strides`` and ``dtype`` on ``device``: the
    one place a backend's call object is made (by ``req.backend``, checked). ``bound``: where
    every CSR segment must end (rows SEGMENTS; None: the launcher's default, past any input)."""
    if req.backend == "numpy":  # the NumPy backend serves rows of their own lengths without one
        from ..numpy.call import NumpyCall

        assert rows == REGULAR, rows
        return NumpyCall(shape, strides, dtype, req)
    from ..cuda import kernel_constants as _kernel_constants
    from ..cuda.launcher import GpuCall

    kind = {REGULAR: _kernel_constants.ROWS_REGULAR, LENGTHS: _kernel_constants.ROWS_LENGTHS,
            SEGMENTS: _kernel_constants.ROWS_SEGMENTS}[rows]  # fmt: skip
    if bound is None:
        return GpuCall(shape, strides, dtype, req, device, kind)
    return GpuCall(shape, strides, dtype, req, device, kind, bound)


def _value_of(k):
    """What the cache key holds for ``k``: its value, never the object. A 0-d tensor or array is
    mutable (``k.fill_(5)``) and a torch tensor hashes by identity, so its type, dtype, shape and
    integer value stand for it (the dtype and shape keep a bool or 1-element array, which the
    checks refuse, apart from an accepted one). TypeError where there is no integer value: the
    call is then checked uncached (and refused)."""
    if type(k) is int:
        return k
    return (type(k), str(getattr(k, "dtype", "")), tuple(getattr(k, "shape", ())), operator.index(k))


def cache_key(
    tp, shape, strides, dtype, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm, where
) -> tuple:
    """The key of :data:`CACHE` for every prepared call: the input's type, shape, strides and
    dtype, the arguments of :func:`cutopk.top_k` (as given: the key is made before the checks),
    and ``where``: the device id (-1 on the CPU) for regular rows; for rows of their own extents
    ``(device, LENGTHS)`` or ``(device, SEGMENTS, bound)`` (the position every CSR segment must
    end within). TypeError where an argument is unhashable or ``k`` has no integer value.

    The rows share the device's element, and no argument has a default: a warm call's key is
    then as quick to make as a key of the arguments alone (an extra argument or a default cost
    ~25 ns of a warm call's ~3.2 us, benchmarks/host_overhead.py)."""
    return (
        tp, shape, strides, dtype, type(k), _value_of(k), type(axis), axis, mode, type(sorted_), sorted_, nan,
        index_dtype, backend, algorithm, where,
    )  # fmt: skip


def cached_ndarray(a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm):
    """The prepared call of a NumPy array's signature when it is cached, else None: the short
    path of :func:`cutopk.top_k` (no wrapping, no scope, results returned as they are)."""
    try:
        return CACHE.hit(
            cache_key(np.ndarray, a.shape, a.strides, a.dtype, k, axis, mode, sorted_, nan, index_dtype, backend,
                      algorithm, -1)
        )  # fmt: skip
    except TypeError:  # an unhashable argument: prepare() checks it
        return None


def cached_cupy(a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm):
    """The prepared call of a CuPy array's signature when it is cached and the array lies on the
    current device, else None: the short path of :func:`cutopk.top_k` on a GPU array.

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
            cache_key(type(a), a.shape, a.strides, a.dtype, k, axis, mode, sorted_, nan, index_dtype, backend,
                      algorithm, device)
        )  # fmt: skip
    except TypeError:  # an unhashable argument: prepare() checks it
        return None


def _wrap(a, backend):
    """``(array, back, scope, device)``: the input as its backend takes it (NumPy, or CuPy
    without a copy), the function returning results as the caller's array type, the device/stream
    scope to launch in, and the device id (-1 on the CPU). A plain NumPy array never comes here:
    :func:`prepare` takes it as it is."""
    from .. import _interop

    if _interop.is_torch_tensor(a):  # before array_kind, which would not know it for a tensor
        _interop.check_untransformed(a, "a")
    kind = _checks.array_kind(a)
    _checks.resolve_backend(backend, kind, a)  # a backend/array mismatch is reported before anything else

    if kind == "numpy":
        arr, back = _interop.as_host(a)
        return arr, (None if back is _interop.identity else back), None, -1
    arr, back, scope = _interop.as_cupy(a)
    return arr, (None if back is _interop.identity else back), scope, arr.device.id


def prepare(a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm):
    """``(arr, back, scope, call, cached)`` for one call: see :func:`_wrap`; ``call`` is the
    prepared :class:`Call` of the input's signature."""
    if type(a) is np.ndarray:  # the common case, in as few steps as it takes
        arr, back, scope, device = a, None, None, -1
    else:
        arr, back, scope, device = _wrap(a, backend)
    key: tuple | None
    try:
        key = cache_key(
            type(a), arr.shape, arr.strides, arr.dtype, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm,
            device,
        )  # fmt: skip
        call = CACHE.get(key)
    except TypeError:  # an unhashable argument: checked (and refused or served) uncached
        key, call = None, None
    if call is not None:
        return arr, back, scope, call, True
    req = _checks.normalize(arr, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm)
    with scope if scope is not None else contextlib.nullcontext():
        call = _new_call(req, arr.shape, arr.strides, arr.dtype, device)
    if key is not None:
        CACHE.put(key, call)
    return arr, back, scope, call, False


def lengths_call(arr, call: Call) -> Call | None:
    """The call whose kernels read per-row lengths (every kernel family does), for ``arr``, the
    input of ``call``'s signature; None on the NumPy backend (its generic route: masked rows).
    Planned once per signature, in the device scope of the input (the caller's)."""
    req = call.req
    if req.backend == "numpy":
        return None
    mode, sorted_, nan, index_dtype, backend, algorithm = _checks.request_arguments(req)
    key = cache_key(
        type(arr), arr.shape, arr.strides, arr.dtype, req.k, req.axis, mode, sorted_, nan, index_dtype, backend,
        algorithm, (call.device, LENGTHS),
    )  # fmt: skip
    return CACHE.get_or_make(
        key, lambda: _new_call(req, arr.shape, arr.strides, arr.dtype, call.device, LENGTHS)
    )


def segments_call(data, segments: int, width: int, k: int, order: str, mode: str, nan: str, idt, backend: str,
                  algorithm: str, bound: int) -> Call:  # fmt: skip
    """The GPU call that selects from ``segments`` CSR segments of the 1-D ``data`` in one launch
    sequence, each segment a row of at most ``width`` elements with its own start and length
    (kernels/row_extent.cuh), every one ending within ``bound``; arguments checked, ``backend``
    resolved ("cuda" or "sim"), in ``data``'s device scope. Planned once per signature."""
    return planned_segments_call(data, segments, width, k, order, mode, nan, idt, backend, algorithm, bound)[
        0
    ]


def planned_segments_call(data, segments: int, width: int, k: int, order: str, mode: str, nan: str, idt,
                          backend: str, algorithm: str, bound: int) -> tuple[Call, bool]:  # fmt: skip
    """:func:`segments_call`'s call, and whether its signature was already planned (the
    ``cached`` of :func:`cutopk.plan`)."""
    from ..cuda import device as _device

    device = _device.device_id(backend)
    dtype = data.dtype.newbyteorder("=") if not data.dtype.isnative else data.dtype
    # The data as one C-contiguous native 1-D array (row stride 0: rows start at their offsets).
    shape, strides = (segments, width), (0, dtype.itemsize)
    key = cache_key(type(data), shape, strides, dtype, k, 1, mode, order, nan, idt, backend, algorithm,
                    (device, SEGMENTS, bound))  # fmt: skip

    def make() -> Call:
        req = _checks.Request(
            k=k, axis=1, n=width, largest=mode == "largest", order=order, nan_largest=nan == "largest",
            index_dtype=idt, backend=backend, algorithm=algorithm,
        )  # fmt: skip
        return _new_call(req, shape, strides, dtype, device, SEGMENTS, bound)

    found = CACHE.hit(key)
    return (found, True) if found is not None else (CACHE.get_or_make(key, make), False)


def merge_call(pairs, k: int, largest: bool, order: str, nan_first: bool, positions: bool, backend: str):
    """The GPU call that merges the checked parts ``pairs`` (native arrays of ``backend``'s kind:
    "cuda" CuPy arrays on the current device, "sim" NumPy arrays) into ``k`` winners per row in
    cutopk's own kernels, and whether its signature was already planned (the ``cached`` of
    :func:`cutopk.plan`). Planned once per signature: the parts' shapes, strides and dtypes, k,
    the options, ``positions`` (the winners' places are also written) and the device. The call's
    ``why_not`` is not None where the kernel cannot take these rows."""
    from ..cuda import device as _device
    from ..cuda.merge_call import MergeCall

    device = _device.device_id(backend)
    parts = tuple((v.shape, v.strides, v.dtype, i.shape, i.strides, i.dtype) for v, i in pairs)
    key = ("merge", type(pairs[0][0]), parts, k, largest, order, nan_first, positions, backend, device)
    found = CACHE.hit(key)
    if found is not None:
        return found, True

    def make():
        # "none" takes index order, as the library route gives it: the same answer either way.
        values, indices = pairs[0]
        widths = [int(v.shape[-1]) for v, _ in pairs]
        return MergeCall(backend, widths, values.shape[:-1], values.dtype, indices.dtype, k, largest,
                         order != "value", nan_first, positions, device)  # fmt: skip

    return CACHE.get_or_make(key, make), False


def check_algorithm_name(algorithm: str, backend: str) -> None:
    """A forced algorithm's name checked against the algorithms of ``backend``, eagerly (whether
    it can handle a given shape is only known when its call is planned)."""
    _checks.check_algorithm(algorithm, backend, algorithm_names(backend))


__all__ = [
    "CACHE", "Call", "Launch", "Plan", "cache_key", "check_algorithm_name", "lengths_call", "merge_call",
    "planned_segments_call", "prepare", "segments_call",
]  # fmt: skip
