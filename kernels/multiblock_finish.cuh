// multiblock's finishing block (kernels/multiblock.cu): the end of every block's pass (its counts
// and its arrival ticket), and what the row's last block to arrive does: the next digit, the state
// after pass 1, the gathering after the last digit, then the row's K winners ordered and written
// (finish_winners_sorted, order_winners.cuh) or left for order.cu.
#pragma once

#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"
#include "radix_digit.cuh"
#include "order_winners.cuh"
#include "multiblock_state.cuh"
#include "multiblock_gather.cuh"

namespace cutopk {
namespace multiblock {

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

// The finishing block's last step: the row's k_row winners (in the winners' buffer, written by this
// launch's blocks, read through L2) into shared memory, then ordered and written by the shared step
// (winners::finish_winners_sorted: the pow2 bitonic sort, by key, ties by index, or by index; the
// K - k_row padding pairs sort after every winner and the places past k_row get padding), the
// values rebuilt from the keys where the key holds the element's bits (KeyTraits<T>::key_holds_bits;
// else, NaN and zero keys, re-read from the input at the index: a value read back by index costs
// a whole sector, so with large K those reads approach a fraction of the input's own traffic).
template <class T>
__device__ __forceinline__ void order_row(const Args<T>& a, int k_row, unsigned char* smem, long long row) {
  typedef typename KeyTraits<T>::Key Key;
  const int kp = pow2_at_least(a.k);
  Key* keys = reinterpret_cast<Key*>(smem);
  Pos* idx = reinterpret_cast<Pos*>(smem + ((kp * (int)sizeof(Key) + 15) & ~15));
  for (int j = threadIdx.x; j < k_row; j += blockDim.x) {
    keys[j] = __ldcg(a.win.key + row * a.k + j);
    idx[j] = __ldcg(a.win.idx + row * a.k + j);
  }
  const Input<T>& x = a.input;
  const RowExtent extent = row_extent(row, x.n, x.row_stride, x.col_stride, x.extents, x.rows_kind);
  const winners::Placed<Key> held{keys, idx, k_row, kp};
  const winners::Source<T> src{x.in + extent.start, x.col_stride, row};
  const winners::Request<T> req{a.k, a.by_index != 0, x.largest != 0, true, a.out_vals, a.out_idx, 8};
  winners::finish_winners_sorted(held, src, req);
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

// The finishing block of a SELECT pass: the next digit narrows `*f`; after pass 1 the row may
// start over or go TIES; after the last digit (or the next-to-last of a row one behind) the last
// bucket's winners are gathered. Returns whether the row's winners are all written.
template <class T>
__device__ __forceinline__ bool resolve_digit(const Args<T>& a, const Pass<T>& p, const State& s, State* f,
                                              unsigned long long* cursor, unsigned int* counts, long long* tie_sums,
                                              long long row) {
  typedef typename KeyTraits<T>::Key Key;
  const long long above = next_digit(s, f, a.hist + row * a.bins, counts, p.digit_bins, p.low, KEY_BITS<Key>);
  // After pass 1 (not a row that starts over, whose top digit is counted in pass 2).
  const bool restart =
      p.top && s.staging != BEHIND &&
      after_first_pass(s, f, p.strict, p.filter, a.cand.cap, KEY_BITS<Key>, a.tie_counts + row * gridDim.x, tie_sums);
  // The gathering's values are computed in its branches, not before them: live across the branches,
  // they cost digit_pass registers (NVRTC 12.9, 8-bit keys).
  bool finish = false;
  if (f->mode == TIES || restart) {
    // pass 2 gathers the row, or counts its top digit
  } else if (p.penultimate) {  // the next-to-last digit of a row one behind: the last one as well, then gather
    finish = true;
    const bool staged = p.stage_bucket && f->bucket_count <= (unsigned long long)a.bucket.cap;
    f->gathered = staged ? FROM_BUCKET : FROM_INPUT;
    const Buffer<Key> b = a.bucket.at(row);
    finish_behind<T>(input_row<T>(a.input, a.cand, row), staged, Pairs<Key>{b.key, b.idx, (long long)f->bucket_count},
                     BucketBits{s.cut, s.prefix}, above, f,
                     Winners<Key>{a.win.key + row * a.k, a.win.idx + row * a.k, cursor}, counts);
  } else if (p.low == 0) {  // the last digit: the K-th key is `prefix`; gather the bucket's winners
    finish = true;
    const bool staged = p.stage_bucket && f->bucket_count <= (unsigned long long)a.bucket.cap;
    gather_last_digit<T>(input_row<T>(a.input, a.cand, row), s, f, staged, a.bucket.at(row), a.cand.at(row), above,
                         a.input.n, Winners<Key>{a.win.key + row * a.k, a.win.idx + row * a.k, cursor}, counts);
  } else if (f->bucket == f->needed) {
    f->mode = COLLECT;  // the bucket is taken whole: the next launch writes its keys and those above
  }
  if (p.strict && !finish && goes_direct(*f, a.direct)) f->staging = DIRECT;  // never with one digit
  return finish;
}

// The row's last block to arrive: its next state (counters written by atomics read through L2),
// and when the row is done its outputs (sort_here) or its padded K pairs and picks for order.cu.
template <class T>
__device__ __forceinline__ void finish_pass(const Args<T>& a, const Pass<T>& p, const State& s, State* st,
                                            unsigned int* counts, unsigned char* smem, long long* tie_sums,
                                            long long row) {
  typedef typename KeyTraits<T>::Key Key;
  State f = s;
  f.cand_count = __ldcg(&st->cand_count);
  f.bucket_count = __ldcg(&st->bucket_count);
  unsigned long long* cursor = &st->winners;
  f.arrived = 0;
  f.passes = s.passes + 1;
  const bool finish = p.select ? resolve_digit<T>(a, p, s, &f, cursor, counts, tie_sums, row) : true;
  if (finish) {
    if (s.mode == COLLECT) f.gathered = WHOLE;
    if (a.sort_here)
      order_row<T>(a, s.k_row, smem, row);
    else
      pad_winners<Key>(a.k, s.k_row, a.win.key + row * a.k, a.win.idx + row * a.k);
    f.mode = FINISHED;
  }
  if (threadIdx.x == 0) {
    f.winners = __ldcg(cursor);
    f.bucket_count = 0;
    *st = f;
    if (finish && !a.sort_here) write_picks(s, f, a.cand.cap, a.k, a.picks + 4 * row);
  }
}

}  // namespace multiblock
}  // namespace cutopk
