"""The one runner of kernel launches: every family's launches as data (a list of
:class:`~cutopk.cuda.families.common.Step`), resolved once per call signature and run per call.

:class:`Runner` turns a planned call (``launcher.GpuCall``) into its steps: the tiled transpose
or copy of the input first when the plan says so, then the family's launches (its
:class:`~cutopk.cuda.families.common.Part`, from ``families.registry.part``: the same for every
family, so this module names none), then the array-library copies that finish it. ``plan()``
lists the same steps (:meth:`Runner.launches`), so it cannot disagree with what runs. Each
launch is resolved once: the kernel function (opted in to its shared memory), the grid, block
and shared bytes, and an argument list whose scalars are converted to their C types already;
only the per-call arrays (the input, the extents, the outputs) and the scratch views are
slotted in per call. The resolved sequence runs as one generated
function (:func:`_generated`) with every launch written out: no loop or branch per launch.

A call's scratch is one table (the family's named entries, the copy of the input, staged outputs,
the int64 indices) carved from the stream's cached workspace (:mod:`cutopk.cuda.workspace`): a
warm call allocates no scratch, and the carved views are reused as long as the workspace's
buffer stays the same.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from . import kernel_source as _kernel_source
from . import shared_memory as _shared_memory
from . import workspace as _workspace
from .families import common as _common
from .families import registry as _registry
from .families import transpose as _transpose
from .kernel_constants import ROWS_REGULAR, ROWS_SEGMENTS

# The per-call arrays, in the order the runner receives them.
PER_CALL = ("input", "extents", "out_vals", "out_idx")


def _descriptors() -> dict[str, _kernel_source.Params]:
    """Every kernel's descriptor, by kernel name: its module's ``ARGUMENTS``, typed by the common
    table of scalar types and the module's own ``SCALAR_TYPES`` (tests/gpu/test_kernel_arguments.py
    checks each against the kernel's C declaration)."""
    found = {}
    for module in (*_registry.FAMILIES.values(), *_registry.STEPS.values()):
        types = {**_common.SCALAR_TYPES, **getattr(module, "SCALAR_TYPES", {})}
        for kernel, names in module.ARGUMENTS.items():
            found[kernel] = _kernel_source.params(kernel, names, types)
    return found


DESCRIPTORS = _descriptors()


def _kernel_of(step) -> tuple[str, str]:
    """``(descriptor key, instantiated name)`` of a step's kernel."""
    if "<" in step.kernel:
        return step.kernel.split("<")[0], step.kernel
    return step.kernel, step.kernel


def planned(call, rows: int) -> _common.Planned:
    """What the planned ``call``'s family needs to give its part over ``rows`` rows."""
    p, req = call.plan, call.req
    return _common.Planned(
        rows, req.n, req.k, call.info.itemsize, req.index_dtype, req.order, p.params, p.grid, p.block,
        p.shared_bytes, call.info.cxx,
    )  # fmt: skip


class Schedule:
    """A call's steps and scratch, as data (what :class:`Runner` resolves and runs): ``table`` (the scratch, one workspace buffer),
    ``before`` and ``after`` (the steps around the family's), ``family`` (the family's steps, or
    per chunk of rows in :attr:`chunks` when its plan names ``rows_per_chunk``), the scalars every
    step may take by name, and which value each of ``in``/``out_vals``/``out_idx`` is (a
    per-call array or a scratch view). ``nbytes``: the workspace bytes of one call.

    Every family is one :class:`~cutopk.cuda.families.common.Part` (registry.part): no family
    has a branch here."""

    def __init__(self, call):
        p, req, info = call.plan, call.req, call.info
        rows, n, k = call.rows, req.n, req.k
        self.table: list = []
        self.before: list = []
        self.after: list = []
        self.shapes: dict[str, tuple] = {}
        self.alias = {"in": "input", "out_vals": "out_vals", "out_idx": "out_idx"}
        self.input_shape = (*call.out_shape[:-1], n)  # the input with its rows' axis last
        row_stride, col_stride = call.strides if call.strides is not None else (n, 1)
        if p.transpose:  # rows along an outer axis: a tiled transpose to row-major
            self.table += _transpose.scratch(rows, n)
            self.before += [
                step._replace(args=(("in", "input"), ("row_stride", row_stride), ("col_stride", col_stride), *step.args))
                for step in _transpose.steps(rows, n, info.itemsize)
            ]  # fmt: skip
        elif p.copy:
            self.table += _transpose.scratch(rows, n)
            self.before += _transpose.copy_steps(rows, n, info.itemsize)
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
        part = _registry.part(p.algorithm, planned(call, rows))
        # The call's own share of the family's part: outputs redirected to its scratch, and the
        # steps after it (their "final:" names: where the outputs went before the redirection).
        final = {f"final:{name}": self._final(name) for name in part.outputs}
        self.table += part.call_scratch
        self.shapes.update(part.shapes)
        self.alias.update(part.outputs)
        self.after += [_finally(step, final) for step in part.after]
        self.chunks: list = []  # (start, stop, _Chunk) per chunk of rows
        chunk = p.params.get("rows_per_chunk") or rows
        if chunk >= rows:  # one chunk: the family's steps and scratch are the call's own
            self.family = part.steps
            self.table += part.scratch
            self.scalars.update(part.scalars)
            self.nbytes = _common.scratch_bytes(self.table, info.itemsize)
            return
        self.family = []
        head = _common.scratch_bytes(self.table, info.itemsize)
        sizes: dict = {}
        for start in range(0, rows, chunk):
            stop = min(rows, start + chunk)
            if stop - start not in sizes:
                chunk_part = _registry.part(p.algorithm, planned(call, stop - start))
                sizes[stop - start] = _Chunk(chunk_part, self.scalars, head, info.itemsize)
            self.chunks.append((start, stop, sizes[stop - start]))
        self.nbytes = head + max(c.nbytes for c in sizes.values())

    def _final(self, output: str) -> str:
        """The name that reaches ``output``'s destination before a family redirects it: its staged
        copy, or the per-call array itself (``call:``, past every alias)."""
        where = self.alias[output]
        return f"call:{output}" if where == output else where


def _finally(step, final: dict):
    """``step`` (a copy after the family's steps) with its ``final:`` names resolved."""
    if not step.copy:
        return step
    return step._replace(copy=tuple(final.get(v, v) if isinstance(v, str) else v for v in step.copy))


class _Chunk:
    """A family's steps over one chunk of rows: its part's steps and scratch table (carved after
    the call's own, from ``offset``) and its scalars over the call's."""

    def __init__(self, part, scalars: dict, offset: int, key_bytes: int):
        self.table = list(part.scratch)
        self.family = part.steps
        self.scalars = {**scalars, **part.scalars}
        self.shapes: dict = {}
        self.alias = {"in": "input", "out_vals": "out_vals", "out_idx": "out_idx"}
        self.offset = offset
        self.nbytes = _common.scratch_bytes(self.table, key_bytes)


class _Kernel:
    """A launch's kernel: its function fetched, and opted in to its shared memory, on the first
    launch (:meth:`function`), which is when its family's module is compiled and loaded (in the
    call's device scope, as every launch is). Until then the call is planned, not built."""

    __slots__ = ("_fn", "module", "name", "shared_bytes", "target")

    def __init__(self, module, name: str, shared_bytes: int, target: str):
        self.module, self.name, self.shared_bytes, self.target = module, name, shared_bytes, target
        self._fn = None

    def function(self):
        fn = self._fn
        if fn is None:  # a race fetches the same function twice and opts it in twice: harmless
            fn = self.module.get_function(self.name)
            _shared_memory.opt_in(fn, self.shared_bytes, self.target)
            self._fn = fn
        return fn

    def built(self) -> bool:
        """Whether the kernel's module is compiled and loaded already."""
        return self._fn is not None or self.module.built(self.name)


class _Sequence:
    """Steps resolved once: each launch's function (opted in to its shared memory), geometry and
    argument list (scalars typed, constants in place, slots for the per-call arrays and for the
    scratch views), each copy's arrays; :meth:`run` launches them for one call."""

    def __init__(self, call, schedule, constants: dict, steps: list):
        self.schedule = schedule
        self.per_call = getattr(schedule, "per_call", PER_CALL)  # the arrays each run() passes
        self.key_dtype, self.value_dtype = call.info.key_dtype, call.native
        self.offset = getattr(schedule, "offset", 0)
        self.scratch_names = {e.name for e in schedule.table}
        self.constants = constants
        self.launches: list[tuple] = []  # (fn, grid, block, shared, template, per-call slots, scratch slots)
        self.copies: list[tuple] = []  # (dst, src, shape)
        self.ops: list[tuple[bool, int | None]] = []  # (is a launch, index)
        self._memo: dict = {}  # launches by their step: a repeated step is resolved once
        for step in steps:
            self._add(step, call)
        # (buffer, tickets, (scratch views, launches with their views))
        self._carved: tuple[object, Any, Any] = (_UNSET, None, None)

    def _resolve(self, name: str):
        """Where a value comes from: ("call", index), ("scratch", name) or ("const", value)."""
        if name.startswith("call:"):  # a per-call array itself, whatever the aliases say
            return "call", self.per_call.index(name[5:])
        name = self.schedule.alias.get(name, name)
        if name in self.per_call and name not in self.constants:
            return "call", self.per_call.index(name)
        if name in self.scratch_names:
            return "scratch", name
        if name in self.constants:
            return "const", self.constants[name]
        raise KeyError(name)

    def _add(self, step, call) -> None:
        if not step.kernel:  # an array-library copy
            dst, src, *shape = step.copy
            try:
                ends = self._resolve(dst), self._resolve(src)
            except KeyError as exc:
                raise RuntimeError(f"{step.library}: no array {exc.args[0]!r} in the call") from None
            self.ops.append((False, len(self.copies)))
            self.copies.append((*ends, tuple(shape)))
            return
        memo = (
            step.kernel,
            step.templated,
            step.grid,
            step.block,
            step.shared_bytes,
            step.args,
        )
        known = self._memo.get(memo)
        if known is not None:  # the same launch again (a digit pass): resolved once
            self.ops.append((True, len(self.launches)))
            self.launches.append(known)
            return
        key, name = _kernel_of(step)
        if "<" not in name and step.templated:
            name = f"{name}<{call.info.cxx}>"
        desc = DESCRIPTORS[key]
        given = dict(step.args)
        scalars = self.schedule.scalars
        template, at_call, at_scratch = [], [], []
        for i, param in enumerate(desc.names):
            source = given.get(param, param)
            if not isinstance(source, str):
                template.append(desc.scalars[param](source))
                continue
            if source in scalars and source not in self.schedule.alias:
                template.append(desc.scalars[param](scalars[source]))
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
        # The function is fetched (its module built) at the first launch, not here: plan() builds
        # nothing. The device's shared-memory limit is checked now, so plan() reports it.
        _shared_memory.check(step.shared_bytes, call.target)
        self.ops.append((True, len(self.launches)))
        launch = (
            _Kernel(call.module, name, step.shared_bytes, call.target),
            step.grid,
            (step.block,),
            step.shared_bytes,
            template,
            tuple(at_call),
            tuple(at_scratch),
        )
        self.launches.append(launch)
        self._memo[memo] = launch

    def carved(self, buffer, tickets=None):
        """The scratch views and the launches filled with them, for ``buffer`` and ``tickets``
        (the stream's zeroed arrival tickets, for a table with TICKET entries). :meth:`run` calls
        this only when the workspace's buffer or tickets changed; threads that race there carve
        alike."""
        views = {}
        if buffer is not None:
            region = buffer[self.offset :] if self.offset else buffer
            views = _common.carve(region, self.schedule.table, self.key_dtype, self.value_dtype)
            for name, shape in self.schedule.shapes.items():
                views[name] = views[name].reshape(shape)
        if tickets is not None:
            views.update(_common.carve_tickets(tickets, self.schedule.table))
        filled = []
        for kernel, grid, block, shared, template, at_call, at_scratch in self.launches:
            fn = kernel.function()
            args = list(template)
            for i, name in at_scratch:
                args[i] = views[name]
            filled.append((fn, grid, block, shared, args, at_call))
        copies = [self._copy_views(copy, views) for copy in self.copies]
        carved = (views, filled, _generated(self.ops, filled, copies, views, len(self.per_call)))
        # One assignment: a thread reads either triple, never views of one stream's tickets
        # paired with another's.
        self._carved = (buffer, tickets, carved)
        return carved

    def run(self, xp, per_call, buffer, between=None, tickets=None) -> dict:
        """The steps for one call (``per_call``: the arrays of :data:`PER_CALL`); ``between``:
        called where a chunked family's chunks go (after the steps before the family's);
        ``tickets``: the stream's zeroed arrival tickets, where the table has TICKET entries."""
        cached_buffer, cached_tickets, carved = self._carved
        if cached_buffer is not buffer or cached_tickets is not tickets:
            carved = self.carved(buffer, tickets)
        carved[2](xp, per_call, between)
        return carved[0]

    def _copy_views(self, copy, views) -> tuple:
        """``(dst, at_dst, src, at_src)`` of a copy: the scratch side as the view it copies (the first
        ``dst_len`` of each row of ``src``), a per-call side as its index in :data:`PER_CALL` (the
        outputs are (rows, k) already; the input copy's destination takes the input's shape)."""
        (dst_kind, dst), (src_kind, src), shape = copy
        out = []
        for kind, where, is_dst in ((dst_kind, dst, True), (src_kind, src, False)):
            if kind == "call":
                out += [None, where]
                continue
            view = views[where] if kind == "scratch" else where
            if not shape:  # the input, in its own layout, copied to row-major
                view = view.reshape(self.schedule.input_shape)
            else:
                rows, src_len, dst_len = shape
                view = view.reshape(rows, dst_len) if is_dst else view.reshape(rows, src_len)[:, :dst_len]
            out += [view, None]
        return tuple(out)


class Runner:
    """A call signature's launches, resolved once; :meth:`run` launches them for one call."""

    def __init__(self, call, placeholder):
        self.call = call
        self.schedule = schedule = Schedule(call)
        self.target, self.device = call.target, call.device
        info = call.info
        constants = {}
        if call.rows_kind == ROWS_REGULAR:  # a regular batch never reads `extents`
            constants["extents"] = placeholder(call.target, np.int64)
        if not any(e.name == "buf_key" for e in schedule.table):  # radix without a candidate buffer
            constants["buf_key"] = placeholder(call.target, info.key_dtype)
            constants["buf_idx"] = placeholder(call.target, np.uint32)
        self.sequence = _Sequence(call, schedule, constants, [*schedule.before, *schedule.family])
        # Arrival tickets (split): the stream's zeroed array, not the scratch buffer. Only a
        # family of one chunk of rows takes them.
        self.tickets = _common.ticket_count(schedule.table)
        if self.tickets and schedule.chunks:
            raise RuntimeError(
                f"{call.plan.algorithm}: arrival tickets in a family that runs per chunk of rows"
            )
        if schedule.chunks:
            self.sequence.ops.append((False, None))  # where the chunks run
        for step in schedule.after:
            self.sequence._add(step, call)
        self.chunks = []
        seq = self.sequence
        self._chunk_sources = tuple(seq._resolve(name) for name in ("in", "out_vals", "out_idx", "extents"))
        sequences = {}
        for start, stop, chunk in schedule.chunks:
            if id(chunk) not in sequences:
                sequences[id(chunk)] = _Sequence(call, chunk, constants, chunk.family)
            self.chunks.append((start, stop, sequences[id(chunk)]))
        # One launch without scratch (most single-launch families): :meth:`run_short` slots the
        # arrays straight into its argument list.
        self.single: tuple = ()  # the one launch's kernel, geometry, arguments and slots
        self.unresolved = False  # whether single holds the _Kernel rather than its function
        self.run_short = self.run
        if len(self.sequence.ops) == 1 and self.sequence.ops[0][0] and not schedule.nbytes:
            fn, grid, block, shared, template, at_call, _ = self.sequence.launches[0]
            slots = {j: i for i, j in at_call}
            self.single = (
                fn,
                grid,
                block,
                shared,
                template,
                slots.get(0),
                slots.get(1),
                slots.get(2),
                slots.get(3),
            )
            self.unresolved = True
            self.run_short = self._run_single

    def _run_single(self, xp, a, values, indices, extents=None) -> dict:
        if self.unresolved:  # the first launch: the kernel's function (and module) now
            self.single = (self.single[0].function(), *self.single[1:])
            self.unresolved = False
        fn, grid, block, shared, template, at_input, at_extents, at_values, at_indices = self.single
        args = template.copy()
        args[at_input], args[at_values], args[at_indices] = a, values, indices
        if at_extents is not None:
            args[at_extents] = extents
        fn(grid, block, tuple(args), shared_mem=shared)
        return _NO_VIEWS

    def run(self, xp, a, values, indices, extents=None) -> dict:
        """The steps for one call: ``a`` the input with its rows' axis last, ``values`` and
        ``indices`` the (rows, k) outputs (None where they are staged in the scratch). Returns
        the scratch views (the staged outputs among them)."""
        nbytes, count = self.schedule.nbytes, self.tickets  # no tickets in a chunked family
        buffer = tickets = None
        if nbytes or count:
            buffer, tickets = _workspace.take(xp, self.target, self.device, nbytes, count)
        if not self.chunks:
            return self.sequence.run(xp, (a, extents, values, indices), buffer, tickets=tickets)
        per_call = (a, extents, values, indices)
        return self.sequence.run(
            xp, per_call, buffer, lambda views: self._run_chunks(xp, per_call, views, buffer)
        )

    def _run_chunks(self, xp, per_call, views, buffer) -> None:
        """A chunked family's resolved sequence per chunk of rows, on views of the input, its
        extents and the outputs (each where the schedule's aliases put it: a per-call array or a
        scratch array such as multiblock's ``idx64``)."""
        call = self.call
        rows, n = call.rows, call.req.n
        base, values, indices, extents = (
            per_call[where] if kind == "call" else views[where] if kind == "scratch" else where
            for kind, where in self._chunk_sources
        )
        segments = call.rows_kind == ROWS_SEGMENTS
        regular = call.rows_kind == ROWS_REGULAR
        if not segments:
            # The rows collapse to one stride (or the input was copied): a 2-D view of the same
            # memory, whose row slices start at the chunk's first row.
            row_stride, col_stride = self.schedule.scalars["row_stride"], self.schedule.scalars["col_stride"]
            itemsize = base.dtype.itemsize
            as_rows = xp.lib.stride_tricks.as_strided(
                base, shape=(rows, n), strides=(row_stride * itemsize, col_stride * itemsize)
            )
        for start, stop, chunk in self.chunks:
            # CSR segments start at their offsets from the data's first element: a chunk of
            # them keeps the base and takes extents[start:stop + 1].
            part = base if segments else as_rows[start:stop]
            part_extents = extents if regular else extents[start : stop + 1 if segments else stop]
            chunk.run(xp, (part, part_extents, values[start:stop], indices[start:stop]), buffer)

    def built(self) -> bool:
        """Whether every kernel the call launches is in a module compiled and loaded already (a
        plan builds none: the call's first launch of a family builds that family's module)."""
        sequences = (self.sequence, *(chunk for _, _, chunk in self.chunks))
        kernels = [launch[0] for seq in sequences for launch in seq.launches]
        if self.single:
            kernels.append(self.single[0])
        return _all_built(kernels)

    def launches(self) -> list:
        """The launches as plan() lists them: every step, a chunked family's per chunk of rows,
        each with its global bytes (the family's formula, in its steps)."""
        cxx, schedule = self.call.info.cxx, self.schedule
        out = _launches_of([*schedule.before, *schedule.family], cxx)
        counts: dict = {}
        for _, _, chunk in schedule.chunks:
            counts[id(chunk)] = counts.get(id(chunk), 0) + 1
        seen = set()
        for _, _, chunk in schedule.chunks:
            if id(chunk) not in seen:
                seen.add(id(chunk))
                out += _launches_of(chunk.family, cxx, counts[id(chunk)])
        return out + _launches_of(schedule.after, cxx)


class _GivenSteps:
    """The schedule of :class:`StepRunner`: steps given whole, their scratch table and the arrays a
    call passes (no input layout, no aliases, no chunks)."""

    def __init__(self, steps: list, table: tuple, per_call: tuple, scalars: dict, key_bytes: int):
        self.family, self.table, self.per_call, self.scalars = steps, list(table), per_call, scalars
        self.shapes: dict = {}
        self.alias: dict = {}
        self.nbytes = _common.scratch_bytes(self.table, key_bytes)


class StepRunner:
    """Steps that no dispatched family gives (merge_top_k's launches: families/merge.py), run as
    a :class:`Runner` runs a family's: resolved once per call signature (each kernel fetched, and
    its module built, at the first launch), the scratch carved from the stream's workspace, the
    per-call arrays those ``per_call`` names; :meth:`launches` and :meth:`built` are plan()'s.

    ``call`` gives what a launch needs of its call (``info``, ``native``, ``module``, ``target``,
    ``device``); ``constants``: values the steps name that are the same for every call."""

    def __init__(self, call, steps: list, table: tuple, per_call: tuple, scalars: dict, constants: dict):
        self.call = call
        self.target, self.device = call.target, call.device
        self.schedule = _GivenSteps(steps, table, per_call, scalars, call.info.itemsize)
        self.sequence = _Sequence(call, self.schedule, constants, steps)

    def run(self, xp, per_call: tuple) -> dict:
        """The steps for one call, on the arrays ``per_call`` (in the order the steps name them)."""
        buffer = None
        if self.schedule.nbytes:
            buffer, _ = _workspace.take(xp, self.target, self.device, self.schedule.nbytes)
        return self.sequence.run(xp, per_call, buffer)

    def built(self) -> bool:
        """Whether every kernel the steps launch is in a module compiled and loaded already."""
        return _all_built([launch[0] for launch in self.sequence.launches])

    def launches(self) -> list:
        """The launches as plan() lists them, each with its global bytes."""
        return _launches_of(self.schedule.family, self.call.info.cxx)


def _all_built(kernels: list) -> bool:
    return all(k.built() if isinstance(k, _Kernel) else True for k in kernels)


def _launches_of(steps: list, cxx: str, count: int = 1) -> list:
    """The :class:`~cutopk._request.plan.Launch` of each step, ``count`` times."""
    return [
        dataclasses.replace(_launch_of(step, cxx), count=count, global_bytes=step.global_bytes * count)
        for step in steps
    ]


_NO_VIEWS: dict = {}
_UNSET = object()


def _generated(ops: list, launches: list, copies: list, views: dict, count: int = len(PER_CALL)):
    """The steps of a sequence as one Python function ``run(xp, per_call, between)`` (``count``
    per-call arrays, ``p0``, ``p1``, ...), generated
    once per carved workspace: a launch is one call with its argument tuple written out (its
    constant runs prebuilt, the per-call arrays slotted in by name), so a call pays no loop, no
    dispatch on the step's kind and no list copy per launch (host time per call is a
    small call's whole cost). Only names made here go into the source; every value is bound in its namespace."""
    namespace: dict = {"views": views}
    lines = ["def run(xp, per_call, between):", f"    {', '.join(f'p{i}' for i in range(count))}, = per_call"]
    for n, (is_launch, index) in enumerate(ops):
        if not is_launch:
            if index is None:  # where a chunked family's chunks of rows run
                lines.append("    between(views)")
                continue
            dst, at_dst, src, at_src = copies[index]
            namespace[f"d{n}"], namespace[f"s{n}"] = dst, src
            dst_name = f"p{at_dst}" if dst is None else f"d{n}"
            src_name = f"p{at_src}" if src is None else f"s{n}"
            lines.append(f'    xp.copyto({dst_name}, {src_name}, casting="unsafe")')
            continue
        fn, grid, block, shared, args, at_call = launches[index]
        namespace.update({f"f{n}": fn, f"g{n}": grid, f"b{n}": block, f"m{n}": shared})
        parts, start = [], 0
        for j, (i, where) in enumerate(sorted(at_call)):
            if i > start:
                namespace[f"t{n}_{j}"] = tuple(args[start:i])
                parts.append(f"*t{n}_{j}")
            parts.append(f"p{where}")
            start = i + 1
        if start < len(args):
            namespace[f"t{n}_end"] = tuple(args[start:])
            parts.append(f"*t{n}_end")
        arguments = f"({', '.join(parts)},)" if parts else "()"
        lines.append(f"    f{n}(g{n}, b{n}, {arguments}, shared_mem=m{n})")
    exec(_code("\n".join(lines)), namespace)
    return namespace["run"]


@functools.lru_cache(maxsize=256)
def _code(source: str):
    """The code object of :func:`_generated`'s source: the text depends only on the sequence's shape (its
    names), so calls of many signatures share it and a first call seldom compiles."""
    return compile(source, "<cutopk launch sequence>", "exec")


def _launch_of(step, cxx: str):
    from .._request.plan import Launch

    if not step.kernel:
        return Launch(f"library: {step.library}", ())
    _, name = _kernel_of(step)
    if "<" not in name and step.templated:
        name = f"{name}<{cxx}>"
    return Launch(name, step.grid, step.block, step.shared_bytes)


__all__ = ["DESCRIPTORS", "PER_CALL", "Runner", "Schedule", "StepRunner", "planned"]
