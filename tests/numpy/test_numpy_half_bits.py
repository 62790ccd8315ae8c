"""Half floats (float16, bfloat16) filtered on their bits as 16-bit integers (``_select_half``):
rows whose top lies on either side of zero, across it, with zeros, -0.0, infinities and NaNs of
both signs among the winners, in every mode, NaN policy and order, against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from support.reference import check_top_k

from cutopk.numpy import pivot_filter as _pivot_filter

N = 2048  # long enough for the pivot filter at these K (K <= N / 16)


def _dtype(name):
    if name == "bfloat16":
        return np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    return np.dtype(name)


def _rows(kind: str, rng, rows: int = 6) -> np.ndarray:
    """float32 rows of one kind (cast to the half type by the caller)."""
    x = rng.standard_normal((rows, N)).astype(np.float32)
    if kind == "positive":
        x = np.abs(x) + 0.01
    elif kind == "negative":  # log-probabilities
        x = -np.abs(x) - 0.01
    elif kind == "few levels":  # ties at the K-th value, both signs
        x = rng.integers(-3, 4, (rows, N)).astype(np.float32)
    elif kind == "specials":  # zeros of both signs, infinities and NaNs of both signs on top
        x = np.abs(x) * 1e-3
        x[:, 100:140] = 0.0
        x[:, 140:180] = -0.0
        x[1, 7] = np.inf
        x[2, 9] = -np.inf
        x[3, ::97] = np.nan
        x[4, ::89] = -np.nan
    elif kind == "specials, negative":  # the same below zero
        x = -np.abs(x) * 1e-3
        x[:, 100:140] = 0.0
        x[:, 140:180] = -0.0
        x[1, 7] = -np.inf
        x[2, 9] = np.inf
        x[3, ::97] = np.nan
        x[4, ::89] = -np.nan
    elif kind == "a zero row":
        x[2] = 0.0
        x[3, : N // 2] = -0.0
    return x


KINDS = ("positive", "negative", "mixed", "few levels", "specials", "specials, negative", "a zero row")


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ("largest", "smallest"))
@pytest.mark.parametrize("nan", ("last", "largest"))
@pytest.mark.parametrize("order", (True, "index"))
def test_half_floats_on_their_bits_are_exact(dtype, kind, mode, nan, order):
    rng = np.random.default_rng(len(kind) + 7 * (mode == "smallest"))
    x = _rows(kind, rng).astype(_dtype(dtype))
    for k in (1, 17, 128):
        check_top_k(x, k, mode=mode, nan=nan, sorted=order)


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("mode", ("largest", "smallest"))
def test_half_float_rows_answered_on_bits_and_the_general_way_side_by_side(dtype, mode, monkeypatch):
    """A NaN among one row's winners: that row goes the general way, the others keep their bits'
    answer; and the general way is not taken for a row of plain numbers."""
    x = np.abs(np.random.default_rng(3).standard_normal((4, N))).astype(np.float32) + 0.5
    if mode == "smallest":
        x = -x
    x[2, 5] = np.nan if mode == "largest" else -np.nan  # sorts first in the bits' order
    x = x.astype(_dtype(dtype))
    general_rows = []
    original = _pivot_filter.select_half_general

    def spy(block, *args):
        general_rows.append(block.shape[0])
        return original(block, *args)

    monkeypatch.setattr(_pivot_filter, "select_half_general", spy)
    check_top_k(x, 32, mode=mode)
    assert general_rows == [1]
    general_rows.clear()
    check_top_k(np.delete(x, 2, axis=0), 32, mode=mode)
    assert general_rows == []
