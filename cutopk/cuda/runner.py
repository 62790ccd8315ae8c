"""The one runner of kernel launches: every family's launches as data (a list of
:class:`~cutopk.cuda.families.common.Step`), prepared once per call signature and run per call.

:class:`Prepared` turns a planned call (``launcher.GpuCall``) into its steps: the tiled transpose
or copy of the input first when the plan says so, then the family's launches (a single-launch
family's one kernel, the sort path's :func:`families.sort.steps`, multiblock's sequence), then
the array-library copies that finish it. ``plan()`` lists the same steps (:meth:`Prepared.listing`),
so it cannot disagree with what runs. Each launch is resolved once: the kernel function (opted in
to its shared memory), the grid, block and shared bytes, and an argument list whose scalars are
converted to their C types already; only the per-call arrays (the input, the extents, the outputs)
and the scratch views are slotted in per call.

A call's scratch is one table (the family's named entries, the copy of the input, staged outputs,
the int64 indices) carved from the stream's cached workspace (:mod:`cutopk.cuda.workspace`): a
warm call allocates no scratch, and the carved views are reused as long as the workspace's
buffer stays the same.
"""

from __future__ import annotations

import numpy as np

from . import kernel_source as _kernel_source
from . import rows as _rows
from . import workspace as _workspace
from .families import common as _common
from .families import sort as _sort
from .families import transpose as _transpose
from .families.registry import FAMILIES as FAMILY_MODULES
from .families.registry import SINGLE_LAUNCH
from .kernel_constants import ROWS_REGULAR, ROWS_SEGMENTS

# The C types of every scalar parameter a launch passes, by name (the kernels take long long or
# int; tests/gpu/test_kernel_arguments.py checks them against the C signatures).
SCALAR_TYPES = {
    "rows": np.int64, "n": np.int64, "row_stride": np.int64, "col_stride": np.int64,
    "buf_cap": np.int64, "len": np.int64, "width": np.int64, "k": np.int32, "largest": np.int32,
    "nan_first": np.int32, "by_index": np.int32, "size": np.int32, "cap": np.int32,
    "index_bytes": np.int32, "rows_kind": np.int32, "with_idx": np.int32, "tile": np.int32,
}  # fmt: skip
# The parameters of each single-launch family's kernel, in order (its module's ARGUMENTS).
ARGUMENTS = {name: FAMILY_MODULES[name].ARGUMENTS for name in SINGLE_LAUNCH}
# The per-call arrays, in the order the runner receives them.
PER_CALL = ("input", "extents", "out_vals", "out_idx")


def _descriptors() -> dict[str, _kernel_source.Params]:
    """Every kernel's descriptor, by kernel name, from the family modules' parameter lists."""
    found = {d.kernel: d for d in (_rows.ORDER_TILES, _rows.ORDER_MERGE, _rows.TRANSPOSE_ROWS)}
    found.update({d.kernel: d for d in (_rows.GATHER_VALUES, _rows.COMPUTE_KEYS)})
    for name in SINGLE_LAUNCH:
        fam = FAMILY_MODULES[name]
        kernel = fam.geometry(1, 1, 1, 4, _ANY_DEVICE).kernel
        found[kernel] = _kernel_source.params(kernel, fam.ARGUMENTS, SCALAR_TYPES)
    return found


class _AnyDevice:  # enough of a device for a family's geometry to name its kernel
    shared_bytes = 48 * 1024
    sm_count = 1


_ANY_DEVICE = _AnyDevice()
DESCRIPTORS = _descriptors()


def single_step(call) -> _common.Step:
    """A single-launch family's one launch, from its plan (the generic path: the family's module
    gives the kernel's name and parameters, the plan its geometry)."""
    p = call.plan
    name = FAMILY_MODULES[p.algorithm].kernel_name(p.params, call.info.cxx)
    return _common.Step(name, True, (p.grid,), p.block, p.shared_bytes)


def _kernel_of(step) -> tuple[str, str]:
    """``(descriptor key, instantiated name)`` of a step's kernel."""
    if "<" in step.kernel:
        return step.kernel.split("<")[0], step.kernel
    return step.kernel, step.kernel


class Program:
    """A call's steps and scratch, as data: ``table`` (the scratch, one workspace buffer),
    ``before`` and ``after`` (the steps around the family's), ``family`` (the family's steps;
    multiblock's come from its module per chunk), the scalars every step may take by name, and
    which value each of ``in``/``out_vals``/``out_idx`` is (a per-call array or a scratch view)."""

    def __init__(self, call):
        p, req, info = call.plan, call.req, call.info
        rows, n, k = call.rows, req.n, req.k
        self.table: list = []
        self.before: list = []
        self.after: list = []
        self.shapes: dict[str, tuple] = {}
        self.alias = {"in": "input", "out_vals": "out_vals", "out_idx": "out_idx"}
        row_stride, col_stride = call.strides if call.strides is not None else (n, 1)
        if p.transpose:  # rows along an outer axis: a tiled transpose to row-major
            self.table += _transpose.scratch(rows, n)
            self.before += [
                step._replace(args=(("in", "input"), ("row_stride", row_stride), ("col_stride", col_stride), *step.args))
                for step in _transpose.steps(rows, n)
            ]  # fmt: skip
        elif p.copy:
            self.table += _transpose.scratch(rows, n)
            self.before.append(
                _common.Step(
                    "", False, (), 0, library="copy of the input to row-major", copy=("row_major", "input")
                )
            )
        if p.copy:
            self.alias["in"] = "row_major"
            row_stride, col_stride = n, 1
        if not call.last_axis:  # the kernels write (rows, k); the outputs are moved afterwards
            self.table += [_common.Scratch("stage_vals", "value", rows * k)]
            self.table += [_common.Scratch("stage_idx", np.dtype(req.index_dtype).name, rows * k)]
            self.shapes.update(stage_vals=(rows, k), stage_idx=(rows, k))
            self.alias.update(out_vals="stage_vals", out_idx="stage_idx")
        self.scalars = {
            "rows": rows, "n": n, "row_stride": row_stride, "col_stride": col_stride, "k": k,
            "largest": req.largest, "nan_first": req.nan_first, "by_index": req.order == "index",
            "size": p.params.get("size", 0), "cap": p.params.get("cap", 0),
            "buf_cap": p.params.get("buffer", 0), "index_bytes": req.index_dtype.itemsize,
            "rows_kind": call.rows_kind,
        }  # fmt: skip
        self.multiblock = p.algorithm == "multiblock"
        if p.algorithm in ARGUMENTS:
            self.family = [single_step(call)]
            self.table += FAMILY_MODULES[p.algorithm].scratch(rows, n, k, p.params)
        elif p.algorithm == "sort":
            by_index = req.order == "index"
            self.table += _sort.scratch(rows, n, k, p.params, by_index)
            self.family = _sort.steps(rows, n, k, info.itemsize, p.params, p.grid, by_index)
        elif self.multiblock:
            # Its sequence (cutopk/cuda/multiblock.py) takes the int64 indices and its scratch
            # from the tail of this call's buffer, per chunk of rows.
            chunk = p.params["rows_per_chunk"]
            self.family = []
            if req.index_dtype.itemsize != 8:
                self.table.append(_common.Scratch("idx64", "int64", rows * k))
                self.shapes["idx64"] = (rows, k)
                self.after.append(
                    _common.Step(
                        "", False, (), 0, library=f"int64 indices to {req.index_dtype}",
                        copy=(self.alias["out_idx"], "idx64", rows, k, k),
                    )
                )  # fmt: skip
            table = FAMILY_MODULES["multiblock"].scratch(chunk, n, k, p.params)
            self.tail = _common.scratch_bytes(table, info.itemsize)
        else:  # pragma: no cover - the registry and this runner disagree
            raise RuntimeError(f"no launch steps for algorithm {p.algorithm!r}")
        self.head = _common.scratch_bytes(self.table, info.itemsize)
        self.nbytes = self.head + (self.tail if self.multiblock else 0)

    def steps(self) -> list:
        return [*self.before, *self.family, *self.after]


class _Carver:
    """The array module for multiblock's sequence, whose ``empty`` carves from a region of the
    call's workspace buffer (its scratch table, one chunk of rows at a time); the rest is ``xp``."""

    def __init__(self, xp, region):
        self._xp, self._region, self._at = xp, region, 0

    def empty(self, shape, dtype=float, order="C"):
        dtype = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        start, self._at = self._at, self._at + -(-nbytes // _common.ALIGN) * _common.ALIGN
        if self._at > self._region.nbytes:
            raise RuntimeError(
                f"multiblock asked for {self._at} bytes of scratch, its table planned {self._region.nbytes}"
            )
        return self._region[start : start + nbytes].view(dtype).reshape(shape)

    def __getattr__(self, name):
        return getattr(self._xp, name)


class Prepared:
    """A call signature's launches, resolved once; ``run(xp, input, values, indices, extents)``
    launches them for one call."""

    def __init__(self, call, placeholder):
        self.call = call
        self.program = prog = Program(call)
        self.target, self.device = call.target, call.device
        info = call.info
        self.key_dtype, self.value_dtype = info.key_dtype, call.native
        self.scratch_names = {e.name for e in prog.table}
        self.launches = []  # (fn, grid, block, shared, template, per-call slots, scratch slots)
        self.copies = []  # (position in the sequence, dst, src, rows, src_len, dst_len)
        self.ops = []  # ("launch", index) or ("copy", index) or ("multiblock", None), in order
        constants = {
            "placeholder_int64": placeholder(call.target, np.int64),
        }
        regular = call.rows_kind == ROWS_REGULAR
        if regular:  # a regular batch never reads `extents`
            constants["extents"] = placeholder(call.target, np.int64)
        no_buffer = not any(e.name == "buf_key" for e in prog.table)
        if no_buffer:  # radix without a candidate buffer: placeholders it never dereferences
            constants["buf_key"] = placeholder(call.target, info.key_dtype)
            constants["buf_idx"] = placeholder(call.target, np.uint32)
        self.constants = constants
        steps = [*prog.before, *prog.family]
        for step in steps:
            self._add(step, call)
        if prog.multiblock:
            self.ops.append(("multiblock", None))
        for step in prog.after:
            self._add(step, call)
        self._carved = (None, None)  # (buffer, (scratch views, filled launch templates))
        self.single = len(self.ops) == 1 and self.ops[0][0] == "launch"

    def _resolve(self, name: str):
        """Where a value comes from: ("call", index), ("scratch", name) or ("const", value)."""
        name = self.program.alias.get(name, name)
        if name in PER_CALL and name not in self.constants:
            return "call", PER_CALL.index(name)
        if name in self.scratch_names:
            return "scratch", name
        if name in self.constants:
            return "const", self.constants[name]
        raise KeyError(name)

    def _add(self, step, call) -> None:
        if not step.kernel:  # an array-library copy
            dst, src, *shape = step.copy
            self.ops.append(("copy", len(self.copies)))
            self.copies.append((self._resolve(dst), self._resolve(src), tuple(shape)))
            return
        key, name = _kernel_of(step)
        if "<" not in name and step.templated:
            name = f"{name}<{call.info.cxx}>"
        desc = DESCRIPTORS[key]
        given = dict(step.args)
        template, at_call, at_scratch = [], [], []
        for i, param in enumerate(desc.names):
            source = given.get(param, param)
            if not isinstance(source, str):
                template.append(desc.scalars[param](source))
                continue
            if source in self.program.scalars and source not in self.program.alias:
                template.append(desc.scalars[param](self.program.scalars[source]))
                continue
            try:
                kind, where = self._resolve(source)
            except KeyError:
                raise RuntimeError(f"{key}: no value for its parameter {param!r} ({source!r})") from None
            template.append(where if kind == "const" else None)
            if kind == "call":
                at_call.append((i, where))
            elif kind == "scratch":
                at_scratch.append((i, where))
        fn = call.module.get_function(name)
        _rows.opt_in(fn, step.shared_bytes, call.target)
        grid = step.grid
        self.ops.append(("launch", len(self.launches)))
        self.launches.append(
            (fn, grid, (step.block,), step.shared_bytes, template, tuple(at_call), tuple(at_scratch))
        )

    def _views(self, xp):
        """The scratch views and the launch templates filled with them, for the workspace buffer
        of the current stream (carved again only when that buffer changed)."""
        buffer = _workspace.take(xp, self.target, self.device, self.program.nbytes)
        cached_buffer, carved = self._carved
        if cached_buffer is buffer:
            return carved
        views = _common.carve(buffer, self.program.table, self.key_dtype, self.value_dtype)
        for name, shape in self.program.shapes.items():
            views[name] = views[name].reshape(shape)
        filled = []
        for fn, grid, block, shared, template, at_call, at_scratch in self.launches:
            args = list(template)
            for i, name in at_scratch:
                args[i] = views[name]
            filled.append((fn, grid, block, shared, args, at_call))
        tail = buffer[self.program.head : self.program.nbytes] if self.program.multiblock else None
        carved = (views, filled, tail)
        self._carved = (buffer, carved)  # one assignment: a thread reads either pair, never half
        return carved

    def run(self, xp, a, values, indices, extents=None) -> None:
        """The steps for one call: ``a`` the input with its rows' axis last, ``values`` and
        ``indices`` the (rows, k) outputs (or None where they are staged in the scratch). Returns
        the scratch views (the staged outputs among them)."""
        per_call = (a, extents, values, indices)
        if self.program.nbytes:
            views, filled, tail = self._views(xp)
        else:
            views, filled, tail = _NO_VIEWS, self._filled_without_scratch(), None
        for kind, index in self.ops:
            if kind == "launch":
                fn, grid, block, shared, args, at_call = filled[index]
                if at_call:
                    args = args.copy()
                    for i, j in at_call:
                        args[i] = per_call[j]
                fn(grid, block, tuple(args), shared_mem=shared)
            elif kind == "copy":
                self._copy(xp, self.copies[index], per_call, views)
            else:
                self._multiblock(xp, per_call, views, tail)
        return views

    def _filled_without_scratch(self):
        filled = getattr(self, "_filled", None)
        if filled is None:
            filled = self._filled = [
                (fn, grid, block, shared, list(template), at_call)
                for fn, grid, block, shared, template, at_call, _ in self.launches
            ]
        return filled

    @staticmethod
    def _value(source, per_call, views):
        kind, where = source
        if kind == "call":
            return per_call[where]
        if kind == "scratch":
            return views[where]
        return where

    def _copy(self, xp, copy, per_call, views) -> None:
        dst, src, shape = copy
        dst, src = self._value(dst, per_call, views), self._value(src, per_call, views)
        if not shape:  # the input, in its own layout, into a row-major copy
            xp.copyto(dst.reshape(src.shape), src, casting="unsafe")
            return
        rows, src_len, dst_len = shape
        xp.copyto(dst.reshape(rows, dst_len), src.reshape(rows, src_len)[:, :dst_len], casting="unsafe")

    def _multiblock(self, xp, per_call, views, tail) -> None:
        """Multiblock's sequence (cutopk/cuda/multiblock.py) over chunks of rows, its scratch
        carved from ``tail``; int64 indices into the outputs (or the ``idx64`` scratch)."""
        from . import multiblock as _multiblock_run

        call, req = self.call, self.call.req
        p, rows = call.plan, call.rows
        base = self._value(self._resolve("in"), per_call, views)
        values = self._value(self._resolve("out_vals"), per_call, views)
        indices = self._value(self._resolve("out_idx"), per_call, views)
        if req.index_dtype.itemsize == 8:
            indices = indices.view(np.int64)
        else:
            indices = views["idx64"]
        extents = self._value(self._resolve("extents"), per_call, views)
        rows_kind = np.int32(call.rows_kind)
        row_stride, col_stride = self.program.scalars["row_stride"], self.program.scalars["col_stride"]
        chunk = p.params["rows_per_chunk"]
        info, mod = call.info, call.module
        if chunk >= rows:
            _multiblock_run.run(
                _Carver(xp, tail), mod, info, p, base, rows, req, row_stride, col_stride, values,
                indices, (extents, rows_kind),
            )  # fmt: skip
            return
        segments = call.rows_kind == ROWS_SEGMENTS
        if not segments:
            # The rows collapse to one stride (or the input was copied): a 2-D view of the same
            # memory, whose row slices start at the chunk's first row.
            itemsize = base.dtype.itemsize
            as_rows = xp.lib.stride_tricks.as_strided(
                base, shape=(rows, req.n), strides=(row_stride * itemsize, col_stride * itemsize)
            )
        regular = call.rows_kind == ROWS_REGULAR
        for start in range(0, rows, chunk):
            stop = min(rows, start + chunk)
            # CSR segments start at their offsets from the data's first element: a chunk of
            # them keeps the base and takes extents[start:stop + 1].
            part = base if segments else as_rows[start:stop]
            part_extents = extents if regular else extents[start : stop + 1 if segments else stop]
            _multiblock_run.run(
                _Carver(xp, tail), mod, info, p, part, stop - start, req, row_stride, col_stride,
                values[start:stop], indices[start:stop], (part_extents, rows_kind),
            )  # fmt: skip

    def listing(self) -> list:
        """The launches as plan() lists them: every step, multiblock's per chunk of rows."""
        call = self.call
        cxx = call.info.cxx
        out = [_launch_of(step, cxx) for step in [*self.program.before, *self.program.family]]
        if self.program.multiblock:
            out += _multiblock_launches(call)
        out += [_launch_of(step, cxx) for step in self.program.after]
        return out


_NO_VIEWS: dict = {}


def _launch_of(step, cxx: str):
    from .._request.plan import Launch

    if not step.kernel:
        return Launch(f"library: {step.library}", ())
    _, name = _kernel_of(step)
    if "<" not in name and step.templated:
        name = f"{name}<{cxx}>"
    return Launch(name, step.grid, step.block, step.shared_bytes)


def _multiblock_launches(call) -> list:
    """The sequence's steps (those :func:`cutopk.cuda.multiblock.run` launches), per chunk of rows."""
    from .._request.plan import Launch

    p, req = call.plan, call.req
    chunk = p.params["rows_per_chunk"]
    chunks = -(-call.rows // chunk)
    by_index = req.order != "value"
    steps = _rows.multiblock_steps(chunk, req.k, call.info.itemsize, p.params, p.block, by_index)
    seq = [_launch_of(s, call.info.cxx) for s in steps]
    if chunks > 1:
        seq = [Launch(x.kernel, x.grid, x.block, x.shared_bytes, x.count * chunks) for x in seq]
    return seq


__all__ = ["ARGUMENTS", "DESCRIPTORS", "PER_CALL", "SCALAR_TYPES", "Prepared", "Program"]
