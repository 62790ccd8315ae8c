"""Listing a mask's True positions through its 8-byte words (``exact.true_positions``)."""

from __future__ import annotations

import numpy as np
import pytest

from cutopk.numpy import exact


@pytest.mark.parametrize("size", (0, 1, 7, 8, 9, 64, 1000, 1 << 16))
@pytest.mark.parametrize("share", (0.0, 0.001, 0.05, 0.5, 1.0))
def test_true_positions_are_numpys_nonzero(size, share):
    mask = np.random.default_rng(size).random(size) < share
    assert np.array_equal(exact.true_positions(mask), np.flatnonzero(mask))


def test_true_positions_of_a_2d_mask_are_row_major():
    mask = np.zeros((3, 64), dtype=bool)
    mask[0, 63] = mask[1, 0] = mask[1, 9] = mask[2, 7] = True
    assert exact.true_positions(mask).tolist() == [63, 64, 73, 135]


def test_unaligned_or_partial_masks_fall_back_to_numpy():
    base = np.zeros(65, dtype=bool)
    base[[1, 20, 64]] = True
    assert exact.true_words(base) is None  # not a whole number of words
    shifted = base[1:]  # 64 bytes, starting one byte into a buffer
    assert exact.true_words(shifted) is None
    assert exact.true_positions(shifted).tolist() == [0, 19, 63]


def test_true_words_bound_the_true_count():
    mask = np.zeros(64, dtype=bool)
    mask[[0, 1, 2, 40]] = True
    assert exact.true_words(mask).tolist() == [0, 5]
    assert exact.true_words(np.zeros(64, dtype=bool)).size == 0


@pytest.mark.parametrize("order", (True, "index"))
def test_rows_of_many_nans_where_nan_is_preferred(order):
    """A NaN pivot (NaN preferred): the first K NaNs of each row, found in the rows' first
    columns where they are there, else in the whole rows; rows with fewer NaNs go the filter's
    way. Against the reference."""
    from support.reference import check_top_k

    rng = np.random.default_rng(11)
    x = rng.standard_normal((6, 8192)).astype(np.float32)
    x[0:2][rng.random((2, 8192)) < 0.2] = np.nan  # NaNs everywhere: the first columns suffice
    x[2, -2000:] = np.nan  # NaNs only at the end: the whole row is searched
    x[3, ::64] = np.nan  # 128 NaNs, evenly spread: the sample sees them
    x[4, 8000:8030] = np.nan  # fewer NaNs than K
    for k in (40, 128, 300):
        check_top_k(x, k, nan="largest", sorted=order)
        check_top_k(x, k, nan="last", sorted=order)
        check_top_k(x[[0, 1, 5]], k, nan="largest", sorted=order)  # every NaN row in its head
