"""Memory of the NumPy backend on degenerate long rows (issue 19, item 7): beyond its outputs,
one call allocates at most one input-sized temporary, whatever the data; a zero-stride view is
never expanded. Measured with ``tracemalloc``, which NumPy reports its buffers to (worker
threads included). The full-size cases (1 x 50,000,000 float32, a 2**31 zero-stride view) run
with CUTOPK_SLOW=1."""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest
from support.reference import reference_top_k

import cutopk
from cutopk.numpy import threads as _threads

SLOW = pytest.mark.skipif(
    not os.environ.get("CUTOPK_SLOW"), reason="about a minute and 1 GB: set CUTOPK_SLOW=1"
)


def row(kind: str, n: int) -> np.ndarray:
    """One float32 row of ``kind``, filled a chunk at a time (no temporaries of its size)."""
    rng = np.random.default_rng(0)
    x = np.empty(n, np.float32)
    for s in range(0, n, 1 << 20):
        m = min(n - s, 1 << 20)
        if kind == "uniform":
            x[s : s + m] = rng.random(m, dtype=np.float32)
        elif kind == "equal":
            x[s : s + m] = 0.5
        elif kind == "zeros":  # mostly zeros: a few ones
            x[s : s + m] = rng.random(m, dtype=np.float32) < 1e-4
        elif kind == "nan":  # half NaN
            x[s : s + m] = np.where(rng.random(m, dtype=np.float32) < 0.5, np.nan, 1)
    return x


def peak_beyond_outputs(x, k, **kw) -> tuple[int, cutopk.TopK]:
    """Peak bytes NumPy allocated during one call, less the outputs it returns."""
    tracemalloc.start()
    try:
        r = cutopk.top_k(x, k, **kw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - r.values.nbytes - r.indices.nbytes, r


CASES = [
    ("uniform", 64, "last"),
    ("equal", 64, "last"),
    ("zeros", 64, "last"),
    ("zeros", 2000, "last"),
    ("nan", 64, "last"),
    ("nan", 64, "largest"),
    ("uniform", "tenth", "last"),
    ("equal", "tenth", "largest"),
]


def _check_case(kind, k, nan, n, threads):
    x = row(kind, n)
    k = n // 10 if k == "tenth" else k
    with _threads.num_threads(threads):
        extra, r = peak_beyond_outputs(x, k, nan=nan, sorted="index")
    assert extra <= x.nbytes, (
        f"{kind} k={k}: {extra / 1e6:.1f} MB beyond the outputs, input {x.nbytes / 1e6:.1f} MB"
    )
    return x, k, r


@pytest.mark.parametrize(("kind", "k", "nan"), CASES)
@pytest.mark.parametrize("threads", (1, 2))
def test_one_long_row_needs_at_most_one_input_sized_temporary(kind, k, nan, threads):
    n = 6_000_000  # long enough that the fixed per-thread scratch (a few MB) is below the input's size
    x, k, r = _check_case(kind, k, nan, n, threads)
    if k <= 2000 and kind != "uniform":  # the answer too (the stable-sort reference is slow)
        want = reference_top_k(x, k, sorted="index", nan=nan)[1]
        np.testing.assert_array_equal(r.indices, want)


def test_zero_stride_view_is_not_expanded():
    n = 1 << 26  # 64 MB if it were expanded, 512 MB as int64 keys and indices
    x = np.broadcast_to(np.int8(3), (n,))
    extra, r = peak_beyond_outputs(x, 5)
    assert extra < 32 << 20, f"{extra / 1e6:.1f} MB for a view of one byte"
    assert r.indices.tolist() == [0, 1, 2, 3, 4]


@SLOW
@pytest.mark.slow
@pytest.mark.parametrize(("kind", "k", "nan"), CASES)
def test_fifty_million_element_row(kind, k, nan):
    _check_case(kind, k, nan, 50_000_000, _threads.get_num_threads())


@SLOW
@pytest.mark.slow
def test_zero_stride_view_of_2_to_31_elements():
    x = np.broadcast_to(np.int8(3), (2**31,))
    extra, r = peak_beyond_outputs(x, 4, index_dtype=np.uint32)
    assert extra < 64 << 20, f"{extra / 1e6:.1f} MB for a view of one byte"
    assert r.indices.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("order", (True, "index"))
def test_k_equal_to_n_on_a_long_row(order):
    x = row("uniform", 3_000_000)
    extra, r = peak_beyond_outputs(x, x.size, sorted=order)
    assert extra <= x.nbytes, f"{extra / 1e6:.1f} MB beyond the outputs, input {x.nbytes / 1e6:.1f} MB"
    want = np.argsort(-x, kind="stable") if order is True else np.arange(x.size)
    np.testing.assert_array_equal(r.indices, want)


def test_short_row_sorts_reuse_their_scratch_memory():
    """Many short rows: the int64 composites of a block (8 bytes per element, twice for floats)
    live in the thread's scratch memory, kept between calls, not in fresh memory every call:
    a second call allocates little beyond its outputs (fresh pages cost a page fault each)."""
    x = np.random.default_rng(0).random((65536, 8), dtype=np.float32)
    with _threads.num_threads(1):
        cutopk.top_k(x, 2)  # the scratch memory and the row starts, made once
        peak, r = peak_beyond_outputs(x, 2)
    assert peak < x.nbytes // 4, peak
    want = reference_top_k(x, 2)
    assert np.array_equal(r.indices, want[1])
