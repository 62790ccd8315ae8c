"""The NumPy backend's compiled route: ``compiled.c``, built with the machine's C compiler.

One C function selects the top K of a block of rows as they lie in memory (any strides, any
alignment, native byte order, every dtype the backend takes): one pass over each row with a
running threshold, vectorised by the compiler, then a sort of the K (see the C file's header).
It needs no NumPy call per row and holds no GIL. One call takes every row of the request and
shares them between ``threads`` threads itself (the C file's pool: the calling thread and workers
kept alive between calls, a job handed over in microseconds; see its "Threads" section and
:func:`handover`), so no block goes through the backend's Python thread pool. A call of more
than ``INTERRUPT_BLOCK_ELEMENTS`` is made in blocks of rows, so that Ctrl-C interrupts it.

The library is built by the first call that takes the route (some 1.5 s; ``-march=native``),
never by ``cutopk.plan()`` (:func:`planning`, :func:`status`), into ``$CUTOPK_COMPILED_CACHE`` or
``$XDG_CACHE_HOME/cutopk/compiled`` (an absolute one; else ``~/.cache/cutopk/compiled``) under a
name that hashes the source, the compiler, its flags and the processor, with a build record
beside it (size, SHA-256, ABI, compiler, flags: ``cutopk._host_build``) that is checked before
the library is loaded: a file cut short would kill the process with SIGBUS when mapped. One
that does not fit its record, does not load, lacks the entry points or has another ABI is
closed and built again, once; the cache keeps the ``CACHE_KEEP`` libraries last used. A compiler that rejects ``-march=native`` gets the portable
build. The compiler: ``$CC`` (a command line; one that names no program is the reason the
route does not run, never passed over), else ``cc``, ``gcc`` or ``clang``. Where none is found,
or the build fails, the backend runs its NumPy routes, which give the same answers:
:func:`unavailable_reason` says why, and ``cutopk.plan()`` shows it. ``CUTOPK_COMPILED=0`` turns
the route off (the NumPy routes alone); it is read when it changes. The variables' names before
issue 40 (``CUTOPK_NATIVE``, ``CUTOPK_NATIVE_CACHE``, ``CUTOPK_NATIVE_ASAN``) still work where
the new name is unset, with a ``FutureWarning`` (:func:`setting`). A child forked while
another thread builds gets a lock of its own and builds for itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import hashlib
import os
import pathlib
import platform
import shlex
import shutil
import threading
import time
import warnings
from collections.abc import Iterator

import numpy as np

from .. import _environ
from .._host_build import BuildError, asan_loaded, build_once, cache_home, record_fits
from .._request import dtypes as _dtypes

SOURCE = pathlib.Path(__file__).with_name("compiled.c")
# The parts that SOURCE includes, one per method (``#include "compiled/..."``): the build finds them
# through ``-I`` and the cache key hashes them (:func:`parts_text`).
PARTS = SOURCE.with_name("compiled")
ENV_VAR = "CUTOPK_COMPILED"
CACHE_ENV_VAR = "CUTOPK_COMPILED_CACHE"
# -O3 and the machine's own vector instructions for the vectoriser (the key and threshold
# loops: 1x2**21 float32 k=64 in 0.67 ms with SSE2 alone, 0.27 ms with AVX-512). The cache key
# holds the processor's description, so another machine sharing the cache builds its own.
FLAGS = (
    "-O3",
    "-march=native",
    "-std=gnu11",
    "-fPIC",
    "-shared",
    "-fvisibility=hidden",
    "-fno-strict-aliasing",
    "-pthread",  # the C file's thread pool
)
# CUTOPK_COMPILED_ASAN=1: the build is instrumented by AddressSanitizer (its runtime must then be
# preloaded: LD_PRELOAD=$(cc -print-file-name=libasan.so)); .ci/run's sanitizer step.
ASAN_ENV_VAR = "CUTOPK_COMPILED_ASAN"
ASAN_FLAGS = ("-fsanitize=address", "-fno-omit-frame-pointer", "-g")
# Each compiler command line, flag set and processor builds a library of its own (every distinct
# $CC, sanitizer builds, the portable build): the cache keeps the CACHE_KEEP last used, and
# removes the others once unused for an hour (_host_build.evict).
CACHE_KEEP = 8
# The variables' names before issue 40 gave the route one name ("native" also meant byte order):
# users set them, so each is still read where its new name is unset, with a FutureWarning.
DEPRECATED_ENV_VARS = {
    ENV_VAR: "CUTOPK_NATIVE",
    CACHE_ENV_VAR: "CUTOPK_NATIVE_CACHE",
    ASAN_ENV_VAR: "CUTOPK_NATIVE_ASAN",
}
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
# (variable, text) read and whether it allows the route; "path"/"cc": the library loaded and the compiler
# command that built it.
_state: dict = {"lib": None, "why": None, "tried": False, "env": (None, True), "path": None, "cc": None}
# plan(): the route's state is reported, never built or loaded (see planning()).
_planning: contextvars.ContextVar = contextvars.ContextVar("cutopk_compiled_planning", default=False)


def _after_fork_in_child() -> None:
    """A fork while another thread builds the library: that thread does not exist in the child,
    and the lock it holds would never be released there. The child gets a lock of its own and,
    where nothing was loaded yet, tries again itself."""
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def find_compiler() -> tuple[list[str] | None, str | None]:
    """``(command, None)``: the C compiler's command line, ``$CC`` (split as a shell would:
    ``CC="ccache gcc"`` or ``CC="gcc -O0"`` too), else the first of ``cc``, ``gcc``, ``clang`` on
    PATH; or ``(None, why)``. A ``$CC`` that names no program is the reason, never passed over
    for another compiler: the user asked for that one."""
    text = os.environ.get("CC")
    if text is not None and text.strip():
        try:
            words = shlex.split(text)
        except ValueError as exc:
            return None, f"CC={text!r} cannot be split into words ({exc})"
        found = shutil.which(words[0]) if words else None
        if found is None:
            return None, f"CC={text!r}: {words[0]!r} is not a program (a path, or a name on PATH)"
        return [found, *words[1:]], None
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return [found], None
    return None, "no C compiler found (set CC, or install cc, gcc or clang)"


def setting(name: str) -> tuple[str, str | None]:
    """``(variable, text)`` of the route's environment variable ``name`` (``ENV_VAR``,
    ``CACHE_ENV_VAR`` or ``ASAN_ENV_VAR``): its own value where it is set, else the value of its
    deprecated earlier name (``DEPRECATED_ENV_VARS``) where that one is set, with a
    ``FutureWarning`` the first time in the process, else ``(name, None)``."""
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


def compiler() -> str | None:
    """The C compiler's command line as text (see :func:`find_compiler`), or None."""
    command, _ = find_compiler()
    return None if command is None else shlex.join(command)


def cache_dir() -> pathlib.Path:
    """Where the built library is kept: ``$CUTOPK_COMPILED_CACHE``, else
    ``$XDG_CACHE_HOME/cutopk/compiled`` (``~/.cache/cutopk/compiled``; a relative
    ``$XDG_CACHE_HOME`` is ignored, as the XDG specification says)."""
    root = _environ.path(*setting(CACHE_ENV_VAR))
    return cache_home() / "cutopk" / "compiled" if root is None else root


def _enabled() -> bool:
    """Whether ``CUTOPK_COMPILED`` (a flag, default on) allows the route; a value that is no flag
    raises, on every call (never cached)."""
    given = setting(ENV_VAR)
    seen, allowed = _state["env"]
    if given != seen:
        allowed = _environ.flag(given[0], True, given[1])
        _state["env"] = (given, allowed)
    return allowed


@functools.cache
def _processor() -> str:
    """The processor's model and instruction-set flags (what ``-march=native`` builds for)."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("model name", "flags", "Features"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.machine() + platform.processor()


def build_flags() -> tuple[str, ...]:
    """The compiler flags of this process's build: ``FLAGS``, and ``ASAN_FLAGS`` where
    ``CUTOPK_COMPILED_ASAN=1``."""
    variable, text = setting(ASAN_ENV_VAR)
    return FLAGS + (ASAN_FLAGS if _environ.flag(variable, False, text) else ())


def parts_text() -> str:
    """The parts of ``compiled.c`` (``PARTS``), each file's name and text, in name order."""
    return "\0".join(f"{p.name}\0{p.read_text()}" for p in sorted(PARTS.glob("*.[ch]")))


def library_path(cc: str, source: str, flags: tuple[str, ...]) -> pathlib.Path:
    """Where the build of ``source`` (and the parts it includes) by ``cc`` with ``flags`` is
    kept: named by a hash of them and of the processor."""
    text = "\0".join((source, parts_text(), cc, *flags, _processor()))
    key = hashlib.sha256(text.encode()).hexdigest()[:32]
    return cache_dir() / f"compiled-{key}.so"


def _record(cc: str, flags: tuple[str, ...]) -> dict:
    """What a build record holds beyond the file's size and SHA-256 (checked before loading)."""
    return {"abi": (ABI << 32) | ctypes.sizeof(Rows), "compiler": cc, "flags": list(flags)}


def build(cc: str, source: str, flags: tuple[str, ...] | None = None, rebuild: bool = False) -> pathlib.Path:
    """Compile ``source`` with ``cc`` (a command line) and ``flags`` (default
    :func:`build_flags`) into the cache, reused where its build record fits (the same source,
    compiler, flags and processor; the file's size and SHA-256 as recorded); ``rebuild``: build
    even so. Raises ``RuntimeError`` with the compiler's message when it fails."""
    flags, include = build_flags() if flags is None else flags, ("-I", str(PARTS.parent))
    try:
        return build_once(
            library_path(cc, source, flags),
            SOURCE.name,
            source,
            lambda src, built, _: [[*shlex.split(cc), *flags, *include, str(src), "-o", str(built)]],
            record=_record(cc, flags),
            rebuild=rebuild,
            keep=CACHE_KEEP,
        )
    except BuildError as exc:
        raise RuntimeError(f"{cc} could not compile {SOURCE.name}: {exc.stderr.strip()[-2000:]}") from None
    except OSError as exc:  # the cache folder, or the compiler, cannot be used
        variable, root = setting(CACHE_ENV_VAR)
        where = f"{cache_dir()} (from {variable})" if root else cache_dir()
        raise RuntimeError(f"{cc} could not build into {where}: {exc}") from None


class LoadError(RuntimeError):
    """A library that is not this module's: it does not load, lacks the entry points, or its
    ABI is another."""


def _close(lib) -> None:
    """Unload ``lib``: else loading its path again, once rebuilt, gives back the same handle."""
    try:
        import _ctypes

        _ctypes.dlclose(lib._handle)
    except (ImportError, AttributeError, OSError):
        pass


def load(path: pathlib.Path):
    """The library's ``cutopk_compiled_select``, ready for :func:`select`; :class:`LoadError` where
    it does not load, lacks the entry points, or its ABI is not this module's (it is closed)."""
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise LoadError(f"{path} does not load: {exc}") from None
    try:
        abi, fn = lib.cutopk_compiled_abi, lib.cutopk_compiled_select
    except AttributeError:
        _close(lib)
        raise LoadError(
            f"{path} lacks the entry points (cutopk_compiled_abi, cutopk_compiled_select)"
        ) from None
    abi.restype, abi.argtypes = ctypes.c_int64, ()
    found, expected = abi(), (ABI << 32) | ctypes.sizeof(Rows)
    if found != expected:
        _close(lib)
        raise LoadError(f"the compiled route's ABI {found:#x} is not the expected {expected:#x}")
    fn.restype, fn.argtypes = ctypes.c_int, (ctypes.POINTER(Rows),)
    # The pool's controls (set_spin, workers: tests) travel with the function.
    fn.library = lib  # type: ignore[attr-defined]
    return fn


def _build_and_load(cc: str, source: str, flags: tuple[str, ...]):
    """Build (or find built) and load; a library that does not load is built again, once."""
    path = build(cc, source, flags)
    try:
        fn = load(path)
    except LoadError:
        path = build(cc, source, flags, rebuild=True)
        try:
            fn = load(path)
        except LoadError as exc:
            raise LoadError(f"{exc} (built again by {cc}; it still does not load)") from None
    _state["path"], _state["cc"] = path, cc
    return fn


def _portable(flags: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f for f in flags if f != "-march=native")


def _obstacle() -> tuple[str | None, str | None, tuple[str, ...]]:
    """``(cc, why, flags)``: the compiler command and flags a build would use, or why none can
    run (no compiler, a ``$CC`` that names none, a sanitizer build without its runtime)."""
    command, why = find_compiler()
    flags = build_flags()
    if command is None:
        return None, why, flags
    if ASAN_FLAGS[0] in flags and not asan_loaded():  # loading it would abort the process
        why = (
            f"{setting(ASAN_ENV_VAR)[0]}=1 needs AddressSanitizer's runtime loaded first: "
            "LD_PRELOAD=$(cc -print-file-name=libasan.so)"
        )
        return None, why, flags
    return shlex.join(command), None, flags


def _load():
    """Build (once) and load the library; None, with the reason kept, where that fails."""
    cc, why, flags = _obstacle()
    if cc is None:
        _state["why"] = why
        return None
    source = SOURCE.read_text()
    try:
        try:
            return _build_and_load(cc, source, flags)
        except LoadError:
            raise
        except RuntimeError:
            # A compiler that does not know -march=native (some cross or older compilers):
            # the portable build, vectorised for the processor family's baseline.
            if "-march=native" not in flags:
                raise
            return _build_and_load(cc, source, _portable(flags))
    except LoadError as exc:
        _state["why"] = f"the compiled route's library cannot be used: {exc}"
    except (OSError, RuntimeError) as exc:
        _state["why"] = f"the compiled route could not be built: {exc}"
    return None


def _function():
    if not _state["tried"]:
        if _planning.get():  # plan(): nothing is built or loaded
            return None
        with _lock:
            if not _state["tried"]:
                _state["lib"] = _load()
                _state["tried"] = True
    return _state["lib"]


@contextlib.contextmanager
def planning() -> Iterator[None]:
    """Within the block (``cutopk.plan``), :func:`available` and :func:`unavailable_reason`
    build and load nothing: where the route was not tried yet, they answer whether it would
    be (a compiler is found: the first call that takes the route builds it)."""
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
        return _obstacle()[1]
    if _function() is None:
        return _state["why"]
    return None


def available() -> bool:
    """Whether :func:`select` can run (the library built and loaded, not turned off; inside
    :func:`planning`: would be)."""
    return unavailable_reason() is None


def status() -> dict:
    """What ``cutopk.plan()`` says of the route where it can run, without building or loading
    anything: ``compiled`` (loaded; built and not loaded yet; or not built yet, with the
    library's path) and ``compiler`` (the command that built it, or would)."""
    if _state["tried"] and _state["lib"] is not None:
        return {"compiled": f"loaded from {_state['path']}", "compiler": _state["cc"]}
    cc, _, flags = _obstacle()
    if cc is None:  # the reason is plan()'s compiled_unavailable
        return {}
    source = SOURCE.read_text()
    for candidate in (flags, _portable(flags)):
        path = library_path(cc, source, candidate)
        if record_fits(path, _record(cc, candidate)) is None:
            return {
                "compiled": f"built, loaded by the first call that takes the route: {path}",
                "compiler": cc,
            }
    path = library_path(cc, source, flags)
    return {
        "compiled": f"not built: the first call that takes the route builds it (some seconds) into {path}",
        "compiler": cc,
    }


@functools.cache
def _element(dtype: np.dtype) -> tuple[int, int]:
    """The C file's element kind and +inf's bits (floats) for ``dtype``."""
    info = _dtypes.info(dtype)
    if info.is_float:
        inf = np.array(np.inf, dtype=dtype).view(info.key_dtype)[()]
        return _KIND_FLOAT, int(inf)
    return (_KIND_SIGNED if info.is_signed else _KIND_UNSIGNED), 0


def _address(a: np.ndarray) -> int:
    """The address of ``a``'s first element. ``a.ctypes.data`` builds a ctypes helper object (some
    2.8 us on the development machine, three per call); a writable C-contiguous array's buffer
    gives it in 0.8 us. Other arrays (strided views, read-only inputs, dtypes that NumPy does not
    export as buffers: bfloat16) the plain way."""
    flags = a.flags
    if flags.c_contiguous and flags.writeable:
        try:
            return ctypes.addressof(ctypes.c_char.from_buffer(a))  # type: ignore[arg-type]  # a buffer
        except (TypeError, ValueError, BufferError):
            pass
    return a.ctypes.data


# A C call holds no GIL and cannot be interrupted: Ctrl-C's KeyboardInterrupt waits until it
# returns. A call of more elements than this is made in blocks of whole rows (:func:`block_rows`),
# and Python raises it as the block under way returns: a block of 2**24 float32 elements took
# 8-10 ms by the threshold scan (rows of 65536, K=8, one thread, loaded 2-core EPYC with
# AVX-512), the slowest methods some 5x that; the split costs a short call some 0.1 us.
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
    :func:`available`, or with ``function`` from :func:`load` (another build: the tests'
    portable one)."""
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
    lib = (function or _function()).library
    lib.cutopk_compiled_set_spin.argtypes = (ctypes.c_int64,)
    lib.cutopk_compiled_set_spin(int(ns))


def workers(function=None) -> int:
    """The C pool's worker threads started in this process (a forked child: none until its first
    split)."""
    lib = (function or _function()).library
    lib.cutopk_compiled_workers.restype = ctypes.c_int
    return lib.cutopk_compiled_workers()


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
    the first build) or turned off."""
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
