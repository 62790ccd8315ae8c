"""The row kernels beyond their defaults, on the simulator (and a GPU when present): shared
memory beyond 48 KB (opted in), the ordering of K winners too many for shared memory, and rows
along an outer axis. The device facts are replaced by a Device with a chosen shared-memory
limit, so that both sides of every limit run at sizes the simulator takes in seconds.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, require, require_clusters, to_backend
from support.inputs import dtype_of, make_values
from test_kernels import run_case

import cutopk
from cutopk._core import call as _call
from cutopk.cuda import device as _device
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda import launcher as _launcher
from cutopk.cuda.families import multiblock as _multiblock

GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]
H100_SHARED = _dispatch.shared_limit(48 * 1024, 227 * 1024)  # 227 KB opt-in, less the reserve


def use_device(monkeypatch, backend, shared_bytes, **facts):
    """Plans and launches see a device with ``shared_bytes`` of dynamic shared memory per block
    (and the other ``Device`` fields in ``facts``: clusters, SMs). On the simulator every launch
    must then have opted in to what it asks beyond 48 KB, as CUDA requires (the simulator itself
    does not check the kernel attribute)."""
    if backend == "cuda":
        real = _launcher._device_facts("cuda", _launcher._device_id("cuda"))
        if real.shared_bytes < shared_bytes:
            pytest.skip(f"this GPU allows {real.shared_bytes} bytes of shared memory, not {shared_bytes}")
    device = _dispatch.Device(shared_bytes=shared_bytes, **facts)
    monkeypatch.setattr(_device, "device_facts", lambda target, dev: device)
    _call.CACHE.clear()  # plans made for the real device must not serve calls after the patch
    if backend == "sim":
        from cutopk.sim import _module

        launch = _module.Function.__call__

        def opted_in(self, grid, block, args, *, shared_mem=0, **kw):
            limit = getattr(self, "max_dynamic_shared_size_bytes", _dispatch.SHARED_BYTES)
            assert shared_mem <= limit, f"{self.name}: {shared_mem} bytes of shared memory without opting in"
            return launch(self, grid, block, args, shared_mem=shared_mem, **kw)

        monkeypatch.setattr(_module.Function, "__call__", opted_in)
    return device


def test_shared_limit():
    assert _dispatch.shared_limit(48 * 1024, 227 * 1024) == 227 * 1024 - _dispatch.STATIC_SHARED_RESERVE
    assert _dispatch.shared_limit(48 * 1024, 163 * 1024) == 163 * 1024 - _dispatch.STATIC_SHARED_RESERVE
    assert _dispatch.shared_limit(48 * 1024, 48 * 1024) == 48 * 1024  # no opt-in beyond the default
    assert _dispatch.shared_limit(48 * 1024, 0) == 48 * 1024  # attribute unknown
    assert _dispatch.shared_limit(16 * 1024, 0) == 16 * 1024


def test_large_shared_memory_plans():
    big = _dispatch.Device(shared_bytes=H100_SHARED)
    # Rows of 16384 32-bit keys (and 32768 16-bit ones) fit an H100's opted-in shared memory.
    assert _dispatch.bitonic_size(16384, 4, big) == 16384
    assert _dispatch.bitonic_size(16385, 4, big) is None
    assert _dispatch.bitonic_size(32768, 2, big) == 32768
    p = _dispatch.plan(100, 16384, 2000, 4, big, copy=False, algorithm="bitonic")
    assert (p.algorithm, p.shared_bytes) == ("bitonic", 16384 * 8)
    # (auto selects first on rows beyond 4096 pairs and orders the K alone: issue 39)
    assert _dispatch.plan(100, 16384, 3000, 4, big, copy=False).algorithm == "multiblock"
    # (K <= 2048 on up to 256 such rows: the row held on chip, one launch: issues 37 and 51)
    assert _dispatch.plan(100, 16384, 2000, 4, big, copy=False).algorithm == "block_row"
    # radix holds more candidates, multiblock's finishing block sorts more winners.
    assert _dispatch.radix_cap(1024, 8, big) > _dispatch.radix_cap(1024, 8, _dispatch.Device())
    assert _dispatch.plan(1, 2**20, 4096, 4, big, copy=False).params["order_shared"] == 4096 * 12
    # Beyond 4096 pairs the K are ordered apart, on any device.
    for device in (big, _dispatch.Device()):
        p = _dispatch.plan(1, 2**20, 16384, 4, device, copy=False)
        assert p.algorithm == "multiblock" and not p.params["sort_here"], p


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_bitonic_beyond_48k(backend, dtype, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(11)
    n = 16384 if dtype == "float32" else 20000
    x = make_values(rng, dtype_of(dtype), (2, n), "few_distinct")
    # Forced: auto selects these rows with multiblock and orders the K apart (issue 39: a row
    # sorted whole beyond 4096 pairs is the cost the H200 measured for 1000 x 10000, k=4096).
    assert cutopk.plan(to_backend(x, backend), 3000, backend=backend).algorithm == "multiblock"
    plan = cutopk.plan(to_backend(x, backend), 3000, backend=backend, algorithm="bitonic")
    assert plan.algorithm == "bitonic" and plan.launches[0].shared_bytes > 48 * 1024
    run_case(backend, x, 3000, sorted=True, algorithm="bitonic")
    run_case(backend, x, 5, sorted="index", mode="smallest", algorithm="bitonic", index_dtype=np.int32)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_radix_and_the_multiblock_finishing_sort_beyond_48k(backend, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(12)
    x = make_values(rng, np.int64, (2, 6000), "few_distinct")
    plan = cutopk.plan(to_backend(x, backend), 1000, algorithm="radix", backend=backend)
    assert plan.launches[0].shared_bytes > 48 * 1024
    run_case(backend, x, 1000, algorithm="radix")
    y = make_values(rng, np.float64, (1, 12000), "nan")
    # K = 4000: pow2(K) = 4096 (key, index) pairs of 16 bytes, 64 KB (beyond 4096 the K are
    # ordered apart: tests/gpu/test_multiblock_select.py).
    plan = cutopk.plan(to_backend(y, backend), 4000, algorithm="multiblock", backend=backend)
    assert plan.params["sort_here"] and plan.params["order_shared"] > 48 * 1024
    run_case(backend, y, 4000, algorithm="multiblock", nan="largest")
    run_case(backend, y, 4000, algorithm="multiblock", sorted="index")


def test_order_tile():
    dev = _dispatch.Device(shared_bytes=1024)
    assert _dispatch.order_tile(1000, 4, dev) == 64  # 64 * 12 bytes <= 1024 < 128 * 12
    assert _dispatch.order_tile(10, 4, dev) == 16  # never more than the row rounded up
    assert _dispatch.order_tile(10**6, 8, _dispatch.Device(shared_bytes=H100_SHARED)) == 8192
    p = _dispatch.plan(1, 2**20, 5000, 4, dev, copy=False)  # beyond multiblock's shared memory
    assert p.algorithm == "sort" and p.params["order_tile"] == 64
    assert _dispatch.plan(3, 500, 7, 2, dev, copy=False, algorithm="sort").params["order_tile"] == 64


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "bfloat16"])
def test_k_beyond_multiblocks_shared_memory_goes_to_another_family(backend, dtype, monkeypatch):
    # 12 KB of shared memory: too little for multiblock's digit counts of 32- and 64-bit keys
    # (2048 x 4 bytes) beside its static 10 KB (the filter's stages), so it refuses, saying why;
    # auto sends long rows to another family, still exact. 8- and 16-bit keys' 256 counts fit,
    # but not a sort of 256 pairs: their K = 200 winners are ordered apart.
    require(backend)
    assert _multiblock.STATIC_SHARED + 4 * 256 <= 12288 < _multiblock.STATIC_SHARED + 4 * 2048
    use_device(monkeypatch, backend, 12288)
    rng = np.random.default_rng(13)
    x = make_values(rng, dtype_of(dtype), (2, 70_000), "nan" if "float" in dtype else "few_distinct")
    if dtype_of(dtype).itemsize >= 4:
        with pytest.raises(ValueError, match=r"for a digit's counts of .*; this device gives a block 12288"):
            cutopk.top_k(to_backend(x, backend), 200, algorithm="multiblock", backend=backend)
        assert cutopk.plan(to_backend(x, backend), 200, backend=backend).algorithm != "multiblock"
    else:
        plan = cutopk.plan(to_backend(x, backend), 200, algorithm="multiblock", backend=backend)
        assert not plan.params["sort_here"]
        run_case(backend, x, 200, algorithm="multiblock", sorted="index", mode="smallest", nan="largest")
    for k in (16, 200):
        run_case(backend, x, k, sorted="index", mode="smallest", nan="largest")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dist", ["all_equal", "sorted", "reversed", "extremes"])
def test_sort_path_orders_without_a_library_sort(backend, dist, monkeypatch):
    require(backend)
    use_device(monkeypatch, backend, 2048)
    rng = np.random.default_rng(14)
    x = make_values(rng, np.int32, (3, 3001), dist)
    for k in (1, 77, 3001):
        for order in (True, "index"):
            run_case(backend, x, k, algorithm="sort", sorted=order, index_dtype=np.int32)
    y = make_values(rng, np.float16, (300, 40), "nan")
    run_case(backend, y, 150, axis=0, algorithm="sort", nan="largest", sorted="index")


def test_outer_axis_plans_say_how_they_copy():
    dev = _dispatch.Device()
    p = _dispatch.plan(4096, 4096, 9, 4, dev, copy=False, outer=True)
    assert (p.copy, p.transpose) == (True, True) and p.scratch_bytes >= 4096 * 4096 * 4
    p = _dispatch.plan(4096, 4096, 8, 4, dev, copy=False, outer=True)
    assert (p.algorithm, p.copy, p.transpose) == ("thread_row", False, False)  # in place
    p = _dispatch.plan(100, 4096, 3, 4, dev, copy=False, outer=True)  # too few rows for a thread each
    assert p.algorithm != "thread_row" and p.transpose
    p = _dispatch.plan(100, 4096, 3, 4, dev, copy=True)  # batch axes that do not collapse
    assert (p.copy, p.transpose) == (True, False)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
# thread_row reads outer-axis rows in place (tests/gpu/test_kernels.py::test_outer_axis_reads_in_place).
@pytest.mark.parametrize("algorithm", ["auto", *(a for a in _dispatch.ALGORITHMS if a != "thread_row")])
def test_outer_axis_rows_through_the_tiled_transpose(backend, algorithm, monkeypatch):
    require_clusters(backend) if algorithm == "cluster" else require(backend)
    if algorithm == "streaming":  # its ring and candidates need more than 48 KB
        use_device(monkeypatch, backend, H100_SHARED)
    rng = np.random.default_rng(15)
    # 97 rows of 301 along axis 0; 33 for a forced cluster, which simulates 8 x 512 threads a row
    # (15x another family's time): still a full 32-row tile of the transpose and a partial one.
    rows = 33 if algorithm == "cluster" else 97
    x = make_values(rng, np.float32, (301, rows), "few_distinct")
    k = 20 if algorithm != "warp_row" else 16
    plan = cutopk.plan(to_backend(x, backend), k, axis=0, algorithm=algorithm, backend=backend)
    assert plan.copy and plan.launches[0].kernel.startswith("transpose_rows<")
    assert any("tiled transpose" in c for c in plan.copies)
    calls = []
    get_function = _launcher._Module.get_function

    def recorded(self, name):
        fn = get_function(self, name)
        if not name.startswith("transpose_rows<"):
            return fn
        return lambda grid, block, args, **kw: (
            calls.append(tuple(int(a) for a in args[1:3])) or fn(grid, block, args, **kw)
        )

    monkeypatch.setattr(_launcher._Module, "get_function", recorded)
    _call.CACHE.clear()
    run_case(backend, x, k, axis=0, algorithm=algorithm, sorted=True)
    run_case(backend, x[::-1], k, axis=0, algorithm=algorithm, sorted="index", mode="smallest", nan="largest")
    assert calls == [(rows, 301), (rows, 301)]  # (rows, n): the rows went through the transpose kernel


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["int8", "float16", "bfloat16", "uint32", "float64"])
def test_outer_axis_transpose_dtypes_and_shapes(backend, dtype):
    require(backend)
    rng = np.random.default_rng(16)
    x = make_values(rng, dtype_of(dtype), (65, 33), "extremes" if "int" in dtype else "nan")
    run_case(backend, x, 40, axis=0, nan="largest")  # 33 rows of 65: partial tiles both ways
    y = make_values(rng, dtype_of(dtype), (70, 3, 41), "few_distinct")  # 123 rows of 70 along axis 0
    assert (
        cutopk.plan(to_backend(y, backend), 12, axis=0, backend=backend)
        .launches[0]
        .kernel.startswith("transpose_rows<")
    )
    run_case(backend, y, 12, axis=0, sorted="index")
    run_case(backend, y[::-1, :, ::-1], 12, axis=0, mode="smallest")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64"])
def test_bitonic_vector_loads_at_every_alignment(backend, dtype):
    # Contiguous rows are read with 16-byte loads from their first 16-byte boundary: rows whose
    # starts fall at every offset (odd row lengths, a sliced start), rows shorter than one
    # vector or than the head before the first boundary, and a tail after the last vector.
    require(backend)
    rng = np.random.default_rng(17)
    base = make_values(rng, dtype_of(dtype), (5, 1029), "few_distinct")
    for start in (0, 1, 3):
        for n in (1, 3, 17, 130, 1029 - start):
            x = base[:, start : start + n]
            k = min(n, 40)
            run_case(backend, x, k, algorithm="bitonic")
            run_case(backend, x, k, algorithm="bitonic", sorted="index", mode="smallest")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("n", [1, 3, 4, 5, 8, 67])
def test_thread_row_loads_in_groups_of_four(backend, n):
    require(backend)
    rng = np.random.default_rng(18)
    x = make_values(rng, np.float32, (n, 300), "nan")  # 300 rows of n along axis 0
    for k in sorted({1, min(n, 5), min(n, 8)}):
        run_case(backend, x, k, axis=0, algorithm="thread_row", nan="largest")
        run_case(backend, x, k, axis=0, algorithm="thread_row", sorted="index", mode="smallest")
