"""Thread-block clusters on the simulator (cutopk/sim/runtime/sim_cluster.h): the cluster shape
given at launch, cluster.sync(), distributed shared memory through map_shared_rank, and the
faults of its misuse (a rank outside the cluster, a map of memory that is not shared, reading the
shared memory of a block that has exited, a cluster.sync() some threads never reach), and the
barrier split into barrier_arrive() and barrier_wait() with the patterns of kernels/cluster.cu
(counts reduced by owner, results pushed into rank 0 by blocks that then arrive and leave) and
their misuse (a block that arrives, leaves and is read afterwards; a second arrival before the
wait; a wait without an arrival)."""

from __future__ import annotations

import numpy as np
import pytest

from cutopk import sim

SOURCE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// Each block's rank, cluster size and shape, and its position in the cluster.
extern "C" __global__ void shape(int* out) {
  cg::cluster_group cluster = cg::this_cluster();
  const int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (threadIdx.x == 0) {
    const dim3 d = cluster.dim_blocks(), at = cluster.block_index();
    int* o = out + 8 * b;
    o[0] = cluster.block_rank(); o[1] = cluster.num_blocks(); o[2] = d.x; o[3] = d.y; o[4] = d.z;
    o[5] = at.x; o[6] = at.y; o[7] = cluster.num_threads();
  }
}

// Distributed shared memory: every block puts its block index in its static and dynamic shared
// memory, then each thread adds up all blocks' values through map_shared_rank, and every block
// adds one to a counter in rank 0's shared memory (atomics on a mapped address).
extern "C" __global__ void exchange(int* out, int* counts) {
  __shared__ int mine[64];
  __shared__ int counter;
  extern __shared__ int dyn[];
  cg::cluster_group cluster = cg::this_cluster();
  mine[threadIdx.x] = 1000 * blockIdx.x + threadIdx.x;
  dyn[threadIdx.x] = blockIdx.x;
  if (threadIdx.x == 0) counter = 0;
  cluster.sync();
  int sum = 0;
  for (unsigned r = 0; r < cluster.num_blocks(); ++r)
    sum += cluster.map_shared_rank(mine, r)[threadIdx.x] + cluster.map_shared_rank(dyn, r)[threadIdx.x];
  if (threadIdx.x == 0) atomicAdd(cluster.map_shared_rank(&counter, 0), 1);
  cluster.sync();  // no block leaves while another may still read its shared memory
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  if (threadIdx.x == 0 && cluster.block_rank() == 0) counts[blockIdx.x / cluster.num_blocks()] = counter;
}

extern "C" __global__ void rank_outside(int* out) {
  __shared__ int v;
  cg::cluster_group cluster = cg::this_cluster();
  v = 1;
  cluster.sync();
  out[0] = *cluster.map_shared_rank(&v, cluster.num_blocks());  // BUG: ranks are 0 .. num_blocks - 1
}

extern "C" __global__ void not_shared(int* out) {
  cg::cluster_group cluster = cg::this_cluster();
  out[0] = *cluster.map_shared_rank(out, 0);  // BUG: global memory has no rank
}

// Rank 0 leaves at once; rank 1 maps its shared memory afterwards.
extern "C" __global__ void map_after_exit(int* out) {
  __shared__ int v;
  cg::cluster_group cluster = cg::this_cluster();
  v = 7;
  if (cluster.block_rank() == 0) return;  // BUG: rank 1 still maps this block's memory
  __syncthreads();
  out[0] = *cluster.map_shared_rank(&v, 0);
}

// Both blocks map each other's memory and meet; then rank 0 leaves while rank 1 reads on.
extern "C" __global__ void read_after_exit(int* out) {
  extern __shared__ int buf[];
  cg::cluster_group cluster = cg::this_cluster();
  buf[threadIdx.x] = threadIdx.x;
  int* other = cluster.map_shared_rank(buf, cluster.block_rank() ^ 1);
  cluster.sync();
  if (cluster.block_rank() == 0) return;  // BUG: no cluster.sync() before leaving
  for (int i = 0; i < 4; ++i) __syncthreads();  // rank 0 has exited by now
  out[threadIdx.x] = other[threadIdx.x];
}

// kernels/cluster.cu's patterns: every block counts into its bins; block r owns bins
// [r B / n, (r + 1) B / n), sums them over every block and stores the sums into every block; the
// blocks other than 0 then push their sum of the totals into rank 0, arrive and leave, rank 0
// waits and writes what it was sent.
extern "C" __global__ void owner_reduce_and_push(int* out) {
  __shared__ unsigned hist[64];
  __shared__ unsigned total[64];
  __shared__ unsigned sent[8];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank(), n = cluster.num_blocks();
  hist[threadIdx.x] = rank + threadIdx.x;
  cluster.sync();
  if (threadIdx.x >= rank * 64 / n && threadIdx.x < (rank + 1) * 64 / n) {
    unsigned sum = 0;
    for (unsigned r = 0; r < n; ++r) sum += cluster.map_shared_rank(hist, r)[threadIdx.x];
    for (unsigned r = 0; r < n; ++r) cluster.map_shared_rank(total, r)[threadIdx.x] = sum;
  }
  cluster.sync();
  if (threadIdx.x == 0) {
    unsigned all = 0;
    for (int d = 0; d < 64; ++d) all += total[d];
    cluster.map_shared_rank(sent, 0)[rank] = all;
  }
  cluster.barrier_arrive();
  if (rank != 0) return;  // no block reads this one's memory any more
  cluster.barrier_wait();
  if (threadIdx.x < n) out[blockIdx.x / n * 8 + threadIdx.x] = (int)sent[threadIdx.x];
}

// The owner's loop over one rank too many.
extern "C" __global__ void owner_rank_outside(int* out) {
  __shared__ unsigned hist[64];
  cg::cluster_group cluster = cg::this_cluster();
  hist[threadIdx.x] = 1;
  cluster.sync();
  unsigned sum = 0;
  for (unsigned r = 0; r <= cluster.num_blocks(); ++r) sum += cluster.map_shared_rank(hist, r)[threadIdx.x];  // BUG
  cluster.sync();
  out[threadIdx.x] = (int)sum;
}

// Counts read (pulled) from the earlier block, which has arrived and left meanwhile.
extern "C" __global__ void pull_after_leave(int* out) {
  __shared__ unsigned count;
  cg::cluster_group cluster = cg::this_cluster();
  count = 5;
  cluster.sync();
  cluster.barrier_arrive();
  if (cluster.block_rank() == 0) return;  // BUG: rank 1 reads this block's count below
  cluster.barrier_wait();
  for (int i = 0; i < 4; ++i) __syncthreads();  // rank 0 has exited by now
  out[threadIdx.x] = (int)*cluster.map_shared_rank(&count, 0);
}

extern "C" __global__ void arrive_twice(int* out) {
  cg::cluster_group cluster = cg::this_cluster();
  cluster.barrier_arrive();
  cluster.barrier_arrive();  // BUG: the first arrival's wait is missing
  cluster.barrier_wait();
  out[0] = 1;
}

extern "C" __global__ void wait_without_arrival(int* out) {
  cg::cluster_group cluster = cg::this_cluster();
  cluster.barrier_wait();  // BUG: no arrival before it
  out[0] = 1;
}

extern "C" __global__ void sync_skipped(int* out) {
  cg::cluster_group cluster = cg::this_cluster();
  if (cluster.block_rank() == 1) return;  // BUG: these threads never reach the cluster barrier
  cluster.sync();
  out[blockIdx.x] = 1;
}
"""


@pytest.fixture(scope="module")
def module():
    return sim.RawModule(code=SOURCE)


@pytest.mark.parametrize(
    ("grid", "cluster"), [((8,), (4,)), ((4, 2), (2, 2)), ((6,), None), ((2, 2, 2), (1, 1, 2))]
)
def test_the_cluster_shape_given_at_launch(module, grid, cluster):
    nblocks = int(np.prod(grid))
    out = np.full(8 * nblocks, -1, np.int32)
    module.get_function("shape")(grid, (32,), (out,), cluster=cluster)
    c = (*(cluster or (1,)), 1, 1, 1)[:3]
    g = (*grid, 1, 1)[:3]
    for z in range(g[2]):
        for y in range(g[1]):
            for x in range(g[0]):
                b = x + g[0] * (y + g[1] * z)
                at = (x % c[0], y % c[1], z % c[2])
                rank = at[0] + c[0] * (at[1] + c[1] * at[2])
                size = c[0] * c[1] * c[2]
                assert list(out[8 * b : 8 * b + 8]) == [rank, size, *c, at[0], at[1], 32 * size], (x, y, z)


@pytest.mark.parametrize("resident", [0, 1, 4])
@pytest.mark.parametrize("seed", [0, 5])
def test_distributed_shared_memory_and_cluster_barriers(resident, seed):
    # Every cluster must be resident at once whatever resident_blocks says (1 rounds up to a cluster).
    mod = sim.RawModule(code=SOURCE, resident_blocks=resident, seed=seed, block_seed=seed)
    blocks, cluster, threads = 8, 4, 64
    out = np.zeros(blocks * threads, np.int32)
    counts = np.zeros(blocks // cluster, np.int32)
    mod.get_function("exchange")(
        (blocks,), (threads,), (out, counts), shared_mem=threads * 4, cluster=(cluster,)
    )
    for b in range(blocks):
        first = b // cluster * cluster
        members = range(first, first + cluster)
        want = [sum(1000 * m + t + m for m in members) for t in range(threads)]
        assert list(out[b * threads : (b + 1) * threads]) == want
    assert list(counts) == [cluster] * (blocks // cluster)


def test_without_a_cluster_each_block_is_its_own(module):
    out = np.zeros(3 * 64, np.int32)
    counts = np.zeros(3, np.int32)
    module.get_function("exchange")((3,), (64,), (out, counts), shared_mem=256)
    assert list(out[64:128]) == [1000 + t + 1 for t in range(64)]
    assert list(counts) == [1, 1, 1]


@pytest.mark.parametrize(
    ("kernel", "shared", "words"),
    [
        ("rank_outside", 0, ["block rank 2, outside the cluster of 2 blocks", "line"]),
        ("not_shared", 0, ["not in this block's shared memory"]),
        ("map_after_exit", 0, ["block rank 0", "which has exited"]),
        ("read_after_exit", 256, ["after it exited", "cluster rank 0", "block (0,0,0)"]),
        ("owner_rank_outside", 0, ["block rank 2, outside the cluster of 2 blocks"]),
        ("pull_after_leave", 0, ["which has exited"]),
        ("arrive_twice", 0, ["barrier_arrive() again before the barrier_wait()"]),
        ("wait_without_arrival", 0, ["barrier_wait() without a barrier_arrive()"]),
    ],
)
def test_cluster_misuse_faults(module, kernel, shared, words):
    out = np.zeros(64, np.int32)
    with pytest.raises(sim.ClusterError) as info:
        module.get_function(kernel)((2,), (64,), (out,), shared_mem=shared, cluster=(2,))
    message = str(info.value)
    assert kernel in message
    for word in words:
        assert word in message, message
    # The module runs correct launches afterwards (an exited block's memory is usable again).
    counts = np.zeros(1, np.int32)
    ok = np.zeros(2 * 64, np.int32)
    module.get_function("exchange")((2,), (64,), (ok, counts), shared_mem=256, cluster=(2,))
    assert list(counts) == [2]


@pytest.mark.parametrize("cluster", [2, 4, 8])
@pytest.mark.parametrize("seed", [0, 3])
def test_counts_reduced_by_owner_and_pushed_into_rank_0(cluster, seed):
    # The blocks other than 0 arrive and leave before rank 0 waits: their arrivals complete the
    # barrier all the same, and nothing reads their memory after it.
    mod = sim.RawModule(code=SOURCE, seed=seed, block_seed=seed)
    blocks = 2 * cluster
    out = np.full(8 * (blocks // cluster), -1, np.int32)
    mod.get_function("owner_reduce_and_push")((blocks,), (64,), (out,), cluster=(cluster,))
    for c in range(blocks // cluster):
        total = sum(r + d for r in range(cluster) for d in range(64))
        assert list(out[8 * c : 8 * c + cluster]) == [total] * cluster


def test_a_cluster_barrier_that_some_threads_never_reach(module):
    with pytest.raises(sim.BarrierDivergenceError, match=r"cluster.sync\(\) at line \d+ is reached by 64 of"):
        module.get_function("sync_skipped")((2,), (64,), (np.zeros(2, np.int32),), cluster=(2,))


@pytest.mark.parametrize("cluster", [(3,), (16,), (0,), (2, 2)])
def test_cluster_shapes_cuda_refuses(module, cluster):
    with pytest.raises(ValueError, match="cluster"):
        module.get_function("shape")((8,), (32,), (np.zeros(64, np.int32),), cluster=cluster)
