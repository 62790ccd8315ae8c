"""Issue 39 on the simulator (and a GPU when present): the multi-block select's buffers for
16-bit keys sized in elements (the sampled threshold holds on rows where K is a few percent of
the row), and K too large for the finishing block ordered apart from the selection (order.cu
over the K pairs, the last merge writing the outputs), bit for bit against the reference, with ties, NaN,
signed zeros, lengths= and chunks of rows.
Shapes are small (the planned buffers scale with n and K, so a row of 8192 with K = 256 has the
ratio of the issue's 65536 with K = 2048); the issue's own shapes are planned in
tests/api/test_plan_select.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, require, to_backend, to_host
from support.inputs import DTYPES, dtype_of, make_values
from support.multiblock_state import DIRECT, FROM_INPUT, MB_STATE, ON_CANDIDATES, record_states
from support.reference import assert_same_padded, reference_top_k, reference_with_lengths
from test_kernels import run_case

import cutopk
from cutopk._core import call as _call
from cutopk.cuda.families import multiblock as _multiblock

GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]


@pytest.fixture
def sampled_short_rows(monkeypatch):
    """The sampled threshold and several blocks on rows of a few thousand (the planned buffers
    otherwise unchanged: their size is the family's own)."""
    monkeypatch.setattr(_multiblock, "MIN_SLICE", 512)
    monkeypatch.setattr(_multiblock, "SAMPLE_MIN_N", 0)
    _call.CACHE.clear()
    yield
    _call.CACHE.clear()


def states_of(monkeypatch, backend, x, k, **kw):
    states = record_states(monkeypatch)
    run_case(backend, x, k, algorithm="multiblock", **kw)
    return np.concatenate([to_host(a).view(MB_STATE) for a in states])


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int16"])
def test_16_bit_rows_take_the_sampled_threshold(backend, dtype, sampled_short_rows, monkeypatch):
    require(backend)
    n, k = 8192, 256  # K / n as the 16 x 65536, k=2048
    dt = dtype_of(dtype)
    plan = cutopk.plan(np.zeros((4, n), dt), k, backend="sim", algorithm="multiblock")
    assert plan.params["sample_rank"] is not None and plan.params["cap"] > 0, plan.params
    rng = np.random.default_rng(39)
    x = make_values(rng, dt, (4, n), "uniform")
    # Row 1: a few distinct values (16-bit keys repeat); row 2: NaN and signed zeros among
    # spread keys (floats); row 3: ties at the K-th place across slices.
    x[1] = make_values(rng, dt, (n,), "few_distinct")
    if dt.kind != "i":
        x[2, ::5] = np.nan
        x[2, 1::7] = -0.0
        x[2, 2::7] = 0.0
    x[3] = x[0]
    x[3, rng.choice(n, 600, replace=False)] = x[0].max()
    state = states_of(monkeypatch, backend, x, k)
    # The spread row stages its candidates, which all fit and hold every winner.
    assert state["source"][0] == ON_CANDIDATES and 0 < state["cand_count"][0] <= plan.params["cap"]
    # No row is gathered by its finishing block alone from the input (what the H200 ran on the
    # issue's float16 rows: 0.25 ms against 0.075 for torch.topk).
    assert FROM_INPUT not in state["gathered"], state["gathered"]
    for mode, order, nan in (
        ("largest", True, "last"),
        ("smallest", "index", "largest"),
        ("largest", False, "last"),
    ):
        run_case(backend, x, k, algorithm="multiblock", mode=mode, sorted=order, nan=nan)


@pytest.fixture(params=["merged", "picked"])
def ordered_apart(monkeypatch, request):
    """K beyond 64 ordered after the selection, as K beyond 4096 is on a GPU: every step of that
    path at simulator sizes, in tiles of 32 pairs. "merged": order_tiles over the winners' buffer
    and merges (runs too many for one merge); "picked": order_winner_tiles (here over the
    winners' buffer: rows of 3000 have no sampled threshold) and one merge of every run."""
    if request.param == "merged":
        monkeypatch.setattr(_multiblock, "PICKED_MAX_RUNS", 0)
    monkeypatch.setattr(_multiblock, "BLOCK_SORT_MAX", 64)
    monkeypatch.setattr(_multiblock, "ORDER_TILE", 32)
    monkeypatch.setattr(_multiblock, "MIN_SLICE", 512)
    monkeypatch.setattr(_multiblock, "SAMPLE_MIN_N", 0)
    _call.CACHE.clear()
    yield request.param
    _call.CACHE.clear()


def ordering_launches(x, k, **kw) -> list:
    plan = cutopk.plan(x, k, backend="sim", algorithm="multiblock", **kw)
    assert not plan.params["sort_here"], plan.params
    return [launch.kernel.split("<")[0] for launch in plan.launches]


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_k_is_ordered_after_the_selection(backend, dtype, ordered_apart, monkeypatch):
    require(backend)
    dt = dtype_of(dtype)
    rng = np.random.default_rng(len(dtype))
    x = make_values(rng, dt, (4, 3000), "uniform")
    x[1] = make_values(rng, dt, (3000,), "few_distinct")  # ties at the K-th place
    x[2] = make_values(rng, dt, (3000,), "nan" if dt.kind == "f" or dtype == "bfloat16" else "extremes")
    x[3] = make_values(rng, dt, (3000,), "all_equal")
    # 100 pairs: 4 tiles, one 4-way merge; 700: 22 tiles, two 8-way merges (ways = 8 >= sqrt(22)),
    # or one of all 22 runs (picked). The last merge writes the outputs: no pass re-reads the
    # indices and the values after it.
    if ordered_apart == "picked":
        assert (
            ordering_launches(x, 100)[-2:]
            == ordering_launches(x, 700)[-2:]
            == ["order_winner_tiles", "order_output"]
        )
    else:
        assert ordering_launches(x, 100)[-2:] == ["order_tiles", "order_output"]
        assert ordering_launches(x, 700)[-3:] == ["order_tiles", "order_merge", "order_output"]
    for k, mode, order, nan in (
        (100, "largest", True, "last"),
        (700, "smallest", "index", "largest"),
        (700, "largest", False, "last"),
        (3000, "largest", True, "largest"),  # every element wins: collected whole in pass 1
    ):
        run_case(backend, x, k, algorithm="multiblock", mode=mode, sorted=order, nan=nan)
    run_case(backend, x[::-1, ::-2], 300, algorithm="multiblock", sorted=True, index_dtype=np.int32)
    monkeypatch.setattr(_multiblock, "ORDER_TILE", 128)  # one tile: order_output only copies
    _call.CACHE.clear()
    assert ordering_launches(x, 100)[-2] == (
        "order_winner_tiles" if ordered_apart == "picked" else "order_tiles"
    )
    run_case(backend, x, 100, algorithm="multiblock", mode="smallest", nan="largest")


@pytest.fixture
def picked_apart(monkeypatch):
    """K beyond 64 picked where the selection left it (order.cu's order_winner_tiles over the
    candidates above the K-th key's bucket and the bucket's winners, in tiles of 64 pairs; then
    order_output merging every run of a row), as K = 65536 on 2^20-element rows on an H100."""
    monkeypatch.setattr(_multiblock, "BLOCK_SORT_MAX", 64)
    monkeypatch.setattr(_multiblock, "ORDER_TILE", 64)
    monkeypatch.setattr(_multiblock, "MIN_SLICE", 512)
    monkeypatch.setattr(_multiblock, "SAMPLE_MIN_N", 0)
    _call.CACHE.clear()
    yield
    _call.CACHE.clear()


def _with_ties_across_k(x, row, k, rng, count=40):
    """Row ``row`` of ``x`` with ``count`` more copies of its K-th value (largest mode) at random
    places: the K-th key's ties, some winning and some not, in every part of the row."""
    kth = reference_top_k(x[row : row + 1], k)[0][0, k - 1]
    x[row, rng.choice(x.shape[1], count, replace=False)] = kth


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_k_picked_from_the_candidates(backend, dtype, picked_apart, monkeypatch):
    # The last digit's pass writes no winners above the bucket (DIRECT); the tiles read them in
    # the candidates, the finishing block writes the bucket's winners alone (issue 39). Rows
    # whose selection went another way (ties at the threshold, a row shorter than K) keep the
    # winners' buffer, in the same launches.
    require(backend)
    dt = dtype_of(dtype)
    n, k = 20_000, 300
    rng = np.random.default_rng(39 + len(dtype))
    x = make_values(rng, dt, (4, n), "uniform")
    if dt.itemsize == 2:  # 16-bit keys: a last bucket (8 bits) of ~80 candidates here, 4 tiles
        monkeypatch.setattr(_multiblock, "ORDER_TILE", 256)
        _call.CACHE.clear()
        if dt.kind != "i" and dt.kind != "u":  # finite floats of every exponent (a normal's
            bits = rng.integers(0, 0x7C00 if dt == np.float16 else 0x7F80, (2, n))  # top keys share one)
            x[:2] = (bits | (rng.integers(0, 2, (2, n)) << 15)).astype(np.uint16).view(dt)
    _with_ties_across_k(x, 1, k, rng)
    x[2] = make_values(rng, dt, (n,), "nan" if dt.kind == "f" or dtype == "bfloat16" else "extremes")
    x[3] = make_values(rng, dt, (n,), "few_distinct")
    plan = cutopk.plan(x, k, backend="sim", algorithm="multiblock")
    names = [launch.kernel.split("<")[0] for launch in plan.launches]
    picked = dt.itemsize > 1  # one digit (8-bit keys): no pass after the candidates are known
    assert (plan.params["order_direct"] > 0) == picked, plan.params
    assert names[-2:] == ["order_winner_tiles", "order_output"]  # 8-bit keys: over the winners' buffer
    state = states_of(monkeypatch, backend, x, k)
    if picked:  # the spread row and the one with ties across the K-th place
        assert list(state["staging"][:2]) == [DIRECT, DIRECT], (state, plan.params)
    for mode, order, nan in (
        ("largest", True, "last"),
        ("smallest", "index", "largest"),
        ("largest", False, "last"),
        ("smallest", True, "largest"),
    ):
        run_case(backend, x, k, algorithm="multiblock", mode=mode, sorted=order, nan=nan)
    lengths = np.array([n, 250, 12_000, 0])  # picked, shorter than K (collected whole), picked, empty
    got = cutopk.top_k(
        to_backend(x, backend),
        k,
        lengths=to_backend(lengths, backend),
        backend=backend,
        algorithm="multiblock",
    )
    want = reference_with_lengths(x, k, lengths)
    assert_same_padded(tuple(to_host(a) for a in got), want, order=True)


def _nan_with_payloads(rng, dt, count) -> np.ndarray:
    """``count`` NaNs of ``dt`` (a float type) with random nonzero payloads and signs, as bits."""
    width = dt.itemsize * 8
    mantissa = {16: 10 if dt == np.float16 else 7, 32: 23, 64: 52}[width]
    exponent = ((1 << (width - 1 - mantissa)) - 1) << mantissa
    payload = rng.integers(1, 1 << mantissa, count, dtype=np.uint64)
    sign = rng.integers(0, 2, count, dtype=np.uint64) << np.uint64(width - 1)
    return (payload | np.uint64(exponent) | sign).astype(f"u{dt.itemsize}")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_large_k_values_rebuilt_from_keys_are_the_inputs_own_bits(backend, dtype, ordered_apart):
    # order_output rebuilds each value from its key; NaN keys (any sign and payload) and the zero
    # key (+0.0 and -0.0) do not hold the element's bits, so those are read from the input: every
    # output value must be the input's own element, bit for bit, at its index.
    _values_are_the_inputs_own_bits(backend, dtype)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_values_rebuilt_by_the_finishing_sort_are_the_inputs_own_bits(backend, dtype):
    # The same where the finishing block sorts the K winners in shared memory (order_winners):
    # it too rebuilds the values from the keys (no sector read per winner), the input re-read
    # at NaN and zero keys only.
    plan = cutopk.plan(np.zeros((3, 3000), dtype_of(dtype)), 1500, backend="sim", algorithm="multiblock")
    assert plan.params["sort_here"], plan.params
    _values_are_the_inputs_own_bits(backend, dtype)


def _values_are_the_inputs_own_bits(backend, dtype):
    require(backend)
    dt = dtype_of(dtype)
    rng = np.random.default_rng(39)
    x = make_values(rng, dt, (3, 3000), "uniform")
    bits = x.view(f"u{dt.itemsize}")
    for row in range(3):
        place = rng.permutation(3000)
        bits[row, place[:500]] = _nan_with_payloads(rng, dt, 500)
        x[row, place[500:1100]] = -0.0
        x[row, place[1100:1700]] = 0.0
    for k, mode, order, nan in (
        (1500, "largest", True, "last"),  # the zeros at the K-th place
        (1500, "smallest", "index", "last"),
        (700, "largest", True, "largest"),  # NaNs first
        (2800, "smallest", False, "largest"),
    ):
        run_case(backend, x, k, algorithm="multiblock", mode=mode, sorted=order, nan=nan)


def test_buffers_hold_32_bit_positions():
    # Every position is below 2^32 (and the winners' padding takes its slot, below K), so the
    # candidate, bucket and winners' buffers and the ordering's runs hold 4-byte positions:
    # 8-byte pairs for 32-bit keys instead of 12, for rows up to the family's 2^32 - 1.
    from cutopk.cuda import dispatch as _dispatch

    plan = cutopk.plan(np.zeros((1, 2**20), np.float32), 65536, backend="sim", algorithm="multiblock")
    assert not plan.params["sort_here"]
    table = {e.name: e.dtype for e in _multiblock.scratch(1, 2**20, 65536, plan.params)}
    names = ("cand_idx", "bucket_idx", "win_idx", "order_idx")  # order_idx: the picked tiles' slots
    assert {table[name] for name in names} == {"uint32"}, table
    long = cutopk.plan(np.zeros((1, 2**20), np.float32), 65536, backend="sim", algorithm="multiblock")
    long.params.update(order_picked=False)  # order_tiles and merges: ping-pong buffers
    table = {e.name: e.dtype for e in _multiblock.scratch(1, 2**20, 65536, long.params)}
    assert {table[name] for name in (*names, "order_idx2")} == {"uint32"}, table
    dev = _dispatch.Device()
    assert _multiblock.why_not(2**32 - 1, 2**32 - 1, 4, dev) is None


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_large_k_ordered_apart_with_lengths_and_chunks(backend, ordered_apart, monkeypatch):
    require(backend)
    monkeypatch.setattr(_multiblock, "MAX_ROWS", 2)  # 3 chunks of rows
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 2500)).astype(np.float32)
    x[:, ::9] = -0.0
    x[:, 1::9] = 0.0
    x[2, ::4] = np.nan
    lengths = np.array([2500, 0, 90, 1700, 1])  # longer than K, empty, shorter than K, one
    for k, mode, order, nan in ((200, "largest", True, "last"), (200, "smallest", "index", "largest")):
        plan = cutopk.plan(to_backend(x, backend), k, lengths=to_backend(lengths, backend), backend=backend,
                           algorithm="multiblock")  # fmt: skip
        assert not plan.params["sort_here"] and plan.batch.startswith("lengths read by the kernels"), plan
        got = cutopk.top_k(
            to_backend(x, backend), k, lengths=to_backend(lengths, backend), backend=backend,
            algorithm="multiblock", sorted=order, mode=mode, nan=nan,
        )  # fmt: skip
        want = reference_with_lengths(x, k, lengths, mode=mode, sorted=order, nan=nan)
        assert_same_padded(tuple(to_host(a) for a in got), want, order=order)
    # CSR segments at unaligned starts (one empty), and rows along axis 0 (outputs staged).
    offsets = np.array([0, 3, 2003, 2003, 4500, 12500])
    data = x.ravel()
    got = cutopk.segmented_top_k(
        to_backend(data, backend),
        offsets,
        150,
        backend=backend,
        algorithm="multiblock",
        sorted="index",
        nan="largest",
    )
    seg_lengths = np.diff(offsets)
    rows = np.zeros((seg_lengths.size, int(seg_lengths.max())), data.dtype)
    for r, (start, length) in enumerate(zip(offsets[:-1].tolist(), seg_lengths.tolist(), strict=True)):
        rows[r, :length] = data[start : start + length]
    want = reference_with_lengths(rows, 150, seg_lengths, sorted="index", nan="largest")
    assert_same_padded(tuple(to_host(a) for a in got), want, order="index")
    run_case(backend, np.ascontiguousarray(x.T), 200, axis=0, algorithm="multiblock", mode="smallest")
