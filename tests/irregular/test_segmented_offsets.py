"""segmented_top_k's offsets wherever they live: CuPy offsets read back for host data, device
offsets checked by their metadata (dtype, rank, size) with the host's messages, misaligned
offsets read through an aligned copy, an offsets object that is no array, and positions whose
differences overflow int64 named correctly."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import cuda_is_standin, require
from support.inputs import misaligned

import cutopk

DATA = np.array([5.0, 1.0, 7.0, 3.0, 3.0, 9.0], np.float32)
OFFSETS = np.array([0, 3, 3, 6])
# The answer for DATA, OFFSETS and k = 2 (the middle segment is empty: padding).
WANT_VALUES = [[7.0, 5.0], [0.0, 0.0], [9.0, 3.0]]
WANT_INDICES = [[2, 0], [-1, -1], [2, 0]]


@pytest.fixture
def cupy():
    require("cuda")
    if not cuda_is_standin():
        pytest.skip("the misaligned views are built on the CuPy stand-in's memory")
    import cupy

    return cupy


def _assert_answer(got) -> None:
    host = [np.asarray(a.get() if hasattr(a, "get") else a) for a in got]
    assert host[0].dtype == np.float32 and host[1].dtype == np.int64
    assert host[0].tolist() == WANT_VALUES and host[1].tolist() == WANT_INDICES


@pytest.mark.parametrize("backend", ["numpy", "sim"])
@pytest.mark.parametrize("layout", ["aligned", "misaligned"])
def test_cupy_offsets_with_host_data_are_read_back(cupy, backend, layout):
    """Host data with offsets on the device: the offsets are copied to the host and checked
    there (a misaligned view through a byte copy: CuPy's own copy of it faults on a GPU)."""
    require(backend)
    offsets = cupy.asarray(OFFSETS) if layout == "aligned" else misaligned(OFFSETS.astype(np.int64), "cuda")
    got = cutopk.segmented_top_k(DATA, offsets, 2, backend=backend)
    assert isinstance(got.values, np.ndarray)
    _assert_answer(got)
    bad = cupy.asarray(np.array([0, 4, 3]))
    with pytest.raises(
        ValueError, match=r"^offsets: expected non-decreasing positions, got offsets\[1\]=4 > offsets\[2\]=3$"
    ):
        cutopk.segmented_top_k(DATA, bad, 2, backend=backend)


def test_misaligned_device_offsets_with_device_data(cupy):
    """Device offsets that start 2 bytes into their buffer are copied aligned before the kernels
    (or CuPy's cast) read them."""
    got = cutopk.segmented_top_k(cupy.asarray(DATA), misaligned(OFFSETS.astype(np.int64), "cuda"), 2)
    assert isinstance(got.values, cupy.ndarray)
    _assert_answer(got)


@pytest.mark.parametrize(
    ("offsets", "error", "message"),
    [
        (np.array([0.0, 3.0]), TypeError, r"^offsets: expected an integer array, got dtype float64$"),
        (np.zeros((2, 2), np.int64), ValueError, r"^offsets: expected a 1-D array of S \+ 1 positions, got shape \(2, 2\)$"),
        (np.zeros(0, np.int64), ValueError, r"^offsets: expected S \+ 1 >= 1 positions \(a CSR indptr\), got an empty array$"),
    ],
)  # fmt: skip
def test_device_offsets_are_checked_by_their_metadata(cupy, offsets, error, message):
    """Offsets on the device are never read back, but their dtype, rank and size are checked
    before any launch, with the messages host offsets get."""
    with pytest.raises(error, match=message):
        cutopk.segmented_top_k(cupy.asarray(DATA), cupy.asarray(offsets), 2)
    with pytest.raises(error, match=message):
        cutopk.segmented_top_k(DATA, offsets, 2)


def test_offsets_that_are_no_array_with_device_data(cupy):
    with pytest.raises(
        TypeError,
        match=r"^offsets: expected a 1-D integer array \(NumPy, CuPy, torch\) or a list of integers, got builtins\.range$",
    ):
        cutopk.segmented_top_k(cupy.asarray(DATA), range(0, 7, 3), 2)


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        # Past 2**63 as uint64: int64 would make offsets[0] negative, and its difference wrap.
        (np.array([2**63, 1], np.uint64), r"got offsets\[0\]=9223372036854775808 > offsets\[1\]=1$"),
        # int64 positions whose differences overflow: the first decreasing pair is (0, 1).
        (
            np.array([5, -(2**63) + 1, 3], np.int64),
            r"got offsets\[0\]=5 > offsets\[1\]=-9223372036854775807$",
        ),
    ],
)
def test_decreasing_offsets_far_apart_name_the_right_pair(offsets, message):
    with pytest.raises(ValueError, match=r"^offsets: expected non-decreasing positions, " + message):
        cutopk.segmented_top_k(np.arange(5.0), offsets, 1)
