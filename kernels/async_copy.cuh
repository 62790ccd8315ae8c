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
//
// Bulk copies completing on a barrier (one phase of a CopyBarrier, in shared memory):
//   copy_barrier_init(&bar)                  one thread, then __syncthreads(): the barrier counts
//                                            one arrival per phase, that of the copying thread
//   bulk_copy_async(dst, src, bytes, &bar) ...  that thread starts copies (addresses 16-byte
//                                            aligned, bytes a multiple of 16)
//   copy_barrier_arrive(&bar, bytes)         then it arrives, with the phase's bytes in all
//   copy_barrier_wait(&bar, phase & 1)       any thread waits for the phase: then it sees the bytes
// The arrival comes after the phase's copies, and one thread issues them all (the sm_80 form
// tracks that thread's copies issued before its arrival). Before a phase's destinations are
// copied to again, every thread that reads them has waited (and a barrier orders those reads
// before the next copies). sm_90: `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx
// ::bytes` and an mbarrier (`mbarrier.arrive.expect_tx`, `mbarrier.try_wait.parity`), as
// CUTLASS's SM90 bulk copies use them; sm_80: copy16_async for each 16 bytes and
// `cp.async.mbarrier.arrive.noinc` on an mbarrier (`mbarrier.test_wait.parity`); before sm_80,
// plain copies and a phase counter in the barrier's word. The simulator models the phases
// (CUTOPK_SIM_ASYNC_COPIES: cutopk/sim/runtime/sim_async.cpp).
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

// An mbarrier (8 bytes of shared memory) that bulk copies complete.
struct __align__(8) CopyBarrier {
  unsigned long long word;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
#endif

__device__ __forceinline__ void copy_barrier_init(CopyBarrier* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(bar)) : "memory");
  // The initialised barrier visible to the async proxy (the bulk copies) and the cluster.
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mbarrier.init.shared.b64 [%0], 1;\n" ::"r"(shared_address(bar)) : "memory");
#elif !defined(__CUDA_ARCH__) && defined(CUTOPK_SIM_ASYNC_COPIES)
  ::cutopk_sim::barrier_init(bar);
#else
  bar->word = 0;  // the count of completed phases
#endif
}

__device__ __forceinline__ void bulk_copy_async(void* dst, const void* src, unsigned bytes, CopyBarrier* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
#elif !defined(__CUDA_ARCH__) && defined(CUTOPK_SIM_ASYNC_COPIES)
  ::cutopk_sim::bulk_copy(dst, src, bytes, bar);
#else
  (void)bar;
  for (unsigned i = 0; i < bytes; i += 16) copy16_async(static_cast<char*>(dst) + i, static_cast<const char*>(src) + i);
#endif
}

__device__ __forceinline__ void copy_barrier_arrive(CopyBarrier* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  (void)bytes;  // the arrival happens when this thread's copies issued so far have landed
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(shared_address(bar)) : "memory");
#elif !defined(__CUDA_ARCH__) && defined(CUTOPK_SIM_ASYNC_COPIES)
  ::cutopk_sim::barrier_arrive(bar, bytes);
#else
  (void)bytes;
  __threadfence_block();  // the copies (plain stores here) before the phase's completion
  atomicAdd(reinterpret_cast<unsigned*>(&bar->word), 1u);
#endif
}

// Waits until the phase of parity `phase` (0 for the first, then 1, 0, ...) has completed.
__device__ __forceinline__ void copy_barrier_wait(CopyBarrier* bar, unsigned phase) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(shared_address(bar)),
      "r"(phase)
      : "memory");
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.test_wait.parity.shared.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(shared_address(bar)),
      "r"(phase)
      : "memory");
#elif !defined(__CUDA_ARCH__) && defined(CUTOPK_SIM_ASYNC_COPIES)
  ::cutopk_sim::barrier_wait(bar, phase);
#else
  while ((*reinterpret_cast<volatile unsigned*>(&bar->word) & 1u) == (phase & 1u)) {
  }
  __threadfence_block();
#endif
}

}  // namespace cutopk
