"""cutopk.dask against cutopk.top_k on the computed array, bit for bit, over shapes and chunkings
(the axis chunked unevenly, k larger than a chunk, ties across chunks, NaN, every mode/order)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from inputs import make_values
from reference import assert_same

import cutopk

da = pytest.importorskip("dask.array", reason="cutopk.dask needs dask[array]")
import cutopk.dask as cdask  # noqa: E402


def compute(result):
    return tuple(r.compute(scheduler="sync") for r in result)


def check(x, chunks, k, **kw):
    d = da.from_array(x, chunks=chunks)
    got = compute(cdask.top_k(d, k, **kw))
    expected = cutopk.top_k(x, k, **{n: v for n, v in kw.items() if n != "split_every"})
    assert_same(
        got,
        expected,
        index_dtype=kw.get("index_dtype", np.int64),
        order=kw.get("sorted", True),
        axis=kw.get("axis", -1),
    )


@pytest.mark.parametrize("chunks", [(2, 7), (5, 37), (1, (3, 1, 20, 13)), (3, 5)])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_chunkings_and_axes(chunks, axis):
    x = make_values(np.random.default_rng(0), np.float32, (5, 37), "few_distinct")
    for k in (0, 1, 4, 9, x.shape[axis]):
        if k <= x.shape[axis]:
            for order in (True, "index", False):
                check(x, chunks, k, axis=axis, sorted=order, split_every=2)


def test_ties_across_chunks_go_to_the_lower_global_index():
    x = np.array([1, 5, 3, 5, 5, 0, 5, 2, 5], dtype=np.int32)
    r = compute(cdask.top_k(da.from_array(x, chunks=2), 3))
    assert r[1].tolist() == [1, 3, 4]
    r = compute(cdask.top_k(da.from_array(x[::-1].copy(), chunks=4), 3))
    assert r[1].tolist() == [0, 2, 4]


@pytest.mark.parametrize("mode", ["largest", "smallest"])
@pytest.mark.parametrize("nan", ["last", "largest"])
def test_nan_policies_and_modes_3d(mode, nan):
    x = make_values(np.random.default_rng(2), np.float64, (3, 4, 50), "nan")
    for axis in (0, 1, 2):
        check(x, (2, 3, 9), 3, axis=axis, mode=mode, nan=nan, index_dtype=np.int32)


@given(
    n=st.integers(1, 60),
    chunk=st.integers(1, 20),
    k=st.integers(0, 60),
    seed=st.integers(0, 1000),
    dtype=st.sampled_from(["int8", "float16", "uint64", "float32"]),
    order=st.sampled_from([True, "index", False]),
    mode=st.sampled_from(["largest", "smallest"]),
)
def test_property_1d(n, chunk, k, seed, dtype, order, mode):
    x = make_values(np.random.default_rng(seed), np.dtype(dtype), (n,), "few_distinct")
    check(x, chunk, min(k, n), sorted=order, mode=mode)


def test_index_only_variant_and_errors():
    d = da.from_array(np.arange(10.0), chunks=3)
    assert cdask.top_k_indices(d, 2).compute().tolist() == [9, 8]
    with pytest.raises(ValueError, match="k: expected 0 <= k <= 10"):
        cdask.top_k(d, 11)
    with pytest.raises(ValueError, match="mode: expected one of"):
        cdask.top_k(d, 1, mode="max")
    with pytest.raises(TypeError, match="unsupported dtype"):
        cdask.top_k(da.from_array(np.zeros(4, bool), chunks=2), 1)
