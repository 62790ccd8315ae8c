// Block bitonic sort: top-K of a row that fits in shared memory.
//
// One block per row loads (key, index) pairs for the whole row into shared memory, padded to a
// power of two `size` with (key 0, index 0xffffffff), which rank below every element, sorts them
// by the selection order (larger key, then lower index: a total order, so the result is
// deterministic) and writes the first K; for order "index" the K winners are sorted again by
// index. Values are re-read from the input at the winning indices, so their bits are the
// input's own; indices are written as 4 or 8 bytes (index_bytes, the output's index dtype).
// Dtypes: all (KeyTraits). Limits: size <= 2^16 and size * (4 + sizeof(Key)) bytes of dynamic
// shared memory, within the device's opt-in limit (the launcher opts in beyond 48 KB): N <= 4096
// for 32/64-bit keys in 48 KB, 16384 in an H100's 223 KB (32768 for 8/16-bit keys). Threads per
// block: min(512, size / 2).
#include "key_traits.cuh"
#include "block_sort.cuh"

template <class T>
__global__ void __launch_bounds__(512)
    bitonic_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
                 int k, int largest, int nan_first, int by_index, int size, T* __restrict__ out_vals,
                 void* __restrict__ out_idx, int index_bytes) {
  typedef typename KeyTraits<T>::Key Key;
  extern __shared__ __align__(16) unsigned char cutopk_smem[];
  unsigned* idx = reinterpret_cast<unsigned*>(cutopk_smem);
  Key* keys = reinterpret_cast<Key*>(idx + size);
  const long long row = blockIdx.x;
  const T* base = in + row * row_stride;
  for (int i = threadIdx.x; i < size; i += blockDim.x) {
    if (i < n) {
      keys[i] = KeyTraits<T>::to_key(base[i * col_stride], largest, nan_first);
      idx[i] = i;
    } else {
      keys[i] = 0;
      idx[i] = 0xffffffffu;
    }
  }
  __syncthreads();
  cutopk_block_bitonic<false>(keys, idx, size);
  if (by_index) {
    const int padded = cutopk_pow2_at_least(k);
    for (int i = k + threadIdx.x; i < padded; i += blockDim.x) idx[i] = 0xffffffffu;
    __syncthreads();
    cutopk_block_bitonic<true>(keys, idx, padded);
  }
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const unsigned i = idx[j];
    cutopk_store_index(out_idx, row * k + j, i, index_bytes);
    out_vals[row * k + j] = base[(long long)i * col_stride];
  }
}
