"""The CUDA launcher, for two targets: ``"cuda"`` (CuPy arrays, ``cupy.RawModule``) and ``"sim"``
(NumPy arrays, the CPU simulator's ``RawModule``). Everything but the array module and the
module class is shared, so the simulator tests the very code that runs on a GPU.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import threading
from typing import Any, NamedTuple

import numpy as np

from .. import _interop
from .._request import dtypes as _dtypes
from .._request import layout as _layout
from .._request.checks import Request, check_algorithm
from .._request.plan import Launch, Plan, copy_lines
from . import device as _device
from . import dispatch as _dispatch
from . import kernel_constants as _kernel_constants
from . import kernel_source as _kernel_source
from . import runner as _runner
from .families import common as _common

ALGORITHMS = _dispatch.ALGORITHMS
FAMILIES = _kernel_source.FAMILIES
kernel_dir = _kernel_source.kernel_dir


@functools.cache
def kernel_source() -> str:
    """Every kernel file as one translation unit, each after the files it includes, opened by the
    constants shared with Python (no entry points: see :func:`programs` for what is compiled)."""
    return _kernel_source.kernel_source()


@functools.cache
def _source_hash() -> str:
    return hashlib.sha256(kernel_source().encode()).hexdigest()


class Program(NamedTuple):
    """One module the launcher compiles: (dtype, family), its source and its name expressions
    (none: the kernels are ``extern "C"`` entry points, found by name)."""

    dtype: str
    family: str
    source: str
    name_expressions: tuple[str, ...]
    kernels: tuple[str, ...]


def programs() -> list[Program]:
    """Every module the launcher can compile, one per (dtype, family), with the entry points
    each holds."""
    out = []
    for info in _dtypes.SUPPORTED.values():
        for family in FAMILIES:
            names = tuple(e.name for e in _kernel_source.entries(family, info.name))
            out.append(Program(info.name, family, _kernel_source.source(family, info.name), (), names))
    return out


@functools.cache
def _dtype_name(cxx: str) -> str:
    for info in _dtypes.SUPPORTED.values():
        if info.cxx == cxx:
            return info.name
    raise ValueError(f"cxx: expected the C++ name of a supported element type, got {cxx!r}")


@functools.cache
def _entry_points(cxx: str) -> dict[str, tuple[str, str]]:
    """For one element type: each kernel name the launcher asks for (a name expression such as
    ``warp_row_topk<float, 4>``, spaces ignored, or an entry point's own name) -> (family, entry
    point)."""
    found = {}
    for family in FAMILIES:
        for e in _kernel_source.entries(family, _dtype_name(cxx)):
            found[e.expression.replace(" ", "")] = found[e.name] = (family, e.name)
    return found


_MODULES: dict[tuple, _Module] = {}
_MODULES_LOCK = threading.Lock()


class _Module:
    """A compiled module whose kernel function objects are fetched once each: CuPy's
    ``RawModule.get_function`` builds a new function object on every call."""

    def __init__(self, raw):
        self.raw = raw
        self._functions: dict[str, object] = {}

    def get_function(self, name: str):
        fn = self._functions.get(name)
        if fn is None:  # a race only builds the same function object twice
            fn = self._functions[name] = self.raw.get_function(name)
        return fn

    def built(self, name: str) -> bool:
        """Whether the module holding kernel ``name`` is compiled and loaded (nothing is built here)."""
        return name in self._functions or self.raw.built(name)


class _FamilyModules:
    """One element type's kernels, one module per family, each compiled on the first use of one
    of its kernels (once, under a lock: threads asking for the same family wait for it)."""

    def __init__(self, target: str, cxx: str):
        self.target, self.cxx = target, cxx
        self.modules: dict[str, Any] = {}  # a cupy.RawModule or a cutopk.sim.RawModule
        self._lock = threading.Lock()

    def get_function(self, name: str):
        where = _entry_points(self.cxx).get(name.replace(" ", ""))
        if where is None:
            raise KeyError(
                f"no kernel {name!r} for element type {self.cxx!r} in any family of {tuple(FAMILIES)}"
            )
        family, entry = where
        mod = self.modules.get(family)
        if mod is None:
            with self._lock:
                mod = self.modules.get(family)
                if mod is None:
                    mod = self.modules[family] = _build_family(self.target, self.cxx, family)
        return mod.get_function(entry)

    def built(self, name: str) -> bool:
        where = _entry_points(self.cxx).get(name.replace(" ", ""))
        return where is not None and where[0] in self.modules


def _build_family(target: str, cxx: str, family: str):
    """The module of one family for one element type. No name expressions: CuPy then finds the
    module in its on-disk cache in a new process (cutopk/cuda/kernel_source.py)."""
    code = _kernel_source.source(family, _dtype_name(cxx))
    if target == "cuda":
        import cupy

        return cupy.RawModule(code=code, options=("-std=c++17",))
    from .. import sim

    return sim.RawModule(code=code)


# Launch observers (cutopk/cuda/observe.py, for tests and the host-overhead benchmark): while one
# is here, the last builds every module and gives the array module; none in normal use.
OBSERVERS: list[Any] = []


def array_module(target: str):
    """The array module of ``target`` (CuPy or NumPy), or the launch observer's."""
    if OBSERVERS:
        return OBSERVERS[-1].array_module(target)
    return _interop.array_module(target)


def _build_module(target: str, cxx: str):
    if OBSERVERS:
        return OBSERVERS[-1].module(target, cxx)
    return _FamilyModules(target, cxx)


@contextlib.contextmanager
def emptied_caches():
    """The module and placeholder caches empty inside, as they were after (a launch observer's
    modules never outlive it, and never hide the real ones)."""
    saved = dict(_MODULES), dict(_PLACEHOLDERS)
    _MODULES.clear()
    _PLACEHOLDERS.clear()
    try:
        yield
    finally:
        _MODULES.clear()
        _MODULES.update(saved[0])
        _PLACEHOLDERS.clear()
        _PLACEHOLDERS.update(saved[1])


def _module(target: str, cxx: str, device: int | None = None) -> _Module:
    """One element type's kernels, built once per (target, device, source); each family's
    module is compiled on first use."""
    device = _device_id(target) if device is None else device
    key = (target, device, cxx, _source_hash())
    with _MODULES_LOCK:
        mod = _MODULES.get(key)
        if mod is None:
            mod = _MODULES[key] = _Module(_build_module(target, cxx))
    return mod


def kernel_module(target: str, cxx: str, device: int | None = None) -> _Module:
    """The kernels of element type ``cxx`` on ``device`` (default the current one), each family's
    module built at its first launch, not here: the merge call's (cutopk/cuda/merge_call.py)."""
    return _module(target, cxx, device)


def _device_id(target: str) -> int:
    return _device.device_id(target)


def _device_facts(target: str, device: int) -> _dispatch.Device:
    # Through the module attribute, so that a test patching _device.device_facts reaches every
    # launcher module at once.
    return _device.device_facts(target, device)


_PLACEHOLDERS: dict[tuple, object] = {}


def placeholder(target: str, dtype) -> object:
    """A one-element array of ``dtype`` on the current device, made once: the argument for a
    kernel's pointer that the plan never dereferences (no allocation per call)."""
    key = (target, _device_id(target), np.dtype(dtype))
    arr = _PLACEHOLDERS.get(key)
    if arr is None:
        arr = _PLACEHOLDERS[key] = array_module(target).zeros(1, dtype=dtype)
    return arr


def _check_forced(req: Request, key_bytes: int, device: _dispatch.Device, rows: int) -> None:
    if req.algorithm == "auto":
        return
    check_algorithm(req.algorithm, req.backend, ALGORITHMS)
    reason = _dispatch.why_not(req.algorithm, req.n, req.k, key_bytes, device, rows)
    if reason:
        raise ValueError(f"algorithm: {reason}")


# The kernels take k as a C int (families/common.py SCALAR_TYPES); rows, n, strides and indices are
# 64-bit.
KERNEL_MAX_K = 2**31 - 1


def _aligned(a, aligned_strides: bool) -> bool:
    """Whether the kernels may read ``a`` in place: its data pointer (and, checked once per
    signature, its strides) a multiple of its element size. A per-call check: two arrays of one
    signature can lie at different offsets."""
    if isinstance(a, np.ndarray):
        return a.flags.aligned  # NumPy's own test of the pointer and strides (cheaper than ctypes)
    return aligned_strides and a.data.ptr % a.dtype.itemsize == 0


class GpuCall:
    """Everything about one call signature (shape, strides, dtype, request, device) that does not
    depend on the data: checked and planned once, then :meth:`run` does only the per-call work
    (the outputs, the launches, and any copy the plan names). The GPU backend's ``Call`` (the
    protocol of cutopk/_core/call.py, which makes every one: regular rows, lengths, segments)."""

    def __init__(
        self,
        shape,
        strides,
        dtype,
        req: Request,
        device: int,
        rows_kind: int = _kernel_constants.ROWS_REGULAR,
        segment_bound: int = 1 << 62,
    ):
        self.req = req
        # LENGTHS or SEGMENTS: each run() takes the int64 extents array (kernels/row_extent.cuh).
        self.rows_kind = rows_kind
        # SEGMENTS: the bound every segment must end within (the input's length; the default, past
        # any input, where the host has checked the offsets), which the kernels take as
        # row_stride (a segment has no row stride of its own).
        self.segment_bound = segment_bound
        self._signature = (tuple(shape), tuple(strides), dtype, device)
        self._aligned: GpuCall | None = None  # the call run on an aligned copy of a misaligned input
        self.target = req.backend
        self.xp = array_module(self.target)
        self.dtype = np.dtype(dtype)
        # The kernels read native byte order: the simulator swaps a non-native input first (a
        # GPU array library has no other byte order).
        self.native = self.dtype.newbyteorder("=") if not self.dtype.isnative else self.dtype
        self.info = _dtypes.check_dtype(self.dtype)
        self.device_facts = _device_facts(self.target, device)
        other = [s for i, s in enumerate(shape) if i != req.axis]
        self.rows = math.prod(other)
        self.out_shape = (*other, req.k)  # the kernels' rows, before the axis goes back in place
        self.result_shape = tuple(req.k if i == req.axis else s for i, s in enumerate(shape))
        self.last_axis = req.axis == len(shape) - 1
        if req.k > KERNEL_MAX_K:
            raise ValueError(
                f"k: the CUDA kernels select at most 2**31 - 1 elements per row (k is a 32-bit kernel "
                f"argument; every size and index is 64-bit), got k={req.k}; use backend='numpy'"
            )
        _check_forced(req, self.info.itemsize, self.device_facts, self.rows)
        if self.native is not self.dtype:
            # run() byte-swaps the input into a C-contiguous copy: the kernels read that copy's
            # layout, not the input's.
            strides = _layout.c_strides(shape, self.dtype.itemsize)
        layout = _layout.row_strides(shape, strides, self.dtype.itemsize, req.axis)
        if rows_kind == _kernel_constants.ROWS_SEGMENTS and layout is not None:
            layout = (segment_bound, layout[1])  # kernels/row_extent.cuh: row_stride bounds the segments
        self.strides = layout
        outer = layout is not None and _layout.is_outer(self.rows, *layout)
        self.plan = _dispatch.plan(
            self.rows,
            req.n,
            max(1, req.k),
            self.info.itemsize,
            self.device_facts,
            layout is None,
            req.algorithm,
            outer,
            req.order == "index",
            req.index_dtype.itemsize,
        )
        self.launches = req.k > 0 and self.rows > 0
        self.device = device
        self.module = _module(self.target, self.info.cxx, device) if self.launches else None
        # The launches, resolved once (cutopk/cuda/runner.py): a call only slots in its arrays.
        self.runner = _runner.Runner(self, placeholder) if self.launches else None
        # The scratch one call takes from the stream's workspace (what plan() reports).
        self.workspace_bytes = self.runner.schedule.nbytes if self.runner is not None else 0
        self.rows_k = (self.rows, req.k)
        # The input as it lies, into outputs that need no moving: run()'s short path.
        self.short_path = self.launches and self.last_axis and self.native is self.dtype
        self.reshape_out = self.out_shape != self.rows_k
        # An outer axis: the input's axes with the rows' last, and the outputs' axes put back.
        ndim = len(shape)
        self.rows_last = (*(i for i in range(ndim) if i != req.axis), req.axis)
        back = list(range(ndim - 1))
        back.insert(req.axis, ndim - 1)
        self.axis_back = tuple(back)
        self._moved: tuple = (None, None, None)  # (scratch views, staged values, staged indices)
        # The kernels read whole elements: a misaligned input (a view some bytes into a buffer)
        # faults on a GPU. The strides are checked here, the data pointer at every run().
        # (A non-native input is read through run()'s byte-swapped copy, aligned: no check.)
        self.aligned_strides = all(st % self.dtype.itemsize == 0 for st in strides)
        self.check_alignment = self.native is self.dtype
        # run(a) without out= or extents, bound once: what a warm call of cutopk.top_k runs.
        self.plain = self._plain()

    def _plain(self):
        """``plain(a) -> (values, indices)``: :meth:`run` without ``out`` or extents, as one
        function with everything but the input's address resolved (a warm call's Python is
        the launch latency of small rows). Where the outputs need moving, the input
        a copy or the rows a kind of their own, it is :meth:`run` itself."""
        if not (
            self.short_path and self.rows_kind == _kernel_constants.ROWS_REGULAR and self.aligned_strides
        ):
            return self.run
        xp = self.xp
        empty, shape, out_shape = xp.empty, self.rows_k, self.out_shape
        value_dtype, index_dtype = self.native, self.req.index_dtype
        itemsize, reshape, slow = self.dtype.itemsize, self.reshape_out, self.run
        runner = self.runner
        assert runner is not None  # the short path: there are launches
        # Bound now: a test that patches the runner's class has done so before this call was made.
        launch = runner.run_short
        on_host = self.target != "cuda"  # the simulator's arrays are NumPy's (whatever xp a test puts in)
        fail = self._raise_memory_error

        def plain(a):
            # The kernels read whole elements: a view some bytes into its buffer goes the slow way
            # (an aligned copy). The strides were checked with the signature.
            if (not a.flags.aligned) if on_host else a.data.ptr % itemsize:
                return slow(a)
            values, indices = empty(shape, value_dtype), empty(shape, index_dtype)
            try:
                launch(xp, a, values, indices, None)
            except Exception as exc:
                fail(exc)
                raise
            if reshape:
                return values.reshape(out_shape), indices.reshape(out_shape)
            return values, indices

        return plain

    def run(self, a, out=None, extents=None):
        """``(values, indices)`` of ``a`` (which has this call's signature), written into ``out``
        when given (already checked to fit). ``extents``: the int64 lengths or CSR offsets of a
        call planned with ``rows_kind`` LENGTHS or SEGMENTS (on ``a``'s device)."""
        xp, req = self.xp, self.req
        if self.check_alignment and not _aligned(a, self.aligned_strides):
            return self._run_aligned(a, out, extents)
        runner = self.runner
        if self.short_path and out is None:  # the common case, in as few steps as it takes
            assert runner is not None  # the short path: there are launches
            values, indices = xp.empty(self.rows_k, self.native), xp.empty(self.rows_k, req.index_dtype)
            try:
                runner.run_short(xp, a, values, indices, extents)
            except Exception as exc:
                self._raise_memory_error(exc)
                raise
            if self.reshape_out:
                return values.reshape(self.out_shape), indices.reshape(self.out_shape)
            return values, indices
        native = self.native is self.dtype
        if not native:
            a = a.astype(self.native, order="C")  # the layout __init__ planned on
        if not self.last_axis and self.launches:  # the kernels write into the scratch
            assert runner is not None
            try:
                views = runner.run(xp, a.transpose(self.rows_last), None, None, extents)
            except Exception as exc:
                self._raise_memory_error(exc)
                raise
            moved = self._moved
            if moved[0] is not views:  # the staged outputs as views in the result's axis order
                moved = self._moved = (
                    views,
                    views["stage_vals"].reshape(self.out_shape).transpose(self.axis_back),
                    views["stage_idx"].reshape(self.out_shape).transpose(self.axis_back),
                )
            if out is None:
                out = (xp.empty(self.result_shape, self.dtype), xp.empty(self.result_shape, req.index_dtype))
            xp.copyto(out[0], moved[1])
            xp.copyto(out[1], moved[2])
            return out
        if out is not None and native and self.last_axis:  # the kernels write into `out`
            values, indices = out[0].reshape(self.rows_k), out[1].reshape(self.rows_k)
        else:
            values, indices = xp.empty(self.rows_k, self.native), xp.empty(self.rows_k, req.index_dtype)
        if self.launches:
            assert runner is not None
            try:
                runner.run(xp, a, values, indices, extents)
            except Exception as exc:
                self._raise_memory_error(exc)
                raise
        if out is not None and native and self.last_axis:
            return out
        values, indices = self._finish(values), self._finish(indices)
        if out is not None:
            xp.copyto(out[0], values)
            xp.copyto(out[1], indices)
            return out
        if not native:
            values = values.astype(self.dtype)  # SPEC: values.dtype == a.dtype
        return values, indices

    def _run_aligned(self, a, out, extents):
        """:meth:`run` on an aligned copy of a misaligned ``a``: a contiguous ``a`` keeps its
        layout in the copy (so this very call runs it: a CSR data array, say); any other is copied
        to C order and run by the call planned for that layout (kept with this one)."""
        call = self
        if not (a.flags.c_contiguous and self.aligned_strides):
            aligned = self._aligned
            if aligned is None:
                shape, _, dtype, device = self._signature
                strides = _layout.c_strides(shape, self.dtype.itemsize)
                aligned = GpuCall(shape, strides, dtype, self.req, device, self.rows_kind, self.segment_bound)
                self._aligned = aligned
            call = aligned
        if self.xp is np:
            return call.run(np.array(a, order="C", copy=True), out, extents)
        return call.run(_interop.aligned_copy(a), out, extents)

    def _finish(self, arr):
        if self.last_axis:
            return arr.reshape(self.out_shape)
        return self.xp.ascontiguousarray(self.xp.moveaxis(arr.reshape(self.out_shape), -1, self.req.axis))

    def describe(self, cached: bool, arr=None) -> Plan:
        """The public plan of this call (:func:`cutopk.plan`): the launches in order, as the runner
        runs them (a test compares them with the launches the simulator records), each with the
        global bytes its step's formula gives (tests/gpu/test_family_traffic.py compares them
        with the simulator's counts), the array library's steps around them, and every copy.
        ``arr`` is unused: the signature says it all."""
        req, p, runner = self.req, self.plan, self.runner
        if runner is None:  # k == 0 or no rows: nothing runs, nothing is copied
            return Plan(
                req.backend, p.algorithm, self.rows, req.n, req.k, (), (), 0, cached, dict(p.params),
                chosen_by=p.chosen_by,
            )  # fmt: skip
        before, after = _library_steps(self)
        size = self.rows * req.n * self.dtype.itemsize
        copies = {step.copy: step.size for step in before}
        if p.transpose:
            copies["input: rows along an outer axis copied to row-major by a tiled transpose"] = size
        elif p.copy:
            why = "rows along an outer axis" if self.strides is not None else "batch axes do not collapse"
            copies[f"input: copied to row-major ({why})"] = size
        copies.update((step.copy, step.size) for step in after)
        launches = (*(s.launch for s in before), *runner.launches(), *(s.launch for s in after))
        # The call's one workspace buffer (the family's table, the copy of the input, staged
        # outputs), and the simulator's byte-swapped copy of a non-native input.
        scratch = self.workspace_bytes + sum(step.size for step in before)
        return Plan(
            req.backend, p.algorithm, self.rows, req.n, req.k, launches, copy_lines(copies), scratch, cached,
            dict(p.params), chosen_by=p.chosen_by, built=runner.built(),
        )  # fmt: skip

    def _raise_memory_error(self, exc: Exception) -> None:
        """CuPy's OutOfMemoryError becomes the MemoryError that says what ran out; any other error
        is left to propagate."""
        if type(exc).__name__ != "OutOfMemoryError":  # cupy.cuda.memory.OutOfMemoryError
            return
        p = self.plan
        raise MemoryError(
            f"top_k: out of GPU memory running {p.algorithm!r} on {self.rows} rows of {self.req.n} "
            f"(a workspace of {self.workspace_bytes} bytes besides the outputs; cutopk.release_workspace() "
            f"gives back the cached ones): {exc}"
        ) from None


def _library_steps(call: GpuCall) -> tuple[list[_LibraryStep], list[_LibraryStep]]:
    """The array library's work around the kernels, ``(before, after)``: the byte swap of a
    non-native input (the simulator's: a GPU array has native order) and the move of the outputs
    to an outer axis. Each is both a copy and a library launch of :func:`cutopk.plan`."""
    req, item = call.req, call.dtype.itemsize
    sectors = _common.sectors
    before: list[_LibraryStep] = []
    after: list[_LibraryStep] = []
    if call.native is not call.dtype:
        size = call.rows * req.n * item
        launch = Launch("library: byte swap of the input", (), global_bytes=2 * sectors(size))
        before.append(_LibraryStep("input: byte-swapped to native order", size, launch))
    if not call.last_axis:
        values, indices = call.rows * req.k * item, call.rows * req.k * req.index_dtype.itemsize
        moved = 2 * (sectors(values) + sectors(indices))
        launch = Launch(f"library: outputs moved to axis {req.axis}", (), count=2, global_bytes=moved)
        after.append(_LibraryStep(f"outputs: moved to axis {req.axis}", values + indices, launch))
    return before, after


class _LibraryStep(NamedTuple):
    copy: str  # the line of Plan.copies
    size: int  # its bytes
    launch: Launch  # the line of Plan.launches, with the global bytes it moves
