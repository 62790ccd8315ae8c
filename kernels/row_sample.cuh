// The evenly spaced sample of a long row that a threshold is picked from (multiblock's
// sample_threshold, streaming's threshold): CUTOPK_MULTIBLOCK_SAMPLES keys in runs of GROUP =
// 32 / key bytes consecutive keys, a 32-byte sector each on a contiguous row (one sector per
// sampled key would read 32 / key bytes times the sample's bytes: half a 64K-element float16 row),
// the runs evenly spaced over the row and started on 32-byte boundaries whatever the row's
// alignment (a run across one would touch two sectors). Every thread issues all its loads before
// it transforms any (one memory round trip per row, not one per load).
#pragma once

#include "constants.cuh"
#include "key_traits.cuh"
#include "row_loads.cuh"

namespace cutopk {

// The rank of the sample's key a threshold is taken at, for K of a row of `len` keys: m + 4 sqrt(m)
// + 8, m = K x samples / len (the keys of the row's top K - 1 in the sample, a binomial count of
// mean m), so that fewer than K keys of the row reach it only rarely. Multiblock's launch computes
// it on the host (cutopk/cuda/families/multiblock.py, sample_rank).
__device__ __forceinline__ int sample_rank(int k, long long len) {
  const long long m = (long long)k * CUTOPK_MULTIBLOCK_SAMPLES / len;
  return (int)min((long long)CUTOPK_MULTIBLOCK_SAMPLES - 1, m + 4 * (long long)sqrtf((float)m) + 8);
}

// Sample key j's position in a row of `len` (>= 1) keys whose first `skew` keys lie before its
// first 32-byte boundary.
template <class Key>
__device__ __forceinline__ long long sample_position(long long j, long long len, long long skew) {
  const int GROUP = 32 / (int)sizeof(Key);
  const long long groups = CUTOPK_MULTIBLOCK_SAMPLES / GROUP;
  long long first = ((j / GROUP) * len / groups + skew) / GROUP * GROUP - skew;
  if (first < 0) first += GROUP;
  return min(len - 1, first + j % GROUP);
}

// The sample of the row at `base` (`len` >= 1 keys, `col_stride` apart) into sample[0, SAMPLES),
// as keys (KeyTraits<T>::from_bits): SAMPLES / THREADS loads a thread, all in flight (THREADS: the
// block size the kernel is launched with; sample key j is thread j % THREADS's). The sample's
// numbers are 32-bit and each load keeps its guard: in 64 bits, or unrolled without the guard,
// NVRTC gave both callers more registers. The whole block calls it.
template <class T, int THREADS>
__device__ __forceinline__ void load_sample(const T* base, long long col_stride, long long len, bool largest,
                                            bool nan_first, typename KeyTraits<T>::Key* sample) {
  typedef typename KeyTraits<T>::Key Key;
  constexpr int PER_THREAD = CUTOPK_MULTIBLOCK_SAMPLES / THREADS;
  static_assert(CUTOPK_MULTIBLOCK_SAMPLES % THREADS == 0, "every thread reads the same number of sample keys");
  const Key* bits = row_bits(base);
  const long long skew =
      col_stride == 1 ? (long long)((reinterpret_cast<unsigned long long>(bits) & 31) / sizeof(Key)) : 0;
  Key raw[PER_THREAD];
#pragma unroll
  for (int u = 0; u < PER_THREAD; ++u) {
    const int j = (int)threadIdx.x + u * THREADS;
    raw[u] = j < CUTOPK_MULTIBLOCK_SAMPLES ? bits[sample_position<Key>(j, len, skew) * col_stride] : Key(0);
  }
#pragma unroll
  for (int u = 0; u < PER_THREAD; ++u) {
    const int j = (int)threadIdx.x + u * THREADS;
    if (j < CUTOPK_MULTIBLOCK_SAMPLES) sample[j] = KeyTraits<T>::from_bits(raw[u], largest, nan_first);
  }
}

}  // namespace cutopk
