"""The NumPy backend against the stable reference: the STYLE.md matrix, hard inputs, layouts."""

from __future__ import annotations

import numpy as np
import pytest
from support.inputs import DISTRIBUTIONS, DTYPES, LAYOUTS, dtype_of, make_layout, make_values
from support.reference import check_top_k, reference_top_k

import cutopk
from cutopk.numpy import backend as _numpy_backend
from cutopk.numpy import exact as _numpy_exact
from cutopk.numpy import outer_axis as _outer_axis
from cutopk.numpy import pivot_filter as _pivot_filter

NS = (1, 31, 32, 33, 1023, 1024, 1025, 5000)
KS = (0, 1, 31, 32, 33, 256, 1024, "n")
ORDERS = (True, "index", False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", NS)
def test_matrix_k_mode_order_nan(dtype, n):
    rng = np.random.default_rng(n)
    x = make_values(rng, dtype_of(dtype), (3, n), "nan" if "float" in dtype else "uniform")
    for k in KS:
        k = n if k == "n" else k
        if k > n:
            continue
        for mode in ("largest", "smallest"):
            for order in ORDERS:
                for nan in ("last", "largest"):
                    check_top_k(x, k, mode=mode, sorted=order, nan=nan)


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_hard_inputs(dtype, dist):
    rng = np.random.default_rng(7)
    for n, k in ((40, 7), (3000, 50), (3000, 1000)):
        x = make_values(rng, dtype_of(dtype), (4, n), dist)
        for mode in ("largest", "smallest"):
            for nan in ("last", "largest"):
                check_top_k(x, k, mode=mode, nan=nan)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("axis", (0, 1, -1))
def test_layouts(layout, axis):
    rng = np.random.default_rng(3)
    base = make_values(rng, np.float32, (6, 700), "few_distinct")
    x = make_layout(base, layout)
    for k in (0, 1, 5, 6, 300, 700):
        if k <= x.shape[axis]:
            check_top_k(x, k, axis=axis, sorted=True)
            check_top_k(x, k, axis=axis, sorted="index", mode="smallest")


def test_middle_axis_and_3d():
    rng = np.random.default_rng(5)
    x = make_values(rng, np.int16, (3, 600, 4), "few_distinct")
    for axis in (0, 1, 2, -2):
        check_top_k(x, 2, axis=axis)
        check_top_k(x[:, ::-2, :], 2, axis=axis, mode="smallest")


@pytest.mark.parametrize("index_dtype", (np.int64, np.int32, np.uint32, np.uint64))
def test_index_dtypes(index_dtype):
    x = np.arange(100, dtype=np.float64)[::-1]
    r = check_top_k(x, 10, index_dtype=index_dtype)
    assert r.indices.dtype == index_dtype


def test_output_shape_and_types():
    x = np.zeros((2, 3, 4), dtype=np.uint8)
    r = cutopk.top_k(x, 2, axis=1)
    assert isinstance(r, cutopk.TopK)
    assert r.values.shape == r.indices.shape == (2, 2, 4)
    assert r.values.flags.c_contiguous and r.indices.flags.c_contiguous


def test_zero_size_dimensions():
    x = np.zeros((0, 5), dtype=np.float32)
    r = cutopk.top_k(x, 3)
    assert r.values.shape == (0, 3)
    r = cutopk.top_k(np.zeros((4, 0)), 0)
    assert r.values.shape == (4, 0)
    r = cutopk.top_k(np.zeros((4, 0, 3)), 2, axis=0)
    assert r.values.shape == (2, 0, 3)


@pytest.mark.parametrize("dtype", ("float16", "float32", "int8", "uint32"))
@pytest.mark.parametrize("nan", ("last", "largest"))
@pytest.mark.parametrize("order", (True, False))
def test_an_empty_batch_of_short_rows_in_every_mode(dtype, nan, order):
    """The empty view of a non-empty array (issue 36 item 1: ``nan="largest"`` raised TypeError
    in the small-input path's NaN check), an empty batch of a batch, a narrow index dtype."""
    x = np.random.default_rng(0).standard_normal((3, 17)).astype(dtype)
    for empty in (x[:0], x.reshape(1, 3, 17)[:, :0], np.zeros((2, 0, 17), dtype)):
        for mode in ("largest", "smallest"):
            for index_dtype in (np.int64, np.int32):
                r = cutopk.top_k(empty, 3, mode=mode, nan=nan, sorted=order, index_dtype=index_dtype)
                assert r.values.shape == r.indices.shape == (*empty.shape[:-1], 3)
                assert r.values.dtype == empty.dtype and r.indices.dtype == index_dtype


def test_returns_input_elements_bits_included():
    x = np.array([-0.0, 0.0, np.nan, -np.nan, 1.0], dtype=np.float32)
    x.view(np.uint32)[3] |= 0x1234  # a NaN with a payload
    r = cutopk.top_k(x, 5, nan="largest")
    assert r.indices.tolist() == [2, 3, 4, 0, 1]
    np.testing.assert_array_equal(r.values.view(np.uint32), x.view(np.uint32)[[2, 3, 4, 0, 1]])


def test_uint64_and_int64_extremes_keep_full_range():
    x = np.array([2**64 - 1, 2**53 + 1, 2**53, 0], dtype=np.uint64)
    assert cutopk.top_k(x, 3).indices.tolist() == [0, 1, 2]
    y = np.array([-(2**63), 2**63 - 1, 2**53 + 1, 2**53], dtype=np.int64)
    assert cutopk.top_k(y, 4).indices.tolist() == [1, 2, 3, 0]


def test_non_native_byte_order_and_read_only():
    x = np.arange(50, dtype=">f4")
    x.flags.writeable = False
    r = check_top_k(x, 5)
    assert r.values.dtype == x.dtype


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix
def test_array_subclasses():
    check_top_k(np.matrix([[3, 1, 2], [0, 5, 5]]), 2)
    with pytest.raises(TypeError, match="a: expected an array without a mask"):
        cutopk.top_k(np.ma.masked_array(np.arange(10.0), mask=np.arange(10) > 7), 3)


def test_tiny_rows_huge_batch():
    rng = np.random.default_rng(4)
    x = make_values(rng, np.float16, (200_000, 3), "few_distinct")
    r = cutopk.top_k(x, 2, mode="smallest")
    # Spot-check a slice against the reference (the reference is a Python loop over rows).
    part = reference_top_k(x[:2000], 2, mode="smallest")
    np.testing.assert_array_equal(r.indices[:2000], part[1])
    np.testing.assert_array_equal(cutopk.top_k(x[:, :1], 1).indices, np.zeros((200_000, 1), np.int64))


# The prefilter path must stay exact when its pivot is unlucky or useless.


def test_prefilter_falls_back_when_a_row_is_short():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((8, 4096)).astype(np.float32)
    # Row 3: the sample (every 4th element) sees only small values, the row's best are elsewhere.
    x[3] = -1.0
    x[3, 1::4] = np.arange(1024, dtype=np.float32)
    for nan in ("last", "largest"):
        check_top_k(x, 64, nan=nan)


def test_prefilter_settles_ties_at_the_pivot(monkeypatch):
    # The pivot is the K-th value (one 1, the rest 0): no exact pass may run.
    x = np.zeros((4, 8192), dtype=np.float32)
    x[:, 5] = 1
    x[2, 7000] = -0.0  # ties with +0.0
    monkeypatch.setattr(_numpy_exact, "select_exact", None)
    cols = _pivot_filter.select_prefiltered(x, 64, True, False, "index")
    assert cols.tolist() == [[*range(64)]] * 4
    monkeypatch.undo()
    check_top_k(x, 64)
    check_top_k(-x, 64, mode="smallest", sorted="index")


def test_prefilter_heavy_ties_below_k_go_to_the_exact_path():
    # A third of each row ties at a value just below the pivot's: not the K-th value.
    rng = np.random.default_rng(5)
    x = rng.random((6, 8192)).astype(np.float32)
    x[rng.random(x.shape) < 0.4] = 0.999
    x[3] = 0.5  # an all-equal row beside them
    for k in (1, 64, 500):
        check_top_k(x, k)
        check_top_k(x, k, mode="smallest")


def test_prefilter_with_many_nans_first():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 4096))
    x[rng.random(x.shape) < 0.5] = np.nan
    check_top_k(x, 100, nan="largest")
    check_top_k(x, 100, nan="last")
    check_top_k(x, 100, nan="largest", mode="smallest")


def test_reference_itself_on_a_hand_example():
    x = np.array([1, 2, 2, 3, np.nan])
    vals, idx = reference_top_k(x, 3)
    assert idx.tolist() == [3, 1, 2]
    assert vals.tolist() == [3, 2, 2]
    _, idx = reference_top_k(x, 2, nan="largest")
    assert idx.tolist() == [4, 3]
    _, idx = reference_top_k(x, 2, mode="smallest", nan="largest")
    assert idx.tolist() == [0, 1]


def test_algorithms_and_forced_algorithm():
    assert cutopk.algorithms("numpy") == ("select",)
    x = np.arange(10)
    check_top_k(x, 3, algorithm="select")
    with pytest.raises(ValueError, match="algorithm"):
        cutopk.top_k(x, 3, algorithm="bitonic")


@pytest.mark.parametrize("dtype", DTYPES)
def test_preference_keys_follow_the_key_traits_definition(dtype):
    """``_keys.preference_keys`` (vectorised, branch-free) against the per-element definition of
    ``kernels/key_traits.cuh``: floats flip to sign-magnitude order, -0.0 takes +0.0's key, NaN
    takes 0 or all-ones; integers flip the sign bit; smallest inverts."""
    from cutopk._request import dtypes as _dtypes
    from cutopk._request.keys import preference_keys

    dt = dtype_of(dtype)
    info = _dtypes.info(dt)
    key_t = info.key_dtype
    width = 8 * key_t.itemsize
    top, sign = (1 << width) - 1, 1 << (width - 1)
    rng = np.random.default_rng(9)
    bits = rng.integers(0, top, 3000, dtype=key_t, endpoint=True)
    bits[:6] = [0, sign, top, sign - 1, 1, sign + 1]
    if info.is_float:
        inf = int(np.array(np.inf, dtype=dt).view(key_t))
        bits[6:10] = [inf, inf | sign, inf + 1, (inf + 1) | sign]  # +-inf, a NaN of each sign
    x = bits.view(dt)

    def key(b: int, largest: bool, nan_first: bool) -> int:
        if info.is_float:
            if (b & ~sign & top) > inf:
                return top if nan_first else 0
            k = sign if b == sign else (top - b if b & sign else b | sign)
        else:
            k = b ^ sign if info.is_signed else b
        return k if largest else top - k

    for largest in (True, False):
        for nan_first in (False, True) if largest else (False,):
            with np.errstate(all="ignore"):
                got = preference_keys(x, largest, nan_first)
            want = [key(int(b), largest, nan_first) for b in bits]
            assert got.dtype == key_t
            assert got.tolist() == want


@pytest.mark.parametrize("dtype", ("float32", "float64", "int32", "uint64", "float16"))
def test_outer_axis_is_filtered_in_place(dtype, monkeypatch):
    """Axis 0 of C arrays (whole, column slices, reversed) with K small against the axis: the
    in-place outer filter, with ties, NaNs, all-equal and short columns beside usual ones."""
    calls = []
    original = _outer_axis.select_outer
    monkeypatch.setattr(_outer_axis, "select_outer", lambda *a: calls.append(1) or original(*a))
    rng = np.random.default_rng(12)
    base = make_values(rng, dtype_of(dtype), (3000, 70), "uniform")
    base[:, 3] = base[0, 3]  # an all-equal column
    base[::2, 5] = base[7, 5]  # half of a column ties
    if "float" in dtype:
        base[rng.random(base.shape) < 0.05] = np.nan
        base[:, 9] = np.nan
    for x in (base, base[:, 10:60], base[::-1], base[100:2900:3]):
        for k in (1, 7, 64):
            for nan in ("last", "largest"):
                check_top_k(x, k, axis=0, nan=nan)
            check_top_k(x, k, axis=0, mode="smallest", sorted="index")
    assert calls or dtype == "float16"


def test_describe_tells_the_route_and_the_copies():
    from cutopk._request import checks as _checks

    def describe(a, k, axis=-1):
        req = _checks.normalize(a, k, axis, "largest", True, "last", np.int64, "numpy", "auto")
        return _numpy_backend.describe(a, req)

    a = np.zeros((512, 4096), np.float32)
    assert describe(a, 16, 0) | {"threads": 0, "threads_why": ""} == {
        "route": "filter-outer",
        "threads": 0,
        "threads_why": "",
        "copy": False,
        "block_copies": False,
        "compiled": "turned off by CUTOPK_COMPILED=0",  # tests/numpy/conftest.py
    }
    assert describe(a, 16)["route"] == "filter" and not describe(a, 16)["block_copies"]
    assert describe(a, 600)["route"] == "exact"
    assert describe(np.zeros((16384, 128), np.float32), 8)["route"] == "composite"
    assert describe(np.zeros((5, 9)), 2)["route"] == "sort"  # 64-bit
    assert describe(np.zeros((65536, 8), np.float32), 2)["route"] == "sorted"
    assert describe(np.zeros((8, 200), np.int8), 2)["route"] == "sorted"  # small: one sort
    assert describe(np.zeros(1 << 21), 5)["route"] == "long-rows"
    assert describe(np.zeros((3, 600, 4)), 2, 1)["copy"] is True  # the middle axis: no 2-D view
    assert describe(a.astype(">f4"), 16)["block_copies"] is True
    assert describe(a, 0)["route"] == "none"
