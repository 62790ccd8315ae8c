// Steps of block_row's select (kernels/block_row.cu) over the row a block holds in shared
// memory, shared with the cluster family (kernels/cluster.cu, whose blocks each hold a slice of
// a row): the entry (the 16-byte copies of a row issued in chunks, the tail, the zeroed bins),
// the count of the first digit as the chunks land (floats from their bits, HeldRow) or through
// the streaming loader for the rows the copies cannot take, the keys made lazily, the candidate
// split around bin t of the first digit, and the exact select from a bucket. Each is called by
// every thread of the block; docs/kernels.md describes the families.
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

// 1. The entry of a row (or a cluster block's slice) of `len` elements at `bits`: when `copied`
// (contiguous, 16-byte aligned, cp.async available) every copy of its whole vectors issued first,
// then this thread's element past them read (its bits), then `bins` counters of `hist` zeroed (the
// count step's first barrier publishes them). Every thread calls it.
template <class Key>
struct Entry {
  Chunks chunks;  // the copies in flight ({0, 0, 0}: none)
  int tail;       // this thread's element past the whole vectors (>= len: none)
  Key tail_bits;
};

template <class Key>
__device__ __forceinline__ Entry<Key> enter_row(const Key* bits, int len, bool copied, Key* keys, unsigned* hist,
                                                int bins) {
  constexpr int E = onchip::KEYS_PER_VEC<Key>;
  Entry<Key> entry{Chunks{0, 0, 0}, len, Key(0)};
  if (copied) entry.chunks = issue_copies(bits, len, keys);  // every copy in flight before anything else
  if (copied) entry.tail = entry.chunks.vecs * E + (int)threadIdx.x;
  if (entry.tail < len) entry.tail_bits = bits[entry.tail];
  onchip::zero_bins(hist, bins);
  return entry;
}

// What a block's words in shared memory are, and how a word's first digit and key are read
// (block_row's rows, cluster's slices). For the types whose first digit is counted from an
// element's bits (RawDigit: the floats), the bits as loaded, each key made where it is needed (the
// candidate pass's members; keys_in_place for the paths that scan the whole row as keys); for the
// others the keys, made as the row lands. `stored` is what a loaded element's bits become, `of` a
// word's first digit, `key` its key.
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
__device__ __forceinline__ HeldRow<T> held_row(bool largest, bool nan_first) {
  return HeldRow<T>{RawDigit<T>::of_row(largest, nan_first), RowDigit<T>::prefix(), largest, nan_first};
}

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

// One vector of a landed chunk: its bits become keys in place (a 16-byte shared load and store).
template <class T>
__device__ __forceinline__ onchip::Held<typename KeyTraits<T>::Key> to_keys(typename KeyTraits<T>::Key* keys, int v,
                                                                            bool largest, bool nan_first) {
  typedef typename KeyTraits<T>::Key Key;
  constexpr int E = onchip::KEYS_PER_VEC<Key>;
  const Vec16 raw = reinterpret_cast<const Vec16*>(keys)[v];
  onchip::Held<Key> h;
#pragma unroll
  for (int e = 0; e < E; ++e) h.k[e] = KeyTraits<T>::from_bits(vec_element<Key>(raw, e), largest, nan_first);
  onchip::store_held(keys, v * E, E, h);
  return h;
}

// The least and the largest of the block's (lo, hi), in every thread: a warp reduction, then
// every thread reads the warps' (`range`: 2 x 32 shared words). Every thread calls it.
template <class Key>
__device__ __forceinline__ void block_min_max(Key* lo, Key* hi, unsigned long long* range) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Key l = shfl_xor(*lo, offset), h = shfl_xor(*hi, offset);
    *lo = l < *lo ? l : *lo;
    *hi = h > *hi ? h : *hi;
  }
  if ((threadIdx.x & 31) == 0) {
    range[threadIdx.x >> 5] = *lo;
    range[32 + (threadIdx.x >> 5)] = *hi;
  }
  __syncthreads();
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) {
    *lo = (Key)range[w] < *lo ? (Key)range[w] : *lo;
    *hi = (Key)range[32 + w] > *hi ? (Key)range[32 + w] : *hi;
  }
}

// 1b'. Chunk 0 of a row of 32/64-bit integers: its keys in place, then the digit over their range
// (RowDigit::over), then their count.
template <class T>
__device__ __forceinline__ RowDigit<T> count_first_chunk(typename KeyTraits<T>::Key* keys, int end, bool largest,
                                                         bool nan_first, unsigned* hist, unsigned long long* range) {
  typedef typename KeyTraits<T>::Key Key;
  constexpr int E = onchip::KEYS_PER_VEC<Key>;
  Key lo = static_cast<Key>(~Key(0)), hi = Key(0);
  for (int v = threadIdx.x; v < end; v += blockDim.x) {
    const onchip::Held<Key> h = to_keys<T>(keys, v, largest, nan_first);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      lo = h.k[e] < lo ? h.k[e] : lo;
      hi = h.k[e] > hi ? h.k[e] : hi;
    }
  }
  block_min_max(&lo, &hi, range);
  const RowDigit<T> digit = RowDigit<T>::over(lo, hi);
  for (int v = threadIdx.x; v < end; v += blockDim.x) {  // this thread's own keys: no barrier needed
    const onchip::Held<Key> h = onchip::held_keys(keys, v * E, end * E);
#pragma unroll
    for (int e = 0; e < E; ++e) count_key(hist, digit.of(h.k[e]), true, false);
  }
  return digit;
}

// 1b. Chunk by chunk, once its copies have landed (each thread's wait, then a barrier: the block
// sees every thread's copies), the chunk's first digits are counted (HeldRow: from the bits, or
// from keys made in place); the later chunks' copies are still in flight meanwhile. Returns the
// row's digit: when RANGED (block_row's 32/64-bit integers) from chunk 0's range (`range`: 64
// shared words), else the prefix digit (a cluster's blocks share one digit). `hist` is zeroed
// before the call (the first barrier here publishes it). Every thread calls it.
template <class T, bool RANGED>
__device__ __forceinline__ RowDigit<T> count_chunks(typename KeyTraits<T>::Key* keys, Chunks c, bool largest,
                                                    bool nan_first, unsigned* hist, unsigned long long* range) {
  typedef typename KeyTraits<T>::Key Key;
  constexpr int E = onchip::KEYS_PER_VEC<Key>;
  RowDigit<T> digit = RowDigit<T>::prefix();
  const auto raw = RawDigit<T>::of_row(largest, nan_first);
  if (c.count == 0) __syncthreads();  // no chunk (a row shorter than a vector): publish the zeros
  for (int g = 0; g < c.count; ++g) {
    wait_copies(c.count - 1 - g);
    __syncthreads();
    const int end = min(c.vecs, (g + 1) * c.per_chunk);
    if constexpr (RANGED) {
      if (g == 0) {  // the same in the whole block
        digit = count_first_chunk<T>(keys, end, largest, nan_first, hist, range);
        continue;
      }
    }
    for (int v = g * c.per_chunk + (int)threadIdx.x; v < end; v += blockDim.x) {
      if constexpr (HeldRow<T>::BITS) {  // the bits stay: their digit without their keys
        const Vec16 bits = reinterpret_cast<const Vec16*>(keys)[v];
        // Bin 2048 + offset: its address from bin 2048's by a byte offset (one multiply-add).
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const int at = raw.offset(vec_element<Key>(bits, e), (int)sizeof(unsigned));
          count_key(reinterpret_cast<unsigned*>(reinterpret_cast<unsigned char*>(hist + 2048) + at), 0u, true, false);
        }
      } else {
        const onchip::Held<Key> h = to_keys<T>(keys, v, largest, nan_first);
#pragma unroll
        for (int e = 0; e < E; ++e) count_key(hist, digit.of(h.k[e]), true, false);
      }
    }
  }
  return digit;
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

// 1b-1'. The count of the row entered (enter_row): the copied chunks and this thread's tail
// element (count_chunks), or the streaming loader (load_plain); `held->digit` becomes the row's.
// Ends with a barrier: the held words and the counts are complete. Every thread calls it, after
// enter_row and before any other barrier.
template <class T, bool RANGED>
__device__ __forceinline__ void count_row(const Entry<typename KeyTraits<T>::Key>& entry, bool copied, const T* base,
                                          long long col_stride, int len, HeldRow<T>* held,
                                          typename KeyTraits<T>::Key* keys, unsigned* hist, unsigned long long* range) {
  typedef typename KeyTraits<T>::Key Key;
  if (copied) {
    held->digit = count_chunks<T, RANGED>(keys, entry.chunks, held->largest, held->nan_first, hist, range);
    if (entry.tail < len) {
      const Key word = held->stored(entry.tail_bits);
      keys[entry.tail] = word;
      count_key(hist, held->of(word), true, false);
    }
  } else {
    __syncthreads();  // the zeros are visible
    load_plain(base, col_stride, len, *held, keys, hist);
  }
  __syncthreads();
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
