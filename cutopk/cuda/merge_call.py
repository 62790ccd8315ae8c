"""merge_top_k's call in cutopk's own kernels (kernels/merge.cu): the parts read where they lie,
a block per row, one launch per :data:`~cutopk.cuda.families.merge.PARTS` parts (two up to
``2 * PARTS - 1``), no concatenated copy, no library kernel but the copy of a part that is not
C-contiguous, and no host synchronisation (the call can be captured in a CUDA graph).

:class:`MergeCall` is the GPU backend's call of one merge signature, made only by the core
(``cutopk/_core/call.py`` ``merge_call``): checked and planned once, its launches resolved by
the runner (:class:`cutopk.cuda.runner.StepRunner`, the steps of ``families/merge.py``), so
:meth:`MergeCall.describe` (``cutopk.plan`` of a merge) lists the very launches :meth:`run`
makes and says whether their module is built (a plan builds nothing). For the CUDA backend
(CuPy arrays) and the simulator (NumPy arrays): the same launches. Where the kernel cannot take
the rows (more candidates per row than a block's shared memory holds) :attr:`MergeCall.why_not`
says why and nothing launches: :mod:`cutopk.irregular.merge` then takes the library route.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _interop
from .._request import dtypes as _dtypes
from .._request.plan import Plan, copy_lines
from . import device as _device
from . import launcher as _launcher
from . import runner as _runner
from .families import merge as _family


class MergeCall:
    """The merge of parts of one signature (``widths`` candidates per row in each part, ``batch``
    the shape before the last axis, ``vdt``/``idt`` the values' and indices' dtypes) into ``k``
    winners per row, on ``target`` ("cuda" or "sim") and ``device``: the GPU backend's ``Call``
    of a merge (``run`` takes the list of parts)."""

    def __init__(self, target: str, widths, batch, vdt, idt, k: int, largest: bool, by_index: bool,
                 nan_first: bool, positions: bool, device: int):  # fmt: skip
        self.target, self.device = target, device
        self.widths, self.batch, self.k, self.positions = list(widths), tuple(batch), k, positions
        self.dtype, self.idt = np.dtype(vdt), np.dtype(idt)
        # irregular/merge.py copies byte-swapped parts to native order first; ``native`` is the
        # runner's name for the values' native dtype (a top_k call's may differ from its dtype).
        assert self.dtype.isnative and self.idt.isnative
        self.native = self.dtype
        self.info = _dtypes.check_dtype(self.dtype)
        self.rows = math.prod(self.batch)
        self.result_shape = (*self.batch, k)
        self.xp = _launcher.array_module(target)  # the launcher's: a launch observer gives its own
        limit = _device.device_facts(target, device).shared_bytes
        self.why_not = _family.why_not(self.widths, k, self.info.itemsize, limit)
        self.runner: _runner.StepRunner | None = None
        self.module = None
        if self.why_not is None and k and self.rows:
            self.module = _launcher.kernel_module(target, self.info.cxx, device)
            steps, table = _family.steps(
                self.widths, self.rows, k, self.info.itemsize, self.idt, by_index, positions
            )
            scalars = {"largest": largest, "nan_first": nan_first, "index_bytes": self.idt.itemsize}
            constants = {
                "no_array": None,
                "spare_vals": _launcher.placeholder(target, self.dtype),
                "spare_idx": _launcher.placeholder(target, self.idt),
            }
            per_call = _family.per_call(len(self.widths))
            self.runner = _runner.StepRunner(self, steps, table, per_call, scalars, constants)

    def run(self, pairs):
        """``(values, indices, where)`` of the top ``k`` of the parts ``pairs`` (checked arrays
        of this signature, of the target's kind: CuPy arrays on the current device, or NumPy
        arrays), ``where`` each winner's position along the parts' concatenated last axis (None
        unless the call was made with ``positions``). Only where :attr:`why_not` is None."""
        xp, rows, shape = self.xp, self.rows, self.result_shape
        if self.runner is None:  # nothing to select: k == 0 or no rows
            assert self.why_not is None
            empty = xp.zeros(shape, self.dtype), xp.zeros(shape, self.idt)
            return (*empty, xp.zeros(shape, np.int64) if self.positions else None)
        arrays = []
        for values, indices in pairs:
            arrays += [_rows_of(xp, values, rows, self.dtype), _rows_of(xp, indices, rows, self.idt)]
        out_vals, out_idx = xp.empty((rows, self.k), self.dtype), xp.empty((rows, self.k), self.idt)
        out_pos = xp.empty((rows, self.k), np.int64) if self.positions else None
        self.runner.run(xp, (*arrays, out_vals, out_idx, out_pos))
        where = out_pos.reshape(shape) if out_pos is not None else None
        return out_vals.reshape(shape), out_idx.reshape(shape), where

    def describe(self, cached: bool, arr=None, swapped=None) -> Plan:
        """What :func:`cutopk.plan` reports for a merge of this signature (only where
        :attr:`why_not` is None): the launches, the scratch between them, the copies of parts
        that are not C-contiguous, and whether the kernels' module is built. ``arr``: the parts
        (their layouts say which are copied), or None (every part read in place); ``swapped``:
        the caller's copies to and from native byte order, a line each with its bytes."""
        assert self.why_not is None
        total = sum(self.widths)
        params = {"parts": len(self.widths), "route": "kernels"}
        batch = f"merge of {len(self.widths)} parts"
        if self.runner is None:
            return Plan(
                self.target, "merge", self.rows, total, self.k, (), (), 0, cached, params, batch=batch
            )
        copies = dict(swapped or {})
        read_in_place = (
            [(True, True)] * len(self.widths) if arr is None else [tuple(map(layout, pair)) for pair in arr]
        )
        for p, (width, (values_c, indices_c)) in enumerate(zip(self.widths, read_in_place, strict=True)):
            if not values_c:
                copies[f"parts[{p}].values: copied to C order"] = self.rows * width * self.dtype.itemsize
            if not indices_c:
                copies[f"parts[{p}].indices: copied to C order"] = self.rows * width * self.idt.itemsize
        launches = tuple(self.runner.launches())
        scratch = self.runner.schedule.nbytes + sum(copies.values())
        return Plan(
            self.target, "merge", self.rows, total, self.k, launches, copy_lines(copies), scratch, cached, params,
            batch=batch, built=self.runner.built(),
        )  # fmt: skip


def layout(a) -> bool:
    """Whether a part's array is read in place (C-contiguous and aligned): its copy otherwise."""
    if isinstance(a, np.ndarray):
        return a.flags.c_contiguous and a.flags.aligned
    return a.flags.c_contiguous and not _interop.misaligned(a)


def _rows_of(xp, a, rows: int, dtype):
    """``a`` as C-contiguous (rows, width) of ``dtype``: a view where it is one (a part as top_k
    gives it), else a copy."""
    if isinstance(a, np.ndarray):  # the simulator's arrays
        a = (
            a
            if a.dtype == dtype and a.flags.c_contiguous and a.flags.aligned
            else np.array(a, dtype, order="C")
        )
        return a.reshape(rows, a.shape[-1])
    if _interop.misaligned(a):  # a view some bytes into its buffer: CuPy's own copy would fault
        a = _interop.aligned_copy(a)
    if not a.flags.c_contiguous:
        a = xp.ascontiguousarray(a)
    return a.reshape(rows, a.shape[-1])
