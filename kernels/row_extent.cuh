// Where a row lies and how many of its elements take part: the one description of a batch's
// rows that every kernel family reads, for the three kinds of batch (CUTOPK_ROWS_*):
//   REGULAR   every row is n elements from row * row_stride (`extents` is never read);
//   LENGTHS   row r starts at r * row_stride and takes part with its first extents[r] elements
//             (top_k(..., lengths=)); the rows are still planned as n long;
//   SEGMENTS  row r is the CSR segment [extents[r], extents[r + 1]) of a 1-D input read with
//             stride col_stride (segmented_top_k); n is the longest segment.
// Positions inside a row (the indices the kernels write) count from the row's start, so a
// segment's indices are positions inside the segment, as docs/SPEC.md asks.
//
// The host checks every length (0 <= length <= n) before a launch; the clamp to [0, n] here is a
// second line of defence that keeps a bad extents array from making a kernel read outside the
// input. It never changes a checked call's result.
#pragma once

#include "constants.cuh"
#include "key_traits.cuh"

namespace cutopk {

struct RowExtent {
  long long start;   // offset of the row's first element from the input pointer, in elements
  long long length;  // elements taking part, 0 <= length <= n
};

__device__ __forceinline__ RowExtent row_extent(long long row, long long n, long long row_stride, long long col_stride,
                                                const long long* __restrict__ extents, int kind) {
  RowExtent e;
  if (kind == CUTOPK_ROWS_SEGMENTS) {
    const long long first = extents[row];
    e.start = first * col_stride;
    e.length = extents[row + 1] - first;
  } else {
    e.start = row * row_stride;
    e.length = kind == CUTOPK_ROWS_REGULAR ? n : extents[row];  // CUTOPK_ROWS_LENGTHS
  }
  e.length = max(0LL, min(e.length, n));
  return e;
}

// Output position `at` of a row with fewer than k elements taking part: docs/SPEC.md's padding,
// index -1 (every bit set, in either index width; only signed index types are allowed with
// padding) and value 0 (all bits clear in every element type, written as the key-width integer
// because __half and __nv_bfloat16 have no conversion from an integer on every toolkit).
template <class T>
__device__ __forceinline__ void write_padding(T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes,
                                              long long at) {
  store_index(out_idx, at, ~0ULL, index_bytes);
  reinterpret_cast<typename KeyTraits<T>::Key*>(out_vals)[at] = 0;
}

}  // namespace cutopk
