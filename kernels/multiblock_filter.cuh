// multiblock's counting of a slice (kernels/multiblock.cu): pass 1's streaming filter
// (filter_slice, kept out of line: tools/check_sass.py finds it by that) and, for every other pass,
// count_and_stage, which counts the digit of a block's slice and stages the keys each buffer asks
// for. Every step here is run by every block of a row.
#pragma once

#include "constants.cuh"
#include "key_traits.cuh"
#include "row_loads.cuh"
#include "radix_digit.cuh"
#include "multiblock_state.cuh"

namespace cutopk {
namespace multiblock {

// Adds `key`'s digit (the bits [low, low + width) as `mask` keeps them) to hist when `counted`.
// `aggregate`: see count_key (radix_digit.cuh; the top digit, where many keys share their top bits).
template <class Key>
__device__ __forceinline__ void count_digit_at(unsigned int* hist, Key key, bool counted, int low, unsigned mask,
                                               bool aggregate) {
  count_key(hist, static_cast<unsigned>(key >> low) & mask, counted, aggregate);
}

// A buffer being appended to: its row's pairs and the count of pairs handed out (`*counter`).
template <class Key>
struct Sink {
  unsigned long long* counter;
  Key* key;
  Pos* idx;
  long long cap;
};

// What the out-of-line filter takes by value besides its pointers: scalars only (a pointer inside
// a struct passed by value loses its address space: a 64-bit atomic on it became a generic one,
// with a compare-and-swap loop for the shared window). The keys' mode (KeyTraits<T>::from_bits's):
struct KeyMode {
  bool largest;
  bool nan_first;
};

// The bits [low, low + width) of a key, as count_digit_at takes them (`mask`: width bits).
struct DigitBits {
  int low;
  unsigned mask;
};

// Appends the elements of this lane's run picked in `picks` (bit e: element e) to a buffer of
// (key, index) pairs, at positions one atomic per warp hands out on `counter` (any order: every
// reader goes by the stored indices). Positions from `cap` on are not written; the counter counts
// them all, so a count past `cap` tells the finishing block that the buffer overflowed; `*full`
// (the warp's, the same in every lane) is set then, and the warp appends no more: an overflowed
// buffer is never read, and a row whose every key reaches the threshold would otherwise make
// every warp wait on one counter for the whole pass. Every lane of the warp calls it.
template <class T, class Run>
__device__ __forceinline__ void append(unsigned picks, const typename KeyTraits<T>::Key* keys, const Run& run,
                                       const Row<T>& r, const Sink<typename KeyTraits<T>::Key>& to, bool* full) {
  if (*full) return;  // the same in the whole warp
  int total;
  const int before = warp_scan(__popc(picks), &total);
  if (total == 0) return;  // the same in the whole warp
  unsigned long long base = 0;
  if ((threadIdx.x & 31) == 0) base = atomicAdd(to.counter, (unsigned long long)total);
  base = __shfl_sync(0xffffffffu, base, 0);
  *full = base + total > (unsigned long long)to.cap;
  long long at = (long long)base + before;
#pragma unroll
  for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e)
    if ((picks >> e) & 1u) {
      if (at < to.cap) {
        to.key[at] = keys[e];
        to.idx[at] = (Pos)r.index(run.first + e);
      }
      ++at;
    }
}

// Pass 1 of a row with a sampled threshold: the streaming filter. Nearly every
// key of a long row falls below the threshold, so the loop over the slice only transforms, compares
// and counts the threshold's ties, with the next tile's 16-byte loads in flight (row_loads.cuh);
// no histogram, no shared atomic, no warp match per element (tools/check_sass.py keeps ATOMS and
// MATCH out of this function: it is __noinline__ so that its code is a range of its own in SASS).
// The few keys above the threshold are compacted per warp into a stage in shared memory (their
// offsets in the slice: a warp scan, plain stores) and flushed by flush_stage, which appends them
// to the candidate buffer with one global atomic per warp and counts their top digit: the digit
// histogram of pass 1 is built over the candidates alone, which hold every winner when the
// threshold holds (the finishing block checks that; else the row starts over, BEHIND).
constexpr int STAGE_WARPS = CUTOPK_MULTIBLOCK_THREADS / 32;
// Offsets a warp stages before it flushes: at least one round of the warp's runs (32 lanes x up to
// 8 keys, for 16-bit keys; two rounds of 32-bit keys). 8 KB a block for every key width: the keys
// are re-read at the flush (from L1) rather than staged, which would take 3 x that for 64-bit
// keys, and more static shared memory would push K = 4096's finishing sort off sm_75's 64 KB.
constexpr int STAGE_SIZE = CUTOPK_MULTIBLOCK_STAGE;
static_assert(STAGE_SIZE >= 32 * 8, "a stage holds a round of a warp's runs of 16-bit keys");

// Appends the `fill` candidates a warp has staged (offsets from `begin` in `stage`) to the row's
// candidate buffer at positions one atomic per warp hands out on `counter` (any order: every
// reader goes by the stored indices), and counts their digit [low, low + width) in `counts`
// (count_digit_at: a shared atomic each). Positions from `cap` on are not written; the
// counter counts them all, so a count past `cap` tells the finishing block that the buffer
// overflowed; it returns true then (the warp's), and the warp stages no more (the row starts
// over). Every lane of the warp calls it with the same `fill`. Scalars (and structs of scalars) only,
// no pointer to a local: anything passed in memory would give the kernel a stack frame.
template <class T>
__device__ __noinline__ bool flush_stage(const typename KeyTraits<T>::Key* bits, long long stride, KeyMode mode,
                                         long long begin, const unsigned* stage, int fill, unsigned long long* counter,
                                         long long cap, typename KeyTraits<T>::Key* dst_key, Pos* dst_idx,
                                         unsigned int* counts, DigitBits digit) {
  typedef typename KeyTraits<T>::Key Key;
  __syncwarp();  // the lanes' staged offsets are visible to the whole warp
  const int lane = threadIdx.x & 31;
  unsigned long long base = 0;
  if (lane == 0) base = atomicAdd(counter, (unsigned long long)fill);
  base = __shfl_sync(0xffffffffu, base, 0);
  for (int j0 = 0; j0 < fill; j0 += 32) {  // whole rounds (CUTOPK_COUNT_WITH_MATCH: every lane reaches the match)
    const int j = j0 + lane;
    const bool valid = j < fill;
    const long long i = begin + (valid ? stage[j] : 0u);
    const Key key = valid ? KeyTraits<T>::from_bits(bits[i * stride], mode.largest, mode.nan_first) : Key(0);
    if (valid && base + j < (unsigned long long)cap) {
      dst_key[base + j] = key;
      dst_idx[base + j] = (Pos)i;
    }
    count_digit_at<Key>(counts, key, valid, digit.low, digit.mask, true);
  }
  __syncwarp();  // every lane has read the stage before it is refilled
  return base + fill > (unsigned long long)cap;
}

// Pass 1's loop over this block's slice [begin, end) of the input (see above): stages and flushes
// the keys above `threshold`, and returns this thread's count of keys equal to it. The whole
// block calls it (stream_row's runs are warp-synchronous).
template <class T>
__device__ __noinline__ unsigned filter_slice(const typename KeyTraits<T>::Key* bits, long long stride, KeyMode mode,
                                              long long begin, long long end, typename KeyTraits<T>::Key threshold,
                                              unsigned long long* counter, long long cap,
                                              typename KeyTraits<T>::Key* dst_key, Pos* dst_idx, unsigned int* counts,
                                              DigitBits digit) {
  typedef typename KeyTraits<T>::Key Key;
  __shared__ unsigned s_stage[STAGE_WARPS][STAGE_SIZE];
  unsigned* stage = s_stage[threadIdx.x >> 5];
  int fill = 0;       // offsets staged by this warp (the same in every lane)
  bool full = false;  // the candidate buffer overflowed (the same in every lane)
  unsigned ties = 0;  // this thread's keys equal to the threshold
  stream_row(bits, stride, begin, end, threadIdx.x, blockDim.x, [&](const auto& run) {
    unsigned picks = 0;  // bit e: element e of the run is above the threshold
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      const Key key = KeyTraits<T>::from_bits(run.bits[e], mode.largest, mode.nan_first);
      const bool valid = e < run.count;
      picks |= (unsigned)(valid && key > threshold) << e;
      ties += valid && key == threshold;
    }
    if (full || !__any_sync(0xffffffffu, picks != 0)) return;  // the usual case; the same in the whole warp
    int total;
    int at = fill + warp_scan(__popc(picks), &total);
    if (fill + total > STAGE_SIZE) {  // the same in the whole warp
      full = flush_stage<T>(bits, stride, mode, begin, stage, fill, counter, cap, dst_key, dst_idx, counts, digit);
      at -= fill;
      fill = 0;
      if (full) return;
    }
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e)
      if ((picks >> e) & 1u) stage[at++] = (unsigned)(run.first + e - begin);  // slices are < 2^32 long
    fill += total;
  });
  if (fill && !full)
    flush_stage<T>(bits, stride, mode, begin, stage, fill, counter, cap, dst_key, dst_idx, counts, digit);
  return ties;
}

// Pass 1's counting and staging without the streaming filter (one digit, no threshold, or a
// later pass): every key of the block's slice in the race counts its digit; the keys reaching the
// threshold, the bucket's keys and the winners above it go to their buffers as asked.
template <class T>
__device__ __forceinline__ void count_and_stage(const Row<T>& r, const Pass<T>& p, const State& s, State* st,
                                                const Args<T>& a, long long row, unsigned int* counts) {
  typedef typename KeyTraits<T>::Key Key;
  const Buffer<Key> c = a.cand.at(row), b = a.bucket.at(row), w = a.win.at(row);
  const Sink<Key> cand_to{&st->cand_count, c.key, c.idx, c.cap}, bucket_to{&st->bucket_count, b.key, b.idx, b.cap},
      win_to{&st->winners, w.key, w.idx, w.cap};
  bool cand_full = false, bucket_full = false, winners_full = false;  // this warp's buffers overflowed
  stream_row(r.bits, r.stride, p.begin, p.end, threadIdx.x, blockDim.x, [&](const auto& run) {
    Key keys[CUTOPK_RUN_SIZE(run)];
    unsigned reach = 0, bucket = 0, win = 0;  // bit e: element e of the run reaches the threshold, ...
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      keys[e] = r.key(run.bits[e]);
      const bool valid = e < run.count;
      const unsigned long long hi = high(keys[e], s.cut);
      const bool in_race = valid && hi == s.prefix;
      if (p.select) count_digit_at<Key>(counts, keys[e], in_race, p.low, p.mask, p.top);
      reach |= (unsigned)(valid && keys[e] >= p.threshold) << e;  // one digit (else filter_slice stages)
      bucket |= (unsigned)in_race << e;
      // Collecting a bucket taken whole: the bucket's keys and those above, or (DIRECT) the bucket's alone.
      const bool won =
          p.select ? hi > s.prefix
                   : hi == s.prefix ||
                         (hi > s.prefix && !(KEY_BITS<Key> > CUTOPK_MULTIBLOCK_DIGIT_BITS && s.staging == DIRECT));
      win |= (unsigned)(valid && won) << e;
    }
    if (p.stage_cand) append<T>(reach, keys, run, r, cand_to, &cand_full);
    if (p.stage_bucket) append<T>(bucket, keys, run, r, bucket_to, &bucket_full);
    if (p.write_winners) append<T>(win, keys, run, r, win_to, &winners_full);
  });
}

}  // namespace multiblock
}  // namespace cutopk
