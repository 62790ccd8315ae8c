"""cutopk.segmented_top_k against the stable reference run segment by segment: empty segments,
one huge segment among tiny ones, many tiny ones, segments shorter than k, both of its routes
(long segments in place, short ones gathered by length class, in blocks), every mode, order, NaN
policy and dtype, the NumPy backend and the simulator; its offset checks and errors; torch and
CuPy data."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.backends import cuda_unavailable_reason, require
from support.inputs import DTYPES, dtype_of, make_values
from support.reference import assert_same, reference_top_k

import cutopk
from cutopk.irregular import segmented as _segmented

MODES = ("largest", "smallest")
ORDERS = (True, "value", "index", False)
NANS = ("last", "largest")


def reference_segmented(data, offsets, k, *, mode="largest", sorted=True, nan="last"):
    """Each segment through the test reference, then padded with (-1, 0) to k."""
    offsets = np.asarray(offsets, dtype=np.int64)
    segments = offsets.size - 1
    values = np.zeros((segments, k), dtype=data.dtype)
    indices = np.full((segments, k), -1, dtype=np.int64)
    for s in range(segments):
        seg = data[offsets[s] : offsets[s + 1]]
        kk = min(k, seg.size)
        if kk:
            v, i = reference_top_k(seg, kk, mode=mode, sorted=sorted, nan=nan)
            values[s, :kk], indices[s, :kk] = v, i
    return values, indices


def check(data, offsets, k, *, index_dtype=np.int64, **kw):
    got = cutopk.segmented_top_k(data, offsets, k, index_dtype=index_dtype, **kw)
    expected = reference_segmented(
        data, offsets, k, **{n: kw[n] for n in ("mode", "sorted", "nan") if n in kw}
    )
    # Padding stays last whatever the order: compare sorted=False results with padding excluded
    # from the reordering by checking it in place first.
    real = expected[1] >= 0
    np.testing.assert_array_equal(got.indices < 0, ~real)
    assert_same(got, expected, index_dtype=index_dtype, order=kw.get("sorted", True))
    return got


def offsets_of(lengths, start=0) -> np.ndarray:
    return np.concatenate([[start], start + np.cumsum(lengths)]).astype(np.int64)


@pytest.fixture
def small_routes(monkeypatch):
    """Both routes, both ways of gathering and the blocking on small inputs: long segments from
    40 elements, row copies from width 8, blocks of at most 64 gathered elements."""
    monkeypatch.setattr(_segmented, "LONG_SEGMENT", 40)
    monkeypatch.setattr(_segmented, "ROW_COPY_WIDTH", 8)
    monkeypatch.setattr(_segmented, "BLOCK_ELEMENTS", 64)


@pytest.mark.parametrize("dist", ["few_distinct", "nan", "all_equal", "zeros"])
def test_mixed_lengths_every_mode_order_and_nan_policy(dist, small_routes):
    rng = np.random.default_rng(len(dist))
    lengths = [0, 1, 2, 3, 7, 0, 16, 17, 39, 40, 41, 100, 0, 5, 33, 64, 1, 1, 0]
    data = make_values(rng, np.float32, (sum(lengths) + 5,), dist)
    offsets = offsets_of(lengths, start=2)  # neither starting at 0 nor ending at len(data)
    ks = itertools.cycle((0, 1, 3, 16, 40, 120))
    for mode, order, nan in itertools.product(MODES, ORDERS, NANS):
        check(data, offsets, next(ks), mode=mode, sorted=order, nan=nan)


def test_one_huge_segment_among_many_tiny_ones():
    """The real route sizes: one segment of 200,000 (read in place) among 3,000 tiny ones."""
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 4, 3001)
    lengths[1234] = 200_000
    data = make_values(rng, np.float64, (int(lengths.sum()),), "few_distinct")
    offsets = offsets_of(lengths)
    for order, mode in zip(ORDERS, itertools.cycle(MODES), strict=False):
        check(data, offsets, 50, sorted=order, mode=mode)


def test_many_tiny_segments():
    rng = np.random.default_rng(2)
    lengths = rng.integers(0, 6, 10_000)
    data = make_values(rng, np.int16, (int(lengths.sum()),), "few_distinct")
    for k in (1, 4, 8):
        check(data, offsets_of(lengths), k, sorted=True if k != 4 else "index")


def test_empty_inputs_and_k_zero():
    data = np.arange(10.0)
    got = check(data, [0, 0, 0], 3)  # two empty segments: padding only
    assert got.values.shape == (2, 3) and (got.indices == -1).all()
    got = check(data, [4], 3)  # no segment
    assert got.values.shape == (0, 3)
    got = check(np.zeros(0, np.float32), np.array([0, 0]), 2)
    assert got.indices.tolist() == [[-1, -1]]
    assert check(data, [0, 4, 10], 0).values.shape == (2, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype(dtype, small_routes):
    dt = dtype_of(dtype)
    rng = np.random.default_rng(3)
    lengths = [5, 0, 50, 12, 1, 45]
    data = make_values(rng, dt, (sum(lengths),), "extremes")
    for (mode, nan), order in zip(itertools.product(MODES, NANS), ORDERS, strict=True):
        check(data, offsets_of(lengths), 10, mode=mode, nan=nan, sorted=order)


def test_offsets_kinds_and_data_layouts(small_routes):
    rng = np.random.default_rng(4)
    base = make_values(rng, np.float32, (400,), "few_distinct")
    strided = base[::-3]  # negative stride
    lengths = [10, 0, 60, 3, 30]
    off = offsets_of(lengths, start=1)
    for offsets in (off, off.tolist(), off.astype(np.int32), off.astype(np.uint64), off.astype(np.uint8)):
        check(strided, offsets, 8)
    swapped = strided.astype(">f4")
    got = check(swapped, off, 8)
    assert got.values.dtype == np.dtype(">f4")
    got = check(strided, off, 8, index_dtype=np.int32)
    assert got.indices.dtype == np.int32


@given(
    lengths=st.lists(st.integers(0, 70), min_size=0, max_size=12),
    k=st.integers(0, 80),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from(["int8", "float16", "uint64", "float32", "int64"]),
    dist=st.sampled_from(["few_distinct", "nan", "zeros", "extremes", "all_equal"]),
    order=st.sampled_from(ORDERS),
    mode=st.sampled_from(MODES),
    nan=st.sampled_from(NANS),
    long_segment=st.sampled_from([1, 8, 1 << 16]),
)
def test_property_against_the_reference(lengths, k, seed, dtype, dist, order, mode, nan, long_segment):
    rng = np.random.default_rng(seed)
    data = make_values(rng, np.dtype(dtype), (sum(lengths) + 3,), dist)
    saved = _segmented.LONG_SEGMENT
    _segmented.LONG_SEGMENT = long_segment  # (hypothesis and function-scoped fixtures do not mix)
    try:
        check(data, offsets_of(lengths, start=1), k, mode=mode, sorted=order, nan=nan)
    finally:
        _segmented.LONG_SEGMENT = saved


def test_simulator_backend(small_routes):
    require("sim")
    rng = np.random.default_rng(5)
    lengths = [0, 3, 45, 17, 1, 64, 9]
    data = make_values(rng, np.float32, (sum(lengths),), "nan")
    for mode, nan, order in [
        ("largest", "last", True),
        ("smallest", "largest", "index"),
        ("largest", "largest", False),
    ]:
        check(data, offsets_of(lengths), 12, mode=mode, nan=nan, sorted=order, backend="sim")


def test_torch_cpu_data():
    torch = pytest.importorskip("torch", reason="needs torch")
    data = torch.tensor([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0])
    got = cutopk.segmented_top_k(data, torch.tensor([0, 4, 4, 7]), 3)
    assert isinstance(got.values, torch.Tensor) and isinstance(got.indices, torch.Tensor)
    assert got.indices.tolist() == [[2, 0, 1], [-1, -1, -1], [1, 0, 2]]
    assert got.values.tolist() == [[4.0, 3.0, 1.0], [0.0, 0.0, 0.0], [9.0, 5.0, 2.0]]


BAD = [
    (
        {"offsets": [0, 5, 4, 8]},
        ValueError,
        r"^offsets: expected non-decreasing positions, got offsets\[1\]=5 > offsets\[2\]=4",
    ),
    ({"offsets": [-1, 4]}, ValueError, r"^offsets: expected offsets\[0\] >= 0, got -1"),
    (
        {"offsets": [0, 11]},
        ValueError,
        r"^offsets: expected offsets\[-1\] <= 10 \(the length of data\), got 11",
    ),
    ({"offsets": np.array([0, 2**64 - 1], np.uint64)}, ValueError, r"^offsets: expected offsets\[-1\] <= 10"),
    ({"offsets": np.zeros((2, 2), np.int64)}, ValueError, r"^offsets: expected a 1-D array"),
    ({"offsets": np.zeros(0, np.int64)}, ValueError, r"^offsets: expected S \+ 1 >= 1 positions"),
    ({"offsets": []}, ValueError, r"^offsets: expected S \+ 1 >= 1 positions"),
    ({"offsets": np.array([0.0, 4.0])}, TypeError, r"^offsets: expected an integer array, got dtype float64"),
    ({"offsets": np.array([False, True])}, TypeError, r"^offsets: expected an integer array, got dtype bool"),
    ({"offsets": "0,4"}, TypeError, r"^offsets: expected a 1-D integer array"),
    ({"offsets": np.ma.masked_array([0, 4])}, TypeError, r"^offsets: expected an array without a mask"),
    ({"data": np.ma.masked_array(np.arange(10.0))}, TypeError, r"^data: expected an array without a mask"),
    ({"data": np.zeros((2, 5))}, ValueError, r"^data: expected a 1-D array, got shape \(2, 5\)"),
    ({"data": np.zeros(10, bool)}, TypeError, r"^data: unsupported dtype bool"),
    ({"data": [1.0, 2.0]}, TypeError, r"^data: expected a NumPy array"),
    ({"k": -1}, ValueError, r"^k: expected k >= 0, got k=-1"),
    ({"k": 2.0}, TypeError, r"^k: expected an integer, got float"),
    ({"k": True}, TypeError, r"^k: expected an integer, got bool"),
    ({"mode": "max"}, ValueError, r"^mode: expected one of"),
    ({"sorted": 1}, ValueError, r"^sorted: expected one of"),
    ({"nan": "first"}, ValueError, r"^nan: expected one of"),
    ({"index_dtype": np.uint32}, ValueError, r"^index_dtype: expected a signed type .* got uint32"),
    ({"index_dtype": np.uint64}, ValueError, r"^index_dtype: expected a signed type"),
    ({"index_dtype": np.int16}, ValueError, r"^index_dtype: expected one of"),
    ({"backend": "cuda"}, TypeError, r"^backend: backend='cuda' expects a CuPy/CUDA array"),
    ({"backend": "gpu"}, ValueError, r"^backend: expected one of"),
    ({"algorithm": "radix"}, ValueError, r"^algorithm: expected 'auto' or one of \('select',\)"),
    ({"algorithm": 3}, ValueError, r"^algorithm: expected 'auto' or an algorithm name"),
]


@pytest.mark.parametrize(("bad", "error", "message"), BAD, ids=[m[:45] for _, _, m in BAD])
def test_errors_name_the_argument(bad, error, message):
    kw = {"data": np.arange(10.0), "offsets": [0, 4, 10], "k": 2, **bad}
    data, offsets, k = kw.pop("data"), kw.pop("offsets"), kw.pop("k")
    with pytest.raises(error, match=message):
        cutopk.segmented_top_k(data, offsets, k, **kw)


def test_int32_indices_too_narrow_for_the_longest_segment():
    """Checked before any work: a zero-stride segment of 2**31 + 1 elements costs no memory."""
    data = np.broadcast_to(np.float32(1.0), (2**31 + 6,))
    with pytest.raises(ValueError, match=r"^index_dtype: int32 cannot hold indices up to 2147483648"):
        cutopk.segmented_top_k(data, [0, 5, 5, 2**31 + 6], 3, index_dtype=np.int32)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_cupy_data(dtype, small_routes):
    reason = cuda_unavailable_reason()
    if reason:
        pytest.skip(f"needs a CUDA GPU: {reason}")
    import cupy

    rng = np.random.default_rng(6)
    lengths = [0, 3, 45, 17, 1, 64, 9, 300]
    data = make_values(rng, np.dtype(dtype), (sum(lengths),), "few_distinct")
    for mode, order in itertools.product(MODES, ORDERS):
        for offsets in (offsets_of(lengths), cupy.asarray(offsets_of(lengths))):
            got = cutopk.segmented_top_k(cupy.asarray(data), offsets, 20, mode=mode, sorted=order)
            assert isinstance(got.values, cupy.ndarray) and isinstance(got.indices, cupy.ndarray)
            expected = reference_segmented(data, offsets_of(lengths), 20, mode=mode, sorted=order)
            assert_same((got.values.get(), got.indices.get()), expected, order=order)


@pytest.mark.skipif(not os.environ.get("CUTOPK_SLOW"), reason="about 10 s of CPU: set CUTOPK_SLOW=1")
def test_more_than_2_31_elements_in_all():
    """Offsets past 2**31 (int64 positions throughout): a zero-stride input of 2**31 + 6 int8
    elements (no memory), one short segment, one empty, one of 2**31 + 1 elements."""
    data = np.broadcast_to(np.int8(1), (2**31 + 6,))
    got = cutopk.segmented_top_k(data, [0, 5, 5, 2**31 + 6], 3)
    np.testing.assert_array_equal(got.indices, [[0, 1, 2], [-1, -1, -1], [0, 1, 2]])
    np.testing.assert_array_equal(got.values, [[1, 1, 1], [0, 0, 0], [1, 1, 1]])


@pytest.mark.parametrize("backend", ["numpy", "sim"])
@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_values_of_a_tensor_that_requires_grad_carry_its_gradient(backend, index_dtype):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    require(backend)
    data = torch.tensor([5.0, 1.0, 7.0, 3.0, 3.0, 9.0], requires_grad=True)
    r = cutopk.segmented_top_k(
        data, np.array([0, 3, 3, 6]), 2, backend=backend, index_dtype=getattr(torch, index_dtype)
    )
    assert r.values.grad_fn is not None and r.indices.grad_fn is None
    (r.values * torch.tensor([1.0, 10.0])).sum().backward()  # padding (segment 1) passes nothing
    assert data.grad.tolist() == [10.0, 0.0, 1.0, 10.0, 0.0, 1.0]
    x = torch.randn(40, dtype=torch.float64, requires_grad=True)
    offsets = [0, 3, 3, 20, 40]
    assert torch.autograd.gradcheck(
        lambda t: cutopk.segmented_top_k(t, offsets, 5, backend=backend).values, (x,)
    )
    with torch.no_grad():
        assert cutopk.segmented_top_k(data, [0, 6], 2).values.grad_fn is None
