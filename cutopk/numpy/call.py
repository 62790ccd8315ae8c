"""The NumPy backend's prepared call: one checked request on arrays of one shape, strides and
dtype (the ``Call`` of :mod:`cutopk._core.call`). Its work is all per call: the route is chosen
from the data's shape and strides by :func:`cutopk.numpy.backend.runner`, once."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._request import checks as _checks
from .._request import layout as _layout
from .._request.plan import Plan, copy_lines
from . import backend as _backend
from . import compiled as _compiled
from . import short_rows as _short_rows


class NumpyCall:
    """A checked request on the NumPy backend (the ``Call`` protocol of :mod:`cutopk._core.call`)."""

    device = -1  # the CPU: the core's cache keys name a device

    def __init__(self, shape, strides, dtype, req: _checks.Request):
        _checks.check_algorithm(req.algorithm, "numpy", _backend.ALGORITHMS)
        self.req = req
        self.shape, self.strides, self.dtype = tuple(shape), tuple(strides), np.dtype(dtype)
        # run(a) without out=: what a warm call of cutopk.top_k runs, with no frame of this class.
        self.plain = _backend.runner(self.shape, self.strides, self.dtype, req)
        self.result_shape = tuple(req.k if i == req.axis else s for i, s in enumerate(self.shape))

    def run(self, a, out=None, extents=None):
        """``(values, indices)`` of ``a``, written into ``out`` when given (already checked to
        fit). No ``extents``: rows of their own lengths take the core's generic route here."""
        if extents is not None:
            raise ValueError("extents: the NumPy backend has no kernels that read row extents")
        if out is None:
            return self.plain(a)
        values, indices = self.plain(a)
        np.copyto(out[0], values)
        np.copyto(out[1], indices)
        return out

    def describe(self, cached: bool, arr) -> Plan:
        """The NumPy backend's route for ``arr`` (read from its shape and strides only: the data is
        never touched, and an input that needs a copy is described by a C-contiguous stand-in)."""
        req, itemsize = self.req, self.dtype.itemsize
        rows = math.prod(s for i, s in enumerate(self.shape) if i != req.axis)
        in_place = _layout.row_strides(self.shape, self.strides, itemsize, req.axis) is not None
        with _compiled.planning():  # a plan never loads the compiled route's library
            if in_place:
                info = _backend.describe(arr, req)
            else:  # the copy the backend makes is C-contiguous rows: describe one over a single element
                stand_in = np.lib.stride_tricks.as_strided(
                    np.zeros(1, self.dtype), (rows, req.n), (req.n * itemsize, itemsize), writeable=False
                )
                info = _backend.describe(stand_in, dataclasses.replace(req, axis=1))
        copies = {}
        if rows and req.k:
            if not in_place:
                copies["input: rows copied to row-major (no 2-D view of them)"] = rows * req.n * itemsize
            elif info["block_copies"]:
                copies["blocks of rows copied one at a time, in cache (strided or byte-swapped rows)"] = 0
            if req.axis != len(self.shape) - 1:
                copies[f"outputs: moved to axis {req.axis}"] = (
                    rows * req.k * (itemsize + req.index_dtype.itemsize)
                )
        small = _short_rows.runner_route(self.shape, self.strides, self.dtype, req)
        if small is not None:  # what self.plain runs, never the backend's routes: the compiled one neither
            why = f"1: a small problem ({rows * req.n} elements), one function made for its shape"
            if small == "small-composite" or (req.nan_first and self.dtype.kind == "f"):
                why += " (a row with a NaN goes the general way)"
            params = {"route": small, "threads": 1, "threads_why": why}
        else:
            params = {"route": info["route"], "threads": info["threads"], "threads_why": info["threads_why"]}
            if info["compiled"] is not None:  # why the compiled route cannot run here
                params["compiled_unavailable"] = info["compiled"]
            else:  # the library loaded (and its variant for this processor), or where it is
                params.update(_compiled.status())
        return Plan(
            "numpy",
            "select",
            rows,
            req.n,
            req.k,
            (),
            copy_lines(copies),
            sum(copies.values()),
            cached,
            params,
        )
