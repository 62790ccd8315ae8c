// Streaming a row's elements with several loads in flight per thread: the one loader of every
// pass that reads a long row (radix_topk, warp_radix_topk, the multiblock kernels).
//
// A warp that loads one element and transforms it at once waits a full memory latency per
// element: with one block (or one warp) per row that is a small fraction of the bandwidth. Here
// each thread issues several independent loads of raw words (the element's bits, an
// unsigned integer of the key's width) and only then hands them to the caller, who applies
// KeyTraits<T>::from_bits (or uses them as they are, for a buffer of keys).
//
// Two paths, chosen per call (the same for every thread of the group):
//   * contiguous (stride 1): 16-byte vector loads (LDG.E.128), CUTOPK_STREAM_LOADS of them per
//     thread per tile; a 16-byte vector holds E = 16 / sizeof(Key) elements. The elements before
//     the first 16-byte boundary (the head) and after the last whole vector (the tail), fewer
//     than E each, are read one by one by the group's thread 0. The row itself must be aligned
//     to its element size, as every array is.
//   * strided: runs of E consecutive elements, E scalar loads in flight per thread.
// The caller gets runs: `Run<Key, E>`, up to E consecutive
// elements of the row, `count` of them valid, the first at index `first`. Invariants the callers
// rely on:
//   - every thread of the group makes the same number of calls (runs with count 0 pad), so the
//     callback may use warp votes, and block barriers when the group is the block;
//   - in each call, the runs of threads 0, 1, 2, ... of the group are in index order and do not
//     interleave, and every run of a call precedes every run of the next call: a caller that
//     ranks its picks per call (ballot, warp or block scan over the run counts) writes them in
//     index order, as the lower-index tie rule needs.
#pragma once

#include "constants.cuh"
#include "key_traits.cuh"

namespace cutopk {

// 16 bytes, the widest load a thread can issue; loaded as one instruction when aligned.
struct __align__(16) Vec16 {
  unsigned int w[4];
};

// Up to E consecutive elements' raw bits: bits[e] is element first + e, valid for e < count.
template <class Key, int E>
struct Run {
  static const int SIZE = E;
  Key bits[E];
  long long first;
  int count;
};

// The number of elements a run holds (a constant expression, also for a `const auto&` run).
#define CUTOPK_RUN_SIZE(run) ((int)(sizeof((run).bits) / sizeof((run).bits[0])))

// Element e of a 16-byte vector of Keys (little-endian, as the GPU and the simulator's hosts are).
template <class Key>
__device__ __forceinline__ Key vec_element(const Vec16& v, int e) {
  if (sizeof(Key) == 8) return static_cast<Key>((static_cast<unsigned long long>(v.w[2 * e + 1]) << 32) | v.w[2 * e]);
  const int per_word = sizeof(Key) >= 4 ? 1 : 4 / (int)sizeof(Key);  // Keys per 32-bit word
  return static_cast<Key>(v.w[e / per_word] >> (KEY_BITS<Key> * (e % per_word)));
}

// One of a thread's 16-byte vectors, chosen by a runtime index without indexing an array (which
// would put the array in local memory).
__device__ __forceinline__ Vec16 pick_vec(const Vec16 (&v)[CUTOPK_STREAM_LOADS], int j) {
  Vec16 r = v[0];
#pragma unroll
  for (int u = 1; u < CUTOPK_STREAM_LOADS; ++u)
    if (j == u) r = v[u];
  return r;
}

// Elements [begin, end) of `row` (element i at row[i * stride]), shared out to `group` threads
// (this one is `rank`); calls f(run) as described at the top of this file. `row` is not
// __restrict__: radix_topk streams its candidate buffer after writing it in the same kernel, where
// a read-only (non-coherent) load would be wrong. The callback is
// inlined at one call site (a rolled loop): its code is generated once, not once per load.
// Steps: -1 the head, 0 .. tiles - 1 the tiles, `tiles` the tail (head and tail are empty on the
// strided path, whose runs are E consecutive elements with E scalar loads in flight).
template <class Key, class F>
__device__ __forceinline__ void stream_row(const Key* row, long long stride, long long begin, long long end, int rank,
                                           int group, F&& f) {
  const int E = 16 / (int)sizeof(Key);
  const long long len = end - begin;
  if (len <= 0) return;
  const bool contiguous = stride == 1;  // the same in the whole group
  const Key* start = row + begin;
  // Contiguous: the elements before the first 16-byte boundary (fewer than E; 0 when aligned).
  const long long head =
      contiguous ? min(len, (long long)(((16 - (reinterpret_cast<unsigned long long>(start) & 15)) & 15) / sizeof(Key)))
                 : 0;
  const Vec16* vecs = reinterpret_cast<const Vec16*>(start + head);
  // Units of E elements after the head: whole vectors (contiguous) or runs of E (strided).
  const long long units = contiguous ? (len - head) / E : (len + E - 1) / E;
  const long long tail_first = contiguous ? head + units * E : len;  // the tail: [tail_first, len)
  const long long per_tile = (long long)CUTOPK_STREAM_LOADS * group;
  const int tiles = (int)((units + per_tile - 1) / per_tile);  // < 2^31: units < 2^38 / 128
  for (int t = -1; t <= tiles; ++t) {                          // an int counter: a 64-bit one made ptxas spill
    const bool edge = t < 0 || t == tiles;
    const long long tile = (long long)t * per_tile;
    Vec16 v[CUTOPK_STREAM_LOADS];
    if (contiguous && !edge) {
#pragma unroll
      for (int j = 0; j < CUTOPK_STREAM_LOADS; ++j) {  // every load of the tile first
        const long long at = tile + (long long)j * group + rank;
        if (at < units) v[j] = vecs[at];
      }
    }
#pragma unroll 1
    for (int j = 0; j < (edge ? 1 : CUTOPK_STREAM_LOADS); ++j) {
      Run<Key, 16 / sizeof(Key)> run;
      const long long at = tile + (long long)j * group + rank;
      if (edge) {  // read by thread 0 alone, one element at a time
        const long long from = t < 0 ? 0 : tail_first;
        run.first = begin + from;
        run.count = rank == 0 ? (int)(t < 0 ? head : len - tail_first) : 0;
#pragma unroll
        for (int e = 0; e < E; ++e) run.bits[e] = e < run.count ? start[from + e] : Key(0);
      } else if (contiguous) {
        const Vec16 cur = pick_vec(v, j);
        run.first = begin + head + at * E;
        run.count = at < units ? E : 0;
#pragma unroll
        for (int e = 0; e < E; ++e) run.bits[e] = vec_element<Key>(cur, e);
      } else {
        run.first = begin + at * E;
        run.count = at < units ? (int)min((long long)E, len - at * E) : 0;
#pragma unroll
        for (int e = 0; e < E; ++e) run.bits[e] = e < run.count ? row[(run.first + e) * stride] : Key(0);
      }
      f(run);
    }
  }
}

// The raw bits of a row of T, as the loader reads them (same width as T's key).
template <class T>
__device__ __forceinline__ const typename KeyTraits<T>::Key* row_bits(const T* row) {
  return reinterpret_cast<const typename KeyTraits<T>::Key*>(row);
}

}  // namespace cutopk
