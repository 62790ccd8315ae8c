"""Row extents read by the thread_row, warp_radix and bitonic kernels (kernels/row_extent.cuh) on
the simulator: rows with their own lengths (top_k(..., lengths=)) and CSR segments, against the
stable reference run row by row, with padding (index -1, value 0) after the winners in every
order. The edge cases of these kernels: rows of length 0, 1, < k, = k, = n; k = n; every dtype;
rows along an outer axis (thread_row reads them in place, the others after a tiled transpose);
strided and reversed rows; segments at unaligned starts (the 16-byte loads' head and tail);
warp_radix's digit passes and its bucket that does not fit (a run of one key at the K-th place).
tests/irregular/test_extents.py is the matrix over every family; this file adds every dtype for these three
and strided segments (segmented_top_k hands the kernels C-contiguous data, so the strided
SEGMENTS path is reached here through the prepared call directly).
"""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import sim_unavailable_reason
from support.inputs import DTYPES, dtype_of, make_values
from support.reference import assert_same_padded, reference_with_lengths

import cutopk
from cutopk._request import checks as _checks
from cutopk.cuda import kernel_constants as _kernel_constants
from cutopk.cuda import launcher as _launcher

pytestmark = pytest.mark.skipif(sim_unavailable_reason() is not None, reason=str(sim_unavailable_reason()))

FAMILIES = ("thread_row", "warp_radix", "bitonic")
ORDERS = (True, "index", False)
# A k each family takes: thread_row keeps at most 8 winners in registers.
K_OF = {"thread_row": 5, "warp_radix": 20, "bitonic": 20}


def policies(dtype):
    """(mode, nan) pairs: both NaN policies for floats only (integers have no NaN)."""
    nans = (
        ("last", "largest")
        if np.dtype(dtype).kind == "f" or np.dtype(dtype).name == "bfloat16"
        else ("last",)
    )
    return [(mode, nan) for mode in ("largest", "smallest") for nan in nans]


def check_lengths(x, k, lengths, family, axis=-1, order=True, index_dtype=np.int64, **kw):
    """top_k(x, k, lengths=) forced onto ``family``, which must read the lengths itself."""
    p = cutopk.plan(
        x, k, axis=axis, lengths=lengths, backend="sim", algorithm=family, index_dtype=index_dtype
    )
    assert p.algorithm == family and p.batch.startswith("lengths read by the kernels"), p.batch
    got = cutopk.top_k(
        x,
        k,
        axis=axis,
        lengths=lengths,
        backend="sim",
        algorithm=family,
        sorted=order,
        index_dtype=index_dtype,
        **kw,
    )
    rows = np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
    got = tuple(np.moveaxis(a, axis, -1).reshape(-1, k) for a in got)
    assert_same_padded(
        got,
        reference_with_lengths(rows, k, np.asarray(lengths).reshape(-1), sorted=order, **kw),
        index_dtype=index_dtype,
        order=order,
    )


def lengths_for(rng, rows, n, k):
    """0, 1, k - 1, k, k + 1, n and random lengths, for ``rows`` rows."""
    fixed = [0, 1, max(0, k - 1), k, min(n, k + 1), n]
    return np.array((fixed + list(rng.integers(0, n + 1, size=rows)))[:rows])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_dtype_order_mode_and_nan_policy(family, dtype):
    rng = np.random.default_rng(1)
    dt, k = dtype_of(dtype), K_OF[family]
    n, rows = 300, 12
    dist = "nan" if dt.kind == "f" or dt.name == "bfloat16" else "few_distinct"
    # thread_row along axis 0 (rows in place, adjacent in memory), the others along the last axis.
    axis = 0 if family == "thread_row" else -1
    x = make_values(rng, dt, (n, rows) if axis == 0 else (rows, n), dist)
    lengths = lengths_for(rng, rows, n, k)
    for order in ORDERS:
        for mode, nan in policies(dt):
            check_lengths(x, k, lengths, family, axis=axis, order=order, mode=mode, nan=nan)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_k_equals_n_and_index_dtypes(family, index_dtype):
    rng = np.random.default_rng(2)
    k = n = 8 if family == "thread_row" else 37
    x = make_values(rng, np.float32, (6, n), "few_distinct")
    lengths = np.array([0, 1, n - 1, n, 3, n])
    for order in ORDERS:
        check_lengths(x, k, lengths, family, order=order, index_dtype=index_dtype)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("layout", ["last_axis", "outer_axis", "strided", "reversed", "batch_3d"])
def test_layouts(family, layout):
    rng = np.random.default_rng(3)
    k = K_OF[family]
    base = make_values(rng, np.float32, (10, 201), "few_distinct")
    lengths = lengths_for(rng, 10, 201, k)
    if layout == "last_axis":
        check_lengths(base, k, lengths, family)
    elif layout == "outer_axis":  # thread_row in place, the others after a tiled transpose
        check_lengths(np.ascontiguousarray(base.T), k, lengths, family, axis=0, order="index")
    elif layout == "strided":
        wide = np.zeros((10, 603), np.float32)
        wide[:, 1::3] = base
        check_lengths(wide[:, 1::3], k, lengths, family, mode="smallest")
    elif layout == "reversed":
        check_lengths(np.ascontiguousarray(base[:, ::-1])[:, ::-1], k, lengths, family, order=False)
    else:  # a batch of shape (2, 5), rows along the middle axis
        x = np.ascontiguousarray(np.moveaxis(base.reshape(2, 5, 201), 2, 1))
        check_lengths(x, k, lengths.reshape(2, 5), family, axis=1)


@pytest.mark.parametrize("family", ["warp_radix", "bitonic"])
@pytest.mark.parametrize("dist", ["uniform", "all_equal", "leading_bits"])
def test_long_rows(family, dist):
    """Rows of a few thousand: several digit passes (warp_radix), and an all-equal row whose
    bucket at the K-th place does not fit the warp's pairs (only its first keys are kept)."""
    rng = np.random.default_rng(4)
    n, k = 3000, 100
    x = make_values(rng, np.int32 if dist == "leading_bits" else np.float32, (6, n), dist)
    lengths = np.array([n, 2999, 1500, 257, 99, 0])
    for order in ORDERS:
        check_lengths(x, k, lengths, family, order=order)


def run_segments(data, offsets, k, family, order=True, index_dtype=np.int64, **kw):
    """The kernel of ``family`` over CSR segments of 1-D ``data`` (rows_kind SEGMENTS): planned
    as segmented_top_k will plan it, n = max(longest segment, k), row stride 0, the data's own
    column stride; the kernel gets ``data`` itself, not a copy."""
    offsets = np.asarray(offsets, np.int64)
    rows = offsets.size - 1
    n = max(int(np.diff(offsets).max(initial=0)), k, 1)
    step = data.strides[0]
    # A view of the segments' signature only (shape and strides); the kernel reads `data`.
    shape_of = np.lib.stride_tricks.as_strided(np.zeros(1, data.dtype), (rows, n), (0, 0), writeable=False)
    req = _checks.normalize(
        shape_of, k, -1, kw.get("mode", "largest"), order, kw.get("nan", "last"), index_dtype, "sim", family
    )
    call = _launcher.GpuCall((rows, n), (0, step), data.dtype, req, -1, _kernel_constants.ROWS_SEGMENTS)
    assert call.plan.algorithm == family and call.short_path and not call.plan.copy
    return call.run(data, extents=offsets)


def segments_expected(data, offsets, k, order, **kw):
    rows = [data[offsets[s] : offsets[s + 1]] for s in range(len(offsets) - 1)]
    n = max([r.size for r in rows] + [1])
    padded = np.zeros((len(rows), n), data.dtype)
    for s, r in enumerate(rows):
        padded[s, : r.size] = r
    return reference_with_lengths(padded, k, [r.size for r in rows], sorted=order, **kw)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", ["int8", "float16", "bfloat16", "float32", "uint64"])
@pytest.mark.parametrize("stride", [1, 3])
def test_segments_at_unaligned_starts(family, dtype, stride):
    rng = np.random.default_rng(5)
    dt, k = dtype_of(dtype), K_OF[family]
    # Odd lengths, so segments start at every offset modulo 16 bytes: heads, whole 16-byte
    # vectors and tails of each; empty segments, segments shorter than k, one of length k.
    seg_lengths = np.array([0, 1, 3, k - 1, 0, 77, 130, k, 45, 2, 0, 251, 17])
    offsets = np.concatenate([[5], 5 + np.cumsum(seg_lengths)]).astype(np.int64)
    total = int(offsets[-1]) + 7
    dist = "nan" if dt.kind == "f" or dt.name == "bfloat16" else "few_distinct"
    flat = make_values(rng, dt, (total * stride,), dist)
    data = flat[::stride]
    assert data.size == total
    for order in ORDERS:
        for mode, nan in policies(dt)[:: 1 if order is True else 3]:
            got = run_segments(data, offsets, k, family, order=order, mode=mode, nan=nan)
            want = segments_expected(data, offsets, k, order, mode=mode, nan=nan)
            assert_same_padded(got, want, order=order)


@pytest.mark.parametrize("family", FAMILIES)
def test_segments_shorter_than_k_everywhere(family):
    """Every segment shorter than k (n is then k), int32 indices."""
    rng = np.random.default_rng(6)
    k = K_OF[family]
    data = make_values(rng, np.float64, (40,), "few_distinct")
    offsets = np.concatenate([[2], 2 + np.cumsum([0, 1, 3, 0, k - 1, 2])]).astype(np.int64)
    for order in ORDERS:
        got = run_segments(data, offsets, k, family, order=order, index_dtype=np.int32)
        assert_same_padded(got, segments_expected(data, offsets, k, order), index_dtype=np.int32, order=order)
