// Thread per row: top-K (K <= 8) of rows that lie along an outer axis, e.g. axis 0 of a
// C-contiguous matrix, where element j of row r sits at r + j * col_stride.
//
// Thread t of the grid owns row t and walks its row; at every step the 32 lanes of a warp read
// 32 adjacent rows, so each load instruction is one coalesced access. The thread keeps the best
// KMAX (key, index) pairs seen so far in registers, sorted by the selection order (key, then
// index), by carrying each new element down the list with compare-exchanges whose positions are
// all known at compile time (no local memory), so ties keep the lower index. Four loads per
// thread are in flight before their keys are inserted. The first K of the KMAX are written
// (re-sorted by index for order "index"). Dtypes: all (KeyTraits). Limits: K <= KMAX <= 8 (16
// spills registers), N < 2^31. Threads per block: 256. Shared memory: none. Output indices: 4 or
// 8 bytes (index_bytes). No 128-bit loads: a thread's elements are a column stride apart, and a
// warp's 32 loads of one step are already one coalesced access.
// Rows: regular, with lengths, or CSR segments (row_extent.cuh): a thread walks only its row's
// first `length` elements; the slots no element reached stay empty (-1) and are written as
// padding, after the winners in every order.
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "radix_digit.cuh"
#include "entry.cuh"

namespace cutopk::thread_row {

// Carries a new element (the highest index so far) down the sorted list of the best KMAX, with
// compare-exchanges at static positions (the list stays in registers). The selection order,
// index included: a new element stays behind kept equal keys, and a kept element pushed down by
// a better one goes back in front of later equal keys (the simulator's NaN tests caught the
// key-only version). -1: an empty slot, worse than any element.
template <class Key, int KMAX>
__device__ __forceinline__ void insert(Key (&keys)[KMAX], int (&idx)[KMAX], Key carry_key, int carry_idx) {
#pragma unroll
  for (int s = 0; s < KMAX; ++s) {
    if (carry_idx >= 0 && (idx[s] < 0 || before(carry_key, carry_idx, keys[s], idx[s]))) {
      const Key tk = keys[s];
      const int ti = idx[s];
      keys[s] = carry_key;
      idx[s] = carry_idx;
      carry_key = tk;
      carry_idx = ti;
    }
  }
}

template <class T, int KMAX>
CUTOPK_KERNEL(CUTOPK_THREAD_ROW_THREADS)
thread_row_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
                const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
                T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  typedef typename KeyTraits<T>::Key Key;
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  const int len = (int)extent.length;  // <= n < 2^31
  Key keys[KMAX];
  int idx[KMAX];  // -1: an empty slot, worse than any element (rows are shorter than 2^31)
#pragma unroll
  for (int s = 0; s < KMAX; ++s) {
    keys[s] = 0;
    idx[s] = -1;
  }
  // Four loads in flight (issued before any key transform or insertion), then the rest.
  int j = 0;
  for (; j + 4 <= len; j += 4) {
    T v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = base[(long long)(j + u) * col_stride];
#pragma unroll
    for (int u = 0; u < 4; ++u) insert(keys, idx, KeyTraits<T>::to_key(v[u], largest, nan_first), j + u);
  }
  for (; j < len; ++j) insert(keys, idx, KeyTraits<T>::to_key(base[(long long)j * col_stride], largest, nan_first), j);
  // The slots that hold an element: min(k, len); the empty ones (-1) are the last, the worst.
  const int filled = min(k, len);
  if (by_index) {
    // Bubble the filled slots among the first k into index order (all positions static: stays
    // in registers); the empty ones stay behind them, as padding.
#pragma unroll
    for (int pass = 0; pass < KMAX; ++pass) {
#pragma unroll
      for (int s = 0; s + 1 < KMAX; ++s) {
        if (s + 1 < filled && idx[s + 1] < idx[s]) {
          const int ti = idx[s];
          idx[s] = idx[s + 1];
          idx[s + 1] = ti;
        }
      }
    }
  }
#pragma unroll
  for (int s = 0; s < KMAX; ++s) {
    if (s < filled)
      write_winner(base, col_stride, out_vals, out_idx, index_bytes, row * k + s, (unsigned long long)idx[s]);
    else if (s < k)
      write_padding(out_vals, out_idx, index_bytes, row * k + s);
  }
}

}  // namespace cutopk::thread_row
