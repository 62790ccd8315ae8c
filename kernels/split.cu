// Split radix select: top-K of a row too long for one block's shared memory, in one launch, on
// GPUs without thread-block clusters (sm_75, sm_80; cluster.cu is sm_90's). `blocks` blocks per
// row, each holding a contiguous slice of the row as keys in its shared memory, the row read from
// global memory once.
//
// Steps, each a function below (the kernel body is their sequence):
// 1. load and select the slice: resident's steps (onchip_select.cuh) on the slice: its K best
//    (key, index) pairs, ties to the lower index, in shared memory.
// 2. publish: those pairs and their count into the row's candidate scratch (global memory).
// 3. arrive: __threadfence(), then an arrival ticket per row (atomicAdd): the block that arrives
//    last, whatever order the blocks ran in (no block ever waits for another), merges. It sets the
//    ticket back to 0, so the next launch (or a CUDA graph's replay) finds it zeroed: the ticket
//    array is zeroed once, when it is allocated (cutopk/cuda/workspace.py), never by a memset.
// 4. merge: the last block loads every block's candidates into its shared memory, in block order
//    (slices of lower indices first; within a block, equal keys are in index order, since
//    place_winners puts both kinds of winners in index order), and runs the same select over them
//    with the candidates' positions as indices: members of the K-th key's bin ranked by position
//    are then ranked by index, as the ordering rules ask.
// 5. order: the winners' positions mapped back to their row indices, then resident's bitonic sort
//    of the K pairs and the values re-read from the input at the winning indices.
// Ties, NaN, -0.0: by the keys (key_traits.cuh) and positions, as above. Rows: regular, lengths or
// CSR segments (row_extent.cuh), the length read in the same launch; slices past it are empty.
// Dtypes: all. Limits (cutopk/cuda/families/split.py): K <= 2048, blocks <= MAX_BLOCKS (256); a
// block's dynamic shared memory holds max(slice, blocks x min(K, slice)) keys after
// onchip::front_bytes. Threads per block: CUTOPK_RESIDENT_THREADS (512).
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "onchip_select.cuh"
#include "order_winners.cuh"
#include "phase_clock.cuh"
#include "entry.cuh"

namespace cutopk::split {

// Blocks per row at most: the merge's block scan over the blocks' counts takes one per thread.
constexpr int MAX_BLOCKS = CUTOPK_SPLIT_MAX_BLOCKS;
static_assert(MAX_BLOCKS < CUTOPK_RESIDENT_THREADS, "one thread per block's count, one for the total");

// A block's shared scalars (static shared memory, about 1.5 KB).
struct Shared {
  onchip::Bucket bucket;
  int scan[33];                  // choose_bin's and candidate_bases' block scans
  unsigned long long scan2[33];  // count_winners' (two counts packed)
  int base[MAX_BLOCKS + 1];      // the merge: candidates of the row's blocks before each block
  int last;                      // this block arrived last for its row
};

// 1-2 (and 4's select). The `len` keys at `keys` (the bucket set up, the top digit counted in
// `hist`): their `take` best pairs (indices first + position) into (win_key, win_idx), over `hist`.
template <class Key>
__device__ __forceinline__ void select_held(Key* keys, int len, long long first, int take, int first_bits,
                                            unsigned* hist, Shared& sh, Key* win_key, unsigned* win_idx) {
  using namespace onchip;
  if (len > take && take > 0) find_bucket(keys, len, first_bits, hist, &sh.bucket, sh.scan, [&](int) { return hist; });
  const Bucket b = sh.bucket;  // a slice of at most K keys keeps all of them as its bucket
  __syncthreads();             // the histogram is read no more: the winners go over it
  const Counts c = count_winners(keys, len, b, sh.scan2);
  place_winners(keys, len, first, b, c, 0, 0, take - b.needed, win_key, win_idx);
  __syncthreads();
}

__device__ __forceinline__ void start_bucket(Shared& sh, int take, int len, int key_bits) {
  if (threadIdx.x == 0) sh.bucket = onchip::Bucket{0ull, take, len, key_bits};  // every key, `take` winners
}

// 2. The slice's `count` winners and their count into the row's candidates of block `slot`.
template <class Key>
__device__ __forceinline__ void publish(const Key* win_key, const unsigned* win_idx, int count, long long slot, int k,
                                        Key* cand_key, unsigned* cand_idx, unsigned* cand_count) {
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    cand_key[slot * k + j] = win_key[j];
    cand_idx[slot * k + j] = win_idx[j];
  }
  if (threadIdx.x == 0) cand_count[slot] = (unsigned)count;
}

// 3. Whether this block is the row's last to arrive (the same answer in every thread). Each
// thread fences its own candidates before the barrier, so thread 0's ticket comes after all of
// them; the last block resets the ticket (no other block of the row touches it again).
__device__ __forceinline__ bool arrive(unsigned* ticket, int blocks, Shared& sh) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const bool last = atomicAdd(ticket, 1u) == (unsigned)blocks - 1;
    if (last) *ticket = 0;
    sh.last = last;
  }
  __syncthreads();
  return sh.last != 0;
}

// The block whose candidates hold merged position p: the last b with base[b] <= p.
__device__ __forceinline__ int block_of(const int* base, int blocks, int p) {
  int lo = 0, hi = blocks - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (base[mid] <= p)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// 4a. sh.base[b]: the candidates of the row's blocks before b (one thread per block, one block
// scan); sh.base[blocks], their total. Loads go past L1 (__ldcg): other blocks wrote them.
__device__ __forceinline__ int candidate_bases(const unsigned* cand_count, long long row, int blocks, Shared& sh) {
  __threadfence();  // the other blocks' candidates, seen after their tickets
  const int t = threadIdx.x;
  const int count = t < blocks ? (int)__ldcg(cand_count + row * blocks + t) : 0;
  int total;
  const int before = block_scan(count, sh.scan, &total);
  if (t <= blocks) sh.base[t] = before;  // thread `blocks` counts none: its prefix is the total
  __syncthreads();
  return total;
}

// 4b. The row's candidates as keys, in block order, into `keys`, the top digit counted.
template <class Key>
__device__ __forceinline__ void load_candidates(const Key* cand_key, long long row, int blocks, int k, const int* base,
                                                int total, int first_bits, Key* keys, unsigned* hist) {
  const int shift = KEY_BITS<Key> - first_bits;
  const unsigned mask = (1u << first_bits) - 1;
  for (int p0 = 0; p0 < total; p0 += blockDim.x) {  // one trip count in every thread (count_digit's match, if on)
    const int p = p0 + (int)threadIdx.x;
    Key key = 0;
    if (p < total) {
      const int b = block_of(base, blocks, p);
      key = __ldcg(cand_key + (row * blocks + b) * k + (p - base[b]));
      keys[p] = key;
    }
    onchip::count_digit(hist, (unsigned)(key >> shift) & mask, p < total);
  }
}

// 5a. The merge's winners' positions, in win_idx, as their indices in the row.
__device__ __forceinline__ void positions_to_indices(unsigned* win_idx, int count, const unsigned* cand_idx,
                                                     long long row, int blocks, int k, const int* base) {
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    const int p = (int)win_idx[j];
    const int b = block_of(base, blocks, p);
    win_idx[j] = __ldcg(cand_idx + (row * blocks + b) * k + (p - base[b]));
  }
  __syncthreads();
}

// One block per row slice; the one to arrive last for its row merges and writes its K.
template <class T>
CUTOPK_KERNEL(CUTOPK_RESIDENT_THREADS, 1)
split_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
           const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
           int slice, int blocks, typename KeyTraits<T>::Key* __restrict__ cand_key,
           unsigned int* __restrict__ cand_idx, unsigned int* __restrict__ cand_count,
           unsigned int* __restrict__ tickets, T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  using namespace onchip;
  CUTOPK_PHASE(0, entry);
  typedef typename KeyTraits<T>::Key Key;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Shared sh;
  const int kp = pow2_at_least(k);
  const Front<Key> f(smem, kp);

  const long long row = blockIdx.x / blocks;
  const long long slot = blockIdx.x;  // = row * blocks + this block's rank in the row
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  const long long first = (blockIdx.x - row * blocks) * (long long)slice;
  const int mine = (int)max(0LL, min((long long)slice, extent.length - first));
  const int take = k < mine ? k : mine;
  zero_bins(f.hist, 1 << FIRST_BITS<Key>);
  start_bucket(sh, take, mine, KEY_BITS<Key>);
  __syncthreads();
  load_row(base + first * col_stride, col_stride, mine, largest, nan_first, KEY_BITS<Key> - FIRST_BITS<Key>,
           FIRST_BITS<Key>, f.keys, f.hist);
  __syncthreads();
  CUTOPK_PHASE(1, load);
  select_held(f.keys, mine, first, take, FIRST_BITS<Key>, f.hist, sh, f.win_key, f.win_idx);
  CUTOPK_PHASE(2, select);
  publish(f.win_key, f.win_idx, take, slot, k, cand_key, cand_idx, cand_count);
  const bool last = arrive(tickets + row, blocks, sh);
  CUTOPK_PHASE(3, publish);
  if (!last) return;

  const int len = (int)extent.length;
  const int k_row = k < len ? k : len;
  const int total = candidate_bases(cand_count, row, blocks, sh);
  zero_bins(f.hist, 1 << FIRST_BITS<Key>);
  start_bucket(sh, k_row, total, KEY_BITS<Key>);
  __syncthreads();
  load_candidates(cand_key, row, blocks, k, sh.base, total, FIRST_BITS<Key>, f.keys, f.hist);
  __syncthreads();
  CUTOPK_PHASE(4, merge_load);
  select_held(f.keys, total, 0, k_row, FIRST_BITS<Key>, f.hist, sh, f.win_key, f.win_idx);  // positions, not indices
  positions_to_indices(f.win_idx, k_row, cand_idx, row, blocks, k, sh.base);
  CUTOPK_PHASE(5, merge_select);
  const winners::Request<T> req{k, by_index != 0, largest != 0, false, out_vals, out_idx, index_bytes};
  winners::finish_winners_sorted(winners::Placed<Key>{f.win_key, f.win_idx, k_row, kp},
                                 winners::Source<T>{base, col_stride, row}, req);
  CUTOPK_PHASE(6, order);
}

}  // namespace cutopk::split
