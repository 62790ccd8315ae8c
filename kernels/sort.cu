// Preference keys of every element, for the sort path (a reference path, forced only): the
// launcher orders each row's (key, index) pairs with order_tiles and order_merge
// (order.cu; ties by lower index), then gathers the values of the first K.
// Rows: regular, with lengths, or CSR segments (row_extent.cuh). A row planned n long whose
// length L is shorter gets key 0 (no key is less preferred) at positions L..n-1, read from
// nowhere: ties go to the lower index, so they sort after every real key, and gather_values
// writes a position at or past the row's length as padding (index -1, value 0).
// Dtypes: all (KeyTraits). Threads per block: 256, grid-stride loop over rows * n elements (or
// rows * K winners); the row's extent is looked up per element (these are reference and gather
// kernels, not streaming passes: no per-row setup to amortise).
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "entry.cuh"

namespace cutopk::sort {

template <class T>
CUTOPK_KERNEL(CUTOPK_KEYS_THREADS)
compute_keys(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
             const long long* __restrict__ extents, int rows_kind, int largest, int nan_first,
             typename KeyTraits<T>::Key* __restrict__ out) {
  typedef typename KeyTraits<T>::Key Key;
  const long long total = rows * n;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    const long long r = t / n, i = t - r * n;
    const RowExtent e = row_extent(r, n, row_stride, col_stride, extents, rows_kind);
    out[t] = i < e.length ? KeyTraits<T>::to_key(in[e.start + i * col_stride], largest, nan_first) : Key(0);
  }
}

// Values at the selected indices (row r, winner j at position idx[r * k + j] of the row), read
// from the strided input so their bits are the input's own. A position at or past the row's
// length is padding: its index becomes -1 and its value 0.
template <class T>
CUTOPK_KERNEL(CUTOPK_KEYS_THREADS)
gather_values(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
              const long long* __restrict__ extents, int rows_kind, int k, long long* __restrict__ idx,
              T* __restrict__ out) {
  const long long total = rows * k;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    const long long r = t / k;
    const RowExtent e = row_extent(r, n, row_stride, col_stride, extents, rows_kind);
    const long long i = idx[t];
    if (i < e.length)
      out[t] = in[e.start + i * col_stride];
    else
      write_padding(out, (void*)idx, 8, t);
  }
}

}  // namespace cutopk::sort
