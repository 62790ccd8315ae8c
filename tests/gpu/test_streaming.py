"""The streaming family (kernels/streaming.cu: one block per row reads its row once through a ring
of asynchronous copies against a sampled threshold) on the simulator (and a GPU when present), bit
for bit against the reference: every dtype, each way a row ends (the candidates hold the winners;
the threshold fails and the exact path over the row takes over; rows too short to sample), ties,
NaN rules, -0.0, misaligned and strided rows, ``lengths=`` and CSR segments, all three orders.
Which way a row went is read from the simulator's traffic: the filter reads the row once (and the
sample), the exact path once per digit more."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, require, to_backend
from support.family_checks import check_lengths, signed_zeros_and_nans
from support.inputs import DTYPES, dtype_of, make_values
from test_kernels import run_case
from test_kernels_rows import H100_SHARED, use_device

import cutopk
from cutopk import sim
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda.families import cluster as _cluster
from cutopk.cuda.families import streaming as _streaming

GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]
ALGORITHM = {"algorithm": "streaming"}
H100 = _dispatch.Device(sm_count=132, shared_bytes=H100_SHARED, clusters=True)


# AddressSanitizer builds cannot count traffic (both instrument every access): the cases still run.
ASAN = sim._module._environ.flag("CUTOPK_SIM_ASAN")


def reads_per_input_byte(backend, x, k, **kw) -> float | None:
    """Global bytes the launch read over the input's bytes, where the simulator counts them."""
    if backend != "sim" or ASAN:
        run_case(backend, x, k, **ALGORITHM, **kw)
        return None
    with sim.counting_traffic() as records:
        run_case(backend, x, k, **ALGORITHM, **kw)
    assert [r.kernel.startswith("streaming_topk") for r in records] == [True], records
    return sum(r.bytes_read for r in records) / x.nbytes


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_through_the_filter(backend, dtype, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(31)
    dist = "nan" if "float" in dtype else "uniform"
    x = make_values(rng, dtype_of(dtype), (2, 20000), dist)
    read = reads_per_input_byte(backend, x, 50)
    assert read is None or read < 1.3, read  # the row once, and the sample's 4096 keys
    run_case(backend, x, 1000, mode="smallest", sorted="index", index_dtype=np.int32, **ALGORITHM)
    run_case(backend, x, 2048, sorted=False, nan="largest", **ALGORITHM)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_rows_whose_threshold_fails_take_the_exact_path(backend, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    equal = np.full((2, 12000), 3.0, np.float32)  # every key reaches any threshold: overflow
    for order in (True, "index", False):
        read = reads_per_input_byte(backend, equal, 700, sorted=order)
        assert read is None or read > 2, read  # the filter, then a read per digit and the collection
    rng = np.random.default_rng(32)
    # A run of equal keys across the K-th place, a few winners above it spread over the row.
    x = np.where(rng.random((2, 16384)) < 0.01, rng.random((2, 16384)) + 2, 1.5).astype(np.float32)
    for k in (1, 100, 163, 1000, 2048):
        run_case(backend, x, k, **ALGORITHM)
    # Fewer keys than the sample promises reach its threshold: the largest keys all at the end.
    few = np.concatenate([rng.random((2, 16000)), rng.random((2, 384)) + 5], axis=1).astype(np.float32)
    run_case(backend, few, 2048, **ALGORITHM)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_ties_nan_and_signed_zeros(backend, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(33)
    x = signed_zeros_and_nans(rng, 2, 9000)
    for nan in ("last", "largest"):
        for mode in ("largest", "smallest"):
            run_case(backend, x, 300, nan=nan, mode=mode, **ALGORITHM)
    ties = np.repeat(rng.standard_normal((2, 90)).astype(np.float16), 100, axis=1)  # each value 100 times
    for k in (1, 99, 100, 101, 2048):
        run_case(backend, ties, k, sorted="index", **ALGORITHM)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_rows_of_every_layout(backend, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(34)
    wide = rng.standard_normal((3, 30011)).astype(np.float32)
    run_case(backend, wide[:, 3:], 77, **ALGORITHM)  # starts 12 bytes past a 16-byte boundary: a head
    run_case(backend, wide[:, 1:-2].astype(np.float16), 77, **ALGORITHM)  # and a tail
    run_case(backend, wide[:, ::2], 500, **ALGORITHM)  # strided: the loader instead of the ring
    tail = rng.random((2, 20003)).astype(np.float32)  # 16-byte aligned: a tail of 3, the winners in it
    tail[:, -3:] = 7.0
    run_case(backend, tail, 5, **ALGORITHM)
    run_case(backend, wide[:, :8191], 64, **ALGORITHM)  # too short to sample: the exact path
    run_case(backend, wide[:, :2048], 2048, **ALGORITHM)  # K = n: every element wins


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_lengths_and_segments(backend, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(35)
    x = rng.standard_normal((4, 20000)).astype(np.float32)
    lengths = np.array([20000, 9000, 40, 0])  # filtered, filtered, shorter than K (padding), empty
    check_lengths(backend, x, 64, lengths, **ALGORITHM)
    data = rng.standard_normal(40000).astype(np.float32)
    offsets = np.array([0, 17000, 17000, 30000, 40000])
    got = cutopk.segmented_top_k(to_backend(data, backend), to_backend(offsets, backend), 20, backend=backend,
                                 **ALGORITHM)  # fmt: skip
    want = cutopk.segmented_top_k(data, offsets, 20, backend="numpy")
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(np.asarray(g if backend == "sim" else g.get()), w)


def test_plan_one_launch_one_read_and_the_bytes_in_flight(monkeypatch):
    """An H100's facts: one launch moving the input once and the outputs, two blocks per SM for
    16- and 32-bit keys, and the copies in flight per SM by construction (the ring's stages other
    than the one being filtered, times the blocks) at least 64 KB."""
    monkeypatch.setattr(cutopk.cuda.device, "device_facts", lambda target, dev: H100)
    for n, k, dtype in ((262144, 1024, np.float32), (131072, 2048, np.float16), (65536, 1, np.float32)):
        x = np.empty((256, n), dtype)
        p = cutopk.plan(x, k, backend="sim", algorithm="streaming")
        io = x.nbytes + 256 * k * (x.itemsize + 8)
        assert p.launch_count == 1 and p.global_bytes <= 1.0 * io + 64, (p, io)
        assert p.params["blocks_per_sm"] == 2 and p.params["bytes_in_flight_per_sm"] >= 64 * 1024, p.params
        assert p.params["cap"] >= _streaming.expected_candidates(n, k), p.params


def test_candidates_hold_the_expected_count_with_a_margin():
    for n, k in ((262144, 2048), (65536, 1), (131072, 1024)):
        c = _streaming.cap(n, k, 4, H100)
        assert c is not None and c >= 1.4 * _streaming.expected_candidates(n, k)
    assert "k=4096" in _streaming.why_not(1 << 20, 4096, 4, H100)
    assert "shared memory" in _streaming.why_not(1 << 20, 64, 4, _dispatch.Device())  # 48 KB: no room


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_long_llm_rows_take_one_launch_and_one_read_on_an_h100(monkeypatch, dtype):
    """Issue 52's CPU target: on an H100's facts every LLM and indexer row of 65536-262144 (1-256
    rows, K 1-2048) takes one launch moving at most 1.05 x its input and outputs: streaming for 32
    rows and more, and for the fewer rows cluster (or block_row where one block holds the row),
    its clusters filling the GPU: 8 blocks a row up to the 16 clusters of 8 that fit on 132 SMs
    at once, 4 beyond (one wave of 33) where a quarter of the row fits a block's shared memory."""
    from support.inputs import dtype_of

    monkeypatch.setattr(cutopk.cuda.device, "device_facts", lambda target, dev: H100)
    np_dtype = dtype_of(dtype)
    families = set()
    for rows in (1, 2, 4, 8, 16, 17, 24, 31, 32, 64, 256):
        for n in (65536, 128256, 131072, 151936, 262144):
            for k in (1, 50, 256, 1024, 2048):
                x = np.empty((rows, n), np_dtype)
                p = cutopk.plan(x, k, backend="sim")
                io = x.nbytes + rows * k * (x.itemsize + 8)
                assert p.launch_count == 1 and p.global_bytes <= 1.05 * io, (rows, n, k, p)
                families.add(p.algorithm)
                if rows < _dispatch.STREAMING_MIN_ROWS:
                    assert p.algorithm in ("cluster", "block_row"), (rows, n, k, p)
                else:
                    assert p.algorithm == "streaming", (rows, n, k, p)
                if p.algorithm == "cluster":  # 8 blocks a row while 16 fit at once, then 4 where they fit
                    quarter_fits = _cluster.shared_bytes(n, k, x.itemsize, 4, H100) is not None
                    want = 4 if rows > 16 and quarter_fits else 8
                    assert p.params["cluster"] == want, (rows, n, k, p)
    assert (
        families == {"streaming", "cluster", "block_row"} if dtype == "float16" else {"streaming", "cluster"}
    )
