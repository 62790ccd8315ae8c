"""One call of :func:`cutopk.top_k` without autograd: the prepared call (checks and plan, cached:
:mod:`cutopk._core.call`) run on its backend, with ``lengths`` and ``out`` when given."""

from __future__ import annotations

import contextlib

import numpy as np

from . import call as _call
from . import lengths as lengths_
from . import out as _out
from .result import TopK


def select(
    a, k, axis=-1, mode="largest", sorted=True, nan="last", index_dtype=np.int64, backend="auto",
    algorithm="auto", lengths=None, out=None,
) -> TopK:  # fmt: skip
    """:func:`cutopk.top_k` on an input autograd does not record (its arguments and defaults)."""
    arr, back, scope, call, _ = _call.prepare(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm)
    if lengths is not None:
        return _run_with_lengths(arr, back, scope, call, lengths, out)
    if scope is None:
        return _run(arr, back, call, out)
    with scope:
        return _run(arr, back, call, out)


def _run_with_lengths(arr, back, scope, call, lengths, out) -> TopK:
    """``lengths`` read by the kernels (CUDA and simulator backends), else the generic route of
    the NumPy backend (see :mod:`cutopk._core.lengths`): masked rows, one top_k, padding."""
    with scope if scope is not None else contextlib.nullcontext():
        lens, longest = lengths_.check(lengths, arr, call.req)
        dst = _out.check(out, call, arr) if out is not None else None
        arr, call = lengths_.narrowed(arr, call, longest)
        req = call.req
        kernel_call = _call.lengths_call(arr, call)
        if kernel_call is not None:
            values, indices = kernel_call.run(arr, dst, extents=lens)
            if dst is not None:
                return TopK(*out)  # the caller's own arrays (torch tensors stay tensors)
            return _as_callers(values, indices, back)
        masked = lengths_.masked_rows(arr, lens, req)
        inner = select(
            masked, req.k, -1, "largest" if req.largest else "smallest",
            "index" if req.order != "value" else True, "largest" if req.nan_largest else "last",
            req.index_dtype, req.backend, req.algorithm,
        )  # fmt: skip
        values, indices = lengths_.pad(*inner, lens, req, arr.dtype, dst)
    if dst is not None:
        return TopK(*out)
    return _as_callers(values, indices, back)


def _run(arr, back, call, out) -> TopK:
    if out is not None:
        call.run(arr, _out.check(out, call, arr))
        return TopK(*out)
    values, indices = call.run(arr)
    return _as_callers(values, indices, back)


def _as_callers(values, indices, back) -> TopK:
    """The results as the caller's array type (``back``: None when they already are)."""
    if back is None:
        return TopK(values, indices)
    return TopK(back(values), back(indices))
