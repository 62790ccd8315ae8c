"""``segmented_top_k(..., max_length=)`` (docs/SPEC.md): a bound on every segment's length, known
on the host, so that the call is planned on rows of ``max(max_length, k)`` elements rather than
``len(data)``. With offsets on the host a longer segment is a ValueError; with offsets on the
device (the CuPy stand-in's, kernels on the simulator) one longer than ``max(max_length, k)``
comes back as all padding, decided by the kernels in the launch (kernels/row_extent.cuh).

Against the independent reference (tests/support/reference.py), bit for bit, on the NumPy, sim and
CUDA (stand-in) backends: segments shorter than, as long as and longer than the bound, ``k`` above
it, ``max_length=0``, empty segments; and ``plan()`` showing the shorter row."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import cuda_is_standin, require, to_backend, to_host
from support.inputs import make_values
from support.reference import assert_same_padded, reference_with_lengths

import cutopk

N = 3000  # len(data): far longer than any segment, so the bound changes the plan
ORDERS = (True, "index", False)
# Host offsets on every backend: NumPy, the simulator, and CuPy data (the stand-in, or a GPU).
HOST_BACKENDS = ["numpy", "sim", pytest.param("cuda", marks=pytest.mark.gpu)]


def reference(data, offsets, k, bound=None, **kw):
    """Each segment's top k by the reference; a segment longer than ``bound`` all padding."""
    rows = []
    for lo, hi in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        length = hi - lo if bound is None or hi - lo <= bound else 0
        rows.append(reference_with_lengths(data[None, lo:], k, np.array([length]), **kw))
    values = np.concatenate([v for v, _ in rows]) if rows else np.zeros((0, k), data.dtype)
    indices = np.concatenate([i for _, i in rows]) if rows else np.zeros((0, k), np.int64)
    return values, indices


def offsets_of(lengths, start: int = N // 3) -> np.ndarray:
    """CSR offsets of contiguous segments of ``lengths`` from position ``start`` of data of length N."""
    return start + np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def data_of(seed=3, dtype=np.float32):
    return make_values(np.random.default_rng(seed), dtype, (N,), "few_distinct")


@pytest.fixture
def cupy():
    require("cuda")
    if not cuda_is_standin():
        pytest.skip("the stand-in's arrays hold the device offsets here; a GPU runs tests/gpu")
    import cupy

    return cupy


@pytest.mark.parametrize("backend", HOST_BACKENDS)
@pytest.mark.parametrize(("max_length", "k"), [(8, 3), (8, 8), (4, 6), (0, 2), (0, 0)])
def test_host_offsets_within_the_bound_match_the_reference(backend, max_length, k):
    """Segments empty, shorter than and as long as max_length (k below, at and above it) give
    the reference's answer; max_length changes nothing but the check."""
    require(backend)
    data = data_of()
    lengths = [0, 1, max_length // 2, max_length, 0, max_length] if max_length else [0, 0, 0]
    offsets = offsets_of(lengths)
    on = to_backend(data, backend)
    for order in ORDERS:
        got = cutopk.segmented_top_k(on, offsets, k, sorted=order, max_length=max_length, backend=backend)
        got = tuple(to_host(a) for a in got)
        want = reference(data, offsets, k, sorted=True if order is False else order)
        assert_same_padded(got, want, order=order)
        same = cutopk.segmented_top_k(on, offsets.tolist(), k, sorted=order, backend=backend)
        np.testing.assert_array_equal(got[1], to_host(same.indices))


@pytest.mark.parametrize("backend", HOST_BACKENDS)
@pytest.mark.parametrize(("max_length", "k"), [(8, 3), (4, 6), (0, 2)])
def test_host_offsets_past_the_bound_are_a_value_error(backend, max_length, k):
    """A segment one longer than max_length (even within k) is refused before any work."""
    require(backend)
    offsets = offsets_of([0, max_length, max_length + 1, 2])
    message = (
        rf"^offsets: expected segments of at most max_length={max_length} elements, got segment 2 of "
        rf"{max_length + 1}$"
    )
    data = to_backend(data_of(), backend)
    for given in (offsets, offsets.tolist()):
        with pytest.raises(ValueError, match=message):
            cutopk.segmented_top_k(data, given, k, max_length=max_length, backend=backend)
        with pytest.raises(ValueError, match=message):
            cutopk.plan(data, k, offsets=given, max_length=max_length, backend=backend)


@pytest.mark.parametrize(("max_length", "k"), [(8, 3), (8, 8), (4, 6), (0, 2), (0, 0)])
def test_device_offsets_past_the_bound_are_padding(cupy, max_length, k):
    """Offsets on the device: a segment longer than max(max_length, k) is all padding, one of
    max(max_length, k) or fewer elements the reference's answer; the rows planned that long."""
    data = data_of(4)
    bound = max(max_length, k)
    lengths = [0, 1, max_length, bound, bound + 1, 0, 3 * bound + 7, max(bound - 1, 0)]
    offsets = offsets_of(lengths)
    for order in ORDERS:
        got = cutopk.segmented_top_k(
            cupy.asarray(data), cupy.asarray(offsets), k, sorted=order, max_length=max_length
        )
        want = reference(data, offsets, k, bound, sorted=True if order is False else order)
        assert_same_padded(tuple(to_host(a) for a in got), want, order=order)
    planned = cutopk.plan(cupy.asarray(data), k, offsets=cupy.asarray(offsets), max_length=max_length)
    assert planned.n == max(bound, 1) and planned.rows == len(lengths)
    assert "max(max_length, k): offsets on the device are not read back" in planned.batch


def test_device_offsets_bound_and_the_plan_without_max_length(cupy):
    """Without max_length the rows are planned on len(data) (a costlier family, more scratch);
    with it, on the bound: the plan says so, and both answers are the reference's."""
    data = data_of(5)
    offsets = offsets_of([30, 0, 64, 17])
    long = cutopk.plan(cupy.asarray(data), 5, offsets=cupy.asarray(offsets))
    short = cutopk.plan(cupy.asarray(data), 5, offsets=cupy.asarray(offsets), max_length=64)
    assert (long.n, short.n) == (N, 64)
    assert short.algorithm == "warp_row" and long.algorithm != "warp_row"
    assert short.global_bytes < long.global_bytes and short.scratch_bytes <= long.scratch_bytes
    # A bound past len(data) is no bound: the rows as long as the data.
    assert cutopk.plan(cupy.asarray(data), 5, offsets=cupy.asarray(offsets), max_length=5000).n == N
    for m in (None, 64):
        got = cutopk.segmented_top_k(cupy.asarray(data), cupy.asarray(offsets), 5, max_length=m)
        assert_same_padded(tuple(to_host(a) for a in got), reference(data, offsets, 5))


@pytest.mark.parametrize("backend", ["numpy", "sim"])
def test_plan_of_host_offsets_is_on_the_longest_segment(backend):
    """Offsets on the host are planned on the longest segment (at least k), max_length or not."""
    require(backend)
    offsets = offsets_of([30, 0, 60, 17])
    for m in (None, 60, 2000):
        p = cutopk.plan(data_of(), 5, offsets=offsets, max_length=m, backend=backend)
        assert (p.rows, p.n, p.k) == (4, 60, 5)
        assert p.batch.startswith("CSR segments")
    assert cutopk.plan(data_of(), 90, offsets=offsets, backend=backend).n == 90


@pytest.mark.parametrize(
    ("max_length", "error", "message"),
    [
        (True, TypeError, "^max_length: expected an integer, got bool True$"),
        (np.True_, TypeError, "^max_length: expected an integer, got bool np.True_$"),
        (4.0, TypeError, "^max_length: expected an integer, got float 4.0$"),
        ("4", TypeError, "^max_length: expected an integer, got str '4'$"),
        (np.array([4]), TypeError, "^max_length: expected an integer, got a 1-d array"),
        (-1, ValueError, r"^max_length: expected None or an int >= 0, got -1$"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("backend", ["numpy", "sim"])
def test_bad_max_length_names_the_argument(backend, max_length, error, message):
    require(backend)
    for call in (cutopk.segmented_top_k, lambda d, o, k, **kw: cutopk.plan(d, k, offsets=o, **kw)):
        with pytest.raises(error, match=message):
            call(data_of(), offsets_of([2, 3]), 2, max_length=max_length, backend=backend)


def test_max_length_without_offsets_in_plan_is_refused():
    with pytest.raises(TypeError, match="max_length: applies to segments only"):
        cutopk.plan(np.zeros((2, 8)), 2, max_length=4)
