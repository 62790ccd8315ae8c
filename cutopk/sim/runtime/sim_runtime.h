// cutopk CPU simulator: the runtime compiled in front of every kernel source in host mode.
// This header holds what kernels compile against (types, the CUDA names, the small functions
// worth inlining); the rest is in sim_runtime.cpp and the launch's files (sim_scheduler.cpp and
// its parts), compiled once per set of flags into objects that every module links
// (cutopk/sim/_toolchain.py).
//
// Each CUDA thread is a fiber (its own stack, switched by the few instructions of
// cutopk_sim_switch: no kernel call, no signal mask save as swapcontext does). Fibers run until
// they block on a barrier or a warp-synchronous operation; the last thread to arrive completes
// the operation for the whole group and carries on, so most operations cost one switch per
// thread. Blocks run one after another, or several at a time ("resident blocks") for kernels
// whose blocks wait on each other.
//
// Shared memory: `__shared__` declarations are rewritten by the Python loader into references
// into a per-block arena (poisoned with 0xCD bytes at block start, so uninitialised reads show
// up); dynamic shared memory ends exactly at a PROT_NONE guard page, so an overrun faults.
//
// Faults (barrier divergence, warp mask mismatch, deadlock, shared-memory overrun, crashes)
// stop the launch and are reported through cutopk_sim_error(); the Python side raises them.
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cassert>
#include <csetjmp>
#include <csignal>
#include <ctime>
#include <dlfcn.h>
#include <execinfo.h>
#include <sys/syscall.h>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sys/mman.h>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#undef __align__
#undef __restrict__
#undef __shared__
#undef __constant__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
#define __constant__ static
// Every __shared__ declaration is rewritten before compilation; one that is left means the
// loader did not understand its form, and compilation stops here with this name.
#define __shared__ cutopk_sim_unsupported_shared_declaration

// The runtime's own symbols are hidden (each module links its own copy, see below).
#pragma GCC visibility push(hidden)
namespace cutopk_sim {

enum FiberState { RUNNABLE = 0, AT_BARRIER = 1, AT_WARP = 2, DONE = 3, AT_CLUSTER = 4 };
enum WarpOp {
  OP_SHFL,
  OP_SHFL_UP,
  OP_SHFL_DOWN,
  OP_SHFL_XOR,
  OP_BALLOT,
  OP_SYNCWARP,
  OP_MATCH_ANY,
  OP_MATCH_ALL,
  OP_REDUCE_ADD,
  OP_REDUCE_MIN,
  OP_REDUCE_MAX,
  OP_REDUCE_AND,
  OP_REDUCE_OR,
  OP_REDUCE_XOR,
};
// The Python side maps each code to an exception class (_errors.BY_CODE).
enum ErrorCode {
  OK = 0,
  E_BARRIER = 1,
  E_WARP = 2,
  E_DEADLOCK = 3,
  E_SHARED = 4,
  E_CRASH = 5,
  E_LIMIT = 6,
  E_ASSERT = 7,
  E_HANG = 8,
  E_RESOURCE = 9,
  E_CLUSTER = 10,
  E_ASYNC = 11,
};

static const char* const OP_NAMES[] = {
    "__shfl_sync",       "__shfl_up_sync",    "__shfl_down_sync",  "__shfl_xor_sync",  "__ballot_sync",
    "__syncwarp",        "__match_any_sync",  "__match_all_sync",  "__reduce_add_sync", "__reduce_min_sync",
    "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync",  "__reduce_xor_sync"};

struct Block;

// An asynchronous copy (copy16_async) that has not completed: its 16 bytes, read from the source
// when it was issued, land in `dst` at the wait that completes its group (sim_async.cpp).
struct PendingCopy {
  unsigned char* dst;
  unsigned char bytes[16];
  unsigned group;  // the thread's count of committed groups when it was issued (its group's number)
  uintptr_t site;  // the return address into the kernel: the source line of a fault about it
};

// A bulk copy (bulk_copy_async) whose bytes have not landed: read from the source at issue, they
// land at the first wait that sees its phase complete (sim_async.cpp).
struct BulkCopy {
  unsigned char* dst;
  std::vector<unsigned char> bytes;
  unsigned phase;   // the barrier's phase it completes
  unsigned thread;  // the issuing thread (linear index)
  uintptr_t site;   // the return address into the kernel
};

// A CopyBarrier of a block (an mbarrier counting one arrival per phase), by its address.
struct CopyBarrierState {
  const void* address = nullptr;
  unsigned completed = 0;        // phases completed
  unsigned issued = 0;           // bytes copied in the open phase
  int issuer = -1;               // the thread (linear index) that copies in the open phase, -1 none yet
  std::vector<BulkCopy> copies;  // not landed: of the open phase, or of completed ones no wait saw
};

struct Fiber {
  void* sp = nullptr;
  char* stack = nullptr;  // lowest usable byte; a guard page lies below it
  int state = RUNNABLE;
  unsigned linear = 0;  // thread index within the block
  uint3 tid{};
  Block* block = nullptr;
  int line = 0;  // source line of the last synchronising call
  // The pending warp operation.
  int op = 0;
  unsigned mask = 0;
  uint64_t value = 0;
  int arg = 0;
  int width = 32;
  uint64_t result = 0;
  int pred = 0;
  // Asynchronous copies: those not completed, in the order issued, and the groups committed.
  std::vector<PendingCopy> copies;
  unsigned groups = 0;
  // Thread-block clusters: arrived at the cluster barrier (barrier_arrive) and not yet waited,
  // and the phase of that arrival.
  bool cluster_arrived = false;
  unsigned cluster_phase = 0;
};

struct Block {
  uint3 idx{};
  unsigned first_fiber = 0;  // fibers [first_fiber, first_fiber + nthreads) belong to this block
  unsigned char* arena = nullptr;  // static shared memory
  unsigned char* dynamic = nullptr;  // dynamic shared memory (ends at a guard page)
  unsigned arrived = 0;  // threads waiting at the barrier
  int barrier_line = 0;  // the call site of the barrier they wait at
  unsigned done = 0;
  int pred_count = 0;
  std::vector<unsigned> warp_arrived;  // per warp: lanes waiting at a warp operation
  std::vector<unsigned> warp_done;  // per warp: lanes that have exited
  unsigned slot = 0;  // its place among the resident blocks (L.blocks)
  unsigned rank = 0;  // its rank in its thread-block cluster: slot - rank is the cluster's rank 0
  bool finished = false;  // every thread has exited (its shared memory is gone)
  std::vector<CopyBarrierState> copy_barriers;  // the barriers its threads initialised
};

// A cluster's barrier (cluster.sync()): threads of all its blocks waiting, and the call site.
struct ClusterBarrier {
  unsigned arrived = 0;
  int line = 0;
  unsigned phase = 0;  // phases completed: a thread's wait returns once its arrival's phase has
  bool sync = false;   // whether the phase's first arrival was a cluster.sync() (its line checked)
};

#ifdef CUTOPK_SIM_ASAN
constexpr size_t STACK_BYTES = 1024 * 1024;  // ASan's error report itself needs deep stacks
#else
constexpr size_t STACK_BYTES = 64 * 1024;  // printf needs about 13 KB
#endif
constexpr size_t STACK_COLOURS = 64;  // prepare_fiber's offsets of the stacks' first frames
constexpr size_t STATIC_SHARED_LIMIT = 48 * 1024;
constexpr size_t ARENA_BYTES = 64 * 1024;

struct Launch {
  dim3 grid, block;
  unsigned nthreads = 0;
  size_t dynamic_bytes = 0;
  void (*entry)(void**) = nullptr;
  void** args = nullptr;
  std::vector<Fiber> fibers;
  std::vector<Block> blocks;  // the resident blocks
  void* scheduler_sp = nullptr;
  Fiber* current = nullptr;
  // The turn of one block that run_threads has begun: its threads in `turn_order`'s order from
  // the fiber `turn_first`; the one at `turn_at` runs. A thread that gives way resumes the next
  // runnable one of the turn itself (next_in_turn), and only the turn's last goes back to the
  // scheduler: one switch a step instead of two, in the order the scheduler would take.
  const unsigned* turn_order = nullptr;
  size_t turn_at = 0, turn_count = 0;
  size_t turn_first = 0;
  bool entered_from_scheduler = false;  // (AddressSanitizer's fiber bookkeeping)
  int error = OK;
  unsigned long long spin_budget = 0;
  unsigned long long spins = 0;  // polls (fences, atomics that change nothing) since the last progress
  unsigned long long polls = 0;  // every poll, to give way to other threads now and then
  unsigned long long switches = 0;  // fiber switches so far: the watchdog's sign of life
  size_t static_shared_used = 0;  // static shared memory laid out so far in this launch
  unsigned epoch = 0;  // launch counter: SharedSite offsets are valid for one launch
  std::mt19937_64 rng;
  bool shuffle = false;
  // Thread-block clusters (sm_90): the cluster's dimensions in blocks and its size; the
  // resident blocks hold whole clusters, cluster_size consecutive slots each.
  dim3 cluster{1, 1, 1};
  unsigned cluster_size = 1;
  std::vector<ClusterBarrier> cluster_barriers;  // one per cluster of resident slots
};

// Module-wide state. The code that is the same for every module (sim_runtime.cpp,
// the launch's files) is compiled once per set of flags into objects that each module links: every
// module has its own copy of this state, hidden, so modules loaded into one process share nothing.
extern Launch g_launch;
extern char g_error[4096];

inline Fiber* cur() { return g_launch.current; }

// A thread made progress (a barrier or warp operation completed, memory changed by an atomic,
// a thread exited): spin-waits that were polling may now succeed.
inline void progressed() { g_launch.spins = 0; }

// Saves the callee-saved registers of the running context on its stack, stores its stack
// pointer in *from and resumes the context whose stack pointer is `to` (sim_fibers.cpp).
extern "C" void cutopk_sim_switch(void** from, void* to);

}  // namespace cutopk_sim
#include "sim_asan.h"  // (it needs Launch, above)
namespace cutopk_sim {

// The next runnable thread of the block's turn (run_threads), or null at the turn's end.
inline Fiber* next_in_turn() {
  Launch& L = g_launch;
  Fiber* first = &L.fibers[L.turn_first];
  while (++L.turn_at < L.turn_count) {
    Fiber* f = first + L.turn_order[L.turn_at];
    if (f->state == RUNNABLE) return f;
  }
  return nullptr;
}

// The running thread gives way: to the next runnable thread of the turn, or, at the turn's end
// or after a fault, to the scheduler.
inline void give_way(bool finished = false) {
  Launch& L = g_launch;
  Fiber* f = L.current;
  Fiber* next = L.error ? nullptr : next_in_turn();
  if (next) {
    L.current = next;
    L.switches++;
    asan_leaving_fiber(finished, next->stack, STACK_BYTES);
    cutopk_sim_switch(&f->sp, next->sp);
  } else {
    asan_leaving_fiber(finished);
    cutopk_sim_switch(&f->sp, L.scheduler_sp);
  }
  asan_entered_fiber();
}

// "block (x,y,z) thread (x,y,z) [warp w lane l]" for the thread of fiber f.
void describe_thread(char* out, size_t n, const Fiber* f);

// Records a fault for the running thread and abandons the launch: the fiber is never resumed.
[[noreturn]] void fault(int code, int line, const char* fmt, ...);

[[noreturn]] inline void trap(int line) { fault(E_CRASH, line, "__trap() called"); }

// The code addresses (offsets into the module) of the last fault's frames, innermost first;
// Python turns them into a kernel.cu line (sim_launch.cpp).
extern uintptr_t g_frames[16];
extern int g_nframes;
void record_frames(void* context);

// ---- shared memory ----

// One per __shared__ declaration (a function-local static). Offsets are laid out afresh in each
// launch, in the order the declarations are first reached, so that a module's kernels do not
// add up against the 48 KB one block may declare.
struct SharedSite {
  unsigned epoch = 0;
  size_t offset = 0;
};

inline void* shared_at(SharedSite& site, size_t bytes, size_t align, int line) {
  Launch& L = g_launch;
  if (site.epoch != L.epoch) {
    size_t off = (L.static_shared_used + align - 1) / align * align;
    if (off + bytes > STATIC_SHARED_LIMIT)
      fault(E_LIMIT, line, "static __shared__ memory exceeds the 48 KB a block may declare (%zu bytes requested)",
            off + bytes);
    site.offset = off;
    site.epoch = L.epoch;
    L.static_shared_used = off + bytes;
  }
  return cur()->block->arena + site.offset;
}

inline void* dynamic_shared() { return cur()->block->dynamic; }

// ---- barriers ----

// Lets every thread of block b waiting at its barrier go on (the last one has arrived).
void release_barrier(Block* b);

inline int syncthreads_impl(int line, int pred) {
  Fiber* f = cur();
  Block* b = f->block;
  // The hardware would let threads waiting at two different __syncthreads go together; CUDA
  // calls that undefined, and it is nearly always a bug, so it is reported.
  if (b->arrived == 0) {
    b->barrier_line = line;
  } else if (b->barrier_line != line) {
    Fiber* other = nullptr;
    for (unsigned i = 0; i < g_launch.nthreads && !other; ++i)
      if (g_launch.fibers[b->first_fiber + i].state == AT_BARRIER) other = &g_launch.fibers[b->first_fiber + i];
    char whom[160] = "?";
    if (other) describe_thread(whom, sizeof whom, other);
    fault(E_BARRIER, line,
          "__syncthreads here while %u other threads wait at the __syncthreads at line %d (first: %s) -- "
          "barrier divergence",
          b->arrived, b->barrier_line, whom);
  }
  f->line = line;
  f->state = AT_BARRIER;
  b->pred_count += pred != 0;
  if (++b->arrived + b->done == g_launch.nthreads && b->done == 0) {
    release_barrier(b);  // the last thread to arrive lets everyone go and carries on
  } else {
    give_way();
  }
  return static_cast<int>(f->result);
}

// ---- warp-synchronous operations ----

inline Fiber& lane_fiber(Block* b, unsigned warp, unsigned lane) {
  return g_launch.fibers[b->first_fiber + warp * 32 + lane];
}

inline unsigned lanes_in_warp(unsigned warp) {
  unsigned n = g_launch.nthreads - warp * 32;
  return n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
}

// Completes the operation of the group `mask` of warp `warp`, all of whose lanes wait on it.
void resolve_warp(Block* b, unsigned warp, unsigned mask, int line);

inline uint64_t warp_op(int line, int op, unsigned mask, uint64_t value, int arg, int width, int pred) {
  Fiber* f = cur();
  Block* b = f->block;
  unsigned warp = f->linear / 32, lane = f->linear % 32;
  if (!(mask >> lane & 1u))
    fault(E_WARP, line, "%s called with mask 0x%08x, which does not include the calling lane %u", OP_NAMES[op], mask,
          lane);
  if (mask & ~lanes_in_warp(warp))
    fault(E_WARP, line, "%s mask 0x%08x names lanes that do not exist in this warp (blockDim has %u threads)",
          OP_NAMES[op], mask, g_launch.nthreads);
  if (width < 1 || width > 32 || (width & (width - 1)))
    fault(E_WARP, line, "%s width %d is not a power of two in [1, 32]", OP_NAMES[op], width);
  f->line = line;
  f->op = op;
  f->mask = mask;
  f->value = value;
  f->arg = arg;
  f->width = width;
  f->pred = pred;
  f->state = AT_WARP;
  unsigned& arrived = b->warp_arrived[warp];
  arrived |= 1u << lane;
  if (unsigned gone = mask & b->warp_done[warp])
    fault(E_WARP, line, "%s mask 0x%08x names lane %u, which has already exited", OP_NAMES[op], mask,
          __builtin_ctz(gone));
  bool complete = (arrived & mask) == mask;
  for (unsigned m = mask; complete && m; m &= m - 1) {
    Fiber& other = lane_fiber(b, warp, __builtin_ctz(m));
    complete = other.mask == mask && other.op == op;
  }
  if (complete)
    resolve_warp(b, warp, mask, line);
  else
    give_way();
  return f->result;
}

template <class T>
inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8, "shuffled values are at most 8 bytes");
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof(T));
  return bits;
}

template <class T>
inline T from_bits(uint64_t bits) {
  T v;
  memcpy(&v, &bits, sizeof(T));
  return v;
}

template <class T>
inline T shfl(int line, int op, unsigned mask, T v, int arg, int width = 32) {
  return from_bits<T>(warp_op(line, op, mask, to_bits(v), arg, width, 0));
}

inline unsigned ballot(int line, unsigned mask, int pred) {
  return static_cast<unsigned>(warp_op(line, OP_BALLOT, mask, 0, 0, 32, pred));
}

template <class T>
inline unsigned match_any(int line, unsigned mask, T v) {
  return static_cast<unsigned>(warp_op(line, OP_MATCH_ANY, mask, to_bits(v), 0, 32, 0));
}

template <class T>
inline unsigned match_all(int line, unsigned mask, T v, int* pred) {
  unsigned r = static_cast<unsigned>(warp_op(line, OP_MATCH_ALL, mask, to_bits(v), 0, 32, 0));
  if (pred) *pred = cur()->pred;
  return r;
}

template <class T>
inline T reduce(int line, int op, unsigned mask, T v) {
  static_assert(sizeof(T) == 4 && std::is_integral_v<T>, "__reduce_*_sync takes int or unsigned");
  return static_cast<T>(warp_op(line, op, mask, static_cast<uint32_t>(v), std::is_signed_v<T>, 32, 0));
}

inline unsigned activemask() {
  Fiber* f = cur();
  unsigned warp = f->linear / 32, live = 0;
  for (unsigned m = lanes_in_warp(warp); m; m &= m - 1)
    if (lane_fiber(f->block, warp, __builtin_ctz(m)).state != DONE) live |= 1u << __builtin_ctz(m);
  return live;
}

// ---- memory ordering, atomics, spinning ----

// Kernels that wait on each other spin on atomics or fences: those are the points where the
// running thread gives way now and then, so that other threads (of other resident blocks) can
// progress. A poll that changes nothing counts towards the deadlock budget: when every thread
// only polls, budget after budget, none of them can ever see a change.
inline void poll_point(int line, bool changed_memory) {
  Launch& L = g_launch;
  if (changed_memory) {
    progressed();
  } else if (++L.spins > L.spin_budget) {
    fault(E_DEADLOCK, line,
          "no thread made progress in %llu consecutive polls (fences, atomics that changed nothing): a "
          "spin-wait that can never end -- deadlock (if another block should release it, raise "
          "resident_blocks)",
          L.spin_budget);
  }
  if ((++L.polls & 63) == 0) give_way();
}

inline void atomic_point(bool changed_memory) { poll_point(0, changed_memory); }

// ---- asynchronous copies (kernels/async_copy.cuh calls these where this is defined) ----
// Per thread, as PTX defines cp.async: a copy joins the thread's open group, async_commit
// closes it, async_wait(n) completes every committed group but the newest n (sim_async.cpp).
#define CUTOPK_SIM_ASYNC_COPIES 1
void async_copy16(void* dst, const void* src);
void async_commit();
void async_wait(int pending);
// A thread that exits with copies pending: a fault (called as it exits).
void async_exit(Fiber* f);
// Bulk copies completing on a CopyBarrier (kernels/async_copy.cuh): one arrival per phase.
void barrier_init(void* bar);
void bulk_copy(void* dst, const void* src, unsigned bytes, void* bar);
void barrier_arrive(void* bar, unsigned bytes);
void barrier_wait(void* bar, unsigned phase);
// At the end of block b: OK, or the fault of bulk copies that never landed (g_error set).
int async_block_end(Block& b);

#ifdef CUTOPK_SIM_TRAFFIC
// Counts an access of the counting build (sim_launch.cpp): for reads done by the runtime itself.
void count_access(const void* address, unsigned long long n, bool write);
#endif

}  // namespace cutopk_sim
#pragma GCC visibility pop

// ---- the CUDA names, in host mode ----

#define threadIdx (::cutopk_sim::cur()->tid)
#define blockIdx (::cutopk_sim::cur()->block->idx)
#define blockDim (::cutopk_sim::g_launch.block)
#define gridDim (::cutopk_sim::g_launch.grid)
#define warpSize 32

#define __syncthreads() ((void)::cutopk_sim::syncthreads_impl(__LINE__, 0))
#define __syncthreads_count(p) (::cutopk_sim::syncthreads_impl(__LINE__, (p)))
#define __syncthreads_or(p) (::cutopk_sim::syncthreads_impl(__LINE__, (p)) != 0)
#define __syncthreads_and(p) \
  (::cutopk_sim::syncthreads_impl(__LINE__, (p)) == static_cast<int>(::cutopk_sim::g_launch.nthreads))
#define __syncwarp(...) ((void)::cutopk_sim::syncwarp_impl(__LINE__, ##__VA_ARGS__))
#define __shfl_sync(mask, v, src, ...) \
  (::cutopk_sim::shfl(__LINE__, ::cutopk_sim::OP_SHFL, (mask), (v), (src), ##__VA_ARGS__))
#define __shfl_up_sync(mask, v, d, ...) \
  (::cutopk_sim::shfl(__LINE__, ::cutopk_sim::OP_SHFL_UP, (mask), (v), (d), ##__VA_ARGS__))
#define __shfl_down_sync(mask, v, d, ...) \
  (::cutopk_sim::shfl(__LINE__, ::cutopk_sim::OP_SHFL_DOWN, (mask), (v), (d), ##__VA_ARGS__))
#define __shfl_xor_sync(mask, v, m, ...) \
  (::cutopk_sim::shfl(__LINE__, ::cutopk_sim::OP_SHFL_XOR, (mask), (v), (m), ##__VA_ARGS__))
#define __ballot_sync(mask, p) (::cutopk_sim::ballot(__LINE__, (mask), (p)))
#define __any_sync(mask, p) (::cutopk_sim::ballot(__LINE__, (mask), (p)) != 0)
#define __all_sync(mask, p) (::cutopk_sim::ballot(__LINE__, (mask), (p)) == (mask))
#define __match_any_sync(mask, v) (::cutopk_sim::match_any(__LINE__, (mask), (v)))
#define __match_all_sync(mask, v, pred) (::cutopk_sim::match_all(__LINE__, (mask), (v), (pred)))
#define __reduce_add_sync(mask, v) (::cutopk_sim::reduce(__LINE__, ::cutopk_sim::OP_REDUCE_ADD, (mask), (v)))
#define __reduce_min_sync(mask, v) (::cutopk_sim::reduce(__LINE__, ::cutopk_sim::OP_REDUCE_MIN, (mask), (v)))
#define __reduce_max_sync(mask, v) (::cutopk_sim::reduce(__LINE__, ::cutopk_sim::OP_REDUCE_MAX, (mask), (v)))
#define __reduce_and_sync(mask, v) (::cutopk_sim::reduce(__LINE__, ::cutopk_sim::OP_REDUCE_AND, (mask), (v)))
#define __reduce_or_sync(mask, v) (::cutopk_sim::reduce(__LINE__, ::cutopk_sim::OP_REDUCE_OR, (mask), (v)))
#define __reduce_xor_sync(mask, v) (::cutopk_sim::reduce(__LINE__, ::cutopk_sim::OP_REDUCE_XOR, (mask), (v)))
#define __activemask() (::cutopk_sim::activemask())
#define __threadfence() (::cutopk_sim::poll_point(__LINE__, false))
#define __threadfence_block() (::cutopk_sim::poll_point(__LINE__, false))
#define __threadfence_system() (::cutopk_sim::poll_point(__LINE__, false))
#define __nanosleep(ns) (::cutopk_sim::poll_point(__LINE__, false))
#define __trap() (::cutopk_sim::trap(__LINE__))


#pragma GCC visibility push(hidden)
namespace cutopk_sim {
inline unsigned syncwarp_impl(int line, unsigned mask = 0xffffffffu) {
  return static_cast<unsigned>(warp_op(line, OP_SYNCWARP, mask, 0, 0, 32, 0));
}
}  // namespace cutopk_sim
#pragma GCC visibility pop

// A clock that moves with the simulation: kernels use it for timing or back-off, never for results.
inline long long clock64() { return static_cast<long long>(++::cutopk_sim::g_launch.polls); }

#include "sim_intrinsics.h"
#include "sim_cluster.h"
