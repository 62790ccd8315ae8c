// Ordering of many (key, index) pairs per row in global memory: the K winners of a row when
// their pairs do not fit shared memory (multiblock's final ordering), or whole rows (the sort
// path), with no library sort.
//
// Two kernels, launched by the steps of cutopk/cuda/families/order.py:
//   order_tiles   one block per tile of `tile` pairs (a power of two that fits shared memory):
//                 a bitonic sort in shared memory, written back in order (runs of `tile`);
//   order_merge   one pass merges groups of `ways` runs of `width` pairs into runs of ways * width:
//                 each pair's place in the merged run is its place in its own run plus the number
//                 of pairs of each other run of its group that come before it (a binary search
//                 each). Pairs are distinct in either order (indices are unique), so the places
//                 form a permutation with no tie to break. log_ways(len / tile) passes, ping-pong
//                 buffers: the sort path merges pairwise; multiblock's K winners take 2 passes at
//                 most (ways = sqrt of the runs), so its launches do not grow with K.
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

// The pairs of the run [lo, hi) that come before (ka, ia): a binary search (runs are ordered).
template <class Key>
__device__ __forceinline__ long long count_before(const Key* keys, const long long* idx, long long lo, long long hi,
                                                  Key ka, unsigned long long ia, int by_index) {
  const long long first = lo;
  while (lo < hi) {
    const long long mid = lo + ((hi - lo) >> 1);
    if (precedes(keys[mid], (unsigned long long)idx[mid], ka, ia, by_index))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - first;
}

template <class T>
CUTOPK_KERNEL(CUTOPK_ORDER_MERGE_THREADS)
order_merge(const typename KeyTraits<T>::Key* __restrict__ src_key, const long long* __restrict__ src_idx,
            long long rows, long long len, long long width, int ways, int by_index,
            typename KeyTraits<T>::Key* __restrict__ dst_key, long long* __restrict__ dst_idx) {
  typedef typename KeyTraits<T>::Key Key;
  const long long total = rows * len;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    const long long row = t / len, i = t - row * len;
    const long long run = i / width;
    const long long group = run / ways * ways;  // the group's first run
    const Key key = src_key[t];
    const unsigned long long id = (unsigned long long)src_idx[t];
    const Key* pk = src_key + row * len;
    const long long* pi = src_idx + row * len;
    // Its place in the merged run: its place in its own run, plus the pairs of every other run of
    // the group (empty past the row's end) that come before it.
    long long place = i - run * width;
    for (long long q = group; q < group + ways && q * width < len; ++q)
      if (q != run) place += count_before(pk, pi, q * width, min(q * width + width, len), key, id, by_index);
    const long long to = row * len + group * width + place;
    dst_key[to] = key;
    dst_idx[to] = (long long)id;
  }
}

}  // namespace cutopk::order
