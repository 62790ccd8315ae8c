"""The NumPy backend's compiled route: ``compiled.c``, built when the package is installed.

One C function selects the top K of a block of rows as they lie in memory (any strides, any
alignment, native byte order, every dtype the backend takes): one pass over each row with a
running threshold, vectorised by the compiler, then a sort of the K (see the C file's header).
It needs no NumPy call per row and holds no GIL. One call takes every row of the request and
shares them between ``threads`` threads itself (the C file's pool: the calling thread and workers
kept alive between calls, a job handed over in microseconds; see its "Threads" section and
:func:`measure_pool`), so no block goes through the backend's Python thread pool. A call of more
than ``INTERRUPT_BLOCK_ELEMENTS`` is made in blocks of rows, so that Ctrl-C interrupts it.

The library is built by ``pip install .`` (setup.py: an optional extension, one build of the C
file per instruction-set variant, the widest this processor runs picked when it is loaded) and
installed as the top-level module ``_cutopk_compiled``; this module finds it with importlib
(:func:`locate`: also the installed one when ``import cutopk`` imports a source checkout, as
``python -m pytest`` does from the repository's root) and loads it with ctypes, checking its
ABI, by the first call that takes the route, never by ``cutopk.plan()`` (:func:`planning`,
:func:`status`). Nothing is compiled at run time. Where it was not built (no C compiler at
install time), does not load or has another ABI, the backend runs its NumPy routes, which give
the same answers:
:func:`unavailable_reason` says why, and ``cutopk.plan()`` shows it. ``CUTOPK_COMPILED=0`` turns
the route off (the NumPy routes alone); it is read when it changes, and its former name,
``CUTOPK_NATIVE``, still works where it is unset, with a ``FutureWarning`` (:func:`setting`).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import importlib.machinery
import importlib.util
import os
import pathlib
import threading
import time
import warnings
from collections.abc import Iterator

import numpy as np

from .. import _environ
from .._request import dtypes as _dtypes

# The library's module name (setup.py's extension), found on sys.path like any module.
LIBRARY = "_cutopk_compiled"
# Its builds of the C file, widest first (compiled_variants.c picks the first this processor runs;
# a processor that runs one runs every one after it).
VARIANTS = ("avx512", "avx2", "baseline")
NOT_BUILT = (
    f"not built at install: no {LIBRARY} library on sys.path (`pip install .` builds it where a C "
    "compiler is found; in a source checkout, `python setup.py build_ext --inplace`)"
)
ENV_VAR = "CUTOPK_COMPILED"
# The variable's former name (before the route had one name; "native" also meant byte order):
# users set it, so it is still read where the new name is unset, with a FutureWarning.
DEPRECATED_ENV_VARS = {ENV_VAR: "CUTOPK_NATIVE"}
_warned: set[str] = set()
# The C file's ABI number and the size of its struct cutopk_rows (cutopk_compiled_abi()).
ABI = 5

# The C file's enums.
_KIND_UNSIGNED, _KIND_SIGNED, _KIND_FLOAT = 0, 1, 2
_ORDER = {"value": 0, "index": 1, "none": 1}  # "none" takes index order, as the NumPy routes do
_STATUS_NO_MEMORY, _STATUS_BAD_REQUEST = 1, 2
# The C file's enum method: how select() selects (see the C file).
METHODS = {"threshold": 0, "insert": 1, "count": 2, "columns": 3, "rank": 4}


class Rows(ctypes.Structure):
    """The C file's ``struct cutopk_rows``, field for field."""

    _fields_ = (
        ("data", ctypes.c_void_p),
        ("rows", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("row_stride", ctypes.c_int64),
        ("col_stride", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("out", ctypes.c_void_p),
        ("inf_bits", ctypes.c_uint64),
        ("width", ctypes.c_int32),
        ("kind", ctypes.c_int32),
        ("largest", ctypes.c_int32),
        ("nan_first", ctypes.c_int32),
        ("order", ctypes.c_int32),
        ("method", ctypes.c_int32),
        ("threads", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("values", ctypes.c_void_p),
    )


_lock = threading.Lock()
# "lib": the loaded function, or None with "why" saying why not; "env": the last CUTOPK_COMPILED
# (variable, text) read and whether it allows the route; "path", "variant": the library loaded.
_state: dict = {"lib": None, "why": None, "tried": False, "env": (None, True), "path": None, "variant": None}
# plan(): the route's state is reported, never loaded (see planning()).
_planning: contextvars.ContextVar = contextvars.ContextVar("cutopk_compiled_planning", default=False)


def _after_fork_in_child() -> None:
    """A fork while another thread loads the library: that thread does not exist in the child,
    and the lock it holds would never be released there. The child gets a lock of its own."""
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def setting(name: str) -> tuple[str, str | None]:
    """``(variable, text)`` of the route's environment variable ``name`` (``ENV_VAR``): its own
    value where it is set, else the value of its deprecated earlier name
    (``DEPRECATED_ENV_VARS``) where that one is set, with a ``FutureWarning`` the first time in
    the process, else ``(name, None)``."""
    text = _environ.get(name)
    if text is None:
        old = DEPRECATED_ENV_VARS[name]
        old_text = _environ.get(old)
        if old_text is not None:
            if old not in _warned:
                _warned.add(old)
                warnings.warn(f"{old} is deprecated: set {name} instead", FutureWarning, stacklevel=2)
            return old, old_text
    return name, text


def _enabled() -> bool:
    """Whether ``CUTOPK_COMPILED`` (a flag, default on) allows the route; a value that is no flag
    raises, on every call (never cached)."""
    given = setting(ENV_VAR)
    seen, allowed = _state["env"]
    if given != seen:
        allowed = _environ.flag(given[0], True, given[1])
        _state["env"] = (given, allowed)
    return allowed


def locate() -> pathlib.Path | None:
    """The library's file: the extension module ``LIBRARY`` where ``sys.path`` holds one (the
    installed package's, or an in-place build at the top of a source checkout, which comes first
    on ``sys.path`` there), else None. Found, never imported: it is no CPython module."""
    spec = importlib.util.find_spec(LIBRARY)
    if (
        spec is None
        or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)
        or not spec.origin
    ):
        return None
    return pathlib.Path(spec.origin)


class LoadError(RuntimeError):
    """A library that is not this module's: it does not load, lacks the entry points, or its
    ABI is another."""


def load(path: pathlib.Path, variant: str | None = None):
    """The library's ``cutopk_compiled_select``, ready for :func:`select` (the variant the library
    picked for this processor, or ``variant``'s own entry points: the tests run each variant this
    processor can); :class:`LoadError` where it does not load, lacks the entry points, or its ABI
    is not this module's."""
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise LoadError(f"{path} does not load: {exc}") from None
    suffix = "" if variant is None else f"_{variant}"
    try:
        abi = getattr(lib, f"cutopk_compiled_abi{suffix}")
        fn = getattr(lib, f"cutopk_compiled_select{suffix}")
        lib.cutopk_compiled_variant.restype = ctypes.c_char_p
    except AttributeError:
        raise LoadError(
            f"{path} lacks the entry points (cutopk_compiled_abi{suffix}, cutopk_compiled_select{suffix}, "
            "cutopk_compiled_variant): not a library of this cutopk's setup.py"
        ) from None
    abi.restype, abi.argtypes = ctypes.c_int64, ()
    found, expected = abi(), (ABI << 32) | ctypes.sizeof(Rows)
    if found != expected:
        raise LoadError(
            f"{path}'s ABI {found:#x} is not the expected {expected:#x} (built from another version of "
            "compiled.c: install the package again)"
        )
    fn.restype, fn.argtypes = ctypes.c_int, (ctypes.POINTER(Rows),)
    # The pool's controls (set_spin, workers: tests) and the variant's name travel with the function.
    fn.library = lib
    fn.suffix = suffix
    fn.variant = variant or lib.cutopk_compiled_variant().decode()
    return fn


def _load():
    """Find and load the library; None, with the reason kept, where that fails."""
    path = locate()
    if path is None:
        _state["why"] = NOT_BUILT
        return None
    try:
        fn = load(path)
    except LoadError as exc:
        _state["why"] = f"the compiled route's library cannot be used: {exc}"
        return None
    _state["path"], _state["variant"] = path, fn.variant
    return fn


def _function():
    if not _state["tried"]:
        if _planning.get():  # plan(): nothing is loaded
            return None
        with _lock:
            if not _state["tried"]:
                _state["lib"] = _load()
                _state["tried"] = True
    return _state["lib"]


@contextlib.contextmanager
def planning() -> Iterator[None]:
    """Within the block (``cutopk.plan``), :func:`available`, :func:`unavailable_reason` and
    :func:`status` load nothing: where the route was not tried yet, they answer whether it would
    run (the library is found: the first call that takes the route loads it)."""
    token = _planning.set(True)
    try:
        yield
    finally:
        _planning.reset(token)


def unavailable_reason() -> str | None:
    """Why the compiled route does not run in this process now, or None when it does (inside
    :func:`planning`: would)."""
    if not _enabled():
        variable, text = setting(ENV_VAR)
        return f"turned off by {variable}={text}"
    if not _state["tried"] and _planning.get():
        return None if locate() is not None else NOT_BUILT
    if _function() is None:
        return _state["why"]
    return None


def available() -> bool:
    """Whether :func:`select` can run (the library found and loaded, not turned off; inside
    :func:`planning`: found)."""
    return unavailable_reason() is None


def status() -> dict:
    """What ``cutopk.plan()`` says of the route where it can run (:func:`unavailable_reason` is
    None; where it cannot, that is what the plan says), loading nothing: ``compiled`` (the library
    loaded, and ``compiled_variant``, its build for this processor, one of ``VARIANTS``; or not
    loaded yet, with the library's path)."""
    if _state["lib"] is not None:
        return {"compiled": f"loaded from {_state['path']}", "compiled_variant": _state["variant"]}
    return {"compiled": f"not loaded yet: the first call that takes the route loads {locate()}"}


@functools.cache
def _element(dtype: np.dtype) -> tuple[int, int]:
    """The C file's element kind and +inf's bits (floats) for ``dtype``."""
    info = _dtypes.info(dtype)
    if info.is_float:
        inf = np.array(np.inf, dtype=dtype).view(info.key_dtype)[()]
        return _KIND_FLOAT, int(inf)
    return (_KIND_SIGNED if info.is_signed else _KIND_UNSIGNED), 0


def _address(a: np.ndarray) -> int:
    """The address of ``a``'s first element. ``a.ctypes.data`` builds a ctypes helper object (three
    per call); a writable C-contiguous array's buffer gives it at a fraction of that cost
    (benchmarks/results/2026-12-02-cpu-compiled-choice.md). Other arrays (strided views, read-only
    inputs, dtypes that NumPy does not export as buffers: bfloat16) the plain way."""
    flags = a.flags
    if flags.c_contiguous and flags.writeable:
        try:
            return ctypes.addressof(ctypes.c_char.from_buffer(a))  # type: ignore[arg-type]  # a buffer
        except (TypeError, ValueError, BufferError):
            pass
    return a.ctypes.data


# A C call holds no GIL and cannot be interrupted: Ctrl-C's KeyboardInterrupt waits until it
# returns. A call of more elements than this is made in blocks of whole rows (:func:`block_rows`),
# and Python raises it as the block under way returns: a block this large takes some
# milliseconds on one thread (the slowest methods a few times the threshold scan), so Ctrl-C
# answers promptly, while the split costs a short call next to nothing
# (benchmarks/results/2026-12-02-cpu-compiled-choice.md).
INTERRUPT_BLOCK_ELEMENTS = 1 << 24
_COLUMNS_GROUP = 64  # the C file's CHUNK: the rows "columns" takes side by side


def block_rows(rows: int, n: int, method: str) -> int:
    """Rows per C call of :func:`select` for ``rows`` rows of ``n``: all of them up to
    ``INTERRUPT_BLOCK_ELEMENTS``, else blocks of about that many elements (at least one row; the
    "columns" method's groups of ``_COLUMNS_GROUP`` rows kept whole). A single longer row is one
    call, which runs to its end."""
    if rows * n <= INTERRUPT_BLOCK_ELEMENTS:
        return max(rows, 1)
    step = max(1, INTERRUPT_BLOCK_ELEMENTS // max(n, 1))
    if method == "columns":
        step = -(-step // _COLUMNS_GROUP) * _COLUMNS_GROUP
    return step


def select(
    x: np.ndarray,
    k: int,
    largest: bool,
    nan_first: bool,
    order: str,
    out: np.ndarray,
    function=None,
    method: str = "threshold",
    threads: int = 1,
    values: np.ndarray | None = None,
) -> None:
    """Write the column indices of the top K of each row of ``x`` into ``out`` (and their values
    into ``values``, where given: a C-contiguous ``(rows, k)`` array of ``x``'s dtype).

    ``x``: 2-D, any strides, native byte order, ``1 <= k <= x.shape[1]``; ``out``: a C-contiguous
    int64 array of ``(rows, k)``. The order is ``order``'s ("value"; "index", or "none", which
    gives index order as the NumPy routes do); ``method``, one of ``METHODS`` (the C file says
    which inputs each suits; every one is exact; "count" takes 8- and 16-bit elements only, "rank"
    up to 32 bits). ``threads``: the rows are shared between that many threads, this one
    included (contiguous pieces claimed by whichever thread is free; the answer is the same for
    every count; a second caller while another one uses the pool runs alone). Only where
    :func:`available`, or with ``function`` from :func:`load` (one variant: the tests run each
    one this processor can)."""
    kind, inf_bits = _element(x.dtype)
    fn = function or _function()
    total, n = x.shape
    step = block_rows(total, n, method)
    for start in range(0, max(total, 1), step):  # one block unless the call is long
        block, block_out, block_values = x, out, values
        if step < total:  # Python runs a pending signal handler (Ctrl-C) as each block returns
            block, block_out = x[start : start + step], out[start : start + step]
            block_values = None if values is None else values[start : start + step]
        rows = Rows(
            _address(block),
            block.shape[0],
            n,
            x.strides[0],
            x.strides[1],
            k,
            _address(block_out),
            inf_bits,
            x.itemsize,
            kind,
            int(largest),
            int(nan_first),
            _ORDER[order],
            METHODS[method],
            max(1, int(threads)),
            0,
            None if block_values is None else _address(block_values),
        )
        status = fn(ctypes.byref(rows))
        if status != 0:
            break
    if status == _STATUS_NO_MEMORY:
        raise MemoryError(
            f"the compiled route could not allocate its buffer for k={k} (rows of {x.shape[1]})"
        )
    if status != 0:  # the backend's checks make this unreachable
        raise RuntimeError(f"the compiled route refused its request (status {status})")


def set_spin(ns: int, function=None) -> None:
    """How long the C pool's idle workers (and a caller waiting for them) spin before they sleep,
    in ns (tests: 0 runs the sleeping paths every time); ``function``: as in :func:`select`."""
    fn = function or _function()
    set_spin = getattr(fn.library, f"cutopk_compiled_set_spin{fn.suffix}")
    set_spin.argtypes = (ctypes.c_int64,)
    set_spin(int(ns))


def workers(function=None) -> int:
    """The C pool's worker threads started in this process (a forked child: none until its first
    split)."""
    fn = function or _function()
    count = getattr(fn.library, f"cutopk_compiled_workers{fn.suffix}")
    count.restype = ctypes.c_int
    return count()


# The pool's probe (:func:`measure_pool`): a call of two tiny rows, split in two or not, for the
# handover; rows of some 0.2 ms of work on one thread for what a second thread adds.
_HANDOVER_SHAPE, _HANDOVER_RUNS = (2, 64), 41
_WORK_SHAPE, _WORK_K, _WORK_RUNS = (64, 8192), 16, 9


def _timed(fn, x, k: int, method: str, threads: int, out: np.ndarray) -> float:
    start = time.perf_counter()
    select(x, k, True, False, "value", out, function=fn, method=method, threads=threads)
    return time.perf_counter() - start


def measure_pool(function=None) -> tuple[float, float] | None:
    """``(handover_s, efficiency)`` of the C file's pool on this machine now, for the thread cost
    model (:func:`cutopk.numpy.compiled_threads.pool_costs`): the extra seconds of a call split in two (publishing the job, a
    worker's claim, the wait for its last piece) over half the one-thread time, and what a second
    thread adds to the speed of rows of the threshold scan (1: twice as fast), from the fastest
    of a few runs by turns, some 5 ms in all. None where the route is not loaded (a plan before
    the first call), cannot run, or is turned off."""
    if function is None:
        if not _enabled() or (_planning.get() and not _state["tried"]):
            return None
        function = _function()
        if function is None:
            return None
    rng = np.random.default_rng(0)
    tiny = rng.random(_HANDOVER_SHAPE, dtype=np.float32)
    out = np.empty((tiny.shape[0], 2), dtype=np.int64)
    ones, twos = [], []
    for _ in range(_HANDOVER_RUNS):  # the first runs start the worker and warm it
        ones.append(_timed(function, tiny, 2, "rank", 1, out))
        twos.append(_timed(function, tiny, 2, "rank", 2, out))
    ones, twos = sorted(ones[4:]), sorted(twos[4:])
    handover = max(0.0, twos[len(twos) // 2] - ones[len(ones) // 2] / 2)
    rows = rng.random(_WORK_SHAPE, dtype=np.float32)
    out = np.empty((rows.shape[0], _WORK_K), dtype=np.int64)
    one = two = float("inf")
    for _ in range(_WORK_RUNS):  # by turns: a change of the machine's load meets both
        one = min(one, _timed(function, rows, _WORK_K, "threshold", 1, out))
        two = min(two, _timed(function, rows, _WORK_K, "threshold", 2, out))
    return handover, min(1.0, max(0.0, one / max(two - handover, 1e-9) - 1.0))
