// Resident radix select: top-K of a row that fits in shared memory, in one launch, one block per
// row, the row read from global memory once.
//
// Steps, each a function below (the kernel body is their sequence):
// 1. load: the row's keys (KeyTraits, order-preserving) into shared memory through the streaming
//    loader (row_loads.cuh: 16-byte loads, several in flight), counting the top digit on the way:
//    CUTOPK_RESIDENT_DIGIT_BITS (12) bits, so that a float32 row splits on its sign, exponent and
//    3 mantissa bits (radix.cu's 8-bit top digit is sign and 7 exponent bits: real data falls in
//    one bin). Counters are 32-bit shared, a plain atomicAdd per key (radix_digit.cuh).
// 2. choose the bin: the bin holding the K-th key, by one block scan over the bins (8 per thread,
//    counted from the top bin down): the thread whose bins cross K is the one that records it.
// 3. refine: the next digit (12 bits, or what is left) of the keys still in the race, counted from
//    the shared copy only; then choose again. Stops when the bin holds exactly the winners still
//    needed, or when every bit is resolved (the bin is then one key value: ties).
// 4. collect: the keys above the bin (winners, any order) and the bin's members of lowest index
//    (ranked by index: a count per warp over a contiguous segment, one block scan of the warps'
//    counts, then ballots in index order), at most K pairs, over the histogram's shared memory.
// 5. order (order_winners.cuh): by index a compaction of a bitmap of the winners' positions; by
//    value a counting scatter on a digit of the winners' own keys, each bin's range then sorted by
//    its winners or a warp (the pow2 bitonic sort of the K pairs where a range is too long). The
//    values from the winners' keys, re-read from the input only where a key cannot give the bits
//    back (NaN payloads, -0.0), so their bits are the input's.
// Ties: equal keys go to the lower index (the bin's members are ranked by index; the order's
// (key, index) is a total one). NaN, -0.0: by the keys (key_traits.cuh). Rows: regular, with
// lengths, or CSR segments (row_extent.cuh), the length read in the same launch; a row no longer
// than K has all its elements win, and output positions past them get padding.
// Dtypes: all (8/16/32/64-bit keys: 1/2/3/6 digits at most). Limits: K <= 2048 (the dispatcher's),
// rows of n keys with max(2^12 x 4, pow2(K) x (4 + key bytes)) + max(n x key bytes,
// winners::scratch_bytes(n)) of dynamic shared memory (on an H100's 223 KB: 52K float32 keys at
// K <= 1024, 104K 16-bit keys), so n < 2^31 and 32-bit counts and indices hold. Threads per block:
// CUTOPK_RESIDENT_THREADS (512, whole warps); (512, 2) launch bounds (8-bit keys: (512, 1)).
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "onchip_select.cuh"
#include "order_winners.cuh"
#include "phase_clock.cuh"
#include "entry.cuh"

namespace cutopk::resident {

// Two blocks per SM (64 registers) where their shared memory fits, for batches of short rows; 8-bit
// keys come 16 to a load, and NVRTC 13.5 spilled them at 64 registers on sm_90: one block per SM.
template <class T>
CUTOPK_KERNEL(CUTOPK_RESIDENT_THREADS, sizeof(T) == 1 ? 1 : 2)
resident_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
              const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
              T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  using namespace onchip;
  CUTOPK_PHASE(0, entry);
  typedef typename KeyTraits<T>::Key Key;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Bucket s_bucket;
  __shared__ int s_scan[33];                  // choose_bin's block scans
  __shared__ unsigned long long s_scan2[33];  // count_winners' (two counts packed)
  __shared__ int s_taken;                     // gather_winners' slots taken
  const int kp = pow2_at_least(k);
  const Front<Key> f(smem, kp);

  const long long row = blockIdx.x;
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  const int len = (int)extent.length;  // < 2^31: the row fits in shared memory
  const int k_row = k < len ? k : len;
  zero_bins(f.hist, 1 << FIRST_BITS<Key>);
  if (threadIdx.x == 0) {
    s_bucket = Bucket{0ull, k_row, len, KEY_BITS<Key>};  // every key, k_row winners to take
    s_taken = 0;
  }
  __syncthreads();
  load_row(base, col_stride, len, largest, nan_first, KEY_BITS<Key> - FIRST_BITS<Key>, FIRST_BITS<Key>, f.keys, f.hist);
  __syncthreads();
  CUTOPK_PHASE(1, load);
  if (len > k && k > 0)
    find_bucket(f.keys, len, FIRST_BITS<Key>, f.hist, &s_bucket, s_scan, [&](int) { return f.hist; });
  const Bucket b = s_bucket;  // a row of at most K keeps the whole row as its bucket
  __syncthreads();            // the histogram is read no more: the winners go over it
  CUTOPK_PHASE(2, bucket);
  if (b.count == b.needed) {  // every member wins: no ranking by index (the same in every thread)
    gather_winners(f.keys, len, b, &s_taken, f.win_key, f.win_idx);
  } else {
    const Counts c = count_winners(f.keys, len, b, s_scan2);
    place_winners(f.keys, len, 0, b, c, 0, 0, k_row - b.needed, f.win_key, f.win_idx);
  }
  CUTOPK_PHASE(3, collect);
  // The row's keys are dead once the winners are placed: the ordering's scratch goes over them.
  const winners::Placed<Key> held{f.win_key, f.win_idx, k_row, kp};
  const winners::Request<T> req{k, by_index != 0, largest != 0, true, out_vals, out_idx, index_bytes};
  winners::finish_winners(held, reinterpret_cast<unsigned char*>(f.keys), len,
                          winners::Source<T>{base, col_stride, row}, req);
  CUTOPK_PHASE(4, order);
}

}  // namespace cutopk::resident
