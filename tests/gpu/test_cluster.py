"""The cluster family (kernels/cluster.cu: a thread-block cluster of 8 blocks per row, each
holding a slice in shared memory, counts and winners exchanged through distributed shared
memory) on the simulator's clusters (and a GPU with them when present), bit for bit against the
reference: every dtype, ties across slices (all equal, a run across the K-th place), NaN rules,
-0.0, ``lengths=`` (slices past a row's length are empty), rows no longer than K, strided rows.
Rows are a few thousand elements: 8 blocks of 512 threads each per row on the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, to_backend
from support.backends import require_clusters as require
from support.family_checks import check_lengths, signed_zeros_and_nans
from support.inputs import DTYPES, dtype_of, make_values
from test_kernels import run_case

import cutopk
from cutopk._core import call as _call
from cutopk.cuda import device as _device
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda.families import cluster as _cluster

GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]


def forced(backend, x, k, **kw):
    plan = cutopk.plan(to_backend(x, backend), k, backend=backend, algorithm="cluster", **kw)
    assert plan.algorithm == "cluster" and len(plan.launches) == 1
    assert plan.launches[0].grid == (x.size // x.shape[-1] * _cluster.BLOCKS,)
    return plan


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype(backend, dtype):
    require(backend)
    rng = np.random.default_rng(31)
    x = make_values(rng, dtype_of(dtype), (2, 6000), "nan" if "float" in dtype else "few_distinct")
    forced(backend, x, 700)
    run_case(backend, x, 700, algorithm="cluster", nan="largest")
    run_case(backend, x, 2048, algorithm="cluster", mode="smallest", sorted="index", index_dtype=np.int32)
    run_case(backend, x, 5, algorithm="cluster", sorted=False)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_ties_across_slices(backend):
    require(backend)
    equal = np.full((2, 6000), 3.0, np.float32)  # every slice's members ranked after the slices before
    for k in (1, 700, 2048):
        for order in (True, "index"):
            run_case(backend, equal, k, algorithm="cluster", sorted=order)
    rng = np.random.default_rng(32)
    x = np.where(rng.random((2, 6000)) < 0.03, rng.random((2, 6000)) + 2, 1.5).astype(np.float32)
    for k in (1, 150, 181, 1000):
        run_case(backend, x, k, algorithm="cluster")
        run_case(backend, x, k, algorithm="cluster", sorted="index", mode="smallest")
    y = (np.int64(2**62) + np.arange(6000, dtype=np.int64) % 37).reshape(1, -1)  # every digit refined
    run_case(backend, y, 700, algorithm="cluster")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_nan_rules_and_signed_zeros(backend):
    require(backend)
    x = signed_zeros_and_nans(np.random.default_rng(33), 2, 5000)
    for mode in ("largest", "smallest"):
        for nan in ("last", "largest"):
            run_case(backend, x, 900, mode=mode, nan=nan, algorithm="cluster")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "uint64"])
def test_lengths_read_by_the_kernel(backend, dtype):
    require(backend)
    rng = np.random.default_rng(34)
    x = make_values(rng, dtype_of(dtype), (6, 6000), "nan" if "float" in dtype else "few_distinct")
    lengths = np.array([6000, 0, 1, 500, 751, 4321])  # slices of 768: some empty, one cut short
    k = 500
    plan = forced(backend, x, k, lengths=to_backend(lengths, backend))
    assert plan.batch.startswith("lengths read by the kernels"), plan
    check_lengths(backend, x, k, lengths, algorithm="cluster")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_rows_no_longer_than_k_and_strided_rows(backend):
    require(backend)
    rng = np.random.default_rng(35)
    x = make_values(rng, np.int16, (2, 1500), "few_distinct")
    run_case(backend, x, 1500, algorithm="cluster")  # every element wins, from all 8 slices
    run_case(backend, x[:, ::-3], 200, algorithm="cluster", sorted="index")  # a negative column stride


def test_auto_on_the_simulator_and_the_limits(monkeypatch):
    h100 = _dispatch.Device(shared_bytes=_dispatch.shared_limit(48 * 1024, 227 * 1024), clusters=True)
    assert 380_000 < _cluster.max_n(2048, 4, h100) < 400_000
    assert _cluster.max_n(1024, 2, h100) >= 2 * _cluster.max_n(1024, 4, h100) - 2 * _cluster.BLOCKS * 32
    assert _cluster.slice_of(262144) == 32768 and _cluster.slice_of(1000) == 128
    monkeypatch.setattr(_device, "device_facts", lambda target, index: h100)
    _call.CACHE.clear()
    try:
        plan = cutopk.plan(np.zeros((4, 100_000), np.float32), 512, backend="sim")
        assert plan.algorithm == "cluster" and plan.launches[0].shared_bytes == 32768 + 12512 * 4
    finally:
        _call.CACHE.clear()
    reason = _dispatch.why_not("cluster", 10**6, 10, 4, h100)
    assert reason is not None and "8 blocks" in reason
    assert "thread-block clusters" in _dispatch.why_not("cluster", 9000, 10, 4, _dispatch.Device())
