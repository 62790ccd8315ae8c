"""Differential fuzzer: every backend and every forced algorithm against the stable reference.

Draws dtype, shape, strides, axis, k, mode, sorted, nan and adversarial value distributions (all
equal, one distinct value at the K boundary, same leading bits, +-inf/NaN mixtures, integer
extremes). The budget is hypothesis' profile: bounded in CI (``CI=1``), longer with
``CUTOPK_HYPOTHESIS_PROFILE=long`` (see tools/fuzz.sh). Each failure found becomes a plain test
in the file of the feature it concerns (the first two are at the end of this file and of
tests/gpu/test_kernels.py).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from support.backends import BACKEND_PARAMS, cuda_is_standin, require, to_backend, to_host
from support.inputs import DISTRIBUTIONS, DTYPES, LAYOUTS, dtype_of, make_layout, make_values
from support.reference import assert_same, assert_same_padded, reference_top_k, reference_with_lengths
from support.selection import ASAN_DTYPES, ASAN_SUBSET

import cutopk
from cutopk._core import call as _call
from cutopk.cuda.families import multiblock as _multiblock

# The simulator runs every CUDA thread as a fiber: keep its inputs small.
# Rows up to these lengths. The CuPy stand-in runs the "cuda" kernels on the simulator: sim sizes there.
MAX_N = {"numpy": 3000, "sim": 700, "cuda": 700 if cuda_is_standin() else 100_000}
# The element types drawn: every one, but in CI's AddressSanitizer subset one per key width (an
# access out of bounds follows the extents and the key's width, tests/support/selection.py), which
# spares that run a sanitized module build for each of the other eight types and every family.
FUZZ_DTYPES = ASAN_DTYPES if ASAN_SUBSET else DTYPES


def budget(backend):
    """The hypothesis budget of a fuzz test on ``backend``: the profile's, but a fifth of it for
    the CuPy stand-in, which runs the kernels on the simulator that the "sim" runs already fuzz
    (its own share is the CuPy launcher's glue); the full profile on a real GPU."""
    if backend == "cuda" and cuda_is_standin():
        return settings(max_examples=max(10, settings.default.max_examples // 5))
    return lambda test: test


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
    dtype = dtype_of(draw(st.sampled_from(FUZZ_DTYPES)))
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


# A forced "cluster" simulates up to 8 blocks of 1024 threads per row (tens of ms a row on the CPU
# simulator, 15x the other families): the fuzzer forces it on batches of at most this many rows
# only. tests/gpu/test_cluster.py covers the family's dtypes, ties and layouts exhaustively.
CLUSTER_MAX_ROWS = 4


def _affordable(algorithm: str, rows: int) -> bool:
    return algorithm != "cluster" or rows <= CLUSTER_MAX_ROWS


def _rows(x, axis: int) -> int:
    return x.size // x.shape[axis] if x.shape[axis] else 0


def _check_all_algorithms(backend, case):
    x, k, kwargs = case
    expected = reference_top_k(
        x, k, axis=kwargs["axis"], mode=kwargs["mode"], sorted=kwargs["sorted"], nan=kwargs["nan"]
    )
    runs = [("auto", False), *((a, False) for a in cutopk.algorithms(backend))]
    if backend != "numpy":
        runs.append(("multiblock", True))  # with the sampled threshold, which needs long inputs
    for algorithm, sampled in runs:
        if not _affordable(algorithm, _rows(x, kwargs["axis"])):
            continue
        try:
            with pytest.MonkeyPatch.context() as patch:
                if sampled:
                    patch.setattr(_multiblock, "SAMPLE_MIN_N", 0)
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

    @budget(backend)
    @given(fuzz_cases(MAX_N[backend]))
    def run(case):
        _check_all_algorithms(backend, case)

    run()


def _forced_runs(backend) -> list[str]:
    return ["auto", *(cutopk.algorithms(backend) if backend != "numpy" else ())]


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_fuzz_lengths(backend):
    """``lengths=`` drawn too: random row lengths (0, 1, below K, the whole row among them), with
    every family that reads them in its kernels."""
    require(backend)

    @budget(backend)
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
        ref_kw = {key: kwargs[key] for key in ("mode", "nan", "sorted")}
        rows = np.ascontiguousarray(moved).reshape(-1, n)
        want = reference_with_lengths(rows, k, lengths.reshape(-1), **ref_kw)
        for algorithm in _forced_runs(backend):
            if not _affordable(algorithm, rows.shape[0]):
                continue
            try:
                got = cutopk.top_k(
                    to_backend(x, backend), k, backend=backend, lengths=lengths, algorithm=algorithm, **kwargs
                )
            except ValueError as exc:  # a forced algorithm may refuse an input, saying why
                assert algorithm != "auto" and "algorithm" in str(exc), exc
                continue
            got = tuple(np.moveaxis(to_host(r), kwargs["axis"], -1).reshape(rows.shape[0], k) for r in got)
            assert_same_padded(got, want, index_dtype=kwargs["index_dtype"], order=kwargs["sorted"])

    run()


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_fuzz_segmented(backend):
    """``segmented_top_k``: segment lengths drawn (empty ones, 1, below and above K), unaligned
    starts, every forced family, against the reference segment by segment."""
    require(backend)

    @budget(backend)
    @given(st.data())
    def run(data):
        dtype = dtype_of(data.draw(st.sampled_from(FUZZ_DTYPES)))
        max_len = data.draw(st.sampled_from([8, 70, MAX_N[backend]]))
        lengths = data.draw(
            st.lists(st.integers(0, max_len) | st.sampled_from([0, 1]), min_size=0, max_size=12)
        )
        start = data.draw(st.integers(0, 5))
        offsets = np.concatenate([[start], start + np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
        dist = data.draw(st.sampled_from(DISTRIBUTIONS))
        x = make_values(
            np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), dtype, (int(offsets[-1]) + 2,), dist
        )
        k = data.draw(st.integers(0, max(lengths, default=0) + 3))
        kwargs = {
            "mode": data.draw(st.sampled_from(["largest", "smallest"])),
            "sorted": data.draw(st.sampled_from([True, "index", False])),
            "nan": data.draw(st.sampled_from(["last", "largest"])),
            "index_dtype": data.draw(st.sampled_from([np.int64, np.int32])),
        }
        rows = np.zeros((len(lengths), max(lengths, default=0)), dtype)
        for s, length in enumerate(lengths):
            rows[s, :length] = x[offsets[s] : offsets[s] + length]
        want = reference_with_lengths(
            rows, k, np.asarray(lengths, np.int64), **{key: kwargs[key] for key in ("mode", "nan", "sorted")}
        )
        for algorithm in _forced_runs(backend):
            if not _affordable(algorithm, len(lengths)):
                continue
            try:
                got = cutopk.segmented_top_k(
                    to_backend(x, backend), offsets, k, backend=backend, algorithm=algorithm, **kwargs
                )
            except ValueError as exc:
                assert algorithm != "auto" and "algorithm" in str(exc), exc
                continue
            got = tuple(to_host(r) for r in got)
            assert_same_padded(got, want, index_dtype=kwargs["index_dtype"], order=kwargs["sorted"])

    run()


@pytest.mark.parametrize("backend", [p for p in BACKEND_PARAMS if p.id != "sim"])  # merges run on arrays
def test_fuzz_merge(backend):
    """``merge_top_k``: a row split into 1..9 parts at drawn places, each part's own top_k (padded
    parts included) with indices moved into the row's index space, the parts in a drawn order;
    the merge must equal top_k on the whole row."""
    require(backend)

    @budget(backend)
    @given(fuzz_cases(MAX_N["numpy"]), st.data())
    def run(case, data):
        x, k, kwargs = case
        kwargs = {**kwargs, "index_dtype": data.draw(st.sampled_from([np.int64, np.int32]))}
        moved = np.ascontiguousarray(np.moveaxis(x, kwargs["axis"], -1))
        n = moved.shape[-1]
        cuts = sorted(set(data.draw(st.lists(st.integers(0, n), max_size=8))) | {0, n})
        order = {key: kwargs[key] for key in ("mode", "nan")}
        parts = []
        for lo, hi in itertools.pairwise(cuts):
            top = cutopk.top_k(
                to_backend(moved[..., lo:hi], backend),
                min(k, hi - lo),
                **order,
                sorted=data.draw(st.sampled_from([True, False])),
                index_dtype=kwargs["index_dtype"],
            )
            parts.append((top.values, top.indices + top.indices.dtype.type(lo)))
        parts = data.draw(st.permutations(parts))
        got = cutopk.merge_top_k(parts, k, sorted=kwargs["sorted"], **order)
        want = reference_top_k(moved, k, sorted=kwargs["sorted"], **order)
        assert_same(
            tuple(to_host(r) for r in got), want, index_dtype=kwargs["index_dtype"], order=kwargs["sorted"]
        )

    run()


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
