"""The one test reference: a simple, stable top-K built on NumPy's stable sort, and the checker.

It deliberately shares no code with cutopk (no key transform): floats are compared as float64
(exact for every float dtype), integers in their own dtype, and the lower-index tie rule comes
from the stability of ``np.argsort(kind="stable")``.
"""

from __future__ import annotations

import numpy as np


def _row_order(row: np.ndarray, largest: bool, nan_largest: bool) -> np.ndarray:
    """Indices of ``row`` in preference order, ties by ascending index."""
    n = row.size
    if row.dtype.kind == "f" or row.dtype.name == "bfloat16":
        row = row.astype(np.float64)
        nan = np.isnan(row)
    else:
        nan = np.zeros(n, dtype=bool)
    numbers = np.flatnonzero(~nan)
    nans = np.flatnonzero(nan)
    vals = row[numbers]
    if largest:
        # Stable sort of the reversed row, reversed back: descending, ties by ascending index.
        order = numbers[::-1][np.argsort(vals[::-1], kind="stable")][::-1]
    else:
        order = numbers[np.argsort(vals, kind="stable")]
    nan_first = nan_largest and largest
    return np.concatenate([nans, order] if nan_first else [order, nans]).astype(np.int64)


def reference_top_k(a, k, axis=-1, mode="largest", sorted=True, nan="last"):
    """Top-K of NumPy array ``a`` by the definition in docs/SPEC.md; returns (values, indices)."""
    a = np.asarray(a)
    moved = np.moveaxis(a, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    idx = np.zeros((rows.shape[0], k), dtype=np.int64)
    for r in range(rows.shape[0]):
        chosen = _row_order(rows[r], mode == "largest", nan == "largest")[:k]
        idx[r] = np.sort(chosen) if sorted in ("index", False) else chosen
    vals = np.take_along_axis(rows, idx, axis=1)
    shape = (*moved.shape[:-1], k)
    return (
        np.moveaxis(vals.reshape(shape), -1, axis),
        np.moveaxis(idx.reshape(shape), -1, axis),
    )


def bits(x: np.ndarray) -> np.ndarray:
    """The raw bit patterns of ``x`` (so -0.0 differs from +0.0 and NaN payloads count)."""
    x = np.ascontiguousarray(x)
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.itemsize in (1, 2, 4, 8) else x


def assert_same(result, expected, *, index_dtype=np.int64, order=True, axis=-1) -> None:
    """Check a cutopk result against the reference: values bit for bit, indices exactly.

    For ``sorted=False`` the order is free, so both sides are compared after sorting by index
    along ``axis`` (the axis that holds the K results).
    """
    values, indices = result
    exp_values, exp_indices = expected
    assert values.dtype == exp_values.dtype, (values.dtype, exp_values.dtype)
    assert indices.dtype == np.dtype(index_dtype), (indices.dtype, index_dtype)
    assert values.shape == exp_values.shape, (values.shape, exp_values.shape)
    assert indices.shape == exp_values.shape
    assert values.flags.c_contiguous and indices.flags.c_contiguous
    indices = indices.astype(np.int64)
    if order is False and values.size:
        perm = np.argsort(indices, axis=axis, kind="stable")
        indices = np.take_along_axis(indices, perm, axis=axis)
        values = np.take_along_axis(values, perm, axis=axis)
        eperm = np.argsort(exp_indices, axis=axis, kind="stable")
        exp_indices = np.take_along_axis(exp_indices, eperm, axis=axis)
        exp_values = np.take_along_axis(exp_values, eperm, axis=axis)
    np.testing.assert_array_equal(indices, exp_indices)
    np.testing.assert_array_equal(bits(values), bits(exp_values))


def check_top_k(x, k, *, axis=-1, mode="largest", sorted=True, nan="last", index_dtype=np.int64, **kw):
    """Run ``cutopk.top_k`` (``kw``: backend, algorithm) on NumPy array ``x`` and compare it with
    the reference, bit for bit. Returns the result for further checks."""
    import cutopk

    result = cutopk.top_k(x, k, axis=axis, mode=mode, sorted=sorted, nan=nan, index_dtype=index_dtype, **kw)
    expected = reference_top_k(x, k, axis=axis, mode=mode, sorted=sorted, nan=nan)
    assert_same(result, expected, index_dtype=index_dtype, order=sorted, axis=axis)
    return result


def reference_with_lengths(rows: np.ndarray, k: int, lengths, *, mode="largest", sorted=True, nan="last"):
    """``(values, indices)`` of 2-D ``rows`` where row r takes part with its first ``lengths[r]``
    elements: the reference on that prefix, then padding (index -1, value 0) up to ``k``."""
    values = np.zeros((rows.shape[0], k), rows.dtype)
    indices = np.full((rows.shape[0], k), -1, np.int64)
    for r, length in enumerate(np.asarray(lengths).tolist()):
        kk = min(k, int(length))
        if kk:
            v, i = reference_top_k(rows[r, :length], kk, mode=mode, sorted=sorted, nan=nan)
            values[r, :kk], indices[r, :kk] = v, i
    return values, indices


def reference_segments(data: np.ndarray, offsets, k: int, **kw):
    """``(values, indices)`` of the CSR segments ``data[offsets[s]:offsets[s+1]]`` of a 1-D array,
    as :func:`reference_with_lengths` gives them for the segments laid out as padded rows."""
    offsets = np.asarray(offsets)
    lengths = np.diff(offsets)
    rows = np.zeros((lengths.size, int(lengths.max())), data.dtype)
    for r, (start, length) in enumerate(zip(offsets[:-1].tolist(), lengths.tolist(), strict=True)):
        rows[r, :length] = data[start : start + length]
    return reference_with_lengths(rows, k, lengths, **kw)


def assert_same_padded(result, expected, *, index_dtype=np.int64, order=True) -> None:
    """:func:`assert_same` for 2-D results that may end in padding: the padding must be the last
    positions of each row in every order; for ``sorted=False`` the real entries are compared by
    index (their order is free)."""
    values, indices = (np.asarray(x) for x in result)
    exp_values, exp_indices = expected
    assert indices.dtype == np.dtype(index_dtype), (indices.dtype, index_dtype)
    assert values.dtype == exp_values.dtype, (values.dtype, exp_values.dtype)
    indices = indices.astype(np.int64)
    np.testing.assert_array_equal(indices < 0, exp_indices < 0)  # padding where, and only where, due
    if order is False:
        big = np.iinfo(np.int64).max  # padding stays last when ordered by index
        perm = np.argsort(np.where(indices < 0, big, indices), axis=-1, kind="stable")
        indices, values = np.take_along_axis(indices, perm, -1), np.take_along_axis(values, perm, -1)
        perm = np.argsort(np.where(exp_indices < 0, big, exp_indices), axis=-1, kind="stable")
        exp_indices, exp_values = (
            np.take_along_axis(exp_indices, perm, -1),
            np.take_along_axis(exp_values, perm, -1),
        )
    np.testing.assert_array_equal(indices, exp_indices)
    np.testing.assert_array_equal(bits(values), bits(exp_values))
