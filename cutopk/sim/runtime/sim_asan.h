// cutopk CPU simulator: AddressSanitizer's fiber bookkeeping, empty calls outside asan=True
// builds. Included by sim_runtime.h, after Launch (entered_from_scheduler).
#pragma once

namespace cutopk_sim {

// AddressSanitizer must be told about every stack switch, or it mistakes fiber stacks for
// overflows of the thread's stack (CUTOPK_SIM_ASAN is defined for asan=True builds).
#ifdef CUTOPK_SIM_ASAN
// (ASan's runtime defines these: visible, unlike the runtime's own names.)
extern "C" __attribute__((visibility("default"))) void __sanitizer_start_switch_fiber(void** fake_stack_save,
                                                                                  const void* bottom, size_t size);
extern "C" __attribute__((visibility("default"))) void __sanitizer_finish_switch_fiber(void* fake_stack_save,
                                                                                   const void** bottom_old,
                                                                                   size_t* size_old);
inline const void* g_scheduler_stack = nullptr;
inline size_t g_scheduler_stack_size = 0;
inline void* g_scheduler_fake = nullptr;
// Entered from the scheduler, the stack left is the scheduler's: remembered for the way back.
inline void asan_entered_fiber() {
  if (g_launch.entered_from_scheduler)
    __sanitizer_finish_switch_fiber(nullptr, &g_scheduler_stack, &g_scheduler_stack_size);
  else
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
}
inline void asan_leaving_fiber(bool finished, const void* stack = nullptr, size_t size = 0) {
  static void* fake;
  g_launch.entered_from_scheduler = stack == nullptr;
  __sanitizer_start_switch_fiber(finished ? nullptr : &fake, stack ? stack : g_scheduler_stack,
                                 stack ? size : g_scheduler_stack_size);
}
inline void asan_entering_fiber(const void* stack, size_t size) {
  g_launch.entered_from_scheduler = true;
  __sanitizer_start_switch_fiber(&g_scheduler_fake, stack, size);
}
inline void asan_back_in_scheduler() { __sanitizer_finish_switch_fiber(g_scheduler_fake, nullptr, nullptr); }
extern "C" __attribute__((visibility("default"))) void __asan_unpoison_memory_region(void const volatile* addr,
                                                                                    size_t size);
// The top of a fiber stack made fresh before prepare_fiber writes its initial frame there: the
// frames of a fiber that ended without returning from them (its last switch away, a fault's jump
// out) leave their redzones poisoned. (Deeper down, each function's prologue rewrites its own
// frame's shadow.)
inline void asan_fresh_stack_top(const void* top, size_t size) {
  __asan_unpoison_memory_region(static_cast<const char*>(top) - size, size);
}
// A whole fiber stack made fresh before it is unmapped: ASan keeps the shadow of memory it did not
// allocate, so a later mapping at the same address (Python's allocator's arenas) would inherit
// the stale redzones and report a stack-buffer overflow there.
inline void asan_forget_stack(const void* stack, size_t size) { __asan_unpoison_memory_region(stack, size); }
#else
inline void asan_fresh_stack_top(const void*, size_t) {}
inline void asan_forget_stack(const void*, size_t) {}
inline void asan_entered_fiber() {}
inline void asan_leaving_fiber(bool, const void* = nullptr, size_t = 0) {}
inline void asan_entering_fiber(const void*, size_t) {}
inline void asan_back_in_scheduler() {}
#endif

}  // namespace cutopk_sim
