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
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"
#include "row_loads.cuh"
#include "radix_digit.cuh"
#include "entry.cuh"

namespace cutopk::multiblock {

// A position in a row, as the candidate, bucket and winners' buffers hold it: 32 bits, since rows
// are shorter than 2^32 (and the winners' padding takes its slot number: see pad_winners): 8-byte
// pairs for 32-bit keys instead of 12, in pass 1's staging and in every read of the buffers.
typedef unsigned int Pos;

// What a launch does for a row.
enum Mode : int {
  SELECT = 0,    // count the next digit of the keys in the bucket
  COLLECT = 1,   // the bucket is taken whole: every key at or above it is a winner
  FINISHED = 2,  // the row's outputs are written
  TIES = 3       // the K-th key is pass 1's threshold: its winners are the candidates and its ties
};
// Where a row's elements are read from.
enum Source : int { ON_INPUT = 0, ON_CANDIDATES = 1 };
// State::staging. NO_THRESHOLD: none sampled (short rows). FILTER: pass 1 stages the keys that
// reach the threshold (with more than one digit, the keys above it, by the streaming filter,
// counting the ties); after pass 1 it is NO_THRESHOLD again, or BEHIND: the threshold failed
// (too few keys reached it, or more than the buffer holds), the row restarts on the input at its
// top digit in pass 2, and its last launch resolves its last two digits (finish_behind).
// DIRECT (set for the last digit's pass or the collection of a bucket taken whole, with `direct`
// > 0: K ordered apart from candidates that hold every winner, and a bucket of at most `direct`
// keys): that pass writes no winners above the bucket; order.cu's order_winner_tiles picks them
// from the candidates, and only the bucket's winners are written (by the finishing block after
// the last digit, by every block when collecting): issue 39, the K pairs no longer written and
// read back.
enum Staging : int { NO_THRESHOLD = 0, FILTER = 1, BEHIND = 2, DIRECT = 3 };
// Where the finishing block took the last bucket's winners from (tests read it).
// WHOLE: every key at or above a bucket taken whole, written by every block (COLLECT).
// FROM_TIES: the candidates and the threshold's lowest-index ties, written by every block (TIES).
enum Gathered : int { NOT_YET = 0, FROM_BUCKET = 1, FROM_CANDIDATES = 2, FROM_INPUT = 3, WHOLE = 4, FROM_TIES = 5 };

// A row's selection state in global memory, carried from launch to launch. Invariant (SELECT and
// COLLECT): the K-th key of the row lies among the keys whose bits above `cut` equal `prefix` (the
// bucket); `needed` winners are still to take from the bucket, the other k_row - needed are keys
// above it. The counters are advanced by atomics during a pass and read by its last block. The
// field offsets are read by tests (tests/support/multiblock_state.py): keep them.
struct State {
  unsigned long long prefix;        // the bucket's bits above `cut`
  long long needed;                 // winners still to take from the bucket
  long long bucket;                 // keys in the bucket, as the last pass counted them (in the source)
  unsigned long long threshold;     // sample_threshold's key: pass 1 stages the keys that reach it
  unsigned long long arrived;       // blocks of the current launch done with the row (the ticket)
  unsigned long long cand_count;    // keys staged in pass 1 (past `cap`: overflowed, no longer counted)
  unsigned long long bucket_count;  // keys staged in the bucket buffer by the last digit (ditto)
  unsigned long long winners;       // winners written so far (the cursor in the row's K slots)
  int cut;                          // bits below the prefix, still unresolved
  int width;                        // bits of the digit the next SELECT pass counts
  Mode mode;
  Source source;
  int k_row;    // the row's winners: min(K, its length); the rest is padding
  int passes;   // launches that did work on the row (a finished row's later launches return at once)
  int staging;  // Staging: whether pass 1 filters against `threshold`, or the row is one digit behind
  Gathered gathered;
};
static_assert(sizeof(State) == CUTOPK_MULTIBLOCK_STATE_BYTES, "MULTIBLOCK_STATE_BYTES in kernels/constants.cuh");
// State's layout, pinned without offsetof (NVRTC before 13.5 has none, not even as
// __builtin_offsetof): the fields lie in the order written here (aggregate initialization fills
// them in declaration order) and without padding (the size is the sum of the fields'), so field
// number `field` lies at the sum of the sizes before it.
constexpr bool state_in_order() {
  State s = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, Mode(10), Source(11), 12, 13, 14, Gathered(15)};
  return s.prefix == 0 && s.needed == 1 && s.bucket == 2 && s.threshold == 3 && s.arrived == 4 && s.cand_count == 5 &&
         s.bucket_count == 6 && s.winners == 7 && s.cut == 8 && s.width == 9 && s.mode == 10 && s.source == 11 &&
         s.k_row == 12 && s.passes == 13 && s.staging == 14 && s.gathered == 15;
}
constexpr int state_offset(int field) {
  const int size[] = {
      sizeof(State::prefix),  sizeof(State::needed),     sizeof(State::bucket),       sizeof(State::threshold),
      sizeof(State::arrived), sizeof(State::cand_count), sizeof(State::bucket_count), sizeof(State::winners),
      sizeof(State::cut),     sizeof(State::width),      sizeof(State::mode),         sizeof(State::source),
      sizeof(State::k_row),   sizeof(State::passes),     sizeof(State::staging),      sizeof(State::gathered)};
  int at = 0;
  for (int i = 0; i < field; ++i) at += size[i];
  return at;
}
static_assert(state_in_order() && state_offset(16) == sizeof(State), "State: fields in order, no padding");
static_assert(state_offset(5) == 40 && state_offset(6) == 48 && state_offset(8) == 64 && state_offset(10) == 72 &&
                  state_offset(11) == 76 && state_offset(12) == 80 && state_offset(13) == 84 && state_offset(15) == 92,
              "MB_STATE in tests/support/multiblock_state.py");

// sample_threshold: every thread issues all its sample loads at once (one memory round trip per row,
// not one per load), whole rounds of the block.
constexpr int SAMPLE_LOADS = CUTOPK_MULTIBLOCK_SAMPLES / CUTOPK_MULTIBLOCK_THREADS;
static_assert(CUTOPK_MULTIBLOCK_SAMPLES % CUTOPK_MULTIBLOCK_THREADS == 0 && SAMPLE_LOADS >= CUTOPK_STREAM_LOADS,
              "sample_threshold reads whole rounds of its sample, several loads in flight");
constexpr int MAX_BINS = 1 << CUTOPK_MULTIBLOCK_DIGIT_BITS;
static_assert(MAX_BINS % CUTOPK_MULTIBLOCK_THREADS == 0, "the finishing block scans whole runs of bins per thread");

// The digit schedule of KEY_BITS-bit keys: D = ceil(KEY_BITS / DIGIT_BITS) digits from the top, the
// first KEY_BITS % D of them one bit wider. The width of the digit just below `cut` (0 past the
// last). The family module (cutopk/cuda/families/multiblock.py, digit_widths) mirrors it.
__device__ __forceinline__ int digit_width(int key_bits, int cut) {
  const int digits = (key_bits + CUTOPK_MULTIBLOCK_DIGIT_BITS - 1) / CUTOPK_MULTIBLOCK_DIGIT_BITS;
  const int base = key_bits / digits, extra = key_bits % digits;
  int top = key_bits;
  for (int p = 0; p < digits; ++p) {
    const int w = base + (p < extra);
    if (top == cut) return w;
    top -= w;
  }
  return 0;
}

// A key's bits above `cut` (none when cut is the key's width: a shift by the width is undefined).
template <class Key>
__device__ __forceinline__ unsigned long long high(Key key, int cut) {
  return cut >= (int)(8 * sizeof(Key)) ? 0ull : (unsigned long long)(key >> cut);
}

// One row's elements, wherever they are: the strided input (key computed, index = position) or
// the candidate buffer (key and index stored). One code path for both, with the source a runtime
// flag (the same for the whole block).
template <class T>
struct Row {
  typedef typename KeyTraits<T>::Key Key;
  const Key* bits;  // what the loader reads: the input's bits, or the candidates' keys
  long long stride;
  bool largest, nan_first, from_cand;
  const Pos* cand_idx;
  long long length;
  __device__ __forceinline__ Key key(Key b) const {
    return from_cand ? b : KeyTraits<T>::from_bits(b, largest, nan_first);
  }
  __device__ __forceinline__ long long index(long long i) const { return from_cand ? cand_idx[i] : i; }
};

// The parameters of the row's input, in this order.
#define MB_INPUT                                                                     \
  const T *__restrict__ in, long long n, long long row_stride, long long col_stride, \
      const long long *__restrict__ extents, int rows_kind, int largest, int nan_first

// The row's extent (row_extent.cuh), read once per block.
template <class T>
__device__ __forceinline__ Row<T> row_of(const T* in, long long n, long long row_stride, long long col_stride,
                                         const long long* extents, int rows_kind, int largest, int nan_first,
                                         const typename KeyTraits<T>::Key* cand_key, const Pos* cand_idx, long long cap,
                                         bool from_cand, long long cand_count, long long row) {
  Row<T> r;
  r.from_cand = from_cand;
  const RowExtent e = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  r.bits = from_cand ? cand_key + row * cap : row_bits(in + e.start);
  r.stride = from_cand ? 1 : col_stride;
  r.largest = largest;
  r.nan_first = nan_first;
  r.cand_idx = cand_idx + row * cap;
  r.length = from_cand ? min(cand_count, cap) : e.length;
  return r;
}

// Adds `key`'s digit (the bits [low, low + width) as `mask` keeps them) to hist when `counted`.
// `aggregate`: see count_key (radix_digit.cuh; the top digit, where many keys share their top bits).
template <class Key>
__device__ __forceinline__ void count_digit_at(unsigned int* hist, Key key, bool counted, int low, unsigned mask,
                                               bool aggregate) {
  count_key(hist, static_cast<unsigned>(key >> low) & mask, counted, aggregate);
}

// Appends the elements of this lane's run picked in `picks` (bit e: element e) to a buffer of
// (key, index) pairs, at positions one atomic per warp hands out on `counter` (any order: every
// reader goes by the stored indices). Positions from `cap` on are not written; the counter counts
// them all, so a count past `cap` tells the finishing block that the buffer overflowed; `*full`
// (the warp's, the same in every lane) is set then, and the warp appends no more: an overflowed
// buffer is never read, and a row whose every key reaches the threshold would otherwise make
// every warp wait on one counter for the whole pass. Every lane of the warp calls it.
template <class T, class Run>
__device__ __forceinline__ void append(unsigned picks, const typename KeyTraits<T>::Key* keys, const Run& run,
                                       const Row<T>& r, unsigned long long* counter, long long cap,
                                       typename KeyTraits<T>::Key* dst_key, Pos* dst_idx, bool* full) {
  if (*full) return;  // the same in the whole warp
  int total;
  const int before = warp_scan(__popc(picks), &total);
  if (total == 0) return;  // the same in the whole warp
  unsigned long long base = 0;
  if ((threadIdx.x & 31) == 0) base = atomicAdd(counter, (unsigned long long)total);
  base = __shfl_sync(0xffffffffu, base, 0);
  *full = base + total > (unsigned long long)cap;
  long long at = (long long)base + before;
#pragma unroll
  for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e)
    if ((picks >> e) & 1u) {
      if (at < cap) {
        dst_key[at] = keys[e];
        dst_idx[at] = (Pos)r.index(run.first + e);
      }
      ++at;
    }
}

// Pass 1 of a row with a sampled threshold (issue 39, item 3): the streaming filter. Nearly every
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
// over). Every lane of the warp calls it with the same `fill`. Scalars only, no pointer to a
// local: anything passed in memory would give the kernel a stack frame.
template <class T>
__device__ __noinline__ bool flush_stage(const typename KeyTraits<T>::Key* bits, long long stride, bool largest,
                                         bool nan_first, long long begin, const unsigned* stage, int fill,
                                         unsigned long long* counter, long long cap,
                                         typename KeyTraits<T>::Key* dst_key, Pos* dst_idx, unsigned int* counts,
                                         int low, unsigned mask) {
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
    const Key key = valid ? KeyTraits<T>::from_bits(bits[i * stride], largest, nan_first) : Key(0);
    if (valid && base + j < (unsigned long long)cap) {
      dst_key[base + j] = key;
      dst_idx[base + j] = (Pos)i;
    }
    count_digit_at<Key>(counts, key, valid, low, mask, true);
  }
  __syncwarp();  // every lane has read the stage before it is refilled
  return base + fill > (unsigned long long)cap;
}

// Pass 1's loop over this block's slice [begin, end) of the input (see above): stages and flushes
// the keys above `threshold`, and returns this thread's count of keys equal to it. The whole
// block calls it (stream_row's runs are warp-synchronous).
template <class T>
__device__ __noinline__ unsigned filter_slice(const typename KeyTraits<T>::Key* bits, long long stride, bool largest,
                                              bool nan_first, long long begin, long long end,
                                              typename KeyTraits<T>::Key threshold, unsigned long long* counter,
                                              long long cap, typename KeyTraits<T>::Key* dst_key, Pos* dst_idx,
                                              unsigned int* counts, int low, unsigned mask) {
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
      const Key key = KeyTraits<T>::from_bits(run.bits[e], largest, nan_first);
      const bool valid = e < run.count;
      picks |= (unsigned)(valid && key > threshold) << e;
      ties += valid && key == threshold;
    }
    if (full || !__any_sync(0xffffffffu, picks != 0)) return;  // the usual case; the same in the whole warp
    int total;
    int at = fill + warp_scan(__popc(picks), &total);
    if (fill + total > STAGE_SIZE) {  // the same in the whole warp
      full = flush_stage<T>(bits, stride, largest, nan_first, begin, stage, fill, counter, cap, dst_key, dst_idx,
                            counts, low, mask);
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
    flush_stage<T>(bits, stride, largest, nan_first, begin, stage, fill, counter, cap, dst_key, dst_idx, counts, low,
                   mask);
  return ties;
}

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

// A row's state before pass 1: the bucket is the whole key range, needed = k_row. A row whose
// every element wins (k_row == its length, none included) is collected whole in pass 1.
__device__ __forceinline__ State initial_state(int k_row, long long len, int key_bits) {
  State s;
  s.prefix = 0;
  s.needed = k_row;
  s.bucket = len;
  s.threshold = 0;
  s.arrived = 0;
  s.cand_count = 0;
  s.bucket_count = 0;
  s.winners = 0;
  s.cut = key_bits;
  s.width = digit_width(key_bits, key_bits);
  s.mode = k_row == len || k_row == 0 ? COLLECT : SELECT;
  s.source = ON_INPUT;
  s.k_row = k_row;
  s.passes = 0;
  s.staging = 0;
  s.gathered = NOT_YET;
  return s;
}

// One block per row: its initial state and zeroed histogram (`bins` counts), and with rank >= 0
// its threshold: the key of rank `rank` (0: the best) among CUTOPK_MULTIBLOCK_SAMPLES keys read in
// evenly spaced runs of the row, found by a radix select in shared memory.
// Bounds (threads, 2): with the block size alone, NVRTC 13.5 capped it at 64 registers on sm_75
// and spilled for 16-bit floats.
template <class T>
CUTOPK_KERNEL(CUTOPK_MULTIBLOCK_THREADS, 2)
sample_threshold(MB_INPUT, int rank, int k, State* __restrict__ state, unsigned int* __restrict__ hist, int bins) {
  typedef typename KeyTraits<T>::Key Key;
  const int KEY_BITS = 8 * sizeof(Key);
  __shared__ Key keys[CUTOPK_MULTIBLOCK_SAMPLES];
  __shared__ unsigned int counts[256];
  __shared__ DigitState s_state;
  const long long row = blockIdx.x;
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const long long len = extent.length;
  for (int d = threadIdx.x; d < bins; d += blockDim.x) hist[row * bins + d] = 0;
  State s = initial_state((int)min((long long)k, len), len, KEY_BITS);
  if (rank < 0 || s.mode != SELECT) {  // the same for the whole block: it leaves before any barrier
    if (threadIdx.x == 0) state[row] = s;
    return;
  }
  const Key* bits = row_bits(in + extent.start);
  // The sample is SAMPLES / GROUP runs of GROUP consecutive keys (a 32-byte sector each on a
  // contiguous row), evenly spaced: one sector per sampled key would read 32 / sizeof(Key) times
  // the sample's bytes (half a 64K-element float16 row). SAMPLE_LOADS loads in flight per thread,
  // transformed after.
  const int GROUP = 32 / (int)sizeof(Key);
  const long long groups = CUTOPK_MULTIBLOCK_SAMPLES / GROUP;
  // Keys before the row's first 32-byte boundary: the runs start on boundaries, whatever the
  // row's alignment (a run across one would touch two sectors).
  const long long skew =
      col_stride == 1 ? (long long)((reinterpret_cast<unsigned long long>(bits) & 31) / sizeof(Key)) : 0;
  for (int j0 = threadIdx.x; j0 < CUTOPK_MULTIBLOCK_SAMPLES; j0 += SAMPLE_LOADS * blockDim.x) {
    Key raw[SAMPLE_LOADS];
#pragma unroll
    for (int u = 0; u < SAMPLE_LOADS; ++u) {
      const long long j = j0 + u * (long long)blockDim.x;
      long long first = ((j / GROUP) * len / groups + skew) / GROUP * GROUP - skew;
      if (first < 0) first += GROUP;
      const long long at = min(len - 1, first + j % GROUP);
      raw[u] = j < CUTOPK_MULTIBLOCK_SAMPLES ? bits[at * col_stride] : Key(0);
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

// The finishing block's last step: the row's k_row winners (in win_key/win_idx, written by this
// launch's blocks, read through L2) and K - k_row padding pairs (the lowest key and indices from n
// on: past every row's length, so they sort last in either order) sorted in shared memory (by key,
// ties by index; or by index), then the indices and the values, rebuilt from the keys where the
// key holds the element's bits (KeyTraits<T>::key_holds_bits; else, NaN and zero keys, re-read
// from the input at the index: issue 39, the winners' values were a sector each, ~0.25 x the
// input of 16 x 65536, k=2048); an index at or past the row's length is written as padding.
template <class T>
__device__ __forceinline__ void order_winners(const T* in, long long n, long long row_stride, long long col_stride,
                                              const long long* extents, int rows_kind, int largest, int k, int by_index,
                                              int k_row, const typename KeyTraits<T>::Key* win_key, const Pos* win_idx,
                                              T* out_vals, long long* out_idx, unsigned char* smem, long long row) {
  typedef typename KeyTraits<T>::Key Key;
  typedef unsigned long long Index;
  const int kp = pow2_at_least(k);
  Index* idx = reinterpret_cast<Index*>(smem);
  Key* keys = reinterpret_cast<Key*>(idx + kp);
  for (int j = threadIdx.x; j < kp; j += blockDim.x) {
    const bool real = j < k_row;
    keys[j] = real ? __ldcg(win_key + row * k + j) : Key(0);
    idx[j] = real ? (Index)__ldcg(win_idx + row * k + j) : j < k ? (Index)(n + j - k_row) : ~0ull;
  }
  __syncthreads();
  if (by_index)
    block_bitonic<true>(keys, idx, kp);
  else
    block_bitonic<false>(keys, idx, kp);
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const long long at = row * k + j;
    if (idx[j] >= (Index)extent.length) {
      write_padding(out_vals, (void*)out_idx, 8, at);
    } else {
      out_idx[at] = (long long)idx[j];
      if (KeyTraits<T>::key_holds_bits(keys[j], largest))
        reinterpret_cast<Key*>(out_vals)[at] = KeyTraits<T>::bits_of_key(keys[j], largest);
      else
        out_vals[at] = base[(long long)idx[j] * col_stride];
    }
  }
}

// Without `sort_here` (K too large for the finishing block's sort), the row's K pairs are ordered
// by kernels/order.cu after the last pass, whose last merge writes the outputs: the
// finishing block only fills slots [k_row, k) with padding pairs: key 0 and index j, the slot's
// own number. Slots exist past k_row only when the row is shorter than K (k_row is its length),
// so j is at or past the row's length, above every real index: they sort last in either order
// and become padding, and they fit 32 bits whatever n.
template <class Key>
__device__ __forceinline__ void pad_winners(int k, int k_row, Key* win_key, Pos* win_idx) {
  for (int j = k_row + threadIdx.x; j < k; j += blockDim.x) {
    win_key[j] = Key(0);
    win_idx[j] = (Pos)j;
  }
}

// Without `sort_here`: where order.cu's order_winner_tiles finds the row's K pairs (its `picks`):
// after a DIRECT last digit, the candidates above the bucket (`s`: the last pass's) and the
// bucket's winners in the winners' buffer; else the winners' buffer alone, padding included.
__device__ __forceinline__ void write_picks(const State& s, const State& f, long long cap, int k, long long* picks) {
  const bool direct = s.staging == DIRECT;
  picks[0] = direct ? min((long long)f.cand_count, cap) : 0;
  picks[1] = s.cut;
  picks[2] = (long long)s.prefix;
  picks[3] = direct ? (long long)f.winners : k;
}

// Whether a row's next pass goes DIRECT (see Staging): the last digit, or the collection of a
// bucket taken whole, over candidates that hold every winner, with a bucket of at most `direct`.
__device__ __forceinline__ bool goes_direct(const State& f, long long direct) {
  const bool last_next = f.mode == COLLECT || (f.mode == SELECT && f.cut > 0 && f.cut == f.width);
  return direct > 0 && last_next && f.source == ON_CANDIDATES && f.staging == NO_THRESHOLD && f.bucket <= direct;
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
// buffer of (key, index) pairs in any order, `in_bucket` telling the bucket's keys from others.
template <class Key>
__device__ __forceinline__ void gather_from_buffer(const Key* keys, const Pos* idx, long long count, int bucket_cut,
                                                   unsigned long long bucket_prefix, Key kth, long long needed,
                                                   long long ties, long long n, Key* win_key, Pos* win_idx,
                                                   unsigned long long* cursor, unsigned int* counts) {
  // All ties win, or the ones up to the needed-th smallest index.
  const unsigned long long last = ties == needed ? ~0ull : nth_tie_index<Key>(keys, idx, count, kth, needed, n, counts);
  for (long long j = threadIdx.x; j < count; j += blockDim.x) {
    const Key key = __ldcg(keys + j);
    if (high(key, bucket_cut) != bucket_prefix || key < kth) continue;
    const long long i = __ldcg(idx + j);
    if (key == kth && (unsigned long long)i > last) continue;
    const unsigned long long at = atomicAdd(cursor, 1ull);  // a shared cursor: any order
    win_key[at] = key;
    win_idx[at] = (Pos)i;
  }
  __syncthreads();
}

// The same from the input when no buffer holds the bucket: the row read in index order, ties
// ranked by a block scan, until every winner of the bucket (`above` keys above `kth`, `needed` ties)
// is found.
template <class T>
__device__ __forceinline__ void gather_from_input(const Row<T>& r, int bucket_cut, unsigned long long bucket_prefix,
                                                  typename KeyTraits<T>::Key kth, long long above, long long needed,
                                                  typename KeyTraits<T>::Key* win_key, Pos* win_idx,
                                                  unsigned long long* cursor) {
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
      if (high(key, bucket_cut) != bucket_prefix || key < kth) continue;
      if (key == kth) {
        if (rank++ >= needed) continue;
      } else {
        ++found;
      }
      const unsigned long long at = atomicAdd(cursor, 1ull);
      win_key[at] = key;
      win_idx[at] = (Pos)i;
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
// winning tie. `tie_counts`: the row's counts per slice, from pass 1.
template <class T>
__device__ __forceinline__ void gather_threshold_ties(const Row<T>& input, const State& s, State* st, long long slice,
                                                      long long cand_slice, const typename KeyTraits<T>::Key* cand_key,
                                                      const Pos* cand_idx, const unsigned int* tie_counts,
                                                      typename KeyTraits<T>::Key* win_key, Pos* win_idx) {
  typedef typename KeyTraits<T>::Key Key;
  const int RUN = 8;
  __shared__ long long sums[33];
  const long long c0 = (long long)blockIdx.x * cand_slice, c1 = min((long long)s.cand_count, c0 + cand_slice);
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
  const long long begin = (long long)blockIdx.x * slice, end = min(input.length, begin + slice);
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
__device__ __forceinline__ void finish_behind(const Row<T>& input, bool staged, const typename KeyTraits<T>::Key* bkey,
                                              const Pos* bidx, long long bcount, int cut, unsigned long long prefix,
                                              long long above, State* f, typename KeyTraits<T>::Key* win_key,
                                              Pos* win_idx, unsigned long long* cursor, unsigned int* counts) {
  typedef typename KeyTraits<T>::Key Key;
  const int width = f->cut, bins = 1 << width;
  const unsigned long long bucket = f->prefix;
  for (int d = threadIdx.x; d < bins; d += blockDim.x) counts[d] = 0;
  __syncthreads();
  const long long count = staged ? bcount : input.length;
  for (long long j = threadIdx.x; j < count; j += blockDim.x) {
    const Key key = staged ? __ldcg(bkey + j) : input.key(input.bits[j * input.stride]);
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
    gather_from_buffer<Key>(bkey, bidx, bcount, cut, prefix, kth, f->needed, ties, input.length, win_key, win_idx,
                            cursor, counts);
  else
    gather_from_input<T>(input, cut, prefix, kth, above + above_last, f->needed, win_key, win_idx, cursor);
}

// Pass 1's counting and staging without the streaming filter (one digit, no threshold, or a
// later pass): every key of the block's slice in the race counts its digit; the keys reaching the
// threshold, the bucket's keys and the winners above it go to their buffers as asked.
template <class T>
__device__ __forceinline__ void count_and_stage(const Row<T>& r, long long begin, long long end, const State& s,
                                                State* st, bool select, bool top, int low, unsigned mask,
                                                typename KeyTraits<T>::Key threshold, unsigned int* counts,
                                                bool stage_cand, long long cap, typename KeyTraits<T>::Key* cand_key,
                                                Pos* cand_idx, bool stage_bucket, long long bucket_cap,
                                                typename KeyTraits<T>::Key* bucket_key, Pos* bucket_idx,
                                                bool write_winners, int k, typename KeyTraits<T>::Key* win_key,
                                                Pos* win_idx) {
  typedef typename KeyTraits<T>::Key Key;
  bool cand_full = false, bucket_full = false, winners_full = false;  // this warp's buffers overflowed
  stream_row(r.bits, r.stride, begin, end, threadIdx.x, blockDim.x, [&](const auto& run) {
    Key keys[CUTOPK_RUN_SIZE(run)];
    unsigned reach = 0, bucket = 0, win = 0;  // bit e: element e of the run reaches the threshold, ...
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      keys[e] = r.key(run.bits[e]);
      const bool valid = e < run.count;
      const unsigned long long hi = high(keys[e], s.cut);
      const bool in_race = valid && hi == s.prefix;
      if (select) count_digit_at<Key>(counts, keys[e], in_race, low, mask, top);
      reach |= (unsigned)(valid && keys[e] >= threshold) << e;  // one digit (else filter_slice stages)
      bucket |= (unsigned)in_race << e;
      // Collecting a bucket taken whole: the bucket's keys and those above, or (DIRECT) the bucket's alone.
      const bool won =
          select ? hi > s.prefix
                 : hi == s.prefix ||
                       (hi > s.prefix && !(8 * sizeof(Key) > CUTOPK_MULTIBLOCK_DIGIT_BITS && s.staging == DIRECT));
      win |= (unsigned)(valid && won) << e;
    }
    if (stage_cand) append<T>(reach, keys, run, r, &st->cand_count, cap, cand_key, cand_idx, &cand_full);
    if (stage_bucket)
      append<T>(bucket, keys, run, r, &st->bucket_count, bucket_cap, bucket_key, bucket_idx, &bucket_full);
    if (write_winners) append<T>(win, keys, run, r, &st->winners, k, win_key, win_idx, &winners_full);
  });
}

// The end of a block's pass: its ties at the threshold (`ties`, when `count_ties`) and digit counts
// added to the row's, then its arrival ticket. Returns whether it is the row's last block to
// arrive, the one that finishes the pass (the same in the whole block); the other blocks' writes
// are visible to it then.
__device__ __forceinline__ bool arrive(unsigned int at_threshold, bool count_ties, const unsigned int* counts,
                                       int digit_bins, unsigned int* row_hist, unsigned int* tie_count,
                                       unsigned long long* arrived, unsigned int* s_at_threshold, int* s_last) {
  if (at_threshold) atomicAdd(s_at_threshold, at_threshold);
  __syncthreads();
  if (count_ties && threadIdx.x == 0) *tie_count = *s_at_threshold;
  for (int d = threadIdx.x; d < digit_bins; d += blockDim.x)
    if (counts[d]) atomicAdd(&row_hist[d], counts[d]);
  // Everything this block wrote is visible device-wide before its ticket is.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) *s_last = atomicAdd(arrived, 1ull) == gridDim.x - 1;
  __syncthreads();
  if (!*s_last) return false;
  __threadfence();  // the other blocks' writes, seen after their tickets
  return true;
}

// The finishing block's digit: the row's counts (read through L2, the histogram zeroed for the
// next pass) give the bin of the K-th key; `f` narrows to it. Returns the keys above that bin.
__device__ __forceinline__ long long next_digit(const State& s, State* f, unsigned int* row_hist, unsigned int* counts,
                                                int digit_bins, int low, int key_bits) {
  for (int d = threadIdx.x; d < digit_bins; d += blockDim.x) {
    counts[d] = __ldcg(row_hist + d);
    row_hist[d] = 0;  // ready for the next pass
  }
  __syncthreads();
  long long above;
  const int digit = block_find_bucket(counts, digit_bins, s.needed, &above);
  f->needed = s.needed - above;
  f->bucket = counts[digit];
  f->prefix = (s.prefix << s.width) | (unsigned long long)digit;
  f->cut = low;
  f->width = digit_width(key_bits, low);
  __syncthreads();  // every thread has read counts[digit]: the gathering reuses the shared memory
  return above;
}

// The finishing block after pass 1: the candidates hold every winner when at least k_row keys
// reached the threshold; else, with the threshold's ties counted (`tie_counts`, one per block of
// the row), the K-th key may be the threshold itself (TIES). Returns whether the row starts over
// (BEHIND): the filter counted the candidates' digits alone, so unless they hold the winners (or
// the ties make up the rest) the histogram says nothing of the row, which starts over at its top
// digit on the input; its last launch catches up (finish_behind).
__device__ __forceinline__ bool after_first_pass(const State& s, State* f, bool strict, bool filter, long long cap,
                                                 int key_bits, const unsigned int* tie_counts, long long* tie_sums) {
  const bool held =
      s.staging == FILTER && f->cand_count >= (unsigned long long)s.k_row && f->cand_count <= (unsigned long long)cap;
  f->source = held ? ON_CANDIDATES : ON_INPUT;
  f->staging = NO_THRESHOLD;
  if (strict && s.staging == FILTER && !held && f->cand_count <= (unsigned long long)cap) {  // the same in the block
    long long part = 0, ties;
    for (long long j = threadIdx.x; j < gridDim.x; j += blockDim.x) part += (long long)__ldcg(tie_counts + j);
    block_scan(part, tie_sums, &ties);
    if ((long long)f->cand_count + ties >= s.k_row) {  // the K-th key is the threshold
      f->mode = TIES;
      f->source = ON_CANDIDATES;
      f->gathered = FROM_TIES;
      f->prefix = s.threshold;
      f->needed = s.k_row - (long long)f->cand_count;
      f->cut = 0;
    }
  }
  const bool restart = filter && !held && f->mode != TIES;
  if (restart) {
    f->staging = BEHIND;
    f->prefix = 0;
    f->cut = key_bits;
    f->width = digit_width(key_bits, key_bits);
    f->needed = s.k_row;
    f->bucket = s.bucket;
  }
  return restart;
}

// The finishing block of the last digit: the K-th key is `f->prefix`; the bucket's winners come
// from the bucket's buffer when it holds them (`staged`), else from the candidates, else from
// the input.
template <class T>
__device__ __forceinline__ void gather_last_digit(const Row<T>& input, const State& s, State* f, bool staged,
                                                  const typename KeyTraits<T>::Key* bucket_key, const Pos* bucket_idx,
                                                  const typename KeyTraits<T>::Key* cand_key, const Pos* cand_idx,
                                                  long long above, long long n, typename KeyTraits<T>::Key* win_key,
                                                  Pos* win_idx, unsigned long long* cursor, unsigned int* counts) {
  typedef typename KeyTraits<T>::Key Key;
  const Key kth = static_cast<Key>(f->prefix);
  if (staged) {
    f->gathered = FROM_BUCKET;
    gather_from_buffer<Key>(bucket_key, bucket_idx, (long long)f->bucket_count, s.cut, s.prefix, kth, f->needed,
                            f->bucket, n, win_key, win_idx, cursor, counts);
  } else if (f->source == ON_CANDIDATES) {
    f->gathered = FROM_CANDIDATES;
    gather_from_buffer<Key>(cand_key, cand_idx, (long long)f->cand_count, s.cut, s.prefix, kth, f->needed, f->bucket, n,
                            win_key, win_idx, cursor, counts);
  } else {
    f->gathered = FROM_INPUT;
    gather_from_input<T>(input, s.cut, s.prefix, kth, above, f->needed, win_key, win_idx, cursor);
  }
}

// One digit pass (or the collection of a row whose bucket was taken whole), for every row at
// once: grid (blocks per row, rows). The block that finishes a row's pass last updates its state;
// see the file's header.
template <class T>
CUTOPK_KERNEL(CUTOPK_MULTIBLOCK_THREADS, 2)
digit_pass(MB_PASS_PARAMS) {
  typedef typename KeyTraits<T>::Key Key;
  const int KEY_BITS = 8 * sizeof(Key);
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int s_last;
  __shared__ unsigned int s_at_threshold;
  __shared__ long long tie_sums[33];
  // More than one digit: a later pass can gather the threshold's ties, so pass 1 stages only the
  // keys above it and counts the ties (with one, the candidates must hold the ties too). Counting
  // costs pass 1 a few percent on an H200 (a flag read per row, instead of this constant, cost
  // twice that); rows of heavy ties gain up to 100x.
  const bool strict = KEY_BITS > CUTOPK_MULTIBLOCK_DIGIT_BITS;
  const long long row = blockIdx.y;
  State* const st = state + row;
  const State s = *st;  // the counters are advanced during the pass: only atomics and the last block read them
  // The same for the whole block: it leaves before any barrier.
  if (s.mode == FINISHED) return;
  const bool select = s.mode == SELECT;
  const bool top = s.cut >= KEY_BITS;  // pass 1: every key is in the race
  const int low = s.cut - s.width;     // the digit's lowest bit (SELECT)
  const bool last_digit = select && low == 0;
  const bool stage_cand = select && top && s.staging == FILTER;
  // Pass 1 with a threshold and keys of more than one digit: the streaming filter (filter_slice).
  const bool filter = strict && stage_cand;
  // A row one digit behind, in the last launch: it counts its next-to-last digit here, stages its
  // bucket and writes the winners above it; the finishing block resolves the last digit too.
  const bool penultimate = select && s.staging == BEHIND && low > 0 && digit_width(KEY_BITS, low) == low;
  const bool stage_bucket = (last_digit || penultimate) && !top;  // with one digit, pass 1's candidates serve
  // DIRECT: the winners above the bucket stay in the candidates (order_winner_tiles picks them).
  const bool write_winners = (last_digit && !(strict && s.staging == DIRECT)) || penultimate || !select;
  const Row<T> r = row_of<T>(in, n, row_stride, col_stride, extents, rows_kind, largest, nan_first, cand_key, cand_idx,
                             cap, s.source == ON_CANDIDATES, (long long)s.cand_count, row);
  // A pass over the candidates shares out the ones pass 1 staged (not the buffer's capacity) over
  // every block of the row, in whole runs of 32.
  const long long cand_per = ((r.length + gridDim.x - 1) / gridDim.x + 31) / 32 * 32;
  const long long per = r.from_cand ? max(32ll, cand_per) : slice;
  const long long begin = (long long)blockIdx.x * per;
  unsigned int* counts = reinterpret_cast<unsigned int*>(smem);
  const int digit_bins = select ? 1 << s.width : 0;
  for (int d = threadIdx.x; d < digit_bins; d += blockDim.x) counts[d] = 0;
  if (threadIdx.x == 0) s_at_threshold = 0;
  __syncthreads();
  const unsigned mask = (1u << s.width) - 1u;
  const Key threshold = static_cast<Key>(s.threshold);
  unsigned int at_threshold = 0;  // this thread's keys equal to the threshold (pass 1, strict)
  if (s.mode == TIES) {
    const Row<T> input = row_of<T>(in, n, row_stride, col_stride, extents, rows_kind, largest, nan_first, cand_key,
                                   cand_idx, cap, false, 0, row);
    gather_threshold_ties<T>(input, s, st, slice, cand_slice, cand_key + row * cap, cand_idx + row * cap,
                             tie_counts + row * gridDim.x, win_key + row * k, win_idx + row * k);
  } else if (filter) {
    if constexpr (8 * sizeof(Key) > CUTOPK_MULTIBLOCK_DIGIT_BITS)  // `filter` is false for one digit
      at_threshold =
          filter_slice<T>(r.bits, r.stride, r.largest, r.nan_first, begin, min(r.length, begin + per), threshold,
                          &st->cand_count, cap, cand_key + row * cap, cand_idx + row * cap, counts, low, mask);
  } else {
    count_and_stage<T>(r, begin, min(r.length, begin + per), s, st, select, top, low, mask, threshold, counts,
                       stage_cand, cap, cand_key + row * cap, cand_idx + row * cap, stage_bucket, bucket_cap,
                       bucket_key + row * bucket_cap, bucket_idx + row * bucket_cap, write_winners, k,
                       win_key + row * k, win_idx + row * k);
  }
  if (!arrive(at_threshold, strict && stage_cand, counts, digit_bins, hist + row * bins,
              tie_counts + row * gridDim.x + blockIdx.x, &st->arrived, &s_at_threshold, &s_last))
    return;  // the same for the whole block

  // The finishing block. Counters written by atomics are read through L2.
  State f = s;
  f.cand_count = __ldcg(&st->cand_count);
  f.bucket_count = __ldcg(&st->bucket_count);
  unsigned long long* cursor = &st->winners;
  f.arrived = 0;
  f.passes = s.passes + 1;
  bool finish = !select;
  if (select) {
    const long long above = next_digit(s, &f, hist + row * bins, counts, digit_bins, low, KEY_BITS);
    // After pass 1 (not a row that starts over, whose top digit is counted in pass 2).
    const bool restart = top && s.staging != BEHIND &&
                         after_first_pass(s, &f, strict, filter, cap, KEY_BITS, tie_counts + row * gridDim.x, tie_sums);
    if (f.mode == TIES || restart) {
      // pass 2 gathers the row, or counts its top digit
    } else if (penultimate) {  // the next-to-last digit of a row one behind: the last one as well, then gather
      finish = true;
      const Row<T> input = row_of<T>(in, n, row_stride, col_stride, extents, rows_kind, largest, nan_first, cand_key,
                                     cand_idx, cap, false, 0, row);
      const bool staged = stage_bucket && f.bucket_count <= (unsigned long long)bucket_cap;
      f.gathered = staged ? FROM_BUCKET : FROM_INPUT;
      finish_behind<T>(input, staged, bucket_key + row * bucket_cap, bucket_idx + row * bucket_cap,
                       (long long)f.bucket_count, s.cut, s.prefix, above, &f, win_key + row * k, win_idx + row * k,
                       cursor, counts);
    } else if (low == 0) {  // the last digit: the K-th key is `prefix`; gather the bucket's winners
      finish = true;
      const bool staged = stage_bucket && f.bucket_count <= (unsigned long long)bucket_cap;
      const Row<T> input = row_of<T>(in, n, row_stride, col_stride, extents, rows_kind, largest, nan_first, cand_key,
                                     cand_idx, cap, false, 0, row);
      gather_last_digit<T>(input, s, &f, staged, bucket_key + row * bucket_cap, bucket_idx + row * bucket_cap,
                           cand_key + row * cap, cand_idx + row * cap, above, n, win_key + row * k, win_idx + row * k,
                           cursor, counts);
    } else if (f.bucket == f.needed) {
      f.mode = COLLECT;  // the bucket is taken whole: the next launch writes its keys and those above
    }
    if (strict && !finish && goes_direct(f, direct)) f.staging = DIRECT;  // never with one digit
  }
  if (finish) {
    if (s.mode == COLLECT) f.gathered = WHOLE;
    if (sort_here)
      order_winners<T>(in, n, row_stride, col_stride, extents, rows_kind, largest, k, by_index, s.k_row, win_key,
                       win_idx, out_vals, out_idx, smem, row);
    else
      pad_winners<Key>(k, s.k_row, win_key + row * k, win_idx + row * k);
    f.mode = FINISHED;
  }
  if (threadIdx.x == 0) {
    f.winners = __ldcg(cursor);
    f.bucket_count = 0;
    *st = f;
    if (finish && !sort_here) write_picks(s, f, cap, k, picks + 4 * row);
  }
}

#undef MB_INPUT
#undef MB_PASS_PARAMS

}  // namespace cutopk::multiblock
