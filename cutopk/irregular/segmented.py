"""Top-K of each segment of a 1-D array (CSR layout), on every backend.

Offsets on the host (NumPy, lists, CPU torch) are checked there, before any work (ValueError).
Offsets on the device (CuPy, CUDA torch, with data on the GPU) are never read back: no
device-to-host copy and no synchronisation, so the call can be captured in a CUDA graph; the
kernels check each segment in the launch (kernels/row_extent.cuh), and a segment whose bounds
decrease, lie outside ``[0, len(data)]`` or are further apart than the planned width comes back
as padding only.

Two routes:

**In the kernels** (CUDA and simulator backends, :func:`kernel_call`): one launch sequence over
the whole batch, each segment a row with its own start and length (kernels/row_extent.cuh,
``ROWS_SEGMENTS``), read in place; planned on ``S`` rows of the longest segment where the host
knows it (offsets on the host), else of ``max_length`` where the caller gives that bound, else of
``len(data)`` (at least ``k``).

**Generic** (the NumPy backend): ``top_k`` itself on segments gathered into padded rows.

The generic route:

1. **Long segments** (at least ``LONG_SEGMENT`` elements) are each one ``top_k`` call on their own
   slice of ``data``: no copy, and the call's overhead is small against the segment's work.
2. **Short segments** go into classes of similar length (lengths in ``(2**(c-1), 2**c]``), so
   padding at most doubles their size. Each class is gathered, in blocks of at most
   ``BLOCK_ELEMENTS`` elements, into a ``(segments, width)`` matrix, ``width`` being the longest
   segment of the block; the cells past a segment's end get the *least preferred* value of the
   request (as in :mod:`cutopk.irregular.merge`), and one batched ``top_k`` call selects from the rows.
   A padding cell is never preferred over a real element: its value is the least preferred one,
   and a real element of that same value sits at a lower position, so it wins the tie.
3. Winners at positions past their segment's end are padding: index -1, value 0. They come after
   the segment's real winners (least preferred, and last in index order).

Empty segments are padding only and cost nothing. Scratch memory: one block of gathered values
(at most ``BLOCK_ELEMENTS``, or one segment's length) and, for blocks narrower than
``ROW_COPY_WIDTH`` (or on the GPU), its int64 gather positions, plus the ``(S, k)`` outputs.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, NamedTuple

import numpy as np

from .. import _interop
from .._core import call as _call
from .._core.result import TopK
from .._core.select import select
from .._request import checks as _checks
from .._request import dtypes as _dtypes
from .._request.plan import Plan
from .merge import renamed

# A segment at least this long is one top_k call on its own slice (read in place). At 65536
# elements a NumPy-backend call takes ~0.3 ms, against ~20 us of per-call overhead.
LONG_SEGMENT = 1 << 16
# Short segments are gathered into blocks of at most this many elements (8 MB of int64 gather
# positions, plus the values): bounded scratch whatever the number of segments.
BLOCK_ELEMENTS = 1 << 20
# From this width on, the NumPy route copies each segment into its row with a slice (a memcpy);
# below, one vectorised gather through an index matrix is cheaper than a Python loop over rows
# (benchmarks/results/2026-12-04-cpu-segment-row-copy.md).
ROW_COPY_WIDTH = 64


def _check_k(k) -> int:
    k = _checks.as_index(k, "k")
    if k < 0:
        raise ValueError(f"k: expected k >= 0, got k={k}")
    return k


def _offsets_on_host(offsets) -> np.ndarray:
    """``offsets`` as a NumPy array (a copy from the device for CuPy/CUDA arrays)."""
    if isinstance(offsets, (list, tuple)):
        return np.asarray(offsets) if len(offsets) else np.zeros(0, dtype=np.int64)
    try:
        kind = _checks.array_kind(offsets)
    except TypeError:
        raise TypeError(
            "offsets: expected a 1-D integer array (NumPy, CuPy, torch) or a list of integers, "
            f"got {type(offsets).__module__}.{type(offsets).__qualname__}"
        ) from None
    if kind == "cupy":
        arr, _, scope = _interop.as_cupy(offsets)
        with scope:
            # A strided misaligned view would be made contiguous by a CuPy copy, which faults.
            return (_interop.aligned_copy(arr) if _interop.misaligned(arr) else arr).get()
    try:
        return _interop.as_host(offsets)[0]
    except TypeError as exc:  # a masked array, say
        raise renamed(exc, "offsets") from None


def device_offsets(offsets, data_kind: str, data):
    """``offsets`` as a C-contiguous int64 device array when they live on the device and so does
    the data (checked by their metadata only: the kernels check the values), else None."""
    if isinstance(offsets, (list, tuple)) or data_kind != "cupy":
        return None
    try:
        if _checks.array_kind(offsets) != "cupy":
            return None
    except TypeError:
        return None  # check_offsets names what is wrong
    arr, _, _ = _interop.as_cupy(offsets)
    if arr.device.id != data.device.id:
        raise ValueError(
            f"offsets: expected an array on data's device {data.device.id}, got device {arr.device.id}"
        )
    if np.dtype(arr.dtype).kind not in "iu":
        raise TypeError(f"offsets: expected an integer array, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"offsets: expected a 1-D array of S + 1 positions, got shape {tuple(arr.shape)}")
    if arr.size == 0:
        raise ValueError("offsets: expected S + 1 >= 1 positions (a CSR indptr), got an empty array")
    if _interop.misaligned(arr):  # CuPy's astype reads whole elements: it would fault
        arr = _interop.aligned_copy(arr)
    # uint64 positions past 2**63 become negative int64: out of range, so padding, as they are.
    return arr.astype(np.int64, copy=False) if arr.flags.c_contiguous else arr.astype(np.int64)


def check_max_length(max_length) -> int | None:
    if max_length is None:
        return None
    max_length = _checks.as_index(max_length, "max_length")
    if max_length < 0:
        raise ValueError(f"max_length: expected None or an int >= 0, got {max_length}")
    return max_length


def check_offsets(offsets, n: int) -> np.ndarray:
    """Return the validated offsets as int64 (S + 1 positions), or raise naming what is wrong."""
    off = _offsets_on_host(offsets)
    if off.dtype.kind not in "iu":
        raise TypeError(f"offsets: expected an integer array, got dtype {off.dtype}")
    if off.ndim != 1:
        raise ValueError(f"offsets: expected a 1-D array of S + 1 positions, got shape {off.shape}")
    if off.size == 0:
        raise ValueError("offsets: expected S + 1 >= 1 positions (a CSR indptr), got an empty array")
    if off[0] < 0:
        raise ValueError(f"offsets: expected offsets[0] >= 0, got {off[0]}")
    if off[-1] > n:
        raise ValueError(f"offsets: expected offsets[-1] <= {n} (the length of data), got {off[-1]}")
    # Compared in their own dtype: a difference (np.diff) wraps around for uint64 positions past
    # 2**63 and for int64 ones far apart, and would name the wrong pair.
    decreasing = off[1:] < off[:-1]
    if decreasing.any():
        s = int(np.argmax(decreasing))
        raise ValueError(
            f"offsets: expected non-decreasing positions, got offsets[{s}]={off[s]} > "
            f"offsets[{s + 1}]={off[s + 1]}"
        )
    # Non-decreasing from offsets[0] >= 0 to offsets[-1] <= n: every position is in [0, n].
    return off.astype(np.int64)


def _check_index_dtype(index_dtype, longest: int) -> np.dtype:
    dt = _checks.check_index_dtype(index_dtype, longest)
    if dt.kind != "i":
        raise ValueError(
            f"index_dtype: expected a signed type (int64 or int32), since segments shorter than k "
            f"are padded with index -1, got {dt}"
        )
    return dt


# The bound the kernels check segments against where the host has checked the offsets (a plan
# that does not depend on len(data)); any bound at or past len(data) gives the same results.
HOST_CHECKED = 1 << 62


class _Route(NamedTuple):
    """How a checked call runs: ``call`` (the kernels' prepared call) or None (the generic
    route); ``offsets`` (int64, on the host or the device); ``lengths`` (on the host: each
    segment's, for the generic route) or None; ``cached``: whether the kernels' call was already
    planned; ``idt``: the index dtype; ``why``: what the rows are planned on, for :func:`plan`."""

    call: Any
    offsets: Any
    lengths: np.ndarray | None
    cached: bool
    idt: np.dtype
    why: str


def _checked(data, k, mode, sorted_, nan, backend, algorithm, max_length):
    """The checks of :func:`cutopk.segmented_top_k` that need no offsets, in top_k's order:
    ``(arr, back, scope, k, order, resolved, max_length, options)``."""
    try:
        kind = _checks.array_kind(data)
    except TypeError as exc:
        raise renamed(exc, "data") from None
    # The checks of top_k, in its order: a backend/array mismatch first.
    resolved = _checks.resolve_backend(backend, kind)
    scope: contextlib.AbstractContextManager
    try:
        if kind == "numpy":
            arr, back = _interop.as_host(data)
            scope = contextlib.nullcontext()
        else:
            arr, back, scope = _interop.as_cupy(data)
    except TypeError as exc:  # a masked array, say
        raise renamed(exc, "data") from None
    _checks.check_choice("mode", mode, _checks.MODES)
    order = _checks.check_order(sorted_)
    _checks.check_choice("nan", nan, _checks.NAN_POLICIES)
    _call.check_algorithm_name(algorithm, resolved)
    try:
        _dtypes.check_dtype(arr.dtype)
    except TypeError as exc:
        raise renamed(exc, "data") from None
    if arr.ndim != 1:
        raise ValueError(f"data: expected a 1-D array, got shape {tuple(arr.shape)}")
    k = _check_k(k)
    max_length = check_max_length(max_length)
    options = {"mode": mode, "nan": nan, "backend": backend, "algorithm": algorithm}
    return arr, back, scope, k, order, resolved, max_length, options


def _route(arr, offsets, k, order, resolved, max_length, options, index_dtype) -> _Route:
    """The offsets checked (on the host) or taken as they lie (on the device), and the route of
    the call; in ``arr``'s device scope."""
    size = int(arr.shape[0])
    off = device_offsets(offsets, _checks.array_kind(arr), arr) if resolved != "numpy" else None
    if off is not None:  # on the device: never read back; the kernels check each segment
        longest = size if max_length is None else min(max_length, size)
        idt = _check_index_dtype(index_dtype, longest)
        call, cached = kernel_call(
            arr, off.size - 1, longest, k, order, options, idt, resolved, bound=size, planned=True
        )
        why = (
            "len(data): offsets on the device are not read back"
            if max_length is None
            else "max(max_length, k): offsets on the device are not read back"
        )
        return _Route(call, off, None, cached, idt, why)
    off = check_offsets(offsets, size)
    lengths = np.diff(off)
    longest = int(lengths.max()) if lengths.size else 0
    if max_length is not None and longest > max_length:
        s = int(np.argmax(lengths > max_length))
        raise ValueError(
            f"offsets: expected segments of at most max_length={max_length} elements, got segment "
            f"{s} of {int(lengths[s])}"
        )
    idt = _check_index_dtype(index_dtype, longest)
    if resolved == "numpy":
        return _Route(None, off, lengths, False, idt, "the longest segment")
    call, cached = kernel_call(arr, lengths.size, longest, k, order, options, idt, resolved, planned=True)
    return _Route(call, off, lengths, cached, idt, "the longest segment, or k: offsets on the host")


def segmented_top_k(
    data, offsets, k, mode, sorted_, nan, index_dtype, backend, algorithm, max_length=None
) -> TopK:
    """The implementation of :func:`cutopk.segmented_top_k` (see its docstring)."""
    arr, back, scope, k, order, resolved, max_length, options = _checked(
        data, k, mode, sorted_, nan, backend, algorithm, max_length
    )
    with scope:
        route = _route(arr, offsets, k, order, resolved, max_length, options, index_dtype)
        if route.call is not None:  # one launch sequence over every segment, read in place
            values, indices = _run_in_kernels(route.call, arr, route.offsets)
        else:
            assert route.lengths is not None
            values, indices = _run(arr, route.offsets[:-1], route.lengths, k, order, options, route.idt)
        return TopK(back(values), back(indices))


def plan(data, offsets, k, mode, sorted_, nan, index_dtype, backend, algorithm, max_length=None) -> Plan:
    """What :func:`segmented_top_k` does with these arguments (:func:`cutopk.plan` with
    ``offsets``): the same checks and errors, nothing run, offsets on the device not read."""
    arr, _, scope, k, order, resolved, max_length, options = _checked(
        data, k, mode, sorted_, nan, backend, algorithm, max_length
    )
    with scope:
        route = _route(arr, offsets, k, order, resolved, max_length, options, index_dtype)
    if route.call is not None:
        planned = route.call.describe(route.cached, arr)
        copies = dict.fromkeys(planned.copies, 0)
        size = int(arr.shape[0]) * arr.dtype.itemsize
        if not arr.dtype.isnative:
            copies[f"input: data copied to native byte order ({size} bytes)"] = size
        elif not arr.flags.c_contiguous:
            copies[f"input: strided data copied to a contiguous array ({size} bytes)"] = size
        if route.lengths is not None and route.call.xp is not np:  # offsets on the host, data on the GPU
            copies[f"offsets: copied to the device as int64 ({route.offsets.size * 8} bytes)"] = 0
        return dataclasses.replace(
            planned,
            copies=tuple(copies),
            scratch_bytes=planned.scratch_bytes + sum(copies.values()),
            batch=f"CSR segments read by the kernels, rows planned as {planned.n} long ({route.why})",
        )
    return _describe_generic(arr, route.lengths, k, options)


def _describe_generic(data, lengths, k: int, options) -> Plan:
    """The plan of the generic route (the NumPy backend's): its copies and scratch, block by
    block as :func:`_run` makes them."""
    assert lengths is not None
    longest = int(lengths.max()) if lengths.size else 0
    itemsize = data.dtype.itemsize
    long = int(np.count_nonzero(lengths >= LONG_SEGMENT)) if k else 0
    blocks = list(_blocks(lengths)) if k else []
    largest = max((rows.size * width for rows, width in blocks), default=0)
    gathered = sum(rows.size * width for rows, width in blocks)
    scratch = max(
        (rows.size * width * (itemsize + (8 if width < ROW_COPY_WIDTH else 0)) for rows, width in blocks),
        default=0,
    )
    copies = (f"input: short segments gathered into padded rows ({gathered * itemsize} bytes in all, "
              f"{len(blocks)} blocks of at most {largest} elements)",) if blocks else ()  # fmt: skip
    params = {
        "route": "segments",
        "long_segments": long,
        "blocks": len(blocks),
        "algorithm": options["algorithm"],
    }
    return Plan(
        "numpy", "select", int(lengths.size), max(longest, k), k, (), copies, scratch, False, params,
        batch=f"CSR segments: {long} of at least {LONG_SEGMENT} elements one top_k call each, the "
        f"shorter ones by length class into padded rows ({len(blocks)} batched top_k calls)",
    )  # fmt: skip


def kernel_call(
    data,
    segments: int,
    longest: int,
    k: int,
    order: str,
    options,
    idt,
    backend: str,
    bound: int = HOST_CHECKED,
    planned: bool = False,
):
    """The prepared call that selects from every segment in one launch sequence (the kernels read
    each segment as a row with its own start and length: kernels/row_extent.cuh). ``longest``:
    the longest a segment may be (the host's bound); ``bound``: the position every segment must
    end within (the data's length, for offsets the host has not checked). ``planned``: return
    ``(call, whether its signature was already planned)``."""
    # Rows of `width`: the longest segment, or k when k is larger (the rest of a row is padding):
    # a segment longer than the width is padding (kernels/row_extent.cuh checks end - first <= n).
    width = max(longest, k, 1)
    mode, nan, algorithm = options["mode"], options["nan"], options["algorithm"]
    found = _call.planned_segments_call(
        data, segments, width, k, order, mode, nan, idt, backend, algorithm, bound
    )
    return found if planned else found[0]


def _run_in_kernels(call, data, offsets):
    """``(values, indices)`` of every segment by ``call``'s one launch sequence."""
    xp, dtype = call.xp, data.dtype
    if not dtype.isnative:
        data = data.astype(call.dtype)
    data = xp.ascontiguousarray(data)  # the plan reads a C-contiguous array: a copy if strided
    values, indices = call.run(data, extents=xp.asarray(offsets, dtype=np.int64))
    return values.astype(dtype, copy=False), indices  # SPEC: values.dtype == data.dtype


def _run(data, starts, lengths, k, order, options, idt):
    """Steps 1-3 of the generic route (the NumPy backend's), for checked arguments."""
    segments = lengths.size
    values = np.zeros((segments, k), dtype=data.dtype)
    indices = np.full((segments, k), -1, dtype=idt)
    if k == 0 or segments == 0:
        return values, indices
    # "none" is given in index order: padding, last in index order, then ends each row.
    sort = "value" if order == "value" else "index"
    long = np.flatnonzero(lengths >= LONG_SEGMENT)
    for s in long.tolist():
        start, length = int(starts[s]), int(lengths[s])
        kk = min(k, length)
        top = select(data[start : start + length], kk, sorted=sort, index_dtype=idt, **options)
        values[s, :kk] = top.values
        indices[s, :kk] = top.indices
    # The fill of padding cells, as a NumPy scalar.
    worst = _dtypes.least_preferred(data.dtype, options["mode"] == "largest", options["nan"] == "largest")[()]
    for block, _ in _blocks(lengths):
        _gather_and_select(
            data, starts[block], lengths[block], block, k, sort, options, worst, values, indices
        )
    return values, indices


def _blocks(lengths):
    """``(segments, width)`` of each block of short segments that step 2 gathers and selects
    from at once: the segments of one length class (in order), at most ``BLOCK_ELEMENTS``
    elements of the class's width, each block gathered as wide as its longest segment."""
    short = np.flatnonzero((lengths > 0) & (lengths < LONG_SEGMENT))
    if short.size == 0:
        return
    # Class c holds lengths in (2**(c-1), 2**c]; a stable sort keeps segments in order per class.
    classes = np.ceil(np.log2(lengths[short])).astype(np.int64)
    short = short[np.argsort(classes, kind="stable")]
    classes = np.sort(classes, kind="stable")
    bounds = np.flatnonzero(np.diff(classes)) + 1
    for group in np.split(short, bounds):
        width_cap = 1 << int(np.ceil(np.log2(lengths[group[0]])))
        per_block = max(1, BLOCK_ELEMENTS // width_cap)
        for first in range(0, group.size, per_block):
            block = group[first : first + per_block]
            yield block, int(lengths[block].max())


def _gather_and_select(data, starts, lengths, rows, k, sort, options, worst, values, indices):
    """One batched top_k over the segments ``rows`` gathered into padded rows of the block's
    longest length; writes their results into ``values``/``indices``."""
    block = _gather(data, starts, lengths, worst)
    width = block.shape[1]
    kk = min(k, width)
    top = select(block, kk, sorted=sort, **options)
    padding = top.indices >= lengths[:, None]
    values[rows, :kk] = np.where(padding, np.zeros((), dtype=data.dtype), top.values)
    indices[rows, :kk] = np.where(padding, -1, top.indices).astype(indices.dtype)


def _gather(data, starts, lengths, worst):
    """The segments as the rows of a ``(segments, longest)`` matrix, ``worst`` past their ends."""
    rows, width = lengths.size, int(lengths.max())
    if width >= ROW_COPY_WIDTH:
        block = np.full((rows, width), worst, dtype=data.dtype)
        for r, (start, length) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
            block[r, :length] = data[start : start + length]
        return block
    cols = np.arange(width, dtype=np.int64)
    starts_col, lengths_col = starts[:, None], lengths[:, None]
    inside = cols < lengths_col
    # Cells past a segment's end read its first element (always in range), then become `worst`.
    return np.where(inside, data[np.where(inside, starts_col + cols, starts_col)], worst).astype(
        data.dtype, copy=False
    )


def differentiable(data, offsets, k, mode, sorted_, nan, index_dtype, backend, algorithm, max_length=None):
    """``(select, starts_of)`` for :func:`cutopk._core.autograd.segmented_top_k`: the selection from
    the detached data, and each segment's start in data of length n: host offsets checked on the
    host; offsets in a CUDA tensor as they lie, never read back (the kernels check them, and a
    bad segment comes back as padding, which passes no gradient)."""

    def run(detached):
        return segmented_top_k(
            detached, offsets, k, mode, sorted_, nan, index_dtype, backend, algorithm, max_length
        )

    def starts_of(n):
        if _is_device_tensor(offsets) and offsets.ndim == 1 and offsets.shape[0] >= 1:
            return offsets[:-1].long()
        return check_offsets(offsets, n)[:-1]

    return run, starts_of


def _is_device_tensor(value) -> bool:
    """Whether ``value`` is a torch tensor on a GPU (checked without importing torch)."""
    return _interop.is_torch_tensor(value) and value.device.type != "cpu"
