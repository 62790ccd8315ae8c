"""Top-K of Dask arrays (NumPy- or CuPy-backed chunks) on Dask's own reduction machinery.

Each chunk's candidates come from :func:`cutopk.top_k` (so on a GPU the chunk's work runs in our
kernels), tagged with their global indices; Dask's tree reduction then merges candidate sets
(``combine``) and orders the final K (``aggregate``). The semantics are exactly those of
``cutopk.top_k``, including ties that fall in different chunks:

*Why the lower global index wins across chunks.* Every candidate set is kept in ascending global
index order: a chunk's candidates are selected with ``sorted="index"``, and Dask hands the sets of
consecutive chunks along the axis to ``combine`` in block order, so their concatenation is again in
ascending global index order. ``cutopk.top_k`` breaks ties by position, and position order is
global index order, so each merge keeps exactly the candidates the whole-array call would keep
(selecting K from a union of sets that each hold their part's top K loses nothing: an element of
the overall top K is in the top K of its own part). The final ``aggregate`` orders the K winners
as ``sorted`` asks, ties again by position, that is by global index.
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from . import TopK, _api
from . import top_k as _top_k


def _xp(arr):
    return sys.modules[type(arr).__module__.split(".")[0]] if not isinstance(arr, np.ndarray) else np


def _tag(block, index):
    """A chunk and the global indices of its elements along the axis (broadcast)."""
    xp = _xp(block)
    return block, xp.asarray(index)


def _flatten(parts):
    if isinstance(parts, tuple):
        return [parts]
    return [p for part in parts for p in _flatten(part)]


def _select(parts, axis, keepdims, k, semantics, order="index"):
    """Top ``k`` (at most what is there) of the concatenated candidate sets, in index order."""
    pairs = _flatten(parts)
    ax = axis[0] if isinstance(axis, tuple) else axis
    values = pairs[0][0] if len(pairs) == 1 else _xp(pairs[0][0]).concatenate([p[0] for p in pairs], axis=ax)
    index = pairs[0][1] if len(pairs) == 1 else _xp(pairs[0][1]).concatenate([p[1] for p in pairs], axis=ax)
    xp = _xp(values)
    index = xp.broadcast_to(index, values.shape) if index.shape != values.shape else index
    take = min(k, values.shape[ax])
    chosen = _top_k(values, take, axis=ax, sorted=order, **semantics)
    return chosen.values, xp.take_along_axis(index, chosen.indices, axis=ax)


def _aggregate(parts, axis, keepdims, k, semantics, order):
    return _select(parts, axis, keepdims, k, semantics, order)


def _field(pair, i, dtype):
    return pair[i].astype(dtype, copy=False)


def top_k(a, k, axis: int = -1, mode: str = "largest", sorted=True, nan: str = "last",
          index_dtype=np.int64, split_every=None) -> TopK:  # fmt: skip
    """:func:`cutopk.top_k` for a Dask array: ``TopK(values, indices)`` as Dask arrays.

    Indices refer to the whole array. ``split_every`` is passed to Dask's tree reduction.
    Arguments are checked at once, before any graph is built.

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> from cutopk import dask as cdask
    >>> x = da.from_array(np.array([5, 1, 5, 7, 5, 0]), chunks=2)
    >>> r = cdask.top_k(x, 3)
    >>> r.values.compute().tolist(), r.indices.compute().tolist()
    ([7, 5, 5], [3, 0, 2])
    """
    import dask.array as da
    from dask.array.reductions import reduction

    _api.check_choice("mode", mode, _api.MODES)
    order = _api.check_order(sorted)
    _api.check_choice("nan", nan, _api.NAN_POLICIES)
    from . import _dtypes

    _dtypes.check_dtype(a.dtype)
    ax = _api.check_axis(axis, a.ndim)
    n = int(a.shape[ax])
    kk = _api.check_k(k, n, ax)
    idx_dtype = _api.check_index_dtype(index_dtype, n)
    semantics = {"mode": mode, "nan": nan}
    index = da.arange(n, chunks=(a.chunks[ax],), dtype=np.int64)
    index = index[tuple(slice(None) if i == ax else None for i in range(a.ndim))]
    tagged = da.map_blocks(_tag, a, index, dtype=object, meta=np.empty((0,) * a.ndim, dtype=object))
    select = functools.partial(_select, k=kk, semantics=semantics)
    final_order = {"value": True, "index": "index", "none": "index"}[order]
    pairs = reduction(
        tagged,
        chunk=select,
        combine=select,
        aggregate=functools.partial(_aggregate, k=kk, semantics=semantics, order=final_order),
        axis=ax,
        keepdims=True,
        dtype=object,
        split_every=split_every,
        concatenate=False,
        output_size=kk,
        meta=np.empty((0,) * a.ndim, dtype=object),
    )
    meta_v = a._meta if hasattr(a, "_meta") else np.empty((0,) * a.ndim, dtype=a.dtype)
    values = pairs.map_blocks(_field, 0, a.dtype, dtype=a.dtype, meta=meta_v)
    indices = pairs.map_blocks(_field, 1, idx_dtype, dtype=idx_dtype)
    return TopK(values, indices)


def top_k_indices(a, k, axis: int = -1, mode: str = "largest", sorted=True, nan: str = "last",
                  index_dtype=np.int64, split_every=None):  # fmt: skip
    """Only the indices of :func:`top_k` (an ``argtopk`` with cutopk's exact semantics)."""
    return top_k(a, k, axis, mode, sorted, nan, index_dtype, split_every).indices
