"""The ``flashinfer`` peers: FlashInfer's top-K kernels (``flashinfer.top_k``) through a small shared
library, ``benchmarks/flashinfer/cutopk_flashinfer.cu``, built here with nvcc from the FlashInfer
wheel's own headers and flags (``benchmarks/flashinfer/build.py``) and loaded with ctypes.

Why not ``import flashinfer``: its top_k JIT-compiles a tvm-ffi module on first use (minutes of a
lent GPU's time) and needs FlashInfer's Python dependencies, which the lent machines (no package
index) do not have. The shim calls the kernels the wheel's bindings call, and this module repeats
``flashinfer.top_k``'s Python-side choices (FlashInfer 0.7.2.post1, ``flashinfer/topk.py``):

- ``flashinfer`` = ``flashinfer.top_k(x, k, sorted=True)``: the native kernels
  (``sampling::TopKDispatch``, which picks ``FilteredTopK`` or ``RadixTopKMultiCTA`` by its own
  heuristic, reported in ``route``), then ``torch.sort`` of the K (descending) and a gather, and
  the int32 indices widened to int64, as FlashInfer does. Comparable with torch and cutopk.
- ``flashinfer-unsorted`` = ``flashinfer.top_k(x, k)`` (its default, ``sorted=False``): on sm_90
  FlashInfer sends rows to its CUB backend (``cub::DeviceBatchedTopK`` with the wheel's CCCL) when
  ``is_cub_topk_beneficial`` says so (fewer than 128 rows or rows of at most 8192; 16-bit rows of
  131072 or more; float32 K >= 4096 on rows of 65536 or more), else to the native kernels. The
  K come in no order: compared as a multiset, like the ``cub`` peer, and comparable with it.
- Ties at the K-th value: FlashInfer's default (``tie_break=0``) returns any of the tied elements;
  the checker accepts any index that points at a selected value.

Refused (skipped, saying why): the smallest K (FlashInfer selects the largest only), dtypes other
than float32/float16/bfloat16, layouts other than contiguous rows (its bindings check
``CHECK_INPUT``: contiguous), K larger than the row.

The library is looked for at ``$CUTOPK_FLASHINFER_LIB``, then at
``build/flashinfer/libcutopk_flashinfer-<arch>-<hash>.so``, the hash covering the shim's source and
the wheel's version, so a changed source is never run from a stale build.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import pathlib

from cutopk import _environ
from cutopk._demo import env

from . import cub

SOURCE = env.REPO / "benchmarks" / "flashinfer" / "cutopk_flashinfer.cu"
STANDIN = SOURCE.with_name("tvm_ffi_standin.h")
BUILD_DIR = env.REPO / "build" / "flashinfer"
LIB_ENV = "CUTOPK_FLASHINFER_LIB"
VERSION = "0.7.2.post1"  # the wheel the build script takes (pip download flashinfer-python==...)
DEFAULT_ARCH = "sm_90"

# Must match DtypeCode in cutopk_flashinfer.cu.
DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}
NATIVE_ALGORITHMS = {0: "FilteredTopK", 1: "RadixTopKMultiCTA"}
CUB_MAX_N = 1 << 21  # DeviceBatchedTopK's per-row limit (CUB_TOPK_MAX_LEN in csrc/cub_topk.cu)

NOTE = (
    f"FlashInfer {VERSION}'s top-K kernels through benchmarks/flashinfer (built from the wheel, no JIT). "
    "flashinfer: top_k(sorted=True), native kernels + torch.sort of the K; flashinfer-unsorted: "
    "top_k(sorted=False), its CUB or native backend as flashinfer.top_k picks on this GPU, K unordered "
    "(compared as a multiset, time without ordering them); route says which kernel served each case"
)

_I64, _P = ctypes.c_int64, ctypes.c_void_p
# Every extern "C" function of the shim: (restype, argtypes); tests/bench/test_flashinfer_peer.py
# checks them against the C source.
SIGNATURES = {
    "cutopk_fi_version": (ctypes.c_char_p, []),
    "cutopk_fi_has_cub": (ctypes.c_int, []),
    "cutopk_fi_row_states_bytes": (_I64, []),
    "cutopk_fi_error_string": (ctypes.c_char_p, [ctypes.c_int]),
    "cutopk_fi_can_filtered": (ctypes.c_int, []),
    "cutopk_fi_native_algorithm": (ctypes.c_int, [ctypes.c_int, _I64, _I64, _I64, ctypes.c_int]),
    "cutopk_fi_native_topk": (
        ctypes.c_int,
        [ctypes.c_int, _P, _P, _P, _P, _I64, _I64, _I64, ctypes.c_int, _P],
    ),
    "cutopk_fi_cub_topk": (
        ctypes.c_int,
        [ctypes.c_int, _P, _P, _P, _P, ctypes.POINTER(ctypes.c_size_t), _I64, _I64, _I64, _P],
    ),
}


class FlashInferUnavailable(RuntimeError):
    """The shim cannot be built or loaded here; the message says why and what to do."""


def source_hash(version: str = VERSION) -> str:
    return hashlib.sha256(SOURCE.read_bytes() + STANDIN.read_bytes() + version.encode()).hexdigest()[:12]


def library_path(arch: str = DEFAULT_ARCH) -> pathlib.Path:
    """Where the build script writes the library for ``arch``, the current source and wheel."""
    given = _environ.path(LIB_ENV)
    if given is not None:
        return given
    return BUILD_DIR / f"libcutopk_flashinfer-{arch}-{source_hash()}.so"


def arch_of(compute_capability: str) -> str:
    """``sm_90`` for CuPy's compute capability string ``"90"``."""
    return f"sm_{compute_capability}"


def refusal(mode: str, dtype: str, layout: str, n: int, k: int) -> str | None:
    """Why FlashInfer's top_k does not take this case, or None."""
    if mode != "largest":
        return "flashinfer.top_k selects the largest only"
    if dtype not in DTYPES:
        return f"flashinfer.top_k takes {', '.join(DTYPES)}, not {dtype}"
    if layout != "rows":
        return "flashinfer.top_k takes contiguous (batch, d) rows only (its bindings check CHECK_INPUT)"
    if k > n:
        return f"K={k} is larger than the row ({n})"
    if n >= 1 << 32:
        return "flashinfer's kernels index rows with 32-bit integers"
    return None


def unsorted_backend(rows: int, n: int, k: int, dtype: str, major: int) -> str:
    """``"cub"`` or ``"native"``: what ``flashinfer.top_k(sorted=False)`` 0.7.2.post1 picks on a GPU of
    compute capability ``major`` (eager, no tie-break, not deterministic; the clusters backend is
    sm_100 only): ``can_use_cub_topk`` and ``is_cub_topk_beneficial`` in ``flashinfer/topk.py``."""
    if n > CUB_MAX_N or (n > 8192 and major < 9) or major >= 10:
        return "native"  # on sm_100 the clusters backend (not built here) would serve it
    if rows < 128 or n <= 8192:
        return "cub"
    if dtype != "float32" and n >= 131072:
        return "cub"
    if dtype == "float32" and k >= 4096 and n >= 65536:
        return "cub"
    return "native"


class FlashInferLibrary:
    """The loaded shim, with every entry point's signature declared (:data:`SIGNATURES`)."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.dll = cub.load_shim(path, SIGNATURES, FlashInferUnavailable, "FlashInfer")

    @property
    def version(self) -> str:
        return self.dll.cutopk_fi_version().decode()

    @property
    def has_cub(self) -> bool:
        return bool(self.dll.cutopk_fi_has_cub())

    def _check(self, err: int, what: str) -> None:
        if err:
            raise RuntimeError(
                f"FlashInfer {what} failed: {self.dll.cutopk_fi_error_string(err).decode()} (cudaError {err})"
            )

    def native_algorithm(self, dtype: str, rows: int, n: int, k: int) -> str:
        code = self.dll.cutopk_fi_native_algorithm(DTYPES[dtype], rows, n, k, 0)
        return NATIVE_ALGORITHMS.get(code, f"? ({code})")

    def native(self, dtype, keys_in, idx_out, vals_out, row_states, rows, n, k, stream) -> None:
        err = self.dll.cutopk_fi_native_topk(DTYPES[dtype], keys_in, idx_out, vals_out, row_states, rows, n, k, 0,
                                             stream or None)  # fmt: skip
        self._check(err, "TopKDispatch")

    def cub(self, dtype, keys_in, vals_out, idx_out, temp, temp_bytes, rows, n, k, stream) -> int:
        """FlashInfer's CUB backend; with ``temp == 0`` returns the scratch bytes it needs."""
        size = ctypes.c_size_t(temp_bytes)
        err = self.dll.cutopk_fi_cub_topk(DTYPES[dtype], keys_in or None, vals_out or None, idx_out or None,
                                          temp or None, ctypes.byref(size), rows, n, k, stream or None)  # fmt: skip
        self._check(err, "cub_topk")
        return size.value


@functools.cache
def _load(path: str) -> FlashInferLibrary:
    return FlashInferLibrary(pathlib.Path(path))


def load(path: pathlib.Path | None = None, arch: str = DEFAULT_ARCH) -> FlashInferLibrary:
    path = path or library_path(arch)
    if not path.is_file():
        raise FlashInferUnavailable(
            f"the FlashInfer shim is not built ({path} is missing): run `python benchmarks/flashinfer/build.py "
            f"--arch {arch}` on a machine with nvcc and a package index, and carry build/flashinfer"
        )
    return _load(str(path))


@functools.cache
def available(arch: str = DEFAULT_ARCH) -> tuple[FlashInferLibrary | None, str | None]:
    """``(library, None)`` when the shim for ``arch`` loads, else ``(None, why)``."""
    try:
        return load(arch=arch), None
    except FlashInferUnavailable as exc:
        return None, str(exc)


def multi_cta_blocks(n: int, dtype: str, shared_optin: int) -> int:
    """The blocks per row ``RadixTopKMultiCTA`` launches (FlashInfer 0.7.2.post1, ``topk.cuh``, not
    deterministic): each holds a chunk of the row's keys in its shared memory, beside 2,080 bytes
    of histograms and scalars."""
    key_bytes = 4 if dtype == "float32" else 2  # its ordered key type: uint32 or uint16
    fixed = -(-4 * (256 + 256 + 5) // 16) * 16
    vec = math.gcd(16 // key_bytes, n)
    chunk = max((shared_optin - fixed) // key_bytes // vec * vec, vec * 1024)
    return -(-n // chunk)


def route(
    x, axis: int, case, lib: FlashInferLibrary, major: int, sort: bool, limits: tuple[int, int] | None = None
):
    """FlashInfer's top-K of the CuPy array ``x`` (see the module doc): ``sort`` for the
    ``flashinfer`` peer, else ``flashinfer-unsorted``. ``limits``: the device's SMs and opt-in
    shared bytes per block, to refuse a launch that would never end (below)."""
    import cupy
    import torch

    from cutopk._demo.route import Route

    name = "flashinfer" if sort else "flashinfer-unsorted"
    if axis not in (-1, x.ndim - 1) or x.ndim != 2 or not x.flags.c_contiguous:
        return Route(name, None, "flashinfer.top_k takes contiguous (batch, d) rows only")
    rows, n = x.shape
    k, dtype = case.k, case.dtype
    if why := refusal(case.mode, dtype, case.layout, n, k):
        return Route(name, None, why)
    backend = "native" if sort else unsorted_backend(rows, n, k, dtype, major)
    if backend == "cub" and not lib.has_cub:
        return Route(
            name, None, "flashinfer.top_k would use its CUB backend here, and the shim was built without it"
        )
    bits = x.view(cupy.uint16) if dtype == "bfloat16" else x  # DLPack exporters may not know bfloat16
    t = torch.from_dlpack(bits)
    if dtype == "bfloat16":
        t = t.view(torch.bfloat16)
    dev = t.device
    if backend == "cub":
        temp_bytes = lib.cub(dtype, 0, 0, 0, 0, 0, rows, n, k, 0)  # size query, no launch
        temp = torch.empty(max(temp_bytes, 1), dtype=torch.uint8, device=dev)  # cached, as FlashInfer does

        def call_cub():
            vals = torch.empty(rows, k, dtype=t.dtype, device=dev)
            idx = torch.empty(rows, k, dtype=torch.int64, device=dev)
            stream = torch.cuda.current_stream(dev).cuda_stream
            lib.cub(dtype, t.data_ptr(), vals.data_ptr(), idx.data_ptr(), temp.data_ptr(), temp_bytes, rows, n, k,
                    stream)  # fmt: skip
            return vals, idx

        return Route(
            name,
            call_cub,
            sorts=False,
            detail="CUB DeviceBatchedTopK (FlashInfer's cub backend)",
            capture="torch",
        )

    algorithm = lib.native_algorithm(dtype, rows, n, k)
    if (
        algorithm == "RadixTopKMultiCTA"
        and limits
        and (blocks := multi_cta_blocks(n, dtype, limits[1])) > limits[0]
    ):
        # Its blocks of a row wait for one another at a barrier in global memory, and one block of
        # that size fills an SM: with more blocks than SMs the first ones wait forever for the rest.
        # flashinfer.top_k launches it all the same (1 x 16777216 hung an H100 on 2026-11-26).
        return Route(
            name,
            None,
            f"FlashInfer's RadixTopKMultiCTA would launch {blocks} blocks per row that wait for each "
            f"other, more than this GPU's {limits[0]} SMs hold at once: it never ends",
        )
    row_states = torch.zeros(int(lib.dll.cutopk_fi_row_states_bytes()), dtype=torch.uint8, device=dev)

    def call():
        vals = torch.empty(rows, k, dtype=t.dtype, device=dev)
        idx32 = torch.empty(rows, k, dtype=torch.int32, device=dev)
        stream = torch.cuda.current_stream(dev).cuda_stream
        lib.native(
            dtype, t.data_ptr(), idx32.data_ptr(), vals.data_ptr(), row_states.data_ptr(), rows, n, k, stream
        )
        idx = idx32.long()
        if not sort:
            return vals, idx
        vals, order = torch.sort(vals, dim=-1, descending=True)
        return vals, torch.gather(idx, -1, order)

    detail = f"native {algorithm}" + (" +torch.sort of the K" if sort else "")
    return Route(name, call, sorts=sort, detail=detail, capture="torch")
