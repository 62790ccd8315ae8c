"""Rows of their own lengths read by the kernels themselves (kernels/row_extent.cuh): the kernel
matrix of every family with ``top_k(..., lengths=)`` and with ``segmented_top_k``, on the
simulator (and on a GPU, marked ``gpu``), against the independent reference (tests/support/reference.py).

Each case first checks that the call takes the kernel route (a family that does not read row
extents would be served by the masked-copy route, and its pass would prove nothing about the
kernel). ``CUTOPK_FULL_MATRIX=1`` runs every dtype; CI runs a representative few.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from support.backends import require, require_clusters, to_backend, to_host
from support.inputs import DTYPES, dtype_of, make_values
from support.reference import assert_same_padded, reference_with_lengths

import cutopk

BACKENDS = [pytest.param("sim", id="sim"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]

FULL = os.environ.get("CUTOPK_FULL_MATRIX") == "1"
# (rows' length n, k) per family: a shape the family takes when forced, long enough for its
# streaming paths (warp_radix and radix stream their rows in tiles; multiblock splits a row over
# several blocks).
SHAPES = {
    "warp_row": (200, 8),
    "thread_row": (300, 6),
    "warp_radix": (1500, 16),
    "bitonic": (600, 20),
    "radix": (5000, 40),
    "resident": (3000, 40),  # 64-bit keys fit 48 KB of shared memory
    "cluster": (3000, 40),  # 8 slices of 384
    "multiblock": (6000, 30),
    "split": (17000, 30),  # 2 slices of 8512
    "sort": (700, 12),
}
FAMILIES = tuple(SHAPES)
DTYPE_NAMES = DTYPES if FULL else ["float32", "int8", "float16", "uint64"]
ORDERS = (True, "index", False)
POLICIES = (("largest", "last"), ("largest", "largest"), ("smallest", "last"), ("smallest", "largest"))


@pytest.fixture(autouse=True)
def _clusters(request):
    """The cluster family runs where the device has thread-block clusters (the simulator; sm_90)."""
    params = request.node.callspec.params if hasattr(request.node, "callspec") else {}
    if params.get("family") == "cluster":
        require_clusters(params.get("backend", "sim"))


def lengths_for(n: int, k: int, rng) -> np.ndarray:
    """0, 1, just below k, k, just above k, n - 1, n and a random length."""
    return np.array([0, 1, k - 1, k, k + 1, n - 1, n, int(rng.integers(2, n))])


def kernel_route(x, k, lengths, backend, **kw) -> bool:
    plan = cutopk.plan(to_backend(x, backend), k, lengths=lengths, backend=backend, **kw)
    return plan.batch.startswith("lengths read by the kernels")


def check_lengths(x, k, lengths, backend, *, axis=-1, order=True, mode="largest", nan="last", **kw):
    got = cutopk.top_k(
        to_backend(x, backend), k, axis=axis, lengths=to_backend(lengths, backend), backend=backend,
        sorted=order, mode=mode, nan=nan, **kw,
    )  # fmt: skip
    rows = np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
    want = reference_with_lengths(rows, k, np.ravel(lengths), mode=mode, sorted=order, nan=nan)
    got_rows = tuple(np.moveaxis(to_host(a), axis, -1).reshape(rows.shape[0], k) for a in got)
    assert_same_padded(got_rows, want, index_dtype=kw.get("index_dtype", np.int64), order=order)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_lengths_matrix(backend, family, dtype):
    require(backend)
    n, k = SHAPES[family]
    rng = np.random.default_rng(abs(hash((family, dtype))) % 2**32)
    dist = "few_distinct" if dtype in ("float32", "float16") else "uniform"
    x = make_values(rng, dtype_of(dtype), (8, n), dist)
    if np.dtype(dtype_of(dtype)).kind == "f":
        x[2, : k // 2] = np.nan  # NaN inside a short row's prefix: the NaN policy decides
        x[5, -3:] = -0.0
    lengths = lengths_for(n, k, rng)
    assert kernel_route(x, k, lengths, backend, algorithm=family), f"{family} does not read row lengths"
    for order, (mode, nan) in itertools.product(ORDERS, POLICIES):
        check_lengths(x, k, lengths, backend, order=order, mode=mode, nan=nan, algorithm=family)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_lengths_layouts_and_index_types(backend, family):
    """Strided rows, rows along an outer axis (in place or after the tiled transpose), 3-D
    batches, int32 indices and ``out=``."""
    require(backend)
    n, k = SHAPES[family]
    rng = np.random.default_rng(7)
    base = make_values(rng, np.float32, (6, 2 * n), "ties")
    strided = base[:, ::2]
    lengths = np.array([n, 0, 3, k, n - 1, int(rng.integers(1, n))], dtype=np.int32)
    assert kernel_route(strided, k, lengths, backend, algorithm=family)
    check_lengths(strided, k, lengths, backend, algorithm=family, index_dtype=np.int32)
    outer = np.ascontiguousarray(base[:, :n].T)  # rows along axis 0
    check_lengths(outer, k, lengths, backend, axis=0, algorithm=family, order="index")
    batch = base[:, :n].reshape(2, 3, n)
    check_lengths(batch, k, lengths.reshape(2, 3), backend, algorithm=family, order=False)
    out = tuple(to_backend(np.empty((6, k), dt), backend) for dt in (np.float32, np.int64))
    got = cutopk.top_k(
        to_backend(strided, backend), k, lengths=lengths, backend=backend, algorithm=family, out=out
    )
    assert got.values is out[0] and got.indices is out[1]
    assert_same_padded(tuple(map(to_host, out)), reference_with_lengths(strided, k, lengths))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_all_rows_shorter_than_k_and_k_equal_n(backend, family):
    require(backend)
    n, k = SHAPES[family]
    rng = np.random.default_rng(8)
    x = make_values(rng, np.int32, (5, n), "few_distinct")
    check_lengths(x, k, np.array([0, 1, 2, k - 1, 0]), backend, algorithm=family)
    if family not in ("thread_row", "warp_row", "warp_radix", "radix"):  # their k is bounded
        small = x[:, :k]
        check_lengths(small, k, np.array([k, 0, k - 1, 1, k]), backend, algorithm=family, order="index")


def segments_for(k: int, n: int, rng) -> np.ndarray:
    """Segment lengths: empty ones, 1, below and at k, one of the planned length n, others random;
    each segment starts wherever the previous ended (unaligned starts)."""
    lengths = [0, 1, k - 1, 0, k, n, 3, int(rng.integers(k, n)), 0, int(rng.integers(1, n))]
    return np.concatenate([[5], 5 + np.cumsum(lengths)]).astype(np.int64)  # data[:5] belongs to none


def reference_segments(data, offsets, k, **kw):
    rows = np.zeros((offsets.size - 1, int(np.diff(offsets).max(initial=0))), data.dtype)
    for s in range(offsets.size - 1):
        rows[s, : offsets[s + 1] - offsets[s]] = data[offsets[s] : offsets[s + 1]]
    return reference_with_lengths(rows, k, np.diff(offsets), **kw)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_segments_matrix(backend, family, dtype, no_generic_route):
    require(backend)
    n, k = SHAPES[family]
    rng = np.random.default_rng(abs(hash((family, dtype, "segments"))) % 2**32)
    offsets = segments_for(k, n, rng)
    data = make_values(rng, dtype_of(dtype), (int(offsets[-1]) + 3,), "few_distinct")
    for order, (mode, nan) in itertools.product(ORDERS, POLICIES[:3]):
        kw = {"mode": mode, "nan": nan, "sorted": order}
        got = cutopk.segmented_top_k(
            to_backend(data, backend), offsets, k, backend=backend, algorithm=family, **kw
        )
        assert_same_padded(tuple(map(to_host, got)), reference_segments(data, offsets, k, **kw), order=order)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_segments_of_strided_and_non_native_data(backend, family, no_generic_route):
    require(backend)
    n, k = SHAPES[family]
    rng = np.random.default_rng(9)
    offsets = segments_for(k, n, rng)
    base = make_values(rng, np.float32, (2 * int(offsets[-1]),), "ties")
    # A GPU array library has no non-native byte order: the simulator alone takes one.
    for data in (base[::2], base[: offsets[-1]].astype(">f4"))[: 1 if backend == "cuda" else 2]:
        got = cutopk.segmented_top_k(
            to_backend(data, backend), offsets, k, backend=backend, algorithm=family, index_dtype=np.int32
        )
        assert got.values.dtype == data.dtype
        assert_same_padded(
            tuple(map(to_host, got)), reference_segments(data, offsets, k), index_dtype=np.int32
        )


def test_k_beyond_every_segment_and_no_segments(no_generic_route):
    require("sim")
    rng = np.random.default_rng(10)
    data = make_values(rng, np.float64, (30,), "uniform")
    offsets = np.array([0, 4, 4, 30])
    got = cutopk.segmented_top_k(data, offsets, 40, backend="sim")
    assert_same_padded(got, reference_segments(data, offsets, 40))
    empty = cutopk.segmented_top_k(data, np.array([3]), 5, backend="sim")
    assert empty.values.shape == (0, 5) and empty.indices.shape == (0, 5)


def test_rows_planned_on_the_longest_length():
    """Rows whose lengths are all far below n are planned on the longest length (rounded up to a
    power of two): a cheaper family, the same result as on the whole rows."""
    require("sim")
    rng = np.random.default_rng(11)
    x = make_values(rng, np.float32, (4, 50_000), "few_distinct")
    lengths = np.array([100, 0, 37, 90])
    p = cutopk.plan(x, 8, lengths=lengths, backend="sim")
    assert (p.n, p.algorithm) == (128, "warp_row") and "planned as 128" in p.batch
    check_lengths(x, 8, lengths, "sim")
    assert cutopk.plan(x, 8, backend="sim").algorithm != "warp_row"
    numpy_plan = cutopk.plan(x, 8, lengths=lengths, backend="numpy")
    assert numpy_plan.n == 128 and "masked copy" in numpy_plan.batch
    got = cutopk.top_k(x, 8, lengths=lengths, backend="numpy")
    assert_same_padded(got, reference_with_lengths(x, 8, lengths))


@pytest.mark.parametrize("family", FAMILIES)
def test_unchecked_lengths_give_rows_of_padding_in_the_kernels(family):
    """The kernels' own check (kernels/row_extent.cuh), which serves lengths on the device (never
    read back by the host): a length outside [0, n] (here handed to the prepared call directly,
    past the host's check) gives a row of padding only, never a clamp, never a read outside its
    row (the ASan run in CI would catch a read past the input's end)."""
    require("sim")
    from cutopk._core import call as _call

    n, k = SHAPES[family]
    rng = np.random.default_rng(12)
    x = make_values(rng, np.float32, (6, n), "uniform")
    bad = np.array([-5, n + 1, 2**40, 3, -(2**62), n], dtype=np.int64)
    call = _call.prepare(x, k, -1, "largest", True, "last", np.int64, "sim", family)[3]
    values, indices = _call.lengths_call(x, call).run(x, extents=bad)
    inside = np.where((bad >= 0) & (bad <= n), bad, 0)
    assert_same_padded((values, indices), reference_with_lengths(x, k, inside))
    assert (indices[[0, 1, 2, 4]] == -1).all() and (values[[0, 1, 2, 4]] == 0).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_unchecked_segments_give_rows_of_padding_in_the_kernels(family, no_generic_route):
    """Segments whose bounds decrease, lie outside [0, len(data)] or are longer than the planned
    width (offsets on the device: checked by the kernels alone) come back as padding only; the
    others as ever. Planned as segmented_top_k plans device offsets: on len(data), bounded by it."""
    require("sim")
    from cutopk.irregular import segmented as _segmented

    n, k = SHAPES[family]
    rng = np.random.default_rng(13)
    data = make_values(rng, np.float32, (n,), "uniform")
    # Segments 0, 5 (empty) and 6 are fine; 1 decreases, 2 ends past the data, 3 starts past it
    # and decreases, 4 starts below 0.
    offsets = np.array([0, 7, 3, n + 5, -2, 40, 40, n], dtype=np.int64)
    options = {"mode": "largest", "nan": "last", "algorithm": family}
    call = _segmented.kernel_call(data, 7, n, k, "value", options, np.dtype(np.int64), "sim", bound=n)
    values, indices = _segmented._run_in_kernels(call, data, offsets)
    good = {0: (0, 7), 5: (40, 40), 6: (40, n)}
    for s in range(7):
        start, end = good.get(s, (0, 0))
        want = reference_with_lengths(data[None, start:], k, np.array([end - start]))
        assert_same_padded((values[s : s + 1], indices[s : s + 1]), want)
    assert (indices[1:6] == -1).all() and (values[1:6] == 0).all()
    # Planned on a bound (max_length's width, max(n // 3, k)): a segment one longer is padding,
    # decided by the kernels in the launch; one as long as the bound, and a shorter one, are not.
    width = max(n // 3, k)
    short = _segmented.kernel_call(data, 3, n // 3, k, "value", options, np.dtype(np.int64), "sim", bound=n)
    offsets = np.array([0, width + 1, 2 * width + 1, 2 * width + 1 + width // 2])
    values, indices = _segmented._run_in_kernels(short, data, offsets)
    assert (indices[0] == -1).all() and (values[0] == 0).all()  # width + 1 elements
    for s in (1, 2):
        start, end = offsets[s], offsets[s + 1]
        want = reference_with_lengths(data[None, start:], k, np.array([end - start]))
        assert_same_padded((values[s : s + 1], indices[s : s + 1]), want)
