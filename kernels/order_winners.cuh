// Ordering the K winners of a block without a power-of-two sort: the last step
// of a block that holds its `count` winners, (key, 32-bit index) pairs, in shared memory in any
// order. It writes output positions [0, k) of the row, the winners then padding, exactly as
// onchip::order_and_write (a bitonic sort of pow2(K) pairs, 16-29 barriers on 512 threads) does,
// bit for bit, in 7-8 barriers.
//
// - By index (sorted="index", sorted=False): a stable compaction, no sort. A bitmap of the row's
//   `len` positions (each winner sets its bit, atomicOr), each thread a contiguous run of words:
//   its popcounts, one block scan, the prefix of every word; a winner's place is its word's prefix
//   plus the bits below its own.
// - By value (sorted=True: larger key first, ties to the lower index): a counting scatter on a
//   digit of the winners' own keys: DIGIT_BITS (11) bits of the key less the least winner's key,
//   the span between the least and the greatest (a block min and max) cut in 2^11 even bins
//   (digit_range: a monotone digit, so the bins' order is the keys' order). The digit's histogram
//   (a shared atomicAdd, whose return is the winner's slot in its bin), one block scan of the bins
//   from the top gives each bin its range of output places, each winner goes to its bin's range;
//   then each range is
//   ordered by (key, index), a total order: a range of at most LANE_SORT (32) by its winners
//   themselves (each counts the pairs of its range before it: at most 32 shared reads), a longer
//   one by a warp, no barrier: a bitonic sort in registers up to REGISTER_SORT (128; 2 or 4 pairs
//   a lane, shuffles), in place in shared memory up to WARP_SORT (256). Winners of one key are one
//   range of index order (their span is 0): the compaction above. The fallback: a range of more
//   than WARP_SORT winners (more than 256 winners in one 2^-11 of their span, not all equal: e.g.
//   a few distinct values among K = 2048, or an outlier or NaN far above a cluster), or more than
//   ITEMS x blockDim winners, takes the block's bitonic sort of all the pow2(K) pairs
//   (block_sort.cuh) after the histogram: the old cost plus 7 barriers, in the pow2 front the
//   caller keeps for it.
// - One warp orders at most 32 winners alone (a bitonic sort of a pair a lane): no barrier but
//   the entry's.
// Values: with `rebuild`, from the winners' keys (KeyTraits::bits_of_key, key_traits.cuh); the
// input is re-read only for a key that cannot give the bits back (key_holds_bits false: a float's
// NaN keys, any payload, and the zero key of +0.0 and -0.0), so every value has the input's bits.
// Without `rebuild`, every value is re-read from the input at its index.
// Shared memory: the winners' arrays (kp pairs: the fallback sorts them in place) and
// scratch_bytes(len) bytes of scratch (a Head, then the histogram or the bitmap and its prefixes),
// which may overlay anything dead once the winners are placed (resident: the row's keys).
// Barriers (512 threads): by index 7 (the entry's, the bitmap's zeroing and setting, the block
// scan's 3, the prefixes'), by value 8 (the entry's, the min/max and zeroing, the count, the block
// scan's 3, the ranges', the scatter's); order_and_write's bitonic sort took 29 for K = 2048, 16
// for K = 512 (tests/gpu/test_order_winners.py counts them).
#pragma once

#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"
#include "radix_digit.cuh"

namespace cutopk {
namespace winners {

constexpr int DIGIT_BITS = CUTOPK_ORDER_DIGIT_BITS;
constexpr int BINS = 1 << DIGIT_BITS;
constexpr int LANE_SORT = 32;                      // a range up to this long: its winners rank themselves
constexpr int WARP_SORT = CUTOPK_ORDER_WARP_SORT;  // the longest range a warp sorts
constexpr int REGISTER_SORT = 128;                 // up to this, in registers (4 pairs a lane at most)
constexpr int ITEMS = 4;      // winners a thread holds: K <= ITEMS x blockDim (2048 on 512 threads)
constexpr int LONG_CAP = 64;  // ranges longer than LANE_SORT: at most ITEMS x 512 / 33 = 62

// A range of output places [start, start + length), one bin's.
struct Range {
  int start;
  int length;
};

// The start of the scratch.
struct Head {
  int scan[33];               // block_scan's
  int longs;                  // ranges in `ranges`
  int too_long;               // a range past WARP_SORT (or past LONG_CAP ranges): the fallback
  int pad;                    // (8-byte alignment of `lo`)
  unsigned long long lo[32];  // each warp's least key
  unsigned long long hi[32];  // and its greatest
  Range ranges[LONG_CAP];     // the ranges longer than LANE_SORT, for the warps
};
constexpr int HEAD_BYTES = (int)((sizeof(Head) + 15) & ~(size_t)15);
static_assert(HEAD_BYTES == 1168, "order_winners.py's HEAD_BYTES");

// Bytes of scratch the step takes for a row of `len` positions: the Head, then the digit's
// histogram (BINS 32-bit counts) or the bitmap and one prefix per 32-bit word, whichever is larger.
// The Python twin: cutopk/cuda/families/order_winners.py.
__device__ __forceinline__ int scratch_bytes(int len) {
  const int words = (len + 31) >> 5;
  const int tail = 8 * words > 4 * BINS ? 8 * words : 4 * BINS;
  return HEAD_BYTES + ((tail + 15) & ~15);
}

// The step's arguments (the winners, the output row and how to fill it).
template <class T, class Key>
struct Order {
  Key* win_key;            // the winners' keys, `count` of them, any order, in an array of kp
  unsigned* win_idx;       // their indices (< len), the same way
  unsigned char* scratch;  // scratch_bytes(len) bytes, 16-byte aligned, free on entry
  int count;               // winners (<= k, <= kp)
  int k;                   // output places of the row
  int kp;                  // the arrays' capacity, a power of two >= count (the fallback's sort)
  int len;                 // the indices' bound (the bitmap's bits)
  bool by_index;           // index order, else value order
  bool largest;            // the keys' mode (to give the values back)
  bool rebuild;            // values from the keys where they hold the bits
  const T* base;           // the row's first element in the input, and its stride
  long long col_stride;
  T* out_vals;  // outputs: k places a row
  void* out_idx;
  int index_bytes;
  long long row;
};

// The pairs a thread holds: winners threadIdx.x + r blockDim.x, r < ITEMS.
template <class Key>
struct Items {
  Key key[ITEMS];
  unsigned idx[ITEMS];
  int slot[ITEMS];  // by value: the place in its bin's range
};

template <bool BY_INDEX, class Key>
__device__ __forceinline__ bool first_of(Key ka, unsigned ia, Key kb, unsigned ib) {
  return BY_INDEX ? ia < ib : before(ka, ia, kb, ib);
}

// Output place j of the row: the index, and the value from the key where it holds the bits.
template <class T, class Key>
__device__ __forceinline__ void write_one(const Order<T, Key>& a, int j, Key key, unsigned idx) {
  const long long at = a.row * a.k + j;
  store_index(a.out_idx, at, (unsigned long long)idx, a.index_bytes);
  if (a.rebuild && KeyTraits<T>::key_holds_bits(key, a.largest))
    reinterpret_cast<Key*>(a.out_vals)[at] = KeyTraits<T>::bits_of_key(key, a.largest);
  else
    a.out_vals[at] = a.base[(long long)idx * a.col_stride];
}

// Output places [count, k) of the row: padding.
template <class T, class Key>
__device__ __forceinline__ void write_padding_after(const Order<T, Key>& a) {
  for (int j = a.count + threadIdx.x; j < a.k; j += blockDim.x)
    write_padding(a.out_vals, a.out_idx, a.index_bytes, a.row * a.k + j);
}

// A bitonic sort of the warp's 32 E pairs in registers, best first, pair lane E + e in (k[e],
// id[e]); the steps of a stride below E within the lane, the others by shuffles with lane ^
// (stride / E). The exchange rule is block_bitonic's. Every lane of the warp calls it.
template <bool BY_INDEX, int E, class Key>
__device__ __forceinline__ void warp_sort(Key (&k)[E], unsigned (&id)[E]) {
  const int lane = threadIdx.x & 31;
  for (int span = 2; span <= 32 * E; span <<= 1) {
    for (int half = span >> 1; half >= E; half >>= 1) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int i = lane * E + e;
        const Key ok = shfl_xor(k[e], half / E);
        const unsigned oi = shfl_xor(id[e], half / E);
        const bool lower = (i & half) == 0;
        const bool hi_first = lower ? first_of<BY_INDEX>(ok, oi, k[e], id[e]) : first_of<BY_INDEX>(k[e], id[e], ok, oi);
        if (hi_first == ((i & span) == 0)) {
          k[e] = ok;
          id[e] = oi;
        }
      }
    }
#pragma unroll
    for (int half = E / 2; half > 0; half >>= 1) {
      if (half >= span) continue;
#pragma unroll
      for (int lo = 0; lo < E; ++lo) {
        if (lo & half) continue;
        const int hi = lo | half;
        if (first_of<BY_INDEX>(k[hi], id[hi], k[lo], id[lo]) == (((lane * E + lo) & span) == 0)) {
          const Key tk = k[lo];
          const unsigned ti = id[lo];
          k[lo] = k[hi];
          id[lo] = id[hi];
          k[hi] = tk;
          id[hi] = ti;
        }
      }
    }
  }
}

// At most 32 winners: warp 0 sorts them, a pair a lane, and writes them.
template <class T, class Key>
__device__ __forceinline__ void order_few(const Order<T, Key>& a) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  Key k[1] = {lane < a.count ? a.win_key[lane] : Key(0)};
  unsigned id[1] = {lane < a.count ? a.win_idx[lane] : 0xffffffffu};  // after every winner
  if (a.by_index)
    warp_sort<true, 1>(k, id);
  else
    warp_sort<false, 1>(k, id);
  if (lane < a.count) write_one(a, lane, k[0], id[0]);
}

// The fallback: the pow2 bitonic sort of all the winners in place (padded with pairs that sort
// after them), then the writes. Every thread calls it.
template <class T, class Key>
__device__ __forceinline__ void sort_all(const Order<T, Key>& a, bool by_index) {
  sort_padded(a.win_key, a.win_idx, a.count, a.kp, by_index);
  for (int j = threadIdx.x; j < a.count; j += blockDim.x) write_one(a, j, a.win_key[j], a.win_idx[j]);
}

template <class T, class Key>
__device__ __forceinline__ Items<Key> hold(const Order<T, Key>& a) {
  Items<Key> it;
#pragma unroll
  for (int r = 0; r < ITEMS; ++r) {
    const int j = threadIdx.x + r * blockDim.x;
    it.key[r] = j < a.count ? a.win_key[j] : Key(0);
    it.idx[r] = j < a.count ? a.win_idx[j] : 0u;
    it.slot[r] = 0;
  }
  return it;
}

__device__ __forceinline__ bool held(int r, int count) {
  return (int)threadIdx.x + r * (int)blockDim.x < count;
}

// By index: the bitmap of the winners' positions, the prefix of each word, each winner's place.
// Every thread calls it; the scratch's tail is read by no one on entry.
template <class T, class Key>
__device__ __forceinline__ void order_by_index(const Order<T, Key>& a, const Items<Key>& it) {
  Head* head = reinterpret_cast<Head*>(a.scratch);
  const int words = (a.len + 31) >> 5;
  unsigned* bits = reinterpret_cast<unsigned*>(a.scratch + HEAD_BYTES);
  int* prefix = reinterpret_cast<int*>(bits + words);
  for (int w = threadIdx.x; w < words; w += blockDim.x) bits[w] = 0;
  __syncthreads();
#pragma unroll
  for (int r = 0; r < ITEMS; ++r)
    if (held(r, a.count)) atomicOr(&bits[it.idx[r] >> 5], 1u << (it.idx[r] & 31));
  __syncthreads();
  const int per = (words + blockDim.x - 1) / blockDim.x;  // this thread's words: [lo, hi)
  const int lo = min(words, (int)threadIdx.x * per), hi = min(words, lo + per);
  int mine = 0;
  for (int w = lo; w < hi; ++w) mine += __popc(bits[w]);
  int total;
  int before_me = block_scan(mine, head->scan, &total);
  for (int w = lo; w < hi; ++w) {
    prefix[w] = before_me;
    before_me += __popc(bits[w]);
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < ITEMS; ++r) {
    if (!held(r, a.count)) continue;
    const unsigned i = it.idx[r];
    write_one(a, prefix[i >> 5] + __popc(bits[i >> 5] & ((1u << (i & 31)) - 1)), it.key[r], i);
  }
}

// The digit: a winner's key less the least winner's key, shifted right so that the greatest fits
// DIGIT_BITS bits (monotone in the key, so a bin's winners all follow those of the bins above
// it; linear in the key, so bins split the winners' span evenly: an XOR's highest differing bit
// spends the digit on bits that a span across a power of two flips, e.g. a float32 exponent
// 127 -> 128, and the top 1024 of 32000 normal values then put 337 in one bin). shift -1: all
// equal (their order is then the index order).
struct Digit {
  unsigned long long base;
  int shift;
};

template <class Key>
__device__ __forceinline__ unsigned digit_of(Key key, Digit d) {
  return (unsigned)(((unsigned long long)key - d.base) >> d.shift);
}

// The Digit, from a block min and max of the winners' keys; zeroes the histogram and the Head's
// counts on the way. Ends with a barrier.
template <class T, class Key>
__device__ __forceinline__ Digit digit_range(const Order<T, Key>& a, const Items<Key>& it) {
  Head* head = reinterpret_cast<Head*>(a.scratch);
  unsigned long long lo = ~0ull, hi = 0;
#pragma unroll
  for (int r = 0; r < ITEMS; ++r) {
    if (!held(r, a.count)) continue;
    lo = min(lo, (unsigned long long)it.key[r]);
    hi = max(hi, (unsigned long long)it.key[r]);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, offset));
    hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, offset));
  }
  if ((threadIdx.x & 31) == 0) {
    head->lo[threadIdx.x >> 5] = lo;
    head->hi[threadIdx.x >> 5] = hi;
  }
  unsigned* bins = reinterpret_cast<unsigned*>(a.scratch + HEAD_BYTES);
  for (int b = threadIdx.x; b < BINS; b += blockDim.x) bins[b] = 0;
  if (threadIdx.x == 0) {
    head->longs = 0;
    head->too_long = 0;
  }
  __syncthreads();
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) {
    lo = min(lo, head->lo[w]);
    hi = max(hi, head->hi[w]);
  }
  if (hi == lo) return Digit{lo, -1};
  const int high = 63 - __clzll((long long)(hi - lo));
  return Digit{lo, high >= DIGIT_BITS - 1 ? high - (DIGIT_BITS - 1) : 0};
}

// The bins' ranges: thread t scans bins from the top down (a block scan in thread order), so
// that bin b's range starts after every winner of a higher bin; bins[b] becomes that start (its
// end is bins[b - 1], or count for bin 0). Ranges longer than LANE_SORT go to the Head's list,
// one longer than WARP_SORT (or past the list) sets too_long. Ends with a barrier.
// The long ranges' places in the Head's list come from the same block scan as the ranges' starts
// (the count of long ranges packed below the winners': at most 2048 winners, fewer than 64 long
// ranges), not from an atomic per range, which the compiler aggregated with a warp vote per bin.
__device__ __forceinline__ void bin_ranges(Head* head, unsigned* bins) {
  const int per = (BINS + blockDim.x - 1) / blockDim.x;
  const int top = BINS - 1 - (int)threadIdx.x * per;
  int mine = 0;
  for (int j = 0; j < per; ++j) {
    const int length = top - j >= 0 ? (int)bins[top - j] : 0;
    mine += (length << 16) + (length > LANE_SORT && length <= WARP_SORT ? 1 : 0);
  }
  int total;
  const int before = block_scan(mine, head->scan, &total);
  int start = before >> 16, at = before & 0xffff;
  if (threadIdx.x == 0) head->longs = total & 0xffff;
  for (int j = 0; j < per && top - j >= 0; ++j) {
    const int length = (int)bins[top - j];
    if (length > WARP_SORT) {
      head->too_long = 1;
    } else if (length > LANE_SORT) {
      if (at < LONG_CAP)
        head->ranges[at] = Range{start, length};
      else
        head->too_long = 1;
      ++at;
    }
    bins[top - j] = (unsigned)start;
    start += length;
  }
  __syncthreads();
}

// A range of LANE_SORT + 1 .. REGISTER_SORT: the calling warp sorts it in registers, E pairs a lane.
template <int E, class T, class Key>
__device__ __forceinline__ void sort_range(const Order<T, Key>& a, Range g) {
  const int lane = threadIdx.x & 31;
  Key k[E];
  unsigned id[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int i = lane * E + e;
    k[e] = i < g.length ? a.win_key[g.start + i] : Key(0);
    id[e] = i < g.length ? a.win_idx[g.start + i] : 0xffffffffu;  // after every winner
  }
  warp_sort<false, E>(k, id);
#pragma unroll
  for (int e = 0; e < E; ++e)
    if (lane * E + e < g.length) write_one(a, g.start + lane * E + e, k[e], id[e]);
}

// A range longer than REGISTER_SORT: the calling warp sorts it in place in shared memory (8 pairs
// a lane in registers took NVRTC 13.5 past 64 registers on sm_75/80), then writes it. A bitonic
// sort whose merges start with a flip (position lo of a span against lo ^ (span - 1)) and go on
// with half-cleaners, every comparator putting the better pair first: positions past the range
// act as pairs after every other and never move, so comparators reaching past it are skipped and
// the range needs no padding to a power of two.
template <class T, class Key>
__device__ __forceinline__ void sort_range_shared(const Order<T, Key>& a, Range g) {
  const int lane = threadIdx.x & 31;
  Key* keys = a.win_key + g.start;
  unsigned* idx = a.win_idx + g.start;
  const int size = pow2_at_least(g.length);
  for (int span = 2; span <= size; span <<= 1) {
    for (int half = span >> 1; half > 0; half >>= 1) {
      for (int p = lane; p < size / 2; p += 32) {
        const int lo = ((p & ~(half - 1)) << 1) | (p & (half - 1));
        const int hi = half == span >> 1 ? lo ^ (span - 1) : lo + half;
        if (hi >= g.length) continue;
        const Key klo = keys[lo], khi = keys[hi];
        const unsigned ilo = idx[lo], ihi = idx[hi];
        if (before(khi, ihi, klo, ilo)) {
          keys[lo] = khi;
          keys[hi] = klo;
          idx[lo] = ihi;
          idx[hi] = ilo;
        }
      }
      __syncwarp();
    }
  }
  for (int i = lane; i < g.length; i += 32) write_one(a, g.start + i, keys[i], idx[i]);
}

// By value, once the ranges are known and the winners scattered to them: a winner of a range of
// at most LANE_SORT counts the pairs before it there; the warps take the longer ranges.
template <class T, class Key>
__device__ __forceinline__ void order_ranges(const Order<T, Key>& a, const Items<Key>& it, const unsigned* bins,
                                             Digit digit) {
#pragma unroll
  for (int r = 0; r < ITEMS; ++r) {
    if (!held(r, a.count)) continue;
    const unsigned d = digit_of(it.key[r], digit);
    const int start = (int)bins[d], end = d == 0 ? a.count : (int)bins[d - 1];
    if (end - start > LANE_SORT) continue;
    int rank = 0;
    for (int q = start; q < end; ++q) rank += before(a.win_key[q], a.win_idx[q], it.key[r], it.idx[r]);
    write_one(a, start + rank, it.key[r], it.idx[r]);
  }
  const Head* head = reinterpret_cast<const Head*>(a.scratch);
  for (int g = threadIdx.x >> 5; g < head->longs; g += blockDim.x >> 5) {
    const Range range = head->ranges[g];
    if (range.length <= REGISTER_SORT / 2)
      sort_range<2>(a, range);
    else if (range.length <= REGISTER_SORT)
      sort_range<4>(a, range);
    else
      sort_range_shared(a, range);
  }
}

// By value: the digit's histogram (each winner's slot in its bin), the bins' ranges, the
// scatter, the ranges' order. Every thread calls it, after digit_shift.
template <class T, class Key>
__device__ __forceinline__ void order_by_value(const Order<T, Key>& a, Items<Key>& it, Digit digit) {
  Head* head = reinterpret_cast<Head*>(a.scratch);
  unsigned* bins = reinterpret_cast<unsigned*>(a.scratch + HEAD_BYTES);
#pragma unroll
  for (int r = 0; r < ITEMS; ++r)
    if (held(r, a.count)) it.slot[r] = (int)atomicAdd(&bins[digit_of(it.key[r], digit)], 1u);
  __syncthreads();
  bin_ranges(head, bins);
  if (head->too_long) {  // the same in every thread; the winners' arrays are as on entry
    sort_all(a, false);
    return;
  }
#pragma unroll
  for (int r = 0; r < ITEMS; ++r) {
    if (!held(r, a.count)) continue;
    const int at = (int)bins[digit_of(it.key[r], digit)] + it.slot[r];
    a.win_key[at] = it.key[r];
    a.win_idx[at] = it.idx[r];
  }
  __syncthreads();
  order_ranges(a, it, bins, digit);
}

// The step: output places [0, k) of the row, the winners in the order asked, then padding.
// Every thread of the block calls it once the winners are written (it starts with a barrier).
template <class T, class Key>
__device__ __forceinline__ void order_and_write(const Order<T, Key>& a) {
  __syncthreads();  // the winners are visible, and whatever the scratch overlays is dead
  write_padding_after(a);
  if (a.count <= LANE_SORT) {
    order_few(a);
    return;
  }
  if (a.count > ITEMS * (int)blockDim.x) {
    sort_all(a, a.by_index);
    return;
  }
  Items<Key> it = hold(a);
  const Digit digit = a.by_index ? Digit{0, -1} : digit_range(a, it);
  if (digit.shift < 0)
    order_by_index(a, it);
  else
    order_by_value(a, it, digit);
}

// The shared finish of the families that hold a row's winners in shared memory: what a block
// is asked to write (Request), the row the winners come from (Source), and the winners themselves
// (Placed). finish_winners orders them with order_and_write (scratch for the counting scatter or the
// bitmap); finish_winners_sorted, for a block with no such scratch or a row too long for the
// bitmap, with the pow2 bitonic sort of the kp pairs (sort_all). Both write output places [0, k)
// of the row, the winners in the order asked, then padding; every thread of the block calls them.
template <class T>
struct Request {
  int k;          // output places of a row
  bool by_index;  // index order, else value order
  bool largest;   // the keys' mode (to give the values back)
  bool rebuild;   // values from the keys where they hold the bits (else re-read from the input)
  T* out_vals;    // k places a row
  void* out_idx;
  int index_bytes;
};

template <class T>
struct Source {
  const T* base;  // the row's first element in the input
  long long col_stride;
  long long row;
};

template <class Key>
struct Placed {
  Key* key;       // `count` winners, any order, in arrays of kp
  unsigned* idx;  // their indices in the row
  int count;
  int kp;  // a power of two >= count
};

template <class T, class Key>
__device__ __forceinline__ Order<T, Key> order_of(const Placed<Key>& w, unsigned char* scratch, int len,
                                                  const Source<T>& src, const Request<T>& req) {
  return Order<T, Key>{w.key,        w.idx,        scratch,         w.count,     req.k,    w.kp,
                       len,          req.by_index, req.largest,     req.rebuild, src.base, src.col_stride,
                       req.out_vals, req.out_idx,  req.index_bytes, src.row};
}

// `scratch`: scratch_bytes(len) bytes (len: the bound of the winners' indices), which may overlay
// anything dead once the winners are placed.
template <class T, class Key>
__device__ __forceinline__ void finish_winners(const Placed<Key>& w, unsigned char* scratch, int len,
                                               const Source<T>& src, const Request<T>& req) {
  order_and_write(order_of(w, scratch, len, src, req));
}

// Every index below 0xffffffff (the padding pairs' index, which sorts after every winner's); the
// arrays' [count, kp) free. sort_all's first barrier makes the winners visible.
template <class T, class Key>
__device__ __forceinline__ void finish_winners_sorted(const Placed<Key>& w, const Source<T>& src,
                                                      const Request<T>& req) {
  const Order<T, Key> a = order_of(w, nullptr, 0, src, req);
  write_padding_after(a);
  sort_all(a, a.by_index);
}

}  // namespace winners
}  // namespace cutopk
