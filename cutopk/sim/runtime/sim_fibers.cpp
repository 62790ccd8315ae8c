// cutopk CPU simulator, the launch's fibers: the switch between the scheduler and a thread
// (cutopk_sim_switch), a thread's first frame, and its stack (a guard page below it).
#include "sim_runtime.h"
#include "sim_launch.h"
#include "sim_launch_parts.h"

namespace cutopk_sim {

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
  give_way(true);
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
  // Each stack's frames start a different number of cache lines below its top (its colour, from
  // its page number: new_stack's maps lie STACK_BYTES + a page apart, an odd number of pages, so
  // neighbouring stacks take every colour in turn). With every top at one page offset, all the
  // fibers' saved registers and first frames would share a few cache sets, and nearly every
  // switch would miss the cache. The colours cost at most 4 KB of each stack.
  const size_t colour = (reinterpret_cast<uintptr_t>(stack) / 4096 % STACK_COLOURS) * 64;
  asan_fresh_stack_top(stack + STACK_BYTES, 256 + colour);
  // The initial frame: six zeroed callee-saved registers for cutopk_sim_switch to pop, then
  // cutopk_sim_fiber_start as its return address. After that `ret`, rsp is 16-byte aligned, so
  // the `call` inside cutopk_sim_fiber_start enters the body with the alignment the ABI
  // requires (rsp + 8 a multiple of 16; SSE spills fault otherwise). The zeroed words above
  // end frame-pointer unwinding there.
  uintptr_t top = ((reinterpret_cast<uintptr_t>(stack) + STACK_BYTES - colour) & ~static_cast<uintptr_t>(15)) - 16;
  void** sp = reinterpret_cast<void**>(top);
  sp[0] = sp[1] = nullptr;
  *--sp = reinterpret_cast<void*>(&cutopk_sim_fiber_start);
  for (int i = 0; i < 6; ++i) *--sp = nullptr;
  f.sp = sp;
  f.state = RUNNABLE;
}

}  // namespace cutopk_sim
