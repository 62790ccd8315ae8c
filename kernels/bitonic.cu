// Block bitonic sort: top-K of a row that fits in shared memory.
//
// One block per row loads (key, index) pairs for the whole row into shared memory, padded to a
// power of two `size` with (key 0, index 0xffffffff), which rank below every element, sorts them
// by the selection order (larger key, then lower index: a total order, so the result is
// deterministic) and writes the first K; for order "index" the K winners are sorted again by
// index. Values are re-read from the input at the winning indices, so their bits are the
// input's own; indices are written as 4 or 8 bytes (index_bytes, the output's index dtype).
// Loads: four per thread in flight before any key transform; a contiguous row with 16-byte
// vector loads (load_row). The sort's strides below 32 run in registers by shuffles.
// Rows: regular, with lengths, or CSR segments (row_extent.cuh): only the row's first `length`
// elements are loaded (from the row's own start, which sets the vector loads' head); the rest of
// the `size` pairs are padding, which sorts after every element, so a row shorter than K leaves
// its padding pairs (index 0xffffffff) in the last places, written as padding in every order.
// Dtypes: all (KeyTraits). Limits: size <= 2^16 and size * (4 + sizeof(Key)) bytes of dynamic
// shared memory, within the device's opt-in limit (the launcher opts in beyond 48 KB): N <= 4096
// for 32/64-bit keys in 48 KB, 16384 in an H100's 223 KB (32768 for 8/16-bit keys). Threads per
// block: min(512, size / 2).
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"
#include "radix_digit.cuh"
#include "entry.cuh"

namespace cutopk::bitonic {

// Pairs [lo, hi) of the row into shared memory, elements past n as padding: each thread issues
// its loads for four positions before it transforms any of them.
template <class T>
__device__ __forceinline__ void load_scalar(const T* __restrict__ base, long long n, long long col_stride, int lo,
                                            int hi, bool largest, bool nan_first, typename KeyTraits<T>::Key* keys,
                                            unsigned* idx) {
  typedef typename KeyTraits<T>::Key Key;
  const int stride = blockDim.x;
  for (int i0 = lo + threadIdx.x; i0 < hi; i0 += 4 * stride) {
    T v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = i0 + u * stride;
      if (i < hi && i < n) v[u] = base[i * col_stride];
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = i0 + u * stride;
      if (i < hi) {
        keys[i] = i < n ? KeyTraits<T>::to_key(v[u], largest, nan_first) : Key(0);
        idx[i] = i < n ? (unsigned)i : 0xffffffffu;
      }
    }
  }
}

// The whole row as (key, index) pairs in shared memory, padded to `size`. A contiguous row whose
// start is aligned to its element size is read with 16-byte vector loads, two per thread in
// flight, from its first 16-byte boundary; the elements before it, the tail after the last whole
// vector and the padding go through load_scalar, as does every strided row.
template <class T>
__device__ __forceinline__ void load_row(const T* __restrict__ base, long long n, long long col_stride, int size,
                                         bool largest, bool nan_first, typename KeyTraits<T>::Key* keys,
                                         unsigned* idx) {
  const unsigned long long addr = (unsigned long long)(size_t)base;
  if (col_stride != 1 || addr % sizeof(T) != 0) {
    load_scalar(base, n, col_stride, 0, size, largest, nan_first, keys, idx);
    return;
  }
  constexpr int VEC = 16 / sizeof(T);
  const int head = (int)min((long long)(((16 - (addr & 15)) & 15) / sizeof(T)), n);
  const int vecs = (int)((n - head) / VEC);
  const int end = head + vecs * VEC;
  const uint4* vec = reinterpret_cast<const uint4*>(base + head);
  const int stride = blockDim.x;
  for (int w = threadIdx.x; w < vecs; w += 2 * stride) {
    uint4 raw[2];
    raw[0] = vec[w];
    if (w + stride < vecs) raw[1] = vec[w + stride];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int at = head + (w + h * stride) * VEC;
      if (h == 0 || w + stride < vecs) {
        T e[VEC];
        memcpy(e, &raw[h], 16);
#pragma unroll
        for (int u = 0; u < VEC; ++u) {
          keys[at + u] = KeyTraits<T>::to_key(e[u], largest, nan_first);
          idx[at + u] = (unsigned)(at + u);
        }
      }
    }
  }
  load_scalar(base, n, 1, 0, head, largest, nan_first, keys, idx);
  load_scalar(base, n, 1, end, size, largest, nan_first, keys, idx);
}

template <class T>
CUTOPK_KERNEL(CUTOPK_BITONIC_THREADS)
bitonic_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
             const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
             int size, T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  typedef typename KeyTraits<T>::Key Key;
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned* idx = reinterpret_cast<unsigned*>(smem);
  Key* keys = reinterpret_cast<Key*>(idx + size);
  const long long row = blockIdx.x;
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  load_row(base, extent.length, col_stride, size, largest, nan_first, keys, idx);
  __syncthreads();
  block_bitonic<false>(keys, idx, size);
  if (by_index) {
    const int padded = pow2_at_least(k);
    for (int i = k + threadIdx.x; i < padded; i += blockDim.x) idx[i] = 0xffffffffu;
    __syncthreads();
    block_bitonic<true>(keys, idx, padded);
  }
  const int take = (int)min((long long)k, extent.length);  // the winners; padding after them
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    if (j < take)
      write_winner(base, col_stride, out_vals, out_idx, index_bytes, row * k + j, (unsigned long long)idx[j]);
    else
      write_padding(out_vals, out_idx, index_bytes, row * k + j);
  }
}

}  // namespace cutopk::bitonic
