"""The NumPy backend's routes for short rows: one sort of composite keys per row.

Rows of up to ``routes.SORTED_MAX_N`` (or small calls up to ``routes.TINY_MAX_N``) are answered
by one sort of int64 composites per row (:func:`select_sorted`: the element's number in
preference order, then its column), rows up to ``routes.COMPOSITE_MAX_N`` by one partition of
composite keys (:func:`select_composite`), and a cached call on a small C-contiguous input by a
function made for its shape (its runner: :func:`runner`). They share the order numbers
(:func:`order_numbers`) and their bounds, which is why they live together, apart from the
long-row routes whose cost is in reading the row, not in a call's fixed NumPy overhead.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import numpy as np

from .._request import dtypes as _dtypes
from .._request.checks import Request
from . import routes as _routes

_I64 = {b: np.int64(b) for b in range(64)}  # typed shift counts: a Python int costs a ufunc 0.2 us
_MAGNITUDE = {size: np.int64((1 << (8 * size - 1)) - 1) for size in (1, 2, 4)}


def order_numbers(x: np.ndarray, largest: bool, scratch: bool = False) -> np.ndarray:
    """int64 numbers, ascending in preference order, of the elements of ``x`` (native byte
    order, at most 32 bits): ascending values for ``smallest``, descending for ``largest``.
    -0.0 and +0.0 get the same number (0); a NaN's lies outside :func:`number_bounds`. Five
    passes for floats (a sign-magnitude number made two's complement), one or two for ints.
    ``scratch``: the numbers (and the float's sign words) are written into this thread's
    scratch memory (:func:`_scratch`), valid until its next use in this thread."""
    if scratch:
        out = _scratch(2 * x.size)
        s, sign = out[: x.size].reshape(x.shape), out[x.size :].reshape(x.shape)
    if not _dtypes.info(x.dtype).is_float:
        if scratch:
            np.copyto(s, x)
        else:
            s = x.astype(np.int64)
        if largest:
            np.negative(s, out=s)
        return s
    words = x.view(f"i{x.itemsize}")
    if scratch:
        bits = s
        np.copyto(bits, words)  # sign-extended
        np.right_shift(bits, _I64[63], out=sign)  # 0, or -1 for a negative number
    else:
        bits = words.astype(np.int64)  # sign-extended
        sign = bits >> _I64[63]  # 0, or -1 for a negative number
    np.bitwise_and(bits, _MAGNITUDE[x.itemsize], out=bits)  # the magnitude
    # (m ^ sign) - sign is m or -m by the sign; sign - (m ^ sign) its negation (for largest).
    bits ^= sign
    if largest:
        np.subtract(sign, bits, out=bits)
    else:
        bits -= sign
    return bits


# Each thread's scratch memory for the short-row sorts: the int64 composites of a block, kept
# between calls. Fresh memory of this size comes from the system as new pages on every call
# where the allocator hands it back (glibc, as the main thread's heap shrinks): 65536x8 k=2 on
# the main thread of a fresh process took 6.0 ms, 2400 page faults, against 2.2 ms.
_SCRATCH = threading.local()
SCRATCH_MAX_ELEMENTS = 2 * _routes.SORTED_BLOCK_ELEMENTS


def _scratch(size: int) -> np.ndarray:
    """``size`` int64 of this thread's scratch memory (kept up to ``SCRATCH_MAX_ELEMENTS``)."""
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.size < size:
        buf = np.empty(size, dtype=np.int64)
        if size <= SCRATCH_MAX_ELEMENTS:
            _SCRATCH.buf = buf
    return buf[:size]


def number_bounds(dtype: np.dtype) -> tuple[int, int] | None:
    """The least and greatest :func:`order_numbers` of a number, in either mode (a NaN's lies
    outside them); None for integers."""
    if not _dtypes.info(dtype).is_float:
        return None
    inf = int(np.array(np.inf, dtype=dtype).view(f"i{dtype.itemsize}")[()])
    return -inf, inf


def select_sorted(
    x: np.ndarray, k: int, largest: bool, nan_first: bool, order: str, rest: Callable[..., np.ndarray]
) -> np.ndarray:
    """Top K of short rows (``x``: C-contiguous, native byte order, at most 32 bits per element) through
    one sort of composite keys per row: the element's number in preference order
    (:func:`order_numbers`) in the high bits and its column in the low bits. Composites are
    distinct, so the first K of the ascending sort are the answer in the SPEC.md order, ties by
    lower index included: some ten NumPy calls per block, whatever the rows. Rows holding a NaN
    (their composites fall outside the numbers' range) go the general way: ``rest(rows, k, largest,
    nan_first, "value")``, the backend's row routes without this one."""
    n = x.shape[1]
    col_bits = max(1, (n - 1).bit_length())
    comp = order_numbers(x, largest, scratch=True)
    comp <<= _I64[col_bits]
    comp |= column_numbers(n)
    comp.sort(axis=1)
    mask = (1 << col_bits) - 1
    cols = np.bitwise_and(comp[:, :k], np.int64(mask))
    bounds = number_bounds(x.dtype)
    if bounds is not None:
        lo, hi = bounds[0] << col_bits, (bounds[1] << col_bits) | mask
        bad = comp[:, 0] < lo
        bad |= comp[:, -1] > hi
        if bad.any():
            cols[bad] = rest(x[bad], k, largest, nan_first, "value")
    if order != "value":
        cols.sort(axis=1)
    return cols


_COLUMNS: dict = {}


def column_numbers(n: int) -> np.ndarray:
    """``0 .. n-1`` as int64, cached (read-only constants)."""
    cols = _COLUMNS.get(n)
    if cols is None:
        cols = np.arange(n)
        cols.flags.writeable = False
        if len(_COLUMNS) < 4096:
            _COLUMNS[n] = cols
    return cols


def select_composite(keys: np.ndarray, k: int, order: str) -> np.ndarray:
    """Top K of short rows through one partition of composite keys: the preference key in the
    high half, the inverted column in the low half. Composites are distinct, and a larger one is
    a preferred key or, for equal keys, a lower column: the partition's top K is the answer and
    a sort of those K is the SPEC.md order, with no tie to resolve afterwards."""
    n = keys.shape[1]
    key_bits = 8 * keys.itemsize
    comp_bits = next(b for b in (16, 32, 64) if b - key_bits >= 0 and (1 << (b - key_bits)) >= n)
    comp_t = np.dtype(f"u{comp_bits // 8}")
    low = comp_bits - key_bits
    ones = comp_t.type((1 << low) - 1)
    comp = keys.astype(comp_t)
    comp <<= comp_t.type(low)
    comp |= ones - np.arange(n, dtype=comp_t)
    comp.partition(n - k, axis=1)
    top = comp[:, n - k :]
    if order == "value":
        top = np.sort(top, axis=1)[:, ::-1]  # descending composite: preferred first
    cols = (ones - (top & ones)).astype(np.int64)
    if order != "value":
        cols.sort(axis=1)
    return cols


def small_call(shape: tuple, strides: tuple, dtype: np.dtype, req: Request) -> bool:
    """Whether a call on arrays of this shape, strides and dtype runs a function made for
    its shape (:func:`runner`): along the last axis, C-contiguous, native byte order, at most
    32 bits per element, at most ``routes.TINY_MAX_ELEMENTS`` in rows of at most
    ``routes.TINY_MAX_N``, and 0 < K < N."""
    n, k = req.n, req.k
    rows = math.prod(shape) // n if n else 0
    c_strides = tuple(
        dtype.itemsize * math.prod(shape[i + 1 :]) for i in range(len(shape))
    )  # C order, as NumPy gives it for every axis of length > 1
    return (
        req.axis == len(shape) - 1
        and rows > 0  # an empty batch: top_k's own early answer (the NaN checks index its rows)
        and 0 < k < n <= _routes.TINY_MAX_N
        and rows * n <= _routes.TINY_MAX_ELEMENTS
        and dtype.itemsize <= 4
        and dtype == dtype.newbyteorder("=")
        and all(s == c for s, c, d in zip(strides, c_strides, shape, strict=True) if d > 1)
    )


def runner(
    shape: tuple, strides: tuple, dtype: np.dtype, req: Request, general: Callable[[np.ndarray], tuple]
) -> Callable[[np.ndarray], tuple] | None:
    """For a small call (:func:`small_call`), a function that runs ``req`` on arrays of this
    shape, strides and dtype with everything but the data worked out once (no checks, no thread
    count: a small problem never splits); None for any other call. ``general(a)``: the backend's
    ``top_k`` for ``req``, taken where a row holds a NaN that the shortcut cannot place.

    One stable argsort of the values, or one sort of composite keys per row where NaN is
    preferred or NumPy does not compare the dtype itself (bfloat16)."""
    name = runner_route(shape, strides, dtype, req)
    if name is None:
        return None
    rows = math.prod(shape) // req.n
    out_shape = (*shape[:-1], req.k)
    if name == "small-argsort":
        return _argsort_runner(rows, dtype, req, out_shape, general)
    return _composite_runner(rows, dtype, req, out_shape, general)


def runner_route(shape: tuple, strides: tuple, dtype: np.dtype, req: Request) -> str | None:
    """``plan()``'s route of a small call's :func:`runner`: ``small-argsort`` (NumPy's own
    floats and integers) or ``small-composite`` (bfloat16); None for any other call."""
    if not small_call(shape, strides, dtype, req):
        return None
    return "small-argsort" if dtype.kind in "fiu" else "small-composite"


def _argsort_runner(rows: int, dtype: np.dtype, req: Request, out_shape: tuple, general: Callable):
    """:func:`runner` for NumPy's own float16/32 and integers: a stable argsort of the values
    (negated, or bit-inverted for integers, for largest) is the SPEC.md order outright. Floats
    compare -0.0 equal to +0.0 (stability keeps their index order) and NumPy sorts NaN last,
    where the "last" rule puts it; values come from the input, bit for bit. Where NaN is
    preferred, a call whose rows end in a NaN in that order goes the general way. Three NumPy
    calls where the composite keys take eight (1x128 k=8: 5.5 us against 7)."""
    n, k, order, index_dtype = req.n, req.k, req.order, req.index_dtype
    offsets = np.arange(0, rows * n, n)[:, None] if rows > 1 else None
    flip = (np.negative if dtype.kind == "f" else np.invert) if req.largest else None
    same_shape = out_shape == (rows, k)
    cast = index_dtype != np.int64
    nan_check = req.nan_first and dtype.kind == "f"
    row_starts = np.arange(0, rows * n, n) if rows > 1 else None

    def run_argsort(a):
        # Methods, not functions, and no reshape or cast that changes nothing: each NumPy
        # call costs some 0.2-0.4 us here, as much as the sort of a short row.
        x = a.reshape(rows, n)
        full = (flip(x) if flip is not None else x).argsort(axis=1, kind="stable")
        if nan_check:  # NumPy sorts NaN last: a row with one ends in one
            if rows == 1:
                worst = x[0, full[0, -1]]
                if worst != worst:
                    return general(a)
            elif np.isnan(x.ravel().take(full[:, -1] + row_starts)).any():
                return general(a)
        cols = full[:, :k]
        if rows > 1:
            cols = cols.copy()  # C-contiguous
        if order != "value":
            cols.sort(axis=1)
        values = x.ravel().take(cols if offsets is None else cols + offsets)
        if cast:
            cols = cols.astype(index_dtype)
        if same_shape:
            return values, cols
        return values.reshape(out_shape), cols.reshape(out_shape)

    if rows == 1 and not (cast or nan_check or order != "value"):
        # One row, the plain request: the first K of the argsort are the indices in the
        # result's shape already (the last axis cut to K), and a flat take of the input
        # gives their values in that shape: no reshape (2.23 us a call to 2.05, 1x128 k=8).
        if flip is None:

            def run_one_row(a):
                cols = a.argsort(kind="stable")[..., :k]
                return a.take(cols), cols

        else:

            def run_one_row(a):
                cols = flip(a).argsort(kind="stable")[..., :k]
                return a.take(cols), cols

        return run_one_row
    return run_argsort


def _composite_runner(rows: int, dtype: np.dtype, req: Request, out_shape: tuple, general: Callable):
    """:func:`runner` through one sort of composite keys per row (as :func:`select_sorted`),
    for the dtypes NumPy does not compare itself (bfloat16); a NaN goes the general way."""
    n, k, largest, order, index_dtype = req.n, req.k, req.largest, req.order, req.index_dtype
    col_bits = max(1, (n - 1).bit_length())
    shift, mask = _I64[col_bits], np.int64((1 << col_bits) - 1)
    columns = column_numbers(n)
    bounds = number_bounds(dtype)
    lo, hi = (bounds[0] << col_bits, (bounds[1] << col_bits) | int(mask)) if bounds else (None, None)
    offsets = np.arange(0, rows * n, n)[:, None] if rows > 1 else None

    def run(a):
        x = a.reshape(rows, n)
        comp = order_numbers(x, largest)
        comp <<= shift
        comp |= columns
        comp.sort(axis=1)
        if lo is not None and (
            (comp[0, 0] < lo or comp[0, -1] > hi)
            if rows == 1
            else (comp[:, 0].min() < lo or comp[:, -1].max() > hi)
        ):
            return general(a)  # a NaN: the general way
        cols = np.bitwise_and(comp[:, :k], mask)
        if order != "value":
            cols.sort(axis=1)
        values = x.ravel().take(cols if offsets is None else cols + offsets)
        return values.reshape(out_shape), cols.astype(index_dtype, copy=False).reshape(out_shape)

    return run
