"""Global-memory traffic counting (``count_traffic``, ``counting_traffic``) and the shuffled order
in which a grid's blocks start (``block_seed``): exact counts on small kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cutopk import sim
from cutopk.sim import _toolchain

if sim._module._environ.flag("CUTOPK_SIM_ASAN"):
    pytest.skip("traffic counting and AddressSanitizer builds exclude each other", allow_module_level=True)

KERNELS = r"""
extern "C" __global__ void copy(const float* in, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

extern "C" __global__ void strided(const float* in, float* out, long long n, long long stride) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i * stride];
}

extern "C" __global__ void count(unsigned* counter) { atomicAdd(counter, 1u); }

extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }

extern "C" __global__ void shared_only(float* untouched) {
  __shared__ float s[64];
  s[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  s[63 - threadIdx.x] += 1.0f;
}

extern "C" __global__ void start_order(unsigned* ticket, unsigned* order) {
  if (threadIdx.x == 0) order[atomicAdd(ticket, 1u)] = blockIdx.y * gridDim.x + blockIdx.x;
}
"""


def _aligned(n: int, dtype=np.float32, fill=None) -> np.ndarray:
    """``n`` elements starting at a multiple of 32 bytes (a GPU allocation's alignment)."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.zeros(n * itemsize + 32, np.uint8)
    start = -raw.ctypes.data % 32
    out = raw[start : start + n * itemsize].view(dtype)
    if fill is not None:
        out[...] = fill
    return out


@pytest.fixture(scope="module")
def counting():
    return sim.RawModule(code=KERNELS, count_traffic=True)


@pytest.mark.parametrize("n", [1, 8, 1000, 4096])
def test_a_copy_reads_and_writes_each_byte_once(counting, n):
    x, y = _aligned(n, fill=np.arange(n)), _aligned(n)
    counting.get_function("copy")((-(-n // 128),), (128,), (x, y, np.int64(n)))
    record = counting.traffic[-1]
    assert (record.bytes_read, record.bytes_written, record.bytes) == (4 * n, 4 * n, 8 * n)
    assert record.sectors == 2 * math.ceil(4 * n / 32)
    assert record.kernel == "copy" and record.grid == (-(-n // 128), 1, 1) and record.block == (128, 1, 1)
    assert np.array_equal(x, y)


def test_a_strided_read_touches_a_sector_per_element(counting):
    n, stride = 100, 16  # 64 bytes apart: every element in a sector of its own
    x, y = _aligned(n * stride, fill=np.arange(n * stride)), _aligned(n)
    counting.get_function("strided")((1,), (128,), (x, y, np.int64(n), np.int64(stride)))
    record = counting.traffic[-1]
    assert (record.bytes_read, record.bytes_written) == (4 * n, 4 * n)
    assert record.sectors == n + math.ceil(4 * n / 32)
    assert np.array_equal(y, x[::stride])


def test_an_atomic_reads_and_writes_its_word(counting):
    counter = _aligned(1, np.uint32)
    counting.get_function("count")((3,), (64,), (counter,))
    record = counting.traffic[-1]
    assert (record.bytes_read, record.bytes_written, record.sectors) == (4 * 192, 4 * 192, 1)
    assert counter[0] == 192


def test_a_read_modify_write_counts_the_read_and_the_write(counting):
    x = _aligned(32, fill=1.0)
    counting.get_function("twice")((1,), (32,), (x,))
    record = counting.traffic[-1]
    assert (record.bytes_read, record.bytes_written, record.sectors) == (128, 128, 4)


def test_shared_memory_is_not_global_traffic(counting):
    counting.get_function("shared_only")((2,), (64,), (_aligned(64),))
    record = counting.traffic[-1]
    assert (record.bytes_read, record.bytes_written, record.sectors) == (0, 0, 0)


def test_views_of_one_buffer_count_its_sectors_once(counting):
    buf = _aligned(64, fill=np.arange(64))
    counting.get_function("copy")((1,), (32,), (buf[:32], buf[32:], np.int64(32)))
    record = counting.traffic[-1]
    assert (record.bytes_read, record.bytes_written, record.sectors) == (128, 128, 8)


def test_an_isolated_launch_brings_its_counts_back():
    mod = sim.RawModule(code=KERNELS, count_traffic=True, isolate=True)
    x, y = _aligned(256, fill=1.0), _aligned(256)
    mod.get_function("copy")((2,), (128,), (x, y, np.int64(256)))
    assert mod.traffic[-1][3:] == (1024, 1024, 64)
    assert np.array_equal(x, y)


def test_counting_is_off_by_default_and_a_block_counts_any_module(monkeypatch):
    monkeypatch.delenv("CUTOPK_SIM_TRAFFIC", raising=False)
    mod = sim.RawModule(code=KERNELS)
    x, y = _aligned(64, fill=1.0), _aligned(64)
    mod.get_function("copy")((1,), (64,), (x, y, np.int64(64)))
    assert mod.traffic == []
    with sim.counting_traffic() as records:
        mod.get_function("copy")((1,), (64,), (x, y, np.int64(64)))
    mod.get_function("copy")((1,), (64,), (x, y, np.int64(64)))
    assert [r[3:] for r in records] == [(256, 256, 16)]
    assert mod.traffic == records


def test_the_environment_turns_counting_on(monkeypatch):
    monkeypatch.setenv("CUTOPK_SIM_TRAFFIC", "1")
    mod = sim.RawModule(code=KERNELS)
    mod.get_function("count")((1,), (1,), (_aligned(1, np.uint32),))
    assert mod.count_traffic and mod.traffic[-1][3:] == (4, 4, 1)


def test_counting_and_asan_together_are_refused():
    with pytest.raises(ValueError, match=r"count_traffic.*asan"):
        sim.RawModule(code=KERNELS, count_traffic=True, asan=True)


def test_counting_an_asan_module_is_refused():
    mod = sim.RawModule(code=KERNELS)
    mod.asan = True  # as built under CUTOPK_SIM_ASAN=1 (which needs the ASan runtime preloaded)
    with (
        pytest.raises(ValueError, match=r"count_traffic: a module built with asan=True"),
        sim.counting_traffic(),
    ):
        mod.get_function("count")((1,), (1,), (_aligned(1, np.uint32),))


def test_counting_needs_gcc(monkeypatch):
    monkeypatch.setattr(_toolchain, "is_gcc", lambda: False)
    with pytest.raises(sim.SimUnavailableError, match="counting global-memory traffic needs GCC"):
        sim.RawModule(code=KERNELS + "// another module", count_traffic=True)


def _start_order(grid, **kw) -> list[int]:
    mod = sim.RawModule(code=KERNELS, **kw)
    blocks = grid[0] * grid[1]
    ticket, order = np.zeros(1, np.uint32), np.zeros(blocks, np.uint32)
    mod.get_function("start_order")(grid, (32,), (ticket, order))
    return order.tolist()


@pytest.mark.parametrize("resident", [1, 0])
def test_blocks_start_in_x_fastest_order_without_a_block_seed(monkeypatch, resident):
    monkeypatch.delenv("CUTOPK_SIM_BLOCK_SEED", raising=False)
    assert _start_order((8, 3), resident_blocks=resident) == list(range(24))


@pytest.mark.parametrize("resident", [1, 0])
def test_a_block_seed_shuffles_the_start_order(resident):
    first = _start_order((8, 3), block_seed=7, resident_blocks=resident)
    assert sorted(first) == list(range(24)) and first != list(range(24))
    assert _start_order((8, 3), block_seed=7, resident_blocks=resident) == first  # reproducible
    assert _start_order((8, 3), block_seed=8, resident_blocks=resident) != first


def test_the_environment_sets_the_block_seed(monkeypatch):
    monkeypatch.setenv("CUTOPK_SIM_BLOCK_SEED", "7")
    assert _start_order((8, 3)) == _start_order((8, 3), block_seed=7) != list(range(24))


def test_a_negative_block_seed_is_refused():
    with pytest.raises(ValueError, match="block_seed: expected an int"):
        sim.RawModule(code=KERNELS, block_seed=-1)


def test_a_region_too_large_to_count_is_an_error_and_counting_goes_on():
    counting = sim.RawModule(code=KERNELS, count_traffic=True)
    x = np.arange(4, dtype=np.float32)
    # Two elements 2**60 bytes apart: a region no sector bitmap can cover (never read: the
    # launch is refused before the kernel runs).
    far = np.lib.stride_tricks.as_strided(x, shape=(2,), strides=(1 << 60,))
    out = np.full(4, -1.0, np.float32)
    before = len(counting.traffic)
    # One region or two: `out` may lie inside the 2**60 bytes after `x` (then they merge).
    with pytest.raises(
        sim.SimError, match=r"^kernel 'copy': cannot count the traffic of [12] array regions$"
    ):
        counting.get_function("copy")((1,), (4,), (far, out, np.int64(1)))
    assert len(counting.traffic) == before and (out == -1).all()  # not run, not recorded
    counting.get_function("copy")((1,), (4,), (x, out, np.int64(4)))
    assert np.array_equal(out, x) and counting.traffic[-1].bytes == 32
