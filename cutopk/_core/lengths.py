"""``top_k(..., lengths=...)``: row r takes part with its first ``lengths[r]`` elements only.

Two routes. On the CUDA and simulator backends every kernel family reads the int64 lengths on
the device (kernels/row_extent.cuh) and writes the padding itself: the input is read in place,
with no copy, and ``plan()`` says so.

On the NumPy backend, the generic route: the rows are copied with every element past a row's
length replaced by the value no element is preferred to (under the mode and NaN policy), one
ordinary ``top_k`` runs on the copy, and any selected position at or past its row's length
becomes padding (index -1, value 0). A replaced element can tie with a real one, but ties go to
the lower index and every real position is lower than every replaced one, so the real elements
always win and come first, in the order ``sorted`` asks for. ``sorted=False`` is served in index
order (any order is allowed; index order puts the padding last, as docs/SPEC.md requires).

The copy costs one read and one write of the input.

How lengths are checked: an integer array of the batch shape (the input's shape without the
axis), NumPy or the input's own array kind, or a (nested) list or tuple of ints, which is a
NumPy array on the host (:func:`from_sequence`). Lengths on the host (NumPy, sequences, CPU torch) are checked
before any work: ``0 <= lengths[r] <= n``, else a ValueError; the rows are then planned on the
longest length (rounded up: :func:`narrowed`). Lengths on the device are never read back (no
device-to-host copy, no synchronisation, so a call can be captured in a CUDA graph): the kernels
check each row's length in the launch (kernels/row_extent.cuh), a length outside ``[0, n]``
giving a row of padding, and the rows are planned on the axis length ``n``, as the masking route
(mask, then ``top_k`` of whole rows) is; each kernel reads only a row's own elements.
"""

from __future__ import annotations

import numpy as np

from .._interop import aligned_copy, array_module, is_torch_tensor, misaligned
from .._request import checks as _checks
from .._request import dtypes as _dtypes


def check(lengths, arr, req: _checks.Request):
    """``(lengths, longest)``: ``lengths`` as a C-contiguous int64 array of ``arr``'s kind and
    device with the batch shape, after the checks of docs/SPEC.md (ValueError for a bad shape,
    TypeError for a non-integer array, ValueError for an unsigned index dtype; for lengths on the
    host, ValueError for a length out of range), and the longest length where the host knows it
    (lengths on the host), else None (lengths on the device: never read back)."""
    if req.index_dtype.kind != "i":
        raise ValueError(
            f"index_dtype: with lengths, padding is index -1, so a signed type is needed (int64 or int32), "
            f"got {req.index_dtype}"
        )
    xp = array_module(arr)
    if isinstance(lengths, (list, tuple)):  # a sequence: on the host, checked as a NumPy array
        lengths = from_sequence(lengths, req.n, req.axis)
    if isinstance(lengths, np.ma.MaskedArray):  # its mask would be ignored: a silent wrong answer
        raise TypeError(
            "lengths: expected an integer array without a mask, got a numpy.ma.MaskedArray; "
            "pass lengths.filled(value) instead"
        )
    if not hasattr(lengths, "shape") or not hasattr(lengths, "dtype"):
        raise TypeError(f"lengths: expected an integer array, got {type(lengths).__qualname__}")
    module = type(lengths).__module__.split(".")[0]
    if is_torch_tensor(lengths):
        # Refused by its torch dtype: a bfloat16 tensor would need ml_dtypes just to be viewed.
        name = str(lengths.dtype).removeprefix("torch.")
        if not name.startswith(("int", "uint")):
            raise TypeError(f"lengths: expected an integer array, got dtype {name}")
        from .._interop import exportable_tensor, host_view

        lengths = (
            host_view(exportable_tensor(lengths, "lengths")) if lengths.device.type == "cpu" else lengths
        )
        if xp is not np and not isinstance(lengths, np.ndarray):
            lengths = xp.from_dlpack(lengths)
    if not isinstance(lengths, np.ndarray) and xp is np:
        raise TypeError(
            f"lengths: expected a NumPy integer array for a NumPy input, got {module}.{type(lengths).__qualname__}"
        )
    if np.dtype(lengths.dtype).kind not in "iu":
        raise TypeError(f"lengths: expected an integer array, got dtype {lengths.dtype}")
    batch = tuple(s for i, s in enumerate(arr.shape) if i != req.axis)
    if tuple(lengths.shape) != batch:
        raise ValueError(
            f"lengths: expected shape {batch} (the input's shape without axis {req.axis}), got {tuple(lengths.shape)}"
        )
    longest = None
    if isinstance(lengths, np.ndarray):  # on the host: checked here, before any work
        longest = 0
        if lengths.size:
            low, high = lengths.min(), lengths.max()
            if low < 0 or high > req.n:
                raise ValueError(
                    f"lengths: expected 0 <= lengths[r] <= {req.n} (the length of axis {req.axis}), "
                    f"got values from {int(low)} to {int(high)}"
                )
            longest = int(high)
    lengths = xp.asarray(lengths)
    if xp is not np and longest is None and lengths.device.id != arr.device.id:
        # A kernel would read them from another device's memory: not read back, so check here.
        raise ValueError(
            f"lengths: expected an array on the input's device {arr.device.id}, got device {lengths.device.id}"
        )
    if xp is not np and misaligned(lengths):  # before any CuPy kernel (astype) reads it
        lengths = aligned_copy(lengths)
    # asarray, not ascontiguousarray: that makes a 0-d array (a 1-D input's lengths) 1-d.
    lengths = xp.asarray(lengths, dtype=np.int64, order="C")
    if xp is np and not lengths.flags.aligned:
        lengths = lengths.copy()  # the simulated kernels refuse a misaligned view, as a GPU faults
    return lengths, longest  # the kernels index it by row number


def from_sequence(lengths: list | tuple, n: int, axis: int) -> np.ndarray:
    """A (nested) list or tuple of integers as an int64 NumPy array, with the checks of an
    integer array on the host: an element that is no integer (a float, a bool, which NumPy
    would make an integer beside ints) is a TypeError, a length outside ``[0, n]`` a ValueError
    (even past int64: ``np.asarray`` would make such ints an object array)."""
    flat: list[int] = []
    todo: list = [lengths]
    while todo:
        item = todo.pop()
        if isinstance(item, (list, tuple)):
            todo.extend(item)
        elif isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise TypeError(
                f"lengths: expected an integer array or a sequence of integers, got a "
                f"{type(lengths).__name__} holding {type(item).__name__} {item!r}"
            )
        else:
            flat.append(int(item))
    if flat and (min(flat) < 0 or max(flat) > n):
        raise ValueError(
            f"lengths: expected 0 <= lengths[r] <= {n} (the length of axis {axis}), "
            f"got values from {min(flat)} to {max(flat)}"
        )
    try:
        return np.asarray(lengths, dtype=np.int64)
    except ValueError:  # a ragged sequence
        raise ValueError(
            f"lengths: expected a sequence of the input's shape without axis {axis}, got a ragged "
            f"{type(lengths).__name__}"
        ) from None


def narrowed(arr, call, longest: int | None):
    """``(arr, call)`` with the rows cut to the width the call is planned on: the longest length
    rounded up to a power of two (a handful of plans per shape, not one per longest), at least
    k, at most n. The cut is a view: no element past a row's length takes part, so the result
    is the same, and a shorter row can take a cheaper family (warp_row rather than radix, say).
    ``longest`` None (lengths on the device, not read back): the rows as they are, n long."""
    req = call.req
    if longest is None:
        return arr, call
    width = min(req.n, max(req.k, 1 << max(0, longest - 1).bit_length()))
    if width >= req.n:
        return arr, call
    from . import call as _call

    view = arr[(slice(None),) * req.axis + (slice(0, width),)]
    _, _, _, call, _ = _call.prepare(view, req.k, req.axis, *_checks.request_arguments(req))
    return view, call


def describe_in_kernel(plan, width: int, on_host: bool):
    """The plan of a call whose kernels read the lengths: the input in place, no masked copy."""
    import dataclasses

    why = "the longest, rounded up" if on_host else "the axis length: lengths on the device are not read back"
    return dataclasses.replace(
        plan, batch=f"lengths read by the kernels, rows planned as {width} long ({why})"
    )


def masked_rows(arr, lengths, req: _checks.Request):
    """The NumPy rows (axis last, C-contiguous) with every element at or past its row's length
    replaced by the least preferred value."""
    moved = np.moveaxis(arr, req.axis, -1)
    dtype = moved.dtype if moved.dtype.isnative else moved.dtype.newbyteorder("=")
    worst = _dtypes.least_preferred(dtype, req.largest, req.nan_largest)
    inside = np.arange(req.n, dtype=np.int64) < lengths[..., None]
    if np.isnan(worst.astype(np.float64)):
        # NaN is never preferred, but rows filled with it are slow for the NumPy selection
        # (2-13x, benchmarks/results/2026-11-23-cpu-irregular.md). The extreme number is never
        # preferred to a real number either (a tie goes to the lower, real, position); only a
        # real NaN ranks below it, so NaN fills the rows when they hold one.
        extreme = np.array(-np.inf if req.largest else np.inf, dtype=dtype)
        rows = np.where(inside, moved, extreme).astype(dtype, copy=False)
        if not np.isnan(rows).any():
            return rows
    return np.where(inside, moved, worst).astype(dtype, copy=False)


def pad(values, indices, lengths, req: _checks.Request, dtype, out=None):
    """Selected positions at or past their row's length become padding (index -1, value 0), the
    values take the input's ``dtype`` (its byte order) and the axis goes back in place; written
    into ``out`` when given (NumPy arrays: the masked-copy route is the NumPy backend's)."""
    padding = indices >= lengths[..., None]
    values = np.where(padding, np.zeros((), dtype=values.dtype), values).astype(dtype, copy=False)
    indices = np.where(padding, np.asarray(-1, dtype=indices.dtype), indices)
    values = np.ascontiguousarray(np.moveaxis(values, -1, req.axis))
    indices = np.ascontiguousarray(np.moveaxis(indices, -1, req.axis))
    if out is None:
        return values, indices
    np.copyto(out[0], values)
    np.copyto(out[1], indices)
    return out


def describe(plan, arr):
    """The plan of a call with ``lengths``: the top_k of the masked rows (planned on the full row
    length), after the masked copy."""
    import dataclasses

    masked = plan.rows * plan.n * arr.dtype.itemsize
    copies = (f"input: rows copied with elements past each row's length masked ({masked} bytes)",)
    # The inner top_k reads the masked copy, C-contiguous: only the move of the outputs remains.
    copies += tuple(c for c in plan.copies if c.startswith("outputs"))
    return dataclasses.replace(
        plan,
        copies=copies,
        scratch_bytes=plan.scratch_bytes + masked,
        batch=f"lengths applied by a masked copy of rows cut to {plan.n} (the longest, rounded up)",
    )
