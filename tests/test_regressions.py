"""Failures found by the differential fuzzer (tests/test_fuzz.py), kept as plain tests."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, require, to_backend, to_host
from support.reference import assert_same, reference_top_k

import cutopk


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_unsorted_result_along_axis_0(backend):
    # Found 2026-11-22: with sorted=False along axis 0 the checker compared the free order along
    # the wrong axis. The kernels were right; the comparison must permute along `axis`.
    require(backend)
    x = np.array([[12.57], [-13.21]], dtype=np.float16)
    result = cutopk.top_k(to_backend(x, backend), 2, axis=0, mode="smallest", sorted=False, backend=backend)
    values, indices = (to_host(r) for r in result)
    expected = reference_top_k(x, 2, axis=0, mode="smallest", sorted=False)
    assert_same((values, indices), expected, order=False, axis=0)
    assert sorted(indices[:, 0].tolist()) == [0, 1]


@pytest.mark.parametrize("algorithm", ["multiblock", "sort", "radix", "bitonic"])
def test_no_rows_with_a_forced_algorithm(algorithm):
    # Found 2026-11-23 by the segmented fuzzer (no segments): planning a forced multiblock call
    # over zero rows divided by the number of rows. Nothing runs; the result is empty.
    require("sim")
    got = cutopk.top_k(np.zeros((0, 50), np.float32), 3, backend="sim", algorithm=algorithm)
    assert got.values.shape == got.indices.shape == (0, 3)
    empty = cutopk.segmented_top_k(
        np.zeros(4, np.float32), np.array([2]), 3, backend="sim", algorithm=algorithm
    )
    assert empty.values.shape == (0, 3)
