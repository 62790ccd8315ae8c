"""Every CUDA kernel family against the stable reference, bit for bit, on the simulator (CI) and on
a GPU when one is present: dtypes x n x k x mode x order x nan x layout, forced algorithms, and the
hard inputs of STYLE.md.

The simulator runs each CUDA thread as a fiber, so the default matrix is sampled; set
CUTOPK_FULL_MATRIX=1 for the full cartesian product.
"""

from __future__ import annotations

import itertools
import os
import re
import zlib

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, cuda_is_standin, require, require_clusters, to_backend, to_host
from support.inputs import DISTRIBUTIONS, DTYPES, LAYOUTS, dtype_of, make_layout, make_values
from support.multiblock_state import (
    BEHIND,
    FINISHED,
    FROM_BUCKET,
    FROM_CANDIDATES,
    FROM_INPUT,
    FROM_TIES,
    MB_STATE,
    ON_CANDIDATES,
    ON_INPUT,
    WHOLE,
    record_states,
)
from support.reference import assert_same, reference_top_k
from support.selection import ASAN_DTYPES, ASAN_SUBSET

import cutopk
from cutopk._core import call as _call
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda.families import multiblock as _multiblock
from cutopk.cuda.families import radix as _radix

FULL = bool(os.environ.get("CUTOPK_FULL_MATRIX"))
STANDIN_THIRD = cuda_is_standin() and not FULL
GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]
NS = (1, 31, 32, 33, 255, 256, 1023, 1024, 1025, 3000)
KS = (0, 1, 31, 32, 33, 256, 1024, "n")


def run_case(backend, x, k, **kw):
    semantics = {name: kw[name] for name in ("axis", "mode", "sorted", "nan") if name in kw}
    expected = reference_top_k(x, k, **semantics)
    result = cutopk.top_k(to_backend(x, backend), k, backend=backend, **kw)
    values, indices = (to_host(r) for r in result)
    assert_same(
        (values, indices), expected, index_dtype=kw.get("index_dtype", np.int64), order=kw.get("sorted", True)
    )


def applicable(algorithm, n, k, dtype):
    key_bytes = np.dtype(dtype).itemsize
    return _dispatch.why_not(algorithm, n, k, key_bytes, _dispatch.Device()) is None


def sampled(items, every):
    items = list(items)
    return items if FULL else items[::every]


def asan_matrix_cases():
    """CI's AddressSanitizer run (CUTOPK_SIM_ASAN=1 without CUTOPK_FULL_MATRIX; tests/support/selection.py):
    every extent of the full matrix, (n, k, algorithm), once on the simulator, each with one
    element type per key width (support.selection.ASAN_DTYPES) chosen in turn by a hash of the case. Out
    of bounds accesses follow the extents and the key's width, not the mode, order or NaN policy:
    this covers every extent the full matrix has (the sampled seventh misses some) in half the
    cases of the sampled seventh."""
    cases = []
    for n, k, algorithm in itertools.product(NS, KS, _dispatch.ALGORITHMS):
        k = n if k == "n" else k
        fits = [d for d in ASAN_DTYPES if k <= n and applicable(algorithm, n, k, dtype_of(d))]
        if fits:
            dtype = fits[zlib.crc32(f"n{n}-k{k}-{algorithm}".encode()) % len(fits)]
            cases.append(pytest.param("sim", dtype, n, k, algorithm, id=f"{dtype}-n{n}-k{k}-{algorithm}-sim"))
    return list({c.id: c for c in cases}.values())  # k == n repeats a k of KS


def matrix_cases():
    if ASAN_SUBSET:
        return asan_matrix_cases()
    cases = []
    combos = list(itertools.product(DTYPES, NS, KS, _dispatch.ALGORITHMS))
    for dtype, n, k, algorithm in combos:
        k = n if k == "n" else k
        if k > n or not applicable(algorithm, n, k, dtype_of(dtype)):
            continue
        # A deterministic seventh of the matrix in CI, by a hash of the case: a stride over the
        # product would pick one algorithm only whenever their number divides it.
        case = f"{dtype}-n{n}-k{k}-{algorithm}"
        if not FULL and zlib.crc32(case.encode()) % 7:
            continue
        for param in GPU_BACKENDS:
            # The CuPy stand-in runs these kernels on the simulator the "sim" cases already run:
            # its "cuda" cases check the launcher's glue, which a third of them does as well
            # (every case on a real GPU, or with CUTOPK_FULL_MATRIX=1).
            if param.values[0] == "cuda" and STANDIN_THIRD and zlib.crc32(f"cuda-{case}".encode()) % 3:
                continue
            cases.append(
                pytest.param(
                    param.values[0], dtype, n, k, algorithm, id=f"{case}-{param.id}", marks=param.marks
                )
            )
    return cases


@pytest.mark.parametrize(("backend", "dtype", "n", "k", "algorithm"), matrix_cases())
def test_matrix(backend, dtype, n, k, algorithm):
    require(backend)
    rng = np.random.default_rng(n * 31 + k)
    dist = "nan" if "float" in dtype else "few_distinct"
    x = make_values(rng, dtype_of(dtype), (3, n), dist)
    for mode, order, nan, index_dtype in matrix_options(n, k):
        run_case(
            backend, x, k, mode=mode, sorted=order, nan=nan, algorithm=algorithm, index_dtype=index_dtype
        )


def matrix_options(n: int, k: int) -> list[tuple]:
    """A matrix case's calls: (mode, order, NaN policy, index dtype). All twelve option sets with
    CUTOPK_FULL_MATRIX=1, else four of them, in turn by the extents. The ASan subset makes two
    calls: two of the three orders (each writes the K winners its own way), one with 8-byte and
    one with 4-byte indices, both modes and NaN policies in turn; the mode and the NaN policy move
    no access (tests/support/selection.py)."""
    options = list(itertools.product(("largest", "smallest"), (True, "index", False), ("last", "largest")))
    index_dtypes = (np.int64, np.int32, np.uint32, np.uint64)
    if ASAN_SUBSET:
        orders = (True, "index", False)
        return [
            (("largest", "smallest")[(n + j) % 2], orders[(n + k + j) % 3], ("last", "largest")[(k + j) % 2],
             (np.int64, np.int32)[j])
            for j in range(2)
        ]  # fmt: skip
    chosen = options if FULL else options[(n + k) % 3 :: 3]
    return [(*option, index_dtypes[(j + n + k) % 4]) for j, option in enumerate(chosen)]


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("algorithm", _dispatch.ALGORITHMS)
def test_hard_inputs(backend, dist, algorithm, monkeypatch):
    require_clusters(backend) if algorithm == "cluster" else require(backend)
    if algorithm == "streaming":  # its ring and candidates need more than 48 KB of shared memory
        from test_kernels_rows import H100_SHARED, use_device  # (that module imports this one)

        use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(1)
    n = 200 if algorithm == "warp_row" else 2000
    k = {"warp_row": 20, "warp_radix": 100, "thread_row": 8}.get(algorithm, 150)
    dtypes = ("float32", "float16", "int8", "uint64", "float64") if FULL else ("float32", "float16", "int64")
    # A forced cluster simulates up to 8 blocks of 1024 threads a row (many times another family's time): one
    # row of it here, the row's values being the point; tests/gpu/test_cluster.py and the
    # extents matrices run it on batches.
    rows = 1 if algorithm == "cluster" and not FULL else 2
    for dtype in dtypes:
        x = make_values(rng, dtype_of(dtype), (rows, n), dist)
        for mode, nan in (("largest", "last"), ("smallest", "largest"), ("largest", "largest")):
            run_case(backend, x, k, mode=mode, nan=nan, algorithm=algorithm)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("axis", (0, 1, -1))
def test_layouts(backend, layout, axis):
    require(backend)
    rng = np.random.default_rng(3)
    base = make_values(rng, np.float32, (5, 300), "few_distinct")
    x = make_layout(base, layout)
    for k in (1, 5):
        if k <= x.shape[axis]:
            run_case(backend, x, k, axis=axis)
            run_case(backend, x, k, axis=axis, sorted="index", mode="smallest", index_dtype=np.int32)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_middle_axis_3d_and_negative_strides(backend):
    require(backend)
    rng = np.random.default_rng(5)
    x = make_values(rng, np.int16, (3, 40, 4), "few_distinct")
    for axis in (0, 1, 2):
        run_case(backend, x, 2, axis=axis)
        run_case(backend, x[:, ::-2, :], 3, axis=axis, mode="smallest")
        run_case(backend, x.transpose(2, 0, 1), 2, axis=axis)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_radix_paths_for_heavy_ties(backend):
    require(backend)
    # All equal: the bucket never shrinks, so the ordered (prefix-sum) selection runs.
    x = np.zeros((2, 5000), dtype=np.float32)
    x[0, ::9] = 1.0
    run_case(backend, x, 700, algorithm="radix")
    run_case(backend, x, 700, algorithm="radix", sorted="index")
    # 64-bit keys that differ only in the lowest bits: every digit pass runs.
    y = (np.int64(2**62) + np.arange(4000, dtype=np.int64) % 5).reshape(1, -1)
    run_case(backend, y, 900, algorithm="radix")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_outer_axis_reads_in_place(backend):
    require(backend)
    rng = np.random.default_rng(8)
    x = make_values(rng, np.float32, (300, 400), "few_distinct")  # rows along axis 0
    assert cutopk.plan(x, 5, axis=0, backend="sim").algorithm == "thread_row"
    for k in (1, 5, 8):
        for order in (True, "index", False):
            run_case(backend, x, k, axis=0, sorted=order)
            run_case(backend, x, k, axis=0, sorted=order, mode="smallest", nan="largest")
    y = make_values(rng, np.int8, (40, 300), "extremes")
    run_case(backend, y[::-1], 3, axis=0, algorithm="thread_row")
    # K beyond a thread's registers: the block kernels would read an outer axis one sector per
    # element, so the plan copies the rows to row-major first.
    plan = cutopk.plan(x, 20, axis=0, backend="sim")
    assert plan.copy is True and plan.algorithm != "thread_row"
    assert plan.scratch_bytes >= x.nbytes
    for k in (9, 20):
        run_case(backend, x, k, axis=0, sorted=True, nan="largest")
        run_case(backend, x[::-1], k, axis=0, sorted="index", mode="smallest", algorithm="radix")
    # A broadcast (zero-stride) axis is not an outer axis: one address per row, read in place.
    z = np.broadcast_to(x[:1], (50, 400))
    assert cutopk.plan(z, 20, axis=0, backend="sim").copy is False
    run_case(backend, z, 20, axis=0)


@pytest.fixture
def small_slices(monkeypatch):
    """Many blocks per row on short rows (slices of 256 elements), and the sampled threshold on
    rows however short: every path of the multi-block select in a few seconds of simulation."""
    monkeypatch.setattr(_multiblock, "MIN_SLICE", 256)
    monkeypatch.setattr(_multiblock, "SAMPLE_MIN_N", 0)
    _call.CACHE.clear()  # plans made before the patch must not serve calls after it
    yield
    _call.CACHE.clear()  # nor plans made under it the calls after it


def set_caps(monkeypatch, cap=None, bucket_cap=None, threshold=True):
    """The family's buffers per row forced to ``cap`` candidates and ``bucket_cap`` bucket keys
    (None: as planned), the threshold as planned (none without ``threshold``)."""
    original = _multiblock.caps

    def caps(n, k, key_bytes, blocks_per_row):
        c, b, rank = original(n, k, key_bytes, blocks_per_row)
        if cap is not None:
            c, rank = cap, _multiblock.sample_rank(n, k)[0]
        return c, b if bucket_cap is None else bucket_cap, rank if threshold else None

    monkeypatch.setattr(_multiblock, "caps", caps)
    _call.CACHE.clear()


def multiblock_states(monkeypatch, backend, x, k, **kw):
    """Runs the case and returns the rows' final states."""
    states = record_states(monkeypatch)
    run_case(backend, x, k, algorithm="multiblock", **kw)
    return np.concatenate([to_host(a).view(MB_STATE) for a in states])


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_multiblock_ties_across_slices(backend, small_slices):
    require(backend)
    # 20000 equal keys split over many slices: the winners at the boundary must be the lowest
    # indices of the whole row, whichever block holds them.
    x = np.zeros((2, 20000), dtype=np.float32)
    x[0, 15000:] = 1.0
    x[1, ::3] = -1.0
    for k in (1, 1999, 2048):
        for order in (True, "index"):
            run_case(backend, x, k, algorithm="multiblock", sorted=order)
            run_case(backend, x, k, algorithm="multiblock", sorted=order, mode="smallest")
    # 64-bit keys with early differences and late ones (every digit pass).
    y = (np.int64(2**62) + np.arange(30000, dtype=np.int64) % 7).reshape(1, -1)
    run_case(backend, y, 2000, algorithm="multiblock")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_multiblock_every_way_a_row_finishes(backend, small_slices, monkeypatch):
    # One call, one row of each outcome (largest, NaN last). The bucket buffer pinned at 4 keys
    # (what the budget of a quarter of the input bytes left it here before issue 39), so that
    # row 4's ties overflow it:
    set_caps(monkeypatch, bucket_cap=4)
    n, k = 20000, 100
    rng = np.random.default_rng(8)
    x = rng.random((9, n)).astype(np.float32)
    plan = cutopk.plan(x, k, backend="sim", algorithm="multiblock")
    cap, bucket_cap = plan.params["cap"], plan.params["bucket_cap"]
    assert plan.params["sample_rank"] is not None and plan.params["blocks_per_row"] >= 40
    # 1: all equal: the K-th key is the threshold, no key lies above it: pass 2 gathers the first
    # K of its ties (all in the first slice) and the last pass returns at once.
    x[1] = 0.25
    # 2: the sample sees only keys planted at its positions, fewer than K: the filter's threshold
    # fails, the row starts over on the input (BEHIND) and its last launch resolves two digits
    # (the bucket buffer of 4 overflows: the last digit counted on the input).
    # (The sample's first 6 runs, wherever the row starts relative to a 32-byte boundary.)
    planted = np.unique([_multiblock.sample_positions(n, 4, skew)[:48] for skew in range(8)])
    assert len(planted) < k
    x[2, planted] = 2.0
    # 3: K keys of one value far above the rest: pass 1's bucket is taken whole; pass 2 collects
    # it and the last pass returns at once.
    x[3, rng.choice(n, k, replace=False)] = 1e30
    # 4: 1/512 of the row at each of 513 values: the K-th key, above the threshold, has ~40 ties,
    # too many for the bucket buffer: gathered from the candidates, the ties by a radix select on
    # their indices.
    x[4] = np.round(x[4] * 512) / 512
    kth_4 = np.sort(x[4])[-k]
    # 5: K - 2 keys of 7.0 and a full bucket buffer's of 6.0: 2 of those ties win, from the bucket
    # buffer.
    assert bucket_cap >= 3
    x[5, rng.choice(n, k - 2 + bucket_cap, replace=False)] = np.repeat(
        np.float32([7.0, 6.0]), [k - 2, bucket_cap]
    )
    # 6: a sorted row (its winners crowd the last slices); 7: NaNs.
    x[6] = np.sort(x[6])
    x[7, ::7] = np.nan
    # 8: 60 keys above a value that fills a third of the row (the threshold): the 60 and the 40
    # lowest-index ties win, the ties written by the blocks of the first slices in pass 2.
    x[8] = np.where(rng.random(n) < 1 / 3, 0.5, x[8] * 0.5)
    x[8, rng.choice(np.flatnonzero(x[8] != 0.5), 60, replace=False)] = 5.0
    state = multiblock_states(monkeypatch, backend, x, k)
    assert (state["mode"] == FINISHED).all()
    assert list(state["source"]) == [ON_CANDIDATES, ON_CANDIDATES, ON_INPUT, ON_CANDIDATES, ON_CANDIDATES,
                                     ON_CANDIDATES, ON_CANDIDATES, ON_CANDIDATES, ON_CANDIDATES]  # fmt: skip
    # Spread rows end in the bucket buffer, or earlier when a bucket happens to be taken whole.
    assert set(state["gathered"][[0, 6, 7]]) <= {FROM_BUCKET, WHOLE}
    assert state["gathered"][2] == FROM_INPUT and list(state["staging"]) == [0, 0, BEHIND, 0, 0, 0, 0, 0, 0]
    assert list(state["gathered"][[1, 3, 4, 5, 8]]) == [
        FROM_TIES,
        WHOLE,
        FROM_CANDIDATES,
        FROM_BUCKET,
        FROM_TIES,
    ]
    assert list(state["passes"][[1, 3, 4, 5, 8]]) == [2, 2, 3, 3, 2]  # rows 1, 3, 8: done after pass 2 of 3
    assert (state["winners"] == k).all() and (state["k_row"] == k).all()
    assert (
        list(state["cand_count"][[1, 8]]) == [0, 60] and state["cand_count"][2] < k
    )  # keys above the threshold
    assert bucket_cap < (x[4] == kth_4).sum() and k <= state["cand_count"][4] <= cap
    for kk in (1, k, 2048):
        for nan, mode, order in (("largest", "largest", "index"), ("last", "smallest", True)):
            run_case(backend, x, kk, algorithm="multiblock", nan=nan, mode=mode, sorted=order)
    run_case(backend, x[:, ::-1], k, algorithm="multiblock", sorted=False)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_multiblock_without_buffers_reads_the_input(backend, small_slices, monkeypatch):
    # No threshold and a bucket buffer of one key: every row is read once per digit and its last
    # bucket (ties at the K-th key: never taken whole) gathered from the input in index order.
    set_caps(monkeypatch, cap=0, bucket_cap=1, threshold=False)
    rng = np.random.default_rng(9)
    x = make_values(rng, np.float32, (3, 9000), "few_distinct")
    x[0] = rng.integers(-20, 20, 9000)
    state = multiblock_states(monkeypatch, backend, x, 300)
    assert list(state["source"]) == [ON_INPUT] * 3 and list(state["gathered"]) == [FROM_INPUT] * 3
    for order in (True, "index", False):
        run_case(backend, x, 300, algorithm="multiblock", sorted=order, mode="smallest", nan="largest")


def family_max_k(dtype) -> int:
    """The largest K the family's finishing block sorts for ``dtype`` on the simulator's device (48
    KB); larger K is ordered apart (tests/gpu/test_multiblock_select.py)."""
    key_bytes = np.dtype(dtype).itemsize
    k = 1
    while _multiblock.sorts_in_block(2 * k, key_bytes, _dispatch.Device()):
        k *= 2
    return k


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_multiblock_every_dtype(backend, dtype, small_slices, monkeypatch):
    require(backend)
    # Candidates sized to hold the threshold's keys even on short rows (the budget would turn the
    # threshold off for 1-byte keys here), K = 1, a middle K and the family's largest.
    set_caps(monkeypatch, cap=6000)
    rng = np.random.default_rng(zlib.crc32(dtype.encode()))
    x = make_values(rng, dtype_of(dtype), (3, 12_000), "uniform")
    x[2] = make_values(rng, dtype_of(dtype), (12_000,), "nan" if "float" in dtype else "extremes")
    state = multiblock_states(monkeypatch, backend, x, 50)
    assert state["source"][0] == ON_CANDIDATES
    top = family_max_k(dtype_of(dtype))
    for k in (1, 50, top):
        for mode, order, nan in (("largest", True, "last"), ("smallest", "index", "largest")):
            run_case(backend, x, k, algorithm="multiblock", mode=mode, sorted=order, nan=nan)
    run_case(backend, x[::-1, ::-2], 50, algorithm="multiblock", sorted=False)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_multiblock_hard_distributions(backend, dist, small_slices):
    require(backend)
    rng = np.random.default_rng(len(dist))
    for dtype in ("float32", "int16", "uint8"):
        x = make_values(rng, dtype_of(dtype), (3, 9000), dist)
        run_case(backend, x, 64, algorithm="multiblock")
        run_case(backend, x, 1000, algorithm="multiblock", mode="smallest", nan="largest")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_multiblock_in_chunks_of_rows(backend, monkeypatch):
    require(backend)
    # Chunks of two rows stand in for the 65535-row grid limit: each chunk is a view that starts
    # at its first row, for reversed rows, a transposed input and batch axes that collapse.
    monkeypatch.setattr(_multiblock, "MAX_ROWS", 2)
    _call.CACHE.clear()  # plans made before the patch must not serve calls after it
    rng = np.random.default_rng(5)
    x = make_values(rng, np.float32, (7, 3000), "ties")
    x[:, 100:300] = np.nan
    plan = cutopk.plan(to_backend(x, backend), 40, backend=backend, algorithm="multiblock")
    assert plan.params["rows_per_chunk"] == 2
    for view in (x, x[::-1], x[::2, ::-3]):
        run_case(backend, view, 40, algorithm="multiblock", nan="largest")
        k = min(2048, view.shape[1] - 500)
        run_case(backend, view, k, algorithm="multiblock", mode="smallest", sorted="index")
    run_case(backend, np.ascontiguousarray(x.T), 7, axis=0, algorithm="multiblock")
    y = make_values(rng, np.int16, (3, 2, 5, 2048), "extremes")
    run_case(backend, y, 1000, algorithm="multiblock")
    run_case(backend, y[:, :, ::-1], 3, algorithm="multiblock", sorted="index")
    # The scratch budget: one row per chunk.
    monkeypatch.setattr(_multiblock, "SCRATCH_LIMIT", 1)
    _call.CACHE.clear()  # plans made before the patch must not serve calls after it
    assert (
        cutopk.plan(to_backend(y, backend), 9, backend=backend, algorithm="multiblock").params[
            "rows_per_chunk"
        ]
        == 1
    )
    run_case(backend, y, 9, algorithm="multiblock", mode="smallest")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_warp_radix_is_auto_for_batches_of_medium_rows(backend):
    require(backend)
    # 1100 rows of 300: a warp per row. Heavy ties at every digit, a run of one key longer than
    # the warp's 256 shared pairs at the K-th place (row 1), and NaNs.
    rng = np.random.default_rng(17)
    x = make_values(rng, np.float32, (1100, 300), "few_distinct")
    x[1] = 7.0
    x[2, ::5] = np.nan
    assert cutopk.plan(to_backend(x, backend), 40, backend=backend).algorithm == "warp_radix"
    for order in (True, "index"):
        run_case(backend, x, 40, sorted=order)
        run_case(backend, x, 128, sorted=order, mode="smallest", nan="largest")
    run_case(backend, x[:, ::-1].astype(np.float64), 1, index_dtype=np.int32)
    # The keys above the K-th key's bucket and the bucket must fit the warp's pairs together:
    # 120 winners in the top byte's highest bucket, the K-th key among 200 of the next bucket
    # (spread over the lower bytes), 320 pairs in all, so one more digit pass is needed.
    y = np.zeros((2, 1000), dtype=np.int32)
    y[:, 100:220] = 0x7F000000 + rng.integers(0, 2**24, (2, 120))
    y[:, 500:700] = 0x7E000000 + rng.integers(0, 2**24, (2, 200))
    run_case(backend, y, 128, algorithm="warp_radix")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_forced_algorithm_that_cannot_apply(backend):
    require(backend)
    x = np.zeros((2, 5000), np.float32)
    with pytest.raises(ValueError, match="algorithm: 'warp_row' handles rows of at most 1024"):
        cutopk.top_k(to_backend(x, backend), 3, backend=backend, algorithm="warp_row")
    with pytest.raises(ValueError, match="algorithm: 'radix' selects at most k=1024"):
        cutopk.top_k(to_backend(x, backend), 2000, backend=backend, algorithm="radix")
    with pytest.raises(ValueError, match="algorithm: expected 'auto' or one of"):
        cutopk.top_k(to_backend(x, backend), 3, backend=backend, algorithm="select")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_k_zero_and_empty_batches(backend):
    require(backend)
    x = np.zeros((0, 7), np.float32)
    r = cutopk.top_k(to_backend(x, backend), 3, backend=backend)
    assert to_host(r.values).shape == (0, 3)
    r = cutopk.top_k(to_backend(np.ones((2, 7), np.float32), backend), 0, backend=backend)
    assert to_host(r.indices).shape == (2, 0)


def test_algorithms_and_plan():
    assert cutopk.algorithms("sim") == _dispatch.ALGORITHMS
    x = np.zeros((8, 100), np.float32)
    plan = cutopk.plan(x, 4, backend="sim")
    assert plan.algorithm == "warp_row" and plan.copy is False
    plan = cutopk.plan(x.T, 4, axis=0, backend="sim", algorithm="bitonic")
    assert plan.algorithm == "bitonic" and plan.copy is False
    # A middle axis of a C array leaves two batch axes that no single stride describes.
    plan = cutopk.plan(np.zeros((3, 4, 50)), 2, axis=1, backend="sim")
    assert plan.copy is True
    plan = cutopk.plan(np.zeros((2, 5000), np.float64), 100, backend="sim")
    assert plan.algorithm == "radix" and plan.params["cap"] >= 1024


def test_out_of_memory_is_a_clear_memory_error():
    from support.launches import failing_launches

    class OutOfMemoryError(Exception):  # stands in for cupy.cuda.memory.OutOfMemoryError
        pass

    with failing_launches(OutOfMemoryError("out of memory allocating 1,024 bytes")):
        with pytest.raises(MemoryError, match=r"top_k: out of GPU memory running 'radix' on 2 rows of 5000"):
            cutopk.top_k(np.zeros((2, 5000), np.float32), 100, backend="sim")
        with pytest.raises(MemoryError, match=r"running 'radix' on 2 rows of 5000"):
            cutopk.top_k(np.zeros((5000, 2), np.float32), 100, axis=0, backend="sim")  # a copy first
        with pytest.raises(MemoryError, match=r"running 'multiblock' on 2 rows of 5000"):
            cutopk.top_k(np.zeros((2, 5000), np.float32), 100, backend="sim", algorithm="multiblock")
        with pytest.raises(
            MemoryError, match=r"running 'warp_row' on 2 rows of 50"
        ):  # one launch, no scratch
            cutopk.top_k(np.zeros((2, 50), np.float32), 5, backend="sim", algorithm="warp_row")


@pytest.mark.parametrize("backend", [pytest.param("numpy"), *GPU_BACKENDS])
def test_many_threads_at_once(backend):
    # Several Python threads calling top_k together, the first call of each dtype among them, so
    # that module building, the module cache and the launches all race.
    require(backend)
    from concurrent.futures import ThreadPoolExecutor

    from cutopk.cuda import launcher as _launcher

    _launcher._MODULES.clear()
    rng = np.random.default_rng(12)
    jobs = [
        make_values(rng, dtype_of(d), (4, 500), "few_distinct")
        for d in ("int16", "float32", "uint8", "float64") * 3
    ]

    def one(x):
        result = cutopk.top_k(to_backend(x, backend), 7, backend=backend)
        assert_same(tuple(to_host(r) for r in result), reference_top_k(x, 7))
        return True

    with ThreadPoolExecutor(max_workers=6) as pool:
        assert all(pool.map(one, jobs))


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_radix_candidate_buffer_paths(backend, monkeypatch):
    # Small shared-memory and buffer capacities, so that rows of a few thousand take every radix
    # path: the move of a bucket to the buffer (in index order), digit passes over the buffer,
    # compaction from it, and the ordered tie selection over it (few distinct values).
    require(backend)
    monkeypatch.setattr(_radix, "MAX_CANDIDATES", 64)
    monkeypatch.setattr(_radix, "BUFFER_DIVISOR", 3)
    _call.CACHE.clear()  # plans made before the patch must not serve calls after it
    rng = np.random.default_rng(21)
    assert cutopk.plan(np.zeros((2, 3000), np.float32), 100, backend="sim").params == {
        "cap": 64,
        "buffer": 1000,
    }
    for dtype, dist in (
        ("float32", "uniform"),
        ("float32", "few_distinct"),
        ("float64", "leading_bits"),
        ("int64", "uniform"),
        ("float16", "nan"),
        ("uint8", "uniform"),
        ("int32", "all_equal"),
    ):
        x = make_values(rng, dtype_of(dtype), (2, 3000), dist)
        for k in (1, 100, 700):
            run_case(backend, x, k, algorithm="radix")
        run_case(backend, x, 300, algorithm="radix", sorted="index", mode="smallest", nan="largest")
        run_case(backend, x[:, ::-1], 50, algorithm="radix", sorted=False, nan="largest")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_warp_row_medium_rows(backend):
    # ITEMS = 16 and 32 (rows of up to 1024 in a warp's registers), partial last slots, ties and
    # NaN across lanes and slots, every order.
    require(backend)
    rng = np.random.default_rng(31)
    for dtype, dist, n in (
        ("float64", "nan", 1024),
        ("int8", "few_distinct", 1000),
        ("float16", "zeros", 513),
    ):
        x = make_values(rng, dtype_of(dtype), (9, n), dist)
        assert cutopk.plan(x, 16, backend="sim").algorithm == "warp_row"
        for k, order, mode, nan in (
            (1, True, "largest", "last"),
            (16, "index", "smallest", "largest"),
            (32, False, "largest", "largest"),
            (32, True, "smallest", "last"),
        ):
            run_case(backend, x, k, sorted=order, mode=mode, nan=nan, algorithm="warp_row")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64"])
def test_streaming_loader_heads_tails_tiles_and_strides(backend, dtype):
    require(backend)
    # The streaming loader (kernels/row_loads.cuh) of every kernel that uses it: rows that start
    # off a 16-byte boundary (a column offset: a head read one by one), end inside a vector (a
    # tail), span several tiles of 16-byte loads, and the strided path (a column step of 3).
    rng = np.random.default_rng(7)
    x = rng.integers(-60, 60, (3, 40_013)).astype(dtype)  # many ties across tiles
    for view in (x[:, 1:], x[:, 5:-2], x[:, ::3], x[:, 8:]):
        for algorithm in ("radix", "warp_radix", "multiblock"):
            run_case(backend, view, 100, algorithm=algorithm)
            run_case(backend, view, 100, algorithm=algorithm, mode="smallest", sorted="index")


def test_kernel_constants_come_only_from_their_header():
    # Written once, in kernels/constants.cuh, which cutopk/cuda/kernel_constants.py reads; the module
    # has no constant of its own, no other kernel file defines one (a fallback would let the two
    # sides drift apart), every one is used by some kernel, and every module's source holds them.
    from cutopk.cuda import kernel_constants as _kernel_constants
    from cutopk.cuda import kernel_source as _kernel_source
    from cutopk.cuda import launcher as _launcher

    assert _kernel_constants.HEADER == _launcher.kernel_dir() / "constants.cuh"
    values = _kernel_constants.read_header()
    assert len(values) > 10 and tuple(values) == _kernel_constants._EXPORTED
    assert {n for n in vars(_kernel_constants) if n.isupper() and n[0] != "_"} == {"HEADER", *values}
    assert all("// ---- constants.cuh\n" in p.source for p in _launcher.programs())
    others = [name for name in _kernel_source.all_files() if name != "constants.cuh"]
    files = "\n".join((_launcher.kernel_dir() / name).read_text() for name in others)
    for name, value in values.items():
        macro = f"CUTOPK_{name}"
        assert getattr(_kernel_constants, name) == value
        assert re.search(rf"^#define {macro} {value}\b", _kernel_constants.HEADER.read_text(), re.M)
        assert f"#define {macro}" not in files and f"ifndef {macro}" not in files, macro
        assert macro in files, f"{macro} is not used by any kernel"
    assert _dispatch.MULTIBLOCK_STATE_BYTES == _kernel_constants.MULTIBLOCK_STATE_BYTES


def test_kernel_constants_header_rejects_what_python_cannot_read(tmp_path):
    from cutopk.cuda import kernel_constants as _kernel_constants

    good = tmp_path / "good.cuh"
    good.write_text("#pragma once\n#define CUTOPK_A 3  // three\n  #define CUTOPK_B -1\n")
    assert _kernel_constants.read_header(good) == {"A": 3, "B": -1}
    for line in ("#define CUTOPK_A (2 * 4)", "#define CUTOPK_A", "#define OTHER 1", "#define CUTOPK_B0 2"):
        bad = tmp_path / "bad.cuh"
        bad.write_text(f"#define CUTOPK_B0 1\n{line}\n")
        with pytest.raises(RuntimeError, match=r"bad\.cuh:2: expected '#define CUTOPK_<NAME> <integer>'"):
            _kernel_constants.read_header(bad)


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
