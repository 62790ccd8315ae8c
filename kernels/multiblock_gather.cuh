// multiblock's gathering (kernels/multiblock.cu): the steps that find the last bucket's winners,
// by the finishing block after the last digit (from the bucket buffer, the candidates or the
// input), by every block of a row in TIES, and the last two digits of a row one digit behind.
#pragma once

#include "constants.cuh"
#include "key_traits.cuh"
#include "radix_digit.cuh"
#include "multiblock_state.cuh"

namespace cutopk {
namespace multiblock {

// `count` pairs of a buffer, as the finishing block reads them (through L2).
template <class Key>
struct Pairs {
  const Key* key;
  const Pos* idx;
  long long count;
};

// A row's winners' buffer being filled: the next slot is `*cursor` (an atomic: any order).
template <class Key>
struct Winners {
  Key* key;
  Pos* idx;
  unsigned long long* cursor;
};

// A bucket of keys: those whose bits above `cut` are `prefix`.
struct BucketBits {
  int cut;
  unsigned long long prefix;
};

// The bucket holding the `needed`-th key counting down from the largest digit, over `bins` shared
// counts (a power of two, at most MAX_BINS): the largest digit d with counts[d] + ... +
// counts[bins - 1] >= needed, and in `*above` the keys in the digits above it. The whole block
// calls it; thread t sums a run of bins from the top, a block scan gives each run the keys above
// it, and the one thread whose run holds the crossing publishes it.
__device__ __forceinline__ int block_find_bucket(const unsigned int* counts, int bins, long long needed,
                                                 long long* above) {
  __shared__ long long sums[33];
  __shared__ long long s_above;
  __shared__ int s_digit;
  const int per = (bins + blockDim.x - 1) / blockDim.x;
  const int hi = max(0, bins - (int)threadIdx.x * per), lo = max(0, hi - per);
  long long local = 0;
  for (int d = lo; d < hi; ++d) local += counts[d];
  if (threadIdx.x == 0) s_digit = -1;
  long long total;
  long long running = block_scan(local, sums, &total);  // keys in the runs above this one; ends with a barrier
  for (int d = hi - 1; d >= lo; --d) {
    if (running + counts[d] >= needed) {
      if (running < needed) {  // the crossing: exactly one thread sees it
        s_digit = d;
        s_above = running;
      }
      break;
    }
    running += counts[d];
  }
  __syncthreads();
  const int digit = s_digit;
  *above = digit < 0 ? total - counts[0] : s_above;  // no crossing (cannot happen): the lowest digit
  __syncthreads();                                   // s_digit and s_above are read before the next call rewrites them
  return digit < 0 ? 0 : digit;
}

// The `needed`-th smallest index among the entries of a (key, index) buffer whose key is `kth`
// (the ties at the K-th key, in any order), by a radix select on the indices (8 bits a step, from
// the bit length of n), the finishing block alone. Read through L2: the buffer may have been written
// by other blocks of this launch.
template <class Key>
__device__ __forceinline__ unsigned long long nth_tie_index(const Key* keys, const Pos* idx, long long count, Key kth,
                                                            long long needed, long long n, unsigned int* counts) {
  __shared__ unsigned long long s_prefix;
  __shared__ long long s_needed;
  int bits = 0;
  while (bits < 64 && (n >> bits) != 0) ++bits;
  const int top = (bits + 7) / 8 * 8;
  if (threadIdx.x == 0) {
    s_prefix = 0;
    s_needed = needed;
  }
  for (int shift = top - 8; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += blockDim.x) counts[d] = 0;
    __syncthreads();
    const unsigned long long prefix = s_prefix;
    for (long long j = threadIdx.x; j < count; j += blockDim.x) {
      if (__ldcg(keys + j) != kth) continue;
      const unsigned long long i = (unsigned long long)__ldcg(idx + j);
      if (shift + 8 < 64 && (i >> (shift + 8)) != prefix) continue;
      atomicAdd(&counts[255 - ((i >> shift) & 255u)], 1u);  // reversed: the largest bin holds the smallest digit
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      long long above;
      const int bin = warp_find_bucket(counts, s_needed, &above);
      __syncwarp();  // every lane has read s_needed
      if (threadIdx.x == 0) {
        s_needed -= above;
        s_prefix = (prefix << 8) | (unsigned long long)(255 - bin);
      }
    }
    __syncthreads();
  }
  return s_prefix;
}

// The finishing block of the last digit: the bucket's winners added after the ones above it (the
// keys above `kth` in the bucket, and of the keys equal to it the `needed` lowest indices) from a
// buffer of (key, index) pairs in any order, `bucket` telling the bucket's keys from others; `ties`
// keys equal to `kth` in it, `n` a bound on the indices.
template <class Key>
__device__ __forceinline__ void gather_from_buffer(const Pairs<Key>& from, BucketBits bucket, Key kth, long long needed,
                                                   long long ties, long long n, const Winners<Key>& to,
                                                   unsigned int* counts) {
  // All ties win, or the ones up to the needed-th smallest index.
  const unsigned long long last =
      ties == needed ? ~0ull : nth_tie_index<Key>(from.key, from.idx, from.count, kth, needed, n, counts);
  for (long long j = threadIdx.x; j < from.count; j += blockDim.x) {
    const Key key = __ldcg(from.key + j);
    if (high(key, bucket.cut) != bucket.prefix || key < kth) continue;
    const long long i = __ldcg(from.idx + j);
    if (key == kth && (unsigned long long)i > last) continue;
    const unsigned long long at = atomicAdd(to.cursor, 1ull);  // a shared cursor: any order
    to.key[at] = key;
    to.idx[at] = (Pos)i;
  }
  __syncthreads();
}

// The same from the input when no buffer holds the bucket: the row read in index order, ties
// ranked by a block scan, until every winner of the bucket (`above` keys above `kth`, `needed` ties)
// is found.
template <class T>
__device__ __forceinline__ void gather_from_input(const Row<T>& r, BucketBits bucket, typename KeyTraits<T>::Key kth,
                                                  long long above, long long needed,
                                                  const Winners<typename KeyTraits<T>::Key>& to) {
  typedef typename KeyTraits<T>::Key Key;
  const int RUN = 16;  // consecutive elements per thread and step: ranks in index order from one block scan
  __shared__ long long sums[33];
  __shared__ long long s_ties;
  __shared__ long long s_above;
  if (threadIdx.x == 0) s_ties = s_above = 0;
  __syncthreads();
  for (long long begin = 0; begin < r.length; begin += (long long)blockDim.x * RUN) {
    const long long ties_before = s_ties;
    if (ties_before >= needed && s_above >= above) break;  // the same in the whole block
    const long long first = begin + (long long)threadIdx.x * RUN, stop = min(r.length, first + RUN);
    long long ties = 0, found = 0;
    for (long long i = first; i < stop; ++i) ties += r.key(r.bits[i * r.stride]) == kth;
    long long tie_total, found_total;
    long long rank = ties_before + block_scan(ties, sums, &tie_total);
    for (long long i = first; i < stop; ++i) {
      const Key key = r.key(r.bits[i * r.stride]);
      if (high(key, bucket.cut) != bucket.prefix || key < kth) continue;
      if (key == kth) {
        if (rank++ >= needed) continue;
      } else {
        ++found;
      }
      const unsigned long long at = atomicAdd(to.cursor, 1ull);
      to.key[at] = key;
      to.idx[at] = (Pos)i;
    }
    block_scan(found, sums, &found_total);  // its barriers follow every read of s_ties and s_above
    if (threadIdx.x == 0) {
      s_ties = ties_before + tie_total;
      s_above += found_total;
    }
    __syncthreads();
  }
}

// Pass 2 of a row in TIES (its K-th key, pass 1's threshold, in `prefix`; `needed` of its ties
// win): this block's share of the candidates (every key above the threshold wins), then, when
// fewer than `needed` ties lie in the slices before its own and its slice holds some, its slice
// read in index order (RUN consecutive elements a thread, ranked by block scans) until the last
// winning tie. The row's tie_counts: its counts per slice, from pass 1.
template <class T>
__device__ __forceinline__ void gather_threshold_ties(const Row<T>& input, const State& s, State* st, const Args<T>& a,
                                                      long long row) {
  typedef typename KeyTraits<T>::Key Key;
  const int RUN = 8;
  __shared__ long long sums[33];
  const Key* cand_key = a.cand.key + row * a.cand.cap;
  const Pos* cand_idx = a.cand.idx + row * a.cand.cap;
  const unsigned int* tie_counts = a.tie_counts + row * gridDim.x;
  Key* win_key = a.win.key + row * a.k;
  Pos* win_idx = a.win.idx + row * a.k;
  const long long c0 = (long long)blockIdx.x * a.cand_slice, c1 = min((long long)s.cand_count, c0 + a.cand_slice);
  for (long long j = c0 + threadIdx.x; j < c1; j += blockDim.x) {
    const unsigned long long at = atomicAdd(&st->winners, 1ull);  // any order: the finishing block sorts
    win_key[at] = cand_key[j];
    win_idx[at] = cand_idx[j];
  }
  long long earlier = 0;  // ties in the slices before this one (a few thousand counts at most)
  for (long long j = threadIdx.x; j < blockIdx.x; j += blockDim.x) earlier += (long long)tie_counts[j];
  long long ranked;
  block_scan(earlier, sums, &ranked);
  if (ranked >= s.needed || tie_counts[blockIdx.x] == 0) return;  // the same for the whole block
  const Key kth = static_cast<Key>(s.prefix);
  const long long begin = (long long)blockIdx.x * a.slice, end = min(input.length, begin + a.slice);
  // `ranked` is the same in the whole block: every thread runs the same steps and scans.
  for (long long first = begin; first < end && ranked < s.needed; first += (long long)blockDim.x * RUN) {
    const long long mine = first + (long long)threadIdx.x * RUN;
    unsigned tie = 0;  // bit e: element mine + e is a tie
    int ties = 0;
#pragma unroll
    for (int e = 0; e < RUN; ++e) {
      const bool t = mine + e < end && input.key(input.bits[(mine + e) * input.stride]) == kth;
      tie |= (unsigned)t << e;
      ties += t;
    }
    long long step;
    long long rank = ranked + block_scan((long long)ties, sums, &step);
    for (int e = 0; e < RUN; ++e) {
      if (!((tie >> e) & 1u)) continue;
      if (rank++ >= s.needed) break;
      const unsigned long long at = atomicAdd(&st->winners, 1ull);
      win_key[at] = kth;
      win_idx[at] = (Pos)(mine + e);
    }
    ranked += step;
  }
}

// The finishing block of a row one digit behind (BEHIND), in the last launch: `*f` holds the bucket
// of its next-to-last digit (prefix above f->cut, the last digit's width; f->needed winners in it)
// inside the bucket the launch counted (`cut`, `prefix`: `above` keys of it above f's bucket). The
// last digit is counted over the bucket buffer (`staged`: every key of the counted bucket, the
// launch's blocks staged them) or, when it overflowed, over the input by this block alone (slow,
// and only for rows whose sampled threshold failed); then the winners are gathered as after a
// last digit, and *f holds the K-th key.
template <class T>
__device__ __forceinline__ void finish_behind(const Row<T>& input, bool staged,
                                              const Pairs<typename KeyTraits<T>::Key>& staged_bucket,
                                              BucketBits counted, long long above, State* f,
                                              const Winners<typename KeyTraits<T>::Key>& to, unsigned int* counts) {
  typedef typename KeyTraits<T>::Key Key;
  const int width = f->cut, bins = 1 << width;
  const unsigned long long bucket = f->prefix;
  for (int d = threadIdx.x; d < bins; d += blockDim.x) counts[d] = 0;
  __syncthreads();
  const long long count = staged ? staged_bucket.count : input.length;
  for (long long j = threadIdx.x; j < count; j += blockDim.x) {
    const Key key = staged ? __ldcg(staged_bucket.key + j) : input.key(input.bits[j * input.stride]);
    if (high(key, width) == bucket) atomicAdd(&counts[key & (Key)(bins - 1)], 1u);
  }
  __syncthreads();
  long long above_last;
  const int digit = block_find_bucket(counts, bins, f->needed, &above_last);
  const Key kth = static_cast<Key>((bucket << width) | (unsigned long long)digit);
  const long long ties = counts[digit];
  f->needed -= above_last;
  f->bucket = ties;
  f->prefix = kth;
  f->cut = 0;
  f->width = 0;
  __syncthreads();  // every thread has read counts[digit]: the gathering reuses the shared memory
  if (staged)
    gather_from_buffer<Key>(staged_bucket, counted, kth, f->needed, ties, input.length, to, counts);
  else
    gather_from_input<T>(input, counted, kth, above + above_last, f->needed, to);
}

// The finishing block of the last digit: the K-th key is `f->prefix`; the bucket's winners come
// from the bucket's buffer when it holds them (`staged`), else from the candidates, else from
// the input.
template <class T>
__device__ __forceinline__ void gather_last_digit(const Row<T>& input, const State& s, State* f, bool staged,
                                                  const Buffer<typename KeyTraits<T>::Key>& bucket,
                                                  const Buffer<typename KeyTraits<T>::Key>& cand, long long above,
                                                  long long n, const Winners<typename KeyTraits<T>::Key>& to,
                                                  unsigned int* counts) {
  typedef typename KeyTraits<T>::Key Key;
  const Key kth = static_cast<Key>(f->prefix);
  const BucketBits counted{s.cut, s.prefix};
  if (staged) {
    f->gathered = FROM_BUCKET;
    const Pairs<Key> from{bucket.key, bucket.idx, (long long)f->bucket_count};
    gather_from_buffer<Key>(from, counted, kth, f->needed, f->bucket, n, to, counts);
  } else if (f->source == ON_CANDIDATES) {
    f->gathered = FROM_CANDIDATES;
    const Pairs<Key> from{cand.key, cand.idx, (long long)f->cand_count};
    gather_from_buffer<Key>(from, counted, kth, f->needed, f->bucket, n, to, counts);
  } else {
    f->gathered = FROM_INPUT;
    gather_from_input<T>(input, counted, kth, above, f->needed, to);
  }
}

}  // namespace multiblock
}  // namespace cutopk
