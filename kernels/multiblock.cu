// Multi-block radix select: top-K of few long rows (and of any rows with a large K), with many
// blocks per row so that a handful of rows still fills the GPU.
//
// A row is cut into `blocks_per_row` slices, one block each. The kernels are launched in a fixed
// sequence (no host synchronisation, so the whole call can be captured in a CUDA graph); each
// reads the per-row state the previous one left in global memory:
//   mb_init       state: prefix 0, shift at the top digit, needed = the row's winners (K, or its
//                 length when shorter; mb_sample does it when it runs)
//   mb_sample     (long inputs only) a threshold from an evenly spaced sample of the row: the
//                 sample's key of rank `rank`, chosen so that about (rank + 1) * n / CUTOPK_MULTIBLOCK_SAMPLES
//                 keys of the row reach it, and almost surely at least K
//   mb_histogram  the top digit: every block histograms its slice (32-bit shared counters,
//                 warp-aggregated on the top digit; the streaming loader of row_loads.cuh with
//                 16-byte loads on contiguous rows), adds them to the row's histogram (one global atomic per bin)
//                 and keeps them as its slice's histogram. Rows with a threshold also stage the
//                 keys that reach it, in index order: each warp reads a contiguous part of the
//                 slice into its own segment (sized by mb_sample: an even share, plus room
//                 where the sample saw keys reach the threshold)
//   mb_select     finds the bucket holding the K-th key and marks the row done when that bucket
//                 is taken whole (early stop) or every bit is resolved; a row whose staged keys
//                 number at least K, fit their segments and fit the candidate buffer restarts its
//                 selection on them (they hold the K winners), else a row whose bucket fits the
//                 buffer (`cap` per row) moves there; both read the buffer from now on. Then each
//                 slice's offset (`slice_offset`): among the staged keys, or among the bucket's
//                 keys (its bin)
//   mb_move       a restarted row squeezes its staged keys into its candidate buffer (so it
//                 reads its input once); a moving row copies its bucket's keys there with their
//                 indices, in index order, and its keys above the bucket become winners (a
//                 second read)
//   (mb_histogram, mb_select) x the other digits (x every digit with a threshold), over the
//                 candidates, or over the input for rows whose bucket did not fit; a done row
//                 returns at once
//   mb_collect    keys above the final bucket are winners; of the bucket's keys the first
//                 `needed` in index order are winners: the lower-index rule
//   mb_order      the K winners in the requested order, and their values (when pow2(K) pairs
//                 fit shared memory; else order_tiles and order_merge sort them and
//                 gather_values reads the values)
// Rows: regular, with lengths, or CSR segments (row_extent.cuh): every kernel that reads the
// input takes the row's start and length from row_extent, once per block, and never reads
// past the length; slices past it are empty. A row of length L < K has L winners (`k_row` in its
// state): mb_collect fills the last K - L winner slots with padding pairs (key 0, index n + j, so
// that they sort after every real pair in either order and stay distinct for order_merge), and
// mb_order or gather_values write an index at or past the row's length as padding (-1, 0).
// A per-slice pass is one launch for every row: each block reads the input or the candidate
// buffer, as its row's state says (`source`). Reads of the input: 1 for a
// row that restarts on its staged keys, 2 for a row that moves to the candidate buffer, else
// one per digit pass plus 1.
// Dtypes: all (KeyTraits). Threads per block: CUTOPK_MULTIBLOCK_THREADS. Scratch per row:
// CUTOPK_MULTIBLOCK_STATE_BYTES of state, 256
// counters, 256 32-bit counters and one offset per slice, K winners and `cap` candidates (key
// and 64-bit index each); with a threshold, `stage_total` staged keys and 32-bit offsets, and a
// staged count and a segment offset per warp part.
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"
#include "row_loads.cuh"
#include "radix_digit.cuh"
#include "entry.cuh"

namespace cutopk::multiblock {

// Where a row's elements are read from.
enum Source : int { ON_INPUT = 0, ON_CANDIDATES = 1 };
// What mb_move does for a row (set by pass 1's mb_select).
enum Move : int { MOVE_NONE = 0, MOVE_SQUEEZE_STAGED = 1, MOVE_COPY_BUCKET = 2 };

// A row's selection state in global memory, carried from launch to launch. Invariant: the K-th
// key of the row lies among the keys whose bits above `shift + 8` (at and above `shift` once
// the row is done) equal `prefix`; `needed` winners are still to take from those, the others
// (`k_row - needed`) are keys above them. The field offsets are read by tests/gpu/test_kernels.py
// and tests/irregular/test_extents_multiblock.py (MB_STATE): keep them.
struct State {
  unsigned long long prefix;     // the digits found so far
  long long needed;              // winners still to take from the bucket
  unsigned long long bucket;     // keys in the bucket
  int shift;                     // the digit the next pass counts (lowered only for rows that go on)
  int done;                      // the bucket is final: no more digit passes
  long long above;               // winners above the bucket placed so far (a cursor, < K)
  Source source;                 // where the row's elements are
  Move move;                     // mb_move's work for this row, after pass 1
  long long cand_count;          // candidates in the buffer (source == ON_CANDIDATES)
  unsigned long long threshold;  // mb_sample's key: pass 1 stages the keys that reach it
  int staging;                   // pass 1 stages keys (set by mb_sample, cleared by pass 1's select)
  int k_row;                     // the row's winners: min(K, its length); the rest is padding
};
static_assert(sizeof(State) == CUTOPK_MULTIBLOCK_STATE_BYTES, "MULTIBLOCK_STATE_BYTES in cutopk/_kernel_constants.py");
// State's layout, pinned without offsetof (NVRTC before 13.5 has none, not even as
// __builtin_offsetof): the fields lie in the order written here (aggregate initialization fills
// them in declaration order) and without padding (the size is the sum of the fields'), so field
// number `field` lies at the sum of the sizes before it.
constexpr bool state_in_order() {
  State s = {0, 1, 2, 3, 4, 5, Source(6), Move(7), 8, 9, 10, 11};
  return s.prefix == 0 && s.needed == 1 && s.bucket == 2 && s.shift == 3 && s.done == 4 && s.above == 5 &&
         s.source == 6 && s.move == 7 && s.cand_count == 8 && s.threshold == 9 && s.staging == 10 && s.k_row == 11;
}
constexpr int state_offset(int field) {
  const int size[] = {sizeof(State::prefix),    sizeof(State::needed),  sizeof(State::bucket),
                      sizeof(State::shift),     sizeof(State::done),    sizeof(State::above),
                      sizeof(State::source),    sizeof(State::move),    sizeof(State::cand_count),
                      sizeof(State::threshold), sizeof(State::staging), sizeof(State::k_row)};
  int at = 0;
  for (int i = 0; i < field; ++i) at += size[i];
  return at;
}
static_assert(state_in_order() && state_offset(12) == sizeof(State), "State: fields in order, no padding");
static_assert(state_offset(4) == 28 && state_offset(6) == 40 && state_offset(8) == 48 && state_offset(9) == 56 &&
                  state_offset(10) == 64 && state_offset(11) == 68,
              "MB_STATE in tests/support/multiblock_state.py");
// mb_sample: every thread issues all its sample loads at once (one memory round trip per row,
// not one per load), whole rounds of the block.
constexpr int SAMPLE_LOADS = CUTOPK_MULTIBLOCK_SAMPLES / CUTOPK_MULTIBLOCK_THREADS;
static_assert(CUTOPK_MULTIBLOCK_SAMPLES % CUTOPK_MULTIBLOCK_THREADS == 0 && SAMPLE_LOADS >= CUTOPK_STREAM_LOADS,
              "mb_sample reads whole rounds of its sample, several loads in flight");

constexpr int PART_ROUND = 512;  // a warp part of pass 1 is a whole number of these (elements)

// One row's elements, wherever they are: the strided input (key computed, index = position) or
// the candidate buffer (key and index stored, in index order). One code path for both, with the
// source a runtime flag (the same for the whole block): two inlined copies of a streaming pass in
// one kernel made ptxas spill.
template <class T>
struct Row {
  typedef typename KeyTraits<T>::Key Key;
  const Key* bits;  // what the loader reads: the input's bits, or the candidates' keys
  long long stride;
  bool largest, nan_first, from_cand;
  const long long* cand_idx;
  long long length;
  // The key of loaded bits.
  __device__ __forceinline__ Key key(Key b) const {
    return from_cand ? b : KeyTraits<T>::from_bits(b, largest, nan_first);
  }
  __device__ __forceinline__ long long index(long long i) const { return from_cand ? cand_idx[i] : i; }
};

// The row's extent (row_extent.cuh) is read here, once per block.
template <class T>
__device__ __forceinline__ Row<T> row_of(const T* in, long long n, long long row_stride, long long col_stride,
                                         const long long* extents, int rows_kind, int largest, int nan_first,
                                         const typename KeyTraits<T>::Key* cand_key, const long long* cand_idx,
                                         long long cap, const State& s, long long row) {
  Row<T> r;
  r.from_cand = s.source == ON_CANDIDATES;
  const RowExtent e = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  r.bits = r.from_cand ? cand_key + row * cap : row_bits(in + e.start);
  r.stride = r.from_cand ? 1 : col_stride;
  r.largest = largest;
  r.nan_first = nan_first;
  r.cand_idx = cand_idx + row * cap;
  r.length = r.from_cand ? s.cand_count : e.length;
  return r;
}

// The parameters every per-slice kernel takes, in this order.
#define MB_PARAMS                                                                                        \
  const T *__restrict__ in, long long n, long long row_stride, long long col_stride,                     \
      const long long *__restrict__ extents, int rows_kind, int largest, int nan_first, long long slice, \
      long long cap, const typename KeyTraits<T>::Key *__restrict__ cand_key, const long long *__restrict__ cand_idx
#define MB_ROW(s, row) \
  row_of<T>(in, n, row_stride, col_stride, extents, rows_kind, largest, nan_first, cand_key, cand_idx, cap, s, row)

// A row's state before pass 1: prefix 0, shift at the top digit, needed = k_row (its winners:
// min(K, its length)), on the input. A row with no element is done at once (all padding).
__device__ __forceinline__ State initial_state(int k_row, int key_bits) {
  State s;
  s.prefix = 0;
  s.needed = k_row;
  s.bucket = 0;
  s.shift = key_bits - 8;
  s.done = k_row == 0;
  s.above = 0;
  s.source = ON_INPUT;
  s.move = MOVE_NONE;
  s.cand_count = 0;
  s.threshold = 0;
  s.staging = 0;
  s.k_row = k_row;
  return s;
}

// A row's winners: K, or its length when shorter (the rest of its K outputs are padding).
__device__ __forceinline__ int row_winners(long long row, long long n, const long long* extents, int rows_kind, int k) {
  return (int)min((long long)k, row_extent(row, n, 0, 0, extents, rows_kind).length);
}

// The rows' initial states and zeroed histograms (mb_sample does both when it runs).
extern "C" __global__ void __launch_bounds__(CUTOPK_MULTIBLOCK_THREADS)
    mb_init(State* __restrict__ state, unsigned long long* __restrict__ hist, long long rows, long long n,
            const long long* __restrict__ extents, int rows_kind, int k, int key_bits) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t < rows) state[t] = initial_state(row_winners(t, n, extents, rows_kind, k), key_bits);
  if (t < rows * 256) hist[t] = 0;
}

// A warp's part of its block's slice in pass 1, [wbegin, wend): whole rounds of PART_ROUND
// keys, contiguous, so that its staged keys come in index order (mb_histogram and
// mb_sample must agree on it). `len`: the row's length; the slices past it are empty.
__device__ __forceinline__ void warp_part(long long len, long long slice, long long block, int warp, int warps,
                                          long long* wbegin, long long* wend) {
  const long long begin = block * slice, end = min(len, begin + slice);
  const long long round = PART_ROUND;
  const long long part = ((max(0LL, end - begin) + warps - 1) / warps + round - 1) / round * round;
  *wbegin = min(end, begin + warp * part);
  *wend = min(end, *wbegin + part);
}

// The staging entries of warp part g (block g / warps, warp g % warps) of a row: `room`, plus
// `per_hit` for each sample that reached the threshold (hits_before: their prefix counts) whose
// interval [j * len / S, (j + 1) * len / S) meets the part, i.e. samples j0 - 1 .. j1 - 1 with j0 and
// j1 the first samples at or after the part's ends. An empty part gets none.
__device__ __forceinline__ long long part_room(long long len, long long slice, int g, int warps, long long room,
                                               long long per_hit, const unsigned short* hits_before) {
  long long wbegin, wend;
  warp_part(len, slice, g / warps, g % warps, warps, &wbegin, &wend);
  if (wbegin >= wend) return 0;
  const long long j0 = min((long long)CUTOPK_MULTIBLOCK_SAMPLES, (wbegin * CUTOPK_MULTIBLOCK_SAMPLES + len - 1) / len);
  const long long j1 = min((long long)CUTOPK_MULTIBLOCK_SAMPLES, (wend * CUTOPK_MULTIBLOCK_SAMPLES + len - 1) / len);
  return room + per_hit * (hits_before[j1] - hits_before[max(0LL, j0 - 1)]);
}

// Where pass 1 stages the keys that reach a row's threshold: `stage_total` entries per row, the
// warp parts' segments starting at stage_start (blocks_per_row * warps + 1 offsets per row,
// set by mb_sample), a staged count per warp part.
#define MB_STAGE_PARAMS                                                                     \
  typename KeyTraits<T>::Key* __restrict__ stage_key, unsigned int* __restrict__ stage_off, \
      long long* __restrict__ stage_count, const long long* __restrict__ stage_start, long long stage_total

// Also writes every bin of the slice's histogram (zeros included: the bins of the pass that
// decides a row's final bucket must be this pass's), so mb_select needs no second read.
// Slices of `slice` elements over the input, of `cand_slice` over the candidates. The streaming
// kernels name 2 blocks per SM (up to 128 registers): with the block size alone ptxas capped
// them at 80 registers and spilled.
template <class T>
CUTOPK_KERNEL(CUTOPK_MULTIBLOCK_THREADS, 2)
mb_histogram(MB_PARAMS, long long cand_slice, const State* __restrict__ state, unsigned long long* __restrict__ hist,
             unsigned int* __restrict__ slice_hist, MB_STAGE_PARAMS) {
  const int KEY_BITS = 8 * sizeof(typename KeyTraits<T>::Key);
  const long long row = blockIdx.y;
  const State s = state[row];
  // The same for the whole block: it exits before any barrier.
  if (s.done) return;
  __shared__ unsigned int counts[256];
  for (int d = threadIdx.x; d < 256; d += blockDim.x) counts[d] = 0;
  __syncthreads();
  const Row<T> r = MB_ROW(s, row);
  if (r.from_cand) slice = cand_slice;
  typedef typename KeyTraits<T>::Key Key;
  const bool top = s.shift + 8 >= KEY_BITS;
  const bool staging = !r.from_cand && s.staging;  // the same for the whole block
  const Key threshold = static_cast<Key>(s.threshold);
  const long long slot = row * gridDim.x + blockIdx.x;
  const long long begin = (long long)blockIdx.x * slice;
  // Each warp streams a contiguous part of the slice (coalesced, several loads in flight per
  // lane), so that its staged keys are in index order with warp scans and no block barrier.
  const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long long wbegin, wend;
  warp_part(r.length, slice, blockIdx.x, warp, warps, &wbegin, &wend);
  const long long wslot = slot * warps + warp;  // the warp's staging segment
  long long wstart = 0, wroom = 0;
  if (staging) {
    const long long* starts = stage_start + row * (gridDim.x * warps + 1) + blockIdx.x * warps + warp;
    wstart = row * stage_total + starts[0];
    wroom = starts[1] - starts[0];
  }
  int staged = 0;  // keys of this warp's part that reach the threshold (may exceed wroom; < 2^31)
  stream_row(r.bits, r.stride, wbegin, wend, lane, 32, [&](const auto& run) {
    Key keys[CUTOPK_RUN_SIZE(run)];
    unsigned picks = 0;  // bit e: element e of the run reaches the threshold
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      keys[e] = r.key(run.bits[e]);
      const bool valid = e < run.count;
      count_digit<Key>(counts, keys[e], valid && in_race<Key>(keys[e], s.shift, s.prefix, top), s.shift, top);
      picks |= (unsigned)(valid && keys[e] >= threshold) << e;
    }
    if (staging) {
      int total;
      int at = staged + warp_scan(__popc(picks), &total);
#pragma unroll
      for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e)
        if ((picks >> e) & 1u) {
          if (at < wroom) {
            stage_key[wstart + at] = keys[e];
            stage_off[wstart + at] = (unsigned int)(run.first + e - begin);
          }
          ++at;
        }
      staged += total;
    }
  });
  // A segment that overflowed counts as more than any candidate buffer holds: no restart.
  if (staging && lane == 0) stage_count[wslot] = staged <= wroom ? staged : 1LL << 40;
  __syncthreads();
  unsigned int* mine = slice_hist + slot * 256;
  for (int d = threadIdx.x; d < 256; d += blockDim.x) {
    const unsigned int c = counts[d];
    mine[d] = c;
    if (c) atomicAdd(&hist[row * 256 + d], (unsigned long long)c);  // RED.ADD.64 in global memory
  }
}

// A row's threshold: the key of rank `rank` (0: the best) among CUTOPK_MULTIBLOCK_SAMPLES keys read at evenly
// spaced positions of the row's length, found by a radix select in shared memory (one block per
// row). Also sets the row's initial state and zeroes its histogram, in place of mb_init. A row
// with no element is done at once (no sample, no staging).
template <class T>
CUTOPK_KERNEL(CUTOPK_MULTIBLOCK_THREADS, 2)
mb_sample(const T* __restrict__ in, long long n, long long row_stride, long long col_stride,
          const long long* __restrict__ extents, int rows_kind, int largest, int nan_first, int rank, int k,
          State* __restrict__ state, unsigned long long* __restrict__ hist, long long slice, int blocks_per_row,
          int warps, long long room, long long per_hit, long long* __restrict__ stage_start, long long stage_total) {
  typedef typename KeyTraits<T>::Key Key;
  const int KEY_BITS = 8 * sizeof(Key);
  __shared__ Key keys[CUTOPK_MULTIBLOCK_SAMPLES];
  __shared__ unsigned int counts[256];
  __shared__ DigitState s_state;
  __shared__ unsigned short hits_before[CUTOPK_MULTIBLOCK_SAMPLES + 1];  // samples that reach the threshold
  __shared__ long long sums[33];
  const long long row = blockIdx.x;
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const long long len = extent.length;
  for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[row * 256 + d] = 0;
  if (len == 0) {  // the same for the whole block: it leaves before any barrier
    if (threadIdx.x == 0) state[row] = initial_state(0, KEY_BITS);
    return;
  }
  const Key* bits = row_bits(in + extent.start);
  // SAMPLE_LOADS loads in flight per thread, transformed after (launched with
  // CUTOPK_MULTIBLOCK_THREADS threads: one round; the guard keeps any block size exact).
  for (int j0 = threadIdx.x; j0 < CUTOPK_MULTIBLOCK_SAMPLES; j0 += SAMPLE_LOADS * blockDim.x) {
    Key raw[SAMPLE_LOADS];
#pragma unroll
    for (int u = 0; u < SAMPLE_LOADS; ++u) {
      const long long j = j0 + u * (long long)blockDim.x;
      raw[u] = j < CUTOPK_MULTIBLOCK_SAMPLES ? bits[j * len / CUTOPK_MULTIBLOCK_SAMPLES * col_stride] : Key(0);
    }
#pragma unroll
    for (int u = 0; u < SAMPLE_LOADS; ++u) {
      const long long j = j0 + u * (long long)blockDim.x;
      if (j < CUTOPK_MULTIBLOCK_SAMPLES) keys[j] = KeyTraits<T>::from_bits(raw[u], largest, nan_first);
    }
  }
  if (threadIdx.x == 0) {
    s_state.prefix = 0;
    s_state.needed = (long long)rank + 1;
    s_state.bucket = 0;
    s_state.shift = KEY_BITS - 8;
  }
  __syncthreads();
  for (int shift = KEY_BITS - 8; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += blockDim.x) counts[d] = 0;
    __syncthreads();
    const unsigned long long prefix = s_state.prefix;
    const bool top = shift + 8 >= KEY_BITS;
    // A whole number of rounds per thread (the sample is a multiple of the block size), so
    // every lane of a warp reaches the histogram's warp votes together.
    for (int j = threadIdx.x; j < CUTOPK_MULTIBLOCK_SAMPLES; j += blockDim.x)
      count_digit<Key>(counts, keys[j], in_race<Key>(keys[j], shift, prefix, top), shift, top);
    __syncthreads();
    if (threadIdx.x < 32) {
      DigitState st = s_state;
      digit_step(counts, &st);
      __syncwarp();  // every lane has read s_state
      if (threadIdx.x == 0) s_state = st;
    }
    __syncthreads();  // s_state is read by every thread, and counts cleared, after this
  }
  const Key prefix = static_cast<Key>(s_state.prefix);  // the threshold key (every bit resolved)
  if (threadIdx.x == 0) {
    State s = initial_state((int)min((long long)k, len), KEY_BITS);
    s.threshold = prefix;
    s.staging = 1;
    state[row] = s;
  }

  // The staging segments. Every warp part gets `room` entries (spread keys: twice its expected
  // share), plus `per_hit` (n / CUTOPK_MULTIBLOCK_SAMPLES, a sample interval's length) for each sample reaching
  // the threshold whose interval overlaps the part: keys crowded where the sample saw them (a
  // sorted row) still fit. The offsets are clipped to `stage_total`; a part left too small
  // overflows and its row takes the two-read route.
  const int per =
      CUTOPK_MULTIBLOCK_SAMPLES / blockDim.x;  // a whole number: CUTOPK_MULTIBLOCK_SAMPLES is a multiple of it
  long long local = 0, total;
  for (int j = threadIdx.x * per; j < (threadIdx.x + 1) * per; ++j) local += keys[j] >= prefix;
  long long before = block_scan(local, sums, &total);
  for (int j = threadIdx.x * per; j < (threadIdx.x + 1) * per; ++j) {
    hits_before[j] = (unsigned short)before;
    before += keys[j] >= prefix;
  }
  if (threadIdx.x == 0) hits_before[CUTOPK_MULTIBLOCK_SAMPLES] = (unsigned short)total;
  __syncthreads();
  const int parts = blocks_per_row * warps;
  const int per_thread = (parts + blockDim.x - 1) / blockDim.x;
  const int g0 = min(parts, (int)threadIdx.x * per_thread), g1 = min(parts, g0 + per_thread);
  local = 0;
  for (int g = g0; g < g1; ++g) local += part_room(len, slice, g, warps, room, per_hit, hits_before);
  long long start = block_scan(local, sums, &total);
  long long* starts = stage_start + row * (parts + 1);
  for (int g = g0; g < g1; ++g) {
    starts[g] = min(start, stage_total);
    start += part_room(len, slice, g, warps, room, per_hit, hits_before);
  }
  if (threadIdx.x == 0) starts[parts] = min(total, stage_total);
}

// After a histogram pass, one block per row: finds the bucket holding the K-th key (marking the
// row done when that bucket is taken whole or every bit is resolved) and clears the histogram.
// After pass 1, a row with a sampled threshold then decides whether to restart on its staged
// keys (at least K of them, every warp's within its segment, all within the candidate buffer).
// Finally `slice_offset` gets each slice's offset: among the staged keys for a row that restarts, else
// among the keys of the chosen bucket (each slice's bin of this pass's histogram), which
// mb_move and mb_collect use. The slices are shared out to the threads in contiguous runs and
// summed with a block scan: a serial loop over hundreds of slices would wait on each load.
extern "C" __global__ void __launch_bounds__(CUTOPK_MULTIBLOCK_THREADS)
    mb_select(State* __restrict__ state, unsigned long long* __restrict__ hist,
              const unsigned int* __restrict__ slice_hist, long long* __restrict__ slice_offset, int blocks_per_row,
              const long long* __restrict__ stage_count, int warps, long long cap, int key_bits) {
  __shared__ long long sums[33];
  const long long row = blockIdx.x;
  const int done = state[row].done;
  // Every thread reads `done` before thread 0 may set it below: a thread reading it afterwards
  // would leave the block while the others wait at the barrier (the simulator caught this).
  __syncthreads();
  if (done) return;
  unsigned long long* h = hist + row * 256;
  if (threadIdx.x < 32) {  // one warp finds the bucket (suffix scan with shuffles)
    State s = state[row];
    DigitState d;
    d.prefix = s.prefix;
    d.needed = s.needed;
    d.bucket = s.bucket;
    d.shift = s.shift;
    digit_step(h, &d);
    if (threadIdx.x == 0) {
      const bool top_digit = s.shift == key_bits - 8 && s.source == ON_INPUT;  // pass 1, over the input
      s.needed = d.needed;
      s.bucket = d.bucket;
      s.prefix = d.prefix;
      // Early stop: the whole bucket is taken, so no lower digit can change the selection.
      if ((long long)s.bucket == s.needed || s.shift == 0)
        s.done = 1;
      else
        s.shift -= 8;
      // After pass 1, a bucket that fits the candidate buffer moves there (mb_move copies it);
      // the next passes read the buffer.
      s.move = MOVE_NONE;
      if (top_digit && !s.done && (long long)s.bucket <= cap) {
        s.source = ON_CANDIDATES;
        s.cand_count = (long long)s.bucket;
        s.move = MOVE_COPY_BUCKET;
      }
      state[row] = s;
    }
  }
  __syncthreads();
  for (int d = threadIdx.x; d < 256; d += blockDim.x) h[d] = 0;  // ready for the next pass
  // Thread 0's update, seen after the barrier; rewritten only below, once every thread has read it.
  const int staging = state[row].staging;
  const int k_row = state[row].k_row;
  const unsigned digit = (unsigned)(state[row].prefix & 255u);
  const int per_thread = (blocks_per_row + blockDim.x - 1) / blockDim.x;
  const int b0 = min(blocks_per_row, (int)threadIdx.x * per_thread);
  const int b1 = min(blocks_per_row, b0 + per_thread);
  long long* row_offset = slice_offset + row * blocks_per_row;
  long long total;
  bool restart = false;
  if (staging) {  // the same for the whole block
    const long long* counts = stage_count + row * blocks_per_row * warps;
    // An overflowed segment's count (2^40) puts the total beyond any candidate buffer.
    long long local = 0;
    for (int b = b0; b < b1; ++b)
      for (int w = 0; w < warps; ++w) local += counts[b * warps + w];
    long long running = block_scan(local, sums, &total);
    restart = total >= k_row && total <= cap;
    if (restart)
      for (int b = b0; b < b1; ++b) {
        row_offset[b] = running;
        for (int w = 0; w < warps; ++w) running += counts[b * warps + w];
      }
    if (threadIdx.x == 0) {  // every thread read `staging` and `digit` before the scan's barriers
      if (restart) {         // the selection starts over on the staged keys, which hold the K winners
        State t = initial_state(k_row, key_bits);
        t.source = ON_CANDIDATES;
        t.cand_count = total;
        t.move = MOVE_SQUEEZE_STAGED;
        state[row] = t;
      } else {
        state[row].staging = 0;
      }
    }
  }
  if (!restart) {
    const unsigned int* bins = slice_hist + row * blocks_per_row * 256 + digit;
    long long local = 0;
    for (int b = b0; b < b1; ++b) local += bins[b * 256];
    long long running = block_scan(local, sums, &total);
    for (int b = b0; b < b1; ++b) {
      row_offset[b] = running;
      running += bins[b * 256];
    }
  }
}

// How far to shift a key to compare it with the row's bucket prefix: mb_select lowers `shift`
// only for rows that go on, so a row still selecting has its bucket at `key >> (shift + 8)`,
// and a done row at `key >> shift`.
__device__ __forceinline__ int bucket_shift(const State& s) {
  return s.done ? s.shift : s.shift + 8;
}

// Writes a slice's winners and bucket members, in index order within the row: keys above the
// bucket go to (win_key, win_idx) after the row's cursor (any order: they are sorted later);
// bucket keys go to `out` at the slice's offset plus their rank (only the first `limit` of them,
// when limit >= 0). Per loader call (blockDim x 16 bytes on the contiguous path) one block scan
// of both counts, packed in one int (each thread holds at most 16 of each), and one atomic on
// the row's cursor.
template <class T>
__device__ __forceinline__ void split(const Row<T>& r, long long begin, long long end, int shift,
                                      unsigned long long prefix, State* s, long long offset, long long limit,
                                      typename KeyTraits<T>::Key* win_key, long long* win_idx,
                                      typename KeyTraits<T>::Key* out_key, long long* out_idx) {
  typedef typename KeyTraits<T>::Key Key;
  __shared__ int s_scan[33];
  __shared__ long long s_cursor;
  const Key bucket = static_cast<Key>(prefix);
  stream_row(r.bits, r.stride, begin, end, threadIdx.x, blockDim.x, [&](const auto& run) {
    Key keys[CUTOPK_RUN_SIZE(run)];
    unsigned above = 0, member = 0;  // bit e: element e of the run is above the bucket, in it
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      keys[e] = r.key(run.bits[e]);
      const Key digits = static_cast<Key>(keys[e] >> shift);
      above |= (unsigned)(e < run.count && digits > bucket) << e;
      member |= (unsigned)(e < run.count && digits == bucket) << e;
    }
    int total;
    const int packed = block_scan(__popc(above) | (__popc(member) << 16), s_scan, &total);
    if (threadIdx.x == 0 && (total & 0xffff))
      s_cursor = (long long)atomicAdd((unsigned long long*)&s->above, (unsigned long long)(total & 0xffff));
    __syncthreads();
    long long at = s_cursor + (packed & 0xffff);
    long long pos = offset + (packed >> 16);
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      if ((above >> e) & 1u) {
        win_key[at] = keys[e];
        win_idx[at] = r.index(run.first + e);
        ++at;
      }
      if ((member >> e) & 1u) {
        if (limit < 0 || pos < limit) {
          out_key[pos] = keys[e];
          out_idx[pos] = r.index(run.first + e);
        }
        ++pos;
      }
    }
    offset += total >> 16;
    // s_cursor is rewritten only after the next call's scan, whose barriers follow every read.
  });
}

// Copies the staged segments of the rows that restarted into their candidate buffers, in index
// order (mb_select's offsets per slice, then the warps' segments in order), with the indices in
// the row. Launched with mb_histogram's block size: one warp per segment.
template <class T>
__device__ __forceinline__ void squeeze(long long row, long long slice, long long cap,
                                        typename KeyTraits<T>::Key* __restrict__ cand_key,
                                        long long* __restrict__ cand_idx, const long long* __restrict__ slice_offset,
                                        MB_STAGE_PARAMS) {
  const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long slot = row * gridDim.x + blockIdx.x;
  long long offset = row * cap + slice_offset[slot];
  for (int w = 0; w < warp; ++w) offset += stage_count[slot * warps + w];
  const long long wslot = slot * warps + warp;
  const long long count = stage_count[wslot];
  const long long from = row * stage_total + stage_start[row * (gridDim.x * warps + 1) + blockIdx.x * warps + warp];
  // Not unrolled: unrolled, ptxas spilled 8 bytes for 64-bit keys on sm_80 inside mb_move.
#pragma unroll 1
  for (long long j = lane; j < count; j += 32) {
    cand_key[offset + j] = stage_key[from + j];
    cand_idx[offset + j] = (long long)blockIdx.x * slice + stage_off[from + j];
  }
}

// After pass 1, one launch moves rows to their candidate buffers, as pass 1's mb_select marked
// them: a row that restarted on its staged keys squeezes them there; a row whose top-digit bucket
// fits in `cap` copies the bucket there in index order (one more read of its slice), and the
// keys above the bucket become winners.
template <class T>
CUTOPK_KERNEL(CUTOPK_MULTIBLOCK_THREADS, 2)
mb_move(const T* __restrict__ in, long long n, long long row_stride, long long col_stride,
        const long long* __restrict__ extents, int rows_kind, int largest, int nan_first, long long slice,
        long long cap, typename KeyTraits<T>::Key* __restrict__ cand_key, long long* __restrict__ cand_idx, int k,
        State* __restrict__ state, const long long* __restrict__ slice_offset,
        typename KeyTraits<T>::Key* __restrict__ win_key, long long* __restrict__ win_idx, MB_STAGE_PARAMS) {
  const long long row = blockIdx.y;
  const State s = state[row];
  if (s.move == MOVE_SQUEEZE_STAGED) {
    squeeze<T>(row, slice, cap, cand_key, cand_idx, slice_offset, stage_key, stage_off, stage_count, stage_start,
               stage_total);
    return;
  }
  if (s.move != MOVE_COPY_BUCKET) return;
  State on_input = s;  // the bucket is read from the input, though the row's source is now the buffer
  on_input.source = ON_INPUT;
  const Row<T> r = row_of<T>(in, n, row_stride, col_stride, extents, rows_kind, largest, nan_first, cand_key, cand_idx,
                             cap, on_input, row);
  const long long begin = (long long)blockIdx.x * slice;
  split<T>(r, begin, min(r.length, begin + slice), s.shift + 8, s.prefix, state + row,
           slice_offset[row * gridDim.x + blockIdx.x], -1, win_key + row * k, win_idx + row * k, cand_key + row * cap,
           cand_idx + row * cap);
}

template <class T>
CUTOPK_KERNEL(CUTOPK_MULTIBLOCK_THREADS, 2)
mb_collect(MB_PARAMS, long long cand_slice, int k, State* __restrict__ state,
           const long long* __restrict__ slice_offset, typename KeyTraits<T>::Key* __restrict__ win_key,
           long long* __restrict__ win_idx) {
  const long long row = blockIdx.y;
  const State s = state[row];
  const Row<T> r = MB_ROW(s, row);
  if (r.from_cand) slice = cand_slice;
  const long long begin = (long long)blockIdx.x * slice;
  // The bucket's winners follow the winners above it: the first `needed` bucket keys in index
  // order, placed from position k_row - needed.
  const long long first_tie = s.k_row - s.needed;
  // A row shorter than K: its last K - k_row slots are padding pairs, of the lowest key and
  // indices from n on (past every row's length, distinct), which sort last in either order.
  if (blockIdx.x == 0)
#pragma unroll 1
    for (int j = s.k_row + threadIdx.x; j < k; j += blockDim.x) {
      win_key[row * k + j] = 0;
      win_idx[row * k + j] = n + (j - s.k_row);
    }
  split<T>(r, begin, min(r.length, begin + slice), bucket_shift(s), s.prefix, state + row,
           slice_offset[row * gridDim.x + blockIdx.x], s.needed, win_key + row * k, win_idx + row * k,
           win_key + row * k + first_tie, win_idx + row * k + first_tie);
}

// The last step when a row's K (key, index) pairs fit shared memory: orders the winners (by key,
// ties by index; or by index) with a block bitonic sort and writes the indices and the values,
// re-read from the input at the winning indices so that their bits are the input's; an index at
// or past the row's length (mb_collect's padding pairs, sorted last) is written as padding. One
// block per row, one launch, instead of the array library's sorts and gathers.
template <class T>
CUTOPK_KERNEL(CUTOPK_MULTIBLOCK_THREADS)
mb_order(const T* __restrict__ in, long long n, long long row_stride, long long col_stride,
         const long long* __restrict__ extents, int rows_kind, int k, int by_index,
         const typename KeyTraits<T>::Key* __restrict__ win_key, const long long* __restrict__ win_idx,
         T* __restrict__ out_vals, long long* __restrict__ out_idx) {
  typedef typename KeyTraits<T>::Key Key;
  typedef unsigned long long Index;
  const int kp = pow2_at_least(k);
  extern __shared__ __align__(16) unsigned char smem[];
  Index* idx = reinterpret_cast<Index*>(smem);
  Key* keys = reinterpret_cast<Key*>(idx + kp);
  const long long row = blockIdx.x;
  // Padding sorts last either way: the lowest key with the highest index.
  for (int j = threadIdx.x; j < kp; j += blockDim.x) {
    keys[j] = j < k ? win_key[row * k + j] : Key(0);
    idx[j] = j < k ? (Index)win_idx[row * k + j] : ~0ull;
  }
  __syncthreads();
  if (by_index)
    block_bitonic<true>(keys, idx, kp);
  else
    block_bitonic<false>(keys, idx, kp);
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    if (idx[j] < (Index)extent.length)
      write_winner(base, col_stride, out_vals, (void*)out_idx, 8, row * k + j, idx[j]);
    else
      write_padding(out_vals, (void*)out_idx, 8, row * k + j);
  }
}

#undef MB_ROW
#undef MB_PARAMS
#undef MB_STAGE_PARAMS

}  // namespace cutopk::multiblock

// The plain kernels' extern "C" names at file scope too, as every generated entry point is.
using cutopk::multiblock::mb_init;
using cutopk::multiblock::mb_select;
