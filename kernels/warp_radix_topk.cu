// Warp radix select: top-K of medium rows (K <= WR_MAX_K), one warp per row, for batches of many
// rows of a few thousand elements, where a block per row would spend its time at barriers and
// a warp holding the row in registers (warp_row) runs out of registers.
//
// 1. Digit passes from the top (8-bit digits over KeyTraits keys): the warp histograms, in its
//    own 256 shared-memory counters (warp-aggregated adds), the next digit of the keys that share
//    the prefix found so far, then finds the bucket holding the K-th key with a suffix scan over
//    its lanes. The passes stop once the keys above that bucket and the bucket itself fit
//    WR_CAP shared-memory pairs, or when every bit is resolved.
// 2. One more pass puts the keys above the bucket (all winners) and the bucket's keys in shared
//    memory, in index order (ballot prefix counts). When every bit is resolved and the bucket
//    is still too large (a run of one key at the K-th place), only its first `needed` keys in
//    index order are kept: the lower-index rule.
// 3. A warp bitonic sort of the pairs by (key, index) leaves the K winners first, in value order;
//    order "index" sorts those K again by index. Values are re-read from the input.
// Reads of the row: one per digit pass (1 to 4 for 32-bit keys; typically 2 for spread data) plus
// one, mostly from L1/L2 for rows of a few thousand elements. Warps never wait for each other:
// no block barrier at all.
// Dtypes: all (KeyTraits); indices are 32-bit inside (n < 2^31) and written as 4 or 8 bytes
// (index_bytes). Threads per block: 256 (8 rows per block). Shared memory: static,
// 8 * (256 * 4 + WR_CAP * (sizeof(Key) + 4)) bytes (24 KB for 32-bit keys, 32 KB for 64-bit).
#include "key_traits.cuh"
#include "block_sort.cuh"

#define WR_WARPS 8    // rows per block
#define WR_CAP 256    // (key, index) pairs per warp: the winners above the bucket and the bucket
#define WR_MAX_K 128  // at most half of WR_CAP, so that a bucket of K keys or more can still fit

// Sorts the warp's first `count` pairs (by key and index, or by index) after padding them to a
// power of two with pairs that sort last (the lowest key, the highest index).
template <bool BY_INDEX, class Key>
__device__ __forceinline__ void wr_sort(Key* keys, unsigned* idx, int count) {
  const int size = cutopk_pow2_at_least(count);
  for (int j = count + (int)(threadIdx.x & 31); j < size; j += 32) {
    keys[j] = Key(0);
    idx[j] = 0xffffffffu;
  }
  __syncwarp();
  cutopk_block_bitonic<BY_INDEX, true>(keys, idx, size);
}

// At least 4 blocks (32 warps) per SM: with the maximum block size alone, ptxas chose 40
// registers for sm_80 and spilled 24 bytes; with this bound it fits them without spilling.
template <class T>
__global__ void __launch_bounds__(256, 4)
    warp_radix_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
                    int k, int largest, int nan_first, int by_index, T* __restrict__ out_vals,
                    void* __restrict__ out_idx, int index_bytes) {
  typedef typename KeyTraits<T>::Key Key;
  const int KEY_BITS = 8 * sizeof(Key);
  const unsigned FULL = 0xffffffffu;
  __shared__ unsigned int hist_all[WR_WARPS][256];
  __shared__ Key key_all[WR_WARPS][WR_CAP];
  __shared__ unsigned int idx_all[WR_WARPS][WR_CAP];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long row = (long long)blockIdx.x * WR_WARPS + warp;
  if (row >= rows) return;  // the whole warp leaves together: `row` is the same for its lanes
  unsigned int* hist = hist_all[warp];
  Key* keys = key_all[warp];
  unsigned int* idx = idx_all[warp];
  const T* base = in + row * row_stride;
  const unsigned lanes_below = (1u << lane) - 1u;

  // 1. Digit passes.
  unsigned long long prefix = 0;  // the key bits at and above `shift` of the K-th key's bucket
  long long needed = k;           // winners still to take from that bucket
  unsigned long long bucket = 0;  // keys in that bucket
  int shift = KEY_BITS - 8;
  while (true) {
    for (int d = lane; d < 256; d += 32) hist[d] = 0;
    __syncwarp();
    const bool first = shift + 8 >= KEY_BITS;
    // Whole rounds of 32, so every lane reaches the warp votes of the histogram add.
    for (long long chunk = 0; chunk < n; chunk += 32) {
      const long long i = chunk + lane;
      const bool valid = i < n;
      const unsigned long long key = valid ? KeyTraits<T>::to_key(base[i * col_stride], largest, nan_first) : 0;
      const bool counted = valid && (first || (key >> (shift + 8)) == prefix);
      cutopk_warp_histogram_add(hist, (unsigned)(key >> shift) & 255u, counted);
    }
    __syncwarp();
    long long above;
    const int digit = cutopk_warp_find_bucket(hist, needed, &above);
    needed -= above;
    bucket = hist[digit];
    prefix = (prefix << 8) | (unsigned long long)digit;
    if ((unsigned long long)(k - needed) + bucket <= WR_CAP || shift == 0) break;
    shift -= 8;
    __syncwarp();  // every lane has read the histogram before it is cleared
  }

  // 2. The winners above the bucket and the bucket's keys, in index order.
  const int above_count = k - (int)needed;
  const bool fits = (unsigned long long)above_count + bucket <= WR_CAP;
  int taken = 0, members = 0;  // the same in every lane
  for (long long chunk = 0; chunk < n; chunk += 32) {
    const long long i = chunk + lane;
    const bool valid = i < n;
    const Key key = valid ? KeyTraits<T>::to_key(base[i * col_stride], largest, nan_first) : Key(0);
    const unsigned long long top = (unsigned long long)key >> shift;
    const unsigned wins = __ballot_sync(FULL, valid && top > prefix);
    const unsigned ties = __ballot_sync(FULL, valid && top == prefix);
    if ((wins >> lane) & 1u) {
      const int at = taken + __popc(wins & lanes_below);
      keys[at] = key;
      idx[at] = (unsigned int)i;
    }
    if ((ties >> lane) & 1u) {
      const int rank = members + __popc(ties & lanes_below);
      if (fits || rank < needed) {
        keys[above_count + rank] = key;
        idx[above_count + rank] = (unsigned int)i;
      }
    }
    taken += __popc(wins);
    members += __popc(ties);
  }
  __syncwarp();

  // 3. Order: the K winners first, by (key, index); padding sorts last.
  wr_sort<false>(keys, idx, fits ? above_count + (int)bucket : k);
  if (by_index) wr_sort<true>(keys, idx, k);
  for (int j = lane; j < k; j += 32) {
    const unsigned int i = idx[j];
    cutopk_store_index(out_idx, row * k + j, (unsigned long long)i, index_bytes);
    out_vals[row * k + j] = base[(long long)i * col_stride];
  }
}
