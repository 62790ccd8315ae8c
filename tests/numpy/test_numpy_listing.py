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
