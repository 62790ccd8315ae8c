// Radix select: top-K of a long row (K <= 1024), one block per row.
//
// 1. Find the K-th key digit by digit from the top (8-bit digits over KeyTraits keys): each
//    pass histograms, in shared memory with warp-aggregated counts, the next digit of the keys
//    that share the prefix found so far; one warp then finds the bucket holding the K-th key
//    (suffix scan with shuffles). The passes stop as soon as that bucket is small enough to hold
//    in shared memory (`cap` candidates), or when every bit is resolved.
// 2. Candidate buffer (global scratch, `buf_cap` entries per row, 0 = none): the first time the
//    bucket is larger than `cap` but fits the buffer, one read of the row moves the keys above
//    the bucket (fewer than K: all winners) to shared memory and the bucket's (key, index) pairs
//    to the buffer, in index order (block prefix sums over ballots, never atomics, so the buffer
//    keeps the lower-index tie rule). Later passes and the compaction read the buffer, not the
//    row: the row is read once per pass only until the bucket fits the buffer.
// 3. Compact: one more read (of the buffer, or of the row) puts the keys above the bucket
//    (winners) and the bucket's keys (the candidates) in shared memory. The candidates are
//    sorted by (key, index) and the first ones still needed join the winners: ties at the
//    boundary go to lower indices exactly. If the bucket never got small (a huge run of one key
//    at the K-th place), the last pass instead takes the first equal keys in index order with
//    block prefix sums (cutopk_block_rank), never with atomics, which would reorder them.
// 4. The K winners are sorted into the requested order (bitonic) and written; values are
//    re-read from the input at the winning indices.
// Reads of the row: one per digit pass until the bucket fits the buffer or `cap` (typically 1
// or 2) plus one. Dtypes: all (8/16/32/64-bit keys: up to 1/2/4/8 passes). Limits: K <= 1024;
// shared memory (kp + cap) * (8 + sizeof(Key)) bytes, kp = K rounded up to a power of two (the
// dispatcher keeps it within 48 KB). Scratch: buf_cap * (sizeof(Key) + 4) bytes per row (32-bit
// buffer indices: the dispatcher passes buf_cap = 0 for rows of 2^32 or more). Threads per block:
// 512 (a multiple of 32: cutopk_block_rank needs whole warps). Indices are 64-bit otherwise;
// the output takes them as 4 or 8 bytes (index_bytes).
#include "key_traits.cuh"
#include "block_sort.cuh"

#define RADIX_ITEMS 4  // keys each thread loads per round of a digit pass

// Element i of the current source: the row itself (key computed from the input) or the
// candidate buffer (key and index stored there).
template <class T>
__device__ __forceinline__ void cutopk_radix_load(const T* base, long long col_stride, int largest, int nan_first,
                                                  bool buffered, const typename KeyTraits<T>::Key* bkey,
                                                  const unsigned* bidx, long long i, typename KeyTraits<T>::Key* key,
                                                  unsigned long long* index) {
  if (buffered) {
    *key = bkey[i];
    *index = bidx[i];
  } else {
    *key = KeyTraits<T>::to_key(base[i * col_stride], largest, nan_first);
    *index = (unsigned long long)i;
  }
}

template <class T>
__global__ void __launch_bounds__(512)
    radix_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride, int k,
               int largest, int nan_first, int by_index, int cap, long long buf_cap,
               typename KeyTraits<T>::Key* __restrict__ buf_key, unsigned* __restrict__ buf_idx,
               T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  typedef typename KeyTraits<T>::Key Key;
  typedef unsigned long long Index;
  const int KEY_BITS = 8 * sizeof(Key);
  const int kp = cutopk_pow2_at_least(k);
  extern __shared__ __align__(16) unsigned char cutopk_smem[];
  Index* win_idx = reinterpret_cast<Index*>(cutopk_smem);
  Index* cand_idx = win_idx + kp;
  Key* win_key = reinterpret_cast<Key*>(cand_idx + cap);
  Key* cand_key = win_key + kp;
  __shared__ unsigned long long hist[256];
  __shared__ unsigned long long s_prefix;  // the key bits at and above s_shift found so far
  __shared__ long long s_needed;           // winners still to take from the current bucket
  __shared__ unsigned long long s_bucket;  // size of the current bucket
  __shared__ long long s_len;              // elements in the current source
  __shared__ int s_shift;
  __shared__ int s_buffered;  // whether the source is the candidate buffer (else the row)
  __shared__ int s_above;     // winners above the bucket placed so far
  __shared__ int s_cands;
  __shared__ int s_warp[32];
  __shared__ int s_total;
  __shared__ long long s_taken;

  const long long row = blockIdx.x;
  const T* base = in + row * row_stride;
  Key* bkey = buf_key + row * buf_cap;
  unsigned* bidx = buf_idx + row * buf_cap;
  if (threadIdx.x == 0) {
    s_prefix = 0;
    s_shift = KEY_BITS - 8;
    s_needed = k;
    s_len = n;
    s_buffered = 0;
    s_above = 0;
  }
  __syncthreads();

  // 1. Digit passes (and 2. the move to the buffer).
  while (true) {
    for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = 0;
    __syncthreads();
    const int shift = s_shift;
    const unsigned long long prefix = s_prefix;
    const bool buffered = s_buffered;
    const long long len = s_len;
    const bool first = shift + 8 >= KEY_BITS;
    // Whole rounds of RADIX_ITEMS * blockDim elements, so every warp runs the same iterations
    // (the warp aggregation below needs all 32 lanes). A thread loads its RADIX_ITEMS keys
    // before using any: with one block per row, one load in flight per thread is far too few
    // to cover the memory latency.
    for (long long chunk = 0; chunk < len; chunk += (long long)RADIX_ITEMS * blockDim.x) {
      Key keys[RADIX_ITEMS];
#pragma unroll
      for (int j = 0; j < RADIX_ITEMS; ++j) {
        const long long i = chunk + (long long)j * blockDim.x + threadIdx.x;
        Index index = 0;
        keys[j] = 0;
        if (i < len) cutopk_radix_load(base, col_stride, largest, nan_first, buffered, bkey, bidx, i, &keys[j], &index);
      }
#pragma unroll
      for (int j = 0; j < RADIX_ITEMS; ++j) {
        const unsigned long long key = keys[j];
        const bool valid = chunk + (long long)j * blockDim.x + threadIdx.x < len;
        const bool counted = valid && (first || (key >> (shift + 8)) == prefix);
        cutopk_warp_histogram_add(hist, (unsigned)(key >> shift) & 255u, counted);
      }
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      long long above;
      const int digit = cutopk_warp_find_bucket(hist, s_needed, &above);
      if (threadIdx.x == 0) {
        s_needed -= above;
        s_bucket = hist[digit];
        s_prefix = (prefix << 8) | (unsigned long long)digit;
      }
    }
    __syncthreads();
    const unsigned long long bucket = s_bucket;
    const unsigned long long new_prefix = s_prefix;
    if (bucket <= (unsigned long long)cap || shift == 0) break;  // the same in every thread
    if (!buffered && bucket <= (unsigned long long)buf_cap) {
      // 2. Move the bucket to the buffer in index order; keys above it are winners.
      if (threadIdx.x == 0) s_taken = 0;
      __syncthreads();
      for (long long chunk = 0; chunk < len; chunk += blockDim.x) {
        const long long i = chunk + threadIdx.x;
        const bool valid = i < len;
        Key key = 0;
        if (valid) key = KeyTraits<T>::to_key(base[i * col_stride], largest, nan_first);
        const unsigned long long top = (unsigned long long)key >> shift;
        if (valid && top > new_prefix) {
          const int slot = atomicAdd(&s_above, 1);  // order is restored by the final sort
          win_key[slot] = key;
          win_idx[slot] = (Index)i;
        }
        const bool in_bucket = valid && top == new_prefix;
        const int rank = cutopk_block_rank(in_bucket, s_warp, &s_total);
        const int total = s_total;
        if (in_bucket) {
          bkey[s_taken + rank] = key;
          bidx[s_taken + rank] = (unsigned)i;
        }
        __syncthreads();  // s_taken is read above by every thread before it grows
        if (threadIdx.x == 0) s_taken += total;
        __syncthreads();
      }
      if (threadIdx.x == 0) {
        s_buffered = 1;
        s_len = (long long)bucket;
      }
    }
    __syncthreads();  // every thread has read the state before thread 0 moves to the next digit
    if (threadIdx.x == 0) s_shift -= 8;
    __syncthreads();
  }

  // 3. Compaction (from the row or the buffer).
  const int shift = s_shift;
  const unsigned long long prefix = s_prefix;
  const long long needed = s_needed;
  const bool buffered = s_buffered;
  const long long len = s_len;
  const int above = k - (int)needed;
  if (threadIdx.x == 0) {
    s_cands = 0;
    s_taken = 0;
  }
  __syncthreads();
  if (s_bucket <= (unsigned long long)cap) {
    for (long long i = threadIdx.x; i < len; i += blockDim.x) {
      Key key;
      Index index;
      cutopk_radix_load(base, col_stride, largest, nan_first, buffered, bkey, bidx, i, &key, &index);
      const unsigned long long top = (unsigned long long)key >> shift;
      if (top > prefix) {
        const int slot = atomicAdd(&s_above, 1);  // order is restored by the final sort
        win_key[slot] = key;
        win_idx[slot] = index;
      } else if (top == prefix) {
        const int slot = atomicAdd(&s_cands, 1);  // ties are ordered by the sort below
        cand_key[slot] = key;
        cand_idx[slot] = index;
      }
    }
    __syncthreads();
    const int cands = s_cands;
    const int padded = cutopk_pow2_at_least(cands);
    for (int i = cands + threadIdx.x; i < padded; i += blockDim.x) {
      cand_key[i] = 0;
      cand_idx[i] = ~0ull;
    }
    __syncthreads();
    cutopk_block_bitonic<false>(cand_key, cand_idx, padded);
    for (int j = threadIdx.x; j < needed; j += blockDim.x) {
      win_key[above + j] = cand_key[j];
      win_idx[above + j] = cand_idx[j];
    }
  } else {
    // Every bit is resolved (shift == 0) and more than `cap` keys equal the K-th key: take the
    // first `needed` of them in index order (the buffer is in index order too).
    for (long long chunk = 0; chunk < len; chunk += blockDim.x) {
      const long long i = chunk + threadIdx.x;
      const bool valid = i < len;
      Key key = 0;
      Index index = 0;
      if (valid) cutopk_radix_load(base, col_stride, largest, nan_first, buffered, bkey, bidx, i, &key, &index);
      if (valid && (unsigned long long)key > prefix) {
        const int slot = atomicAdd(&s_above, 1);
        win_key[slot] = key;
        win_idx[slot] = index;
      }
      const bool tie = valid && (unsigned long long)key == prefix;
      const int rank = cutopk_block_rank(tie, s_warp, &s_total);
      const int total = s_total;
      const long long position = s_taken + rank;
      if (tie && position < needed) {
        win_key[above + position] = key;
        win_idx[above + position] = index;
      }
      __syncthreads();
      if (threadIdx.x == 0) s_taken += total;
      __syncthreads();
    }
  }
  __syncthreads();

  // 4. Order the K winners and write them.
  for (int i = k + threadIdx.x; i < kp; i += blockDim.x) {
    win_key[i] = 0;
    win_idx[i] = ~0ull;
  }
  __syncthreads();
  if (by_index)
    cutopk_block_bitonic<true>(win_key, win_idx, kp);
  else
    cutopk_block_bitonic<false>(win_key, win_idx, kp);
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const Index i = win_idx[j];
    cutopk_store_index(out_idx, row * k + j, i, index_bytes);
    out_vals[row * k + j] = base[(long long)i * col_stride];
  }
}
