// Cluster radix select: top-K of a row too long for one block's shared memory, in one launch, a
// thread-block cluster of CUTOPK_CLUSTER_BLOCKS (8) blocks per row (sm_90), the row read from
// global memory once.
//
// Each block of the cluster holds a contiguous slice of the row as keys in its shared memory and
// runs resident's steps on it (onchip_select.cuh), the blocks meeting through distributed shared
// memory (DSMEM) at cluster barriers: after each digit's count every block adds up the counts of
// all the cluster's blocks (merge_bins: map_shared_rank reads of their histograms), so that every
// block chooses the same bin and refines the same bucket; the winners' counts per block give each
// block its bases (counts_before), and every block places its winners, in index order, straight
// into the shared memory of the cluster's block 0, which sorts the K and writes them. A cluster
// barrier before each point where a block's shared memory is reused or left (no block zeroes its
// counts, and no block exits, while another may read them).
// Ties, NaN, -0.0, lengths=: as resident (row_extent per row; slices past the length are empty).
// Dtypes: all. Limits: K <= 2048, n <= 8 slices, each of max(2 x 2^12 x 4, pow2(K) x (4 + key
// bytes)) + slice x key bytes of shared memory (H100, 223 KB: about 390K float32 keys a row).
// Threads per block: CUTOPK_RESIDENT_THREADS (512); one block per SM ((512, 1)). Built for sm_90
// only (the entry point's __cluster_dims__); on earlier GPUs the kernel traps and the dispatcher
// never picks it (Device.clusters).
#include <cooperative_groups.h>

#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "onchip_select.cuh"
#include "phase_clock.cuh"
#include "entry.cuh"

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define CUTOPK_CLUSTER_SUPPORTED 1
#else
#define CUTOPK_CLUSTER_SUPPORTED 0
#endif

namespace cutopk::cluster {

#if CUTOPK_CLUSTER_SUPPORTED
// The front of a block's dynamic shared memory: its counts and the cluster's sums (later, in block
// 0, the K winners), before its slice of keys.
template <class Key>
__device__ __forceinline__ int front_bytes(int kp) {
  const int winners = onchip::winner_keys_bytes<Key>(kp) + ((kp * 4 + 15) & ~15);
  return winners > 2 * onchip::BINS * 4 ? winners : 2 * onchip::BINS * 4;
}

// The sum over the cluster's blocks of their counts of `bins` bins, into `total` (the same in every
// block). The first cluster barrier: every block's counts are complete; the second: no block
// zeroes its counts for the next digit while another still reads them. CUTOPK_MERGE_BINS_UNROLLED
// (off; the lease's M4 A/B, benchmarks/gpu/phase_clocks.py) unrolls the sum over the cluster's
// compiled size (the entry point's __cluster_dims__), so that its remote loads go out together.
template <class Cluster>
__device__ __forceinline__ const unsigned* merge_bins(const Cluster& cluster, unsigned* hist, unsigned* total,
                                                      int bins) {
  cluster.sync();
  for (int d = threadIdx.x; d < bins; d += blockDim.x) {
    unsigned sum = 0;
#ifdef CUTOPK_MERGE_BINS_UNROLLED
#pragma unroll
    for (unsigned r = 0; r < CUTOPK_CLUSTER_BLOCKS; ++r) sum += cluster.map_shared_rank(hist, r)[d];
#else
    for (unsigned r = 0; r < cluster.num_blocks(); ++r) sum += cluster.map_shared_rank(hist, r)[d];
#endif
    total[d] = sum;
  }
  cluster.sync();
  return total;
}

// The packed (above, members) winner counts of the cluster's blocks before this one (slices of
// lower indices). Its cluster barrier also ends every block's last choice of a bin.
template <class Cluster>
__device__ __forceinline__ unsigned long long counts_before(const Cluster& cluster, unsigned long long* published,
                                                            unsigned long long block_total) {
  if (threadIdx.x == 0) *published = block_total;
  cluster.sync();
  unsigned long long before = 0;
  for (unsigned r = 0; r < cluster.block_rank(); ++r) before += *cluster.map_shared_rank(published, r);
  return before;
}
#endif

template <class T>
CUTOPK_KERNEL(CUTOPK_RESIDENT_THREADS, 1)
cluster_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
             const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
             int slice, T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
#if CUTOPK_CLUSTER_SUPPORTED
  using namespace onchip;
  CUTOPK_PHASE(0, entry);
  typedef typename KeyTraits<T>::Key Key;
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int KEY_BITS = 8 * sizeof(Key);
  const int first_bits = KEY_BITS < DIGIT_BITS ? KEY_BITS : DIGIT_BITS;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Bucket s_bucket;
  __shared__ int s_scan[33];                  // choose_bin's block scans
  __shared__ unsigned long long s_scan2[33];  // count_winners' (two counts packed)
  __shared__ unsigned long long s_counts;     // this block's winner counts, read by the later blocks
  const int kp = pow2_at_least(k);
  unsigned* hist = reinterpret_cast<unsigned*>(smem);
  unsigned* total = hist + BINS;
  Key* keys = reinterpret_cast<Key*>(smem + front_bytes<Key>(kp));
  Key* win_key = reinterpret_cast<Key*>(smem);  // block 0's, over its counts once they are dead
  unsigned* win_idx = reinterpret_cast<unsigned*>(smem + winner_keys_bytes<Key>(kp));

  const long long row = blockIdx.x / cluster.num_blocks();
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  const int len = (int)extent.length;
  const int k_row = k < len ? k : len;
  const long long first = (long long)cluster.block_rank() * slice;  // this block's slice of the row
  const int mine = (int)max(0LL, min((long long)slice, extent.length - first));
  zero_bins(hist, 1 << first_bits);
  if (threadIdx.x == 0) s_bucket = Bucket{0ull, k_row, len, KEY_BITS};
  __syncthreads();
  load_row(base + first * col_stride, col_stride, mine, largest, nan_first, KEY_BITS - first_bits, first_bits, keys,
           hist);
  __syncthreads();
  CUTOPK_PHASE(1, load);
  if (len > k && k > 0)  // the same in the whole cluster: every block runs the same cluster barriers
    find_bucket(keys, mine, first_bits, hist, &s_bucket, s_scan,
                [&](int bits) { return merge_bins(cluster, hist, total, 1 << bits); });
  const Bucket b = s_bucket;  // the same in every block
  CUTOPK_PHASE(2, bucket);
  const Counts c = count_winners(keys, mine, b, s_scan2);
  const unsigned long long before = counts_before(cluster, &s_counts, c.block);
  place_winners(keys, mine, first, b, c, (int)(before >> 32), (int)(before & 0xffffffffu), k_row - b.needed,
                cluster.map_shared_rank(win_key, 0), cluster.map_shared_rank(win_idx, 0));
  cluster.sync();  // every winner is in block 0; the others may leave
  CUTOPK_PHASE(3, collect);
  if (cluster.block_rank() == 0) {
    order_and_write(win_key, win_idx, k_row, k, kp, by_index, base, col_stride, out_vals, out_idx, index_bytes, row);
    CUTOPK_PHASE(4, order);
  }
#else
  __trap();  // not built for this GPU: the dispatcher gives the family to sm_90 only
#endif
}

}  // namespace cutopk::cluster
