// cutopk CPU simulator: the scheduler and the C entry points, compiled after the kernel source.
// The Python loader appends the table of kernels (cutopk_sim_kernels) below this file.
#pragma once

namespace cutopk_sim {

// The signature of a kernel, read off its function type by the compiler: for each parameter a
// kind letter ('p' pointer, 'i' signed integer, 'u' unsigned integer, 'f' floating point, 'h'
// half, 'b' bfloat16, 'B' bool, '?' other) and its size in bytes.
template <class T>
constexpr char kind_of() {
  if constexpr (std::is_pointer_v<T>) return 'p';
  else if constexpr (std::is_same_v<T, bool>) return 'B';
  else if constexpr (std::is_same_v<T, __half>) return 'h';
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return 'b';
  else if constexpr (std::is_floating_point_v<T>) return 'f';
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return 'i';
  else if constexpr (std::is_integral_v<T>) return 'u';
  else return '?';
}

template <class... A>
int describe(void (*)(A...), char* kinds, unsigned long long* sizes, int capacity) {
  constexpr int n = sizeof...(A);
  const char k[] = {kind_of<std::decay_t<A>>()..., 0};
  const unsigned long long s[] = {sizeof(std::decay_t<A>)..., 0};
  for (int i = 0; i < n && i < capacity; ++i) {
    kinds[i] = k[i];
    sizes[i] = s[i];
  }
  return n;
}

// Calls a kernel with its arguments taken from an array of pointers to each value, as CUDA's
// cuLaunchKernel takes them.
template <class... A, size_t... I>
void invoke_with(void (*f)(A...), void** args, std::index_sequence<I...>) {
  f(*static_cast<std::decay_t<A>*>(args[I])...);
}

template <class... A>
void invoke(void (*f)(A...), void** args) {
  invoke_with(f, args, std::index_sequence_for<A...>{});
}

struct KernelEntry {
  void (*launch)(void**);
  int (*describe)(char*, unsigned long long*, int);
};

// ---- fibers ----

extern "C" void cutopk_sim_fiber_start();

inline void fiber_main() {
  asan_entered_fiber();
  Launch& L = g_launch;
  Fiber* f = L.current;
  L.entry(L.args);
  f = L.current;  // the same fiber; reread after the switches inside the kernel
  f->state = DONE;
  f->block->done++;
  f->block->warp_done[f->linear / 32] |= 1u << (f->linear % 32);
  L.spins = 0;
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

inline char* new_stack() {
  long page = sysconf(_SC_PAGESIZE);
  size_t bytes = STACK_BYTES + page;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  mprotect(p, page, PROT_NONE);  // a stack overflow faults instead of corrupting memory
  return static_cast<char*>(p) + page;
}

inline void prepare_fiber(Fiber& f, char* stack) {
  f.stack = stack;
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

inline unsigned char* arena(size_t i) {
  while (g_arenas.size() <= i) g_arenas.push_back(static_cast<unsigned char*>(malloc(ARENA_BYTES)));
  return g_arenas[i];
}

// Dynamic shared memory of `bytes`, ending exactly at a PROT_NONE page.
inline unsigned char* dynamic_region(size_t i, size_t bytes) {
  long page = sysconf(_SC_PAGESIZE);
  size_t usable = (bytes + page - 1) / page * page;
  while (g_dynamic_maps.size() <= i) g_dynamic_maps.push_back({nullptr, 0});
  auto& m = g_dynamic_maps[i];
  if (m.second < usable + page) {
    if (m.first) munmap(m.first, m.second);
    void* p = mmap(nullptr, usable + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    m = {static_cast<unsigned char*>(p), usable + page};
    mprotect(m.first + usable, page, PROT_NONE);
  }
  unsigned char* guard = m.first + (m.second - page);
  // Round down to 16 bytes: the region is as aligned as CUDA's, and ends within 15 bytes of
  // the guard page (a dynamic size that is a multiple of 16 ends exactly at it).
  return reinterpret_cast<unsigned char*>(reinterpret_cast<uintptr_t>(guard - bytes) & ~static_cast<uintptr_t>(15));
}

inline bool in_dynamic_guard(const void* addr) {
  long page = sysconf(_SC_PAGESIZE);
  for (auto& m : g_dynamic_maps) {
    if (!m.first) continue;
    const unsigned char* guard = m.first + (m.second - page);
    auto a = static_cast<const unsigned char*>(addr);
    if (a >= guard && a < guard + page) return true;
  }
  return false;
}

// ---- crashes ----

inline void on_signal(int sig, siginfo_t* info, void*) {
  Launch& L = g_launch;
  char who[160] = "outside any thread";
  if (L.current) describe_thread(who, sizeof who, L.current);
  if ((sig == SIGSEGV || sig == SIGBUS) && in_dynamic_guard(info->si_addr)) {
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

// ---- the scheduler ----

inline const char* state_name(const Fiber& f) {
  return f.state == AT_BARRIER ? "__syncthreads" : f.state == AT_WARP ? OP_NAMES[f.op] : f.state == DONE ? "exited" : "running";
}

// No thread of the resident blocks can run: name the fault.
inline void diagnose_stall(std::vector<Block>& blocks) {
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

inline void start_block(Block& b, size_t slot, uint3 idx, unsigned first, bool poison) {
  Launch& L = g_launch;
  b.idx = idx;
  b.first_fiber = first;
  b.arrived = b.done = 0;
  b.pred_count = 0;
  b.warp_arrived.assign((L.nthreads + 31) / 32, 0u);
  b.warp_done.assign((L.nthreads + 31) / 32, 0u);
  b.arena = arena(slot);
  b.dynamic = L.dynamic_bytes ? dynamic_region(slot, L.dynamic_bytes) : nullptr;
  if (poison) {
    memset(b.arena, 0xCD, ARENA_BYTES);
    if (b.dynamic) memset(b.dynamic, 0xCD, L.dynamic_bytes);
  }
  for (unsigned i = 0; i < L.nthreads; ++i) {
    Fiber& f = L.fibers[first + i];
    f.block = &b;
    f.linear = i;
    f.tid = {i % L.block.x, (i / L.block.x) % L.block.y, i / (L.block.x * L.block.y)};
    f.line = 0;
    f.mask = 0;
    prepare_fiber(f, f.stack);
  }
}

inline int run(void (*entry)(void**), void** args, dim3 grid, dim3 block, size_t dynamic_bytes, int resident,
               unsigned long long seed, int poison, unsigned long long spin_budget) {
  Launch& L = g_launch;
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
  unsigned long long nblocks = 1ull * grid.x * grid.y * grid.z;
  if (nblocks == 0 || L.nthreads == 0) return OK;
  if (resident < 1) resident = 1;
  if (static_cast<unsigned long long>(resident) > nblocks) resident = static_cast<int>(nblocks);
  size_t nfibers = static_cast<size_t>(resident) * L.nthreads;
  while (g_stacks.size() < nfibers) {
    char* s = new_stack();
    if (!s) {
      snprintf(g_error, sizeof g_error, "cannot allocate fiber stacks for %zu threads", nfibers);
      return E_LIMIT;
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
  if (sigsetjmp(g_crash_env, 1)) {
    L.current = nullptr;
    return L.error;
  }
  unsigned long long next = 0;  // the next block to start, in x-fastest order
  auto block_index = [&](unsigned long long n) {
    return uint3{static_cast<unsigned>(n % grid.x), static_cast<unsigned>((n / grid.x) % grid.y),
                 static_cast<unsigned>(n / (1ull * grid.x * grid.y))};
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
        asan_entering_fiber(f.stack, STACK_BYTES);
        cutopk_sim_switch(&L.scheduler_sp, f.sp);
        asan_back_in_scheduler();
        L.current = nullptr;
        progressed = true;
        if (L.error) return L.error;
      }
      if (b.done == L.nthreads) {
        if (next < nblocks) {
          start_block(b, s, block_index(next++), s * L.nthreads, poison);
        } else {
          live[s] = 0;
          --running;
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

}  // namespace cutopk_sim

extern "C" {
__attribute__((visibility("default"))) const char* cutopk_sim_error() { return cutopk_sim::g_error; }
}
