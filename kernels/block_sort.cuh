// Block-wide helpers in shared memory: a bitonic sort of (key, index) pairs and an ordered rank.
#pragma once

#include "key_traits.cuh"

namespace cutopk {

// A key or index from the lane `mask` away (lane ^ mask), through 32- or 64-bit shuffles (there
// are none for 8- and 16-bit types).
template <class V>
__device__ __forceinline__ V shfl_xor(V v, int mask) {
  if constexpr (sizeof(V) == 8)
    return (V)__shfl_xor_sync(0xffffffffu, (unsigned long long)v, mask);
  else
    return (V)__shfl_xor_sync(0xffffffffu, (unsigned)v, mask);
}

// The bitonic steps of strides below 32 in registers: every pair (e, e ^ half) with half < 32
// lies in one warp (32 consecutive elements per warp round), so a thread loads its element, runs
// the steps of spans span_lo .. span_hi (strides min(span / 2, 16) .. 1 each) by shuffles with
// the partner lane, and stores it back: no barrier between those steps. The exchange rule is the
// shared-memory step's (swap when "hi before lo" equals the run's direction), so results match
// bit for bit. Every thread of the group (block, or warp with ONE_WARP) calls it with the same
// arguments; the trip count is uniform, so the shuffles see all 32 lanes.
template <bool BY_INDEX, class Key, class Index>
__device__ __forceinline__ void bitonic_warp_steps(Key* keys, Index* idx, int size, int first, int stride, int span_lo,
                                                   int span_hi) {
  for (int round = 0; round < size; round += stride) {
    const int e = round + first;
    const bool live = e < size;  // size < 32: lanes past it only shuffle among themselves
    Key k = live ? keys[e] : Key(0);
    Index id = live ? idx[e] : Index(0);
    for (int span = span_lo; span <= span_hi; span <<= 1) {
      for (int half = (span >> 1) < 16 ? (span >> 1) : 16; half > 0; half >>= 1) {
        const Key ok = shfl_xor(k, half);
        const Index oi = shfl_xor(id, half);
        const bool lower = (e & half) == 0;
        const bool want_lo_first = (e & span) == 0;
        // "hi before lo", the same in both lanes of the pair.
        const bool hi_first =
            BY_INDEX ? (lower ? oi < id : id < oi) : (lower ? before(ok, oi, k, id) : before(k, id, ok, oi));
        if (hi_first == want_lo_first) {
          k = ok;
          id = oi;
        }
      }
    }
    if (live) {
      keys[e] = k;
      idx[e] = id;
    }
  }
}

// Sorts `size` (a power of two) pairs in shared memory, best first by the selection order
// (BY_INDEX false: larger key, then lower index) or by ascending index (BY_INDEX true). Every
// thread of the block must call it, or with ONE_WARP every lane of the calling warp alone (the
// pairs are then that warp's); blockDim.x must be a multiple of 32. The pairs must be visible to
// all callers on entry (a barrier after they were written); it ends with a barrier (__syncwarp
// for one warp), so the result is visible to all of them. Strides >= 32 go through shared memory
// with a barrier each, the strides below 32 of a span in registers (bitonic_warp_steps)
// with one barrier after them: (log2(size) - 4) * (log2(size) - 3) / 2 barriers for size >= 32
// instead of log2(size) * (log2(size) + 1) / 2 (55 instead of 105 for 16384 pairs).
template <bool BY_INDEX, bool ONE_WARP = false, class Key, class Index>
__device__ void block_bitonic(Key* keys, Index* idx, int size) {
  const int first = ONE_WARP ? (int)(threadIdx.x & 31) : (int)threadIdx.x;
  const int stride = ONE_WARP ? 32 : (int)blockDim.x;
  // Spans 2 .. 32: a bitonic sort of each warp's 32 elements, all in registers.
  bitonic_warp_steps<BY_INDEX>(keys, idx, size, first, stride, 2, size < 32 ? size : 32);
  if (ONE_WARP)
    __syncwarp();
  else
    __syncthreads();
  for (int span = 64; span <= size; span <<= 1) {
    for (int half = span >> 1; half >= 32; half >>= 1) {
      for (int i = first; i < (size >> 1); i += stride) {
        const int lo = ((i & ~(half - 1)) << 1) | (i & (half - 1));  // pairs (lo, lo + half)
        const int hi = lo + half;
        const bool want_lo_first = (lo & span) == 0;  // the direction of this bitonic run
        const Key klo = keys[lo], khi = keys[hi];
        const Index ilo = idx[lo], ihi = idx[hi];
        const bool hi_first = BY_INDEX ? (ihi < ilo) : before(khi, ihi, klo, ilo);
        if (hi_first == want_lo_first) {
          keys[lo] = khi;
          keys[hi] = klo;
          idx[lo] = ihi;
          idx[hi] = ilo;
        }
      }
      if (ONE_WARP)
        __syncwarp();
      else
        __syncthreads();
    }
    bitonic_warp_steps<BY_INDEX>(keys, idx, size, first, stride, span, span);
    if (ONE_WARP)
      __syncwarp();
    else
      __syncthreads();
  }
}

// Pads pairs [count, size) with (0, all-ones index), which sort after every pair in both orders
// (real indices are below all-ones), then sorts the `size` pairs (a power of two) as asked. Every
// thread of the block calls it; the pairs [0, count) must have been written by then (its barrier
// makes them and the padding visible), and it ends with block_bitonic's barrier.
template <class Key, class Index>
__device__ __forceinline__ void sort_padded(Key* keys, Index* idx, int count, int size, bool by_index) {
  for (int i = count + threadIdx.x; i < size; i += blockDim.x) {
    keys[i] = Key(0);
    idx[i] = ~Index(0);
  }
  __syncthreads();
  if (by_index)
    block_bitonic<true>(keys, idx, size);
  else
    block_bitonic<false>(keys, idx, size);
}

// The bucket that holds the `needed`-th key counting down from the largest digit: the largest
// digit d with hist[d] + hist[d + 1] + ... + hist[255] >= needed (0 if none), and `*above`, the
// keys in the buckets above it. One whole warp calls it (lane l sums bins 8l .. 8l + 7, then a
// suffix scan over the lanes with shuffles), instead of one thread walking 256 bins serially.
// The result is the same in every lane.
template <class Count>
__device__ __forceinline__ int warp_find_bucket(const Count* hist, long long needed, long long* above) {
  const unsigned FULL = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  long long total = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) total += (long long)hist[lane * 8 + j];
  long long suffix = total;  // inclusive suffix sum over the lanes: bins 8 * lane .. 255
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const long long other = __shfl_down_sync(FULL, suffix, offset);
    if (lane + offset < 32) suffix += other;
  }
  long long running = suffix - total;  // keys in the bins of the lanes above this one
  int found = -1;
  long long found_above = 0;
  // The bins are read again rather than kept in registers (eight 64-bit counts would cost 16).
#pragma unroll
  for (int j = 7; j >= 0; --j) {
    const long long count = (long long)hist[lane * 8 + j];
    if (found < 0 && running + count >= needed) {
      found = lane * 8 + j;
      found_above = running;
    }
    running += count;
  }
  // The suffix sums only grow towards lower digits, so the answer is in the highest lane that
  // found one.
  const unsigned hit = __ballot_sync(FULL, found >= 0);
  if (!hit) {  // cannot happen when needed <= the keys counted; mirror the serial scan anyway
    *above = __shfl_sync(FULL, suffix, 0) - (long long)hist[0];
    return 0;
  }
  const int src = 31 - __clz(hit);
  *above = __shfl_sync(FULL, found_above, src);
  return __shfl_sync(FULL, found, src);
}

__device__ __forceinline__ int pow2_at_least(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace cutopk
