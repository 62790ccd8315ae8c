"""Differential fuzzer: every backend and every forced algorithm against the stable reference.

Draws dtype, shape, strides, axis, k, mode, sorted, nan and adversarial value distributions (all
equal, one distinct value at the K boundary, same leading bits, +-inf/NaN mixtures, integer
extremes). The budget is hypothesis' profile: bounded in CI (``CI=1``), longer with
``CUTOPK_HYPOTHESIS_PROFILE=long`` (see tools/fuzz.sh). Each failure found becomes a regression
test in tests/test_regressions.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from backends import BACKEND_PARAMS, require, to_backend, to_host
from hypothesis import given, note
from hypothesis import strategies as st
from inputs import DISTRIBUTIONS, DTYPES, LAYOUTS, dtype_of, make_layout, make_values
from reference import assert_same, reference_top_k

import cutopk
from cutopk import _call, _dispatch

# The simulator runs every CUDA thread as a fiber: keep its inputs small.
MAX_N = {"numpy": 3000, "sim": 700, "cuda": 100_000}


def boundary_tie(x: np.ndarray, k: int, axis: int) -> np.ndarray:
    """Make the K-th value of every row (along ``axis``) repeat across the row: the hardest tie."""
    moved = np.moveaxis(x.copy(), axis, -1)
    if k and moved.size:
        kth = np.sort(moved, axis=-1)[..., -k]
        mask = np.random.default_rng(k).random(moved.shape) < 0.5
        moved = np.where(mask, kth[..., None], moved)
    return np.moveaxis(moved, -1, axis)


@st.composite
def fuzz_cases(draw, max_n):
    ndim = draw(st.integers(1, 3))
    dims = [draw(st.integers(1, 4)) for _ in range(ndim)]
    axis = draw(st.integers(-ndim, ndim - 1))
    dims[axis] = draw(st.one_of(st.integers(1, 70), st.integers(1, max_n)))
    dtype = dtype_of(draw(st.sampled_from(DTYPES)))
    dist = draw(st.sampled_from((*DISTRIBUTIONS, "boundary_tie")))
    seed = draw(st.integers(0, 2**32 - 1))
    n = dims[axis]
    k = draw(st.one_of(st.integers(0, n), st.sampled_from([0, 1, n, min(n, 32), min(n, 33)])))
    x = make_values(
        np.random.default_rng(seed), dtype, tuple(dims), "uniform" if dist == "boundary_tie" else dist
    )
    if dist == "boundary_tie":
        x = boundary_tie(x, k, axis)
    if ndim >= 2:
        x = make_layout(x, draw(st.sampled_from(LAYOUTS)))
    elif draw(st.booleans()):
        x = x[::-1]
    kwargs = {
        "axis": axis,
        "mode": draw(st.sampled_from(["largest", "smallest"])),
        "sorted": draw(st.sampled_from([True, "index", False])),
        "nan": draw(st.sampled_from(["last", "largest"])),
        "index_dtype": draw(st.sampled_from([np.int64, np.int32, np.uint32, np.uint64])),
    }
    note(f"shape={x.shape} strides={x.strides} dtype={x.dtype} dist={dist} k={k} {kwargs}")
    return x, k, kwargs


def _check_all_algorithms(backend, case):
    x, k, kwargs = case
    expected = reference_top_k(
        x, k, axis=kwargs["axis"], mode=kwargs["mode"], sorted=kwargs["sorted"], nan=kwargs["nan"]
    )
    runs = [("auto", False), *((a, False) for a in cutopk.algorithms(backend))]
    if backend != "numpy":
        runs.append(("multiblock", True))  # with the sampled threshold, which needs long inputs
    for algorithm, sampled in runs:
        try:
            with pytest.MonkeyPatch.context() as patch:
                if sampled:
                    patch.setattr(_dispatch, "MULTIBLOCK_SAMPLE_MIN_ELEMENTS", 0)
                    _call.CACHE.clear()  # a plan made before the patch must not serve this call
                try:
                    result = cutopk.top_k(
                        to_backend(x, backend), k, backend=backend, algorithm=algorithm, **kwargs
                    )
                finally:
                    if sampled:
                        _call.CACHE.clear()  # nor a plan made under the patch the calls after it
        except ValueError as exc:
            # A forced algorithm may refuse an input it cannot handle, saying why; "auto" never may.
            assert algorithm != "auto", exc
            assert "algorithm" in str(exc), exc
            continue
        values, indices = (to_host(r) for r in result)
        assert_same(
            (values, indices),
            expected,
            index_dtype=kwargs["index_dtype"],
            order=kwargs["sorted"],
            axis=kwargs["axis"],
        )


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_fuzz_every_backend_and_algorithm(backend):
    require(backend)

    @given(fuzz_cases(MAX_N[backend]))
    def run(case):
        _check_all_algorithms(backend, case)

    run()


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_fuzz_lengths(backend):
    """``lengths=`` drawn too: random row lengths (0, 1, below K, the whole row among them)."""
    require(backend)
    from test_lengths import expected_rows

    @given(fuzz_cases(MAX_N[backend]), st.data())
    def run(case, data):
        x, k, kwargs = case
        kwargs = {**kwargs, "index_dtype": data.draw(st.sampled_from([np.int64, np.int32]))}
        moved = np.moveaxis(x, kwargs["axis"], -1)
        n = moved.shape[-1]
        lengths = np.asarray(
            data.draw(
                st.lists(
                    st.sampled_from([0, 1, k, n, n // 2]) | st.integers(0, n),
                    min_size=moved[..., 0].size,
                    max_size=moved[..., 0].size,
                )
            ),
            dtype=np.int64,
        ).reshape(moved.shape[:-1])
        got = cutopk.top_k(to_backend(x, backend), k, backend=backend, lengths=lengths, **kwargs)
        order = kwargs["sorted"]
        ref_kw = {"mode": kwargs["mode"], "nan": kwargs["nan"], "sorted": True if order is False else order}
        want_v, want_i = expected_rows(np.ascontiguousarray(moved), k, lengths, **ref_kw)
        got_v = np.moveaxis(to_host(got.values), kwargs["axis"], -1)
        got_i = np.moveaxis(to_host(got.indices), kwargs["axis"], -1).astype(np.int64)
        if order is False:  # the selected set in any order, padding last
            pos = np.where(got_i < 0, n, got_i).argsort(axis=-1, kind="stable")
            got_v, got_i = np.take_along_axis(got_v, pos, -1), np.take_along_axis(got_i, pos, -1)
            pos = np.where(want_i < 0, n, want_i).argsort(axis=-1, kind="stable")
            want_v, want_i = np.take_along_axis(want_v, pos, -1), np.take_along_axis(want_i, pos, -1)
        np.testing.assert_array_equal(got_i, want_i)
        np.testing.assert_array_equal(
            np.ascontiguousarray(got_v).view(np.uint8), np.ascontiguousarray(want_v).view(np.uint8)
        )

    run()
