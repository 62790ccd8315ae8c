// Copies from global to shared memory that run while the thread goes on: every load of a row is
// issued at a kernel's entry and waited for chunk by chunk, so that the first chunk's keys are
// counted while the later chunks are still arriving.
//
// The protocol (per thread, as CUDA's cp.async groups):
//   copy16_async(dst, src) ...   start copies of 16 bytes (both addresses 16-byte aligned)
//   commit_copies()              close them into a group (the copies since the last commit)
//   wait_copies(p)               wait until at most p of this thread's groups are in flight
//   __syncthreads()              then the block sees every thread's waited copies
// A thread reads a copy's destination only after that wait and barrier; it never writes a
// pending destination. Every group is waited for (wait_copies(0)) before the block exits.
//
// Per architecture: sm_80 and later, `cp.async.cg.shared.global` (16 bytes, cached in L2 only,
// the data never passing through registers) and its group instructions; before sm_80 a 16-byte
// load and store (the copy is done when copy16_async returns; commit and wait do nothing). On
// the host, the CPU simulator models the asynchrony (copies land only at the wait that covers
// them, the destination poisoned until then: cutopk/sim/runtime) where it defines
// CUTOPK_SIM_ASYNC_COPIES; any other host compilation (the nvcc host pass) copies at once.
#pragma once

namespace cutopk {

// The most groups wait_copies distinguishes: a larger `pending` waits as for this many (waiting
// for more groups than asked is always safe).
constexpr int MAX_PENDING_GROUPS = 7;

__device__ __forceinline__ void copy16_async(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned shared_address = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address), "l"(src) : "memory");
#elif !defined(__CUDA_ARCH__) && defined(CUTOPK_SIM_ASYNC_COPIES)
  ::cutopk_sim::async_copy16(dst, src);
#else
  struct __align__(16) Bytes16 {
    unsigned w[4];
  };
  *reinterpret_cast<Bytes16*>(dst) = *reinterpret_cast<const Bytes16*>(src);
#endif
}

__device__ __forceinline__ void commit_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#elif !defined(__CUDA_ARCH__) && defined(CUTOPK_SIM_ASYNC_COPIES)
  ::cutopk_sim::async_commit();
#endif
}

// cp.async.wait_group takes an immediate: one instantiation per value.
template <int N>
__device__ __forceinline__ void wait_group() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#elif !defined(__CUDA_ARCH__) && defined(CUTOPK_SIM_ASYNC_COPIES)
  ::cutopk_sim::async_wait(N);
#endif
}

// Waits until at most `pending` groups are in flight: the largest N <= pending (at most
// MAX_PENDING_GROUPS) that wait_group takes.
template <int N>
__device__ __forceinline__ void wait_at_most(int pending) {
  if constexpr (N == 0) {
    wait_group<0>();
  } else {
    if (pending >= N)
      wait_group<N>();
    else
      wait_at_most<N - 1>(pending);
  }
}

__device__ __forceinline__ void wait_copies(int pending) {
  wait_at_most<MAX_PENDING_GROUPS>(pending);
}

}  // namespace cutopk
