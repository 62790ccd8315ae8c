// cutopk CPU simulator: the runtime's threads, barriers, warp operations and faults (declared in
// sim_runtime.h). The same for every kernel source: compiled once per set of flags into an object
// that every module links (cutopk/sim/_toolchain.py), not with each module.
#include "sim_runtime.h"

namespace cutopk_sim {

Launch g_launch;
char g_error[4096];

void describe_thread(char* out, size_t n, const Fiber* f) {
  snprintf(out, n, "block (%u,%u,%u) thread (%u,%u,%u) [warp %u lane %u]", f->block->idx.x, f->block->idx.y,
           f->block->idx.z, f->tid.x, f->tid.y, f->tid.z, f->linear / 32, f->linear % 32);
}

// Records a fault for the running thread and abandons the launch: the fiber is never resumed.
[[noreturn]] void fault(int code, int line, const char* fmt, ...) {
  if (g_launch.error == OK) {
    char who[160];
    describe_thread(who, sizeof who, g_launch.current);
    int len = snprintf(g_error, sizeof g_error, "%s, line %d: ", who, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error + len, sizeof g_error - len, fmt, ap);
    va_end(ap);
    g_launch.error = code;
  }
  give_way();
  __builtin_unreachable();
}

// ---- barriers ----

void release_barrier(Block* b) {
  Launch& L = g_launch;
  for (unsigned i = 0; i < L.nthreads; ++i) {
    Fiber& f = L.fibers[b->first_fiber + i];
    if (f.state == AT_BARRIER) {
      f.state = RUNNABLE;
      f.result = static_cast<uint64_t>(b->pred_count);
    }
  }
  b->arrived = 0;
  b->pred_count = 0;
  progressed();
}


// ---- warp-synchronous operations ----

static int source_lane(const Fiber& f, unsigned lane) {
  int w = f.width;
  int base = static_cast<int>(lane) & ~(w - 1);
  switch (f.op) {
    case OP_SHFL:
      return base + (f.arg & (w - 1));
    case OP_SHFL_UP: {
      int s = static_cast<int>(lane) - f.arg;
      return s < base ? static_cast<int>(lane) : s;
    }
    case OP_SHFL_DOWN: {
      int s = static_cast<int>(lane) + f.arg;
      return s >= base + w ? static_cast<int>(lane) : s;
    }
    case OP_SHFL_XOR: {
      int s = static_cast<int>(lane) ^ f.arg;
      return s >= base + w ? static_cast<int>(lane) : s;
    }
  }
  return static_cast<int>(lane);
}

// Completes the operation of the group `mask` of warp `warp`, all of whose lanes wait on it.
void resolve_warp(Block* b, unsigned warp, unsigned mask, int line) {
  Fiber& first = lane_fiber(b, warp, __builtin_ctz(mask));
  uint64_t ballot = 0;
  for (unsigned m = mask; m; m &= m - 1) ballot |= static_cast<uint64_t>(lane_fiber(b, warp, __builtin_ctz(m)).pred != 0) << __builtin_ctz(m);
  for (unsigned m = mask; m; m &= m - 1) {
    unsigned lane = __builtin_ctz(m);
    Fiber& f = lane_fiber(b, warp, lane);
    switch (first.op) {
      case OP_BALLOT:
        f.result = ballot;
        break;
      case OP_SYNCWARP:
        break;
      case OP_MATCH_ANY:
      case OP_MATCH_ALL: {
        unsigned same = 0;
        for (unsigned n = mask; n; n &= n - 1)
          if (lane_fiber(b, warp, __builtin_ctz(n)).value == f.value) same |= 1u << __builtin_ctz(n);
        f.result = first.op == OP_MATCH_ANY ? same : same == mask ? mask : 0u;
        f.pred = same == mask;
        break;
      }
      case OP_REDUCE_ADD:
      case OP_REDUCE_MIN:
      case OP_REDUCE_MAX:
      case OP_REDUCE_AND:
      case OP_REDUCE_OR:
      case OP_REDUCE_XOR: {
        // 32-bit operands; `arg` says whether they are signed (min/max differ).
        uint32_t acc = static_cast<uint32_t>(first.value);
        for (unsigned n = mask & (mask - 1); n; n &= n - 1) {
          uint32_t v = static_cast<uint32_t>(lane_fiber(b, warp, __builtin_ctz(n)).value);
          bool less = first.arg ? static_cast<int32_t>(v) < static_cast<int32_t>(acc) : v < acc;
          switch (first.op) {
            case OP_REDUCE_ADD: acc += v; break;
            case OP_REDUCE_MIN: acc = less ? v : acc; break;
            case OP_REDUCE_MAX: acc = less ? acc : v; break;
            case OP_REDUCE_AND: acc &= v; break;
            case OP_REDUCE_OR: acc |= v; break;
            default: acc ^= v;
          }
        }
        f.result = acc;
        break;
      }
      default: {
        int src = source_lane(f, lane);
        if (src < 0 || src > 31 || !(mask >> src & 1u)) {
          g_launch.current = &f;
          fault(E_WARP, line, "%s reads lane %d, which is not in the mask 0x%08x", OP_NAMES[f.op], src, mask);
        }
        f.result = lane_fiber(b, warp, src).value;
      }
    }
    f.state = RUNNABLE;
  }
  b->warp_arrived[warp] &= ~mask;
  progressed();
}


// ---- thread-block clusters (sim_cluster.h) ----

// cluster.barrier_arrive(): this thread's arrival in the cluster barrier's open phase; the last
// of the cluster's threads to arrive completes the phase and lets every waiting thread go. A
// second arrival before the wait of the first is misuse (CUDA leaves it undefined). `sync`: the
// arrival of a cluster.sync(), whose call sites must agree within a phase (barrier divergence);
// split arrivals may come from different lines (the kernel chose them).
void cluster_arrive_impl(int line, bool sync) {
  Launch& L = g_launch;
  Fiber* f = cur();
  Block* b = f->block;
  ClusterBarrier& c = L.cluster_barriers[b->slot / L.cluster_size];
  if (f->cluster_arrived)
    fault(E_CLUSTER, line,
          "cluster barrier_arrive() again before the barrier_wait() of its arrival at line %d -- cluster misuse",
          f->line);
  if (c.arrived == 0) {
    c.line = line;
    c.sync = sync;
  } else if (sync && c.sync && c.line != line) {
    fault(E_BARRIER, line,
          "cluster.sync() here while %u threads of the cluster wait at the cluster.sync() at line %d -- barrier "
          "divergence",
          c.arrived, c.line);
  }
  f->line = line;
  f->cluster_arrived = true;
  f->cluster_phase = c.phase;
  if (++c.arrived == L.cluster_size * L.nthreads) {
    // The phase is complete: every thread of every block waiting on it goes on.
    ++c.phase;
    c.arrived = 0;
    for (unsigned r = 0; r < L.cluster_size; ++r) {
      Block& other = cluster_block(r);
      for (unsigned i = 0; i < L.nthreads; ++i) {
        Fiber& g = L.fibers[other.first_fiber + i];
        if (g.state == AT_CLUSTER) g.state = RUNNABLE;
      }
    }
    progressed();
  }
}

// cluster.barrier_wait(): returns once the phase of this thread's arrival has completed (at once
// if it has). A wait without an arrival before it is misuse.
void cluster_wait_impl(int line) {
  Launch& L = g_launch;
  Fiber* f = cur();
  ClusterBarrier& c = L.cluster_barriers[f->block->slot / L.cluster_size];
  if (!f->cluster_arrived)
    fault(E_CLUSTER, line, "cluster barrier_wait() without a barrier_arrive() before it -- cluster misuse");
  f->cluster_arrived = false;
  if (c.phase != f->cluster_phase) return;
  f->line = line;
  f->state = AT_CLUSTER;
  give_way();
}

void cluster_sync_impl(int line) {
  cluster_arrive_impl(line, true);
  cluster_wait_impl(line);
}

// `addr` (in this block's static or dynamic shared memory) at the same offset in the shared
// memory of the cluster's block `rank`.
void* map_shared_rank_impl(const void* addr, unsigned rank, int line) {
  Launch& L = g_launch;
  Block* b = cur()->block;
  if (rank >= L.cluster_size)
    fault(E_CLUSTER, line, "map_shared_rank to block rank %u, outside the cluster of %u blocks -- cluster misuse", rank,
          L.cluster_size);
  Block& t = cluster_block(rank);
  if (t.done == L.nthreads)
    fault(E_CLUSTER, line,
          "map_shared_rank to block rank %u (block (%u,%u,%u)), which has exited: its shared memory is gone -- "
          "cluster misuse",
          rank, t.idx.x, t.idx.y, t.idx.z);
  auto a = static_cast<const unsigned char*>(addr);
  if (a >= b->arena && a < b->arena + ARENA_BYTES) return t.arena + (a - b->arena);
  if (b->dynamic && a >= b->dynamic && a <= b->dynamic + L.dynamic_bytes) return t.dynamic + (a - b->dynamic);
  fault(E_CLUSTER, line, "map_shared_rank of %p, which is not in this block's shared memory -- cluster misuse", addr);
}

}  // namespace cutopk_sim
