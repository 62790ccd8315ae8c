"""cutopk.merge_top_k against an independent reference (a stable lexsort over every candidate of
the parts, sharing no code with cutopk) and against cutopk.top_k on the whole: 2 to 64 parts,
interleaved (not contiguous) candidate sets, ties and NaNs across parts, padding that must never
win, every dtype, index dtype, mode, order and NaN policy; its errors; torch and CuPy parts."""

from __future__ import annotations

import doctest
import itertools
import pathlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.backends import cuda_unavailable_reason
from support.inputs import DTYPES, dtype_of, make_values
from support.reference import assert_same, bits

import cutopk

MODES = ("largest", "smallest")
ORDERS = (True, "value", "index", False)
NANS = ("last", "largest")
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _rank_keys(values: np.ndarray, largest: bool, nan_largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """(nan class, rank) sort keys for a lexsort, ascending = preferred first. Ranks come from
    np.unique over the values (float64 for floats: exact for every float dtype), so equal values,
    -0.0 and +0.0 included, share a rank; NaN gets its own class."""
    if values.dtype.kind == "f" or values.dtype.name == "bfloat16":
        as_float = values.astype(np.float64)
        nan = np.isnan(as_float)
        numbers = np.where(nan, 0.0, as_float)
    else:
        nan = np.zeros(values.shape, dtype=bool)
        numbers = values
    _, rank = np.unique(numbers, return_inverse=True)
    rank = rank.reshape(values.shape).astype(np.int64)
    if largest:
        rank = -rank
    nan_first = nan_largest and largest
    nan_class = np.where(nan, 0, 1) if nan_first else np.where(nan, 1, 0)
    return nan_class, rank


def reference_merge(parts, k, mode="largest", sorted=True, nan="last"):
    """The merge by definition: per row, the real candidates (index >= 0) of every part in one
    stable lexsort by (NaN class, value rank, index), the first k, then padding (-1, 0)."""
    values = np.concatenate([np.asarray(v) for v, _ in parts], axis=-1)
    indices = np.concatenate([np.asarray(i) for _, i in parts], axis=-1)
    batch = values.shape[:-1]
    rows = int(np.prod(batch))  # reshape(-1, 0) is ambiguous
    rows_v = values.reshape(rows, values.shape[-1])
    rows_i = indices.reshape(rows, indices.shape[-1]).astype(np.int64)
    out_v = np.zeros((rows_v.shape[0], k), dtype=values.dtype)
    out_i = np.full((rows_v.shape[0], k), -1, dtype=np.int64)
    for r in range(rows_v.shape[0]):
        real = rows_i[r] >= 0 if indices.dtype.kind == "i" else np.ones(rows_i.shape[1], bool)
        v, i = rows_v[r][real], rows_i[r][real]
        nan_class, rank = _rank_keys(v, mode == "largest", nan == "largest")
        order = np.lexsort((i, rank, nan_class))[:k]  # last key is the primary one
        if sorted in ("index", False):
            order = order[np.argsort(i[order], kind="stable")]
        out_v[r, : order.size] = v[order]
        out_i[r, : order.size] = i[order]
    return out_v.reshape(*batch, k), out_i.reshape(*batch, k)


def make_parts(x, m, k, rng, *, mode="largest", nan="last", index_dtype=np.int64, pad_value=None):
    """Split the columns of ``x`` (last axis) into ``m`` interleaved disjoint sets (some may be
    empty) and return each set's top_k (by the merge's ``mode``/``nan``) with global indices, in
    a random order per part. With
    ``pad_value``, some parts get extra padding entries (index -1) holding that value."""
    n = x.shape[-1]
    owner = rng.integers(0, m, n)
    parts = []
    for j in range(m):
        cols = np.flatnonzero(owner == j)  # ascending: position order is global index order
        kk = min(k, cols.size)
        order = ORDERS[rng.integers(0, len(ORDERS))]
        top = cutopk.top_k(x[..., cols], kk, mode=mode, nan=nan, sorted=order, index_dtype=index_dtype)
        values, indices = top.values, cols[top.indices.astype(np.int64)].astype(index_dtype)
        if pad_value is not None and rng.random() < 0.5:
            extra = int(rng.integers(1, 4))
            values = np.concatenate([values, np.full((*x.shape[:-1], extra), pad_value, x.dtype)], axis=-1)
            indices = np.concatenate([indices, np.full((*x.shape[:-1], extra), -1, index_dtype)], axis=-1)
            perm = rng.permutation(values.shape[-1])  # padding anywhere in the part
            values, indices = values[..., perm], indices[..., perm]
        parts.append((values, indices))
    return parts


def check(parts, k, *, whole=None, index_dtype=np.int64, **kw):
    """merge_top_k against the lexsort reference and, given the whole array, against top_k."""
    got = cutopk.merge_top_k(parts, k, **kw)
    order = kw.get("sorted", True)
    assert_same(got, reference_merge(parts, k, **kw), index_dtype=index_dtype, order=order)
    if whole is not None:
        expected = cutopk.top_k(whole, k, index_dtype=index_dtype, **kw)
        assert_same(got, expected, index_dtype=index_dtype, order=order)
        if order is not False:
            np.testing.assert_array_equal(got.indices, expected.indices)
    return got


@pytest.mark.parametrize("m", [2, 3, 5, 8, 16, 33, 64])
@pytest.mark.parametrize("dist", ["few_distinct", "nan", "all_equal", "zeros"])
def test_many_parts_ties_and_nans_across_parts(m, dist):
    rng = np.random.default_rng(m * 7 + len(dist))
    x = make_values(rng, np.float32, (3, 311), dist)
    for (mode, nan, order), k in zip(
        itertools.product(MODES, NANS, ORDERS), itertools.cycle((1, 5, 64, 200, 311)), strict=False
    ):
        parts = make_parts(x, m, k, rng, mode=mode, nan=nan)
        check(parts, k, whole=x, mode=mode, nan=nan, sorted=order)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_at_its_extremes(dtype):
    dt = dtype_of(dtype)
    rng = np.random.default_rng(11)
    for dist, (mode, nan) in zip(("extremes", "few_distinct", "nan" if dt.kind == "f" else "sorted"),
                                 itertools.product(MODES, NANS), strict=False):  # fmt: skip
        x = make_values(rng, dt, (4, 97), dist)
        for order in ORDERS:
            check(
                make_parts(x, 6, 20, rng, mode=mode, nan=nan), 20, whole=x, mode=mode, nan=nan, sorted=order
            )


def test_integers_keep_their_full_range():
    x = np.array([[2**64 - 1, 2**53 + 1, 2**53, 2**64 - 1, 0, 2**53 + 1]], dtype=np.uint64)
    parts = [(x[:, [0, 2]], np.array([[0, 2]])), (x[:, [5, 1, 3]], np.array([[5, 1, 3]]))]
    got = cutopk.merge_top_k(parts, 4)
    assert got.indices.tolist() == [[0, 3, 1, 5]] and got.values.tolist() == [
        [2**64 - 1] * 2 + [2**53 + 1] * 2
    ]
    y = np.array([[-(2**63), 2**63 - 1, -(2**63) + 1]], dtype=np.int64)
    got = cutopk.merge_top_k(
        [(y[:, :1], np.array([[7]])), (y[:, 1:], np.array([[3, 9]]))], 2, mode="smallest"
    )
    assert got.indices.tolist() == [[7, 9]]


@pytest.mark.parametrize("index_dtype", [np.int64, np.int32, np.uint32, np.uint64])
def test_index_dtypes(index_dtype):
    rng = np.random.default_rng(12)
    x = make_values(rng, np.int16, (2, 150), "few_distinct")
    for order in ORDERS:
        parts = make_parts(x, 9, 30, rng, index_dtype=index_dtype)
        got = check(parts, 30, whole=x, index_dtype=index_dtype, sorted=order)
        assert got.indices.dtype == index_dtype


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("nan", NANS)
def test_padding_never_wins(mode, nan):
    """Padding entries (index -1) hold the most tempting values (NaN, +-inf, 0): none is picked
    while a real candidate is left, and rows short of real candidates end in (-1, 0)."""
    rng = np.random.default_rng(13)
    x = make_values(rng, np.float64, (3, 40), "nan")
    for pad_value, order, k in itertools.product((np.nan, np.inf, -np.inf, 0.0), ORDERS, (3, 40)):
        parts = make_parts(x, 4, k, rng, mode=mode, nan=nan, pad_value=pad_value)
        check(parts, k, whole=x, mode=mode, nan=nan, sorted=order)
    # More slots than real candidates: the real ones first, in the asked order, then padding.
    parts = [
        (np.array([[np.nan, 2.0, 9.0]]), np.array([[-1, 4, -1]])),
        (np.array([[2.0, np.inf]]), np.array([[1, -1]])),
    ]
    for order in ORDERS:
        got = check(parts, 4, mode=mode, nan=nan, sorted=order)
        assert got.indices.tolist() == [[1, 4, -1, -1]] and got.values.tolist() == [[2.0, 2.0, 0.0, 0.0]]


def test_signed_zeros_and_nan_payloads_keep_their_bits():
    raw = np.array([0x8000, 0x0000, 0x7E00, 0xFE01, 0x8000, 0x7C00, 0x0000, 0x7E05, 0xFC00], np.uint16)
    x = raw.view(np.float16)[None, :]
    rng = np.random.default_rng(14)
    for mode, nan, order in itertools.product(MODES, NANS, ORDERS):
        for k in (1, 3, 5, 9):
            got = check(
                make_parts(x, 3, k, rng, mode=mode, nan=nan), k, whole=x, mode=mode, nan=nan, sorted=order
            )
            assert set(bits(got.values).ravel().tolist()) <= set(raw.tolist())


def test_batch_shapes_zero_rows_and_k_zero():
    rng = np.random.default_rng(15)
    x = make_values(rng, np.float32, (2, 3, 50), "few_distinct")
    check(make_parts(x, 5, 10, rng), 10, whole=x)
    check(make_parts(x, 5, 10, rng), 0, whole=x)
    empty = np.zeros((0, 4), np.float32)
    got = check([(empty, np.zeros((0, 4), np.int64)), (empty[:, :2], np.zeros((0, 2), np.int64))], 3)
    assert got.values.shape == (0, 3)
    one = cutopk.merge_top_k([(np.array([3.0, 1.0]), np.array([5, 2]))], 2, sorted="index")
    assert one.indices.tolist() == [2, 5] and one.values.tolist() == [1.0, 3.0]


def test_non_native_byte_order_and_strided_parts():
    x = np.array([[3, 9, 1, 9, 7]], dtype=">i4")
    parts = [(x[:, ::2], np.array([[0, 2, 4]], np.int32)), (x[:, 1::2], np.array([[1, 3]], np.int32))]
    got = cutopk.merge_top_k(parts, 3)
    assert got.values.dtype == np.dtype(">i4") and got.indices.dtype == np.int32
    assert got.values.tolist() == [[9, 9, 7]] and got.indices.tolist() == [[1, 3, 4]]
    assert got.values.flags.c_contiguous and got.indices.flags.c_contiguous


@pytest.mark.parametrize("index_dtype", [">i8", ">i4", ">u8", "<i8"])
@pytest.mark.parametrize("values_dtype", [">f4", "<f4", ">i2"])
def test_parts_of_either_byte_order_are_merged_as_native_ones(values_dtype, index_dtype):
    """Issue 49 (9): big-endian indices (and values, part by part in either byte order) are
    accepted, as top_k and segmented_top_k accept them; the result takes parts[0]'s dtypes."""
    rng = np.random.default_rng(49)
    x = make_values(rng, np.dtype(values_dtype).newbyteorder("="), (3, 40), "few_distinct")
    idt = np.dtype(index_dtype).newbyteorder("=")
    native = make_parts(x, 4, 6, rng, index_dtype=idt, pad_value=x.flat[0] if idt.kind == "i" else None)
    swapped = [
        (v.astype(values_dtype) if j % 2 == 0 else v, i.astype(index_dtype) if j != 1 else i)
        for j, (v, i) in enumerate(native)
    ]
    for order in ORDERS:
        got = cutopk.merge_top_k(swapped, 6, sorted=order)
        want = cutopk.merge_top_k(native, 6, sorted=order)
        assert got.values.dtype == np.dtype(values_dtype) and got.indices.dtype == np.dtype(index_dtype)
        as_native = (got.values.astype(x.dtype), got.indices.astype(idt))
        assert_same(as_native, want, index_dtype=idt)
        assert_same(as_native, reference_merge(native, 6, sorted=order), index_dtype=idt, order=order)


def test_sharded_vocabulary_example():
    """The use it is made for: a vocabulary split over shards, each shard's top_k with its
    offset added, merged; every mode and NaN policy, 8 shards of uneven width."""
    rng = np.random.default_rng(16)
    logits = make_values(rng, np.float16, (4, 1000), "few_distinct")
    edges = np.sort(rng.choice(np.arange(1, 1000), 7, replace=False))
    for mode, nan, order in itertools.product(MODES, NANS, ORDERS):
        parts = []
        for lo, hi in itertools.pairwise([0, *edges.tolist(), 1000]):
            top = cutopk.top_k(logits[:, lo:hi], min(50, hi - lo), mode=mode, nan=nan, sorted=False)
            parts.append((top.values, top.indices + lo))
        check(parts, 50, whole=logits, mode=mode, nan=nan, sorted=order)


@given(
    sizes=st.lists(st.integers(0, 12), min_size=1, max_size=10),
    rows=st.integers(1, 3),
    k=st.integers(0, 70),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from(["int8", "float16", "uint64", "float32", "float64", "int64"]),
    dist=st.sampled_from(["few_distinct", "nan", "zeros", "extremes", "all_equal", "inf"]),
    order=st.sampled_from(ORDERS),
    mode=st.sampled_from(MODES),
    nan=st.sampled_from(NANS),
    shuffle=st.booleans(),
)
def test_property_merge_of_chunks_is_top_k_of_the_whole(
    sizes, rows, k, seed, dtype, dist, order, mode, nan, shuffle
):
    """merge_top_k of the top_k of disjoint chunks == top_k of the whole, whatever the order of
    the parts and of each part's entries."""
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    x = make_values(rng, np.dtype(dtype), (rows, n), dist)
    k = min(k, n)
    edges = np.cumsum([0, *sizes])
    parts = []
    for lo, hi in itertools.pairwise(edges.tolist()):
        top = cutopk.top_k(x[:, lo:hi], min(k, hi - lo), mode=mode, nan=nan, sorted=order)
        parts.append((top.values, top.indices + lo))
    if shuffle:
        parts = [parts[i] for i in rng.permutation(len(parts))]
    got = cutopk.merge_top_k(parts, k, mode=mode, sorted=order, nan=nan)
    assert_same(got, cutopk.top_k(x, k, mode=mode, sorted=order, nan=nan), order=order)
    assert_same(got, reference_merge(parts, k, mode=mode, sorted=order, nan=nan), order=order)


def test_k_may_be_any_index_integer():
    x = np.array([[3, 1, 2]])
    parts = [(x, np.array([[0, 1, 2]]))]
    for k in (2, np.int8(2), np.uint64(2), np.array(2)):
        assert cutopk.merge_top_k(parts, k).indices.tolist() == [[0, 2]]


def test_torch_cpu_parts():
    torch = pytest.importorskip("torch", reason="needs torch")
    x = torch.tensor([[4.0, float("nan"), 9.0, 9.0, -0.0, 0.0]])
    parts = [
        (x[:, :3], torch.tensor([[0, 1, 2]])),
        (x[:, 3:], torch.tensor([[3, 4, 5]])),
    ]
    got = cutopk.merge_top_k(parts, 4, nan="largest")
    assert isinstance(got.values, torch.Tensor) and isinstance(got.indices, torch.Tensor)
    assert got.indices.tolist() == [[1, 2, 3, 0]]
    expected = cutopk.top_k(x, 4, nan="largest")
    assert torch.equal(got.indices, expected.indices)
    with pytest.raises(TypeError, match=r"^k: expected an integer, got bool"):
        cutopk.merge_top_k(parts, torch.tensor(True))
    assert cutopk.merge_top_k(parts, torch.tensor(1)).indices.tolist() == [[2]]


def test_doctests_of_the_public_docstrings_and_the_docs():
    for func in (cutopk.merge_top_k, cutopk.segmented_top_k, cutopk.plan):
        finder = doctest.DocTestFinder()
        runner = doctest.DocTestRunner()
        for test in finder.find(func, func.__name__, globs={}):
            runner.run(test)
        assert runner.failures == 0 and runner.tries > 0, func.__name__
    text = (ROOT / "docs" / "irregular.md").read_text()
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {}, "docs/irregular.md", "docs/irregular.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0 and runner.tries > 0


BAD = [
    (lambda p: cutopk.merge_top_k(p[0], 2), TypeError, r"^parts: expected a sequence .* got a single TopK"),
    (lambda p: cutopk.merge_top_k(np.arange(3), 2), TypeError, r"^parts: expected a sequence"),
    (lambda p: cutopk.merge_top_k([], 2), ValueError, r"^parts: expected at least one"),
    (lambda p: cutopk.merge_top_k([p[0], (1, 2, 3)], 2), TypeError, r"^parts\[1\]: expected a TopK"),
    (
        lambda p: cutopk.merge_top_k([p[0], ([1.0], [0])], 2),
        TypeError,
        r"^parts\[1\]\.values: expected a NumPy",
    ),
    (lambda p: cutopk.merge_top_k(p, 7), ValueError, r"^k: expected 0 <= k <= 6 .*got k=7"),
    (lambda p: cutopk.merge_top_k(p, -1), ValueError, r"^k: expected 0 <= k <= 6"),
    (lambda p: cutopk.merge_top_k(p, 2.0), TypeError, r"^k: expected an integer, got float"),
    (lambda p: cutopk.merge_top_k(p, True), TypeError, r"^k: expected an integer, got bool"),
    (lambda p: cutopk.merge_top_k(p, np.array(True)), TypeError, r"^k: expected an integer, got bool"),
    (lambda p: cutopk.merge_top_k(p, np.array([2])), TypeError, r"^k: expected an integer, got a 1-d array"),
    (lambda p: cutopk.merge_top_k(p, 2, mode="max"), ValueError, r"^mode: expected one of"),
    (lambda p: cutopk.merge_top_k(p, 2, sorted=1), ValueError, r"^sorted: expected one of"),
    (lambda p: cutopk.merge_top_k(p, 2, nan="first"), ValueError, r"^nan: expected one of"),
    (
        lambda p: cutopk.merge_top_k([p[0], (p[1][0].astype(np.float64), p[1][1])], 2),
        TypeError,
        r"^parts\[1\]\.values: expected dtype float32 like parts\[0\]\.values, got float64",
    ),
    (
        lambda p: cutopk.merge_top_k([p[0], (p[1][0], p[1][1].astype(np.int32))], 2),
        TypeError,
        r"^parts\[1\]\.indices: expected dtype int64 like parts\[0\]\.indices, got int32",
    ),
    (
        lambda p: cutopk.merge_top_k([(p[0][0], p[0][1].astype(np.float32)), p[1]], 2),
        TypeError,
        r"^parts\[0\]\.indices: expected dtype int64, int32, uint32, uint64, got float32",
    ),
    (
        lambda p: cutopk.merge_top_k([(p[0][0].astype(bool), p[0][1]), p[1]], 2),
        TypeError,
        r"^parts\[0\]\.values: unsupported dtype bool",
    ),
    (
        lambda p: cutopk.merge_top_k([p[0], (p[1][0][:1], p[1][1][:1])], 2),
        ValueError,
        r"^parts\[1\]: expected shape \(2, '\*'\) .* got \(1, 3\)",
    ),
    (
        lambda p: cutopk.merge_top_k([p[0], (p[1][0], p[1][1][:, :2])], 2),
        ValueError,
        r"^parts\[1\]\.indices: expected the shape of parts\[1\]\.values \(2, 3\), got \(2, 2\)",
    ),
    (
        lambda p: cutopk.merge_top_k([p[0], (np.ma.masked_array(p[1][0]), p[1][1])], 2),
        TypeError,
        r"^parts\[1\]\.values: expected an array without a mask",
    ),
    (
        lambda p: cutopk.merge_top_k([(np.float32(1.0), np.int64(0))], 1),
        ValueError,
        r"^parts\[0\]\.values: expected an array of rank >= 1",
    ),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD, ids=[b[2][:40] for b in BAD])
def test_errors_name_the_argument(call, error, message):
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    parts = [cutopk.top_k(x[:, :3], 3), cutopk.top_k(x[:, 3:], 3)]
    parts[1] = (parts[1].values, parts[1].indices + 3)
    with pytest.raises(error, match=message):
        call(parts)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_cupy_parts(dtype):
    reason = cuda_unavailable_reason()
    if reason:
        pytest.skip(f"needs a CUDA GPU: {reason}")
    import cupy

    rng = np.random.default_rng(17)
    x = make_values(rng, np.dtype(dtype), (5, 700), "few_distinct" if dtype != "float32" else "nan")
    for mode, nan, order in itertools.product(MODES, NANS, ORDERS):
        parts = make_parts(x, 7, 40, rng, mode=mode, nan=nan, pad_value=0)
        gpu_parts = [(cupy.asarray(v), cupy.asarray(i)) for v, i in parts]
        got = cutopk.merge_top_k(gpu_parts, 40, mode=mode, nan=nan, sorted=order)
        assert isinstance(got.values, cupy.ndarray) and isinstance(got.indices, cupy.ndarray)
        expected = reference_merge(parts, 40, mode=mode, nan=nan, sorted=order)
        assert_same((got.values.get(), got.indices.get()), expected, order=order)


def test_merged_values_carry_the_gradient_to_every_part():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    left = torch.tensor([[4.0, 9.0, 1.0, 9.0], [0.0, 1.0, 2.0, 3.0]], requires_grad=True)
    right = torch.tensor([[7.0, 4.0, 9.0, 0.0], [8.0, 8.0, 1.0, 1.0]], requires_grad=True)
    a, b = cutopk.top_k(left, 2), cutopk.top_k(right, 2)
    m = cutopk.merge_top_k([a, (b.values, b.indices + 4)], 3)
    assert m.values.grad_fn is not None and m.indices.grad_fn is None
    (m.values * torch.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert left.grad.tolist() == [[0.0, 1.0, 0.0, 10.0], [0.0, 0.0, 0.0, 100.0]]
    assert right.grad.tolist() == [[0.0, 0.0, 100.0, 0.0], [1.0, 10.0, 0.0, 0.0]]


def test_merged_values_pass_no_gradient_to_padding():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    values = torch.tensor([[2.0, 0.0]], requires_grad=True)
    other = torch.tensor([[1.0]], requires_grad=True)
    m = cutopk.merge_top_k([(values, torch.tensor([[0, -1]])), (other, torch.tensor([[5]]))], 3)
    assert m.indices.tolist() == [[0, 5, -1]]
    m.values.sum().backward()
    assert values.grad.tolist() == [[1.0, 0.0]] and other.grad.tolist() == [[1.0]]
    parts = [torch.randn(3, 4, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    idx = [torch.arange(4).expand(3, 4), torch.arange(4, 8).expand(3, 4)]

    def merged(*vs):
        return cutopk.merge_top_k(list(zip(vs, idx, strict=True)), 5, sorted="index").values

    assert torch.autograd.gradcheck(merged, tuple(parts))


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["numpy", "cuda"])
@pytest.mark.parametrize("with_padding", [False, True])
def test_nan_payloads_come_back_bit_for_bit(backend, with_padding):
    """bfloat16 NaNs of any payload merge back as they went in: on an H200, CuPy's bfloat16
    kernels returned 0x7fff for 0xffc0 (the merge now moves the values as their bits)."""
    if backend == "cuda" and (why := cuda_unavailable_reason()):
        pytest.skip(why)
    bf16 = dtype_of("bfloat16")
    raw = np.array([[0xFFC0, 0x3F80, 0x7FC1], [0x7FC1, 0xFFC0, 0x4000]], np.uint16)
    values, indices = raw.view(bf16), np.array([[0, 1, 2], [3, 4, 5]], np.int64)
    if with_padding:
        values, indices = (
            np.concatenate([values, values[:, :1]], 1),
            np.concatenate([indices, [[-1], [-1]]], 1),
        )
    parts = [(values[:1], indices[:1]), (values[1:], indices[1:])]
    if backend == "cuda":
        import cupy

        parts = [(cupy.asarray(v), cupy.asarray(i)) for v, i in parts]
    got = cutopk.merge_top_k([(v.reshape(-1), i.reshape(-1)) for v, i in parts], 4, nan="largest")
    got_bits = np.asarray(got.values.get() if backend == "cuda" else got.values).view(np.uint16)
    assert got_bits.tolist() == [0xFFC0, 0x7FC1, 0x7FC1, 0xFFC0]
