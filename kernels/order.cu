// Ordering of many (key, index) pairs per row in global memory: the K winners of a row when
// their pairs do not fit shared memory (multiblock's final ordering), or whole rows (the sort
// path), with no library sort.
//
// Two kernels, launched by cutopk/cuda/families/order.py:
//   order_tiles   one block per tile of `tile` pairs (a power of two that fits shared memory):
//                 a bitonic sort in shared memory, written back in order (runs of `tile`);
//   order_merge   one pass merges runs of `width` pairs pairwise into runs of 2 * width: each
//                 pair's place in the merged run is its place in its own run plus the number of
//                 pairs of the partner run that come before it (a binary search). Pairs are
//                 distinct in either order (indices are unique), so the places form a
//                 permutation with no tie to break. log2(len / tile) passes, ping-pong buffers.
// Orders: by_index 0 is the selection order (larger key first, then lower index: the tie rule),
// 1 is ascending index. Indices are 64-bit; with `with_idx` 0 the index of a pair is its position
// in the row (whole rows; `src_idx` is not read). Dtypes: all (KeyTraits<T>::Key). Limits: tile * (8 + sizeof(Key))
// bytes of dynamic shared memory; any row length. Threads per block: min(512, tile / 2) and 256.
#include "constants.cuh"
#include "key_traits.cuh"
#include "block_sort.cuh"
#include "entry.cuh"

namespace cutopk::order {

template <class Key>
__device__ __forceinline__ bool precedes(Key ka, unsigned long long ia, Key kb, unsigned long long ib, int by_index) {
  return by_index ? ia < ib : before(ka, ia, kb, ib);
}

template <class T>
CUTOPK_KERNEL(CUTOPK_ORDER_TILE_THREADS)
order_tiles(const typename KeyTraits<T>::Key* __restrict__ src_key, const long long* __restrict__ src_idx, int with_idx,
            long long rows, long long len, int tile, int by_index, typename KeyTraits<T>::Key* __restrict__ dst_key,
            long long* __restrict__ dst_idx) {
  typedef typename KeyTraits<T>::Key Key;
  typedef unsigned long long Index;
  extern __shared__ __align__(16) unsigned char smem[];
  Index* idx = reinterpret_cast<Index*>(smem);
  Key* keys = reinterpret_cast<Key*>(idx + tile);
  const long long tiles = (len + tile - 1) / tile;
  // Blocks stride over (row, tile); the trip count is the same for every thread of a block.
  for (long long b = blockIdx.x; b < rows * tiles; b += gridDim.x) {
    const long long row = b / tiles;
    const long long first = (b - row * tiles) * tile;
    const int count = (int)(len - first < tile ? len - first : tile);
    const long long at = row * len + first;
    // Padding sorts last in both orders: the lowest key with the highest index.
    for (int j = threadIdx.x; j < tile; j += blockDim.x) {
      keys[j] = j < count ? src_key[at + j] : Key(0);
      idx[j] = j < count ? (with_idx ? (Index)src_idx[at + j] : (Index)(first + j)) : ~0ull;
    }
    __syncthreads();
    if (by_index)
      block_bitonic<true>(keys, idx, tile);
    else
      block_bitonic<false>(keys, idx, tile);
    for (int j = threadIdx.x; j < count; j += blockDim.x) {
      dst_key[at + j] = keys[j];
      dst_idx[at + j] = (long long)idx[j];
    }
    __syncthreads();  // the tile's shared memory is loaded again by the next iteration
  }
}

template <class T>
CUTOPK_KERNEL(CUTOPK_ORDER_MERGE_THREADS)
order_merge(const typename KeyTraits<T>::Key* __restrict__ src_key, const long long* __restrict__ src_idx,
            long long rows, long long len, long long width, int by_index,
            typename KeyTraits<T>::Key* __restrict__ dst_key, long long* __restrict__ dst_idx) {
  typedef typename KeyTraits<T>::Key Key;
  const long long total = rows * len;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    const long long row = t / len, i = t - row * len;
    const long long run = i / width;
    const long long merged = (run & ~1ll) * width;  // where the merged pair of runs starts
    const Key key = src_key[t];
    const unsigned long long id = (unsigned long long)src_idx[t];
    long long lo = (run ^ 1) * width;  // the partner run: [lo, hi), empty past the row's end
    long long hi = lo + width < len ? lo + width : len;
    const long long partner = lo;
    const Key* pk = src_key + row * len;
    const long long* pi = src_idx + row * len;
    while (lo < hi) {  // the partner's pairs that come before this one
      const long long mid = lo + ((hi - lo) >> 1);
      if (precedes(pk[mid], (unsigned long long)pi[mid], key, id, by_index))
        lo = mid + 1;
      else
        hi = mid;
    }
    const long long before = lo > partner ? lo - partner : 0;
    const long long to = row * len + merged + (i - run * width) + before;
    dst_key[to] = key;
    dst_idx[to] = (long long)id;
  }
}

}  // namespace cutopk::order
