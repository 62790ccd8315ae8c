"""The step that orders a block's winners without a power-of-two sort (kernels/order_winners.cuh),
run alone on the simulator: a block is given a row's top-K indices in a shuffled order and must
write what the reference writes, bit for bit, and what write_sorted (radix_digit.cuh: the bitonic sort
it replaces) writes. Each path is aimed at: a warp alone (K <= 32), the by-index bitmap, the
by-value scatter with ranges ranked by their winners (<= 32), sorted by a warp (33-256) or, one
past that, by the bitonic fallback; the fallback is told apart by the barriers thread 0 passes.
Then the same cases through the resident family, which calls the step."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, require
from support.inputs import DTYPES, dtype_of, make_values
from support.reference import bits, reference_top_k
from test_kernels import run_case

from cutopk import sim
from cutopk._request import dtypes as _dtypes
from cutopk.cuda import kernel_constants as _constants
from cutopk.cuda import kernel_source as _kernel_source
from cutopk.cuda.families import order_winners as _order

if not sim.is_available():
    pytest.skip(f"CPU simulator unavailable: {sim.unavailable_reason()}", allow_module_level=True)

GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]
WARP_SORT = _constants.ORDER_WARP_SORT
# Barriers thread 0 passes in the step on 512 threads (kernels/order_winners.cuh's header).
BY_INDEX_BARRIERS = 7
BY_VALUE_BARRIERS = 8

STEP = r"""
__device__ unsigned barriers_seen;  // thread 0's barriers (one block per launch)
#undef __syncthreads
#define __syncthreads() \
  ((threadIdx.x == 0 ? (void)++barriers_seen : (void)0), (void)::cutopk_sim::syncthreads_impl(__LINE__, 0))
HEADERS
using namespace cutopk;
// The row's winners `chosen` (row positions, any order) as (key, index) pairs in shared memory,
// then one of the two ordering steps: winners::order_and_write, whose values are re-read from
// `reread`, or (old) write_sorted (radix_digit.cuh), which re-reads them from `in`.
template <class T>
__global__ void __launch_bounds__(512)
order_step(const T* in, const T* reread, int len, const unsigned* chosen, int count, int k, int largest, int nan_first,
           int by_index, int old, T* out_vals, void* out_idx, int index_bytes, unsigned* barriers) {
  typedef typename KeyTraits<T>::Key Key;
  extern __shared__ __align__(16) unsigned char smem[];
  const int kp = pow2_at_least(count > 0 ? count : 1);
  Key* win_key = reinterpret_cast<Key*>(smem);
  unsigned* win_idx = reinterpret_cast<unsigned*>(smem + onchip::winner_keys_bytes<Key>(kp));
  unsigned char* scratch = smem + onchip::front_bytes<Key>(kp);
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    win_key[j] = KeyTraits<T>::to_key(in[chosen[j]], largest, nan_first);
    win_idx[j] = chosen[j];
  }
  if (threadIdx.x == 0) barriers_seen = 0;
  if (old) {
    write_sorted(win_key, win_idx, count, k, kp, by_index != 0, in, 1, out_vals, out_idx, index_bytes, 0);
  } else {
    const winners::Order<T, Key> a{win_key, win_idx, scratch, count, k, kp, len, by_index != 0, largest != 0,
                                   true, reread, 1, out_vals, out_idx, index_bytes, 0};
    winners::order_and_write(a);
  }
  if (threadIdx.x == 0) *barriers = barriers_seen;
}

// winners::scratch_bytes of each length, for the Python twin.
extern "C" __global__ void __launch_bounds__(32) scratch_sizes(const int* lens, int count, int* out) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) out[i] = winners::scratch_bytes(lens[i]);
}
"""


@functools.cache
def _module(cxx: str):
    files: list[str] = []
    for header in ("onchip_select.cuh", "order_winners.cuh"):
        files += [f for f in _kernel_source.files_of(header) if f not in files]
    code = STEP.replace("HEADERS", _kernel_source._inline(files))
    return sim.RawModule(code=code, options=("-std=c++17",), name_expressions=(f"order_step<{cxx}>",))


def run_step(
    x, chosen, k, *, largest=True, nan_first=False, by_index=False, old=False, index_bytes=8, threads=512
):
    """One block orders x[chosen] (the winners, in the order given) into k places."""
    info = _dtypes.info(x.dtype)
    mod = _module(info.cxx)
    count = len(chosen)
    kp = 1 << max(0, (max(count, 1) - 1).bit_length())
    key_bytes = x.dtype.itemsize
    front = max(4096 * 4, -(-kp * key_bytes // 16) * 16 + -(-kp * 4 // 16) * 16)
    vals = np.zeros(k, x.dtype)
    idx = np.full(k, 7, np.int64 if index_bytes == 8 else np.int32)
    barriers = np.zeros(1, np.uint32)
    # The new step re-reads only the values whose keys cannot give the bits back (a float's NaN
    # and zeros): any other value read from the input would come back 0 here.
    reread = np.where(np.isnan(x) | (x == 0), x, 0).astype(x.dtype) if info.is_float else np.zeros_like(x)
    args = (x, reread, np.int32(len(x)), np.asarray(chosen, np.uint32), np.int32(count), np.int32(k), np.int32(largest),
            np.int32(nan_first), np.int32(by_index), np.int32(old), vals, idx, np.int32(index_bytes), barriers)  # fmt: skip
    shared = front + _order.scratch_bytes(len(x))
    mod.get_function(f"order_step<{info.cxx}>")((1,), (threads,), args, shared_mem=shared)
    return vals, idx, int(barriers[0])


def check_step(x, k, *, mode="largest", nan="last", order=True, seed=0, **kw):
    """The step on the row's top-min(k, n) indices, shuffled, against the reference and the old
    step, bit for bit; returns the barriers thread 0 passed."""
    count = min(k, len(x))
    exp_vals, exp_idx = reference_top_k(x[None], count, mode=mode, sorted=order, nan=nan)
    chosen = np.random.default_rng(seed).permutation(exp_idx[0])
    flags = {"largest": mode == "largest", "nan_first": nan == "largest", "by_index": order is not True}
    got_vals, got_idx, barriers = run_step(x, chosen, k, **flags, **kw)
    old_vals, old_idx, _ = run_step(x, chosen, k, old=True, **flags, **kw)
    want_idx = np.concatenate([exp_idx[0], np.full(k - count, -1)])
    np.testing.assert_array_equal(got_idx.astype(np.int64), want_idx)
    want_bits = np.concatenate([bits(exp_vals[0]), np.zeros(k - count, bits(exp_vals[0]).dtype)])
    np.testing.assert_array_equal(bits(got_vals), want_bits)
    np.testing.assert_array_equal(got_idx, old_idx)
    np.testing.assert_array_equal(bits(got_vals), bits(old_vals))
    return barriers


def test_scratch_bytes_has_its_python_twin():
    lens = np.array([0, 1, 31, 32, 33, 2048, 4096, 8191, 65536, 65537, 104_000, 2**20], np.int32)
    out = np.zeros_like(lens)
    _module("float").get_function("scratch_sizes")((1,), (32,), (lens, np.int32(len(lens)), out))
    assert out.tolist() == [_order.scratch_bytes(int(n)) for n in lens]


@pytest.mark.parametrize("k", [1, 2, 31, 32, 33, 1000, 2048])
@pytest.mark.parametrize("order", [True, "index"])
def test_every_k_in_both_orders(k, order):
    x = np.random.default_rng(k).standard_normal(4096).astype(np.float32)
    for mode in ("largest", "smallest"):
        barriers = check_step(x, k, mode=mode, order=order, seed=k)
        if k <= 32:
            assert barriers == 1  # the entry's: one warp orders them alone
        else:
            assert barriers == (BY_VALUE_BARRIERS if order is True else BY_INDEX_BARRIERS)


def test_barriers_against_the_bitonic_sort_for_k_2048():
    x = np.random.default_rng(5).random(8192).astype(np.float32)
    chosen = np.random.default_rng(6).permutation(reference_top_k(x[None], 2048)[1][0])
    assert run_step(x, chosen, 2048)[2] == BY_VALUE_BARRIERS
    assert run_step(x, chosen, 2048, by_index=True)[2] == BY_INDEX_BARRIERS
    assert run_step(x, chosen, 2048, old=True)[2] == 29  # the padding's, the bitonic sort's 28
    assert run_step(x, chosen[:512], 512, old=True)[2] == 16


def outlier_and_cluster(m: int, n: int = 4096, dtype=np.float32, seed: int = 0) -> np.ndarray:
    """A row whose top m + 1 are one far outlier and m values that differ in their low bits only
    (a few distinct ones, so ties too), scattered: the step's digit puts the m in one bin."""
    rng = np.random.default_rng(seed)
    x = rng.random(n).astype(dtype) * dtype(0.5)
    cluster = (dtype(1) + rng.integers(0, max(2, m // 3), m).astype(dtype) * np.finfo(dtype).eps).astype(
        dtype
    )
    at = rng.permutation(n)[: m + 1]
    x[at[:m]] = cluster
    x[at[m]] = dtype(1000)
    return x


@pytest.mark.parametrize("m", [32, 33, 64, 65, 128, 129, WARP_SORT, WARP_SORT + 1])
def test_one_bin_at_the_limits_of_each_sort(m):
    # A bin of m: ranked by its winners (32), warp-sorted in registers with 2 and 4 pairs a lane
    # (33-128), in shared memory (129-256), and past WARP_SORT the bitonic fallback: the old
    # step's barriers and the 7 before it (entry, min and max, count, block scan, ranges).
    x = outlier_and_cluster(m, seed=m)
    barriers = check_step(x, m + 1, seed=m)
    if m <= WARP_SORT:
        assert barriers == BY_VALUE_BARRIERS
    else:
        chosen = reference_top_k(x[None], m + 1)[1][0]
        assert barriers == run_step(x, chosen, m + 1, old=True)[2] + 7
    check_step(-x, m + 1, mode="smallest", seed=m)
    check_step(x.astype(np.float64), m + 1, seed=m)  # 64-bit keys in the warp sort


def test_winners_across_a_power_of_two_split_evenly():
    # The top 1024 of 32000 normal values span 1.9-4.1: a digit from their highest differing bit
    # (an XOR) spends 8 of its 11 bits on the exponent 127 -> 128 flip and puts 337 in one bin (the
    # fallback, 29 barriers); bins that split the span evenly hold a few each.
    rng = np.random.default_rng(9)
    x = rng.standard_normal(32000).astype(np.float32)
    assert check_step(x, 1024) == BY_VALUE_BARRIERS
    b = rng.standard_normal(65536).astype(np.float32).astype(dtype_of("bfloat16"))  # ties: ~50 a value
    assert check_step(b, 2048) == BY_VALUE_BARRIERS
    assert check_step(-b, 2048, mode="smallest") == BY_VALUE_BARRIERS


def test_winners_of_one_value_come_in_index_order():
    x = np.full(3000, 2.5, np.float32)
    x[::5] = 1.0
    for k in (33, 1000, 2048):
        assert check_step(x, k, seed=k) == 2 + BY_INDEX_BARRIERS - 1  # the min and max barrier, then by index
        check_step(x, k, mode="smallest", order="index", seed=k)


def nan_payloads_and_zeros(n: int, seed: int) -> np.ndarray:
    """float32 values with NaNs of several payloads and signs, and zeros of both signs."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    raw = x.view(np.uint32)
    raw[::9] = rng.choice(
        np.array([0x7FC00000, 0x7FC00001, 0xFFC12345, 0x7F800001, 0xFFFFFFFF], np.uint32), raw[::9].size
    )
    x[1::13] = -0.0
    x[2::13] = 0.0
    return x


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_nan_payloads_and_signed_zeros_keep_the_inputs_bits(dtype):
    x = nan_payloads_and_zeros(3000, 1)
    if dtype == "float64":
        x = x.astype(np.float64)
        x.view(np.uint64)[::9] = 0xFFF8000000000ABC
    elif dtype != "float32":  # the NaN payloads survive a cut to the top 16 bits
        x = (x.view(np.uint32) >> 16).astype(np.uint16).view(dtype_of(dtype))
    for mode in ("largest", "smallest"):
        for nan in ("last", "largest"):
            for k in (40, 500, 1500):
                check_step(x, k, mode=mode, nan=nan, seed=k)
                check_step(x, k, mode=mode, nan=nan, order="index", seed=k)
    zeros = np.where(np.arange(2000) % 3 == 0, -0.0, 0.0).astype(x.dtype)
    check_step(zeros, 700)  # one key: index order, values with their signs


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_and_index_width(dtype):
    rng = np.random.default_rng(7)
    x = make_values(rng, dtype_of(dtype), (5000,), "few_distinct")
    y = make_values(rng, dtype_of(dtype), (5000,), "uniform")
    for index_bytes in (4, 8):
        for order in (True, "index"):
            check_step(x, 700, order=order, index_bytes=index_bytes)
            check_step(y, 2048, mode="smallest", order=order, index_bytes=index_bytes)


def test_more_winners_than_the_threads_hold_and_padding():
    # 4 a thread: 300 winners on 64 threads take the bitonic fallback in both orders.
    x = np.random.default_rng(8).standard_normal(3000).astype(np.float32)
    for order in (True, "index"):
        check_step(x, 300, order=order, threads=64)
        check_step(x, 256, order=order, threads=64)  # exactly 4 a thread
    short = x[:40]
    for k in (41, 50, 2048):  # a row shorter than k: all of it, then padding
        check_step(short, k)
        check_step(short, k, order="index")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_resident_orders_bins_at_the_limits(backend):
    require(backend)
    for m in (32, 33, WARP_SORT, WARP_SORT + 1):
        x = np.stack([outlier_and_cluster(m, 6000, seed=m), outlier_and_cluster(m, 6000, seed=m + 1)])
        for order in (True, "index", False):
            run_case(backend, x, m + 1, algorithm="resident", sorted=order)
        run_case(backend, -x, m + 1, algorithm="resident", mode="smallest")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_resident_values_keep_nan_payloads_and_signed_zeros(backend):
    require(backend)
    x = np.stack([nan_payloads_and_zeros(6000, 2), nan_payloads_and_zeros(6000, 3)])
    for mode in ("largest", "smallest"):
        for nan in ("last", "largest"):
            run_case(backend, x, 1000, algorithm="resident", mode=mode, nan=nan)
            run_case(backend, x, 33, algorithm="resident", mode=mode, nan=nan, sorted="index")
    h = (x.view(np.uint32) >> 16).astype(np.uint16).view(np.float16)
    run_case(backend, h, 2048, algorithm="resident", nan="largest", index_dtype=np.int32)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("k", [1, 2, 31, 32, 33, 1000, 2048])
def test_resident_every_k(backend, k):
    require(backend)
    x = np.random.default_rng(k).standard_normal((2, 6000)).astype(np.float32)
    for order in (True, "index"):
        for mode in ("largest", "smallest"):
            run_case(backend, x, k, algorithm="resident", sorted=order, mode=mode, index_dtype=np.int32)
