// cutopk CPU simulator: the scheduler, fiber switches, crashes, the watchdog and the C entry
// points (and the counting build's hooks). The same for every kernel source: compiled once per set
// of flags into an object that every module links (cutopk/sim/_toolchain.py); the module's own
// part (the kernels' table and cutopk_sim_launch) is sim_launch.h with the code the loader appends.
#include "sim_runtime.h"
#include "sim_launch.h"

namespace cutopk_sim {

// What a module keeps between launches; its launch state, g_launch, is in sim_runtime.cpp.
sigjmp_buf g_crash_env;
std::vector<char*> g_stacks;
std::vector<unsigned char*> g_arenas;
std::vector<std::pair<unsigned char*, size_t>> g_dynamic_maps;  // (map, bytes)
dim3 g_next_cluster(1, 1, 1);  // the cluster shape of the next launch (cutopk_sim_set_cluster)

// ---- switching ----

// cutopk_sim_switch (sim_runtime.h).
asm(R"(
    .text
    .p2align 4
    .hidden cutopk_sim_switch
    .globl cutopk_sim_switch
    .type cutopk_sim_switch, @function
cutopk_sim_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cutopk_sim_switch, .-cutopk_sim_switch
)");

// ---- fibers ----

extern "C" void cutopk_sim_fiber_start();

void fiber_main() {
  asan_entered_fiber();
  Launch& L = g_launch;
  Fiber* f = L.current;
  L.entry(L.args);
  f = L.current;  // the same fiber; reread after the switches inside the kernel
  if (!f->copies.empty()) async_exit(f);
  f->state = DONE;
  f->block->done++;
  f->block->warp_done[f->linear / 32] |= 1u << (f->linear % 32);
  progressed();
  to_scheduler(true);
  __builtin_unreachable();
}

extern "C" __attribute__((used)) void cutopk_sim_fiber_body() { fiber_main(); }

asm(R"(
    .text
    .p2align 4
    .hidden cutopk_sim_fiber_start
    .globl cutopk_sim_fiber_start
    .type cutopk_sim_fiber_start, @function
cutopk_sim_fiber_start:
    call cutopk_sim_fiber_body
    ud2
    .size cutopk_sim_fiber_start, .-cutopk_sim_fiber_start
)");

char* new_stack() {
  long page = sysconf(_SC_PAGESIZE);
  size_t bytes = STACK_BYTES + page;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  mprotect(p, page, PROT_NONE);  // a stack overflow faults instead of corrupting memory
  return static_cast<char*>(p) + page;
}

void prepare_fiber(Fiber& f, char* stack) {
  f.stack = stack;
  asan_fresh_stack_top(stack + STACK_BYTES, 256);
  // The initial frame: six zeroed callee-saved registers for cutopk_sim_switch to pop, then
  // cutopk_sim_fiber_start as its return address. After that `ret`, rsp is 16-byte aligned, so
  // the `call` inside cutopk_sim_fiber_start enters the body with the alignment the ABI
  // requires (rsp + 8 a multiple of 16; SSE spills fault otherwise). The zeroed words above
  // end frame-pointer unwinding there.
  uintptr_t top = ((reinterpret_cast<uintptr_t>(stack) + STACK_BYTES) & ~static_cast<uintptr_t>(15)) - 16;
  void** sp = reinterpret_cast<void**>(top);
  sp[0] = sp[1] = nullptr;
  *--sp = reinterpret_cast<void*>(&cutopk_sim_fiber_start);
  for (int i = 0; i < 6; ++i) *--sp = nullptr;
  f.sp = sp;
  f.state = RUNNABLE;
}

// ---- shared memory ----

// Static shared memory: whole pages of their own (mapped, not malloc'ed), so that an exited
// block's arena can be made inaccessible while the rest of its cluster runs (sim_cluster.h).
unsigned char* arena(size_t i) {
  while (g_arenas.size() <= i) {
    void* p = mmap(nullptr, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_arenas.push_back(p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p));
  }
  return g_arenas[i];
}

// Dynamic shared memory of `bytes`, between two PROT_NONE pages: [guard][usable][guard], the
// region at the end of `usable`. An access that reaches a guard page faults at once; the few
// bytes between the region and the guards (the end is rounded to CUDA's 16-byte alignment) are
// canaries checked when the block ends.
unsigned char* dynamic_region(size_t i, size_t bytes) {
  long page = sysconf(_SC_PAGESIZE);
  size_t usable = (bytes + page - 1) / page * page;
  while (g_dynamic_maps.size() <= i) g_dynamic_maps.push_back({nullptr, 0});
  auto& m = g_dynamic_maps[i];
  if (m.second != usable + 2 * page) {
    if (m.first) munmap(m.first, m.second);
    void* p = mmap(nullptr, usable + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    m = {static_cast<unsigned char*>(p), usable + 2 * page};
    mprotect(m.first, page, PROT_NONE);
    mprotect(m.first + page + usable, page, PROT_NONE);
  }
  unsigned char* guard = m.first + (m.second - page);
  return reinterpret_cast<unsigned char*>(reinterpret_cast<uintptr_t>(guard - bytes) & ~static_cast<uintptr_t>(15));
}

constexpr unsigned char CANARY = 0xFD;
constexpr size_t CANARY_BEFORE = 64;

// The canary bytes around block b's dynamic region: [lo0, hi0) before it, [lo1, hi1) after.
void canary_ranges(const Block& b, unsigned char** r) {
  long page = sysconf(_SC_PAGESIZE);
  unsigned char* region = b.dynamic;
  unsigned char* page_start = region - reinterpret_cast<uintptr_t>(region) % page;  // a guard page or more region lies below
  r[0] = region - CANARY_BEFORE < page_start ? page_start : region - CANARY_BEFORE;
  r[1] = region;
  r[2] = region + g_launch.dynamic_bytes;
  r[3] = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(r[2]) + page - 1) / page * page);
}

void set_canaries(const Block& b) {
  unsigned char* r[4];
  canary_ranges(b, r);
  memset(r[0], CANARY, r[1] - r[0]);
  memset(r[2], CANARY, r[3] - r[2]);
}

// Where a canary was overwritten, as a byte offset from the region's start (0 if none).
long damaged_canary(const Block& b) {
  unsigned char* r[4];
  canary_ranges(b, r);
  for (unsigned char* p = r[0]; p < r[1]; ++p)
    if (*p != CANARY) return p - b.dynamic;
  for (unsigned char* p = r[2]; p < r[3]; ++p)
    if (*p != CANARY) return p - b.dynamic;
  return 0;
}

// An exited block of a cluster whose other blocks still run: its shared memory (the arena and the
// dynamic region's pages) is made inaccessible (`gone`), so that any later access faults, and
// made usable again when the whole cluster is done.
void set_shared_gone(Block& b, bool gone) {
  const int prot = gone ? PROT_NONE : PROT_READ | PROT_WRITE;
  mprotect(b.arena, ARENA_BYTES, prot);
  if (b.dynamic) {
    long page = sysconf(_SC_PAGESIZE);
    auto& m = g_dynamic_maps[b.slot];
    mprotect(m.first + page, m.second - 2 * page, prot);
  }
}

// The exited block whose shared memory holds `addr`, or nullptr.
Block* exited_owner(const void* addr) {
  Launch& L = g_launch;
  if (L.cluster_size < 2) return nullptr;
  long page = sysconf(_SC_PAGESIZE);
  auto a = static_cast<const unsigned char*>(addr);
  for (Block& b : L.blocks) {
    if (!b.finished) continue;
    if (a >= b.arena && a < b.arena + ARENA_BYTES) return &b;
    if (b.dynamic) {
      auto& m = g_dynamic_maps[b.slot];
      if (a >= m.first + page && a < m.first + m.second - page) return &b;
    }
  }
  return nullptr;
}

bool in_dynamic_guard(const void* addr) {
  long page = sysconf(_SC_PAGESIZE);
  auto a = static_cast<const unsigned char*>(addr);
  for (auto& m : g_dynamic_maps) {
    if (!m.first) continue;
    const unsigned char* back = m.first + (m.second - page);
    if ((a >= back && a < back + page) || (a >= m.first && a < m.first + page)) return true;
  }
  return false;
}

// ---- crashes ----

bool in_stack_guard(const void* addr) {
  long page = sysconf(_SC_PAGESIZE);
  auto a = static_cast<const char*>(addr);
  for (char* s : g_stacks)
    if (a >= s - page && a < s) return true;
  return false;
}

// Return addresses of the frames inside this module at the last fault, as offsets from the
// module's load address (Python turns them into kernel.cu lines with addr2line).
uintptr_t g_frames[16];
int g_nframes = 0;

void record_frames(void* context) {
  Dl_info self{};
  dladdr(reinterpret_cast<void*>(&record_frames), &self);
  uintptr_t base = reinterpret_cast<uintptr_t>(self.dli_fbase);
  void* pcs[48];
  int n = 0;
  if (context) pcs[n++] = reinterpret_cast<void*>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
  n += backtrace(pcs + n, 48 - n);
  g_nframes = 0;
  for (int i = 0; i < n && g_nframes < 16; ++i) {
    Dl_info where{};
    if (!dladdr(pcs[i], &where) || where.dli_fbase != self.dli_fbase) continue;
    // A return address points after its call; step back into it (not for the faulting PC).
    uintptr_t off = reinterpret_cast<uintptr_t>(pcs[i]) - base - (i == 0 && context ? 0 : 1);
    g_frames[g_nframes++] = off;
  }
}

void on_signal(int sig, siginfo_t* info, void* context) {
  Launch& L = g_launch;
  record_frames(context);
  char who[160] = "outside any thread";
  if (L.current) describe_thread(who, sizeof who, L.current);
  Block* gone = sig == SIGSEGV || sig == SIGBUS ? exited_owner(info->si_addr) : nullptr;
  if (gone) {
    snprintf(g_error, sizeof g_error,
             "%s (last synchronising call at line %d): access to the shared memory of block (%u,%u,%u) (cluster "
             "rank %u) after it exited: a block must stay (cluster.sync()) until no block of its cluster reads its "
             "shared memory any more -- cluster misuse",
             who, L.current ? L.current->line : 0, gone->idx.x, gone->idx.y, gone->idx.z, gone->rank);
    L.error = E_CLUSTER;
  } else if ((sig == SIGSEGV || sig == SIGBUS) && in_stack_guard(info->si_addr)) {
    snprintf(g_error, sizeof g_error,
             "%s: stack overflow: the thread used more than its %zu KB stack (large local arrays or deep "
             "recursion; last synchronising call at line %d)",
             who, STACK_BYTES / 1024, L.current ? L.current->line : 0);
    L.error = E_CRASH;
  } else if ((sig == SIGSEGV || sig == SIGBUS) && in_dynamic_guard(info->si_addr)) {
    snprintf(g_error, sizeof g_error,
             "%s: dynamic shared memory overrun: access at or past the end of the %zu bytes given as shared_mem",
             who, L.dynamic_bytes);
    L.error = E_SHARED;
  } else {
    snprintf(g_error, sizeof g_error, "%s (last synchronising call at line %d): %s%s%p", who,
             L.current ? L.current->line : 0, strsignal(sig), sig == SIGSEGV || sig == SIGBUS ? " at address " : "",
             sig == SIGSEGV || sig == SIGBUS ? info->si_addr : nullptr);
    L.error = E_CRASH;
  }
  siglongjmp(g_crash_env, 1);
}

struct SignalGuard {
  static constexpr int SIGNALS[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  struct sigaction old[5];
  stack_t old_stack{};
  char* alt = nullptr;
  SignalGuard() {
    void* warm[2];
    backtrace(warm, 2);  // loads the unwinder now: the signal handler must not be the first caller
    // The handler needs a stack of its own: the fault may be a fiber's stack overflow.
    alt = static_cast<char*>(malloc(1 << 16));
    stack_t ss{};
    ss.ss_sp = alt;
    ss.ss_size = 1 << 16;
    sigaltstack(&ss, &old_stack);
    struct sigaction sa{};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 5; ++i) sigaction(SIGNALS[i], &sa, &old[i]);
  }
  ~SignalGuard() {
    for (int i = 0; i < 5; ++i) sigaction(SIGNALS[i], &old[i], nullptr);
    sigaltstack(&old_stack, nullptr);
    free(alt);
  }
};

// ---- the watchdog ----

// A thread that loops without ever calling into the runtime (a spin on a volatile flag) can
// only be stopped from outside: a timer signal checks that fiber switches still happen, and
// abandons the launch when the same thread has run for watchdog seconds.
double g_watchdog_s = 0;
unsigned long long g_watch_switches = 0;
double g_watch_stalled = 0;
double g_watch_tick = 0;

void on_tick(int, siginfo_t*, void* context) {
  Launch& L = g_launch;
  if (!L.current || L.switches != g_watch_switches) {
    g_watch_switches = L.switches;
    g_watch_stalled = 0;
    return;
  }
  g_watch_stalled += g_watch_tick;
  if (g_watch_stalled < g_watchdog_s || L.error) return;
  record_frames(context);
  char who[160];
  describe_thread(who, sizeof who, L.current);
  snprintf(g_error, sizeof g_error,
           "%s has run for %.1f s without reaching a barrier, warp operation, fence or atomic: an endless loop, or "
           "a spin-wait on memory that no running thread will change -- hang (watchdog_s=%g; last synchronising "
           "call at line %d)",
           who, g_watch_stalled, g_watchdog_s, L.current->line);
  L.error = E_HANG;
  siglongjmp(g_crash_env, 1);
}

struct Watchdog {
  timer_t timer{};
  bool armed = false;
  struct sigaction old{};
  explicit Watchdog(double seconds) {
    if (seconds <= 0) return;
    g_watchdog_s = seconds;
    g_watch_tick = seconds / 4 < 0.25 ? seconds / 4 : 0.25;
    g_watch_switches = g_launch.switches;
    g_watch_stalled = 0;
    struct sigaction sa{};
    sa.sa_sigaction = on_tick;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGVTALRM, &sa, &old);
    // Aimed at this OS thread only (not the process), on the monotonic clock.
    struct sigevent ev{};
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGVTALRM;
    ev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) return;
    struct itimerspec spec{};
    spec.it_interval.tv_sec = static_cast<time_t>(g_watch_tick);
    spec.it_interval.tv_nsec = static_cast<long>((g_watch_tick - static_cast<double>(spec.it_interval.tv_sec)) * 1e9);
    spec.it_value = spec.it_interval;
    timer_settime(timer, 0, &spec, nullptr);
    armed = true;
  }
  ~Watchdog() {
    if (armed) timer_delete(timer);
    if (g_watchdog_s > 0) {
      // SIGVTALRM's default action ends the process: a tick still in flight must not find it.
      if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) old.sa_handler = SIG_IGN;
      sigaction(SIGVTALRM, &old, nullptr);
    }
    g_watchdog_s = 0;
  }
};

// ---- the scheduler ----

const char* state_name(const Fiber& f) {
  return f.state == AT_BARRIER   ? "__syncthreads"
         : f.state == AT_CLUSTER ? "cluster.sync()"
         : f.state == AT_WARP    ? OP_NAMES[f.op]
         : f.state == DONE       ? "exited"
                                 : "running";
}

// No thread of the resident blocks can run: name the fault.
void diagnose_stall(std::vector<Block>& blocks) {
  Launch& L = g_launch;
  for (Block& b : blocks) {
    Fiber* at_barrier = nullptr;
    Fiber* exited = nullptr;
    for (unsigned i = 0; i < L.nthreads; ++i) {
      Fiber& f = L.fibers[b.first_fiber + i];
      if (f.state == AT_BARRIER && !at_barrier) at_barrier = &f;
      if (f.state == DONE && !exited) exited = &f;
    }
    if (at_barrier && exited) {
      L.current = at_barrier;
      char who[160];
      describe_thread(who, sizeof who, exited);
      snprintf(g_error, sizeof g_error,
               "block (%u,%u,%u): __syncthreads at line %d is reached by %u of %u threads; %u exited without "
               "reaching it (first: %s) -- barrier divergence",
               b.idx.x, b.idx.y, b.idx.z, at_barrier->line, b.arrived, L.nthreads, b.done, who);
      L.error = E_BARRIER;
      return;
    }
  }
  // A cluster.sync() that threads of the cluster exited without reaching.
  for (size_t first = 0; L.cluster_size > 1 && first < blocks.size(); first += L.cluster_size) {
    Fiber* waiting = nullptr;
    Fiber* exited = nullptr;
    for (size_t s = first; s < first + L.cluster_size; ++s)
      for (unsigned i = 0; i < L.nthreads; ++i) {
        Fiber& f = L.fibers[blocks[s].first_fiber + i];
        if (f.state == AT_CLUSTER && !waiting) waiting = &f;
        if (f.state == DONE && !exited) exited = &f;
      }
    if (waiting && exited) {
      L.current = waiting;
      char who[160];
      describe_thread(who, sizeof who, exited);
      snprintf(g_error, sizeof g_error,
               "cluster.sync() at line %d is reached by %u of the cluster's %u threads; the others exited without "
               "reaching it (first: %s) -- barrier divergence",
               waiting->line, L.cluster_barriers[first / L.cluster_size].arrived, L.cluster_size * L.nthreads, who);
      L.error = E_BARRIER;
      return;
    }
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
    prepare_fiber(f, f.stack);
  }
}

int run_launch(void (*entry)(void**), void** args, dim3 grid, dim3 block, size_t dynamic_bytes, int resident,
                      unsigned long long seed, unsigned long long block_seed, int poison,
                      unsigned long long spin_budget, double watchdog_s) {
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
  // The cluster shape set for this launch (cutopk_sim_set_cluster), then back to none.
  L.cluster = g_next_cluster;
  g_next_cluster = dim3(1, 1, 1);
  const unsigned cs = L.cluster.x * L.cluster.y * L.cluster.z;
  L.cluster_size = cs;
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
  L.cluster_barriers.assign(resident / cs, ClusterBarrier{});
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
  // The next block to start: clusters (single blocks without one) in x-fastest order, or
  // (block_seed non-zero) in an order shuffled by block_seed, so that blocks coordinating through
  // global memory (the last block of a row finishing it, tickets) meet every finish order; a
  // cluster's blocks start together, rank r into the r-th slot of its group.
  unsigned long long next = 0;
  const unsigned long long nclusters = nblocks / cs;
  std::vector<unsigned long long> cluster_order;
  if (block_seed) {
    cluster_order.resize(nclusters);
    for (unsigned long long i = 0; i < nclusters; ++i) cluster_order[i] = i;
    std::mt19937_64 block_rng(block_seed);
    std::shuffle(cluster_order.begin(), cluster_order.end(), block_rng);
  }
  const dim3 cd = L.cluster;
  const unsigned long long gcx = grid.x / cd.x, gcy = grid.y / cd.y;
  auto block_index = [&](unsigned long long n) {
    unsigned long long c = n / cs, r = n % cs;
    if (block_seed) c = cluster_order[c];
    return uint3{static_cast<unsigned>((c % gcx) * cd.x + r % cd.x),
                 static_cast<unsigned>(((c / gcx) % gcy) * cd.y + (r / cd.x) % cd.y),
                 static_cast<unsigned>((c / (gcx * gcy)) * cd.z + r / (1ull * cd.x * cd.y))};
  };
  std::vector<char> live(resident, 0);
  for (int s = 0; s < resident; ++s) {
    start_block(L.blocks[s], s, block_index(next++), s * L.nthreads, poison);
    live[s] = 1;
  }
  int running = resident;
  while (running > 0) {
    bool progressed = false;
    for (int s = 0; s < resident; ++s) {
      if (!live[s]) continue;
      Block& b = L.blocks[s];
      if (L.shuffle) std::shuffle(order.begin(), order.end(), L.rng);
      for (unsigned i : order) {
        Fiber& f = L.fibers[b.first_fiber + i];
        if (f.state != RUNNABLE) continue;
        L.current = &f;
        L.switches++;
        asan_entering_fiber(f.stack, STACK_BYTES);
        cutopk_sim_switch(&L.scheduler_sp, f.sp);
        asan_back_in_scheduler();
        L.current = nullptr;
        progressed = true;
        if (L.error) return L.error;
      }
      if (b.done == L.nthreads && !b.finished) {  // a finished block's pages may be gone: not read
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
          if (next < nblocks) {
            start_block(b, s, block_index(next++), s * L.nthreads, poison);
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
            if (next < nblocks) {
              start_block(L.blocks[group + r], group + r, block_index(next++), (group + r) * L.nthreads, poison);
            } else {
              live[group + r] = 0;
              --running;
            }
          }
        }
      }
    }
    if (!progressed && running > 0) {
      diagnose_stall(L.blocks);
      return L.error;
    }
  }
  return OK;
}

// Clears the protections an abandoned launch (a fault) left on exited blocks' shared memory.
void restore_shared() {
  for (Block& b : g_launch.blocks)
    if (b.finished && g_launch.cluster_size > 1) {
      set_shared_gone(b, false);
      b.finished = false;
    }
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
  for (char* s : g_stacks) munmap(s - page, STACK_BYTES + page);
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

// ---- global-memory traffic (a counting build: RawModule(count_traffic=True)) ----
// The counting build is compiled with GCC's thread-sanitizer instrumentation and no sanitizer
// runtime: every load and store of the module calls __tsan_{read,write}{1,2,4,8,16}(address)
// (atomics too: the runtime's atomics are plain loads and stores), defined here. They count the
// accesses that fall inside the launch's array arguments (global memory; shared memory, stacks
// and the runtime's own data lie elsewhere): bytes read, bytes written, and the distinct 32-byte
// sectors touched, one bit per sector of each argument's region. (GCC's kernel-address
// sanitizer has callbacks too, but it drops the check of a store to an address just loaded:
// `x[i] += 1` would count no write.)
#ifdef CUTOPK_SIM_TRAFFIC
namespace cutopk_sim {

struct TrafficRegion {
  uintptr_t lo, hi;
  uintptr_t first_sector;
  unsigned long long* bits;
};
constexpr int MAX_TRAFFIC_REGIONS = 64;
TrafficRegion g_traffic[MAX_TRAFFIC_REGIONS];
int g_ntraffic = 0;
uintptr_t g_traffic_lo = 1, g_traffic_hi = 0;  // the hull of the regions (empty: none)
unsigned long long g_bytes_read = 0, g_bytes_written = 0;

// Not instrumented itself (it would call itself), and it calls nothing that is.
__attribute__((no_sanitize_thread)) void count_access(const void* address, unsigned long long n, bool write) {
  uintptr_t a = reinterpret_cast<uintptr_t>(address);
  if (a >= g_traffic_hi || a + n <= g_traffic_lo || n == 0) return;
  for (int i = 0; i < g_ntraffic; ++i) {
    TrafficRegion& r = g_traffic[i];
    if (a >= r.hi || a + n <= r.lo) continue;
    uintptr_t lo = a < r.lo ? r.lo : a, hi = a + n > r.hi ? r.hi : a + n;
    (write ? g_bytes_written : g_bytes_read) += hi - lo;
    for (uintptr_t s = lo >> 5; s <= (hi - 1) >> 5; ++s) {
      uintptr_t bit = s - r.first_sector;
      r.bits[bit >> 6] |= 1ull << (bit & 63);
    }
    return;
  }
}

}  // namespace cutopk_sim

extern "C" {
#define CUTOPK_SIM_NO_TSAN __attribute__((no_sanitize_thread))
#define CUTOPK_SIM_TRAFFIC_HOOKS(n)                                                                              \
  CUTOPK_SIM_NO_TSAN void __tsan_read##n(void* a) { cutopk_sim::count_access(a, n, false); }                    \
  CUTOPK_SIM_NO_TSAN void __tsan_write##n(void* a) { cutopk_sim::count_access(a, n, true); }                    \
  CUTOPK_SIM_NO_TSAN void __tsan_unaligned_read##n(void* a) { cutopk_sim::count_access(a, n, false); }          \
  CUTOPK_SIM_NO_TSAN void __tsan_unaligned_write##n(void* a) { cutopk_sim::count_access(a, n, true); }          \
  CUTOPK_SIM_NO_TSAN void __tsan_volatile_read##n(void* a) { cutopk_sim::count_access(a, n, false); }           \
  CUTOPK_SIM_NO_TSAN void __tsan_volatile_write##n(void* a) { cutopk_sim::count_access(a, n, true); }           \
  CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_read##n(void* a) { cutopk_sim::count_access(a, n, false); } \
  CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_write##n(void* a) { cutopk_sim::count_access(a, n, true); }
CUTOPK_SIM_TRAFFIC_HOOKS(1)
CUTOPK_SIM_TRAFFIC_HOOKS(2)
CUTOPK_SIM_TRAFFIC_HOOKS(4)
CUTOPK_SIM_TRAFFIC_HOOKS(8)
CUTOPK_SIM_TRAFFIC_HOOKS(16)
#undef CUTOPK_SIM_TRAFFIC_HOOKS
CUTOPK_SIM_NO_TSAN void __tsan_read_range(void* a, long n) {
  cutopk_sim::count_access(a, static_cast<unsigned long long>(n), false);
}
CUTOPK_SIM_NO_TSAN void __tsan_write_range(void* a, long n) {
  cutopk_sim::count_access(a, static_cast<unsigned long long>(n), true);
}
// The module's constructor calls __tsan_init; function entry/exit is not instrumented.
CUTOPK_SIM_NO_TSAN void __tsan_init() {}
CUTOPK_SIM_NO_TSAN void __tsan_func_entry(void*) {}
CUTOPK_SIM_NO_TSAN void __tsan_func_exit(void*) {}

// Starts counting over the n regions [bounds[2i], bounds[2i+1]) (disjoint, sorted); 0 on
// success, -1 when there are too many regions or no memory for the sector bits.
__attribute__((visibility("default"), no_sanitize_thread)) int cutopk_sim_traffic_begin(
    const unsigned long long* bounds, int n) {
  using namespace cutopk_sim;
  g_ntraffic = 0;
  g_traffic_lo = 1;
  g_traffic_hi = 0;
  g_bytes_read = g_bytes_written = 0;
  if (n > MAX_TRAFFIC_REGIONS) return -1;
  for (int i = 0; i < n; ++i) {
    TrafficRegion& r = g_traffic[i];
    r.lo = bounds[2 * i];
    r.hi = bounds[2 * i + 1];
    r.first_sector = r.lo >> 5;
    size_t sectors = r.hi > r.lo ? ((r.hi - 1) >> 5) - r.first_sector + 1 : 0;
    r.bits = static_cast<unsigned long long*>(calloc((sectors + 63) / 64 + 1, 8));
    if (!r.bits) return -1;
    g_ntraffic = i + 1;
    if (g_traffic_lo > g_traffic_hi || r.lo < g_traffic_lo) g_traffic_lo = r.lo;
    if (r.hi > g_traffic_hi) g_traffic_hi = r.hi;
  }
  return 0;
}

// Stops counting: out[0] bytes read, out[1] bytes written, out[2] sectors touched.
__attribute__((visibility("default"), no_sanitize_thread)) void cutopk_sim_traffic_end(unsigned long long* out) {
  using namespace cutopk_sim;
  unsigned long long sectors = 0;
  for (int i = 0; i < g_ntraffic; ++i) {
    TrafficRegion& r = g_traffic[i];
    size_t count = r.hi > r.lo ? ((r.hi - 1) >> 5) - r.first_sector + 1 : 0;
    for (size_t w = 0; w < (count + 63) / 64; ++w) sectors += __builtin_popcountll(r.bits[w]);
    free(r.bits);
    r.bits = nullptr;
  }
  out[0] = g_bytes_read;
  out[1] = g_bytes_written;
  out[2] = sectors;
  g_ntraffic = 0;
  g_traffic_lo = 1;
  g_traffic_hi = 0;
}
}
#endif  // CUTOPK_SIM_TRAFFIC
