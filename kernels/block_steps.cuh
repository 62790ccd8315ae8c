// Steps of block_row's select (kernels/block_row.cu) over the keys a block holds in shared
// memory, shared with the cluster family (kernels/cluster.cu, whose blocks each hold a slice of
// a row): the 16-byte copies of a row issued at entry in chunks, the streaming loader's path for
// the rows those cannot copy, the candidate split around bin t of the first digit, and the exact
// select from a bucket. Each is called by every thread of the block; docs/kernels.md describes
// the families.
#pragma once

#include "constants.cuh"
#include "key_traits.cuh"
#include "row_loads.cuh"
#include "async_copy.cuh"
#include "radix_digit.cuh"
#include "first_digit.cuh"
#include "onchip_select.cuh"

namespace cutopk {

// The groups a row's copies are committed in (wait_copies tells each apart).
constexpr int COPY_CHUNKS = CUTOPK_BLOCK_ROW_CHUNKS;
static_assert(COPY_CHUNKS - 1 <= MAX_PENDING_GROUPS, "wait_copies tells every chunk's group apart");

// The row's whole 16-byte vectors, `vecs` of them, in `count` groups of `per_chunk` vectors (a
// multiple of the block: every thread copies as many vectors of a group as the others, but one).
struct Chunks {
  int vecs;
  int per_chunk;
  int count;
};

// 1a. Issues every copy of the row's whole vectors into `keys` (element i at keys[i]) and commits
// one group per chunk. `row` and `keys` are 16-byte aligned.
template <class Key>
__device__ __forceinline__ Chunks issue_copies(const Key* row, int len, Key* keys) {
  Chunks c;
  c.vecs = len / onchip::KEYS_PER_VEC<Key>;
  const int per = (c.vecs + COPY_CHUNKS - 1) / COPY_CHUNKS;
  c.per_chunk = (per + (int)blockDim.x - 1) / (int)blockDim.x * (int)blockDim.x;
  c.count = c.per_chunk > 0 ? (c.vecs + c.per_chunk - 1) / c.per_chunk : 0;
  const Vec16* src = reinterpret_cast<const Vec16*>(row);
  Vec16* dst = reinterpret_cast<Vec16*>(keys);
  for (int g = 0; g < c.count; ++g) {
    const int end = min(c.vecs, (g + 1) * c.per_chunk);
    for (int v = g * c.per_chunk + (int)threadIdx.x; v < end; v += blockDim.x) copy16_async(dst + v, src + v);
    commit_copies();
  }
  return c;
}

// What a block's words in shared memory are, and how a word's first digit and key are read.
// HeldRow (block_row): for the types whose first digit is counted from an element's bits
// (RawDigit: the floats), the bits as loaded, each key made where it is needed (the candidate
// pass's members; keys_in_place for the paths that scan the whole row as keys); for the others the
// keys, made as the row lands. KeyedRow (cluster, whose blocks share the prefix digit): the keys.
// `stored` is what a loaded element's bits become, `of` a word's first digit, `key` its key.
template <class T>
struct HeldRow {
  typedef typename KeyTraits<T>::Key Key;
  static constexpr bool BITS = RawDigit<T>::value;
  decltype(RawDigit<T>::of_row(true, false)) raw;
  RowDigit<T> digit;
  bool largest;
  bool nan_first;
  __device__ __forceinline__ Key stored(Key bits) const {
    return BITS ? bits : KeyTraits<T>::from_bits(bits, largest, nan_first);
  }
  __device__ __forceinline__ unsigned of(Key word) const {
    if constexpr (BITS)
      return raw.of(word);
    else
      return digit.of(word);
  }
  __device__ __forceinline__ Key key(Key word) const {
    return BITS ? KeyTraits<T>::from_bits(word, largest, nan_first) : word;
  }
};

template <class T>
struct KeyedRow {
  typedef typename KeyTraits<T>::Key Key;
  static constexpr bool BITS = false;
  RowDigit<T> digit;
  bool largest;
  bool nan_first;
  __device__ __forceinline__ Key stored(Key bits) const { return KeyTraits<T>::from_bits(bits, largest, nan_first); }
  __device__ __forceinline__ unsigned of(Key word) const { return digit.of(word); }
  __device__ __forceinline__ Key key(Key word) const { return word; }
};

// The held bits become keys in place (BITS rows; nothing for the others), each thread its own
// 16-byte vectors (the split's, the refine passes'), then a barrier. Every thread calls it, after
// a barrier that ends every read of the bits.
template <class T>
__device__ __forceinline__ void keys_in_place(const HeldRow<T>& held, typename KeyTraits<T>::Key* keys, int len) {
  typedef typename KeyTraits<T>::Key Key;
  constexpr int E = onchip::KEYS_PER_VEC<Key>;
  if constexpr (HeldRow<T>::BITS) {
    for (int i = E * (int)threadIdx.x; i < len; i += E * (int)blockDim.x) {
      onchip::Held<Key> h = onchip::held_keys(keys, i, len);
#pragma unroll
      for (int e = 0; e < E; ++e) h.k[e] = held.key(h.k[e]);
      onchip::store_held(keys, i, min(E, len - i), h);
    }
    __syncthreads();
  }
}

// 1'. A strided row, or one that starts off a 16-byte boundary: the streaming loader (plain
// loads, several in flight), each run's words stored (`words.stored`) and their first digit
// counted. `hist` is zeroed and visible on entry.
template <class T, class Words>
__device__ __forceinline__ void load_plain(const T* base, long long col_stride, int len, const Words& words,
                                           typename KeyTraits<T>::Key* keys, unsigned* hist) {
  typedef typename KeyTraits<T>::Key Key;
  stream_row(row_bits(base), col_stride, 0, len, threadIdx.x, blockDim.x, [&](const auto& run) {
    constexpr int E = CUTOPK_RUN_SIZE(run);
    onchip::Held<Key> h;
#pragma unroll
    for (int e = 0; e < E; ++e) h.k[e] = words.stored(run.bits[e]);
    onchip::store_held(keys, (int)run.first, run.count, h);
#pragma unroll
    for (int e = 0; e < E; ++e) count_key(hist, words.of(h.k[e]), e < run.count, false);
  });
}

// Where the candidate pass puts its two kinds of key: winners (keys of bins above t) and
// candidates (bin t's), each at slots taken from a shared counter (0 on entry).
template <class Key>
struct Split {
  Key* win_key;
  unsigned* win_idx;
  int* taken;
  Key* cand_key;
  unsigned* cand_idx;
  int* cands;
  unsigned first = 0;  // the row's index of the keys' element 0 (a cluster block's slice)
};

// 3a. One pass over the held words: first digit > t wins, == t becomes a candidate (its key
// made: `words.key`). A 16-byte
// vector per thread and step; each lane's two counts (winners in the high 16 bits, candidates in
// the low: at most 32 E each) go through one warp scan, and each warp step takes its slots with
// one atomicAdd per kind (any order: the ordering step sorts the winners; the candidates carry
// their indices; the slots' arrays and counters may be another block's of a cluster). No per-key ballot: 8-bit keys, 16
// to a vector, would hold 32 ballot words.
template <class T, class Words>
__device__ __forceinline__ void split_row(const typename KeyTraits<T>::Key* keys, int len, const Words& digit,
                                          unsigned t, const Split<typename KeyTraits<T>::Key>& out) {
  typedef typename KeyTraits<T>::Key Key;
  constexpr int E = onchip::KEYS_PER_VEC<Key>;
  const int lane = threadIdx.x & 31;
  for (int v0 = 0; v0 < len; v0 += E * (int)blockDim.x) {
    const int i = v0 + E * (int)threadIdx.x;
    const onchip::Held<Key> h = onchip::held_keys(keys, i, len);
    int count = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const unsigned d = digit.of(h.k[e]);
      count += i + e < len && d > t ? 1 << 16 : i + e < len && d == t ? 1 : 0;
    }
    int total;
    const int before = warp_scan(count, &total);
    if (total == 0) continue;  // the same in the whole warp
    int up_slot = 0, in_slot = 0;
    if (lane == 0 && (total >> 16) > 0) up_slot = atomicAdd(out.taken, total >> 16);
    if (lane == 0 && (total & 0xffff) > 0) in_slot = atomicAdd(out.cands, total & 0xffff);
    up_slot = __shfl_sync(onchip::FULL, up_slot, 0) + (before >> 16);
    in_slot = __shfl_sync(onchip::FULL, in_slot, 0) + (before & 0xffff);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const unsigned d = digit.of(h.k[e]);
      if (i + e < len && d > t) {
        out.win_key[up_slot] = digit.key(h.k[e]);
        out.win_idx[up_slot++] = out.first + (unsigned)(i + e);
      } else if (i + e < len && d == t) {
        out.cand_key[in_slot] = digit.key(h.k[e]);
        out.cand_idx[in_slot++] = out.first + (unsigned)(i + e);
      }
    }
  }
}

// 3b. The exact select over `keys` (the candidates, or the whole held row) from bucket `start`
// (shift = the key's width: every key), by the key's 12-bit prefix digits: refine and choose until
// the bucket holds just the winners still needed or every bit is resolved (ties). Every thread
// calls it after a barrier that ends every read of *s; it ends with one, *s then the bucket.
template <class Key>
__device__ __forceinline__ void resolve_bucket(const Key* keys, int len, onchip::Bucket start, unsigned* hist,
                                               onchip::Bucket* s, int* scan) {
  if (threadIdx.x == 0) *s = start;
  __syncthreads();
  while (true) {
    const onchip::Bucket b = *s;  // the same in every thread
    if (b.count == b.needed || b.shift == 0) return;
    const int bits = b.shift < onchip::DIGIT_BITS ? b.shift : onchip::DIGIT_BITS;
    onchip::refine(keys, len, b, bits, hist);  // its first barrier: every thread has read *s
    onchip::choose_bin(hist, bits, s, scan);
    // choose_bin lowers the shift whenever the bucket holds its `needed` keys; a start bucket
    // that claimed bits its keys do not share would leave it as it was: stop (a wrong answer the
    // tests see) rather than loop for ever.
    if (s->shift == b.shift) return;
  }
}

}  // namespace cutopk
