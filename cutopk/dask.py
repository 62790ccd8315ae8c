"""Top-K of Dask arrays (NumPy- or CuPy-backed chunks) on Dask's own tree reduction.

:func:`top_k` is :func:`cutopk.top_k` for a Dask array. It is a ``dask.array.reduction`` along
the axis with three steps (with CuPy chunks every step runs on the GPU of the worker that holds
the chunk, in cutopk's CUDA kernels):

- *chunk*: each block, tagged with the global indices of its elements along the axis, gives its
  top ``min(k, block length)`` candidates (a :func:`cutopk.top_k` call), with global indices;
- *combine*: a group of at most ``split_every`` candidate sets is cut back to its top ``k`` by
  :func:`cutopk.merge_top_k`, the package's one exact merge;
- *aggregate*: the last :func:`cutopk.merge_top_k` gives the final K, ordered as ``sorted`` asks.

Every block of the reduction is a ``(values, global_indices)`` pair of arrays of the chunk's type
(the same device as the data), in a Dask array of dtype object; ``dask.array.argtopk`` carries its
intermediates in the same way. Dask's own ``topk``/``argtopk`` are not used: they break ties
arbitrarily and know nothing of NaN policies.

Why ties across chunks go to the lower global index
----------------------------------------------------
Write ``x < y`` ("x is preferred to y") for: x's value is preferred under ``mode``/``nan``, or the
values tie (equal, ``-0.0 == +0.0``, any two NaNs) and x's global index is lower. This is a strict
total order, and the answer of ``cutopk.top_k`` on the whole array is the set T of its first K
elements (then ordered). Two facts give the proof:

1. *Nothing of T is lost in a merge.* Let a set S of elements be split into parts S_1, ..., S_m.
   An element t of the first K of S has fewer than K elements of S before it, so fewer than K of
   its own part: t is among the first ``min(k, |S_j|)`` of its part. Hence the first K of the
   union of the parts' candidates are the first K of S (the union contains them, and it is a
   subset of S).
2. *Every step decides by the order above.* A chunk's ``top_k`` call sees one block, whose
   positions are in global index order, so its tie-break by position is the tie-break by global
   index. :func:`cutopk.merge_top_k` breaks ties by the (global) indices it is given, whatever
   the order of its parts, so the way Dask groups and orders the blocks does not matter.

By induction over the levels of the tree every set holds the first ``min(k, size)`` elements of
the blocks it covers; the last one holds T, ordered as :func:`cutopk.top_k` orders it.

With ``lengths`` (row r takes part with its first ``lengths[r]`` elements), the lengths travel
with the blocks: a Dask array of the batch shape, chunked like ``a`` off the axis, one chunk
along it. A block covering global positions ``[c0, c0 + w)`` of the axis selects with the local
lengths ``clip(lengths - c0, 0, w)`` (its part of each row's prefix); its padding (index -1)
stays padding in the merges, which never let it win. So each row's result is the top k of its
prefix, ending in padding where the prefix is shorter than k, as :func:`cutopk.top_k` gives it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ._core import lengths as _lengths
from ._core.entry import check_algorithm_name
from ._core.entry import top_k as _top_k
from ._core.result import Array, DType, Integer, TopK
from ._interop import array_module
from ._request import checks as _checks
from .irregular.entry import merge_top_k as _merge_top_k

__all__ = ["top_k", "top_k_indices"]

# The final order for each normalised ``sorted``.
_FINAL_ORDER = {"value": "value", "index": "index", "none": False}


def _tag(block: Array, index: Array) -> tuple[Array, Array]:
    """A block and the global indices of its elements along the axis (shape 1 off the axis)."""
    return block, array_module(block).asarray(index)


def _pairs(parts: tuple | list) -> list:
    """The ``(values, indices)`` pairs of a (nested) list of blocks, in block order."""
    if isinstance(parts, tuple):
        return [parts]
    return [pair for part in parts for pair in _pairs(part)]


def _tag_with_lengths(block: Array, index: Array, lengths: Array, *, ax: int, n: int) -> tuple:
    """:func:`_tag`, and each row's length inside the block: ``clip(lengths - c0, 0, w)``, the
    block covering ``[c0, c0 + w)`` of the axis (``c0`` read from the host's tag), squeezed to
    the block's batch shape. A length outside ``[0, n]``: top_k's ValueError for lengths on the
    host; on the device -1, which the kernels give back as a row of padding (as top_k does with
    such a length)."""
    xp = array_module(lengths)
    lengths = lengths.squeeze(axis=ax).astype(np.int64)
    if xp is np and lengths.size:
        _lengths.from_sequence([int(lengths.min()), int(lengths.max())], n, ax)
    width = block.shape[ax]
    first = int(np.asarray(index).reshape(-1)[0]) if width else 0
    shifted = lengths - first  # clipped to [0, width] by where(): the operations CuPy's stand-in has
    local = xp.where(shifted < 0, 0, xp.where(shifted > width, width, shifted))
    return block, array_module(block).asarray(index), xp.where((lengths >= 0) & (lengths <= n), local, -1)


def _chunk(tagged: tuple, axis: tuple[int], keepdims: bool, *, k: int, options: dict) -> tuple[Array, Array]:
    """A block's top ``min(k, length)`` candidates along the axis, with global indices (-1 for
    padding: a block's row shorter than k with ``lengths``)."""
    (ax,) = axis
    block, index = tagged[0], tagged[1]
    xp = array_module(block)
    kk = min(k, block.shape[ax])
    # The tag has length 1 off the axis: broadcast it to the block, then pick the winners'.
    index = xp.broadcast_to(index, block.shape)
    if len(tagged) == 2:
        top = _top_k(block, kk, axis=ax, sorted=False, **options)
        return top.values, xp.take_along_axis(index, top.indices, axis=ax)
    top = _top_k(block, kk, axis=ax, sorted=False, lengths=tagged[2], **options)
    real = top.indices >= 0
    found = xp.take_along_axis(index, xp.where(real, top.indices, 0), axis=ax)
    return top.values, xp.where(real, found, xp.full((), -1, dtype=np.int64))


def _merge(
    parts: tuple | list, axis: tuple[int], keepdims: bool, *, k: int, order: str | bool, mode: str, nan: str
) -> tuple[Array, Array]:
    """The first ``min(k, size)`` of the union of candidate sets, by :func:`cutopk.merge_top_k`
    (which works along the last axis)."""
    (ax,) = axis
    pairs = _pairs(parts)
    xp = array_module(pairs[0][0])
    total = sum(values.shape[ax] for values, _ in pairs)
    last = [(xp.moveaxis(values, ax, -1), xp.moveaxis(index, ax, -1)) for values, index in pairs]
    top = _merge_top_k(last, min(k, total), mode=mode, sorted=order, nan=nan)
    return xp.moveaxis(top.values, -1, ax), xp.moveaxis(top.indices, -1, ax)


def _field(pair: tuple[Array, Array], i: int, dtype: DType) -> Array:
    """One array of a final ``(values, indices)`` pair, C-contiguous, indices cast to
    ``index_dtype``."""
    return array_module(pair[i]).ascontiguousarray(pair[i].astype(dtype, copy=False))


def _check(
    a: Array,
    k: Integer,
    axis: int,
    mode: str,
    sorted_: bool | str,
    nan: str,
    index_dtype: DType,
    backend: str,
    algorithm: str,
) -> _checks.Request:
    """The checks of :func:`cutopk._request.checks.normalize`, in the same order and with the same
    messages, for a Dask array (whose chunk type is its ``_meta``)."""
    try:
        import dask.array as da
    except ImportError as exc:
        raise ImportError(f"cutopk.dask needs dask[array]: {exc}") from None
    if not isinstance(a, da.Array):
        raise TypeError(
            f"a: expected a dask.array.Array, got {type(a).__module__}.{type(a).__qualname__}; "
            "use cutopk.top_k for NumPy and CuPy arrays"
        )
    if isinstance(a._meta, np.ma.MaskedArray):
        # Selecting among masked-out elements would be a silent wrong answer; the chunk type
        # says so before anything is computed.
        raise TypeError(
            "a: expected a Dask array without a mask, got one with numpy.ma.MaskedArray chunks "
            "(its _meta); pass dask.array.ma.filled(a, value) instead"
        )
    req = _checks.normalize(
        a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm, kind=_checks.array_kind(a._meta)
    )
    check_algorithm_name(algorithm, req.backend)
    return req


def _check_split_every(split_every: object, ndim: int) -> int | dict[int, int] | None:
    """``split_every`` as Dask takes it: None, an integer >= 2, or a dict of axes to integers >= 2
    (a merge of one candidate set at a time never finishes a tree reduction)."""
    expected = "None, an integer >= 2 or a dict {axis: integer >= 2}"
    if split_every is None:
        return None
    if isinstance(split_every, dict):
        checked: dict[int, int] = {}
        for axis, value in split_every.items():
            if (
                isinstance(axis, (bool, np.bool_))
                or not isinstance(axis, (int, np.integer))
                or not -ndim <= axis < ndim
            ):
                raise ValueError(
                    f"split_every: expected {expected}, with axes in [{-ndim}, {ndim}), got key {axis!r} in {split_every!r}"
                )
            checked[int(axis) % ndim] = _split_count(value, expected, split_every)
        return checked
    return _split_count(split_every, expected, split_every)


def _split_count(value: object, expected: str, given: object) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 2:
        raise ValueError(f"split_every: expected {expected}, got {given!r}")
    return int(value)


def _check_lengths(a: Array, req: _checks.Request, lengths: object) -> Array | None:
    """``lengths`` as a Dask array of ``a``'s shape with the axis of length 1, chunked like ``a``
    off the axis; top_k's checks and messages, at once: lengths on the host (NumPy, a list or
    tuple of ints) are checked in full, a Dask array by its dtype and shape (its values when its
    chunks are computed, as top_k checks lengths of that kind)."""
    import dask.array as da

    if lengths is None:
        return None
    ax = req.axis
    batch = tuple(s for i, s in enumerate(a.shape) if i != ax)
    if any(np.isnan(s) for s in batch):
        raise ValueError(
            f"lengths: expected the batch shape of a to be known, got {batch} (unknown chunk sizes); "
            "call a.compute_chunk_sizes() first"
        )
    # A stand-in of a's shape and no memory: the lengths checked by top_k's own checks.
    shaped = np.broadcast_to(np.zeros((), np.int8), a.shape)
    if isinstance(lengths, da.Array):
        _lengths.check(np.zeros(batch, np.int64), shaped, req)  # index_dtype
        if np.dtype(lengths.dtype).kind not in "iu":
            raise TypeError(f"lengths: expected an integer array, got dtype {lengths.dtype}")
        if tuple(lengths.shape) != batch:
            raise ValueError(
                f"lengths: expected shape {batch} (the input's shape without axis {ax}), got {tuple(lengths.shape)}"
            )
        checked = lengths
    else:
        checked = da.from_array(_lengths.check(lengths, shaped, req)[0], chunks=-1)
    expanded = da.expand_dims(checked, ax)
    return expanded.rechunk(tuple((1,) if i == ax else c for i, c in enumerate(a.chunks)))


def _reduce(
    a: Array,
    req: _checks.Request,
    options: dict,
    algorithm: str,
    split_every: int | dict[int, int] | None,
    lengths: Array | None = None,
) -> Array:
    """The Dask array of final ``(values, global int64 indices)`` pairs, one per block off the axis."""
    import dask.array as da
    from dask.array.reductions import reduction

    ax = req.axis
    index = da.arange(req.n, chunks=(a.chunks[ax],), dtype=np.int64)
    index = index[tuple(slice(None) if i == ax else None for i in range(a.ndim))]
    obj_meta = np.empty((0,) * a.ndim, dtype=object)
    if lengths is None:
        tagged = da.map_blocks(_tag, a, index, dtype=object, meta=obj_meta, token="cutopk-tag")
    else:
        tag = functools.partial(_tag_with_lengths, ax=ax, n=req.n)
        tagged = da.map_blocks(
            tag, a, index, lengths, dtype=object, meta=obj_meta, token="cutopk-tag-lengths"
        )
    merge = functools.partial(_merge, k=req.k, mode=options["mode"], nan=options["nan"])
    return reduction(
        tagged,
        # Only each chunk's own call gets the backend and a forced algorithm: the merges are
        # merge_top_k calls on small candidate sets, on the chunks' array type.
        chunk=functools.partial(_chunk, k=req.k, options={**options, "algorithm": algorithm}),
        combine=functools.partial(merge, order=False),
        aggregate=functools.partial(merge, order=_FINAL_ORDER[req.order]),
        axis=ax,
        keepdims=True,
        dtype=object,
        split_every=split_every,
        concatenate=False,  # blocks are (values, indices) pairs, concatenated by _merge itself
        output_size=req.k,
        meta=obj_meta,
        name="cutopk-top_k",
    )


def top_k(
    a: Array,
    k: Integer,
    /,
    *,
    axis: int = -1,
    mode: str = "largest",
    sorted: bool | str = True,
    nan: str = "last",
    index_dtype: DType = np.int64,
    backend: str = "auto",
    algorithm: str = "auto",
    lengths: Array | None = None,
    split_every: int | dict[int, int] | None = None,
) -> TopK:
    """:func:`cutopk.top_k` for a Dask array: ``TopK(values, indices)`` as lazy Dask arrays.

    Same arguments, semantics and errors as :func:`cutopk.top_k` (ties, including ties between
    elements in different chunks, go to the lower global index), except ``out``, which a lazy
    result has no use for. Arguments are checked at once, before any graph is built.

    Parameters
    ----------
    a : dask.array.Array
        NumPy- or CuPy-backed chunks, any chunking (the axis may be split into uneven chunks,
        shorter than ``k`` too).
    k, axis, mode, sorted, nan, index_dtype
        As in :func:`cutopk.top_k`; ``0 <= k <= a.shape[axis]``.
    backend : {"auto", "numpy", "cuda", "sim"}
        The backend of every chunk's :func:`cutopk.top_k` call; ``"auto"`` follows the chunk type.
    algorithm : str
        Forced on each chunk's own call only; the merges of candidate sets use ``"auto"``. An
        unknown name is an error at once; a forced algorithm that cannot handle a chunk raises
        its ``ValueError`` when that chunk is computed.
    lengths : integer array or sequence, optional
        As in :func:`cutopk.top_k`: of the shape of ``a`` without ``axis``, row r takes part with
        its first ``lengths[r]`` elements (padding, index -1 and value 0, past them; a signed
        ``index_dtype``). A NumPy array or a list/tuple of ints is checked at once (ValueError out
        of range); a Dask array (rechunked like ``a`` off the axis) is checked as its chunks are
        computed: NumPy chunks raise top_k's ValueError, CuPy chunks give a row out of range as
        all padding, as top_k does with lengths on the device.
    split_every : int or dict, optional
        How many candidate sets one merge takes (Dask's tree reduction; default from Dask's
        ``split_every`` config, 4): an integer >= 2, or a dict ``{axis: integer >= 2}``.

    Returns
    -------
    TopK
        ``values`` (dtype of ``a``, same chunk type) and ``indices`` (``index_dtype``, along the
        axis of the whole array), of shape ``a.shape`` with ``axis`` replaced by ``k``, in one
        chunk along the axis and chunked like ``a`` along the other axes. Compute both in one
        pass with ``dask.compute(*result)``.

    Examples
    --------
    >>> import dask, dask.array as da, numpy as np
    >>> import cutopk.dask
    >>> x = da.from_array(np.array([5, 1, 7, 5, 0, 7, 5]), chunks=3)
    >>> values, indices = dask.compute(*cutopk.dask.top_k(x, 4), scheduler="sync")
    >>> values.tolist(), indices.tolist()
    ([7, 7, 5, 5], [2, 5, 0, 3])
    """
    req = _check(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm)
    checked = _check_lengths(a, req, lengths)
    split_every = _check_split_every(split_every, a.ndim)
    options = {"mode": mode, "nan": nan, "backend": backend}
    pairs = _reduce(a, req, options, algorithm, split_every, checked)
    # Explicit metas: Dask cannot infer them from the object-dtype pairs, and CuPy chunks must
    # give CuPy-typed results.
    values = pairs.map_blocks(
        _field, 0, a.dtype, dtype=a.dtype, meta=a._meta.astype(a.dtype), token="cutopk-top_k-values"
    )
    index_meta = a._meta.astype(req.index_dtype)
    indices = pairs.map_blocks(
        _field, 1, req.index_dtype, dtype=req.index_dtype, meta=index_meta, token="cutopk-top_k-indices"
    )
    return TopK(values, indices)


def top_k_indices(
    a: Array,
    k: Integer,
    /,
    *,
    axis: int = -1,
    mode: str = "largest",
    sorted: bool | str = True,
    nan: str = "last",
    index_dtype: DType = np.int64,
    backend: str = "auto",
    algorithm: str = "auto",
    lengths: Array | None = None,
    split_every: int | dict[int, int] | None = None,
) -> Any:
    """Only the ``indices`` of :func:`top_k`: an ``argtopk`` with cutopk's exact semantics.

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> import cutopk.dask
    >>> x = da.from_array(np.array([[3.0, np.nan, 3.0, 1.0]]), chunks=(1, 2))
    >>> cutopk.dask.top_k_indices(x, 2, mode="smallest").compute(scheduler="sync").tolist()
    [[3, 0]]
    """
    return top_k(
        a,
        k,
        axis=axis,
        mode=mode,
        sorted=sorted,
        nan=nan,
        index_dtype=index_dtype,
        backend=backend,
        algorithm=algorithm,
        lengths=lengths,
        split_every=split_every,
    ).indices
