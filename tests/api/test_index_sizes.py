"""Sizes at the edges of the index types: rows longer than 2**31 elements, K = N on long rows,
and narrow index dtypes refused when they cannot hold the indices. The largest cases need up to
3 GB of memory (peak RSS measured 2026-11-23) and up to 45 s of CPU: they run with CUTOPK_SLOW=1."""

from __future__ import annotations

import os

import numpy as np
import pytest
from support.backends import sim_unavailable_reason

import cutopk
from cutopk.numpy import exact as _numpy_exact


def slow(needs: str):
    """Opt-in: these take minutes or gigabytes, too much for every CI run."""
    return pytest.mark.skipif(
        not os.environ.get("CUTOPK_SLOW"), reason=f"needs {needs}: set CUTOPK_SLOW=1 to run"
    )


def test_first_true_keeps_the_first_ones_of_each_row(monkeypatch):
    monkeypatch.setattr(_numpy_exact, "FIRST_TRUE_MAX_COLUMNS", 1500)  # chunks of 1024, 1500, 1500...
    mask = np.random.default_rng(0).random((5, 5000)) < 0.3
    mask[4] = False
    counts = np.array([0, 1, 17, np.count_nonzero(mask[3]), 0])
    expected = mask & (np.cumsum(mask, axis=1) <= counts[:, None])
    np.testing.assert_array_equal(_numpy_exact.first_true(mask, counts), expected)


def test_ties_at_the_boundary():
    x = np.zeros((3, 3000), dtype=np.int16)
    x[:, ::7] = 1
    r = cutopk.top_k(x, 700)
    assert r.indices[:, :429].tolist() == [list(range(0, 3000, 7))] * 3
    assert r.indices[:, 429:].tolist() == [[i for i in range(3000) if i % 7][: 700 - 429]] * 3


@slow("~2 GB of address space (zero pages, barely touched) and ~5 s")
@pytest.mark.slow
def test_row_longer_than_2_to_31():
    n = 2**31 + 5
    base = np.zeros(n, dtype=np.int8)
    base[[3, 2**31 + 1, 2**31 + 4]] = [5, 7, 7]
    r = cutopk.top_k(base, 4, index_dtype=np.uint32)
    assert r.indices.tolist() == [2**31 + 1, 2**31 + 4, 3, 0]
    assert r.values.tolist() == [7, 7, 5, 0]
    with pytest.raises(ValueError, match="index_dtype: int32 cannot hold indices"):
        cutopk.top_k(base, 4, index_dtype=np.int32)


@slow("~3 GB and ~20 s")
@pytest.mark.slow
def test_k_equals_n_on_a_long_row():
    x = np.arange(2**26, dtype=np.int32)[::-1].copy()
    r = cutopk.top_k(x, x.size, sorted="index")
    np.testing.assert_array_equal(r.indices, np.arange(x.size))
    r = cutopk.top_k(x, x.size, mode="smallest")
    np.testing.assert_array_equal(r.indices, np.arange(x.size)[::-1])


@slow("~45 s (100 MB)")
@pytest.mark.slow
def test_more_than_2_to_32_elements_in_total():
    # A zero-stride view: 65537 x 65537 (about 4.3e9) elements without allocating them.
    x = np.broadcast_to(np.int8(3), (65537, 65537))
    r = cutopk.top_k(x, 3, mode="smallest")
    assert r.indices.shape == (65537, 3)
    assert (r.indices == np.arange(3)).all() and (r.values == 3).all()


def test_a_row_longer_than_2_to_31_is_planned_with_64_bit_sizes_on_the_kernel_path():
    """A zero-stride view of 2**31 + 5 elements (nothing allocated): the plan keeps every size,
    and a k the kernels' 32-bit argument cannot hold is a ValueError naming k, before any work."""
    if sim_unavailable_reason():
        pytest.skip(sim_unavailable_reason())
    n = 2**31 + 5
    x = np.broadcast_to(np.float32(1), (2, n))
    p = cutopk.plan(x, 5, backend="sim", index_dtype=np.uint32)
    assert (p.rows, p.n, p.k) == (2, n, 5)
    p = cutopk.plan(x, 5, backend="sim", lengths=np.array([n, 3]))
    assert (p.rows, p.n) == (2, n)
    with pytest.raises(
        ValueError, match=r"k: the CUDA kernels select at most 2\*\*31 - 1 .* got k=2147483648"
    ):
        cutopk.plan(x, 2**31, backend="sim")
    assert cutopk.plan(x, 2**31, backend="numpy").k == 2**31  # the NumPy backend has no such limit
