// Multi-block radix select: top-K of few long rows, with many blocks per row so that a handful of
// rows still fills the GPU. AIR top-k's shape (RAFT select_radix, CUB DeviceTopK): wide digits,
// one launch per digit, the last block of each row finishing the pass, and the input read about
// once.
//
// A row is cut into `gridDim.x` slices, one block each. A fixed sequence of launches, with no host
// synchronisation (capturable in a CUDA graph), each reading the per-row State the previous one
// left in global memory:
//   sample_threshold   one block per row: the row's initial state and zeroed histogram, and (long rows)
//               a threshold from an evenly spaced sample of CUTOPK_MULTIBLOCK_SAMPLES keys (runs
//               of one 32-byte sector each): the
//               sample's key of rank `rank`, which about (rank + 1) * n / SAMPLES keys of the row
//               reach, and almost surely at least K
//   digit_pass x D one launch per digit, D = ceil(key bits / CUTOPK_MULTIBLOCK_DIGIT_BITS) (digit
//               widths as even as possible: 32-bit keys 11 + 11 + 10, 16-bit 8 + 8, 8-bit 8,
//               64-bit 11 x 4 + 10 x 2). Every block reads its slice of the row's source (the
//               input, or the candidate buffer once the row has moved there), counts the digit of
//               the keys still in the race in shared memory and adds its counts to the row's
//               histogram. Pass 1 also stages the keys that reach the threshold, with their
//               indices, in the candidate buffer (any order); with more than one digit, pass 1
//               is the streaming filter instead (filter_slice): it only compares each key with
//               the threshold and counts the keys equal to it (tie_counts[row][block], 32-bit:
//               rows are shorter than 2^32), stages the keys above it, and counts the top digit
//               of those alone, so the histogram holds the candidates only; a row whose
//               threshold fails then starts over on the input (BEHIND, below). Then
//               __threadfence() and an atomic arrival
//               ticket: the block that arrives last (whatever order the blocks ran in: no block
//               ever waits for another) finds the bucket of the K-th key, re-zeroes the histogram
//               for the next pass and updates the state:
//                 - after pass 1, the row reads the candidates from now on when at least k_row
//                   keys reached the threshold and all of them fit the buffer (they then hold
//                   every winner); when fewer did but the threshold's ties make up the rest, the
//                   K-th key is the threshold (TIES: heavy ties, a row of one value, float16 keys
//                   repeating): in pass 2 every block writes its share of the candidates and the
//                   blocks whose slices hold the lowest-index ties (the counts of the slices
//                   before theirs say which) write those, in index order; else the input (rare:
//                   one read per pass, same launches): after the filter, whose histogram says
//                   nothing of the other keys, the row starts over at its top digit in pass 2
//                   (BEHIND), one digit behind, and its last launch resolves two digits
//                   (finish_behind: the last one counted over the bucket buffer, or over the
//                   input by the finishing block alone when that overflowed);
//                 - a bucket taken whole ends the selection early (COLLECT): in the next pass
//                   every block writes its keys at or above the bucket as winners, its last block
//                   orders them, and later passes return at once (FINISHED);
//                 - the last digit: every block has also written its keys above the bucket as
//                   winners and staged the bucket's keys (the bucket buffer); the last block takes
//                   the bucket's keys above the K-th key, and of the keys equal to it the `needed`
//                   lowest indices (a radix select on the indices when they are not all taken),
//                   from the bucket buffer, else from the candidates, else (both overflowed: heavy
//                   ties) from the input, read in index order until every winner is found.
//               The finishing block sorts the row's K (key, index) pairs in shared memory (block
//               bitonic: by key, ties by index; or by index) and writes the indices and the values,
//               re-read from the input by index; with `sort_here` 0 (K beyond what that sort holds)
//               it leaves the K pairs in the winners' buffer, padded, for order.cu's tiles and
//               merges over the K pairs alone, the last merge (order_output) writing the outputs,
//               and says where they are in `picks`; a row DIRECT in its last pass (Staging) wrote
//               only its bucket's winners there: order_winner_tiles takes the others from the
//               candidates.
// Ties: every buffer holds indices, so the lower-index rule never depends on the order in which
// atomics handed out positions; the result is the same whatever order blocks run in.
// Rows: regular, with lengths, or CSR segments (row_extent.cuh): every kernel takes the row's start
// and length from row_extent and never reads past the length. A row of length L <= K has L winners
// (`k_row`): it is collected whole in pass 1, and its last K - L outputs are padding (-1, 0).
// Reads of the input: 1 on the usual data (pass 1; later passes read the candidates, shared out
// by their count); one per pass for a row whose candidates failed (too many keys above the
// threshold, or too few reaching it), and one more by a single block when such a row's last
// bucket overflows its buffer.
// Dtypes: all (KeyTraits). Threads per block: CUTOPK_MULTIBLOCK_THREADS. Shared memory (dynamic):
// the larger of the digit's counts (4 bytes per bin) and, with `sort_here`, pow2(K) (key, index)
// pairs; static: the filter's stages (CUTOPK_MULTIBLOCK_STAGE offsets per warp, 8 KB) and
// scalars. Any K (n < 2^32). Scratch per row (the family's named table): state, one 32-bit count
// per bin, the candidate and bucket buffers (key and 32-bit position each), K winners.
// Layers, each a header: multiblock_state.cuh (State, the kernels' arguments as structs, the pass a
// row makes), multiblock_filter.cuh (counting a slice: the streaming filter, count_and_stage),
// multiblock_gather.cuh (the last bucket's winners), multiblock_finish.cuh (the finishing block);
// the kernels here are short sequences of their steps.
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"
#include "row_loads.cuh"
#include "radix_digit.cuh"
#include "row_sample.cuh"
#include "multiblock_state.cuh"
#include "multiblock_filter.cuh"
#include "multiblock_gather.cuh"
#include "multiblock_finish.cuh"
#include "entry.cuh"

namespace cutopk::multiblock {

// sample_threshold's sample (row_sample.cuh): every thread issues all its loads at once, several
// in flight (one memory round trip per row, not one per load).
constexpr int SAMPLE_LOADS = CUTOPK_MULTIBLOCK_SAMPLES / CUTOPK_MULTIBLOCK_THREADS;
static_assert(CUTOPK_MULTIBLOCK_SAMPLES % CUTOPK_MULTIBLOCK_THREADS == 0 && SAMPLE_LOADS >= CUTOPK_STREAM_LOADS,
              "sample_threshold reads whole rounds of its sample, several loads in flight");

// The parameters of the row's input, in this order.
#define MB_INPUT                                                                     \
  const T *__restrict__ in, long long n, long long row_stride, long long col_stride, \
      const long long *__restrict__ extents, int rows_kind, int largest, int nan_first

// One block per row: its initial state and zeroed histogram (`bins` counts), and with rank >= 0
// its threshold: the key of rank `rank` (0: the best) among CUTOPK_MULTIBLOCK_SAMPLES keys read in
// evenly spaced runs of the row, found by a radix select in shared memory.
// Bounds (threads, 2): with the block size alone, NVRTC 13.5 capped it at 64 registers on sm_75
// and spilled for 16-bit floats.
template <class T>
CUTOPK_KERNEL(CUTOPK_MULTIBLOCK_THREADS, 2)
sample_threshold(MB_INPUT, int rank, int k, State* __restrict__ state, unsigned int* __restrict__ hist, int bins) {
  typedef typename KeyTraits<T>::Key Key;
  __shared__ Key keys[CUTOPK_MULTIBLOCK_SAMPLES];
  __shared__ unsigned int counts[256];
  __shared__ DigitState s_state;
  const long long row = blockIdx.x;
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const long long len = extent.length;
  for (int d = threadIdx.x; d < bins; d += blockDim.x) hist[row * bins + d] = 0;
  State s = initial_state((int)min((long long)k, len), len, KEY_BITS<Key>);
  if (rank < 0 || s.mode != SELECT) {  // the same for the whole block: it leaves before any barrier
    if (threadIdx.x == 0) state[row] = s;
    return;
  }
  load_sample<T, CUTOPK_MULTIBLOCK_THREADS>(in + extent.start, col_stride, len, largest, nan_first, keys);
  if (threadIdx.x == 0) {
    s_state.prefix = 0;
    s_state.needed = (long long)rank + 1;
    s_state.bucket = 0;
    s_state.shift = KEY_BITS<Key> - 8;
  }
  __syncthreads();
  for (int shift = KEY_BITS<Key> - 8; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += blockDim.x) counts[d] = 0;
    __syncthreads();
    const unsigned long long prefix = s_state.prefix;
    const bool top = shift + 8 >= KEY_BITS<Key>;
    // A whole number of rounds per thread (the sample is a multiple of the block size), so
    // every lane of a warp reaches count_digit together (its warp match under CUTOPK_COUNT_WITH_MATCH).
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
  if (threadIdx.x == 0) {
    s.threshold = s_state.prefix;  // every bit resolved: the sample's key of rank `rank`
    s.staging = 1;
    state[row] = s;
  }
}

// The parameters of digit_pass, in this order.
#define MB_PASS_PARAMS                                                                                               \
  MB_INPUT, long long slice, long long cand_slice, long long cap, typename KeyTraits<T>::Key *__restrict__ cand_key, \
      Pos *__restrict__ cand_idx, long long bucket_cap, typename KeyTraits<T>::Key *__restrict__ bucket_key,         \
      Pos *__restrict__ bucket_idx, int k, int by_index, int sort_here, long long direct,                            \
      long long *__restrict__ picks, State *__restrict__ state, unsigned int *__restrict__ hist, int bins,           \
      unsigned int *__restrict__ tie_counts, typename KeyTraits<T>::Key *__restrict__ win_key,                       \
      Pos *__restrict__ win_idx, T *__restrict__ out_vals, long long *__restrict__ out_idx
// A block's part of a pass: in TIES, its share of the winners; in pass 1 with a threshold, the
// streaming filter (returning this thread's keys equal to the threshold); else its slice counted
// and staged.
template <class T>
__device__ __forceinline__ unsigned count_slice(const Args<T>& a, const Pass<T>& p, const Row<T>& r, const State& s,
                                                State* st, unsigned int* counts, long long row) {
  typedef typename KeyTraits<T>::Key Key;
  unsigned int at_threshold = 0;
  if (s.mode == TIES) {
    gather_threshold_ties<T>(input_row<T>(a.input, a.cand, row), s, st, a, row);
  } else if (p.filter) {
    if constexpr (KEY_BITS<Key> > CUTOPK_MULTIBLOCK_DIGIT_BITS) {  // `filter` is false for one digit
      const Buffer<Key> c = a.cand.at(row);
      at_threshold = filter_slice<T>(r.bits, r.stride, KeyMode{r.largest, r.nan_first}, p.begin, p.end, p.threshold,
                                     &st->cand_count, c.cap, c.key, c.idx, counts, DigitBits{p.low, p.mask});
    }
  } else {
    count_and_stage<T>(r, p, s, st, a, row, counts);
  }
  return at_threshold;
}

// One digit pass (or the collection of a row whose bucket was taken whole), for every row at
// once: grid (blocks per row, rows). The block that finishes a row's pass last updates its state;
// see the file's header.
template <class T>
CUTOPK_KERNEL(CUTOPK_MULTIBLOCK_THREADS, 2)
digit_pass(MB_PASS_PARAMS) {
  const Args<T> a{{in, n, row_stride, col_stride, extents, rows_kind, largest, nan_first},
                  slice,
                  cand_slice,
                  {cand_key, cand_idx, cap},
                  {bucket_key, bucket_idx, bucket_cap},
                  {win_key, win_idx, k},
                  k,
                  by_index,
                  sort_here,
                  direct,
                  picks,
                  state,
                  hist,
                  bins,
                  tie_counts,
                  out_vals,
                  out_idx};
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int s_last;
  __shared__ unsigned int s_at_threshold;
  __shared__ long long tie_sums[33];
  const long long row = blockIdx.y;
  State* const st = state + row;
  const State s = *st;  // the counters are advanced during the pass: only atomics and the last block read them
  // The same for the whole block: it leaves before any barrier.
  if (s.mode == FINISHED) return;
  const Row<T> r = row_of<T>(a.input, a.cand, s.source == ON_CANDIDATES, (long long)s.cand_count, row);
  const Pass<T> p = plan_pass<T>(s, r, slice);
  unsigned int* counts = reinterpret_cast<unsigned int*>(smem);
  for (int d = threadIdx.x; d < p.digit_bins; d += blockDim.x) counts[d] = 0;
  if (threadIdx.x == 0) s_at_threshold = 0;
  __syncthreads();
  const unsigned int at_threshold = count_slice<T>(a, p, r, s, st, counts, row);
  if (!arrive(at_threshold, p.strict && p.stage_cand, counts, p.digit_bins, hist + row * bins,
              tie_counts + row * gridDim.x + blockIdx.x, &st->arrived, &s_at_threshold, &s_last))
    return;  // the same for the whole block
  finish_pass<T>(a, p, s, st, counts, smem, tie_sums, row);
}

#undef MB_INPUT
#undef MB_PASS_PARAMS

}  // namespace cutopk::multiblock
