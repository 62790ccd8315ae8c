// The steps of a radix select over a row held on chip as keys (kernels/resident.cu: one block
// per row; kernels/cluster.cu: a cluster of blocks per row, each holding a slice): load,
// histogram, choose the bin, refine, collect (count and place), order. Each is a __device__
// function called by every thread of the block; docs/kernels.md describes the families.
//
// Digits: CUTOPK_RESIDENT_DIGIT_BITS (12) at a time from the top, counted in 32-bit shared
// counters, a plain shared atomic per key (count_key, radix_digit.cuh). Shared memory at the
// start of a block's dynamic shared memory: the histogram, which the K winners' keys and 32-bit
// indices overlay once it is dead (front_bytes), then the keys.
#pragma once

#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"
#include "row_loads.cuh"
#include "radix_digit.cuh"

// The steps are in a namespace of their own inside cutopk (the families' kernels call onchip::...).
namespace cutopk {
namespace onchip {

constexpr int DIGIT_BITS = CUTOPK_RESIDENT_DIGIT_BITS;
constexpr int BINS = 1 << DIGIT_BITS;
constexpr int BINS_PER_THREAD = BINS / CUTOPK_RESIDENT_THREADS;  // choose_bin's share of the bins
static_assert(BINS % CUTOPK_RESIDENT_THREADS == 0, "every thread scans the same number of bins");
constexpr unsigned FULL = 0xffffffffu;

// A key's first digit's width: the top DIGIT_BITS bits, or the whole key where it is narrower
// (8-bit keys: one digit).
template <class Key>
constexpr int FIRST_BITS = KEY_BITS<Key> < DIGIT_BITS ? KEY_BITS<Key> : DIGIT_BITS;

// Where the K-th key lies: the keys whose bits at and above `shift` equal `prefix` (with shift ==
// the key's width, every key). `needed` winners are still to be taken from those `count` keys.
struct Bucket {
  unsigned long long prefix;
  int needed;
  int count;
  int shift;
};

// A part of a dynamic shared memory layout rounded up to 16 bytes (the front below, block_row's,
// cluster's and streaming's layouts): the part after it starts aligned for 16-byte loads and
// copies and for 8-byte keys.
__device__ __forceinline__ int round16(int bytes) {
  return (bytes + 15) & ~15;
}

// Bytes at the start of dynamic shared memory: the histogram, later the K winners' keys and
// indices (the histogram is dead by then; keys first, each part a multiple of 16 bytes, so that
// 8-byte keys, the indices and the row's keys after them are aligned).
template <class Key>
__device__ __forceinline__ int winner_keys_bytes(int kp) {
  return round16(kp * (int)sizeof(Key));
}
template <class Key>
__device__ __forceinline__ int front_bytes(int kp) {
  const int winners = winner_keys_bytes<Key>(kp) + round16(kp * 4);
  return winners > BINS * 4 ? winners : BINS * 4;
}

// Where the parts of a block's dynamic shared memory lie when it holds a row (resident) or a
// slice (split) as keys, for K rounded up to kp: the front, then the keys. Built by its
// constructor: a function returning it gave different (if equivalent) PTX under nvcc 13.0.
template <class Key>
struct Front {
  unsigned* hist;
  Key* win_key;  // over the histogram, once it is dead
  unsigned* win_idx;
  Key* keys;
  __device__ __forceinline__ Front(unsigned char* smem, int kp)
      : hist(reinterpret_cast<unsigned*>(smem)),
        win_key(reinterpret_cast<Key*>(smem)),
        win_idx(reinterpret_cast<unsigned*>(smem + winner_keys_bytes<Key>(kp))),
        keys(reinterpret_cast<Key*>(smem + front_bytes<Key>(kp))) {}
};

// The key's bits at and above `shift` (0 when shift is the key's width: the whole row's prefix).
template <class Key>
__device__ __forceinline__ unsigned long long high_bits(Key key, int shift) {
  return shift >= KEY_BITS<Key> ? 0ull : (unsigned long long)key >> shift;
}

// Adds one to bin `digit` where `counted` (count_key: a plain shared atomic; the lanes of a warp
// that hit one bin, a row of one value, are added together by ATOMS.POPC.INC on sm_90). Every
// lane of the warp calls it (a warp match under CUTOPK_COUNT_WITH_MATCH).
__device__ __forceinline__ void count_digit(unsigned* hist, unsigned digit, bool counted) {
  count_key(hist, digit, counted, true);
}

// count_digit for keys of which few may count (the refine passes): the same plain atomic. Under
// CUTOPK_COUNT_WITH_MATCH, warp-aggregated only when more than SPARSE_LANES lanes count (at most
// that many lanes: a plain atomic each, cheaper than the match, which a refine pass would
// otherwise issue for nearly every element, a bucket of 1/16 of the row having a member in 87% of
// the warp's 32 keys although its members are few and spread). Every lane of the warp
// calls it.
__device__ __forceinline__ void count_sparse_digit(unsigned* hist, unsigned digit, bool counted) {
#if CUTOPK_COUNT_WITH_MATCH
  constexpr int SPARSE_LANES = 8;
  const unsigned counting = __ballot_sync(FULL, counted);
  if (counting == 0) return;
  if (__popc(counting) > SPARSE_LANES) {
    count_matched(hist, digit, counted);
    return;
  }
#endif
  count_key(hist, digit, counted, false);
}

// Keys per 16-byte shared-memory load (the scans of the held keys: one LDS.128 and KEYS_PER_VEC
// independent keys per thread and step, not one key and its dependent chain).
template <class Key>
constexpr int KEYS_PER_VEC = 16 / (int)sizeof(Key);

// Held keys i .. i + E - 1 (i a multiple of E, the keys starting 16-byte aligned: front_bytes is a
// multiple of 16), those at or past `end` as 0: one 16-byte load where all E are before `end`,
// else one load each (the last vector of a row whose bytes are not a multiple of 16 would read
// past the end of shared memory).
template <class Key>
struct Held {
  Key k[KEYS_PER_VEC<Key>];
};
template <class Key>
__device__ __forceinline__ Held<Key> held_keys(const Key* keys, int i, int end) {
  constexpr int E = KEYS_PER_VEC<Key>;
  Held<Key> h;
  if (i + E <= end) {
    const Vec16 v = *reinterpret_cast<const Vec16*>(keys + i);
#pragma unroll
    for (int e = 0; e < E; ++e) h.k[e] = vec_element<Key>(v, e);
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) h.k[e] = i + e < end ? keys[i + e] : Key(0);
  }
  return h;
}

// Stores keys i .. i + count - 1: one 16-byte store where the run is whole and 16-byte aligned in
// shared memory (a contiguous row that starts 16-byte aligned), else one store each (four 4-byte
// stores of a lane 16 bytes from the next are 4-way bank conflicts).
template <class Key>
__device__ __forceinline__ void store_held(Key* keys, int i, int count, const Held<Key>& h) {
  constexpr int E = KEYS_PER_VEC<Key>;
  if (count == E && i % E == 0) {
    Vec16 v;
    constexpr int PER_WORD = sizeof(Key) >= 4 ? 1 : 4 / (int)sizeof(Key);  // keys per 32-bit word
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      if constexpr (sizeof(Key) == 8) {
        v.w[w] = (unsigned)((unsigned long long)h.k[w / 2] >> (32 * (w % 2)));
      } else {
        unsigned word = 0;
#pragma unroll
        for (int j = 0; j < PER_WORD; ++j) word |= (unsigned)h.k[w * PER_WORD + j] << (KEY_BITS<Key> * j);
        v.w[w] = word;
      }
    }
    *reinterpret_cast<Vec16*>(keys + i) = v;
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e)
      if (e < count) keys[i + e] = h.k[e];
  }
}

__device__ __forceinline__ void zero_bins(unsigned* hist, int bins) {
  for (int d = threadIdx.x; d < bins; d += blockDim.x) hist[d] = 0;
}

// 1. The row's `len` elements as keys into `keys`, the digit of `bits` bits at `shift` counted.
template <class T>
__device__ __forceinline__ void load_row(const T* base, long long col_stride, int len, bool largest, bool nan_first,
                                         int shift, int bits, typename KeyTraits<T>::Key* keys, unsigned* hist) {
  typedef typename KeyTraits<T>::Key Key;
  const unsigned mask = (1u << bits) - 1;
  stream_row(row_bits(base), col_stride, 0, len, threadIdx.x, blockDim.x, [&](const auto& run) {
    constexpr int E = CUTOPK_RUN_SIZE(run);
    Held<Key> h;
#pragma unroll
    for (int e = 0; e < E; ++e) h.k[e] = KeyTraits<T>::from_bits(run.bits[e], largest, nan_first);
    store_held(keys, (int)run.first, run.count, h);
#pragma unroll
    for (int e = 0; e < E; ++e) count_digit(hist, (unsigned)(h.k[e] >> shift) & mask, e < run.count);
  });
}

// 2. The bin of `bits` bits holding the `needed`-th key from the top, recorded in *s (prefix
// extended by the bin, needed less the keys above it, count the bin's, shift lowered by `bits`).
// Thread t sums bins [top - 8, top), top = 2^bits - 8t; a block scan in thread order then gives
// each thread the keys in the bins above its own, so exactly one thread's bins cross `needed`.
// Every thread calls it; it ends with a barrier, after which *s is the new bucket.
__device__ __forceinline__ void choose_bin(const unsigned* hist, int bits, Bucket* s, int* scan) {
  const Bucket b = *s;  // read by all before block_scan's first barrier; written after its last
  const int top = (1 << bits) - BINS_PER_THREAD * (int)threadIdx.x;
  int total = 0;
#pragma unroll
  for (int j = 1; j <= BINS_PER_THREAD; ++j) total += top - j >= 0 ? (int)hist[top - j] : 0;  // past bin 0: none
  int all;
  int above = block_scan(total, scan, &all);
  if (above < b.needed && above + total >= b.needed) {
    for (int j = 1; j <= BINS_PER_THREAD && top - j >= 0; ++j) {
      const int count = (int)hist[top - j];
      if (above + count >= b.needed) {
        s->prefix = (b.prefix << bits) | (unsigned long long)(top - j);
        s->needed = b.needed - above;
        s->count = count;
        s->shift = b.shift - bits;
        break;
      }
      above += count;
    }
  }
  __syncthreads();
}

// 3. Counts the next digit (`bits` bits below b.shift) of the keys in bucket b, from shared memory:
// a 16-byte vector of keys per thread and step (lanes on consecutive vectors: no bank conflict),
// the bucket's members counted by count_sparse_digit. The trip count is the same in every thread
// of a warp (the match under CUTOPK_COUNT_WITH_MATCH); keys past `len` in the last vector are not counted.
template <class Key>
__device__ __forceinline__ void refine(const Key* keys, int len, Bucket b, int bits, unsigned* hist) {
  constexpr int E = KEYS_PER_VEC<Key>;
  const int shift = b.shift - bits;
  const unsigned mask = (1u << bits) - 1;
  zero_bins(hist, 1 << bits);
  __syncthreads();
  for (int v0 = 0; v0 < len; v0 += E * (int)blockDim.x) {
    const int i = v0 + E * (int)threadIdx.x;
    const Held<Key> h = held_keys(keys, i, len);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const Key key = h.k[e];
      count_sparse_digit(hist, (unsigned)(key >> shift) & mask, i + e < len && high_bits(key, b.shift) == b.prefix);
    }
  }
  __syncthreads();
}

// 2-3. From the top digit's counts to the bucket of the K-th key: choose, refine, choose... until
// the bucket holds just the winners still needed or no bit is left. `merged(bits)` gives the counts
// to choose from once `hist` holds this block's: `hist` itself for one block, the sum over the
// blocks of a cluster otherwise (every block then chooses the same bin).
template <class Key, class Merge>
__device__ __forceinline__ void find_bucket(const Key* keys, int len, int first_bits, unsigned* hist, Bucket* s,
                                            int* scan, Merge&& merged) {
  choose_bin(merged(first_bits), first_bits, s, scan);
  while (true) {
    const Bucket b = *s;  // the same in every thread
    if (b.count == b.needed || b.shift == 0) return;
    const int bits = b.shift < DIGIT_BITS ? b.shift : DIGIT_BITS;
    refine(keys, len, b, bits, hist);  // its first barrier: every thread has read *s
    choose_bin(merged(bits), bits, s, scan);
  }
}

// 4. The winners of bucket b: the keys above it and the bucket's members of rank < b.needed by
// index. In two steps, so that a cluster of blocks can add up its blocks' counts in between:
// count_winners counts both kinds per warp over a contiguous segment of the row (ballots) and
// gives each warp the counts before it in the block (one block scan of the two counts packed in
// 64 bits: above in the high half); place_winners then puts them in index order, from the bases
// the caller adds (the counts of earlier blocks of a cluster; 0 for one block).
struct Counts {
  unsigned long long before;  // (above, members) in the block's warps before this one
  unsigned long long mine;    // (above, members) in this warp's segment
  unsigned long long block;   // (above, members) in the whole block
};

__device__ __forceinline__ int warp_segment(int len, int* lo) {
  const int warps = blockDim.x >> 5;
  const int segment = ((len + warps - 1) / warps + 31) & ~31;
  *lo = min(len, (int)(threadIdx.x >> 5) * segment);
  return min(len, *lo + segment);
}

// The counts need no order: each lane adds up its own 16-byte vectors of the warp's segment (whose
// start is a multiple of 32 keys, so 16-byte aligned), then the warp sums its lanes (shuffles):
// no vote per key.
template <class Key>
__device__ __forceinline__ Counts count_winners(const Key* keys, int len, Bucket b, unsigned long long* scan) {
  constexpr int E = KEYS_PER_VEC<Key>;
  const int lane = threadIdx.x & 31;
  int lo;
  const int hi = warp_segment(len, &lo);
  unsigned up = 0, member = 0;
  for (int i = lo + E * lane; i < hi; i += 32 * E) {
    const Held<Key> h = held_keys(keys, i, hi);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const unsigned long long high = high_bits(h.k[e], b.shift);
      up += i + e < hi && high > b.prefix;
      member += i + e < hi && high == b.prefix;
    }
  }
  unsigned long long mine = ((unsigned long long)up << 32) + member;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) mine += __shfl_xor_sync(FULL, mine, offset);
  Counts c;
  c.mine = mine;
  c.before = __shfl_sync(FULL, block_scan(lane == 0 ? mine : 0ull, scan, &c.block), 0);
  return c;
}

// Keys [0, len) of this block are the row's elements first + i. Keys above the bucket go to
// up_base + their rank among them, members of rank r (counting from member_base) < b.needed to
// above + r, in (win_key, win_idx): this block's shared memory, or another's of its cluster. A warp
// stops once its keys above are placed and its members' ranks have passed b.needed.
template <class Key>
__device__ __forceinline__ void place_winners(const Key* keys, int len, long long first, Bucket b, Counts c,
                                              int up_base, int member_base, int above, Key* win_key,
                                              unsigned* win_idx) {
  constexpr int E = KEYS_PER_VEC<Key>;
  const int lane = threadIdx.x & 31;
  int lo;
  const int hi = warp_segment(len, &lo);
  int up_rank = up_base + (int)(c.before >> 32);
  const int up_end = up_rank + (int)(c.mine >> 32);
  int rank = member_base + (int)(c.before & 0xffffffffu);
  // A step: lane l holds keys lo + s + E l .. + E - 1 (16 bytes), so index order is lane order,
  // then e; the lanes' counts (above in the high 16 bits, members in the low: at most 32 E each)
  // go through one warp scan for the ranks of the lanes before.
  for (int s = 0; lo + s < hi && (up_rank < up_end || rank < b.needed); s += 32 * E) {
    const int i = lo + s + E * lane;
    const Held<Key> h = held_keys(keys, i, hi);
    int count = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const unsigned long long high = high_bits(h.k[e], b.shift);
      count += i + e < hi && high > b.prefix ? 1 << 16 : i + e < hi && high == b.prefix ? 1 : 0;
    }
    int total;
    const int before = warp_scan(count, &total);
    int up_slot = up_rank + (before >> 16), r = rank + (before & 0xffff);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const unsigned long long high = high_bits(h.k[e], b.shift);
      if (i + e < hi && high > b.prefix) {
        win_key[up_slot] = h.k[e];
        win_idx[up_slot++] = (unsigned)(first + i + e);
      } else if (i + e < hi && high == b.prefix) {
        if (r < b.needed) {
          win_key[above + r] = h.k[e];
          win_idx[above + r] = (unsigned)(first + i + e);
        }
        ++r;
      }
    }
    up_rank += total >> 16;
    rank += total & 0xffff;
  }
}

// 4'. The winners of bucket b when all its members win (b.count == b.needed: the usual end of
// find_bucket; not after ties, where members are ranked by index): every key at or above the
// bucket, placed in any order, since the ordering step sorts them by a total order. One pass of
// 16-byte vectors: each warp step takes its slots with one atomicAdd on `*taken` (0 on entry,
// visible to all after a barrier), the lanes' places from the E ballots; no count_winners pass.
// `indices`: key i's index in the row (block_row's candidates), or nullptr for i itself.
template <class Key>
__device__ __forceinline__ void gather_winners(const Key* keys, int len, Bucket b, int* taken, Key* win_key,
                                               unsigned* win_idx, const unsigned* indices = nullptr) {
  constexpr int E = KEYS_PER_VEC<Key>;
  const int lane = threadIdx.x & 31;
  const unsigned lower = (1u << lane) - 1;  // the lanes before this one
  for (int v0 = 0; v0 < len; v0 += E * (int)blockDim.x) {
    const int i = v0 + E * (int)threadIdx.x;
    const Held<Key> h = held_keys(keys, i, len);
    unsigned wins[E];
    int step = 0;  // this warp's winners in this step
#pragma unroll
    for (int e = 0; e < E; ++e) {
      wins[e] = __ballot_sync(FULL, i + e < len && high_bits(h.k[e], b.shift) >= b.prefix);
      step += __popc(wins[e]);
    }
    if (step == 0) continue;  // the same in the whole warp
    int slot = 0;
    if (lane == 0) slot = atomicAdd(taken, step);
    slot = __shfl_sync(FULL, slot, 0);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if ((wins[e] >> lane) & 1) {
        const int at = slot + __popc(wins[e] & lower);
        win_key[at] = h.k[e];
        win_idx[at] = indices != nullptr ? indices[i + e] : (unsigned)(i + e);
      }
      slot += __popc(wins[e]);
    }
  }
}

}  // namespace onchip
}  // namespace cutopk
