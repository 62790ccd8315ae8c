// Preference keys of every element, for the sort path (a reference path, forced only): the
// launcher orders each row's (key, index) pairs with order_tiles and order_merge
// (order_topk.cu; ties by lower index), then gathers the values of the first K.
// Dtypes: all (KeyTraits). Threads per block: 256, grid-stride loop over rows * n elements.
#include "key_traits.cuh"

template <class T>
__global__ void __launch_bounds__(CUTOPK_KEYS_THREADS)
    compute_keys(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
                 int largest, int nan_first, typename KeyTraits<T>::Key* __restrict__ out) {
  const long long total = rows * n;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    const long long r = t / n, i = t - r * n;
    out[t] = KeyTraits<T>::to_key(in[r * row_stride + i * col_stride], largest, nan_first);
  }
}

// Values at the selected indices (row r, winner j at column idx[r * k + j]), read from the
// strided input so their bits are the input's own.
template <class T>
__global__ void __launch_bounds__(CUTOPK_KEYS_THREADS)
    gather_values(const T* __restrict__ in, long long rows, long long row_stride, long long col_stride, int k,
                  const long long* __restrict__ idx, T* __restrict__ out) {
  const long long total = rows * k;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    const long long r = t / k;
    out[t] = in[r * row_stride + idx[t] * col_stride];
  }
}
