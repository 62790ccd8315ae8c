"""Pass 1's streaming filter in the multi-block select (kernels/multiblock.cu, issue 39 item 3):
where the sampled threshold holds, pass 1 stages the keys above it through per-warp stages in
shared memory and counts only their top digit; where it fails (more keys above it than the
candidate buffer holds, or fewer than K reaching it) the row starts over on the input (staging
BEHIND) and its last launch resolves two digits, from the bucket buffer or the input. Bit for bit
against the reference on the simulator and the CuPy stand-in (every dtype with more than one
digit, ties, NaN, lengths=), with the rows' final states read to show which path each row took.
Shuffled block orders: tests/gpu/test_block_order.py."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, cuda_is_standin, require, to_backend, to_host
from support.inputs import dtype_of, make_values
from support.multiblock_state import (
    BEHIND,
    FINISHED,
    FROM_BUCKET,
    FROM_INPUT,
    MB_STATE,
    NO_THRESHOLD,
    ON_CANDIDATES,
    ON_INPUT,
    record_states,
)
from support.reference import assert_same, reference_top_k

import cutopk
from cutopk._core import call as _call
from cutopk.cuda.families import multiblock as _multiblock

GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]
# Keys of more than one digit: the dtypes whose pass 1 is the filter (8-bit keys keep the
# histogram of every key, their one digit).
FILTERED_DTYPES = ["float16", "bfloat16", "float32", "float64", "int16", "uint16", "int32", "uint32", "int64",
                   "uint64"]  # fmt: skip


@pytest.fixture
def small_slices(monkeypatch):
    """Many blocks per row on short rows, and the sampled threshold however short the row."""
    monkeypatch.setattr(_multiblock, "MIN_SLICE", 256)
    monkeypatch.setattr(_multiblock, "SAMPLE_MIN_N", 0)
    _call.CACHE.clear()
    yield
    _call.CACHE.clear()


def set_caps(monkeypatch, cap=None, bucket_cap=None):
    """The candidate and bucket buffers forced to these sizes (None: as planned), the threshold
    as planned for the row."""
    original = _multiblock.caps

    def caps(n, k, key_bytes, blocks_per_row):
        c, b, rank = original(n, k, key_bytes, blocks_per_row)
        if cap is not None:
            c, rank = cap, _multiblock.sample_rank(n, k)[0]
        return c, b if bucket_cap is None else bucket_cap, rank

    monkeypatch.setattr(_multiblock, "caps", caps)
    _call.CACHE.clear()


def run_case(backend, x, k, **kw):
    semantics = {name: kw[name] for name in ("mode", "sorted", "nan") if name in kw}
    expected = reference_top_k(x, k, **semantics)
    result = cutopk.top_k(to_backend(x, backend), k, backend=backend, algorithm="multiblock", **kw)
    assert_same(
        tuple(to_host(r) for r in result), expected, index_dtype=np.int64, order=kw.get("sorted", True)
    )


def states(monkeypatch, backend, x, k, **kw) -> np.ndarray:
    """Runs the case (checked) and returns the rows' final states."""
    recorded = record_states(monkeypatch)
    run_case(backend, x, k, **kw)
    return np.concatenate([to_host(a).view(MB_STATE) for a in recorded])


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_rows_whose_threshold_fails_start_over_and_stay_exact(backend, small_slices, monkeypatch):
    require(backend)
    n, k = 20_000, 100
    # Room for 150 candidates: about 230 keys of a spread row lie above the threshold (rank 45 of
    # the 4096-key sample), so spread rows overflow the buffer; the bucket buffer holds a whole
    # top-digit bucket of [0.5, 1) (a quarter of the row) so that the last two digits come from it.
    set_caps(monkeypatch, cap=150, bucket_cap=6000)
    rng = np.random.default_rng(39)
    x = rng.random((5, n)).astype(np.float32)
    # 0: spread keys: the buffer overflows, the row starts over; its last launch counts the last
    # digit over the bucket buffer.
    # 1: every key equal but the sampled ones (lower): every other key lies above the threshold,
    # the buffer overflows, and the winners are the K lowest indices of one value: the bucket
    # buffer overflows too, and the last digit is counted on the input.
    x[1] = 3.0
    for skew in range(8):
        x[1, _multiblock.sample_positions(n, 4, skew)] = 1.0
    # 2: the sample sees only keys planted at its positions, fewer than K of them: too few keys
    # reach the threshold.
    planted = np.unique([_multiblock.sample_positions(n, 4, skew)[:48] for skew in range(8)])
    assert len(planted) < k
    x[2, planted] = 2.0
    # 3: few keys above a threshold of many ties: the threshold holds (its ties make up K).
    x[3] = np.where(rng.random(n) < 0.5, 0.5, x[3] * 0.5)
    x[3, rng.choice(np.flatnonzero(x[3] != 0.5), 30, replace=False)] = 5.0
    # 4: NaNs on a spread row (the checks below put them first and last).
    x[4, ::5] = np.nan
    state = states(monkeypatch, backend, x, k, nan="last")
    assert (state["mode"] == FINISHED).all() and (state["winners"] == k).all()
    assert list(state["staging"]) == [BEHIND, BEHIND, BEHIND, NO_THRESHOLD, BEHIND]
    assert list(state["source"]) == [ON_INPUT, ON_INPUT, ON_INPUT, ON_CANDIDATES, ON_INPUT]
    assert state["cand_count"][0] > 150 and state["cand_count"][1] > 150 and state["cand_count"][2] < k
    assert state["gathered"][0] == FROM_BUCKET and state["gathered"][1] == FROM_INPUT
    for kk in (1, k, 2048):
        for mode, order, nan in (("largest", True, "last"), ("smallest", "index", "largest"), ("largest", False, "largest")):  # fmt: skip
            run_case(backend, x, kk, mode=mode, sorted=order, nan=nan)
    run_case(backend, x[:, ::-1], k, sorted="index")  # strided rows: the filter's scalar path


def every_dtype_cases():
    """Every filtered dtype on the simulator (and a GPU); on the CuPy stand-in, which runs the
    same kernels on the same simulator, two dtypes check its launcher's share."""
    cases = []
    for param in GPU_BACKENDS:
        for dtype in FILTERED_DTYPES:
            if param.values[0] == "cuda" and cuda_is_standin() and dtype not in ("float32", "float16"):
                continue
            cases.append(pytest.param(param.values[0], dtype, id=f"{dtype}-{param.id}", marks=param.marks))
    return cases


@pytest.mark.parametrize(("backend", "dtype"), every_dtype_cases())
def test_every_dtype_through_the_filter_and_its_fallback(backend, dtype, small_slices, monkeypatch):
    require(backend)
    # Row 0 held by the filter (room for its candidates), row 1 the same keys in a buffer too
    # small (it starts over), row 2 with ties and NaN or extremes; K = 1, 50 and 700.
    rng = np.random.default_rng(zlib.crc32(dtype.encode()))
    x = make_values(rng, dtype_of(dtype), (3, 12_000), "uniform")
    x[2] = make_values(rng, dtype_of(dtype), (12_000,), "nan" if "float" in dtype else "extremes")
    set_caps(monkeypatch, cap=6000)
    held = states(monkeypatch, backend, x, 50)
    assert held["staging"][0] == NO_THRESHOLD and held["source"][0] == ON_CANDIDATES
    set_caps(monkeypatch, cap=60)  # about 130 keys of a spread row of 12000 lie above the threshold
    failed = states(monkeypatch, backend, x, 50)
    assert failed["staging"][0] == BEHIND and failed["source"][0] == ON_INPUT
    # Each K with one of the orders and NaN rules, in turn (the held and fallen-back rows both).
    options = (("largest", True, "last"), ("smallest", "index", "largest"))
    for j, k in enumerate((1, 50, 700, 50)):
        mode, order, nan = options[j % 2]
        run_case(backend, x, k, mode=mode, sorted=order, nan=nan)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_stages_flushed_mid_slice_hold_every_candidate(backend, monkeypatch):
    require(backend)

    # Two blocks per row: a sorted row puts thousands of candidates in one slice, so each warp
    # flushes its stage of 256 offsets many times in its loop; 16-bit keys (8 a run) and 32-bit.
    def slices(rows, n, device):
        per = -(-n // 2)
        return 2, -(-per // 256) * 256

    monkeypatch.setattr(_multiblock, "slices", slices)
    monkeypatch.setattr(_multiblock, "SAMPLE_MIN_N", 0)
    _call.CACHE.clear()
    rng = np.random.default_rng(7)
    for dtype in ("float32", "float16"):
        x = np.sort(rng.standard_normal((2, 60_000)).astype(dtype), axis=1)
        x[1] = x[1, ::-1]  # the candidates in the first slice
        state = states(monkeypatch, backend, x, 2048)
        assert list(state["staging"]) == [NO_THRESHOLD] * 2 and list(state["source"]) == [ON_CANDIDATES] * 2
        assert (state["cand_count"] > 8 * 256).all()  # more than the block's stages hold at once
        run_case(backend, x, 2048, mode="smallest", sorted="index")
    _call.CACHE.clear()


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_rows_that_start_over_with_lengths(backend, small_slices, monkeypatch):
    require(backend)
    set_caps(monkeypatch, cap=60)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 12_000)).astype(np.float32)
    x[1, 5000:] = np.nan
    lengths = np.array([12_000, 9000, 700, 30], np.int64)
    k = 50
    recorded = record_states(monkeypatch)
    values, indices = (
        to_host(r)
        for r in cutopk.top_k(
            to_backend(x, backend), k, backend=backend, algorithm="multiblock", lengths=lengths
        )
    )
    state = np.concatenate([to_host(a).view(MB_STATE) for a in recorded])
    assert state["staging"][0] == BEHIND and (state["mode"] == FINISHED).all()
    for row, n in enumerate(lengths):
        taken = min(k, int(n))
        expected = reference_top_k(x[row : row + 1, :n], taken)
        got = (values[row : row + 1, :taken], indices[row : row + 1, :taken])
        assert_same(got, expected, index_dtype=np.int64, order=True)
        assert (indices[row, taken:] == -1).all()
