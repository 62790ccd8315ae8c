// cutopk CPU simulator: what the runtime's launch files share (sim_fibers.cpp, sim_shared.cpp,
// sim_faults.cpp, sim_scheduler.cpp; sim_traffic.cpp stands alone): the state a module keeps
// between launches, and the steps each file gives the others. Compiled into the runtime's objects
// only, never into a module's own code.
#pragma once

#pragma GCC visibility push(hidden)
namespace cutopk_sim {

// What a module keeps between launches (sim_scheduler.cpp).
extern sigjmp_buf g_crash_env;
extern std::vector<char*> g_stacks;
extern std::vector<unsigned char*> g_arenas;
extern std::vector<std::pair<unsigned char*, size_t>> g_dynamic_maps;  // (map, bytes)
extern dim3 g_next_cluster;

// sim_fibers.cpp
char* new_stack();
void prepare_fiber(Fiber& f, char* stack);

// sim_shared.cpp
unsigned char* arena(size_t i);
unsigned char* dynamic_region(size_t i, size_t bytes);
void set_canaries(const Block& b);
long damaged_canary(const Block& b);
void set_shared_gone(Block& b, bool gone);
Block* exited_owner(const void* addr);
bool in_dynamic_guard(const void* addr);
void restore_shared();

// sim_faults.cpp: the frames of the last fault, and the guards a launch holds while it runs.
extern uintptr_t g_frames[16];
extern int g_nframes;
struct SignalGuard {
  static constexpr int SIGNALS[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  struct sigaction old[5];
  stack_t old_stack{};
  char* alt = nullptr;
  SignalGuard();
  ~SignalGuard();
};

struct Watchdog {
  timer_t timer{};
  bool armed = false;
  struct sigaction old{};
  explicit Watchdog(double seconds);
  ~Watchdog();
};

}  // namespace cutopk_sim
#pragma GCC visibility pop
