"""``RawModule`` and its kernels (:class:`Function`) for the CPU simulator, mirroring
``cupy.RawModule``: the source rewritten into a translation unit, built and loaded
(``_library``), each launch marshalled and run in this process or a forked child, a fault raised
as the :class:`~cutopk.sim.SimError` its code names. What a parameter takes (``_arguments``) and
the counting of traffic (``_traffic``) live in modules of their own."""

from __future__ import annotations

import ctypes
import mmap
import pathlib
import threading
from collections.abc import Sequence

import numpy as np

from .. import _environ
from .._host_build import asan_loaded
from . import _errors, _isolate, _lines, _rewrite, _staging, _toolchain
from ._arguments import (
    ANY_ELEMENT,
    KIND_NAMES,
    PRETTY_TYPE,
    ElementRule,
    Parameter,
    byte_bounds,
    describe_given,
    dim3,
    dtype_label,
    python_scalar,
    scalar_kind,
)
from ._library import MAX_PARAMS, ParamInfo, keep_warm, load
from ._traffic import COUNTING, LaunchTraffic, traffic_spans

DEFAULT_SPIN_BUDGET = 1 << 26
DEFAULT_WATCHDOG_S = 60.0


class RawModule:
    """CUDA C++ source compiled for the CPU simulator; the interface of ``cupy.RawModule``.

    Parameters
    ----------
    code : str
        The CUDA source (one translation unit; CUDA headers such as ``cuda_fp16.h`` may be
        included, local headers may not).
    options : sequence of str
        Compiler options; ``-D``/``-U``/``-I`` are passed on, NVRTC-only ones are ignored.
    name_expressions : sequence of str
        Template instantiations to make available, e.g. ``"bitonic_sort<float, 256>"``.
    seed : int, optional
        Non-zero: run the threads of a block in an order shuffled by this seed (missing
        barriers show up). Default: ``$CUTOPK_SIM_SEED`` or 0 (thread order).
    block_seed : int, optional
        Non-zero: start the blocks of a grid in an order shuffled by this seed, so blocks that
        coordinate through global memory (the last block to finish a row, tickets) meet other
        finish orders. Default: ``$CUTOPK_SIM_BLOCK_SEED`` or 0 (x-fastest order, as
        ``blockIdx`` counts).
    resident_blocks : int
        Blocks kept running at once (interleaved), for kernels whose blocks wait on each other;
        0 keeps every block of the grid resident.
    poison : bool
        Fill shared memory with 0xCD bytes at block start (uninitialised reads show up).
    asan : bool, optional
        Build with AddressSanitizer and give the array arguments exactly-sized copies, so an
        out-of-bounds global access is reported. Needs the ASan runtime preloaded
        (``LD_PRELOAD=$(g++ -print-file-name=libasan.so)``). Default: ``$CUTOPK_SIM_ASAN``.
    isolate : bool, optional
        Run each launch in a forked child process: nothing the kernel does can end the caller's
        process, and an ASan report becomes a :class:`KernelCrashError`. Costs a fork per launch.
        Default: ``$CUTOPK_SIM_ISOLATE``.
    spin_budget : int
        Polls (fences, atomics that change nothing) in a row, with no thread making progress,
        before the launch is declared deadlocked.
    watchdog_s : float
        Seconds one thread may run without reaching any synchronising call before the launch is
        declared hung (catches spins on volatile memory). 0 disables. Default:
        ``$CUTOPK_SIM_WATCHDOG`` or 60.
    timeout_s : float, optional
        With ``isolate``: wall-clock limit of a launch; the child is killed past it.
    count_traffic : bool, optional
        Count every launch's global-memory traffic into :attr:`traffic` (a list of
        :class:`LaunchTraffic`): runs a build instrumented at every memory access (GCC's
        kernel-address sanitizer in callback mode), slower; not with ``asan``. Default:
        ``$CUTOPK_SIM_TRAFFIC``. :func:`counting_traffic` counts launches of any module.

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
        isolate: bool | None = None,
        spin_budget: int = DEFAULT_SPIN_BUDGET,
        watchdog_s: float | None = None,
        timeout_s: float | None = None,
        block_seed: int | None = None,
        count_traffic: bool | None = None,
    ):
        reason = _toolchain.unavailable_reason()
        if reason:
            raise _errors.SimUnavailableError(reason)
        if seed is None:
            seed = _environ.integer(
                "CUTOPK_SIM_SEED", 0, 0, 2**64, "an integer in [0, 2**64) (0: thread order)"
            )
        self.seed = int(seed)
        if block_seed is None:
            block_seed = _environ.integer(
                "CUTOPK_SIM_BLOCK_SEED", 0, 0, 2**64, "an integer in [0, 2**64) (0: x-fastest order)"
            )
        if not isinstance(block_seed, (int, np.integer)) or not 0 <= int(block_seed) < 2**64:
            raise ValueError(
                f"block_seed: expected an int in [0, 2**64) (0: x-fastest order), got {block_seed!r}"
            )
        self.block_seed = int(block_seed)
        self.resident_blocks = int(resident_blocks)
        if self.resident_blocks < 0:
            raise ValueError(f"resident_blocks: expected 0 (all) or a positive int, got {resident_blocks!r}")
        self.poison = bool(poison)
        self.asan = _environ.flag("CUTOPK_SIM_ASAN") if asan is None else bool(asan)
        self.isolate = _environ.flag("CUTOPK_SIM_ISOLATE") if isolate is None else bool(isolate)
        self.spin_budget = int(spin_budget)
        if watchdog_s is None:
            watchdog_s = _environ.number(
                "CUTOPK_SIM_WATCHDOG", DEFAULT_WATCHDOG_S, 0.0, "seconds, a number >= 0 (0: no watchdog)"
            )
        self.watchdog_s = float(watchdog_s)
        self.timeout_s = None if timeout_s is None else float(timeout_s)
        self.count_traffic = (
            _environ.flag("CUTOPK_SIM_TRAFFIC") if count_traffic is None else bool(count_traffic)
        )
        if self.count_traffic and self.asan:
            raise ValueError(
                "count_traffic: counting global-memory traffic cannot be combined with asan=True (both "
                "instrument every access); count in a run without CUTOPK_SIM_ASAN"
            )
        self.traffic: list[LaunchTraffic] = []
        if self.asan and not asan_loaded():
            raise _errors.SimUnavailableError(
                "asan=True needs the AddressSanitizer runtime loaded first: run Python with "
                "LD_PRELOAD=$(g++ -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0"
            )
        self.name_expressions = tuple(name_expressions)
        self._names = [
            *self.name_expressions,
            *(n for n in _rewrite.untemplated_kernels(code) if n not in self.name_expressions),
        ]
        flags = tuple(o for o in options if o.startswith(("-D", "-U", "-I")))
        self._unit, self._flags = _rewrite.translation_unit(code, self._names), flags
        self._lib, self.shared_object = load(self._unit, flags, self.asan)
        self._counting_lib: tuple[ctypes.CDLL, pathlib.Path] | None = None
        if self.count_traffic:
            self._counting()
        self._functions: dict[str, Function] = {}
        self._code = code
        self.cluster_dims = _rewrite.cluster_dims(code)  # kernels compiled for a cluster shape
        self._parameter_names: dict[str, list[tuple[str, ...]]] | None = None

    def _counting(self) -> tuple[ctypes.CDLL, pathlib.Path]:
        """The counting build of this module (compiled on first use) and its shared object."""
        if self._counting_lib is None:
            if self.asan:
                raise ValueError(
                    "count_traffic: a module built with asan=True cannot count global-memory traffic "
                    "(both instrument every access)"
                )
            if not _toolchain.is_gcc():
                raise _errors.SimUnavailableError(
                    f"counting global-memory traffic needs GCC (its kernel-address sanitizer's callbacks); "
                    f"the compiler is {_toolchain.compiler()}"
                )
            self._counting_lib = load(self._unit, self._flags, False, traffic=True)
        return self._counting_lib

    def _names_of(self, name: str, count: int) -> tuple[str, ...]:
        """The parameter names of kernel ``name`` (a name expression) with ``count`` parameters,
        read from the source once per module; empty strings where they cannot be told."""
        if self._parameter_names is None:
            self._parameter_names = _rewrite.kernel_parameter_names(self._code)
        base = name.split("<", 1)[0].strip().rsplit("::", 1)[-1]
        lists = [n for n in self._parameter_names.get(base, []) if len(n) == count]
        return lists[0] if len(lists) == 1 else ("",) * count

    def get_function(self, name: str) -> Function:
        """The kernel ``name``: a name expression given at construction, or an untemplated kernel.

        Parameters
        ----------
        name : str
            A name expression (``"bitonic_sort<float, 256>"``; spaces do not matter) or the
            name of an ``extern "C"`` kernel that is not a template.
        """
        if name not in self._functions:
            key = name.replace(" ", "")
            index = next((i for i, n in enumerate(self._names) if n.replace(" ", "") == key), None)
            if index is None:
                raise KeyError(f"kernel {name!r} is not in this module (known: {', '.join(self._names)})")
            self._functions[name] = Function(self, name, index)
        return self._functions[name]


# Fault handlers are process-wide, so one launch runs at a time in a process.
_LAUNCH_LOCK = threading.Lock()
# Codes whose fault happened at an unknown place in the code: worth a look-up of the source line.
_LOCATE = {4, 5, 8, 10, 11}  # overrun, crash, hang, cluster misuse, asynchronous copies

# Blocks a thread-block cluster may hold without a non-portable opt-in (CUDA's portable maximum).
MAX_CLUSTER_BLOCKS = 8


class Function:
    """A kernel of a simulator module; call it like a ``cupy.RawKernel``.

    ``params`` lists the kernel's parameters as the compiler sees them: (kind, size in bytes),
    kind one of p (pointer), i/u (signed/unsigned integer), f (floating point), h (__half),
    b (__nv_bfloat16), B (bool), ? (anything else, matched by size). ``parameters`` has each
    one in full (:class:`Parameter`: name, C++ type, what a pointer points to).

    An array argument must have the element type its pointer parameter points to (after
    template substitution): ``const float*`` takes float32, ``unsigned*`` uint32, ``__half*``
    float16; ``void*`` and ``char*`` take any array; a pointer to a struct takes a byte array
    or one of elements of the struct's size, at an address aligned for the struct. Anything else
    is an :class:`ElementTypeError`, as a misaligned address is a :class:`LaunchArgumentError`.
    """

    def __init__(self, module: RawModule, name: str, index: int):
        self.module = module
        self.name = name
        self._index = index
        # CUDA's cudaFuncAttributeMaxDynamicSharedMemorySize (CuPy's attribute of this name): a
        # launch asking for more dynamic shared memory than this fails, so a kernel must opt in
        # before it takes more than the default 48 KB.
        self.max_dynamic_shared_size_bytes = 48 * 1024
        infos = (ParamInfo * MAX_PARAMS)()
        n = module._lib.cutopk_sim_describe(index, infos, MAX_PARAMS)
        if n > MAX_PARAMS:
            raise _errors.LaunchArgumentError(f"kernel {name!r} has {n} parameters, more than {MAX_PARAMS}")
        names = module._names_of(name, n)
        self.parameters = []
        for i, info in enumerate(infos[:n]):
            pretty = PRETTY_TYPE.search(info.type.decode(errors="replace"))
            self.parameters.append(
                Parameter(
                    i,
                    names[i],
                    pretty["type"] if pretty else "?",
                    info.kind.decode(),
                    int(info.size),
                    info.pointee.decode().strip("\x00"),
                    int(info.pointee_size),
                    int(info.pointee_align),
                )
            )
        self.params = [(p.kind, p.size) for p in self.parameters]
        # Per position: the element-type rule of a pointer parameter, None where any array goes.
        self._rules = [
            ElementRule(p) if p.kind == "p" and p.pointee not in ANY_ELEMENT else None
            for p in self.parameters
        ]

    def __call__(
        self,
        grid,
        block,
        args,
        *,
        shared_mem: int = 0,
        stream=None,
        enable_cooperative_groups=False,
        cluster=None,
    ) -> None:
        """Launch the kernel on ``grid`` blocks of ``block`` threads (ints or tuples of up to 3).

        Parameters
        ----------
        grid, block : int or tuple of int
            Launch dimensions, as for CuPy.
        args : tuple
            NumPy arrays (their element [0, ...] is the device pointer), NumPy scalars of the
            parameter's exact type, Python scalars (int as int64, float as float64, like
            CuPy), or None (a null pointer).
        shared_mem : int
            Bytes of dynamic shared memory.
        stream, enable_cooperative_groups
            Accepted for CuPy compatibility; launches run synchronously.
        cluster : int or tuple of int, optional
            Thread-block clusters (sm_90; cudaLaunchKernelEx's cluster dimension): blocks per
            cluster along each axis, dividing the grid, at most 8 blocks in all (CUDA's portable
            limit). The kernel reaches them through ``cooperative_groups::this_cluster()``
            (cutopk/sim/runtime/sim_cluster.h). None: clusters of one block.
        """
        grid3, block3 = dim3(grid, "grid"), dim3(block, "block")
        fixed = self.module.cluster_dims.get(self.name)  # __cluster_dims__: CUDA takes it at every launch
        if cluster is None:
            cluster = fixed or 1
        elif fixed and dim3(cluster, "cluster") != fixed:
            raise ValueError(
                f"kernel {self.name!r} is compiled for clusters {fixed}, launched with {cluster}"
            )
        cluster3 = dim3(cluster, "cluster")
        blocks = cluster3[0] * cluster3[1] * cluster3[2]
        if not 1 <= blocks <= MAX_CLUSTER_BLOCKS or any(g % c for g, c in zip(grid3, cluster3, strict=True)):
            raise ValueError(
                f"kernel {self.name!r}: cluster {cluster3} must divide the grid {grid3} and hold at most "
                f"{MAX_CLUSTER_BLOCKS} blocks"
            )
        threads = block3[0] * block3[1] * block3[2]
        if threads > 1024:
            raise ValueError(
                f"kernel {self.name!r}: block {block3} has {threads} threads, more than CUDA's 1024"
            )
        if not 0 <= int(shared_mem) <= 227 * 1024:
            raise ValueError(f"kernel {self.name!r}: shared_mem={shared_mem} is outside [0, 227 KB]")
        if int(shared_mem) > self.max_dynamic_shared_size_bytes:
            raise _errors.LaunchArgumentError(
                f"kernel {self.name!r}: shared_mem={shared_mem} bytes is more than its limit of "
                f"{self.max_dynamic_shared_size_bytes}; set max_dynamic_shared_size_bytes first (CUDA "
                "refuses such a launch until the kernel opts in)"
            )
        args = tuple(args)
        if len(args) != len(self.params):
            raise _errors.LaunchArgumentError(
                f"kernel {self.name!r} takes {len(self.params)} arguments, got {len(args)}"
            )
        values, regions = self._marshal(args)
        mod = self.module
        launch = (self._index, *grid3, *block3, int(shared_mem), cluster3)
        counting = mod.count_traffic or bool(COUNTING)
        lib, so = mod._counting() if counting else (mod._lib, mod.shared_object)
        with _LAUNCH_LOCK:
            nblocks = grid3[0] * grid3[1] * grid3[2]
            resident = nblocks if mod.resident_blocks < 1 else min(nblocks, mod.resident_blocks)
            resident = max(blocks, resident // blocks * blocks)  # whole clusters (sim_launch.h)
            keep_warm(lib, resident * threads)
            # The counts come back through a shared page: an isolated launch counts in its child.
            page = mmap.mmap(-1, 24) if counting else None
            counts = (ctypes.c_ulonglong * 3).from_buffer(page) if page is not None else None
            if mod.isolate:
                shared = _staging.Staging(regions, "shared")
                outcome = None
                try:
                    moved = [shared.translate(v) if isinstance(v, int) and v else v for v in values]
                    outcome = _isolate.run(
                        lambda: self._run(launch, moved, shared.translated_regions(), lib, counts),
                        mod.timeout_s,
                    )
                finally:
                    shared.finish(write_back=outcome is not None and outcome.rc == 0 and outcome.died is None)
                if outcome.died:
                    cls = _errors.KernelHangError if "hang" in outcome.died else _errors.KernelCrashError
                    raise cls(
                        f"kernel {self.name!r}: {outcome.died}; its stderr ends with:\n{outcome.stderr[-6000:]}"
                    )
                rc, message, frames = outcome.rc, outcome.message, outcome.frames
            else:
                rc, message, frames = self._run(launch, values, regions, lib, counts)
            if counts is not None and rc == 0:
                record = LaunchTraffic(self.name, grid3, block3, *(int(c) for c in counts))
                mod.traffic.append(record)
                for records in COUNTING:
                    records.append(record)
        if rc != 0:
            where = _lines.kernel_location(so, frames) if rc in _LOCATE else None
            if where:
                message += f"; at {where}"
            raise _errors.BY_CODE.get(rc, _errors.SimError)(f"kernel {self.name!r}: {message}")

    def _run(
        self, launch: tuple, values: list, regions: list[_staging.Region], lib: ctypes.CDLL, counts=None
    ) -> tuple[int, str, list[int]]:
        """One launch in this process: (result code, fault message, fault frames). With ``counts``
        (three uint64: the counting build's launch), the traffic is counted into it."""
        mod = self.module
        staging = _staging.Staging(regions, "malloc") if mod.asan else None
        try:
            if staging:
                values = [staging.translate(v) if isinstance(v, int) and v else v for v in values]
            cells = [ctypes.c_void_p(v) if isinstance(v, int) else v for v in values]
            argv = (ctypes.c_void_p * max(1, len(cells)))(
                *(ctypes.cast(ctypes.pointer(c), ctypes.c_void_p) for c in cells)
            )
            if counts is not None:
                # Views of one buffer, or arrays that touch, are one region: a sector is counted once.
                spans = traffic_spans(regions)
                bounds = (ctypes.c_ulonglong * max(1, 2 * len(spans)))(*(b for span in spans for b in span))
                if lib.cutopk_sim_traffic_begin(bounds, len(spans)) != 0:
                    return (9, f"cannot count the traffic of {len(spans)} array regions", [])
            try:
                *dims, cluster3 = launch
                lib.cutopk_sim_set_cluster(*cluster3)  # for this launch only
                rc = lib.cutopk_sim_launch(
                    *dims,
                    argv,
                    mod.resident_blocks,
                    mod.seed,
                    mod.block_seed,
                    int(mod.poison),
                    mod.spin_budget,
                    mod.watchdog_s,
                )
            finally:
                if counts is not None:
                    lib.cutopk_sim_traffic_end(counts)
            message = lib.cutopk_sim_error().decode(errors="replace")
            frames = _isolate.frames_buffer(lib) if rc else []
        finally:
            if staging:
                staging.finish(write_back=rc == 0)
        return rc, message, frames

    def _marshal(self, args) -> tuple[list, list[_staging.Region]]:
        """Each argument as the bytes the kernel parameter takes: a pointer (an int, for arrays and
        None) or a ctypes buffer holding a scalar; and the memory regions the arrays cover.
        (Error messages are built only on the way to raising: this runs at every launch.)"""
        values, regions = [], []
        for position, (arg, (kind, size)) in enumerate(zip(args, self.params, strict=True)):
            if isinstance(arg, np.ndarray):
                if kind != "p":
                    self._refuse(position, ", got an array (arrays stand for device pointers)")
                pointer = arg.__array_interface__["data"][0]
                rule = self._rules[position]
                if rule is not None:
                    self._check_element(rule, arg, pointer)
                lo, hi = byte_bounds(arg, pointer)
                regions.append(_staging.Region(lo, hi, arg.flags.writeable))
                values.append(pointer)
                continue
            if arg is None:
                if kind != "p":
                    self._refuse(position, ", got None (a null pointer)")
                values.append(0)
                continue
            scalar = python_scalar(arg)
            if not isinstance(scalar, np.generic):
                self._refuse(
                    position,
                    "; expected a NumPy array, a NumPy scalar or None, "
                    f"got {type(arg).__module__}.{type(arg).__name__}",
                )
            if kind == "p" or scalar_kind(scalar.dtype) != kind or scalar.dtype.itemsize != size:
                note = " (Python ints are passed as int64, as CuPy does)" if isinstance(arg, int) else ""
                self._refuse(position, f", got {describe_given(arg, scalar)}{note}")
            values.append((ctypes.c_char * size).from_buffer_copy(scalar.tobytes()))
        return values, regions

    def _refuse(self, position: int, given: str) -> None:
        """Raise the LaunchArgumentError for argument ``position``: what the parameter is, then ``given``."""
        kind, size = self.params[position]
        article = "an" if str(size).startswith("8") or size in (11, 18) else "a"
        raise _errors.LaunchArgumentError(
            f"kernel {self.name!r}, argument {position}: the parameter is {article} {size}-byte "
            f"{KIND_NAMES[kind]}{given}"
        )

    def _check_element(self, rule: ElementRule, arg: np.ndarray, pointer: int) -> None:
        """Raise if ``arg``'s element type or address does not suit the pointer parameter."""
        if not rule.accepts(arg.dtype):
            raise _errors.ElementTypeError(
                f"kernel {self.name!r}, argument {rule.param.position} ({rule.param.label()}): "
                f"expected {rule.expected}, got {dtype_label(arg.dtype)} array"
            )
        if pointer % rule.align:
            raise _errors.LaunchArgumentError(
                f"kernel {self.name!r}, argument {rule.param.position} ({rule.param.label()}): the array's "
                f"address {pointer:#x} is not a multiple of {rule.align}, the element's alignment "
                "(a misaligned access faults on a GPU)"
            )
