// multiblock's state (kernels/multiblock.cu): what a row carries from launch to launch (State, in
// global memory), what its launches are given (Input, Buffer, Args: the kernels' parameters as
// structs) and what one pass decides for it from its state at entry (Pass). The other layers:
// multiblock_filter.cuh (pass 1's streaming filter, the counting and staging of a slice),
// multiblock_gather.cuh (the last bucket's winners), multiblock_finish.cuh (the finishing block).
#pragma once

#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"

namespace cutopk {
namespace multiblock {

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
// the last digit, by every block when collecting), so the K pairs are not written and read back.
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
  return cut >= KEY_BITS<Key> ? 0ull : (unsigned long long)(key >> cut);
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
// The row's input, as every kernel takes it (its first parameters, MB_INPUT).
template <class T>
struct Input {
  const T* in;
  long long n;
  long long row_stride;
  long long col_stride;
  const long long* extents;
  int rows_kind;
  int largest;
  int nan_first;
};

// A buffer of (key, position) pairs, `cap` of them a row, rows one after the other: the
// candidates, the last bucket's keys, the winners (cap = K).
template <class Key>
struct Buffer {
  Key* key;
  Pos* idx;
  long long cap;
  // Row `row`'s pairs.
  __device__ __forceinline__ Buffer at(long long row) const { return Buffer{key + row * cap, idx + row * cap, cap}; }
};

// The row's extent (row_extent.cuh), read once per block: the input (`from_cand` false) or the
// candidate buffer's first min(cand_count, cap) pairs.
template <class T>
__device__ __forceinline__ Row<T> row_of(const Input<T>& x, const Buffer<typename KeyTraits<T>::Key>& cand,
                                         bool from_cand, long long cand_count, long long row) {
  Row<T> r;
  r.from_cand = from_cand;
  const RowExtent e = row_extent(row, x.n, x.row_stride, x.col_stride, x.extents, x.rows_kind);
  r.bits = from_cand ? cand.key + row * cand.cap : row_bits(x.in + e.start);
  r.stride = from_cand ? 1 : x.col_stride;
  r.largest = x.largest;
  r.nan_first = x.nan_first;
  r.cand_idx = cand.idx + row * cand.cap;
  r.length = from_cand ? min(cand_count, cand.cap) : e.length;
  return r;
}

// The row's input itself (the gathering steps that read it in index order).
template <class T>
__device__ __forceinline__ Row<T> input_row(const Input<T>& x, const Buffer<typename KeyTraits<T>::Key>& cand,
                                            long long row) {
  return row_of<T>(x, cand, false, 0, row);
}

// digit_pass's parameters (MB_PASS_PARAMS), as its steps take them.
template <class T>
struct Args {
  typedef typename KeyTraits<T>::Key Key;
  Input<T> input;
  long long slice;       // a block's slice of the input
  long long cand_slice;  // a block's share of the candidates (TIES)
  Buffer<Key> cand;      // pass 1's candidates
  Buffer<Key> bucket;    // the last bucket's keys
  Buffer<Key> win;       // the winners, K a row
  int k;
  int by_index;
  int sort_here;     // the finishing block orders the K winners (else order.cu does)
  long long direct;  // DIRECT's bound on the bucket (0: never)
  long long* picks;  // without sort_here: where order.cu finds each row's K pairs
  State* state;
  unsigned int* hist;  // `bins` counts a row
  int bins;
  unsigned int* tie_counts;  // pass 1's ties at the threshold, one a block of each row
  T* out_vals;
  long long* out_idx;
};

// What one digit_pass launch does for its row, decided from the row's state at entry (the same in
// the whole block).
template <class T>
struct Pass {
  typedef typename KeyTraits<T>::Key Key;
  bool strict;         // keys of more than one digit: pass 1 stages the keys above the threshold
  bool select;         // SELECT: a digit is counted
  bool top;            // pass 1: every key is in the race
  bool last_digit;     // SELECT of the last digit
  bool stage_cand;     // pass 1 with a threshold
  bool filter;         // ... with keys of more than one digit: the streaming filter (filter_slice)
  bool penultimate;    // the next-to-last digit of a row one behind, in the last launch
  bool stage_bucket;   // the bucket's keys go to the bucket buffer
  bool write_winners;  // the keys above the bucket (or, collecting, at or above it) are written
  int low;             // the digit's lowest bit (SELECT)
  unsigned mask;       // the digit's bits, once shifted down
  int digit_bins;      // counts of the digit (0 unless SELECT)
  Key threshold;       // pass 1's
  long long begin;     // this block's part of the row's source: [begin, end)
  long long end;
};

// The pass a row in state `s` makes (not FINISHED), and the block's part of its source `r`.
template <class T>
__device__ __forceinline__ Pass<T> plan_pass(const State& s, const Row<T>& r, long long slice) {
  typedef typename KeyTraits<T>::Key Key;
  Pass<T> p;
  // More than one digit: a later pass can gather the threshold's ties, so pass 1 stages only the
  // keys above it and counts the ties (with one, the candidates must hold the ties too). Counting
  // adds one compare per key to pass 1, and this is a compile-time constant rather than a flag
  // read per row so that it folds away; rows of heavy ties would otherwise stage every tie.
  p.strict = KEY_BITS<Key> > CUTOPK_MULTIBLOCK_DIGIT_BITS;
  p.select = s.mode == SELECT;
  p.top = s.cut >= KEY_BITS<Key>;  // pass 1: every key is in the race
  p.low = s.cut - s.width;         // the digit's lowest bit (SELECT)
  p.last_digit = p.select && p.low == 0;
  p.stage_cand = p.select && p.top && s.staging == FILTER;
  p.filter = p.strict && p.stage_cand;
  // A row one digit behind, in the last launch: it counts its next-to-last digit here, stages its
  // bucket and writes the winners above it; the finishing block resolves the last digit too.
  p.penultimate = p.select && s.staging == BEHIND && p.low > 0 && digit_width(KEY_BITS<Key>, p.low) == p.low;
  p.stage_bucket = (p.last_digit || p.penultimate) && !p.top;  // with one digit, pass 1's candidates serve
  // DIRECT: the winners above the bucket stay in the candidates (order_winner_tiles picks them).
  p.write_winners = (p.last_digit && !(p.strict && s.staging == DIRECT)) || p.penultimate || !p.select;
  p.mask = (1u << s.width) - 1u;
  p.digit_bins = p.select ? 1 << s.width : 0;
  p.threshold = static_cast<Key>(s.threshold);
  // A pass over the candidates shares out the ones pass 1 staged (not the buffer's capacity) over
  // every block of the row, in whole runs of 32.
  const long long cand_per = ((r.length + gridDim.x - 1) / gridDim.x + 31) / 32 * 32;
  const long long per = r.from_cand ? max(32ll, cand_per) : slice;
  p.begin = (long long)blockIdx.x * per;
  p.end = min(r.length, p.begin + per);
  return p;
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
// Whether a row's next pass goes DIRECT (see Staging): the last digit, or the collection of a
// bucket taken whole, over candidates that hold every winner, with a bucket of at most `direct`.
__device__ __forceinline__ bool goes_direct(const State& f, long long direct) {
  const bool last_next = f.mode == COLLECT || (f.mode == SELECT && f.cut > 0 && f.cut == f.width);
  return direct > 0 && last_next && f.source == ON_CANDIDATES && f.staging == NO_THRESHOLD && f.bucket <= direct;
}

}  // namespace multiblock
}  // namespace cutopk
