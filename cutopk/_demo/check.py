"""The answer checker: a peer's result against cutopk's, bit for bit, indices up to ties.

A peer passes when (1) its values are cutopk's values bit for bit (in order when the peer sorts,
as multisets otherwise), every NaN counting as one value whatever its sign or payload (SPEC.md
rule 3), and (2) the input at the peer's indices holds the peer's values and no index appears twice
in a row, so indices may differ from cutopk's only between equal values (ties broken another way).
"""

from __future__ import annotations

import numpy as np


def to_numpy(a) -> np.ndarray:
    """A host NumPy copy of a NumPy, CuPy, torch or JAX array (bfloat16 kept as ml_dtypes)."""
    if isinstance(a, np.ndarray):
        return a
    if type(a).__module__.split(".")[0] == "torch":
        import torch

        t = a.detach().cpu()
        if t.dtype == torch.bfloat16:
            import ml_dtypes

            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()
    if hasattr(a, "get"):  # CuPy
        return a.get()
    return np.asarray(a)  # JAX arrays implement __array__


def bits(values: np.ndarray) -> np.ndarray:
    """The values as unsigned integers of their width, every NaN mapped to one pattern."""
    values = np.ascontiguousarray(values)
    out = values.view(f"u{values.dtype.itemsize}").copy()
    if values.dtype.kind not in "iub":
        out[np.isnan(values)] = np.iinfo(out.dtype).max  # no real value has all bits set (that is a NaN)
    return out


def check(x: np.ndarray, axis: int, expected: np.ndarray, result, sorts: bool = True) -> str | None:
    """None when ``result = (values, indices)`` agrees with cutopk's ``expected`` values on
    ``x`` (host arrays, selection along ``axis``); else a short description of the difference."""
    try:
        values, indices = (to_numpy(r) for r in result)
    except Exception as exc:  # noqa: BLE001 - an unreadable answer is a wrong answer
        return f"cannot read the answer: {type(exc).__name__}: {exc}"
    if values.shape != expected.shape or indices.shape != expected.shape:
        return f"shape {values.shape}/{indices.shape}, expected {expected.shape}"
    if values.dtype != expected.dtype:
        return f"dtype {values.dtype}, expected {expected.dtype}"
    got, want = np.moveaxis(bits(values), axis, -1), np.moveaxis(bits(expected), axis, -1)
    if not sorts:
        got, want = np.sort(got, axis=-1), np.sort(want, axis=-1)
    if not np.array_equal(got, want):
        bad = int(np.sum(np.any(got != want, axis=-1)))
        return f"values differ from cutopk's in {bad} of {got[..., 0].size} rows"
    idx = np.moveaxis(indices, axis, -1).astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= x.shape[axis]):
        return "indices out of range"
    ordered = np.sort(idx, axis=-1)
    if ordered.shape[-1] > 1 and (ordered[..., 1:] == ordered[..., :-1]).any():
        return "an index appears twice in a row"
    at = np.take_along_axis(np.moveaxis(x, axis, -1), idx, axis=-1)
    if not np.array_equal(bits(at), np.moveaxis(bits(values), axis, -1)):
        return "indices do not point at the returned values"
    return None
