"""Intrinsics and declaration forms beyond the basic primitives: warp reductions, match_all,
reinterpretation and rounding conversions, file-scope shared memory, several kernels' static
shared memory in one module, and CuPy's conventions for scalar and None arguments."""

from __future__ import annotations

import numpy as np
import pytest

from cutopk import sim

SOURCE = r"""
extern __shared__ float file_dyn[];
__shared__ int file_counter;

extern "C" __global__ void reductions(const int* in, int* out) {
  int v = in[threadIdx.x];
  int* o = out + threadIdx.x * 8;
  o[0] = __reduce_add_sync(0xffffffffu, v);
  o[1] = __reduce_min_sync(0xffffffffu, v);
  o[2] = __reduce_max_sync(0xffffffffu, v);
  o[3] = (int)__reduce_max_sync(0xffffffffu, (unsigned)v);
  o[4] = (int)__reduce_or_sync(0xffffffffu, (unsigned)v);
  o[5] = (int)__reduce_xor_sync(0xffffffffu, (unsigned)v);
  int pred = -1;
  o[6] = (int)__match_all_sync(0xffffffffu, v & 1, &pred);
  o[7] = pred;
}

extern "C" __global__ void conversions(const float* f, int* i, unsigned* u, long long* ll) {
  int t = threadIdx.x;
  i[t * 4 + 0] = __float2int_rn(f[t]);
  i[t * 4 + 1] = __float2int_rz(f[t]);
  i[t * 4 + 2] = __float2int_rd(f[t]);
  i[t * 4 + 3] = __float2int_ru(f[t]);
  u[t] = __float_as_uint(f[t]);
  ll[t] = __float2ll_rn(f[t]);
}

extern "C" __global__ void integer_ops(const unsigned* a, unsigned* out, unsigned long long* wide) {
  int t = threadIdx.x;
  out[t * 4 + 0] = __byte_perm(a[t], a[t + 1], 0x5140);
  out[t * 4 + 1] = __funnelshift_l(a[t], a[t + 1], t);
  out[t * 4 + 2] = __funnelshift_r(a[t], a[t + 1], t);
  out[t * 4 + 3] = __umulhi(a[t], a[t + 1]);
  wide[t] = __umul64hi(0xfedcba9876543210ull * (t + 1), 0x0123456789abcdefull);
}

extern "C" __global__ void file_scope_shared(int* out, int n) {
  if (threadIdx.x == 0) file_counter = 0;
  file_dyn[threadIdx.x] = 0.5f * threadIdx.x;
  __syncthreads();
  atomicAdd(&file_counter, 1);
  __syncthreads();
  out[threadIdx.x] = file_counter * 1000 + (int)(2 * file_dyn[n - 1 - threadIdx.x]);
}

// Two kernels that each declare 40 KB of static shared memory: fine in CUDA (48 KB each).
extern "C" __global__ void big_a(int* out) {
  __shared__ int a[10000];
  a[threadIdx.x] = 1;
  __syncthreads();
  out[0] = a[0];
}
extern "C" __global__ void big_b(int* out) {
  __shared__ int b[10000];
  b[threadIdx.x] = 2;
  __syncthreads();
  out[0] = b[0];
}

enum class Mode : int { Copy = 0, Negate = 1 };

extern "C" __global__ void conventions(long long* out, const int* maybe, long long flag, Mode mode) {
  out[0] = maybe == nullptr ? -1 : maybe[0];
  out[1] = flag;
  out[2] = mode == Mode::Negate ? -5 : 5;
}

extern "C" __global__ void aliasing(int* whole, int* tail) {
  // tail == whole + 4: a write through one pointer is seen through the other.
  whole[4] = 7;
  __syncthreads();
  whole[0] = tail[0];
}
"""


@pytest.fixture(scope="module")
def mod():
    return sim.RawModule(code=SOURCE)


def test_warp_reductions_and_match_all(mod):
    v = np.arange(32, dtype=np.int32) * 7 - 100
    out = np.zeros((32, 8), np.int32)
    mod.get_function("reductions")(1, 32, (v, out))
    u = v.view(np.uint32)
    xor = 0
    for x in u.tolist():
        xor ^= x
    or_ = 0
    for x in u.tolist():
        or_ |= x
    assert (out[:, 0] == v.sum()).all() and (out[:, 1] == v.min()).all() and (out[:, 2] == v.max()).all()
    assert (out[:, 3].view(np.uint32) == u.max()).all()
    assert (out[:, 4].view(np.uint32) == or_).all() and (out[:, 5].view(np.uint32) == xor).all()
    assert (out[:, 6] == 0).all() and (out[:, 7] == 0).all()  # lanes disagree on v & 1
    same = np.full(32, 4, np.int32)
    mod.get_function("reductions")(1, 32, (same, out))
    assert (out[:, 6].view(np.uint32) == 0xFFFFFFFF).all() and (out[:, 7] == 1).all()


def test_rounding_conversions_saturate_like_cvt(mod):
    f = np.array([2.5, -2.5, 1.5, -0.7, 3e9, -3e9, np.nan, np.inf] * 4, np.float32)
    i = np.zeros((32, 4), np.int32)
    u = np.zeros(32, np.uint32)
    ll = np.zeros(32, np.int64)
    mod.get_function("conversions")(1, 32, (f, i, u, ll))
    imax, imin = 2**31 - 1, -(2**31)
    assert i[:8].tolist() == [
        [2, 2, 2, 3],
        [-2, -2, -3, -2],
        [2, 1, 1, 2],
        [-1, 0, -1, 0],
        [imax] * 4,
        [imin] * 4,
        [0] * 4,
        [imax] * 4,
    ]
    assert (u == f.view(np.uint32)).all()
    assert ll[:6].tolist() == [2, -2, 2, -1, 3_000_000_000, -3_000_000_000]


def test_integer_intrinsics(mod):
    a = np.array([0x01234567, 0x89ABCDEF] * 17, np.uint32)
    out = np.zeros((32, 4), np.uint32)
    wide = np.zeros(32, np.uint64)
    mod.get_function("integer_ops")(1, 32, (a, out, wide))
    for t in range(32):
        x, y = int(a[t]), int(a[t + 1])
        both = (y << 32) | x
        perm = 0
        for k, sel in enumerate((0, 4, 1, 5)):
            perm |= ((both >> (8 * sel)) & 0xFF) << (8 * k)
        assert out[t, 0] == perm
        assert out[t, 1] == ((both << (t & 31)) >> 32) & 0xFFFFFFFF
        assert out[t, 2] == (both >> (t & 31)) & 0xFFFFFFFF
        assert out[t, 3] == (x * y) >> 32
        assert wide[t] == (((0xFEDCBA9876543210 * (t + 1)) % 2**64) * 0x0123456789ABCDEF) >> 64


def test_file_scope_shared_declarations(mod):
    out = np.zeros(64, np.int32)
    mod.get_function("file_scope_shared")(1, 64, (out, np.int32(64)), shared_mem=64 * 4)
    assert out.tolist() == [64 * 1000 + (63 - t) for t in range(64)]


def test_static_shared_is_laid_out_per_launch(mod):
    out = np.zeros(1, np.int32)
    for name, value in (("big_a", 1), ("big_b", 2), ("big_a", 1)):
        mod.get_function(name)(1, 32, (out,))
        assert out[0] == value


def test_none_bool_and_enum_arguments_follow_cupy(mod):
    out = np.zeros(3, np.int64)
    fn = mod.get_function("conventions")
    fn(1, 1, (out, None, True, np.int32(1)))  # None: null pointer; bool: int64, like CuPy
    assert out.tolist() == [-1, 1, -5]
    fn(1, 1, (out, np.array([9], np.int32), 12, np.int32(0)))
    assert out.tolist() == [9, 12, 5]
    with pytest.raises(
        sim.LaunchArgumentError, match="argument 2: the parameter is an 8-byte signed integer, got None"
    ):
        fn(1, 1, (out, None, None, np.int32(0)))


@pytest.mark.parametrize("isolate", [False, True])
def test_aliasing_views_stay_aliased(isolate):
    m = sim.RawModule(code=SOURCE, isolate=isolate)
    buf = np.zeros(8, np.int32)
    m.get_function("aliasing")(1, 1, (buf, buf[4:]))
    assert buf.tolist() == [7, 0, 0, 0, 7, 0, 0, 0]
