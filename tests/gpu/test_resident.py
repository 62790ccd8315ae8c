"""The resident family (kernels/resident.cu: a row held in shared memory, one launch) on the
simulator (and a GPU when present), bit for bit against the reference: every dtype on rows of 8192
with an H100's shared memory, ties (all equal, ties across the K-th place), NaN rules, -0.0,
``lengths=``, and each way the select ends (a bin that holds just the winners still needed, every
bit resolved, a row no longer than K). Sizes stay small: a row of 8192 is about a second of
simulation per dtype."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, require, to_backend
from support.family_checks import LENGTHS_ORDERS, check_lengths, signed_zeros_and_nans
from support.inputs import DTYPES, dtype_of, make_values
from test_kernels import run_case
from test_kernels_rows import H100_SHARED, use_device

import cutopk
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda.families import order_winners as _order
from cutopk.cuda.families import resident as _resident

GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]


def resident_plan(backend, x, k, **kw):
    # Forced: auto gives these rows to block_row, which holds them too (tests/gpu/test_block_row.py).
    plan = cutopk.plan(to_backend(x, backend), k, backend=backend, algorithm="resident", **kw)
    assert plan.algorithm == "resident" and len(plan.launches) == 1, plan
    return plan


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_on_rows_of_8192(backend, dtype, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(21)
    dist = "nan" if "float" in dtype else "few_distinct"
    x = make_values(rng, dtype_of(dtype), (2, 8192), dist)
    plan = resident_plan(backend, x, 512)
    key_bytes = np.dtype(dtype_of(dtype)).itemsize
    # The row's keys, or the ordering's scratch over them where it is larger (8-bit keys).
    row_bytes = max(8192 * key_bytes, _order.scratch_bytes(8192))
    assert plan.launches[0].shared_bytes == _resident.front_bytes(512, key_bytes) + row_bytes
    run_case(backend, x, 512, nan="largest", algorithm="resident")
    run_case(backend, x, 2048, mode="smallest", sorted="index", index_dtype=np.int32, algorithm="resident")
    run_case(backend, x, 50, sorted=False, algorithm="resident")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_ties(backend, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    equal = np.full((2, 8192), 3.0, np.float32)  # one bin through every digit: ranks by index
    resident_plan(backend, equal, 512)
    for order in (True, "index", False):
        run_case(backend, equal, 512, sorted=order, algorithm="resident")
    run_case(backend, equal.astype(np.float16), 2048, mode="smallest", algorithm="resident")
    # A run of equal keys across the K-th place, winners above it spread over the row.
    rng = np.random.default_rng(22)
    x = np.where(rng.random((2, 8192)) < 0.05, rng.random((2, 8192)) + 2, 1.5).astype(np.float32)
    for k in (1, 300, 411, 1000):
        run_case(backend, x, k, algorithm="resident")
        run_case(backend, x, k, sorted="index", algorithm="resident")
    # 64-bit keys that differ in their lowest bits only: every digit is refined.
    y = (np.int64(2**62) + np.arange(8192, dtype=np.int64) % 37).reshape(1, -1)
    run_case(backend, y, 700, algorithm="resident")
    run_case(backend, y[:, ::-1].copy(), 700, algorithm="resident", mode="smallest")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_nan_rules_and_signed_zeros(backend):
    require(backend)
    x = signed_zeros_and_nans(np.random.default_rng(23), 3, 3000)  # row 1: zeros, ties by index
    x[2, :100] = np.inf
    x[2, 100:200] = -np.inf
    for mode in ("largest", "smallest"):
        for nan in ("last", "largest"):
            for k in (5, 700, 2048):
                run_case(backend, x, k, mode=mode, nan=nan, algorithm="resident")
    h = x.astype(np.float16)
    run_case(backend, h, 900, mode="smallest", nan="largest", algorithm="resident", sorted="index")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_values_of_one_binade_split_below_the_top_digit(backend):
    require(backend)
    # Uniform in [1, 2): one exponent, so the 12-bit top digit splits on 3 mantissa bits only.
    rng = np.random.default_rng(24)
    x = (1 + rng.random((2, 4000))).astype(np.float32)
    for k in (1, 64, 1024):
        run_case(backend, x, k, algorithm="resident")
    b = make_values(rng, dtype_of("bfloat16"), (2, 4000), "few_distinct")
    run_case(backend, b, 333, algorithm="resident", nan="largest")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint64", "bfloat16"])
def test_lengths_read_by_the_kernel(backend, dtype, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(25)
    x = make_values(rng, dtype_of(dtype), (7, 8192), "nan" if "float" in dtype else "few_distinct")
    lengths = np.array([8192, 0, 1, 511, 512, 513, 5001])
    k = 512
    plan = cutopk.plan(
        to_backend(x, backend), k, lengths=to_backend(lengths, backend), backend=backend, algorithm="resident"
    )
    assert plan.algorithm == "resident" and plan.batch.startswith("lengths read by the kernels"), plan
    check_lengths(
        backend, x, k, lengths, (*LENGTHS_ORDERS, (False, "largest", "largest")), algorithm="resident"
    )


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_rows_no_longer_than_k_and_strided_rows(backend):
    require(backend)
    rng = np.random.default_rng(26)
    x = make_values(rng, np.int16, (3, 1500), "few_distinct")
    run_case(backend, x, 1500, algorithm="resident")  # every element wins
    run_case(backend, x, 1500, algorithm="resident", sorted="index", mode="smallest")
    run_case(backend, x[:, ::-3], 200, algorithm="resident")  # a negative column stride
    run_case(backend, x.T, 2, axis=0, algorithm="resident")  # rows along an outer axis: copied first


def test_capacity_and_refusals():
    h100 = _dispatch.Device(shared_bytes=H100_SHARED)
    # An H100 holds about 52K float32 keys next to the histogram (K <= 1024), 104K 16-bit ones.
    assert 50_000 < _resident.max_n(1024, 4, h100) < 53_000
    assert _resident.max_n(1024, 2, h100) == 2 * _resident.max_n(1024, 4, h100)
    assert _resident.max_n(2048, 8, h100) < _resident.max_n(1024, 8, h100)  # winners beyond the histogram
    assert (
        _dispatch.why_not("resident", 8192, 2049, 4, h100) == "'resident' selects at most k=2048, got k=2049"
    )
    reason = _dispatch.why_not("resident", 60_000, 10, 4, h100)
    assert reason is not None and "holds a row in shared memory" in reason
    # Without opting in (48 KB) rows of 8192 float32 keys do not fit; 16-bit ones do.
    assert _dispatch.why_not("resident", 8192, 512, 4, _dispatch.Device()) is not None
    assert _dispatch.why_not("resident", 8192, 512, 2, _dispatch.Device()) is None
    shared = _dispatch.plan(4, 8192, 2048, 4, h100, copy=False, algorithm="resident").shared_bytes
    assert shared == _resident.front_bytes(2048, 4) + 8192 * 4 == 16384 + 8192 * 4


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_scans_of_16_byte_vectors_at_the_edges(backend):
    # The held-key scans (issue 39) read 16 bytes a step and store a whole aligned run at once:
    # rows that start off a 16-byte boundary (one store per key), lengths that leave a partial
    # last vector, and refine passes where a warp counts few members (plain atomics), many
    # (warp-aggregated) or a mix of both, ending in the one-pass gather or the index-ranked place.
    require(backend)
    rng = np.random.default_rng(27)
    x = (1 + rng.random((3, 4003))).astype(np.float32)
    x[0, : 4003 // 3] = 1.5 + rng.random(4003 // 3).astype(np.float32) * 1e-3  # a third in one top bin
    x[1] = 1.25 + rng.random(4003).astype(np.float32) * 1e-3  # every key in one top bin
    for k in (1, 50, 700):
        run_case(backend, x, k, algorithm="resident")
        run_case(backend, x[:, 1:], k, algorithm="resident")  # rows 4 bytes past a 16-byte boundary
    h = make_values(rng, dtype_of("float16"), (2, 4005), "few_distinct")  # ties at the K-th place
    run_case(backend, h, 1, algorithm="resident")
    run_case(backend, h[:, 3:], 700, algorithm="resident", mode="smallest")
    b = make_values(rng, np.int8, (2, 4001), "few_distinct")
    run_case(backend, b, 33, algorithm="resident", sorted="index")
    run_case(backend, b[:, 5:], 1, algorithm="resident")
