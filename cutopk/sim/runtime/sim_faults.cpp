// cutopk CPU simulator, a launch's faults: a signal in a kernel thread (a crash, a stack overflow,
// an access to an exited block's shared memory, an overrun of dynamic shared memory) turned into
// an error naming the thread, the frames of the fault, and the watchdog that stops a thread that
// never gives way.
#include "sim_runtime.h"
#include "sim_launch.h"
#include "sim_launch_parts.h"

namespace cutopk_sim {

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

SignalGuard::SignalGuard() {
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

SignalGuard::~SignalGuard() {
  for (int i = 0; i < 5; ++i) sigaction(SIGNALS[i], &old[i], nullptr);
  sigaltstack(&old_stack, nullptr);
  free(alt);
}

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

Watchdog::Watchdog(double seconds) {
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

Watchdog::~Watchdog() {
  if (armed) timer_delete(timer);
  if (g_watchdog_s > 0) {
    // SIGVTALRM's default action ends the process: a tick still in flight must not find it.
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) old.sa_handler = SIG_IGN;
    sigaction(SIGVTALRM, &old, nullptr);
  }
  g_watchdog_s = 0;
}

}  // namespace cutopk_sim
