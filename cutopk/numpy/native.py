"""The NumPy backend's compiled route: ``select_rows.c``, built with the machine's C compiler.

One C function selects the top K of a block of rows as they lie in memory (any strides, any
alignment, native byte order, every dtype the backend takes): one pass over each row with a
running threshold, vectorised by the compiler, then a sort of the K (see the C file's header).
It needs no NumPy call per row and holds no GIL, so blocks of rows on the backend's thread pool
run side by side.

The library is built on first use, once per machine (some 1.5 s; ``-march=native``), into
``$CUTOPK_NATIVE_CACHE`` or ``$XDG_CACHE_HOME/cutopk/native`` under a name that hashes the
source, the compiler, its flags and the processor, and reused after (a compiler that rejects
``-march=native`` gets the portable build). Where no C compiler is found (``$CC``,
else ``cc``, ``gcc`` or ``clang``), or it fails, the backend runs its NumPy routes, which give
the same answers: :func:`unavailable_reason` says why, and ``cutopk.plan()`` shows it.
``CUTOPK_NATIVE=0`` turns the route off (the NumPy routes alone); it is read when it changes.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import pathlib
import platform
import shutil
import threading

import numpy as np

from .._host_build import BuildError, asan_loaded, build_once
from .._request import dtypes as _dtypes

SOURCE = pathlib.Path(__file__).with_name("select_rows.c")
ENV_VAR = "CUTOPK_NATIVE"
CACHE_ENV_VAR = "CUTOPK_NATIVE_CACHE"
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
)
# CUTOPK_NATIVE_ASAN=1: the build is instrumented by AddressSanitizer (its runtime must then be
# preloaded: LD_PRELOAD=$(cc -print-file-name=libasan.so)); .ci/run's sanitizer step.
ASAN_ENV_VAR = "CUTOPK_NATIVE_ASAN"
ASAN_FLAGS = ("-fsanitize=address", "-fno-omit-frame-pointer", "-g")
# The C file's ABI number and the size of its struct cutopk_rows (cutopk_native_abi()).
ABI = 2

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
    )


_lock = threading.Lock()
# "lib": the loaded function, or None with "why" saying why not; "env": the last CUTOPK_NATIVE
# text read and whether it allows the route.
_state: dict = {"lib": None, "why": None, "tried": False, "env": (None, True)}


def compiler() -> str | None:
    """The C compiler: ``$CC``, else ``cc``, ``gcc`` or ``clang`` on PATH."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def cache_dir() -> pathlib.Path:
    """Where the built library is kept: ``$CUTOPK_NATIVE_CACHE``, else
    ``$XDG_CACHE_HOME/cutopk/native``."""
    root = os.environ.get(CACHE_ENV_VAR)
    if root:
        return pathlib.Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(xdg) / "cutopk" / "native"


def _enabled() -> bool:
    text = os.environ.get(ENV_VAR)
    seen, allowed = _state["env"]
    if text != seen:
        allowed = text is None or text.strip().lower() not in ("0", "off", "false", "no")
        _state["env"] = (text, allowed)
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
    ``CUTOPK_NATIVE_ASAN=1``."""
    return FLAGS + (ASAN_FLAGS if os.environ.get(ASAN_ENV_VAR) == "1" else ())


def build(cc: str, source: str, flags: tuple[str, ...] | None = None) -> pathlib.Path:
    """Compile ``source`` with ``cc`` and ``flags`` (default :func:`build_flags`) into the cache
    (reused when built from the same source, compiler, flags and processor); raises
    ``RuntimeError`` with the compiler's message when it fails."""
    flags = build_flags() if flags is None else flags
    key = hashlib.sha256("\0".join((source, cc, *flags, _processor())).encode()).hexdigest()[:32]
    try:
        return build_once(
            cache_dir() / f"select_rows-{key}.so",
            SOURCE.name,
            source,
            lambda src, built, _: [[cc, *flags, str(src), "-o", str(built)]],
        )
    except BuildError as exc:
        raise RuntimeError(f"{cc} could not compile {SOURCE.name}: {exc.stderr.strip()[-2000:]}") from None


def load(path: pathlib.Path):
    """The library's ``cutopk_select_rows``, ready for :func:`select`; ``RuntimeError`` when
    the library's ABI is not this module's."""
    lib = ctypes.CDLL(str(path))
    abi = lib.cutopk_native_abi
    abi.restype, abi.argtypes = ctypes.c_int64, ()
    found, expected = abi(), (ABI << 32) | ctypes.sizeof(Rows)
    if found != expected:
        raise RuntimeError(f"the compiled route's ABI {found:#x} is not the expected {expected:#x}")
    fn = lib.cutopk_select_rows
    fn.restype, fn.argtypes = ctypes.c_int, (ctypes.POINTER(Rows),)
    return fn


def _load():
    """Build (once) and load the library; None, with the reason kept, where that fails."""
    cc = compiler()
    if cc is None:
        _state["why"] = "no C compiler found (set CC, or install cc, gcc or clang)"
        return None
    flags = build_flags()
    if ASAN_FLAGS[0] in flags and not asan_loaded():  # loading it would abort the process
        _state["why"] = (
            f"{ASAN_ENV_VAR}=1 needs AddressSanitizer's runtime loaded first: "
            "LD_PRELOAD=$(cc -print-file-name=libasan.so)"
        )
        return None
    source = SOURCE.read_text()
    try:
        try:
            return load(build(cc, source, flags))
        except RuntimeError:
            # A compiler that does not know -march=native (some cross or older compilers):
            # the portable build, vectorised for the processor family's baseline.
            if "-march=native" not in flags:
                raise
            return load(build(cc, source, tuple(f for f in flags if f != "-march=native")))
    except (OSError, RuntimeError) as exc:
        _state["why"] = f"the compiled route could not be built: {exc}"
        return None


def _function():
    if not _state["tried"]:
        with _lock:
            if not _state["tried"]:
                _state["lib"] = _load()
                _state["tried"] = True
    return _state["lib"]


def unavailable_reason() -> str | None:
    """Why the compiled route does not run in this process now, or None when it does."""
    if not _enabled():
        return f"turned off by {ENV_VAR}={os.environ.get(ENV_VAR)}"
    if _function() is None:
        return _state["why"]
    return None


def available() -> bool:
    """Whether :func:`select` can run (the library built and loaded, not turned off)."""
    return _enabled() and _function() is not None


@functools.cache
def _element(dtype: np.dtype) -> tuple[int, int]:
    """The C file's element kind and +inf's bits (floats) for ``dtype``."""
    info = _dtypes.info(dtype)
    if info.is_float:
        inf = np.array(np.inf, dtype=dtype).view(info.key_dtype)[()]
        return _KIND_FLOAT, int(inf)
    return (_KIND_SIGNED if info.is_signed else _KIND_UNSIGNED), 0


def select(
    x: np.ndarray,
    k: int,
    largest: bool,
    nan_first: bool,
    order: str,
    out: np.ndarray,
    function=None,
    method: str = "threshold",
) -> None:
    """Write the column indices of the top K of each row of ``x`` into ``out``.

    ``x``: 2-D, any strides, native byte order, ``1 <= k <= x.shape[1]``; ``out``: a C-contiguous
    int64 array of ``(rows, k)``. The order is ``order``'s ("value"; "index", or "none", which
    gives index order as the NumPy routes do); ``method``, one of ``METHODS`` (the C file says
    which inputs each suits; every one is exact; "count" takes 8-bit elements only, "rank" up to 32 bits). Only where :func:`available`, or with
    ``function`` from :func:`load` (another build: the tests' portable one)."""
    kind, inf_bits = _element(x.dtype)
    rows = Rows(
        x.ctypes.data,
        x.shape[0],
        x.shape[1],
        x.strides[0],
        x.strides[1],
        k,
        out.ctypes.data,
        inf_bits,
        x.itemsize,
        kind,
        int(largest),
        int(nan_first),
        _ORDER[order],
        METHODS[method],
    )
    status = (function or _function())(ctypes.byref(rows))
    if status == _STATUS_NO_MEMORY:
        raise MemoryError(
            f"the compiled route could not allocate its buffer for k={k} (rows of {x.shape[1]})"
        )
    if status != 0:  # the backend's checks make this unreachable
        raise RuntimeError(f"the compiled route refused its request (status {status})")
