"""The ``cub`` peer: NVIDIA's own top-K (``cub::DeviceTopK``, ``cub::DeviceBatchedTopK``, CCCL >= 3.3)
through a small shared library, ``benchmarks/cub/cutopk_cub.cu``, built with nvcc and loaded with
ctypes.

CUB's device-wide algorithms dispatch on the host, so they cannot be compiled by ``cupy.RawModule``
like cutopk's kernels; the library has C entry points that take device pointers, sizes, K and a
stream, and follow CUB's two-call protocol (a null scratch pointer asks for the scratch size). The
scratch is allocated from CuPy's memory pool here.

What the peer is, and is not:

- **Unordered, non-deterministic output.** This CUB release compiles only with
  ``determinism::not_guaranteed`` and ``output_ordering::unsorted``: each row's K results come in no
  particular order, and where values tie at the K-th place, which tied elements are returned may vary
  between runs. The ``cub`` peer's selected values are compared with cutopk's as a multiset (bit for
  bit, every NaN one value) and every index must point at its value; its K are not sorted, so its
  time does not include putting them in order, which cutopk's (``sorted=True``) and torch's do. The
  ``cub-sorted`` peer is the same call followed by an argsort of the K (timed with it, checked in
  order): the sort's cost is the difference between the two.
- **Rows.** ``DeviceBatchedTopK`` (one block per row) for rows of at most
  :func:`CubLibrary.batched_max_n` elements; longer rows run ``DeviceTopK`` one row after another on
  the same stream, inside one library call (``route`` in the result says which).
- **Layout.** CUB reads contiguous rows: for another layout the timed call includes a copy into
  contiguous rows (``+copy`` in ``route``), as a CUB user would have to make.
- **Dtypes.** float32, float16, bfloat16.

The library is looked for, in order, at ``$CUTOPK_CUB_LIB``, then at
``build/cub/libcutopk_cub-<arch>-<source hash>.so`` in the checkout (what :func:`build` writes, so a
changed source is never run from a stale build). :func:`build` needs nvcc and CCCL headers with
``cub/device/device_topk.cuh``: ``$CUTOPK_CCCL_INCLUDE``, the copy ``build/cub/cccl`` that
``python benchmarks/cub/build.py --copy-headers`` makes for a machine without a package index, or the
``nvidia-cuda-cccl`` wheel (CUDA 13.0's own CCCL, 3.0, has no ``DeviceTopK``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import pathlib
import re
import shutil
import subprocess

from cutopk import _environ
from cutopk._demo import env

SOURCE = env.REPO / "benchmarks" / "cub" / "cutopk_cub.cu"
BUILD_DIR = env.REPO / "build" / "cub"
HEADERS_COPY = BUILD_DIR / "cccl"
LIB_ENV = "CUTOPK_CUB_LIB"
CCCL_ENV = "CUTOPK_CCCL_INCLUDE"
MIN_CUB_VERSION = 300300  # cub::DeviceTopK first appears in CCCL 3.3
DEFAULT_ARCH = "sm_90"  # the lent GPUs (H100, H200)

# Must match DtypeCode in cutopk_cub.cu.
DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}

NOTE = (
    "CUB DeviceTopK/DeviceBatchedTopK: unordered, non-deterministic output (the only mode this CUB "
    "release implements). cub: its values compared as a multiset, its indices checked to point at them, "
    "its K not sorted, so its time excludes ordering them (cutopk's and torch's include it). "
    "cub-sorted: the same call plus cupy.argsort of the K, timed together and checked in order"
)

_I64 = ctypes.c_int64
# (dtype, largest, temp, *temp_bytes, keys_in, keys_out, idx_out, rows, n, k, stream): both row entry points.
_ENTRY = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p,
          ctypes.c_void_p, ctypes.c_void_p, _I64, _I64, _I64, ctypes.c_void_p]  # fmt: skip
# Every extern "C" function of the shim: (restype, argtypes). Declared, so that ctypes does not pass
# Python ints as 32-bit C ints (truncating pointers and sizes); tests/bench/test_cub_shim.py checks them
# against the C source.
SIGNATURES = {
    "cutopk_cub_version": (ctypes.c_int, []),
    "cutopk_cub_batched_max_n": (_I64, []),
    "cutopk_cub_error_string": (ctypes.c_char_p, [ctypes.c_int]),
    "cutopk_cub_topk_rows": (ctypes.c_int, _ENTRY),
    "cutopk_cub_batched_topk": (ctypes.c_int, _ENTRY),
}


class CubUnavailable(RuntimeError):
    """The shim cannot be built or loaded here; the message says why and what to do."""


def cub_version(include: pathlib.Path) -> int | None:
    """``CUB_VERSION`` of the CCCL headers under ``include`` (e.g. 300500), or None."""
    try:
        text = (include / "cub" / "version.cuh").read_text()
    except OSError:
        return None
    m = re.search(r"#define\s+CUB_VERSION\s+(\d+)", text)
    return int(m.group(1)) if m else None


def _wheel_includes() -> list[pathlib.Path]:
    """``include/cccl`` of the installed ``nvidia-cuda-cccl`` wheels (found without importing CUDA)."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    roots = list(spec.submodule_search_locations or []) if spec else []
    return [pathlib.Path(r) / cu / "include" / "cccl" for r in roots for cu in ("cu13", "cu12")]


def cccl_include(copy: bool = True) -> pathlib.Path:
    """The first CCCL include folder that has ``cub::DeviceTopK`` (see the module doc for the
    order; ``copy=False`` leaves out the copy in ``build/cub/cccl``)."""
    candidates = [p for p in [_environ.path(CCCL_ENV)] if p is not None]
    candidates += [HEADERS_COPY] if copy else []
    candidates += _wheel_includes()
    seen = []
    for path in candidates:
        version = cub_version(path)
        complete = (path / "cub/device/device_topk.cuh").is_file() and (path / "thrust").is_dir()
        if version is not None and version >= MIN_CUB_VERSION and complete:
            return path
        seen.append(f"{path} ({'CUB ' + str(version) if version else 'no CUB'})")
    raise CubUnavailable(
        f"no CCCL headers with cub::DeviceTopK (CUB >= {MIN_CUB_VERSION}) found; looked at "
        + "; ".join(seen)
        + f". Install nvidia-cuda-cccl>=13 or set {CCCL_ENV}"
    )


def source_hash() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]


def library_path(arch: str = DEFAULT_ARCH) -> pathlib.Path:
    """Where :func:`build` writes the library for ``arch`` and the current source."""
    given = _environ.path(LIB_ENV)
    if given is not None:
        return given
    return BUILD_DIR / f"libcutopk_cub-{arch}-{source_hash()}.so"


def nvcc_command(out: pathlib.Path, arch: str, include: pathlib.Path, nvcc: str = "nvcc") -> list[str]:
    """The nvcc command line: a shared library with the CUDA runtime linked statically (so the
    library needs only the driver), CCCL's headers first on the include path (ahead of the
    toolkit's own, older ones)."""
    return [nvcc, "-std=c++17", "-O3", f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC",
            "-cudart", "static", "-I", str(include), str(SOURCE), "-o", str(out)]  # fmt: skip


def build(
    arch: str = DEFAULT_ARCH,
    out: pathlib.Path | None = None,
    include: pathlib.Path | None = None,
    nvcc: str = "nvcc",
) -> pathlib.Path:
    """Compile the shim with nvcc (no GPU needed) and return the library's path.

    Raises :class:`CubUnavailable` when nvcc or the headers are missing or the compilation fails
    (with nvcc's messages).
    """
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise ValueError(f"arch: expected a real architecture such as 'sm_90', got {arch!r}")
    compiler = shutil.which(nvcc)
    if compiler is None:
        raise CubUnavailable(f"nvcc not found on PATH ({nvcc!r}): the CUB shim cannot be built here")
    include = include or cccl_include()
    out = out or library_path(arch)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".so.tmp")
    proc = subprocess.run(
        nvcc_command(tmp, arch, include, compiler), capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise CubUnavailable(f"nvcc failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-2000:]}")
    tmp.replace(out)  # never leave a half-written library under the final name
    return out


def copy_headers(include: pathlib.Path | None = None, dest: pathlib.Path = HEADERS_COPY) -> pathlib.Path:
    """Copy the CCCL headers (cub/, cuda/, nv/ and thrust/, which CUB includes: about 25 MB) to ``dest``, for a
    machine without a package index (the device tool carries ignored folders such as build/)."""
    include = include or cccl_include(copy=False)
    if dest.exists():
        shutil.rmtree(dest)
    for part in ("cub", "cuda", "nv", "thrust"):
        shutil.copytree(include / part, dest / part)
    return dest


def load_shim(path: pathlib.Path, signatures: dict, unavailable: type[Exception], label: str) -> ctypes.CDLL:
    """A benchmark shim (this CUB one, FlashInfer's) loaded with every entry point of
    ``signatures`` (name: (restype, argtypes)) declared; ``unavailable`` says why it cannot be."""
    try:
        dll = ctypes.CDLL(str(path))
    except OSError as exc:
        raise unavailable(f"cannot load the {label} shim {path}: {exc}") from exc
    for name, (restype, argtypes) in signatures.items():
        try:
            fn = getattr(dll, name)
        except AttributeError:
            raise unavailable(f"{path} has no {name}: built from another source? rebuild it") from None
        fn.restype, fn.argtypes = restype, argtypes
    return dll


class CubLibrary:
    """The loaded shim, with every entry point's signature declared (:data:`SIGNATURES`)."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.dll = load_shim(path, SIGNATURES, CubUnavailable, "CUB")

    @property
    def version(self) -> int:
        return self.dll.cutopk_cub_version()

    @property
    def batched_max_n(self) -> int:
        return self.dll.cutopk_cub_batched_max_n()

    def error_string(self, code: int) -> str:
        return self.dll.cutopk_cub_error_string(code).decode()

    def entry(self, batched: bool):
        return self.dll.cutopk_cub_batched_topk if batched else self.dll.cutopk_cub_topk_rows

    def call(self, batched: bool, dtype: str, largest: bool, temp: int, temp_bytes: int, keys_in: int,
             keys_out: int, idx_out: int, rows: int, n: int, k: int, stream: int) -> int:  # fmt: skip
        """One call of an entry point; with ``temp == 0`` returns the scratch bytes it needs, else
        runs and returns ``temp_bytes``. Raises RuntimeError naming CUDA's error."""
        if dtype not in DTYPES:
            raise ValueError(f"dtype: the CUB shim takes {sorted(DTYPES)}, got {dtype!r}")
        size = ctypes.c_size_t(temp_bytes)
        err = self.entry(batched)(DTYPES[dtype], int(largest), temp or None, ctypes.byref(size), keys_in or None,
                                  keys_out or None, idx_out or None, rows, n, k, stream or None)  # fmt: skip
        if err:
            what = "DeviceBatchedTopK" if batched else "DeviceTopK"
            raise RuntimeError(f"cub::{what} failed: {self.error_string(err)} (cudaError {err})")
        return size.value


@functools.cache
def _load(path: str) -> CubLibrary:
    return CubLibrary(pathlib.Path(path))


def load(path: pathlib.Path | None = None, arch: str = DEFAULT_ARCH) -> CubLibrary:
    """The shim at ``path`` (default :func:`library_path`), loaded once per process; raises
    :class:`CubUnavailable` saying how to build it when it is missing."""
    path = path or library_path(arch)
    if not path.is_file():
        raise CubUnavailable(
            f"the CUB shim is not built ({path} is missing): run `python benchmarks/cub/build.py --arch {arch}` "
            "(needs nvcc and CCCL >= 3.3 headers; no GPU)"
        )
    return _load(str(path))


@functools.cache
def available(arch: str = DEFAULT_ARCH) -> tuple[CubLibrary | None, str | None]:
    """``(library, None)`` when the shim for ``arch`` loads, else ``(None, why)``; asked once per
    process (the benchmark does not build: ``tools/gpu_session.sh`` and ``benchmarks/cub/build.py`` do)."""
    try:
        return load(arch=arch), None
    except CubUnavailable as exc:
        return None, str(exc)


def arch_of(compute_capability: str) -> str:
    """``sm_90`` for CuPy's compute capability string ``"90"``."""
    return f"sm_{compute_capability}"


def route(x, axis: int, k: int, mode: str, dtype: str, lib: CubLibrary, sort: bool = False):
    """CUB's top-K of the CuPy array ``x`` along ``axis`` (see the module doc): unordered values
    (``sorts=False``) and int64 indices, torch's NaN rule (a positive NaN ranks above +inf).

    With ``sort`` (the ``cub-sorted`` peer) the K of every row are then put in order by value with
    ``cupy.argsort`` and a gather, inside the timed call: CUB's time with the ordering that cutopk's
    ``sorted=True`` and torch's ``sorted=True`` include; ``cub`` beside it is the time without.
    """
    import cupy

    from cutopk._demo.route import Route

    name = "cub-sorted" if sort else "cub"
    if dtype not in DTYPES:
        return Route(name, None, f"the CUB shim takes {', '.join(DTYPES)}, not {dtype}")
    moved = cupy.moveaxis(x, axis, -1)
    lead, n = moved.shape[:-1], moved.shape[-1]
    rows = 1
    for d in lead:
        rows *= d
    if k < 1 or rows == 0:
        return Route(name, None, "nothing to select (K = 0 or no rows)")
    contiguous = moved.flags.c_contiguous
    batched = n <= lib.batched_max_n
    largest = mode == "largest"
    temp_bytes = lib.call(batched, dtype, largest, 0, 0, 0, 0, 0, rows, n, k, 0)  # size query, no launch
    bits = f"u{x.dtype.itemsize}"  # outputs as bit patterns, viewed as x's dtype at the end

    def call():
        src = moved if contiguous else cupy.ascontiguousarray(moved)
        vals = cupy.empty((*lead, k), dtype=bits)
        idx = cupy.empty((*lead, k), dtype=cupy.int64)
        temp = cupy.empty(max(temp_bytes, 1), dtype=cupy.uint8)  # CuPy's pool, like every other allocation
        stream = cupy.cuda.get_current_stream().ptr
        lib.call(batched, dtype, largest, temp.data.ptr, temp_bytes, src.data.ptr, vals.data.ptr, idx.data.ptr,
                 rows, n, k, stream)  # fmt: skip
        vals = vals.view(x.dtype)
        if sort:  # ascending, NaN last; reversed for the largest: NaN first, as torch's rule ranks it
            order = cupy.argsort(vals, axis=-1)
            if largest:
                order = order[..., ::-1]
            vals, idx = cupy.take_along_axis(vals, order, axis=-1), cupy.take_along_axis(idx, order, axis=-1)
        return cupy.moveaxis(vals, -1, axis), cupy.moveaxis(idx, -1, axis)

    detail = "DeviceBatchedTopK" if batched else f"DeviceTopK per row ({rows} calls)"
    detail += "" if contiguous else " +copy to contiguous rows"
    return Route(name, call, sorts=sort, detail=detail + (" +argsort of the K" if sort else ""))
