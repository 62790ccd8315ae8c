// Ordering of many (key, index) pairs per row in global memory: the K winners of a row when
// their pairs do not fit shared memory (multiblock's final ordering), or whole rows (the sort
// path), with no library sort.
//
// Four kernels, launched by the steps of cutopk/cuda/families/order.py:
//   order_tiles   one block per tile of `tile` pairs (a power of two that fits shared memory):
//                 a bitonic sort in shared memory, written back in order (runs of `tile`);
//   order_winner_tiles  the same over multiblock's K winners picked where its selection left
//                 them (the candidates above the K-th key's bucket, the bucket's winners): runs
//                 of different lengths in slots of `tile`, their counts beside them;
//   order_merge   one pass merges groups of `ways` runs of `width` pairs into runs of ways * width:
//                 each pair's place in the merged run is its place in its own run plus the number
//                 of pairs of each other run of its group that come before it (a binary search
//                 each). Pairs are distinct in either order (indices are unique), so the places
//                 form a permutation with no tie to break. log_ways(len / tile) passes, ping-pong
//                 buffers: the sort path merges pairwise; multiblock's K winners take 2 passes at
//                 most (ways = sqrt of the runs), so its launches do not grow with K;
//   order_output  multiblock's last merge (one way: a copy, when one tile holds the K pairs;
//                 or every run of order_winner_tiles at once), writing the outputs itself: the values rebuilt from the
//                 keys (the input is re-read only where a key canonicalised the element: NaN, +-0.0), padding past a
//                 row's length. No pass re-reads the indices and the input's values after it.
// Orders: by_index 0 is the selection order (larger key first, then lower index: the tie rule),
// 1 is ascending index. Indices, read and written, are of `pos_bytes` (4: multiblock's winners,
// whose positions and padding fit 32 bits, so 8-byte pairs for 32-bit keys instead of 12; 8: the
// sort path). With `with_idx` 0 the index of a pair is its position in the
// row (whole rows; `src_idx` is not read). Dtypes: all (KeyTraits<T>::Key). Limits:
// tile * (8 + sizeof(Key)) bytes of dynamic shared memory; any row length. Threads per block:
// min(512, tile / 2) and 256.
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"
#include "entry.cuh"

namespace cutopk::order {

template <class Key>
__device__ __forceinline__ bool precedes(Key ka, unsigned long long ia, Key kb, unsigned long long ib, int by_index) {
  return by_index ? ia < ib : before(ka, ia, kb, ib);
}

// A pair's index as stored: 4 bytes (`pos_bytes` 4: multiblock's K winners, positions below
// 2^32) or 8. The width is the same for the whole launch: the branch never diverges.
__device__ __forceinline__ unsigned long long load_pos(const void* idx, long long at, int pos_bytes) {
  return pos_bytes == 4 ? (unsigned long long)static_cast<const unsigned*>(idx)[at]
                        : static_cast<const unsigned long long*>(idx)[at];
}

template <class T>
CUTOPK_KERNEL(CUTOPK_ORDER_TILE_THREADS)
order_tiles(const typename KeyTraits<T>::Key* __restrict__ src_key, const void* __restrict__ src_idx, int with_idx,
            long long rows, long long len, int tile, int by_index, int pos_bytes,
            typename KeyTraits<T>::Key* __restrict__ dst_key, void* __restrict__ dst_idx) {
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
      idx[j] = j < count ? (with_idx ? load_pos(src_idx, at + j, pos_bytes) : (Index)(first + j)) : ~0ull;
    }
    __syncthreads();
    if (by_index)
      block_bitonic<true>(keys, idx, tile);
    else
      block_bitonic<false>(keys, idx, tile);
    for (int j = threadIdx.x; j < count; j += blockDim.x) {
      dst_key[at + j] = keys[j];
      store_index(dst_idx, at + j, idx[j], pos_bytes);
    }
    __syncthreads();  // the tile's shared memory is loaded again by the next iteration
  }
}

// multiblock's K winners of each row in tiles, picked where the selection left them, so that no
// pass writes them into one buffer first. `picks`, 4 per row, written by multiblock's
// finishing block: {from_cand, cut, prefix, from_win}: the first `from_cand` pairs of the row's
// candidates (`cap` a row) whose keys' bits above `cut` exceed `prefix` (the keys above the K-th
// key's bucket), then the first `from_win` pairs of its winners' buffer (K a row: the bucket's
// winners; or, with from_cand 0, every winner and the padding pairs). Block (row, q) takes the
// q-th span of `tile` entries of that sequence (the candidates' spans first), compacts its picks
// in shared memory (any order: the sort orders them), sorts them and writes them at slot q of the
// row's `runs` slots of `tile` pairs, and their number in run_counts[row * runs + q] (0 past the
// last span): runs of different lengths, merged by order_output. 4-byte positions only.
template <class T>
CUTOPK_KERNEL(CUTOPK_ORDER_TILE_THREADS)
order_winner_tiles(const typename KeyTraits<T>::Key* __restrict__ cand_key, const unsigned* __restrict__ cand_idx,
                   long long cap, const typename KeyTraits<T>::Key* __restrict__ win_key,
                   const unsigned* __restrict__ win_idx, int k, const long long* __restrict__ picks, long long rows,
                   int runs, int tile, int by_index, typename KeyTraits<T>::Key* __restrict__ dst_key,
                   unsigned* __restrict__ dst_idx, unsigned* __restrict__ run_counts) {
  typedef typename KeyTraits<T>::Key Key;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int s_count;
  unsigned* idx = reinterpret_cast<unsigned*>(smem);
  Key* keys = reinterpret_cast<Key*>(idx + tile);  // tile is a power of two: aligned for any key
  const int lane = threadIdx.x & 31;
  for (long long b = blockIdx.x; b < rows * runs; b += gridDim.x) {  // the same trip count in the block
    const long long row = b / runs, q = b - row * runs;
    const long long from_cand = picks[4 * row], from_win = picks[4 * row + 3];
    const int cut = (int)picks[4 * row + 1];
    const unsigned long long prefix = (unsigned long long)picks[4 * row + 2];
    const long long cand_spans = (from_cand + tile - 1) / tile;
    const bool in_cand = q < cand_spans;
    const long long first = (in_cand ? q : q - cand_spans) * tile;
    const long long end = min(in_cand ? from_cand : from_win, first + tile);
    const Key* src_key = in_cand ? cand_key + row * cap : win_key + row * k;
    const unsigned* src_idx = in_cand ? cand_idx + row * cap : win_idx + row * k;
    if (threadIdx.x == 0) s_count = 0;
    __syncthreads();
    // Whole rounds of the block, so that every lane reaches the warp's ballot.
    for (long long j0 = first; j0 < end; j0 += blockDim.x) {
      const long long j = j0 + threadIdx.x;
      const bool valid = j < end;
      const Key key = valid ? src_key[j] : Key(0);
      const bool keep = valid && (!in_cand || (cut < KEY_BITS<Key> && (unsigned long long)(key >> cut) > prefix));
      const unsigned ballot = __ballot_sync(0xffffffffu, keep);
      int base = 0;
      if (lane == 0 && ballot) base = atomicAdd(&s_count, __popc(ballot));
      base = __shfl_sync(0xffffffffu, base, 0);
      if (keep) {
        const int at = base + __popc(ballot & ((1u << lane) - 1u));
        keys[at] = key;
        idx[at] = src_idx[j];
      }
    }
    __syncthreads();
    const int count = s_count, size = pow2_at_least(count);
    // Padding up to a power of two sorts last in both orders: the lowest key with the highest
    // position (real positions are below 2^32 - 1).
    sort_padded(keys, idx, count, size, by_index != 0);
    const long long at = b * tile;  // slot q of the row
    for (int j = threadIdx.x; j < count; j += blockDim.x) {
      dst_key[at + j] = keys[j];
      dst_idx[at + j] = idx[j];
    }
    if (threadIdx.x == 0) run_counts[b] = (unsigned)count;
    __syncthreads();  // s_count and the tile's shared memory are reset by the next iteration
  }
}

// The pairs of the run [lo, hi) that come before (ka, ia): a binary search (runs are ordered).
template <class Key>
__device__ __forceinline__ long long count_before(const Key* keys, const void* idx, int pos_bytes, long long lo,
                                                  long long hi, Key ka, unsigned long long ia, int by_index) {
  const long long first = lo;
  while (lo < hi) {
    const long long mid = lo + ((hi - lo) >> 1);
    if (precedes(keys[mid], load_pos(idx, mid, pos_bytes), ka, ia, by_index))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - first;
}

// Where pair t (row `row`, place i in it) goes when the groups of `ways` runs of `width` pairs are
// merged: its place in its own run, plus the pairs of every other run of its group (empty past
// the row's end) that come before it. Returns its place in the row. `width` and `ways` are powers
// of two (tiles are, and so are the ways of order.py's merge_ways): shifts and masks, not 64-bit
// divisions, which are calls in SASS that make the caller save its live registers (order_output
// spilled 8 bytes on sm_90 with them).
template <class Key>
__device__ __forceinline__ long long merged_place(const Key* src_key, const void* src_idx, int pos_bytes, long long row,
                                                  long long i, long long len, long long width, int ways, Key key,
                                                  unsigned long long id, int by_index) {
  const long long run = i >> (__ffsll(width) - 1);
  const long long group = run & ~(long long)(ways - 1);  // the group's first run
  const Key* pk = src_key + row * len;
  const void* pi = pos_bytes == 4 ? (const void*)(static_cast<const unsigned*>(src_idx) + row * len)
                                  : (const void*)(static_cast<const unsigned long long*>(src_idx) + row * len);
  long long place = i - run * width;
  for (long long q = group; q < group + ways && q * width < len; ++q)
    if (q != run) place += count_before(pk, pi, pos_bytes, q * width, min(q * width + width, len), key, id, by_index);
  return group * width + place;
}

// Pair t of the runs being merged (rows of `len` pairs, one after another): its key, its position
// and its row, and where it goes in the merged row (order_merge and order_output differ only in
// what they write there).
template <class Key>
struct MergedPair {
  Key key;
  unsigned long long id;
  long long row, to;
};

template <class Key>
__device__ __forceinline__ MergedPair<Key> merged_pair(const Key* src_key, const void* src_idx, int pos_bytes,
                                                       long long t, long long len, long long width, int ways,
                                                       int by_index) {
  MergedPair<Key> p;
  p.row = t / len;
  p.key = src_key[t];
  p.id = load_pos(src_idx, t, pos_bytes);
  p.to = p.row * len +
         merged_place(src_key, src_idx, pos_bytes, p.row, t - p.row * len, len, width, ways, p.key, p.id, by_index);
  return p;
}

template <class T>
CUTOPK_KERNEL(CUTOPK_ORDER_MERGE_THREADS)
order_merge(const typename KeyTraits<T>::Key* __restrict__ src_key, const void* __restrict__ src_idx, long long rows,
            long long len, long long width, int ways, int by_index, int pos_bytes,
            typename KeyTraits<T>::Key* __restrict__ dst_key, void* __restrict__ dst_idx) {
  typedef typename KeyTraits<T>::Key Key;
  const long long total = rows * len;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    const MergedPair<Key> p = merged_pair(src_key, src_idx, pos_bytes, t, len, width, ways, by_index);
    dst_key[p.to] = p.key;
    store_index(dst_idx, p.to, p.id, pos_bytes);
  }
}

// Pair t of order_winner_tiles' slots (`runs` of `width` pairs a row, both powers of two; run q
// holds counts[q] pairs), all of a row's runs merged at once: its key, position and row, and its
// place in the row's merged K in `to` (row * len + place). Returns false for an empty slot.
template <class Key>
__device__ __forceinline__ bool counted_pair(const Key* src_key, const unsigned* src_idx, const unsigned* run_counts,
                                             long long t, int runs, long long width, long long len, int by_index,
                                             MergedPair<Key>* p) {
  const int width_bits = __ffsll(width) - 1, slot_bits = width_bits + __ffs(runs) - 1;
  p->row = t >> slot_bits;
  const long long i = t - (p->row << slot_bits), run = i >> width_bits, place = i - (run << width_bits);
  const unsigned* counts = run_counts + p->row * runs;
  if (place >= counts[run]) return false;
  p->key = src_key[t];
  p->id = src_idx[t];
  const Key* pk = src_key + (p->row << slot_bits);
  const unsigned* pi = src_idx + (p->row << slot_bits);
  long long to = place;
  for (int q = 0; q < runs; ++q)
    if (q != run)
      to += count_before(pk, pi, 4, (long long)q << width_bits, ((long long)q << width_bits) + counts[q], p->key, p->id,
                         by_index);
  p->to = p->row * len + to;
  return true;
}

// The last merge of multiblock's K winners, writing the outputs (no pass re-reading the indices
// and the input's values after it): the index as int64, and the value rebuilt from the key where
// the key says it (KeyTraits<T>::key_holds_bits), else (NaN, zero keys: their sign and payload are not in the
// key) re-read from the input at the index. A position at or past the row's length is padding
// (index -1, value 0). `len` is K: the outputs are rows x len. With `runs` 0 the pairs are rows
// of `len` in runs of `width`, merged by groups of `ways`; else order_winner_tiles' `runs` slots
// a row of `width` pairs each, run_counts[row * runs + q] of them filled, all merged (4-byte
// positions).
template <class T>
CUTOPK_KERNEL(CUTOPK_ORDER_MERGE_THREADS)
order_output(const T* __restrict__ in, long long n, long long row_stride, long long col_stride,
             const long long* __restrict__ extents, int rows_kind, int largest,
             const typename KeyTraits<T>::Key* __restrict__ src_key, const void* __restrict__ src_idx, long long rows,
             long long len, long long width, int ways, int by_index, int pos_bytes, int runs,
             const unsigned* __restrict__ run_counts, T* __restrict__ out_vals, long long* __restrict__ out_idx) {
  typedef typename KeyTraits<T>::Key Key;
  const long long total = rows * (runs ? runs * width : len);
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (long long)gridDim.x * blockDim.x) {
    MergedPair<Key> p;
    if (!runs)
      p = merged_pair(src_key, src_idx, pos_bytes, t, len, width, ways, by_index);
    else if (!counted_pair(src_key, static_cast<const unsigned*>(src_idx), run_counts, t, runs, width, len, by_index,
                           &p))
      continue;  // an empty slot
    const Key key = p.key;
    const unsigned long long id = p.id;
    const long long to = p.to;
    const RowExtent e = row_extent(p.row, n, row_stride, col_stride, extents, rows_kind);
    if (id >= (unsigned long long)e.length) {  // padding sorts last in either order
      write_padding(out_vals, (void*)out_idx, 8, to);
    } else {
      out_idx[to] = (long long)id;
      if (KeyTraits<T>::key_holds_bits(key, largest))
        reinterpret_cast<Key*>(out_vals)[to] = KeyTraits<T>::bits_of_key(key, largest);
      else
        out_vals[to] = in[e.start + (long long)id * col_stride];
    }
  }
}

}  // namespace cutopk::order
