// The digit step of the radix selects (radix_topk, warp_radix_topk, the multiblock kernels):
// counting one 8-bit digit of the keys still in the race, and choosing the bucket that holds the
// K-th key. Also the ordered ranks their compactions use.
//
// Counters are 32-bit in shared memory (RED/ATOMS.ADD, never a compare-and-swap loop): a block
// or warp counts fewer than 2^32 keys per pass (the dispatcher keeps radix rows and multiblock
// slices below that). Every histogram of every family counts with count_key below: one plain
// shared atomicAdd(&hist[digit], 1u) per key, which sm_90 compiles to ATOMS.POPC.INC (the lanes of
// a warp that hit one address are added together by the hardware), as FlashInfer's FilteredTopK,
// SGLang, RAFT's select_radix and CUB's agent_topk count. Aggregating the warp's equal digits
// with __match_any_sync first costs more than it saves: a MATCH is a slow warp-wide op, paid per
// key, while the hardware already merges the lanes that hit one counter. CUTOPK_COUNT_WITH_MATCH=1
// (off in every normal build; tools/check_sass.py then fails on the MATCH) builds that counting for
// an A/B on a GPU (tests/gpu/test_count_switch.py; benchmarks/gpu/phase_clocks.py's count_with_match).
#pragma once

#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"

namespace cutopk {

// Where the K-th key is known to lie: the keys whose bits at and above `shift` equal `prefix`.
// `needed` of the winners are still to take from that bucket, which holds `bucket` keys.
struct DigitState {
  unsigned long long prefix;
  long long needed;
  unsigned long long bucket;
  int shift;
};

// Whether `key` is still in the race on the digit at `shift`: on the top digit every key is;
// below it, the key's bits above the digit must equal `prefix` (the digits found so far).
template <class Key>
__device__ __forceinline__ bool in_race(Key key, int shift, unsigned long long prefix, bool top) {
  return top || static_cast<Key>(key >> (shift + 8)) == static_cast<Key>(prefix);
}

#ifndef CUTOPK_COUNT_WITH_MATCH
#define CUTOPK_COUNT_WITH_MATCH 0
#endif

#if CUTOPK_COUNT_WITH_MATCH
// The counting with a warp match: the lanes with equal digits (digit < 2^16) add once together,
// after a warp match. Every lane of the warp calls it.
__device__ __forceinline__ void count_matched(unsigned int* hist, unsigned digit, bool counted) {
  const unsigned lane = threadIdx.x & 31;
  // Lanes that do not count get values no digit takes, so they match only themselves.
  const unsigned peers = __match_any_sync(0xffffffffu, counted ? digit : 0xffffffe0u + lane);
  if (counted && lane == (unsigned)(__ffs(peers) - 1)) atomicAdd(&hist[digit], (unsigned)__popc(peers));
}
#endif

// Adds one to hist[digit] (digit < 2^16) when `counted`: a plain shared atomic, in any order (a
// histogram does not depend on it), with no warp-wide step before it. `aggregate` is read only
// under CUTOPK_COUNT_WITH_MATCH, where (the same in the whole warp, and then every lane must call
// it) it counts with count_matched.
__device__ __forceinline__ void count_key(unsigned int* hist, unsigned digit, bool counted, bool aggregate) {
#if CUTOPK_COUNT_WITH_MATCH
  if (aggregate) {
    if (__any_sync(0xffffffffu, counted)) count_matched(hist, digit, counted);
    return;
  }
#endif
  (void)aggregate;
  if (counted) atomicAdd(&hist[digit], 1u);
}

// Adds `key`'s digit at `shift` to hist when `counted`. `aggregate`: see count_key (the top
// digit, where values in a narrow range share their top byte).
template <class Key>
__device__ __forceinline__ void count_digit(unsigned int* hist, Key key, bool counted, int shift, bool aggregate) {
  count_key(hist, static_cast<unsigned>(key >> shift) & 255u, counted, aggregate);
}

// Counts the keys of one run of the row loader (row_loads.cuh) that are in the race.
// `buffered`: the bits are keys already (a candidate buffer), else element bits of T.
template <class T, class Run>
__device__ __forceinline__ void count_run(unsigned int* hist, const Run& run, bool buffered, bool largest,
                                          bool nan_first, int shift, unsigned long long prefix, bool top) {
  typedef typename KeyTraits<T>::Key Key;
#pragma unroll
  for (int e = 0; e < Run::SIZE; ++e) {
    const Key key = buffered ? run.bits[e] : KeyTraits<T>::from_bits(run.bits[e], largest, nan_first);
    count_digit<Key>(hist, key, e < run.count && in_race<Key>(key, shift, prefix, top), shift, top);
  }
}

// The digit step after a histogram: the bucket holding the K-th key becomes the new prefix, and
// the keys above it are taken off `needed`. One whole warp calls it; every lane gets the same
// result. The caller lowers `shift` when it goes on to the next digit.
template <class Count>
__device__ __forceinline__ void digit_step(const Count* hist, DigitState* s) {
  long long above;
  const int digit = warp_find_bucket(hist, s->needed, &above);
  s->needed -= above;
  s->bucket = (unsigned long long)hist[digit];
  s->prefix = (s->prefix << 8) | (unsigned long long)digit;
}

// Exclusive prefix sum over the block of one count per thread, in thread order (the one block
// scan of every kernel: radix's and multiblock's ordered compactions, multiblock's staging and
// slice offsets): every thread gets its own prefix and, in `*total`, the block's total. A warp
// scan with shuffles, then the warps' totals scanned by warp 0 (in parallel, not by one thread).
// `scratch` holds 33 Counts of shared memory (a sum per warp, then the total). Every thread must
// call it; blockDim.x must be a multiple of 32. It starts and ends with a barrier, so `scratch`
// may be reused by the next call at once.
template <class Count>
__device__ __forceinline__ Count block_scan(Count count, Count* scratch, Count* total) {
  const unsigned FULL = 0xffffffffu;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  Count inclusive = count;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const Count other = __shfl_up_sync(FULL, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  __syncthreads();  // the previous call's readers are done with scratch
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const Count mine = lane < warps ? scratch[lane] : Count(0);
    Count scan = mine;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const Count other = __shfl_up_sync(FULL, scan, offset);
      if (lane >= offset) scan += other;
    }
    if (lane < warps) scratch[lane] = scan - mine;  // exclusive; each lane rewrites only its own
    if (lane == 31) scratch[32] = scan;
  }
  __syncthreads();
  *total = scratch[32];
  return scratch[warp] + inclusive - count;
}

// Exclusive prefix sum of one count per lane over the calling warp (all 32 lanes), and the
// warp's total.
__device__ __forceinline__ int warp_scan(int count, int* total) {
  const unsigned FULL = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  int inclusive = count;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int other = __shfl_up_sync(FULL, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  *total = __shfl_sync(FULL, inclusive, 31);
  return inclusive - count;
}

// Writes winner `j` of row `row` (k per row): its index, as 4 or 8 bytes, and its value re-read
// from the input, so that the value's bits are the input's.
template <class T>
__device__ __forceinline__ void write_winner(const T* __restrict__ base, long long col_stride, T* __restrict__ out_vals,
                                             void* __restrict__ out_idx, int index_bytes, long long at,
                                             unsigned long long index) {
  store_index(out_idx, at, index, index_bytes);
  out_vals[at] = base[(long long)index * col_stride];
}

// Sorts a row's `count` winners (win_key, win_idx [0, count), in arrays of kp, a power of two >=
// count) by the pow2 bitonic sort, as asked (by_index: by index, else by value), and writes output
// positions [0, k) of `row`: the winners (their values re-read from the input), then padding.
// Index: 32- or 64-bit. Every thread of the block calls it once the winners are written.
template <class T, class Key, class Index>
__device__ __forceinline__ void write_sorted(Key* win_key, Index* win_idx, int count, int k, int kp, bool by_index,
                                             const T* base, long long col_stride, T* __restrict__ out_vals,
                                             void* __restrict__ out_idx, int index_bytes, long long row) {
  sort_padded(win_key, win_idx, count, kp, by_index);
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    if (j < count)
      write_winner(base, col_stride, out_vals, out_idx, index_bytes, row * k + j, (unsigned long long)win_idx[j]);
    else
      write_padding(out_vals, out_idx, index_bytes, row * k + j);
  }
}

}  // namespace cutopk
