// Radix select: top-K of a long row (K <= 1024), one block per row.
//
// 1. Find the K-th key digit by digit from the top (8-bit digits over KeyTraits keys): each
//    pass histograms, in 32-bit shared counters (a plain shared atomic per key), the
//    next digit of the keys that share the prefix found so far, reading the row (or buffer)
//    through the streaming loader (row_loads.cuh: several loads in flight per thread,
//    16-byte loads when the row is contiguous); one warp then finds the bucket holding the K-th key
//    (suffix scan with shuffles). The passes stop as soon as that bucket is small enough to hold
//    in shared memory (`cap` candidates), or when every bit is resolved.
// 2. Candidate buffer (global scratch, `buf_cap` entries per row, 0 = none): the first time the
//    bucket is larger than `cap` but fits the buffer, one read of the row moves the keys above
//    the bucket (fewer than K: all winners) to shared memory and the bucket's (key, index) pairs
//    to the buffer, in index order (block prefix sums over ballots, never atomics, so the buffer
//    keeps the lower-index tie rule: one block scan per loader call, i.e. per blockDim x 16
//    bytes on the contiguous path). Later passes and the compaction read the buffer, not the
//    row: the row is read once per pass only until the bucket fits the buffer.
// 3. Compact: one more read (of the buffer, or of the row) puts the keys above the bucket
//    (winners) and the bucket's keys (the candidates) in shared memory. The candidates are
//    sorted by (key, index) and the first ones still needed join the winners: ties at the
//    boundary go to lower indices exactly. If the bucket never got small (a huge run of one key
//    at the K-th place), the last pass instead takes the first equal keys in index order with
//    block prefix sums (block_scan), never with atomics, which would reorder them.
// 4. The K winners are sorted into the requested order (bitonic) and written; values are
//    re-read from the input at the winning indices.
// Rows: regular, with lengths, or CSR segments (row_extent.cuh), read once per row; every step
// above reads only the row's own length. A row shorter than K skips steps 1-3: its elements all
// win (one read), are ordered by step 4, and the output positions past them get padding.
// Reads of the row: one per digit pass until the bucket fits the buffer or `cap` (typically 1
// or 2) plus one. Dtypes: all (8/16/32/64-bit keys: up to 1/2/4/8 passes). Limits: K <= 1024;
// shared memory (kp + cap) * (8 + sizeof(Key)) bytes, kp = K rounded up to a power of two (the
// dispatcher keeps it within 48 KB); rows shorter than 2^32 (32-bit counters). Scratch: buf_cap * (sizeof(Key) + 4)
// bytes per row (32-bit buffer indices: the dispatcher passes buf_cap = 0 for rows of 2^32 or more). Threads per block:
// CUTOPK_RADIX_THREADS (a multiple of 32: block_scan needs whole warps). Indices are 64-bit otherwise;
// the output takes them as 4 or 8 bytes (index_bytes).
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"
#include "row_loads.cuh"
#include "radix_digit.cuh"
#include "phase_clock.cuh"
#include "entry.cuh"

namespace cutopk::radix {

// A row shorter than K: every element wins, in one read (the caller orders and pads them).
template <class T, class Key>
__device__ __forceinline__ void take_whole_row(const T* base, long long col_stride, long long length, int largest,
                                               int nan_first, Key* win_key, unsigned long long* win_idx) {
  stream_row(row_bits(base), col_stride, 0, length, threadIdx.x, blockDim.x, [&](const auto& run) {
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e)
      if (e < run.count) {
        win_key[run.first + e] = KeyTraits<T>::from_bits(run.bits[e], largest, nan_first);
        win_idx[run.first + e] = (unsigned long long)(run.first + e);
      }
  });
}

// 2. One read of the row: keys above the bucket (digits at `now.shift` above `now.prefix`) join
// the winners (any order: the final sort restores it), the bucket's (key, index) pairs go to the
// buffer in index order (block prefix sums, never atomics).
template <class T, class Key>
__device__ __forceinline__ void move_bucket_to_buffer(const T* base, long long col_stride, long long len,
                                                      const DigitState& now, int largest, int nan_first, Key* win_key,
                                                      unsigned long long* win_idx, Key* bkey, unsigned* bidx,
                                                      int* s_above, int* s_scan) {
  long long taken = 0;  // bucket keys moved so far: the same in every thread
  stream_row(row_bits(base), col_stride, 0, len, threadIdx.x, blockDim.x, [&](const auto& run) {
    Key keys[CUTOPK_RUN_SIZE(run)];
    int members = 0;
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      keys[e] = KeyTraits<T>::from_bits(run.bits[e], largest, nan_first);
      const Key digits = static_cast<Key>(keys[e] >> now.shift);
      if (e < run.count && digits > static_cast<Key>(now.prefix)) {
        const int slot = atomicAdd(s_above, 1);  // order is restored by the final sort
        win_key[slot] = keys[e];
        win_idx[slot] = (unsigned long long)(run.first + e);
      }
      members += e < run.count && digits == static_cast<Key>(now.prefix);
    }
    int total;
    long long at = taken + block_scan(members, s_scan, &total);
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e)
      if (e < run.count && static_cast<Key>(keys[e] >> now.shift) == static_cast<Key>(now.prefix)) {
        bkey[at] = keys[e];
        bidx[at] = (unsigned)(run.first + e);
        ++at;
      }
    taken += total;
  });
}

// The state the block shares across the steps: references to separate __shared__ variables (one
// __shared__ struct of them made nvcc 13.0's 8-bit builds 60% longer, at 124-128 registers).
struct Shared {
  unsigned int* hist;  // [256]
  DigitState& state;   // shift: the digit being counted (lowered after each pass)
  long long& len;      // elements in the current source
  int& buffered;       // whether the source is the candidate buffer (else the row)
  int& above;          // winners above the bucket placed so far (< K)
  int& cands;
  int* scan;  // [33]: block_scan's
};

// Where a pass reads the keys: the row's element bits (`col_stride` apart) or, `buffered`, the
// bucket's keys in the row's buffer with their indices `bidx`; `len` of them. The steps take it
// by value, a copy as their locals once were: through a reference, nvcc 13.0 emitted different
// (if equivalent) PTX for the kernel.
template <class Key>
struct KeySource {
  const Key* src;
  bool buffered;
  long long col_stride;
  long long len;
  const unsigned* bidx;

  // Calls visit(run) on every run of the source's keys (stream_row, the block's threads in turn).
  template <class Visit>
  __device__ __forceinline__ void stream(Visit&& visit) const {
    stream_row(src, buffered ? 1 : col_stride, 0, len, threadIdx.x, blockDim.x, visit);
  }
  // A run element's key: the buffer holds keys already, the row the elements' bits.
  template <class T>
  __device__ __forceinline__ Key key(Key bits, int largest, int nan_first) const {
    return buffered ? bits : KeyTraits<T>::from_bits(bits, largest, nan_first);
  }
  // The row index of the source's element at `at`.
  __device__ __forceinline__ unsigned long long index(long long at) const {
    return buffered ? (unsigned long long)bidx[at] : (unsigned long long)at;
  }
};

// 1. Digit passes (and 2. the move to the buffer) until the bucket of the K-th key holds at most
// `cap` keys or every bit is resolved; `sh.state` then names the bucket (its shift not lowered).
template <class T, class Key>
__device__ __forceinline__ void find_bucket(Shared& sh, const T* base, long long col_stride, int largest, int nan_first,
                                            int cap, long long buf_cap, Key* win_key, unsigned long long* win_idx,
                                            Key* bkey, unsigned* bidx) {
  while (true) {
    for (int d = threadIdx.x; d < 256; d += blockDim.x) sh.hist[d] = 0;
    __syncthreads();
    const DigitState st = sh.state;
    const bool buffered = sh.buffered;
    const long long len = sh.len;
    const bool top = st.shift + 8 >= KEY_BITS<Key>;
    const KeySource<Key> from{buffered ? bkey : row_bits(base), buffered, col_stride, len, bidx};
    from.stream(
        [&](const auto& run) { count_run<T>(sh.hist, run, buffered, largest, nan_first, st.shift, st.prefix, top); });
    __syncthreads();
    if (threadIdx.x < 32) {
      DigitState s = st;
      digit_step(sh.hist, &s);
      if (threadIdx.x == 0) sh.state = s;
    }
    __syncthreads();
    const DigitState now = sh.state;  // the same in every thread
    if (now.bucket <= (unsigned long long)cap || now.shift == 0) break;
    if (!buffered && now.bucket <= (unsigned long long)buf_cap) {
      move_bucket_to_buffer<T>(base, col_stride, len, now, largest, nan_first, win_key, win_idx, bkey, bidx, &sh.above,
                               sh.scan);
      if (threadIdx.x == 0) {
        sh.buffered = 1;
        sh.len = (long long)now.bucket;
      }
    }
    __syncthreads();  // every thread has read the state before thread 0 moves to the next digit
    if (threadIdx.x == 0) sh.state.shift -= 8;
    __syncthreads();
  }
}

// 3a. The bucket fits shared memory: one read puts the keys above it (winners) and its keys
// (candidates, at kp) in shared memory; the candidates sorted by (key, index) give the first
// `fin.needed` winners still missing, ties at the boundary to lower indices.
template <class T, class Key>
__device__ __forceinline__ void take_from_bucket(Shared& sh, const KeySource<Key> from, const DigitState& fin,
                                                 int above, int kp, int largest, int nan_first, Key* win_key,
                                                 unsigned long long* win_idx) {
  typedef unsigned long long Index;
  const Key prefix = static_cast<Key>(fin.prefix);
  Key* cand_key = win_key + kp;
  Index* cand_idx = win_idx + kp;
  from.stream([&](const auto& run) {
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      const Key key = from.template key<T>(run.bits[e], largest, nan_first);
      const Key digits = static_cast<Key>(key >> fin.shift);
      if (e < run.count && digits >= prefix) {
        const Index index = from.index(run.first + e);
        // Any order: the winners by the final sort, the candidates by the sort below.
        const int slot = digits > prefix ? atomicAdd(&sh.above, 1) : kp + atomicAdd(&sh.cands, 1);
        win_key[slot] = key;  // cand_key == win_key + kp, cand_idx == win_idx + kp
        win_idx[slot] = index;
      }
    }
  });
  __syncthreads();
  const int cands = sh.cands;
  sort_padded(cand_key, cand_idx, cands, pow2_at_least(cands), false);
  for (int j = threadIdx.x; j < fin.needed; j += blockDim.x) {
    win_key[above + j] = cand_key[j];
    win_idx[above + j] = cand_idx[j];
  }
}

// 3b. Every bit is resolved (shift == 0) and more than `cap` keys equal the K-th key: the keys
// above it win, and the first `fin.needed` equal ones in index order (block prefix sums; the
// buffer is in index order too).
template <class T, class Key>
__device__ __forceinline__ void take_first_ties(Shared& sh, const KeySource<Key> from, const DigitState& fin, int above,
                                                int largest, int nan_first, Key* win_key, unsigned long long* win_idx) {
  typedef unsigned long long Index;
  const Key prefix = static_cast<Key>(fin.prefix);
  long long taken = 0;  // equal keys seen so far: the same in every thread
  from.stream([&](const auto& run) {
    Key keys[CUTOPK_RUN_SIZE(run)];
    int ties = 0;
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      keys[e] = from.template key<T>(run.bits[e], largest, nan_first);
      // `buffered` tested ahead of index()'s own test: nvcc 13.0 then keeps the 16-bit floats' kernel
      // at 96 registers (105 without it).
      const Index index = from.buffered && e < run.count ? from.index(run.first + e) : (Index)(run.first + e);
      if (e < run.count && keys[e] > prefix) {
        const int slot = atomicAdd(&sh.above, 1);
        win_key[slot] = keys[e];
        win_idx[slot] = index;
      }
      ties += e < run.count && keys[e] == prefix;
    }
    int total;
    long long position = taken + block_scan(ties, sh.scan, &total);
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e)
      if (e < run.count && keys[e] == prefix) {
        if (position < fin.needed) {
          win_key[above + position] = keys[e];
          win_idx[above + position] = from.index(run.first + e);
        }
        ++position;
      }
    taken += total;
  });
}

// One block per SM named explicitly (up to 128 registers): with the block size alone ptxas capped
// the kernel at 64 registers and spilled.
template <class T>
CUTOPK_KERNEL(CUTOPK_RADIX_THREADS, 1)
radix_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
           const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
           int cap, long long buf_cap, typename KeyTraits<T>::Key* __restrict__ buf_key, unsigned* __restrict__ buf_idx,
           T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  CUTOPK_PHASE(0, entry);
  typedef typename KeyTraits<T>::Key Key;
  typedef unsigned long long Index;
  const int kp = pow2_at_least(k);
  extern __shared__ __align__(16) unsigned char smem[];
  Index* win_idx = reinterpret_cast<Index*>(smem);            // then the candidates' indices (cap)
  Key* win_key = reinterpret_cast<Key*>(win_idx + kp + cap);  // then the candidates' keys
  __shared__ unsigned int s_hist[256];
  __shared__ DigitState s_state;
  __shared__ long long s_len;
  __shared__ int s_buffered;
  __shared__ int s_above;
  __shared__ int s_cands;
  __shared__ int s_scan[33];
  Shared sh{s_hist, s_state, s_len, s_buffered, s_above, s_cands, s_scan};

  const long long row = blockIdx.x;
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  if (extent.length < k) {  // the same in the whole block
    take_whole_row(base, col_stride, extent.length, largest, nan_first, win_key, win_idx);
    __syncthreads();
    write_sorted(win_key, win_idx, (int)extent.length, k, kp, by_index != 0, base, col_stride, out_vals, out_idx,
                 index_bytes, row);
    return;
  }
  Key* bkey = buf_key + row * buf_cap;
  unsigned* bidx = buf_idx + row * buf_cap;
  if (threadIdx.x == 0) {
    sh.state.prefix = 0;
    sh.state.needed = k;
    sh.state.bucket = 0;
    sh.state.shift = KEY_BITS<Key> - 8;
    sh.len = extent.length;
    sh.buffered = 0;
    sh.above = 0;
  }
  __syncthreads();
  find_bucket(sh, base, col_stride, largest, nan_first, cap, buf_cap, win_key, win_idx, bkey, bidx);
  CUTOPK_PHASE(1, bucket);

  // 3. Compaction (from the row or the buffer). The shift was not lowered: the bucket is the
  // keys whose bits at and above `shift` equal `prefix`.
  const DigitState fin = sh.state;
  const bool buffered = sh.buffered;
  const long long len = sh.len;
  const int above = k - (int)fin.needed;
  const Key* src = buffered ? bkey : row_bits(base);
  if (threadIdx.x == 0) sh.cands = 0;
  __syncthreads();
  const KeySource<Key> from{src, buffered, col_stride, len, bidx};
  if (fin.bucket <= (unsigned long long)cap)
    take_from_bucket<T>(sh, from, fin, above, kp, largest, nan_first, win_key, win_idx);
  else
    take_first_ties<T>(sh, from, fin, above, largest, nan_first, win_key, win_idx);
  __syncthreads();
  CUTOPK_PHASE(2, compact);

  // 4. Order the K winners and write them.
  write_sorted(win_key, win_idx, k, k, kp, by_index != 0, base, col_stride, out_vals, out_idx, index_bytes, row);
  CUTOPK_PHASE(3, order);
}

}  // namespace cutopk::radix
