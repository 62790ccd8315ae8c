"""``RawModule`` and kernel launches for the CPU simulator, mirroring ``cupy.RawModule``."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Sequence

import numpy as np

from . import _errors, _rewrite, _toolchain

# Fault handlers are process-wide, so one launch runs at a time in a process.
_LAUNCH_LOCK = threading.Lock()
_MODULE_CACHE: dict[tuple, ctypes.CDLL] = {}
_MODULE_CACHE_LOCK = threading.Lock()

MAX_PARAMS = 64
DEFAULT_SPIN_BUDGET = 1 << 26
# CuPy passes Python scalars as these NumPy types.
_PYTHON_SCALARS = {bool: np.bool_, int: np.int64, float: np.float64}
_KIND_NAMES = {
    "p": "a pointer",
    "i": "signed integer",
    "u": "unsigned integer",
    "f": "floating-point number",
    "h": "__half",
    "b": "__nv_bfloat16",
    "B": "bool",
    "?": "value",
}


def _scalar_kind(dtype: np.dtype) -> str:
    if dtype.name == "bfloat16":
        return "b"
    if dtype == np.float16:
        return "h"
    return {"i": "i", "u": "u", "f": "f", "b": "B"}.get(dtype.kind, "?")


def _dim3(value, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(int(d) < 0 for d in dims):
        raise ValueError(f"{what}: expected an int or up to 3 non-negative ints, got {value!r}")
    return (*(int(d) for d in dims), *(1,) * (3 - len(dims)))


def _asan_loaded() -> bool:
    try:
        with open("/proc/self/maps") as maps:
            return "libasan" in maps.read()
    except OSError:
        return False


class RawModule:
    """CUDA C++ source compiled for the CPU simulator; the interface of ``cupy.RawModule``.

    Parameters
    ----------
    code : str
        The CUDA source (one translation unit; CUDA headers such as ``cuda_fp16.h`` may be
        included, local headers may not).
    options : tuple of str
        Compiler options; ``-D``/``-U``/``-I`` are passed on, NVRTC-only ones are ignored.
    name_expressions : sequence of str
        Template instantiations to make available, e.g. ``"bitonic_sort<float, 256>"``.
    seed : int, optional
        Non-zero: run the threads of a block in an order shuffled by this seed (missing
        barriers show up). Default: ``$CUTOPK_SIM_SEED`` or 0 (thread order).
    resident_blocks : int
        Blocks kept running at once, for kernels whose blocks wait on each other.
    poison : bool
        Fill shared memory with 0xCD bytes at block start (uninitialised reads show up).
    asan : bool, optional
        Build with AddressSanitizer and give each array argument an exactly-sized copy, so an
        out-of-bounds global access is reported. Needs the ASan runtime preloaded
        (``LD_PRELOAD=$(g++ -print-file-name=libasan.so)``). Default: ``$CUTOPK_SIM_ASAN``.
    spin_budget : int
        Fence/atomic operations in a row without any barrier or warp operation completing
        before the launch is declared deadlocked.

    Examples
    --------
    >>> import numpy as np
    >>> from cutopk import sim
    >>> mod = sim.RawModule(code='extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2; }')
    >>> x = np.arange(4, dtype=np.float32)
    >>> mod.get_function("twice")((1,), (4,), (x,))
    >>> x.tolist()
    [0.0, 2.0, 4.0, 6.0]
    """

    def __init__(
        self,
        code: str,
        options: Sequence[str] = (),
        name_expressions: Sequence[str] = (),
        *,
        seed: int | None = None,
        resident_blocks: int = 1,
        poison: bool = True,
        asan: bool | None = None,
        spin_budget: int = DEFAULT_SPIN_BUDGET,
    ):
        reason = _toolchain.unavailable_reason()
        if reason:
            raise _errors.SimUnavailableError(reason)
        self.seed = int(os.environ.get("CUTOPK_SIM_SEED", "0")) if seed is None else int(seed)
        self.resident_blocks = int(resident_blocks)
        self.poison = bool(poison)
        self.asan = bool(int(os.environ.get("CUTOPK_SIM_ASAN", "0"))) if asan is None else bool(asan)
        self.spin_budget = int(spin_budget)
        if self.asan and not _asan_loaded():
            raise _errors.SimUnavailableError(
                "asan=True needs the AddressSanitizer runtime loaded first: run Python with "
                "LD_PRELOAD=$(g++ -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0"
            )
        self._names = [
            *name_expressions,
            *(n for n in _rewrite.plain_kernels(code) if n not in name_expressions),
        ]
        flags = tuple(o for o in options if o.startswith(("-D", "-U", "-I")))
        self._lib = _load(_rewrite.translation_unit(code, self._names), flags, self.asan)
        self._functions: dict[str, Function] = {}

    def get_function(self, name: str) -> Function:
        """The kernel ``name``: a name expression given at construction, or a plain kernel."""
        if name not in self._functions:
            key = name.replace(" ", "")
            index = next((i for i, n in enumerate(self._names) if n.replace(" ", "") == key), None)
            if index is None:
                raise KeyError(f"kernel {name!r} is not in this module (known: {', '.join(self._names)})")
            self._functions[name] = Function(self, name, index)
        return self._functions[name]


def _load(source: str, flags: tuple[str, ...], asan: bool) -> ctypes.CDLL:
    key = (source, flags, asan)
    with _MODULE_CACHE_LOCK:
        lib = _MODULE_CACHE.get(key)
        if lib is None:
            lib = ctypes.CDLL(str(_toolchain.build(source, flags, asan)), mode=os.RTLD_LOCAL | os.RTLD_NOW)
            lib.cutopk_sim_launch.restype = ctypes.c_int
            lib.cutopk_sim_launch.argtypes = [
                ctypes.c_int,
                *[ctypes.c_uint] * 6,
                ctypes.c_ulonglong,
                ctypes.POINTER(ctypes.c_void_p),
                ctypes.c_int,
                ctypes.c_ulonglong,
                ctypes.c_int,
                ctypes.c_ulonglong,
            ]
            lib.cutopk_sim_describe.restype = ctypes.c_int
            lib.cutopk_sim_error.restype = ctypes.c_char_p
            _MODULE_CACHE[key] = lib
    return lib


class Function:
    """A kernel of a simulator module; call it like a ``cupy.RawKernel``."""

    def __init__(self, module: RawModule, name: str, index: int):
        self.module = module
        self.name = name
        self._index = index
        kinds = ctypes.create_string_buffer(MAX_PARAMS)
        sizes = (ctypes.c_ulonglong * MAX_PARAMS)()
        n = module._lib.cutopk_sim_describe(index, kinds, sizes, MAX_PARAMS)
        self.params = [(kinds.raw[i : i + 1].decode(), int(sizes[i])) for i in range(n)]

    def __call__(
        self, grid, block, args, *, shared_mem: int = 0, stream=None, enable_cooperative_groups=False
    ):
        grid3, block3 = _dim3(grid, "grid"), _dim3(block, "block")
        threads = block3[0] * block3[1] * block3[2]
        if threads > 1024:
            raise ValueError(
                f"kernel {self.name!r}: block {block3} has {threads} threads, more than CUDA's 1024"
            )
        if not 0 <= int(shared_mem) <= 227 * 1024:
            raise ValueError(f"kernel {self.name!r}: shared_mem={shared_mem} is outside [0, 227 KB]")
        args = tuple(args)
        if len(args) != len(self.params):
            raise _errors.LaunchArgumentError(
                f"kernel {self.name!r} takes {len(self.params)} arguments, got {len(args)}"
            )
        values, copies = self._marshal(args)
        argv = (ctypes.c_void_p * max(1, len(values)))(
            *(ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values)
        )
        mod = self.module
        with _LAUNCH_LOCK:
            rc = mod._lib.cutopk_sim_launch(
                self._index, *grid3, *block3, int(shared_mem), argv, mod.resident_blocks, mod.seed,
                int(mod.poison), mod.spin_budget,
            )  # fmt: skip
            message = mod._lib.cutopk_sim_error().decode(errors="replace")
        for copy in copies:
            copy.finish(write_back=rc == 0)
        if rc != 0:
            raise _errors.BY_CODE.get(rc, _errors.SimError)(f"kernel {self.name!r}: {message}")

    def _marshal(self, args):
        values, copies = [], []
        for position, (arg, (kind, size)) in enumerate(zip(args, self.params, strict=True)):
            where = f"kernel {self.name!r}, argument {position}"
            if isinstance(arg, np.ndarray):
                if kind != "p":
                    raise _errors.LaunchArgumentError(
                        f"{where}: the parameter is a {size}-byte {_KIND_NAMES[kind]}, got an array"
                    )
                if self.module.asan:
                    copy = _AsanCopy(arg)
                    copies.append(copy)
                    values.append(ctypes.c_void_p(copy.pointer))
                else:
                    values.append(ctypes.c_void_p(arg.__array_interface__["data"][0]))
                continue
            scalar = arg
            if type(arg) in _PYTHON_SCALARS:
                scalar = _PYTHON_SCALARS[type(arg)](arg)
            if not isinstance(scalar, np.generic):
                raise _errors.LaunchArgumentError(
                    f"{where}: expected a NumPy array or a NumPy scalar, got {type(arg).__name__}"
                )
            given = _scalar_kind(scalar.dtype)
            if kind == "p" or given != kind or scalar.dtype.itemsize != size:
                raise _errors.LaunchArgumentError(
                    f"{where}: the parameter is a {size}-byte {_KIND_NAMES[kind]}, got {type(arg).__module__}."
                    f"{type(arg).__name__} ({scalar.dtype.itemsize}-byte {_KIND_NAMES[given]})"
                )
            buffer = (ctypes.c_char * size).from_buffer_copy(scalar.tobytes())
            values.append(buffer)
        return values, copies


_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = (ctypes.c_size_t,)
_libc.free.argtypes = (ctypes.c_void_p,)


class _AsanCopy:
    """An exactly-sized heap copy of an array's memory, so AddressSanitizer sees its bounds."""

    def __init__(self, arr: np.ndarray):
        self.arr = arr
        lo, hi = np.lib.array_utils.byte_bounds(arr) if arr.size else (arr.ctypes.data, arr.ctypes.data)
        self.lo, self.nbytes = lo, hi - lo
        self.buffer = _libc.malloc(max(1, self.nbytes))
        ctypes.memmove(self.buffer, lo, self.nbytes)
        self.pointer = self.buffer + (arr.__array_interface__["data"][0] - lo)

    def finish(self, write_back: bool) -> None:
        if write_back and self.arr.flags.writeable and self.nbytes:
            ctypes.memmove(self.lo, self.buffer, self.nbytes)
        _libc.free(self.buffer)
