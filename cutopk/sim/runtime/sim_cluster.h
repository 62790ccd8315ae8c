// cutopk CPU simulator: thread-block clusters (sm_90), in host mode.
//
// A launch may group its blocks into clusters (Function(..., cluster=(x, y, z)) in Python, as
// cudaLaunchKernelEx's cluster dimension does): the blocks of one cluster are resident together
// and may read and write each other's shared memory. Kernels reach them through the part of
// cooperative_groups that cluster code uses, defined here in place of CUDA's header (whose
// device code does not compile in host mode):
//   cg::this_cluster(): block_rank(), num_blocks(), dim_blocks(), block_index(), thread_rank(),
//   num_threads(), sync(), barrier_arrive() and barrier_wait() (sync() in two halves: work may go
//   between them, and a block may leave after its arrival), map_shared_rank(pointer, rank).
// Faults (ClusterError in Python): a second barrier_arrive() before the wait of the first, a
// barrier_wait() without an arrival, a rank outside the cluster, a pointer that is not in this
// block's shared memory, and any access to the shared memory of a block that has exited (its
// pages are made inaccessible until its whole cluster is done, so even a pointer mapped earlier
// faults). A cluster.sync() that some thread of the cluster never reaches (it exited) is a
// barrier divergence, as for __syncthreads. Without a cluster, every block is a cluster of one.
#pragma once

// The real <cooperative_groups.h> becomes empty: this file stands in for it.
#define _COOPERATIVE_GROUPS_H_
// A compile-time cluster shape on a kernel: the simulator takes the shape at launch instead.
#define __cluster_dims__(...)

#pragma GCC visibility push(hidden)
namespace cutopk_sim {

inline Block& cluster_block(unsigned rank) {
  Block* b = cur()->block;
  return g_launch.blocks[b->slot - b->rank + rank];
}

// cluster.sync(): waits for every thread of the cluster's blocks; split into its arrival and
// its wait by barrier_arrive() and barrier_wait().
void cluster_sync_impl(int line);
void cluster_arrive_impl(int line, bool sync);
void cluster_wait_impl(int line);

// `addr` (in this block's static or dynamic shared memory) at the same offset in the shared
// memory of the cluster's block `rank`.
void* map_shared_rank_impl(const void* addr, unsigned rank, int line);

}  // namespace cutopk_sim
#pragma GCC visibility pop

namespace cooperative_groups {

struct cluster_group {
  struct arrival_token {};
  void sync(int line = __builtin_LINE()) const { ::cutopk_sim::cluster_sync_impl(line); }
  arrival_token barrier_arrive(int line = __builtin_LINE()) const {
    ::cutopk_sim::cluster_arrive_impl(line, false);
    return arrival_token{};
  }
  void barrier_wait(int line = __builtin_LINE()) const { ::cutopk_sim::cluster_wait_impl(line); }
  void barrier_wait(arrival_token&&, int line = __builtin_LINE()) const { ::cutopk_sim::cluster_wait_impl(line); }
  unsigned block_rank() const { return ::cutopk_sim::cur()->block->rank; }
  unsigned num_blocks() const { return ::cutopk_sim::g_launch.cluster_size; }
  dim3 dim_blocks() const { return ::cutopk_sim::g_launch.cluster; }
  dim3 block_index() const {
    const uint3 idx = ::cutopk_sim::cur()->block->idx;
    const dim3 c = ::cutopk_sim::g_launch.cluster;
    return dim3(idx.x % c.x, idx.y % c.y, idx.z % c.z);
  }
  unsigned thread_rank() const { return block_rank() * ::cutopk_sim::g_launch.nthreads + ::cutopk_sim::cur()->linear; }
  unsigned num_threads() const { return num_blocks() * ::cutopk_sim::g_launch.nthreads; }
  template <class T>
  T* map_shared_rank(T* addr, unsigned rank, int line = __builtin_LINE()) const {
    return static_cast<T*>(::cutopk_sim::map_shared_rank_impl(addr, rank, line));
  }
};

inline cluster_group this_cluster() {
  return cluster_group{};
}

}  // namespace cooperative_groups
