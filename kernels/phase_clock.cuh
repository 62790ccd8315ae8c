// Phase clocks: where a block's time goes, step by step (benchmarks/gpu/phase_clocks.py). Off in every
// normal build: CUTOPK_PHASE(i, name) expands to nothing, and the kernels' machine code is the
// same as without the stamps (tests/bench/test_lease_kernels.py compares the SASS byte for byte).
//
// With CUTOPK_PHASE_CLOCKS defined (benchmarks/gpu/phase_clocks.py adds it to NVRTC's options),
// thread 0 of each block writes clock64() into cutopk_phase_stamps[block][i] as it passes the
// named step `name`, the i-th of its kernel (0: entry). Each stamp follows the barrier that ends
// its step where the step ends with one, so thread 0's clock is the block's; the host reads the
// array (CuPy's get_global), takes differences of consecutive stamps and zeroes it before the next
// launch. Blocks at or past CUTOPK_PHASE_BLOCKS are not stamped. clock64 counts the cycles of the
// block's own SM: stamps of different blocks are never compared.
#pragma once

#ifdef CUTOPK_PHASE_CLOCKS
#ifndef CUTOPK_PHASE_BLOCKS
#define CUTOPK_PHASE_BLOCKS 4096
#endif
#define CUTOPK_PHASE_STEPS 8
#ifdef __CUDACC__
#define CUTOPK_PHASE_EXPORT
#else  // the simulator's host build hides its symbols: the host reads this one by name
#define CUTOPK_PHASE_EXPORT __attribute__((visibility("default")))
#endif
extern "C" {
CUTOPK_PHASE_EXPORT __device__ unsigned long long cutopk_phase_stamps[CUTOPK_PHASE_BLOCKS * CUTOPK_PHASE_STEPS];
}
#define CUTOPK_PHASE(i, name)                                                                     \
  do {                                                                                            \
    static_assert((i) < CUTOPK_PHASE_STEPS, "a phase index past the stamps' row: " #name);        \
    if (threadIdx.x == 0 && blockIdx.x < CUTOPK_PHASE_BLOCKS)                                     \
      cutopk_phase_stamps[blockIdx.x * CUTOPK_PHASE_STEPS + (i)] = (unsigned long long)clock64(); \
  } while (0)
#else
#define CUTOPK_PHASE(i, name) \
  do {                        \
  } while (0)
#endif
