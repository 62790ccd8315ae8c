// Multi-block radix select: top-K of few long rows (and of any rows with a large K), with many
// blocks per row so that a handful of rows still fills the GPU.
//
// A row is cut into `blocks_per_row` slices, one block each. The kernels are launched in a fixed
// sequence (no host synchronisation, so the whole call can be captured in a CUDA graph); each
// reads the per-row state the previous one left in global memory:
//   mb_init                       state: prefix 0, shift at the top digit, needed = K
//   (mb_histogram, mb_select) x D  D = key bits / 8 digit passes: every block histograms the next
//                                 digit of its slice's keys that match the prefix (warp-aggregated
//                                 counts in shared memory, then one global atomic per bin);
//                                 mb_select finds the bucket holding the K-th key, and marks the
//                                 row done as soon as that bucket is taken whole (early stop) or
//                                 every bit is resolved; later passes of a done row return at once.
//   mb_count_ties                 each block counts its slice's keys in the final bucket
//   mb_scan_ties                  exclusive prefix sums of those counts over the slices, in order
//   mb_collect                    keys above the bucket are winners; of the bucket's keys the
//                                 first `needed` in index order (block prefix sums plus the
//                                 slice's offset) are winners: the lower-index tie rule exactly.
// The launcher then orders the K winners (by index, then stably by key) and gathers the values.
// Dtypes: all (KeyTraits). Threads per block: 256. Scratch: 40 bytes of state and 256 counters
// per row, one counter per slice, and K (key, index) pairs per row for the winners.
#include "key_traits.cuh"
#include "block_sort.cuh"

struct MbState {
  unsigned long long prefix;  // key bits at and above `shift` of the bucket holding the K-th key
  long long needed;           // winners still to take from that bucket
  unsigned long long bucket;  // keys in that bucket
  int shift;
  int done;
  long long above;  // winners above the bucket placed so far (mb_collect's cursor)
};

extern "C" __global__ void __launch_bounds__(256)
    mb_init(MbState* __restrict__ state, unsigned long long* __restrict__ hist, long long rows, int k, int key_bits) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t < rows) {
    MbState s;
    s.prefix = 0;
    s.needed = k;
    s.bucket = 0;
    s.shift = key_bits - 8;
    s.done = 0;
    s.above = 0;
    state[t] = s;
  }
  if (t < rows * 256) hist[t] = 0;
}

template <class T>
__global__ void __launch_bounds__(256)
    mb_histogram(const T* __restrict__ in, long long n, long long row_stride, long long col_stride, int largest,
                 int nan_first, long long slice, const MbState* __restrict__ state,
                 unsigned long long* __restrict__ hist) {
  typedef typename KeyTraits<T>::Key Key;
  const int KEY_BITS = 8 * sizeof(Key);
  const long long row = blockIdx.y;
  if (state[row].done) return;  // the same for the whole block: it exits before any barrier
  __shared__ unsigned int counts[256];
  for (int d = threadIdx.x; d < 256; d += blockDim.x) counts[d] = 0;
  __syncthreads();
  const int shift = state[row].shift;
  const unsigned long long prefix = state[row].prefix;
  const bool first = shift + 8 >= KEY_BITS;
  const T* base = in + row * row_stride;
  const long long begin = (long long)blockIdx.x * slice;
  const long long end = min(n, begin + slice);
  for (long long chunk = begin; chunk < end; chunk += blockDim.x) {
    const long long i = chunk + threadIdx.x;
    const bool valid = i < end;
    const unsigned long long key = valid ? KeyTraits<T>::to_key(base[i * col_stride], largest, nan_first) : 0;
    cutopk_warp_histogram_add(counts, (unsigned)(key >> shift) & 255u,
                              valid && (first || (key >> (shift + 8)) == prefix));
  }
  __syncthreads();
  for (int d = threadIdx.x; d < 256; d += blockDim.x)
    if (counts[d]) atomicAdd(&hist[row * 256 + d], (unsigned long long)counts[d]);
}

extern "C" __global__ void __launch_bounds__(256)
    mb_select(MbState* __restrict__ state, unsigned long long* __restrict__ hist) {
  const long long row = blockIdx.x;
  const int done = state[row].done;
  // Every thread reads `done` before thread 0 may set it below: a thread reading it afterwards
  // would leave the block while the others wait at the barrier (the simulator caught this).
  __syncthreads();
  if (done) return;
  unsigned long long* h = hist + row * 256;
  if (threadIdx.x < 32) {
    // One warp finds the bucket (a suffix scan with shuffles, not a serial walk of 256 bins).
    // Every lane reads the state before the scan's shuffles; only lane 0 writes it, after them.
    MbState s = state[row];
    long long above;
    const int digit = cutopk_warp_find_bucket(h, s.needed, &above);
    if (threadIdx.x == 0) {
      s.needed -= above;
      s.bucket = h[digit];
      s.prefix = (s.prefix << 8) | (unsigned long long)digit;
      // Early stop: the whole bucket is taken, so no lower digit can change the selection.
      if ((long long)s.bucket == s.needed || s.shift == 0)
        s.done = 1;
      else
        s.shift -= 8;
      state[row] = s;
    }
  }
  __syncthreads();
  for (int d = threadIdx.x; d < 256; d += blockDim.x) h[d] = 0;  // ready for the next pass
}

template <class T>
__global__ void __launch_bounds__(256)
    mb_count_ties(const T* __restrict__ in, long long n, long long row_stride, long long col_stride, int largest,
                  int nan_first, long long slice, const MbState* __restrict__ state, long long* __restrict__ ties) {
  const long long row = blockIdx.y;
  const int shift = state[row].shift;
  const unsigned long long prefix = state[row].prefix;
  const T* base = in + row * row_stride;
  const long long begin = (long long)blockIdx.x * slice;
  const long long end = min(n, begin + slice);
  __shared__ unsigned long long count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  unsigned long long mine = 0;
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const unsigned long long key = KeyTraits<T>::to_key(base[i * col_stride], largest, nan_first);
    mine += (key >> shift) == prefix;
  }
  if (mine) atomicAdd(&count, mine);
  __syncthreads();
  if (threadIdx.x == 0) ties[row * gridDim.x + blockIdx.x] = (long long)count;
}

extern "C" __global__ void __launch_bounds__(256)
    mb_scan_ties(long long* __restrict__ ties, long long rows, int blocks_per_row) {
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  long long running = 0;
  for (int b = 0; b < blocks_per_row; ++b) {
    const long long count = ties[row * blocks_per_row + b];
    ties[row * blocks_per_row + b] = running;
    running += count;
  }
}

template <class T>
__global__ void __launch_bounds__(256)
    mb_collect(const T* __restrict__ in, long long n, long long row_stride, long long col_stride, int largest,
               int nan_first, long long slice, int k, MbState* __restrict__ state, const long long* __restrict__ ties,
               typename KeyTraits<T>::Key* __restrict__ win_key, long long* __restrict__ win_idx) {
  typedef typename KeyTraits<T>::Key Key;
  const long long row = blockIdx.y;
  const int shift = state[row].shift;
  const unsigned long long prefix = state[row].prefix;
  const long long needed = state[row].needed;
  const long long first_tie = k - needed;  // the bucket's winners follow the winners above it
  const T* base = in + row * row_stride;
  const long long begin = (long long)blockIdx.x * slice;
  const long long end = min(n, begin + slice);
  __shared__ int s_warp[32];
  __shared__ int s_total;
  __shared__ long long s_cursor;
  long long tie_rank = ties[row * gridDim.x + blockIdx.x];  // ties in the slices before this one
  for (long long chunk = begin; chunk < end; chunk += blockDim.x) {
    const long long i = chunk + threadIdx.x;
    const bool valid = i < end;
    const Key key = valid ? KeyTraits<T>::to_key(base[i * col_stride], largest, nan_first) : Key(0);
    const unsigned long long top = (unsigned long long)key >> shift;
    const bool above = valid && top > prefix;
    const bool tie = valid && top == prefix;
    // Winners above the bucket: any order (the launcher sorts), one atomic per chunk.
    const int rank = cutopk_block_rank(above, s_warp, &s_total);
    if (threadIdx.x == 0 && s_total)
      s_cursor = atomicAdd((unsigned long long*)&state[row].above, (unsigned long long)s_total);
    __syncthreads();
    if (above) {
      win_key[row * k + s_cursor + rank] = key;
      win_idx[row * k + s_cursor + rank] = i;
    }
    // Ties: ranked in index order across the whole row.
    const int tie_pos = cutopk_block_rank(tie, s_warp, &s_total);
    if (tie && tie_rank + tie_pos < needed) {
      win_key[row * k + first_tie + tie_rank + tie_pos] = key;
      win_idx[row * k + first_tie + tie_rank + tie_pos] = i;
    }
    tie_rank += s_total;
    __syncthreads();  // s_total and s_cursor are rewritten by the next chunk
  }
}
