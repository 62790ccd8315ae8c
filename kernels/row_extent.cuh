// Where a row lies and how many of its elements take part: the one description of a batch's
// rows that every kernel family reads, for the three kinds of batch (CUTOPK_ROWS_*):
//   REGULAR   every row is n elements from row * row_stride (`extents` is never read);
//   LENGTHS   row r starts at r * row_stride and takes part with its first extents[r] elements
//             (top_k(..., lengths=)); the rows are still planned as n long;
//   SEGMENTS  row r is the CSR segment [extents[r], extents[r + 1]) of a 1-D input read with
//             stride col_stride (segmented_top_k); n is the width the rows are planned on (at
//             least the longest segment), and row_stride, which a segment does not use, carries
//             the input's length (or any bound past it where the host has checked the offsets).
// Positions inside a row (the indices the kernels write) count from the row's start, so a
// segment's indices are positions inside the segment, as docs/SPEC.md asks.
//
// The check (docs/SPEC.md): lengths and offsets on the host are checked there before a launch;
// those on the device are never read back by the host (no wait, so a call can be captured in a
// CUDA graph) but checked here, in the launch: a row whose length is outside [0, n], or a segment
// whose bounds decrease, lie outside [0, input length] or are more than n apart, takes part with
// no element at all, so the kernel writes it as padding only, and never reads outside the input.
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
    const long long first = extents[row], end = extents[row + 1];
    // end - first cannot overflow once both are in [0, row_stride].
    const bool inside = first >= 0 && first <= end && end <= row_stride && end - first <= n;
    e.start = inside ? first * col_stride : 0;
    e.length = inside ? end - first : 0;
  } else {
    e.start = row * row_stride;
    const long long length = kind == CUTOPK_ROWS_REGULAR ? n : extents[row];  // CUTOPK_ROWS_LENGTHS
    e.length = length >= 0 && length <= n ? length : 0;
  }
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
