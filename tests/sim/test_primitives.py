"""Each CUDA primitive the simulator supports, exercised by a small kernel and checked against
what CUDA specifies."""

from __future__ import annotations

import numpy as np
import pytest

from cutopk import sim

PRIMITIVES = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

extern "C" __global__ void __launch_bounds__(256) block_reverse(const int* in, int* out) {
  __shared__ int buf[256];
  buf[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void sync_counts(const int* pred, int* out) {
  int p = pred[threadIdx.x];
  out[threadIdx.x * 3 + 0] = __syncthreads_count(p);
  out[threadIdx.x * 3 + 1] = __syncthreads_or(p);
  out[threadIdx.x * 3 + 2] = __syncthreads_and(p);
}

template <class T>
__global__ void shuffles(const T* in, T* out, int width) {
  int lane = threadIdx.x;
  T v = in[lane];
  out[0 * 32 + lane] = __shfl_sync(0xffffffffu, v, 5, width);
  out[1 * 32 + lane] = __shfl_up_sync(0xffffffffu, v, 3, width);
  out[2 * 32 + lane] = __shfl_down_sync(0xffffffffu, v, 3, width);
  out[3 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 6, width);
}

extern "C" __global__ void votes(const int* pred, unsigned* out) {
  int lane = threadIdx.x % 32;
  int p = pred[threadIdx.x];
  unsigned b = __ballot_sync(0xffffffffu, p);
  out[threadIdx.x * 5 + 0] = b;
  out[threadIdx.x * 5 + 1] = __any_sync(0xffffffffu, p);
  out[threadIdx.x * 5 + 2] = __all_sync(0xffffffffu, p);
  out[threadIdx.x * 5 + 3] = __match_any_sync(0xffffffffu, p);
  __syncwarp();
  out[threadIdx.x * 5 + 4] = (lane < 16) ? __ballot_sync(0x0000ffffu, p) : __activemask();
}

extern "C" __global__ void bits(const unsigned long long* in, int* out) {
  unsigned long long v = in[threadIdx.x];
  unsigned lo = (unsigned)v;
  int* o = out + threadIdx.x * 8;
  o[0] = __popc(lo); o[1] = __popcll(v); o[2] = __clz((int)lo); o[3] = __clzll((long long)v);
  o[4] = __ffs((int)lo); o[5] = __ffsll((long long)v); o[6] = (int)__brev(lo); o[7] = (int)(__brevll(v) >> 32);
}

extern "C" __global__ void atomics(int* g, unsigned long long* g64, float* gf) {
  __shared__ int s;
  if (threadIdx.x == 0) s = 0;
  __syncthreads();
  atomicAdd(&s, 1);
  atomicAdd(g, 1);
  atomicMax(g + 1, (int)threadIdx.x);
  atomicMin(g + 2, (int)threadIdx.x);
  atomicOr(g + 3, 1 << (threadIdx.x % 31));
  atomicAdd(g64, 1ull << 33);
  atomicAdd(gf, 0.5f);
  atomicCAS(g + 4, 0, (int)threadIdx.x + 1);  // the first thread to run wins
  __syncthreads();
  if (threadIdx.x == 0) g[5] = s;
}

template <class T, int N>
__global__ void dyn_smem(const T* in, T* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* buf = reinterpret_cast<T*>(smem);
  for (int i = threadIdx.x; i < N; i += blockDim.x) buf[i] = in[i];
  __syncthreads();
  for (int i = threadIdx.x; i < N; i += blockDim.x) out[i] = buf[N - 1 - i];
}

extern "C" __global__ void dims3(int* out) {
  int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int nt = blockDim.x * blockDim.y * blockDim.z;
  out[b * nt + t] = b * 1000 + t;
}

extern "C" __global__ void halves(const __half* h, const __nv_bfloat16* b, float* out, unsigned short* raw) {
  int i = threadIdx.x;
  out[i] = __half2float(h[i]) + __bfloat162float(b[i]);
  raw[i] = __half_as_ushort(__float2half(out[i]));
  __half moved = __shfl_xor_sync(0xffffffffu, h[i], 1);
  out[32 + i] = __half2float(moved);
}

extern "C" __global__ void bf16_shuffle(const __nv_bfloat16* in, __nv_bfloat16* out) {
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, in[threadIdx.x], 1);
}

extern "C" __global__ void hello(int tag) {
  if (threadIdx.x % 16 == 0) printf("tag %d block %d thread %d\n", tag, (int)blockIdx.x, (int)threadIdx.x);
}

extern "C" __global__ void producer_consumer(volatile int* flag, int* out) {
  // Block 1 waits for block 0: needs both blocks resident at once.
  if (blockIdx.x == 1) {
    if (threadIdx.x == 0) {
      while (atomicAdd((int*)flag, 0) == 0) { __threadfence(); }
      out[0] = flag[0] + 1;
    }
  } else if (threadIdx.x == 0) {
    __threadfence();
    atomicExch((int*)flag, 41);
  }
}

extern "C" __global__ void scalars(float* out, int a, unsigned b, long long c, unsigned long long d, double e, float f) {
  out[0] = a; out[1] = b; out[2] = (float)c; out[3] = (float)d; out[4] = (float)e; out[5] = f;
}
"""

NAMES = [
    "shuffles<int>",
    "shuffles<float>",
    "shuffles<double>",
    "shuffles<unsigned long long>",
    "dyn_smem<float, 1000>",
]


@pytest.fixture(scope="module")
def mod():
    return sim.RawModule(code=PRIMITIVES, options=("-std=c++17",), name_expressions=NAMES)


def test_syncthreads_and_static_shared(mod):
    x = np.arange(512, dtype=np.int32)
    out = np.zeros_like(x)
    mod.get_function("block_reverse")((2,), (256,), (x, out))
    np.testing.assert_array_equal(out, np.concatenate([x[:256][::-1], x[256:][::-1]]))


def test_syncthreads_count_or_and(mod):
    for pred in (np.zeros(64, np.int32), np.ones(64, np.int32), (np.arange(64) % 3 == 0).astype(np.int32)):
        out = np.zeros((64, 3), np.int32)
        mod.get_function("sync_counts")(1, 64, (pred, out))
        assert (out[:, 0] == pred.sum()).all()
        assert (out[:, 1] == int(pred.any())).all()
        assert (out[:, 2] == int(pred.all())).all()


def _expected_shuffles(v, width):
    lanes = np.arange(32)
    base = lanes & ~(width - 1)
    idx = base + (5 & (width - 1))
    up = np.where(lanes - 3 < base, lanes, lanes - 3)
    down = np.where(lanes + 3 >= base + width, lanes, lanes + 3)
    xor = np.where((lanes ^ 6) >= base + width, lanes, lanes ^ 6)
    return np.stack([v[idx], v[up], v[down], v[xor]])


@pytest.mark.parametrize(("name", "dtype"), [("int", np.int32), ("float", np.float32), ("double", np.float64),
                                             ("unsigned long long", np.uint64)])  # fmt: skip
@pytest.mark.parametrize("width", [32, 16, 8, 4, 2, 1])
def test_shuffles(mod, name, dtype, width):
    v = (np.arange(32) * 7 + 3).astype(dtype)
    out = np.zeros((4, 32), dtype)
    mod.get_function(f"shuffles<{name}>")(1, 32, (v, out, np.int32(width)))
    np.testing.assert_array_equal(out, _expected_shuffles(v, width))


def test_ballot_any_all_match_activemask(mod):
    pred = (np.arange(64) % 5 == 0).astype(np.int32)
    pred[32:] = 1
    out = np.zeros((64, 5), np.uint32)
    mod.get_function("votes")(1, 64, (pred, out))
    ballot0 = sum(1 << i for i in range(32) if pred[i])
    assert (out[:32, 0] == ballot0).all() and (out[32:, 0] == 0xFFFFFFFF).all()
    assert (out[:, 1] == 1).all()
    assert (out[:32, 2] == 0).all() and (out[32:, 2] == 1).all()
    zeros_mask = 0xFFFFFFFF & ~ballot0
    assert [int(m) for m in out[:32, 3]] == [ballot0 if p else zeros_mask for p in pred[:32]]
    assert (out[:16, 4] == (ballot0 & 0xFFFF)).all()
    # __activemask: CUDA leaves the exact set to the scheduler; it always holds the calling lane.
    assert all(int(out[lane, 4]) >> lane & 1 for lane in range(16, 32))


def test_bit_intrinsics(mod):
    vals = np.array([0, 1, 0x80000000, 0xFFFFFFFFFFFFFFFF, 0x0000000100000000, 0x123456789ABCDEF0] + [7] * 26,
                    dtype=np.uint64)  # fmt: skip
    out = np.zeros((32, 8), np.int32)
    mod.get_function("bits")(1, 32, (vals, out))
    for v, o in zip(vals.tolist(), out.tolist(), strict=True):
        lo = v & 0xFFFFFFFF
        assert o[0] == bin(lo).count("1") and o[1] == bin(v).count("1")
        assert o[2] == (32 - lo.bit_length()) and o[3] == (64 - v.bit_length())
        assert o[4] == ((lo & -lo).bit_length()) and o[5] == ((v & -v).bit_length())
        assert o[6] == np.int32(np.uint32(int(f"{lo:032b}"[::-1], 2)))
        assert o[7] == np.int32(np.uint32(int(f"{v:064b}"[::-1], 2) >> 32))


def test_atomics_shared_and_global(mod):
    g = np.array([0, -1, 1000, 0, 0, 0], np.int32)
    g64 = np.zeros(1, np.uint64)
    gf = np.zeros(1, np.float32)
    mod.get_function("atomics")(1, 96, (g, g64, gf))
    assert g[0] == 96 and g[1] == 95 and g[2] == 0 and g[5] == 96
    assert g[3] == (1 << 31) - 1
    assert 1 <= g[4] <= 96  # exactly one thread's compare-and-swap succeeded
    assert g64[0] == 96 << 33 and gf[0] == 48.0


def test_dynamic_shared_memory_and_templates(mod):
    x = np.random.default_rng(0).random(1000, dtype=np.float32)
    out = np.zeros_like(x)
    mod.get_function("dyn_smem<float, 1000>")(1, 128, (x, out), shared_mem=4000)
    np.testing.assert_array_equal(out, x[::-1])


def test_grid_and_block_in_3d(mod):
    out = np.full(2 * 3 * 2 * 4 * 2 * 3, -1, np.int32)
    mod.get_function("dims3")((2, 3, 2), (4, 2, 3), (out,))
    nt = 24
    expected = [b * 1000 + t for b in range(12) for t in range(nt)]
    assert out.tolist() == expected


def test_half_and_bfloat16(mod):
    h = np.arange(32, dtype=np.float16) / 4
    try:
        import ml_dtypes

        b = np.full(32, 0.5, dtype=ml_dtypes.bfloat16)
    except ImportError:
        b = np.full(32, 0x3F00, dtype=np.uint16)  # 0.5 in bfloat16
    out = np.zeros(64, np.float32)
    raw = np.zeros(32, np.uint16)
    mod.get_function("halves")(1, 32, (h, b, out, raw))
    np.testing.assert_array_equal(out[:32], h.astype(np.float32) + 0.5)
    np.testing.assert_array_equal(raw, (h.astype(np.float32) + 0.5).astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(out[32:], h[np.arange(32) ^ 1].astype(np.float32))


def test_bfloat16_shuffle(mod):
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays need ml_dtypes")
    bits = (np.arange(32, dtype=np.uint16) + 0x3F80).astype(np.uint16)  # raw bfloat16 patterns
    out = np.zeros(32, np.uint16)
    # __nv_bfloat16* takes bfloat16 arrays only: the raw patterns go in as views.
    mod.get_function("bf16_shuffle")(1, 32, (bits.view(ml_dtypes.bfloat16), out.view(ml_dtypes.bfloat16)))
    assert out.tolist() == [*bits[1:].tolist(), int(bits[31])]


def test_printf_from_threads(mod, capfd):
    mod.get_function("hello")(2, 32, (np.int32(5),))
    lines = sorted(capfd.readouterr().out.splitlines())
    assert lines == sorted(f"tag 5 block {b} thread {t}" for b in (0, 1) for t in (0, 16))


def test_resident_blocks_make_progress_together():
    mod = sim.RawModule(code=PRIMITIVES, name_expressions=NAMES, resident_blocks=2)
    flag = np.zeros(1, np.int32)
    out = np.zeros(1, np.int32)
    # Block 1 spins until block 0 sets the flag: only possible with both blocks resident.
    mod.get_function("producer_consumer")((2,), (32,), (flag, out))
    assert out[0] == 42


def test_scalar_arguments_typed_as_in_cupy(mod):
    out = np.zeros(6, np.float32)
    args = (out, np.int32(-3), np.uint32(4), np.int64(5), np.uint64(6), 7.5, np.float32(8.5))
    mod.get_function("scalars")(1, 1, args)
    assert out.tolist() == [-3, 4, 5, 6, 7.5, 8.5]


def test_random_thread_order_keeps_correct_kernels_correct():
    mod = sim.RawModule(code=PRIMITIVES, name_expressions=NAMES, seed=1234)
    x = np.arange(256, dtype=np.int32)
    out = np.zeros_like(x)
    mod.get_function("block_reverse")(1, 256, (x, out))
    np.testing.assert_array_equal(out, x[::-1])


def test_module_cache_and_two_modules_in_one_process(tmp_path, monkeypatch):
    a = sim.RawModule(
        code='extern "C" __global__ void k(int* x) { __shared__ int s; s = 1; __syncthreads(); x[0] = s; }'
    )
    b = sim.RawModule(
        code='extern "C" __global__ void k(int* x) { __shared__ int s; s = 2; __syncthreads(); x[0] = s; }'
    )
    x = np.zeros(1, np.int32)
    a.get_function("k")(1, 4, (x,))
    assert x[0] == 1
    b.get_function("k")(1, 4, (x,))
    assert x[0] == 2
    a.get_function("k")(1, 4, (x,))
    assert x[0] == 1
    # A new RawModule of the same source reuses the built object (in memory and on disk).
    monkeypatch.setenv("CUTOPK_SIM_CACHE", str(tmp_path))
    code = 'extern "C" __global__ void fresh(int* x) { x[threadIdx.x] = 7; }'
    sim.RawModule(code=code)
    built = list(tmp_path.glob("*.so"))
    assert len(built) == 1
    mtime = built[0].stat().st_mtime_ns
    from cutopk.sim import _library

    _library._MODULE_CACHE.clear()
    sim.RawModule(code=code)
    assert built[0].stat().st_mtime_ns == mtime and len(list(tmp_path.glob("*.so"))) == 1
