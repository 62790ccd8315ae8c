"""radix_topk reading each row's own extent (kernels/row_extent.cuh), on the simulator: the edge
cases of its own paths that the family matrix of tests/irregular/test_extents.py reaches only by chance.

* rows of length 0, 1, < k, = k, > k and = n in every dtype, order, mode and NaN policy, and a
  row shorter than a large k (every element wins, then padding, in a 1024-entry ordering);
* long rows whose top-digit bucket moves to the candidate buffer (and, with a long run of equal
  keys, the tie path that takes the first of them in index order), with lengths that cut the
  rows at unaligned ends and elements past each length that would win if they were read;
* the same rows as CSR segments at unaligned starts (segmented_top_k), and a tie run without a
  buffer.

Each case first checks that the call takes the kernel route (lengths read by the kernels, not a
masked copy), and the buffer cases check, from the keys themselves (cutopk/_request/keys.py), that the
bucket the radix kernel meets is larger than its shared-memory candidates and fits its buffer.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support.backends import require
from support.inputs import DTYPES, dtype_of, make_values
from support.reference import assert_same_padded, reference_with_lengths

import cutopk
from cutopk._request import dtypes as _dtypes
from cutopk._request import keys as _keys
from cutopk.irregular import segmented as _segmented

ORDERS = (True, "index", False)
POLICIES = (("largest", "last"), ("largest", "largest"), ("smallest", "last"), ("smallest", "largest"))
WIDE_DTYPES = [name for name in DTYPES if np.dtype(dtype_of(name)).itemsize > 1]  # more than one digit pass


@pytest.fixture(autouse=True)
def _sim():
    require("sim")


def radix_plan(x, k, lengths):
    """The plan of a lengths call forced onto radix; fails unless the kernels read the lengths."""
    plan = cutopk.plan(x, k, lengths=lengths, backend="sim", algorithm="radix")
    assert plan.algorithm == "radix"
    assert plan.batch.startswith("lengths read by the kernels"), plan.batch
    return plan


def check(x, k, lengths, *, order=True, mode="largest", nan="last", index_dtype=np.int64):
    got = cutopk.top_k(
        x, k, lengths=lengths, backend="sim", algorithm="radix", sorted=order, mode=mode, nan=nan,
        index_dtype=index_dtype,
    )  # fmt: skip
    want = reference_with_lengths(x, k, lengths, mode=mode, sorted=order, nan=nan)
    assert_same_padded(got, want, index_dtype=index_dtype, order=order)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_around_k_every_dtype(dtype):
    n, k = 300, 40
    rng = np.random.default_rng(abs(hash(("around_k", dtype))) % 2**32)
    dt = dtype_of(dtype)
    x = make_values(rng, dt, (9, n), "few_distinct" if _dtypes.info(np.dtype(dt)).is_float else "uniform")
    if _dtypes.info(np.dtype(dt)).is_float:
        x[3, :5] = np.nan  # in a row shorter than k: every element wins, NaN placed by the policy
        x[4, 10:20] = np.nan
        x[6, -4:] = -0.0
    lengths = np.array([0, 1, 2, k - 1, k, k + 1, n - 1, n, 123])
    radix_plan(x, k, lengths)
    for i, (order, (mode, nan)) in enumerate(itertools.product(ORDERS, POLICIES)):
        check(x, k, lengths, order=order, mode=mode, nan=nan, index_dtype=(np.int64, np.int32)[i % 2])


@pytest.mark.parametrize("order", ORDERS)
def test_row_shorter_than_the_largest_k(order):
    """k = 1000 (a 1024-entry ordering): rows of 999, 1, 513 and 0 elements all win, then padding."""
    rng = np.random.default_rng(1)
    x = make_values(rng, np.float64, (6, 1200), "few_distinct")
    lengths = np.array([999, 1, 513, 0, 1000, 1200])
    radix_plan(x, 1000, lengths)
    check(x, 1000, lengths, order=order)
    check(x, 1000, lengths, order=order, mode="smallest", index_dtype=np.int32)


def top_byte_rows(rng, dt, shape, lengths, cluster, ties):
    """Rows of ``dt`` built on their raw bits (top byte B, the rest random): the elements before
    each row's length have B in 0x00..0x3F, except ``cluster`` of them with B = 0x40 (all equal
    when ``ties``) and three with B = 0x50 (winners above the cluster); every element past the
    length has B = 0x60 and would win if it were read. For every dtype, B = 0x40 .. 0x60 are
    positive finite numbers above those of B < 0x40, so the K-th largest key lies in the cluster."""
    u = np.dtype(f"u{np.dtype(dt).itemsize}")
    shift = 8 * (u.itemsize - 1)
    low = np.uint64(1) << np.uint64(shift)
    bits = rng.integers(0, 0x40 * int(low), shape, dtype=u, endpoint=False)
    for r, length in enumerate(lengths):
        at = rng.choice(length, min(length, cluster + 3), replace=False)
        spread = (
            rng.integers(0, int(low), at.size, dtype=u) if not ties else np.full(at.size, 12345 % int(low), u)
        )
        bits[r, at] = (u.type(0x40) << u.type(shift)) | spread
        bits[r, at[:3]] = (u.type(0x50) << u.type(shift)) | bits[r, at[:3]]
        bits[r, length:] = (u.type(0x60) << u.type(shift)) | bits[r, length:] & u.type(int(low) - 1)
    return bits.view(dt)


def assert_buffered(row, k, cap, buffer, ties, nan_first=False):
    """The radix kernel's bucket for ``row`` (the keys sharing the K-th key's top byte) is larger
    than its ``cap`` shared-memory candidates and fits its ``buffer``; with ``ties``, more than
    ``cap`` keys equal the K-th key (the tie path)."""
    keys = _keys.preference_keys(np.ascontiguousarray(row), True, nan_first)
    kth = np.sort(keys)[::-1][k - 1]
    shift = 8 * (keys.dtype.itemsize - 1)
    bucket = int(np.count_nonzero((keys >> keys.dtype.type(shift)) == (kth >> keys.dtype.type(shift))))
    assert cap < bucket <= buffer, (cap, bucket, buffer)
    if ties:
        assert np.count_nonzero(keys == kth) > cap


@pytest.mark.parametrize("ties", [False, True], ids=["spread", "ties"])
@pytest.mark.parametrize("dtype", WIDE_DTYPES)
def test_buffered_rows_with_lengths(dtype, ties):
    n, k = 1 << 17, 24
    dt = dtype_of(dtype)
    rng = np.random.default_rng(abs(hash(("buffer", dtype, ties))) % 2**32)
    lengths = np.array([n, n - 7, n // 2 + 3, k - 1, 0])
    probe = np.zeros((lengths.size, n), dt)
    params = radix_plan(probe, k, lengths).params
    cap, buffer = params["cap"], params["buffer"]
    assert buffer > cap, params
    x = top_byte_rows(rng, dt, probe.shape, lengths, (cap + buffer) // 2, ties)
    for r in range(3):
        assert_buffered(x[r, : lengths[r]], k, cap, buffer, ties)
    floats = _dtypes.info(np.dtype(dt)).is_float
    if floats:
        x[1, [5, 77]] = np.nan  # last, or winners above the bucket with nan="largest"
    for i, order in enumerate(ORDERS):
        check(x, k, lengths, order=order, index_dtype=(np.int64, np.int32)[i % 2])
    if floats:
        check(x, k, lengths, nan="largest", order="index")
    if dtype == "float32":  # strided rows: the loader's scalar path, into the buffer as well
        wide = np.zeros((lengths.size, 2 * n), dt)
        wide[:, ::2] = x
        check(wide[:, ::2], k, lengths)


def reference_segments(data, offsets, k, **kw):
    longest = int(np.diff(offsets).max(initial=0))
    rows = np.zeros((offsets.size - 1, longest), data.dtype)
    for s in range(offsets.size - 1):
        rows[s, : offsets[s + 1] - offsets[s]] = data[offsets[s] : offsets[s + 1]]
    return reference_with_lengths(rows, k, np.diff(offsets), **kw)


@pytest.mark.parametrize("ties", [False, True], ids=["spread", "ties"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "int64", "uint16"])
def test_buffered_segments_at_unaligned_starts(dtype, ties, no_generic_route):
    n, k = 1 << 17, 24
    dt = dtype_of(dtype)
    rng = np.random.default_rng(abs(hash(("segments", dtype, ties))) % 2**32)
    seg = np.array([n - 5, 0, 3, k, n // 2 + 1, 1])  # starts at 3, 3 + n - 5, ...: unaligned
    offsets = np.concatenate([[3], 3 + np.cumsum(seg)]).astype(np.int64)
    call = _segmented.kernel_call(
        np.zeros(1, dt), seg.size, int(seg.max()), k, "value",
        {"mode": "largest", "nan": "last", "algorithm": "radix"}, np.dtype(np.int64), "sim",
    )  # fmt: skip
    assert call is not None and call.plan.algorithm == "radix"
    cap, buffer = call.plan.params["cap"], call.plan.params["buffer"]
    assert buffer > cap, call.plan.params
    # Each segment a row of top_byte_rows, laid end to end after 3 elements of none; 9 elements
    # with top byte 0x60 end `data`, larger than every segment's winners if read past the last.
    rows = top_byte_rows(rng, dt, (seg.size, n), seg, (cap + buffer) // 2, ties)
    data = np.concatenate([rows[0, :3]] + [rows[s, : seg[s]] for s in range(seg.size)] + [rows[0, -9:]])
    for s in (0, 4):
        assert_buffered(data[offsets[s] : offsets[s + 1]], k, cap, buffer, ties)
    for order in ORDERS:
        got = cutopk.segmented_top_k(data, offsets, k, backend="sim", algorithm="radix", sorted=order)
        assert_same_padded(got, reference_segments(data, offsets, k, sorted=order), order=order)


def test_tie_run_without_a_buffer():
    """A run of equal keys longer than the candidates, with no buffer planned: the last pass takes
    the first of them in index order from the row itself, never past the row's length."""
    n, k = 30000, 50
    rng = np.random.default_rng(5)
    lengths = np.array([n, n - 3, 20001, 49, 50])
    probe = np.zeros((lengths.size, n), np.int32)
    params = radix_plan(probe, k, lengths).params
    assert params["buffer"] == 0, params
    x = top_byte_rows(rng, np.int32, probe.shape, lengths, params["cap"] + 500, ties=True)
    for r in range(3):
        keys = _keys.preference_keys(x[r, : lengths[r]], True, False)
        assert np.count_nonzero(keys == np.sort(keys)[-k]) > params["cap"]
    for order in ORDERS:
        check(x, k, lengths, order=order)
