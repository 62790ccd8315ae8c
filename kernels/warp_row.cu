// Warp per row: top-K of short rows (N <= 32 * ITEMS, ITEMS <= 32, K <= 32), e.g. MoE routing
// over 8..256 experts for millions of tokens, or rows of up to 1024 with a small K.
//
// Each warp holds one row in registers (lane l holds elements l, l + 32, ...), so a row costs
// one pass over global memory. K rounds of a warp arg-max over (key, -index) with shuffles pick
// the winners in selection order; the winner is then struck out in the lane that holds it (one
// bit of a per-lane mask). A round costs ITEMS compares per lane plus 5 shuffle steps and no
// barrier, so for N <= 1024 and a small K it should beat sorting the row in shared memory (an
// instruction-count estimate, not yet measured on a GPU).
// Output order "index" re-ranks the K winners by index with K more shuffles.
// Rows: regular, with lengths, or CSR segments (row_extent.cuh); rounds past a row's length find
// no live element and write padding.
// Dtypes: all (KeyTraits); indices written as 4 or 8 bytes (index_bytes). Threads per block:
// CUTOPK_WARP_ROW_THREADS (a row per warp). Shared memory: none.
// Ties: the arg-max prefers the lower index among equal keys, so ties go to lower indices both
// at the K boundary and in the output. NaN: folded into the key by KeyTraits.
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "radix_digit.cuh"
#include "entry.cuh"

namespace cutopk::warp_row {

template <class T, int ITEMS>
CUTOPK_KERNEL(CUTOPK_WARP_ROW_THREADS)
warp_row_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
              const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
              T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  typedef typename KeyTraits<T>::Key Key;
  const int lane = threadIdx.x & 31;
  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;  // the whole warp leaves together: `row` is the same for its lanes
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  const int len = (int)extent.length;  // <= n <= 32 * ITEMS
  const Key* bits = reinterpret_cast<const Key*>(base);
  Key keys[ITEMS];
  // Every load first, the key transforms after: ITEMS loads in flight per lane, not one.
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int j = lane + i * 32;
    keys[i] = j < len ? bits[j * col_stride] : Key(0);
  }
  // Bit i: element lane + 32 i exists and is not taken yet (ITEMS <= 32): the lane's first
  // ceil((len - lane) / 32) slots, as one mask after the loads (with the row's length in a
  // register, a compare per slot here pushed the 16-bit ITEMS=32 builds past ptxas's register
  // target, and the mask before the loads the 64-bit ones: tools/check_kernels.py finds both).
  const int held = len > lane ? (len - lane + 31) >> 5 : 0;
  unsigned live = held >= 32 ? ~0u : (1u << held) - 1u;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    keys[i] = ((live >> i) & 1u) ? KeyTraits<T>::from_bits(keys[i], largest, nan_first) : Key(0);
  // Lane r keeps the r-th winner; "none" (0x7fffffff) past the row's length: padding.
  int mine = 0x7fffffff;
  for (int r = 0; r < k; ++r) {
    Key best = 0;
    int best_idx = 0x7fffffff;  // "none": no live element yet
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      // Strictly greater: among equal keys the first (lowest) index of this lane stays.
      if (((live >> i) & 1u) && (best_idx == 0x7fffffff || keys[i] > best)) {
        best = keys[i];
        best_idx = lane + i * 32;
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const Key other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_idx = __shfl_xor_sync(0xffffffffu, best_idx, offset);
      if (other_idx != 0x7fffffff && (best_idx == 0x7fffffff || before(other, other_idx, best, best_idx))) {
        best = other;
        best_idx = other_idx;
      }
    }
    // Strike the winner out in the lane that holds it: element j sits in lane j % 32, slot j / 32.
    if (best_idx != 0x7fffffff && (best_idx & 31) == lane) live &= ~(1u << (best_idx >> 5));
    if (lane == r) mine = best_idx;
  }
  int position = lane;
  if (by_index) {
    position = 0;
    for (int s = 0; s < k; ++s) {
      const int other = __shfl_sync(0xffffffffu, mine, s);
      position += other < mine || (other == mine && s < lane);  // padding ("none") ties: by lane
    }
  }
  if (lane < k && mine == 0x7fffffff)
    write_padding(out_vals, out_idx, index_bytes, row * k + position);
  else if (lane < k)
    write_winner(base, col_stride, out_vals, out_idx, index_bytes, row * k + position, (unsigned long long)mine);
}

}  // namespace cutopk::warp_row
