"""The CUDA launcher, for two targets: ``"cuda"`` (CuPy arrays, ``cupy.RawModule``) and ``"sim"``
(NumPy arrays, the CPU simulator's ``RawModule``). Everything but the array module and the
module class is shared, so the simulator tests the very code that runs on a GPU.
"""

from __future__ import annotations

import functools
import hashlib
import math
import threading
from typing import NamedTuple

import numpy as np

from .._interop import array_module
from .._request import dtypes as _dtypes
from .._request import layout as _layout
from .._request.checks import Request, check_algorithm
from . import device as _device
from . import dispatch as _dispatch
from . import kernel_constants as _kernel_constants
from . import kernel_source as _kernel_source
from . import rows as _rows
from .families import common as _common
from .families import multiblock as _multiblock_family
from .families import sort as _sort
from .families.registry import FAMILIES as FAMILY_MODULES
from .families.registry import SINGLE_LAUNCH

ALGORITHMS = _dispatch.ALGORITHMS
WARP_ROW_ITEMS = _kernel_source.WARP_ROW_ITEMS
THREAD_ROW_KMAX = _kernel_source.THREAD_ROW_KMAX
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
    (and plain kernels) each holds."""
    out = []
    for info in _dtypes.SUPPORTED.values():
        for family, fam in FAMILIES.items():
            names = tuple(e.name for e in _kernel_source.entries(family, info.name)) + fam.plain
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
    ``warp_row_topk<float, 4>``, spaces ignored, an entry point's own name, or a plain kernel)
    -> (family, entry point)."""
    found = {}
    for family, fam in FAMILIES.items():
        for e in _kernel_source.entries(family, _dtype_name(cxx)):
            found[e.expression.replace(" ", "")] = found[e.name] = (family, e.name)
        for name in fam.plain:
            found[name] = (family, name)
    return found


_MODULES: dict[tuple, object] = {}
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


class _FamilyModules:
    """One element type's kernels, one module per family, each compiled on the first use of one
    of its kernels (once, under a lock: threads asking for the same family wait for it)."""

    def __init__(self, target: str, cxx: str):
        self.target, self.cxx = target, cxx
        self.modules: dict[str, object] = {}
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


def _build_family(target: str, cxx: str, family: str):
    """The module of one family for one element type. No name expressions: CuPy then finds the
    module in its on-disk cache in a new process (cutopk/cuda/kernel_source.py)."""
    code = _kernel_source.source(family, _dtype_name(cxx))
    if target == "cuda":
        import cupy

        return cupy.RawModule(code=code, options=("-std=c++17",))
    from .. import sim

    return sim.RawModule(code=code)


def _build_module(target: str, cxx: str):
    return _FamilyModules(target, cxx)


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


# The parameters of each single-launch kernel family, in order: the one place these argument lists
# are written, by the C parameter names of the kernels (tests/gpu/test_kernel_arguments.py checks
# names, order and types against kernels/<family>.cu). Scalars are typed by SCALAR_TYPES (CUDA's
# long long / int); the arrays are the input, the row extents (kernels/row_extent.cuh), the
# outputs and the radix candidate buffer.
ARGUMENTS = {name: FAMILY_MODULES[name].ARGUMENTS for name in SINGLE_LAUNCH}
SCALAR_TYPES = {
    "rows": np.int64, "n": np.int64, "row_stride": np.int64, "col_stride": np.int64,
    "buf_cap": np.int64, "k": np.int32, "largest": np.int32, "nan_first": np.int32,
    "by_index": np.int32, "size": np.int32, "cap": np.int32, "index_bytes": np.int32,
    "rows_kind": np.int32,
}  # fmt: skip
# The sort path's first launch (kernels/sort.cu; its gather_values is _rows.GATHER_VALUES).
COMPUTE_KEYS = _kernel_source.params("compute_keys", _sort.COMPUTE_KEYS, SCALAR_TYPES)
# The kernels take k as a C int (np.int32 above); rows, n, strides and indices are 64-bit.
KERNEL_MAX_K = 2**31 - 1
PER_CALL = ("in", "extents", "out_vals", "out_idx", "buf_key", "buf_idx")


def kernel_name(plan: _dispatch.KernelPlan, cxx: str) -> str:
    """The instantiation a single-launch plan runs."""
    return FAMILY_MODULES[plan.algorithm].kernel_name(plan.params, cxx)


class _SingleLaunch:
    """A single-launch family's launch, resolved once per call signature: the function object
    (opted in to its shared memory), the launch shape and every scalar argument; a call fills in
    only its arrays."""

    def __init__(self, call: GpuCall):
        p, req = call.plan, call.req
        row_stride, col_stride = (req.n, 1) if p.copy else call.strides
        scalars = {
            "rows": call.rows, "n": req.n, "row_stride": row_stride, "col_stride": col_stride,
            "k": req.k, "largest": req.largest, "nan_first": req.nan_first,
            "by_index": req.order == "index", "size": p.params.get("size", 0),
            "cap": p.params.get("cap", 0), "buf_cap": p.params.get("buffer", 0),
            "index_bytes": req.index_dtype.itemsize, "rows_kind": call.rows_kind,
        }  # fmt: skip
        names = ARGUMENTS[p.algorithm]
        self.template = [None if name in PER_CALL else SCALAR_TYPES[name](scalars[name]) for name in names]
        slots = {name: i for i, name in enumerate(names) if name in PER_CALL}
        self.fn = call.module.get_function(kernel_name(p, call.info.cxx))
        _rows.opt_in(self.fn, p.shared_bytes, call.target)
        self.grid, self.block, self.shared = (p.grid,), (p.block,), p.shared_bytes
        self.at = (slots["in"], slots["out_vals"], slots["out_idx"])
        self.at_extents = slots["extents"]
        # A regular batch never reads `extents`; a batch with extents gets its array per call.
        self.template[self.at_extents] = placeholder(call.target, np.int64)
        # The family's scratch table, allocated per call (what plan() sums).
        self.scratch = FAMILY_MODULES[p.algorithm].scratch(call.rows, req.n, req.k, p.params)
        self.key_dtype = call.info.key_dtype
        self.at_scratch = {e.name: slots[e.name] for e in self.scratch}
        if "buf_key" in slots and not self.scratch:  # never dereferenced without a buffer
            self.template[slots["buf_key"]] = placeholder(call.target, call.info.key_dtype)
            self.template[slots["buf_idx"]] = placeholder(call.target, np.uint32)

    def __call__(self, xp, base, values, indices, extents=None):
        args = self.template.copy()
        at_input, at_values, at_indices = self.at
        args[at_input], args[at_values], args[at_indices] = base, values, indices
        if extents is not None:
            args[self.at_extents] = extents
        if self.scratch:
            for name, arr in _common.allocate(xp, self.scratch, self.key_dtype).items():
                args[self.at_scratch[name]] = arr
        self.fn(self.grid, self.block, tuple(args), shared_mem=self.shared)


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
    (the outputs, the launches, and any copy the plan names)."""

    def __init__(
        self,
        shape,
        strides,
        dtype,
        req: Request,
        device: int,
        rows_kind: int = _kernel_constants.ROWS_REGULAR,
    ):
        self.req = req
        # LENGTHS or SEGMENTS: each run() takes the int64 extents array (kernels/row_extent.cuh).
        self.rows_kind = rows_kind
        self._signature = (tuple(shape), tuple(strides), dtype, device)
        self._variants: dict[int | str, GpuCall] = {}  # by rows_kind, and "aligned"
        self.target = req.backend
        self.xp = array_module(self.target)
        self.dtype = np.dtype(dtype)
        # The kernels read native byte order: the simulator swaps a non-native input first (a
        # GPU array library has no other byte order).
        self.native = self.dtype.newbyteorder("=") if not self.dtype.isnative else self.dtype
        self.info = _dtypes.check_dtype(self.dtype)
        self.facts = _device_facts(self.target, device)
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
        _check_forced(req, self.info.itemsize, self.facts, self.rows)
        if self.native is not self.dtype:
            # run() byte-swaps the input into a C-contiguous copy: the kernels read that copy's
            # layout, not the input's.
            strides = _layout.c_strides(shape, self.dtype.itemsize)
        layout = _layout.row_strides(shape, strides, self.dtype.itemsize, req.axis)
        self.strides = layout
        outer = layout is not None and _layout.is_outer(self.rows, *layout)
        self.plan = _dispatch.plan(
            self.rows,
            req.n,
            max(1, req.k),
            self.info.itemsize,
            self.facts,
            layout is None,
            req.algorithm,
            outer,
            req.order == "index",
            req.index_dtype.itemsize,
        )
        self.launches = req.k > 0 and self.rows > 0
        self.module = _module(self.target, self.info.cxx, device) if self.launches else None
        self.single = _SingleLaunch(self) if self.launches and self.plan.algorithm in ARGUMENTS else None
        # One launch on the input as it lies, into outputs that need no moving: run()'s short path.
        self.direct = (
            self.single is not None and self.last_axis and self.native is self.dtype and not self.plan.copy
        )
        self.rows_k = (self.rows, req.k)
        # The kernels read whole elements: a misaligned input (a view some bytes into a buffer)
        # faults on a GPU. The strides are checked here, the data pointer at every run().
        # (A non-native input is read through run()'s byte-swapped copy, aligned: no check.)
        self.aligned_strides = all(st % self.dtype.itemsize == 0 for st in strides)
        self.check_alignment = self.native is self.dtype

    def with_rows(self, rows_kind: int) -> GpuCall:
        """This signature's call over rows of ``rows_kind`` (planned once, kept with this one)."""
        if rows_kind == self.rows_kind:
            return self
        call = self._variants.get(rows_kind)
        if call is None:
            shape, strides, dtype, device = self._signature
            call = self._variants[rows_kind] = GpuCall(shape, strides, dtype, self.req, device, rows_kind)
        return call

    def run(self, a, out=None, extents=None):
        """``(values, indices)`` of ``a`` (which has this call's signature), written into ``out``
        when given (already checked to fit). ``extents``: the int64 lengths or CSR offsets of a
        call planned with ``rows_kind`` LENGTHS or SEGMENTS (on ``a``'s device)."""
        xp, req = self.xp, self.req
        if self.check_alignment and not _aligned(a, self.aligned_strides):
            return self._run_aligned(a, out, extents)
        if self.direct:  # the common case, in as few steps as it takes
            if out is None:
                values, indices = xp.empty(self.rows_k, self.native), xp.empty(self.rows_k, req.index_dtype)
            else:  # C-contiguous outputs of the result's shape: the kernel writes into them
                values, indices = out[0].reshape(self.rows_k), out[1].reshape(self.rows_k)
            try:
                self.single(xp, a, values, indices, extents)
            except Exception as exc:
                self._raise_memory_error(exc)
                raise
            if out is not None:
                return out
            return values.reshape(self.out_shape), indices.reshape(self.out_shape)
        if self.native is not self.dtype:
            a = a.astype(self.native, order="C")  # the layout __init__ planned on
        into_out = out is not None and self.last_axis and self.native is self.dtype
        if into_out:  # C-contiguous outputs of the result's shape: the kernels write into them
            values = out[0].reshape(self.rows, req.k)
            indices = out[1].reshape(self.rows, req.k)
        else:
            values = xp.empty((self.rows, req.k), dtype=self.native)
            # Written in index_dtype by the kernels (no cast afterwards).
            indices = xp.empty((self.rows, req.k), dtype=req.index_dtype)
        if self.launches:
            self._launch(a, values, indices, extents)
        if into_out:
            return out
        values, indices = self._finish(values), self._finish(indices)
        if out is not None:
            xp.copyto(out[0], values)
            xp.copyto(out[1], indices)
            return out
        if self.native is not self.dtype:
            values = values.astype(self.dtype)  # SPEC: values.dtype == a.dtype
        return values, indices

    def _run_aligned(self, a, out, extents):
        """:meth:`run` on an aligned copy of a misaligned ``a``: a contiguous ``a`` keeps its
        layout in the copy (so this very call runs it: a CSR data array, say); any other is copied
        to C order and run by the call planned for that layout (kept with this one)."""
        if a.flags.c_contiguous and self.aligned_strides:
            call = self
        else:
            call = self._variants.get("aligned")
            if call is None:
                shape, _, dtype, device = self._signature
                strides = _layout.c_strides(shape, self.dtype.itemsize)
                call = GpuCall(shape, strides, dtype, self.req, device, self.rows_kind)
                self._variants["aligned"] = call
        return call.run(self.xp.array(a, order="C", copy=True), out, extents)

    def _finish(self, arr):
        if self.last_axis:
            return arr.reshape(self.out_shape)
        return self.xp.ascontiguousarray(self.xp.moveaxis(arr.reshape(self.out_shape), -1, self.req.axis))

    def _launch(self, a, values, indices, extents):
        xp, p, req = self.xp, self.plan, self.req
        moved = a if self.last_axis else xp.moveaxis(a, req.axis, -1)
        if p.transpose:  # rows along an outer axis: a tiled transpose to row-major
            base = _rows.transpose_rows(self.module, self.info.cxx, moved, self.strides)
            row_stride, col_stride = req.n, 1
        elif p.copy:
            base, row_stride, col_stride = xp.ascontiguousarray(moved), req.n, 1
        else:
            base, (row_stride, col_stride) = moved, self.strides
        try:
            if self.single is not None:
                self.single(xp, base, values, indices, extents)
                return
            _launch(
                self.module,
                self.target,
                self.info,
                p,
                base,
                self.rows,
                req,
                row_stride,
                col_stride,
                values,
                indices,
                (extents, self.rows_kind),
            )
        except Exception as exc:
            self._raise_memory_error(exc)
            raise

    def _raise_memory_error(self, exc: Exception) -> None:
        """CuPy's OutOfMemoryError becomes the MemoryError that says what ran out; any other error
        is left to propagate. The scratch arrays are local to the launch, already back in the pool."""
        if type(exc).__name__ != "OutOfMemoryError":  # cupy.cuda.memory.OutOfMemoryError
            return
        p = self.plan
        raise MemoryError(
            f"top_k: out of GPU memory running {p.algorithm!r} on {self.rows} rows of {self.req.n} "
            f"(scratch {p.scratch_bytes} bytes besides the outputs): {exc}"
        ) from None


def _launch(
    mod,
    target,
    info,
    p: _dispatch.KernelPlan,
    base,
    rows,
    req: Request,
    row_stride,
    col_stride,
    values,
    indices,
    rows_of,
):
    """The multi-launch families (multiblock, sort); the single-launch ones go through
    :class:`_SingleLaunch` and :data:`ARGUMENTS`. ``rows_of``: ``(extents, rows_kind)`` (extents
    None for a regular batch)."""
    extents, rows_kind = rows_of
    if extents is None:  # a regular batch: the kernels never read it
        extents = placeholder(target, np.int64)
    rows_of = (extents, np.int32(rows_kind))
    # These paths gather the values through 64-bit indices (gather_values); uint64 indices
    # (all below 2**63) share int64's bits, 4-byte ones are converted once at the end.
    xp = array_module(target)
    wide = indices.itemsize == 8
    idx64 = indices.view(np.int64) if wide else xp.empty((rows, req.k), np.int64)
    if p.algorithm == "multiblock":
        _multiblock_in_chunks(
            xp, mod, info, p, base, rows, req, row_stride, col_stride, values, idx64, rows_of
        )
    else:
        v = {
            "in": base, "rows": rows, "n": req.n, "row_stride": row_stride, "col_stride": col_stride,
            "extents": extents, "rows_kind": rows_kind, "largest": req.largest,
            "nan_first": req.nan_first, "k": req.k,
        }  # fmt: skip
        _sort_path(target, info, p, mod, v, rows, req, values, idx64)
    if not wide:
        indices[...] = idx64


def _multiblock_in_chunks(
    xp, mod, info, p, base, rows, req, row_stride, col_stride, values, indices, rows_of
):
    """The multi-block select over successive chunks of at most ``rows_per_chunk`` rows (the grid's
    y extent and the scratch budget bound a chunk), each chunk a (rows, n) view of the input.

    ``rows_of``: ``(extents, rows_kind)``. A chunk [start, stop) of rows with lengths takes
    ``extents[start:stop]`` with its view; CSR segments start at their offsets from the data's
    first element, not at ``row * row_stride``, so a chunk of them keeps ``base`` and takes
    ``extents[start:stop + 1]``."""
    from . import multiblock as _multiblock_run

    chunk = p.params["rows_per_chunk"]
    if chunk >= rows:
        _multiblock_run.run(
            xp, mod, info, p, base, rows, req, row_stride, col_stride, values, indices, rows_of
        )
        return
    extents, rows_kind = rows_of
    segments = rows_kind == _kernel_constants.ROWS_SEGMENTS
    if not segments:
        itemsize = base.dtype.itemsize
        # The rows collapse to one stride (or the input was copied): a 2-D view of the same
        # memory, whose row slices start at the chunk's first row.
        as_rows = xp.lib.stride_tricks.as_strided(
            base, shape=(rows, req.n), strides=(row_stride * itemsize, col_stride * itemsize)
        )
    regular = rows_kind == _kernel_constants.ROWS_REGULAR
    for start in range(0, rows, chunk):
        stop = min(rows, start + chunk)
        part = base if segments else as_rows[start:stop]
        part_extents = extents if regular else extents[start : stop + 1 if segments else stop]
        _multiblock_run.run(
            xp,
            mod,
            info,
            p,
            part,
            stop - start,
            req,
            row_stride,
            col_stride,
            values[start:stop],
            indices[start:stop],
            (part_extents, rows_kind),
        )


def _sort_path(target, info, p, mod, v, rows, req, values, indices):
    """The reference path: the keys of whole rows by compute_keys, each row ordered by our
    tile-and-merge kernels (order.cu, no library sort), its first K kept (and ordered by
    index for order "index"), values gathered from the input. ``v``: the kernels' arguments by
    name (the input, its rows and their extents, the selection); compute_keys gives the positions
    past a row's length the lowest key, so they sort last, and gather_values writes any that is
    among the first K as padding."""
    xp = array_module(target)
    v["out"] = keys = xp.empty((rows, req.n), dtype=info.key_dtype)
    mod.get_function(f"{COMPUTE_KEYS.kernel}<{info.cxx}>")((p.grid,), (p.block,), COMPUTE_KEYS.pack(v))
    tile = p.params["order_tile"]
    keys, order = _rows.order_pairs(mod, info.cxx, keys, None, False, tile, target)
    if req.k < req.n:
        keys, order = xp.ascontiguousarray(keys[:, : req.k]), xp.ascontiguousarray(order[:, : req.k])
    if req.order == "index":
        keys, order = _rows.order_pairs(mod, info.cxx, keys, order, True, tile, target)
    indices[...] = order
    gather = _rows.GATHER_VALUES
    v["idx"], v["out"] = indices, values
    grid = max(1, min(-(-(rows * req.k) // p.block), p.grid))
    mod.get_function(f"{gather.kernel}<{info.cxx}>")((grid,), (p.block,), gather.pack(v))


def launches(call: GpuCall) -> list:
    """The launches of a prepared call, in order, as :func:`cutopk.plan` reports them (a test
    compares them with the launches the simulator records, so this list cannot drift), each with
    the global bytes its family's formula gives (tests/gpu/test_family_traffic.py compares them
    with the simulator's counts)."""
    from .._request.plan import Launch

    p, cxx, req = call.plan, call.info.cxx, call.req
    rows, n, k, b, ib = call.rows, req.n, req.k, call.info.itemsize, req.index_dtype.itemsize
    sectors = _common.sectors
    data = sectors(rows * n * b)  # the input (or its row-major copy)
    values, idx64 = sectors(rows * k * b), sectors(rows * k * 8)
    if p.algorithm == "multiblock":
        seq = _multiblock_launches(call)
    elif p.algorithm == "sort":
        seq = [Launch(f"compute_keys<{cxx}>", (p.grid,), p.block, global_bytes=2 * data)]
        seq += _order_launches(rows, n, p.params["order_tile"], b, cxx, with_indices=False)
        if k < n:
            seq.append(
                Launch("library: copies of the first K pairs", (), count=2, global_bytes=2 * (values + idx64))
            )
        if req.order == "index":
            seq += _order_launches(rows, k, p.params["order_tile"], b, cxx)
        grid = max(1, min(-(-(rows * k) // p.block), p.grid))
        seq += [
            Launch("library: the K indices copied out", (), global_bytes=2 * idx64),
            Launch(
                f"gather_values<{cxx}>", (grid,), p.block, global_bytes=_common.gather_bytes(rows, k, n, b)
            ),
        ]
    else:
        moved = FAMILY_MODULES[p.algorithm].global_bytes(rows, n, k, b, ib, p.params)
        seq = [Launch(kernel_name(p, cxx), (p.grid,), p.block, p.shared_bytes, global_bytes=moved)]
    if p.algorithm in ("multiblock", "sort") and ib != 8:
        seq.append(
            Launch(
                f"library: int64 indices to {req.index_dtype}",
                (),
                global_bytes=idx64 + sectors(rows * k * ib),
            )
        )
    if p.transpose:
        tiles = -(-rows // 32) * -(-n // 32)
        grid = (max(1, min(tiles, _rows.MAX_BLOCKS)),)
        seq.insert(
            0,
            Launch(
                f"transpose_rows<{cxx}>", grid, _kernel_constants.TRANSPOSE_THREADS, global_bytes=2 * data
            ),
        )
    elif p.copy:
        seq.insert(0, Launch("library: copy of the input to row-major", (), global_bytes=2 * data))
    if call.native is not call.dtype:
        seq.insert(0, Launch("library: byte swap of the input", (), global_bytes=2 * data))
    if not call.last_axis:
        outputs = 2 * (values + sectors(rows * k * ib))
        seq.append(Launch(f"library: outputs moved to axis {req.axis}", (), count=2, global_bytes=outputs))
    return seq


def _order_launches(
    rows: int, length: int, tile: int, key_bytes: int, cxx: str, with_indices: bool = True
) -> list:
    """:func:`cutopk.cuda.rows.order_pairs`'s launches, as plan() lists them."""
    from .._request.plan import Launch

    tiles, merges = _rows.order_launches(rows, length, tile, key_bytes)
    moved = _common.order_bytes(rows, length, key_bytes, len(merges.widths), with_indices)
    seq = [
        Launch(f"order_tiles<{cxx}>", tiles.grid, tiles.block[0], tiles.shared_bytes, global_bytes=moved[0])
    ]
    seq += [
        Launch(f"order_merge<{cxx}>", merges.grid, merges.block[0], global_bytes=m)
        for _, m in zip(merges.widths, moved[1:], strict=True)
    ]
    return seq


def _multiblock_launches(call: GpuCall) -> list:
    """The family's steps (those :func:`cutopk.cuda.multiblock.run` launches), per chunk of rows."""
    from .._request.plan import Launch

    p, cxx, req = call.plan, call.info.cxx, call.req
    b = call.info.itemsize
    chunk = p.params["rows_per_chunk"]
    chunks = -(-call.rows // chunk)
    steps = _multiblock_family.steps(chunk, b, p.params, p.block)
    moved = _multiblock_family.global_bytes(steps, chunk, req.n, req.k, b, req.index_dtype.itemsize, p.params)
    seq = [
        Launch(
            f"{s.kernel}<{cxx}>" if s.templated else s.kernel, s.grid, s.block, s.shared_bytes, global_bytes=m
        )
        for s, m in zip(steps, moved, strict=True)
    ]
    if not p.params["order_shared"]:
        seq += _order_launches(chunk, req.k, p.params["order_tile"], b, cxx)
        seq.append(
            Launch(
                "library: the K indices copied out", (), global_bytes=2 * _common.sectors(chunk * req.k * 8)
            )
        )
        grid = (max(1, min(-(-(chunk * req.k) // 256), 4096)),)
        seq.append(
            Launch(
                f"gather_values<{cxx}>", grid, 256, global_bytes=_common.gather_bytes(chunk, req.k, req.n, b)
            )
        )
    if chunks > 1:  # the last chunk may be shorter: bytes in proportion to the rows
        seq = [
            Launch(
                x.kernel,
                x.grid,
                x.block,
                x.shared_bytes,
                x.count * chunks,
                x.global_bytes * call.rows // chunk,
            )
            for x in seq
        ]
    return seq
