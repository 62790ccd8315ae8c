// Warp radix select: top-K of medium rows (K <= CUTOPK_WARP_RADIX_MAX_K), one warp per row, for batches of many
// rows of a few thousand elements, where a block per row would spend its time at barriers and
// a warp holding the row in registers (warp_row) runs out of registers.
//
// 1. Digit passes from the top (8-bit digits over KeyTraits keys): the warp histograms, in its
//    own 256 32-bit shared-memory counters (a plain shared atomic per key), reading
//    the row through the streaming loader (row_loads.cuh: several loads in flight per lane,
//    16-byte loads when the row is contiguous), the next digit of the keys that share
//    the prefix found so far, then finds the bucket holding the K-th key with a suffix scan over
//    its lanes. The passes stop once the keys above that bucket and the bucket itself fit
//    CUTOPK_WARP_RADIX_CAP shared-memory pairs, or when every bit is resolved.
// 2. One more pass puts the keys above the bucket (all winners) and the bucket's keys in shared
//    memory, in index order (warp scans of each lane's count per loader call). When every bit is resolved and the
//    bucket is still too large (a run of one key at the K-th place), only its first `needed` keys in index order are
//    kept: the lower-index rule.
// 3. A warp bitonic sort of the pairs by (key, index) leaves the K winners first, in value order;
//    order "index" sorts those K again by index. Values are re-read from the input.
// Rows: regular, with lengths, or CSR segments (row_extent.cuh): the warp streams only its row's
// first `length` elements from the row's own start (the loader's 16-byte head and tail follow
// that start), selects min(K, length) of them, and writes padding after them in every order.
// Reads of the row: one per digit pass (1 to 4 for 32-bit keys; typically 2 for spread data) plus
// one, mostly from L1/L2 for rows of a few thousand elements. Warps never wait for each other:
// no block barrier at all.
// Dtypes: all (KeyTraits); indices are 32-bit inside (n < 2^31) and written as 4 or 8 bytes
// (index_bytes). Threads per block: CUTOPK_WARP_RADIX_THREADS (CUTOPK_WARP_RADIX_WARPS rows per
// block). Shared memory: static, WARPS * (256 * 4 + CAP * (sizeof(Key) + 4)) bytes (24 KB for
// 32-bit keys, 32 KB for 64-bit, with 8 warps and a cap of 256).
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"
#include "row_loads.cuh"
#include "radix_digit.cuh"
#include "entry.cuh"

namespace cutopk::warp_radix {

static_assert(2 * CUTOPK_WARP_RADIX_MAX_K <= CUTOPK_WARP_RADIX_CAP, "a bucket of K keys must fit beside the winners");
static_assert(CUTOPK_WARP_RADIX_WARPS * 32 == CUTOPK_WARP_RADIX_THREADS, "one warp per row");

// Sorts the warp's first `count` pairs (by key and index, or by index) after padding them to a
// power of two with pairs that sort last (the lowest key, the highest index).
template <bool BY_INDEX, class Key>
__device__ __forceinline__ void sort_pairs(Key* keys, unsigned* idx, int count) {
  const int size = pow2_at_least(count);
  for (int j = count + (int)(threadIdx.x & 31); j < size; j += 32) {
    keys[j] = Key(0);
    idx[j] = 0xffffffffu;
  }
  __syncwarp();
  block_bitonic<BY_INDEX, true>(keys, idx, size);
}

// Blocks per SM that the registers must allow: 2 (up to 128 registers) for 8-bit keys, which
// hold 16 keys per 16-byte load (with 3 blocks, 80 registers, ptxas spilled); each warp keeps 4
// such loads in flight, so fewer warps per SM still cover the latency. 3 (80 registers) for 16-
// and 32-bit keys and 4 (64) for 64-bit keys: what ptxas chose under the bound of 2 before rows
// had extents, kept as bounds because the row's start and length (registers now, parameters
// before) tipped its choice past those steps on sm_90 (to 88 and 72 registers), one block fewer.
template <class T>
CUTOPK_KERNEL(CUTOPK_WARP_RADIX_THREADS, sizeof(T) == 8   ? 4
                                         : sizeof(T) == 1 ? 2
                                                          : 3)
warp_radix_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
                const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
                T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  typedef typename KeyTraits<T>::Key Key;
  __shared__ unsigned int hist_all[CUTOPK_WARP_RADIX_WARPS][256];
  __shared__ Key key_all[CUTOPK_WARP_RADIX_WARPS][CUTOPK_WARP_RADIX_CAP];
  __shared__ unsigned int idx_all[CUTOPK_WARP_RADIX_WARPS][CUTOPK_WARP_RADIX_CAP];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long row = (long long)blockIdx.x * CUTOPK_WARP_RADIX_WARPS + warp;
  if (row >= rows) return;  // the whole warp leaves together: `row` is the same for its lanes
  unsigned int* hist = hist_all[warp];
  Key* keys = key_all[warp];
  unsigned int* idx = idx_all[warp];
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  const int len = (int)extent.length;  // <= n < 2^31
  const Key* bits = row_bits(base);
  // The winners: k, or every element of a row shorter than k (then padding follows them). A row
  // of length 0 (take 0) goes through the same steps with nothing counted or kept.
  const int take = min(k, len);

  // 1. Digit passes. The state is the same in every lane.
  DigitState st;
  st.prefix = 0;
  st.needed = take;
  st.bucket = 0;
  st.shift = KEY_BITS<Key> - 8;
  while (true) {
    for (int d = lane; d < 256; d += 32) hist[d] = 0;
    __syncwarp();
    const bool top = st.shift + 8 >= KEY_BITS<Key>;
    stream_row(bits, col_stride, 0, len, lane, 32,
               [&](const auto& run) { count_run<T>(hist, run, false, largest, nan_first, st.shift, st.prefix, top); });
    __syncwarp();
    digit_step(hist, &st);
    if ((unsigned long long)(take - st.needed) + st.bucket <= CUTOPK_WARP_RADIX_CAP || st.shift == 0) break;
    st.shift -= 8;
    __syncwarp();  // every lane has read the histogram before it is cleared
  }

  // 2. The winners above the bucket and the bucket's keys, in index order.
  const Key prefix = static_cast<Key>(st.prefix);
  const int needed = (int)st.needed;  // <= take <= K: an int (one register fewer in the gather)
  const int above_count = take - needed;
  const bool fits = (unsigned long long)above_count + st.bucket <= CUTOPK_WARP_RADIX_CAP;
  int taken = 0, members = 0;  // the same in every lane
  stream_row(bits, col_stride, 0, len, lane, 32, [&](const auto& run) {
    Key run_keys[CUTOPK_RUN_SIZE(run)];
    unsigned wins = 0, ties = 0;  // bit e: element e of the run is a winner, a bucket key
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      run_keys[e] = KeyTraits<T>::from_bits(run.bits[e], largest, nan_first);
      const Key digits = static_cast<Key>(run_keys[e] >> st.shift);
      wins |= (unsigned)(e < run.count && digits > prefix) << e;
      ties |= (unsigned)(e < run.count && digits == prefix) << e;
    }
    int wins_total, ties_total;
    int at = taken + warp_scan(__popc(wins), &wins_total);
    int rank = members + warp_scan(__popc(ties), &ties_total);
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      if ((wins >> e) & 1u) {
        keys[at] = run_keys[e];
        idx[at] = (unsigned int)(run.first + e);
        ++at;
      }
      if ((ties >> e) & 1u) {
        if (fits || rank < needed) {
          keys[above_count + rank] = run_keys[e];
          idx[above_count + rank] = (unsigned int)(run.first + e);
        }
        ++rank;
      }
    }
    taken += wins_total;
    members += ties_total;
  });
  __syncwarp();

  // 3. Order: the winners first, by (key, index); then padding, for a row shorter than k.
  sort_pairs<false>(keys, idx, fits ? above_count + (int)st.bucket : take);
  if (by_index) sort_pairs<true>(keys, idx, take);
  for (int j = lane; j < k; j += 32) {
    if (j < take)
      write_winner(base, col_stride, out_vals, out_idx, index_bytes, row * k + j, (unsigned long long)idx[j]);
    else
      write_padding(out_vals, out_idx, index_bytes, row * k + j);
  }
}

}  // namespace cutopk::warp_radix
