"""Row extents in the multiblock and sort families (kernels/multiblock.cu, kernels/sort.cu):
focused edge cases beside tests/irregular/test_extents.py's matrix. Rows of length 0, 1, < k, = k and = n;
rows shorter than one slice and rows whose length leaves whole blocks without elements; rows on
the input and on the candidate buffer; the sampled threshold; several chunks of rows; CSR
segments at unaligned starts; the family's largest K. Every case first checks that the kernels
read the extents (not the masked-copy or generic route), then compares with the independent
reference bit for bit.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support.backends import require, to_backend, to_host
from support.inputs import dtype_of, make_values
from support.multiblock_state import (
    FINISHED,
    FROM_INPUT,
    FROM_TIES,
    MB_STATE,
    ON_CANDIDATES,
    WHOLE,
    record_states,
)
from support.reference import assert_same_padded, reference_with_lengths

import cutopk
from cutopk._core import call as _call
from cutopk.cuda import device as _device
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda.families import multiblock as _multiblock

BACKENDS = [pytest.param("sim", id="sim"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]
ORDERS = (True, "index", False)
POLICIES = (("largest", "last"), ("smallest", "largest"))


def check(x, k, lengths, backend, *, algorithm="multiblock", order=True, mode="largest", nan="last", **kw):
    """top_k of ``x`` (rows along the last axis) with ``lengths`` against the reference, after
    checking that the kernels read the lengths; returns the plan."""
    plan = cutopk.plan(to_backend(x, backend), k, lengths=lengths, backend=backend, algorithm=algorithm)
    assert plan.algorithm == algorithm
    assert plan.batch.startswith("lengths read by the kernels"), plan.batch
    got = cutopk.top_k(
        to_backend(x, backend), k, lengths=to_backend(lengths, backend), backend=backend,
        algorithm=algorithm, sorted=order, mode=mode, nan=nan, **kw,
    )  # fmt: skip
    rows = x.reshape(-1, x.shape[-1])
    want = reference_with_lengths(rows, k, np.ravel(lengths), mode=mode, sorted=order, nan=nan)
    got = tuple(to_host(a).reshape(rows.shape[0], k) for a in got)
    assert_same_padded(got, want, index_dtype=kw.get("index_dtype", np.int64), order=order)
    return plan


def reference_segments(data, offsets, k, **kw):
    lengths = np.diff(offsets)
    rows = np.zeros((lengths.size, int(lengths.max(initial=0))), data.dtype)
    for s, (start, length) in enumerate(zip(offsets[:-1].tolist(), lengths.tolist(), strict=True)):
        rows[s, :length] = data[start : start + length]
    return reference_with_lengths(rows, k, lengths, **kw)


def check_segments(data, offsets, k, backend, algorithm, **kw):
    got = cutopk.segmented_top_k(
        to_backend(data, backend), offsets, k, backend=backend, algorithm=algorithm, **kw
    )
    ref_kw = {name: kw[name] for name in ("mode", "nan", "sorted") if name in kw}
    want = reference_segments(data, offsets, k, **ref_kw)
    assert_same_padded(
        tuple(map(to_host, got)),
        want,
        index_dtype=kw.get("index_dtype", np.int64),
        order=kw.get("sorted", True),
    )


def final_states(states):
    return np.concatenate([to_host(s).view(MB_STATE) for s in states])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "uint64", "float64"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_multiblock_lengths_across_slices(backend, dtype):
    """Rows of 0, 1, < k, = k, > k elements, shorter than one slice, ending at a slice's end or
    just after it, leaving whole blocks without elements, one short of n, and n."""
    require(backend)
    n, k = 9000, 30
    rng = np.random.default_rng(abs(hash(dtype)) % 2**32)
    x = make_values(rng, dtype_of(dtype), (12, n), "few_distinct")
    if np.dtype(dtype_of(dtype)).kind == "f":
        x[3, :10] = np.nan  # NaNs inside a short row: the policy decides whether they win
        x[4, 5] = -0.0
        x[9, 8990:] = np.nan  # past row 9's length: never read
    plan = cutopk.plan(x, k, lengths=np.full(12, n), backend="sim", algorithm="multiblock")
    slice_ = plan.params["slice"]
    assert plan.params["blocks_per_row"] >= 4 and plan.params["sample_rank"] is None
    lengths = np.array(
        [0, 1, k - 1, k, k + 1, 100, slice_, slice_ + 1, 2 * slice_ + 5, n - 1, n, 3 * slice_ - 1]
    )
    for order, (mode, nan) in itertools.product(ORDERS, POLICIES):
        check(x, k, lengths, backend, order=order, mode=mode, nan=nan)
    check(x, k, lengths, backend, index_dtype=np.int32, order="index")


@pytest.mark.parametrize("backend", BACKENDS)
def test_multiblock_lengths_rows_on_the_input_and_on_candidates(backend, monkeypatch):
    """A row of one repeated key: with a threshold (K <= 100) the threshold is its K-th key, and
    pass 2 gathers the first K ties (read with the row's own length); without one (K = 4096, the
    winners then ordered apart) it stays on the input for every digit pass and is gathered from
    it in index order. Spread rows
    move to the candidates, an empty row and a row shorter than K are collected whole at once;
    all in one call."""
    require(backend)
    n = 70_000
    rng = np.random.default_rng(3)
    x = rng.integers(-(2**31), 2**31 - 1, (6, n), dtype=np.int32)
    x[0] = 7
    x[0, 68_000:] = 9  # past row 0's length: would win if read
    x[2] = -4
    x[2, ::50] = rng.integers(-(2**31), 2**31 - 1, 1400)
    x[1, ::997] = x[1, 11]
    lengths = np.array([68_000, 66_000, 60_000, 0, 5, n])
    plan = cutopk.plan(x, 100, lengths=lengths, backend="sim", algorithm="multiblock")
    assert plan.params["sample_rank"] is not None and plan.params["cap"] < lengths[0]
    assert cutopk.plan(x, 4096, lengths=lengths, backend="sim", algorithm="multiblock").params["cap"] == 0
    states = record_states(monkeypatch)
    for k in (1, 100, 4096):
        states.clear()
        check(x, k, lengths, backend, mode="smallest" if k == 4096 else "largest")
        state = final_states(states)
        assert (state["mode"] == FINISHED).all()
        assert list(state["k_row"]) == [min(k, int(length)) for length in lengths]
        if k <= 100:  # with K = 4096 the candidates would not fit the budget: no threshold
            assert list(state["source"][[0, 1, 5]]) == [ON_CANDIDATES] * 3, state
            assert state["gathered"][0] == FROM_TIES and state["cand_count"][0] == 0
        else:
            assert state["gathered"][0] == FROM_INPUT
        # Rows of no element or fewer than K: collected whole in pass 1, the later passes return.
        whole = [3, 4] if k >= 5 else [3]
        assert (state["gathered"][whole] == WHOLE).all() and (state["passes"][whole] == 1).all()
    check(x, 100, lengths, backend, order="index")
    check(x, 100, lengths, backend, order=False, index_dtype=np.int32)


@pytest.fixture
def sampled_threshold(monkeypatch):
    """The multi-block select with its sampled threshold on every row, however short, and many
    blocks per row."""
    monkeypatch.setattr(_multiblock, "SAMPLE_MIN_N", 0)
    monkeypatch.setattr(_multiblock, "MIN_SLICE", 256)
    _call.CACHE.clear()  # plans made before the patch must not serve calls after it
    yield
    _call.CACHE.clear()


@pytest.mark.parametrize("dtype", ["float32", "int16", "float64"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_multiblock_sampled_threshold_with_lengths(backend, dtype, sampled_threshold, monkeypatch):
    """sample_threshold samples each row's own length: long spread rows read their candidates after
    pass 1 (the input once); rows shorter than the sample (repeated sample positions), shorter
    than k, of one element and empty are exact too."""
    require(backend)
    n, k = 30_000, 50
    rng = np.random.default_rng(abs(hash((dtype, "sampled"))) % 2**32)
    x = make_values(rng, dtype_of(dtype), (7, n), "uniform")
    lengths = np.array([n, 0, 1, k - 1, 3000, 20_001, k])
    plan = cutopk.plan(x, k, lengths=lengths, backend="sim", algorithm="multiblock")
    assert plan.params["sample_rank"] is not None
    states = record_states(monkeypatch)
    check(x, k, lengths, backend)
    state = final_states(states)
    for row in (0, 5):
        assert state["source"][row] == ON_CANDIDATES and k <= state["cand_count"][row] <= plan.params["cap"]
    assert list(state["k_row"]) == [min(k, int(length)) for length in lengths]
    for order, (mode, nan) in itertools.product(ORDERS, POLICIES):
        check(x[:, ::-1].copy(), k, lengths, backend, order=order, mode=mode, nan=nan)
    check(x, 300, lengths, backend, order="index", index_dtype=np.int32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_multiblock_largest_k_with_lengths(backend, monkeypatch):
    """The largest K the finishing block sorts on the simulator's device (48 KB: 2048 pairs of
    32-bit keys), with rows shorter than K (padding pairs sorted after the winners), and K beyond
    it ordered apart (order.cu, gather_values), padding included."""
    require(backend)
    monkeypatch.setattr(_device, "device_facts", lambda target, device: _dispatch.Device())
    n, k = 9000, 2048
    rng = np.random.default_rng(5)
    x = make_values(rng, np.float32, (7, n), "ties")
    lengths = np.array([0, 1, k - 1, k, k + 1, n, 6000])
    check(x, k, lengths, backend)
    for order in ORDERS:
        check(x, k, lengths, backend, order=order, mode="smallest", index_dtype=np.int32)
    y = make_values(rng, np.uint16, (3, n), "few_distinct")
    check(y, 4096, np.array([2000, n, 0]), backend, order="index")
    plan = cutopk.plan(x, k + 1, lengths=lengths, backend="sim")
    assert plan.algorithm == "multiblock" and not plan.params["sort_here"]
    check(x, k + 1, lengths, backend, order="index", mode="smallest")


@pytest.mark.parametrize("backend", BACKENDS)
def test_multiblock_chunks_of_rows_with_lengths_and_segments(backend, monkeypatch, no_generic_route):
    """Chunks of two rows (then one) stand in for the 65535-row grid limit: a chunk of rows with
    lengths takes its slice of the lengths with its view of the input; a chunk of segments keeps
    the data's start and takes its offsets and the next one."""
    require(backend)
    monkeypatch.setattr(_multiblock, "MAX_ROWS", 2)
    _call.CACHE.clear()  # plans made before the patch must not serve calls after it
    rng = np.random.default_rng(6)
    n, k = 5000, 40
    x = make_values(rng, np.float32, (7, n), "ties")
    lengths = np.array([n, 0, 3, k, 2500, 1, n - 7])
    assert (
        cutopk.plan(x, k, lengths=lengths, backend="sim", algorithm="multiblock").params["rows_per_chunk"]
        == 2
    )
    check(x, k, lengths, backend, nan="largest")
    check(x[::-1, ::2], k, np.minimum(lengths, n // 2), backend, order="index", mode="smallest")
    check(x, 2048, lengths, backend)  # the family's largest K, per chunk
    offsets = np.array([3, 4103, 4103, 4104, 4150, 9001, 9001, 9200, 13_000])
    data = make_values(rng, np.float32, (13_005,), "few_distinct")
    for order in ORDERS:
        check_segments(data, offsets, k, backend, "multiblock", sorted=order)
    check_segments(data, offsets, 2048, backend, "multiblock", index_dtype=np.int32)
    monkeypatch.setattr(_multiblock, "SCRATCH_LIMIT", 1)
    _call.CACHE.clear()
    assert (
        cutopk.plan(x, 9, lengths=lengths, backend="sim", algorithm="multiblock").params["rows_per_chunk"]
        == 1
    )
    check(x, 9, lengths, backend, mode="smallest")
    check_segments(data, offsets, 9, backend, "multiblock", mode="smallest", sorted="index")


@pytest.mark.parametrize("dtype", ["float16", "int8", "float64", "int64"])
@pytest.mark.parametrize("algorithm", ["multiblock", "sort"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_segments_at_unaligned_starts(backend, algorithm, dtype, no_generic_route):
    """Segments starting at every residue modulo the 16-byte vector (the loader's head and tail
    are the segment's own), shorter than k, empty, and long enough for several slices."""
    require(backend)
    rng = np.random.default_rng(abs(hash((dtype, algorithm))) % 2**32)
    long = 7000 if algorithm == "multiblock" else 900
    lengths = [1, 2, 3, 5, 7, 11, 13, 17, 0, long, 19, long - 3, 0, 23, 64, 129]
    offsets = np.concatenate([[1], 1 + np.cumsum(lengths)]).astype(np.int64)
    data = make_values(rng, dtype_of(dtype), (int(offsets[-1]) + 5,), "few_distinct")
    k = 12
    for order, (mode, nan) in itertools.product(ORDERS, POLICIES):
        check_segments(data, offsets, k, backend, algorithm, sorted=order, mode=mode, nan=nan)
    check_segments(data, offsets, 200, backend, algorithm, sorted="index", index_dtype=np.int32)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "uint8", "int64"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_lengths(backend, dtype):
    """The sort path: the keys past a row's length sort after every real key (even one equal to
    the least preferred key) and become padding; k = n; strided rows; both index types."""
    require(backend)
    n = 300
    rng = np.random.default_rng(abs(hash((dtype, "sort"))) % 2**32)
    x = make_values(rng, dtype_of(dtype), (8, n), "extremes")
    info = np.iinfo if np.dtype(dtype_of(dtype)).kind in "iu" else None
    if info is not None:
        x[2, :4] = info(x.dtype).min  # the least preferred value (largest mode) inside a short row
        x[2, 4:] = info(x.dtype).max  # past row 2's length: would win if read
    for k in (1, 7, n):
        lengths = np.array([0, 1, 4, k, n, min(n, k + 1), n - 1, 150])
        for order, (mode, nan) in itertools.product(ORDERS, POLICIES):
            check(x, k, lengths, backend, algorithm="sort", order=order, mode=mode, nan=nan)
    strided = make_values(rng, dtype_of(dtype), (4, 2 * n), "ties")[:, ::2]
    check(strided, 9, np.array([n, 0, 8, 9]), backend, algorithm="sort", index_dtype=np.int32, order="index")
