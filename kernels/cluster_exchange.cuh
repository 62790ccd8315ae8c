// What the blocks of a thread-block cluster (sm_90) exchange through distributed shared memory
// (DSMEM) while each holds a slice of one row (kernels/cluster.cu): the sum of their histograms,
// reduced by owner, and the winner counts of the slices before each block.
//
// A block's shared memory may be mapped (map_shared_rank) only while that block runs: every
// exchange here comes after a cluster barrier that every block of the cluster has reached (so
// each has started), and no block reads another's memory after the barrier that lets that
// block leave. Stores go out to their owner (push): a block that is done may then leave once it
// has arrived at the next barrier, since no block reads its memory any more.
#pragma once

#include <cooperative_groups.h>

// Clusters exist from sm_90 (CUDA declares no cluster_group before it); the host (the simulator)
// has them.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define CUTOPK_CLUSTER_SUPPORTED 1
#else
#define CUTOPK_CLUSTER_SUPPORTED 0
#endif

#if CUTOPK_CLUSTER_SUPPORTED
namespace cutopk {
namespace cluster_exchange {

typedef cooperative_groups::cluster_group Cluster;

// The sum over the cluster's BLOCKS blocks of their counts in `hist` (bins [0, 2^bits)), into
// `hist` of every block, in place. Reduced by owner: block r sums bins [r B / BLOCKS, (r + 1) B /
// BLOCKS) from every block, a thread a bin, its BLOCKS remote loads issued together (one round
// trip; 32-bit loads: BLOCKS 16-byte vectors held at once spilled at the 64 registers of 1024
// threads), and stores the sum into every block's bin (stores need no reply). In place: bin d of
// any block is read and written by one thread only, the owner's, which loads every block's
// before it stores. The first cluster barrier: every block's counts are complete and every block
// is done reading its sums of the digit before (choose_bin); the second: every block holds the
// sums (and no block zeroes its `hist` for the next digit while an owner still reads or writes
// it). Every thread of the cluster calls it.
template <int BLOCKS>
__device__ __forceinline__ void reduce_bins(const Cluster& cluster, unsigned* hist, int bits) {
  cluster.sync();
  const int bins = 1 << bits;
  const int rank = (int)cluster.block_rank();
  const int lo = rank * bins / BLOCKS, hi = (rank + 1) * bins / BLOCKS;
  for (int d = lo + (int)threadIdx.x; d < hi; d += (int)blockDim.x) {
    unsigned* at[BLOCKS];  // bin d of each block's hist
    unsigned part[BLOCKS];
#pragma unroll
    for (int r = 0; r < BLOCKS; ++r) {
      at[r] = cluster.map_shared_rank(hist + d, r);
      part[r] = *at[r];
    }
    unsigned sum = 0;
#pragma unroll
    for (int r = 0; r < BLOCKS; ++r) sum += part[r];
#pragma unroll
    for (int r = 0; r < BLOCKS; ++r) *at[r] = sum;
  }
  cluster.sync();
}

// Thread 0 of each block stores its packed (above, members) winner counts into slot `rank` of
// `before` (BLOCKS words of static shared memory) in every later block of the cluster; after the
// next cluster barrier each block adds up its own slots [0, rank) (sum_before). Pushed, not read
// from the earlier blocks, so that an earlier block may leave before a later one is done.
template <int BLOCKS>
__device__ __forceinline__ void push_counts(const Cluster& cluster, unsigned long long* before,
                                            unsigned long long counts) {
  const unsigned rank = cluster.block_rank();
  if (threadIdx.x != 0) return;
  for (unsigned q = rank + 1; q < (unsigned)BLOCKS; ++q) cluster.map_shared_rank(before, q)[rank] = counts;
}

__device__ __forceinline__ unsigned long long sum_before(const unsigned long long* before, unsigned rank) {
  unsigned long long sum = 0;
  for (unsigned r = 0; r < rank; ++r) sum += before[r];
  return sum;
}

}  // namespace cluster_exchange
}  // namespace cutopk
#endif
