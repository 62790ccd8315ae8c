"""8-bit integers on the pivot filter and the exact selection, whose partitions run widened to
16 bits (NumPy's 8-bit partition is many times slower): exact against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from support.reference import check_top_k

import cutopk


@pytest.mark.parametrize("dtype", (np.int8, np.uint8))
@pytest.mark.parametrize("levels", (2, 17, 256))
@pytest.mark.parametrize("mode", ("largest", "smallest"))
@pytest.mark.parametrize(("rows", "n", "k", "route"), ((64, 4096, 64, "filter"), (16, 1000, 500, "exact")))
def test_eight_bit_rows_on_the_filter_and_the_exact_route(dtype, levels, mode, rows, n, k, route):
    rng = np.random.default_rng(levels)
    low = -128 if dtype == np.int8 else 0
    x = (low + rng.integers(0, levels, (rows, n)) * (255 // max(1, levels - 1))).astype(dtype)
    assert cutopk.plan(x, k, mode=mode).params["route"] == route
    check_top_k(x, k, mode=mode)
    check_top_k(x, k, mode=mode, sorted="index")
