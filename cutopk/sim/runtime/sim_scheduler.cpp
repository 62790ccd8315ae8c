// cutopk CPU simulator, the scheduler: a launch's resident blocks run by turns, each thread a fiber
// that runs until it gives way (a barrier, a warp operation, an atomic, a fence, its end), a stall
// named as the fault it is, and the module's C entry points. The rest of the launch: fibers
// (sim_fibers.cpp), shared memory (sim_shared.cpp), faults and the watchdog (sim_faults.cpp), the
// counting build's hooks (sim_traffic.cpp), the state of one launch (sim_runtime.cpp).
#include <cstdarg>

#include "sim_runtime.h"
#include "sim_launch.h"
#include "sim_launch_parts.h"

namespace cutopk_sim {

// What a module keeps between launches; its launch state, g_launch, is in sim_runtime.cpp.
sigjmp_buf g_crash_env;
std::vector<char*> g_stacks;
std::vector<unsigned char*> g_arenas;
std::vector<std::pair<unsigned char*, size_t>> g_dynamic_maps;  // (map, bytes)
dim3 g_next_cluster(1, 1, 1);  // the cluster shape of the next launch (cutopk_sim_set_cluster)

// ---- the scheduler ----

const char* state_name(const Fiber& f) {
  return f.state == AT_BARRIER   ? "__syncthreads"
         : f.state == AT_CLUSTER ? "cluster.sync()"
         : f.state == AT_WARP    ? OP_NAMES[f.op]
         : f.state == DONE       ? "exited"
                                 : "running";
}

// Of the `count` blocks from `first`: the first thread that waits in `state`, and the first that
// exited (a barrier that one of them waits at and the other never reaches is divergent).
struct Divergence {
  Fiber* waiting = nullptr;
  Fiber* exited = nullptr;
};

Divergence divergence(const Block* first, size_t count, FiberState state) {
  Launch& L = g_launch;
  Divergence d;
  for (const Block* b = first; b < first + count; ++b)
    for (unsigned i = 0; i < L.nthreads; ++i) {
      Fiber& f = L.fibers[b->first_fiber + i];
      if (f.state == state && !d.waiting) d.waiting = &f;
      if (f.state == DONE && !d.exited) d.exited = &f;
    }
  return d;
}

// The fault of a divergent barrier: the message `fmt` says which, then the first thread that
// exited without reaching it.
__attribute__((format(printf, 2, 3))) void divergence_fault(const Divergence& d, const char* fmt, ...) {
  Launch& L = g_launch;
  L.current = d.waiting;
  va_list ap;
  va_start(ap, fmt);
  const int len = vsnprintf(g_error, sizeof g_error, fmt, ap);
  va_end(ap);
  char who[160];
  describe_thread(who, sizeof who, d.exited);
  if (len >= 0 && len < static_cast<int>(sizeof g_error))
    snprintf(g_error + len, sizeof g_error - len, " (first: %s) -- barrier divergence", who);
  L.error = E_BARRIER;
}

// No thread of the resident blocks can run: name the fault.
void diagnose_stall(std::vector<Block>& blocks) {
  Launch& L = g_launch;
  for (const Block& b : blocks) {
    const Divergence d = divergence(&b, 1, AT_BARRIER);
    if (d.waiting && d.exited)
      return divergence_fault(d,
                              "block (%u,%u,%u): __syncthreads at line %d is reached by %u of %u threads; %u exited "
                              "without reaching it",
                              b.idx.x, b.idx.y, b.idx.z, d.waiting->line, b.arrived, L.nthreads, b.done);
  }
  // A cluster.sync() that threads of the cluster exited without reaching.
  for (size_t first = 0; L.cluster_size > 1 && first < blocks.size(); first += L.cluster_size) {
    const Divergence d = divergence(&blocks[first], L.cluster_size, AT_CLUSTER);
    if (d.waiting && d.exited)
      return divergence_fault(d,
                              "cluster.sync() at line %d is reached by %u of the cluster's %u threads; the others "
                              "exited without reaching it",
                              d.waiting->line, L.cluster_barriers[first / L.cluster_size].arrived,
                              L.cluster_size * L.nthreads);
  }
  // Warp operations that cannot complete: a named lane waits elsewhere or under another mask.
  for (Block& b : blocks) {
    for (unsigned i = 0; i < L.nthreads; ++i) {
      Fiber& f = L.fibers[b.first_fiber + i];
      if (f.state != AT_WARP) continue;
      unsigned warp = f.linear / 32;
      for (unsigned m = f.mask; m; m &= m - 1) {
        Fiber& other = lane_fiber(&b, warp, __builtin_ctz(m));
        if (other.state != AT_WARP || other.mask != f.mask || other.op != f.op) {
          char who[160], whom[160];
          describe_thread(who, sizeof who, &f);
          describe_thread(whom, sizeof whom, &other);
          char where[96];
          if (other.state == AT_WARP)
            snprintf(where, sizeof where, "%s with mask 0x%08x at line %d", OP_NAMES[other.op], other.mask, other.line);
          else
            snprintf(where, sizeof where, "%s at line %d", state_name(other), other.line);
          snprintf(g_error, sizeof g_error,
                   "%s waits in %s with mask 0x%08x at line %d, but lane %u named in the mask is in %s (%s) -- "
                   "warp mask mismatch",
                   who, OP_NAMES[f.op], f.mask, f.line, __builtin_ctz(m), where, whom);
          L.error = E_WARP;
          return;
        }
      }
    }
  }
  Fiber* any = nullptr;
  for (Block& b : blocks)
    for (unsigned i = 0; i < L.nthreads && !any; ++i)
      if (L.fibers[b.first_fiber + i].state != DONE) any = &L.fibers[b.first_fiber + i];
  char who[160] = "?";
  if (any) describe_thread(who, sizeof who, any);
  snprintf(g_error, sizeof g_error, "deadlock: no thread can make progress (e.g. %s waits in %s at line %d)", who,
           any ? state_name(*any) : "?", any ? any->line : 0);
  L.error = E_DEADLOCK;
}

void start_block(Block& b, size_t slot, uint3 idx, unsigned first, bool poison) {
  Launch& L = g_launch;
  b.idx = idx;
  b.slot = static_cast<unsigned>(slot);
  b.rank = static_cast<unsigned>(slot % L.cluster_size);
  b.finished = false;
  b.first_fiber = first;
  b.arrived = b.done = 0;
  b.barrier_line = 0;
  b.pred_count = 0;
  b.warp_arrived.assign((L.nthreads + 31) / 32, 0u);
  b.warp_done.assign((L.nthreads + 31) / 32, 0u);
  b.copy_barriers.clear();
  b.arena = arena(slot);
  b.dynamic = L.dynamic_bytes ? dynamic_region(slot, L.dynamic_bytes) : nullptr;
  if (poison) {
    memset(b.arena, 0xCD, ARENA_BYTES);
    if (b.dynamic) memset(b.dynamic, 0xCD, L.dynamic_bytes);
  }
  if (b.dynamic) set_canaries(b);
  for (unsigned i = 0; i < L.nthreads; ++i) {
    Fiber& f = L.fibers[first + i];
    f.block = &b;
    f.linear = i;
    f.tid = {i % L.block.x, (i / L.block.x) % L.block.y, i / (L.block.x * L.block.y)};
    f.line = 0;
    f.mask = 0;
    f.copies.clear();
    f.groups = 0;
    f.cluster_arrived = false;
    prepare_fiber(f, f.stack);
  }
}

// A launch's state reset for `entry`, and the cluster shape set for it (cutopk_sim_set_cluster),
// then back to none.
void begin_launch(void (*entry)(void**), void** args, dim3 grid, dim3 block, size_t dynamic_bytes,
                  unsigned long long seed, unsigned long long spin_budget) {
  Launch& L = g_launch;
  L.epoch++;
  L.static_shared_used = 0;
  L.polls = 0;
  g_nframes = 0;
  L.entry = entry;
  L.args = args;
  L.grid = grid;
  L.block = block;
  L.nthreads = block.x * block.y * block.z;
  L.dynamic_bytes = dynamic_bytes;
  L.error = OK;
  L.current = nullptr;
  L.spins = 0;
  L.spin_budget = spin_budget;
  L.shuffle = seed != 0;
  L.rng.seed(seed);
  g_error[0] = 0;
  L.cluster = g_next_cluster;
  g_next_cluster = dim3(1, 1, 1);
  L.cluster_size = L.cluster.x * L.cluster.y * L.cluster.z;
}

// The resident blocks' fibers (stacks kept between launches), fibers and blocks; OK, or
// E_RESOURCE where stacks cannot be allocated.
int make_residents(int resident) {
  Launch& L = g_launch;
  L.cluster_barriers.assign(resident / L.cluster_size, ClusterBarrier{});
  size_t nfibers = static_cast<size_t>(resident) * L.nthreads;
  while (g_stacks.size() < nfibers) {
    char* s = new_stack();
    if (!s) {
      snprintf(g_error, sizeof g_error, "cannot allocate fiber stacks for %zu threads", nfibers);
      return E_RESOURCE;
    }
    g_stacks.push_back(s);
  }
  L.fibers.assign(nfibers, Fiber{});
  for (size_t i = 0; i < nfibers; ++i) L.fibers[i].stack = g_stacks[i];
  L.blocks.assign(resident, Block{});
  return OK;
}

// The next block to start: clusters (single blocks without one) in x-fastest order, or
// (block_seed non-zero) in an order shuffled by block_seed, so that blocks coordinating through
// global memory (the last block of a row finishing it, tickets) meet every finish order; a
// cluster's blocks start together, rank r into the r-th slot of its group.
struct BlockOrder {
  unsigned long long next = 0, nblocks, cs, gcx, gcy, block_seed;
  dim3 cd;
  std::vector<unsigned long long> cluster_order;
  BlockOrder(dim3 grid, unsigned long long nblocks, unsigned long long block_seed)
      : nblocks(nblocks), cs(g_launch.cluster_size), block_seed(block_seed), cd(g_launch.cluster) {
    const unsigned long long nclusters = nblocks / cs;
    if (block_seed) {
      cluster_order.resize(nclusters);
      for (unsigned long long i = 0; i < nclusters; ++i) cluster_order[i] = i;
      std::mt19937_64 block_rng(block_seed);
      std::shuffle(cluster_order.begin(), cluster_order.end(), block_rng);
    }
    gcx = grid.x / cd.x;
    gcy = grid.y / cd.y;
  }
  bool more() const { return next < nblocks; }
  uint3 take() {
    unsigned long long n = next++;
    unsigned long long c = n / cs, r = n % cs;
    if (block_seed) c = cluster_order[c];
    return uint3{static_cast<unsigned>((c % gcx) * cd.x + r % cd.x),
                 static_cast<unsigned>(((c / gcx) % gcy) * cd.y + (r / cd.x) % cd.y),
                 static_cast<unsigned>((c / (gcx * gcy)) * cd.z + r / (1ull * cd.x * cd.y))};
  }
};

// One turn of block b: each runnable thread runs until it gives way (`order`: the threads' order,
// shuffled where the launch asks), each resuming the next (give_way) and the last coming back
// here; returns the launch's error, if one was raised.
int run_threads(Block& b, std::vector<unsigned>& order, bool& progressed) {
  Launch& L = g_launch;
  if (L.shuffle) std::shuffle(order.begin(), order.end(), L.rng);
  L.turn_order = order.data();
  L.turn_count = order.size();
  L.turn_first = b.first_fiber;
  L.turn_at = static_cast<size_t>(-1);
  Fiber* f = next_in_turn();
  if (!f) return OK;
  L.current = f;
  L.switches++;
  asan_entering_fiber(f->stack, STACK_BYTES);
  cutopk_sim_switch(&L.scheduler_sp, f->sp);
  asan_back_in_scheduler();
  L.current = nullptr;
  progressed = true;
  return L.error;
}

// Block s (in slot s) has finished: its canaries checked, and its slot given the next block; a
// cluster's slots take the next cluster together once the whole cluster is done. `live` and
// `running`: the slots still in use. Returns E_SHARED where the block overran its dynamic shared
// memory.
int end_block(int s, BlockOrder& blocks, std::vector<char>& live, int& running, int poison) {
  Launch& L = g_launch;
  Block& b = L.blocks[s];
  const unsigned cs = L.cluster_size;
  if (async_block_end(b)) return L.error;
  if (b.dynamic) {
    if (long at = damaged_canary(b)) {
      snprintf(g_error, sizeof g_error,
               "block (%u,%u,%u): dynamic shared memory overrun: a thread wrote at byte offset %ld, outside "
               "the %zu bytes given as shared_mem (found when the block ended; the thread is not known)",
               b.idx.x, b.idx.y, b.idx.z, at, L.dynamic_bytes);
      return L.error = E_SHARED;
    }
  }
  if (cs == 1) {
    if (blocks.more()) {
      start_block(b, s, blocks.take(), s * L.nthreads, poison);
    } else {
      live[s] = 0;
      --running;
    }
  } else if (!b.finished) {
    // Its cluster may still read its shared memory: gone until the whole cluster is done,
    // then the cluster's slots take the next cluster together.
    b.finished = true;
    set_shared_gone(b, true);
    const int group = s - static_cast<int>(b.rank);
    bool all = true;
    for (int r = 0; r < static_cast<int>(cs); ++r) all = all && L.blocks[group + r].finished;
    for (int r = 0; all && r < static_cast<int>(cs); ++r) {
      set_shared_gone(L.blocks[group + r], false);
      if (blocks.more()) {
        start_block(L.blocks[group + r], group + r, blocks.take(), (group + r) * L.nthreads, poison);
      } else {
        live[group + r] = 0;
        --running;
      }
    }
  }
  return OK;
}

// The resident slots run by turns until every block of the grid has run, or the first fault.
int schedule(BlockOrder& blocks, std::vector<unsigned>& order, int resident, int poison) {
  Launch& L = g_launch;
  std::vector<char> live(resident, 0);
  for (int s = 0; s < resident; ++s) {
    start_block(L.blocks[s], s, blocks.take(), s * L.nthreads, poison);
    live[s] = 1;
  }
  int running = resident;
  while (running > 0) {
    bool progressed = false;
    for (int s = 0; s < resident; ++s) {
      if (!live[s]) continue;
      Block& b = L.blocks[s];
      if (int rc = run_threads(b, order, progressed)) return rc;
      if (b.done == L.nthreads && !b.finished) {  // a finished block's pages may be gone: not read
        if (int rc = end_block(s, blocks, live, running, poison)) return rc;
      }
    }
    if (!progressed && running > 0) {
      diagnose_stall(L.blocks);
      return L.error;
    }
  }
  return OK;
}

int run_launch(void (*entry)(void**), void** args, dim3 grid, dim3 block, size_t dynamic_bytes, int resident,
                      unsigned long long seed, unsigned long long block_seed, int poison,
                      unsigned long long spin_budget, double watchdog_s) {
  Launch& L = g_launch;
  begin_launch(entry, args, grid, block, dynamic_bytes, seed, spin_budget);
  const unsigned cs = L.cluster_size;
  unsigned long long nblocks = 1ull * grid.x * grid.y * grid.z;
  if (nblocks == 0 || L.nthreads == 0) return OK;
  if (cs == 0 || grid.x % L.cluster.x || grid.y % L.cluster.y || grid.z % L.cluster.z) {
    snprintf(g_error, sizeof g_error, "grid (%u,%u,%u) is not a whole number of clusters (%u,%u,%u)", grid.x,
             grid.y, grid.z, L.cluster.x, L.cluster.y, L.cluster.z);
    return E_CLUSTER;
  }
  // 0 (or more than the grid) keeps every block of the grid resident; a cluster's blocks are
  // resident together, so the count is a whole number of clusters.
  if (resident < 1 || static_cast<unsigned long long>(resident) > nblocks) resident = static_cast<int>(nblocks);
  resident = resident < static_cast<int>(cs) ? static_cast<int>(cs) : resident / static_cast<int>(cs) * static_cast<int>(cs);
  if (int rc = make_residents(resident)) return rc;
  std::vector<unsigned> order(L.nthreads);
  for (unsigned i = 0; i < L.nthreads; ++i) order[i] = i;

#ifndef CUTOPK_SIM_ASAN
  // Under AddressSanitizer its own handler reports (and ends the process) instead.
  SignalGuard guard;
#endif
  Watchdog watchdog(watchdog_s);
  if (sigsetjmp(g_crash_env, 1)) {
    L.current = nullptr;
    return L.error;
  }
  BlockOrder blocks(grid, nblocks, block_seed);
  return schedule(blocks, order, resident, poison);
}

int run(void (*entry)(void**), void** args, dim3 grid, dim3 block, size_t dynamic_bytes, int resident,
               unsigned long long seed, unsigned long long block_seed, int poison, unsigned long long spin_budget,
               double watchdog_s) {
  int rc = run_launch(entry, args, grid, block, dynamic_bytes, resident, seed, block_seed, poison, spin_budget,
                      watchdog_s);
  g_launch.current = nullptr;
  restore_shared();
  fflush(stdout);  // the kernel's printf output comes before anything Python prints next
  return rc;
}

}  // namespace cutopk_sim

// assert() in a kernel: glibc's assert calls this. Defined here (hidden, so it binds inside this
// module only), it reports the failed expression with the thread instead of aborting.
extern "C" __attribute__((visibility("hidden"))) void __assert_fail(const char* expr, const char* file,
                                                                   unsigned int line, const char* function) noexcept {
  if (!cutopk_sim::g_launch.current) abort();
  cutopk_sim::fault(cutopk_sim::E_ASSERT, static_cast<int>(line), "assertion `%s` failed in %s", expr, function);
}

extern "C" {
__attribute__((visibility("default"))) const char* cutopk_sim_error() { return cutopk_sim::g_error; }
// Gives back what the module keeps between launches: fiber stacks (two memory maps each, up to a
// block's worth) and shared-memory regions. A process has at most vm.max_map_count maps (65530 by
// default), so Python trims the modules launched least recently; the next launch makes new ones.
__attribute__((visibility("default"))) void cutopk_sim_trim() {
  using namespace cutopk_sim;
  long page = sysconf(_SC_PAGESIZE);
  for (char* s : g_stacks) {
    asan_forget_stack(s, STACK_BYTES);
    munmap(s - page, STACK_BYTES + page);
  }
  g_stacks = {};
  for (auto& m : g_dynamic_maps)
    if (m.first) munmap(m.first, m.second);
  g_dynamic_maps = {};
  for (unsigned char* a : g_arenas)
    if (a) munmap(a, ARENA_BYTES);
  g_arenas = {};
}
// The cluster shape (in blocks) of the next launch only; (1, 1, 1): no cluster.
__attribute__((visibility("default"))) void cutopk_sim_set_cluster(unsigned x, unsigned y, unsigned z) {
  cutopk_sim::g_next_cluster = dim3(x, y, z);
}
__attribute__((visibility("default"))) int cutopk_sim_fault_frames(unsigned long long* out, int capacity) {
  int n = cutopk_sim::g_nframes < capacity ? cutopk_sim::g_nframes : capacity;
  for (int i = 0; i < n; ++i) out[i] = cutopk_sim::g_frames[i];
  return n;
}
}

