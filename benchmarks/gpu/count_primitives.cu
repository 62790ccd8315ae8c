// M2 of the lease (benchmarks/cutopk_bench/lease.py): what one warp's count of one digit costs, in cycles per
// warp operation, for the primitives a shared-memory histogram can be built from.
//
// count_primitives(mode, distinct, iters, cycles, hist_out): every warp of the grid (the whole GPU
// busy: the host launches blocks per SM x SMs) runs `iters` operations; lane 0 reads clock64()
// before and after the loop and writes (end - start) / iters for its warp. In every iteration the
// warp's 32 lanes hold `distinct` distinct digits (lane % distinct, moved by 32 each iteration so
// that no value is hoisted; 12-bit digits as kernels/onchip_select.cuh counts them):
//   0 match        __match_any_sync alone (the peers' mask, folded into a register)
//   1 count_digit  cutopk::onchip::count_digit as the kernels include it (at the commit measured)
//   2 match_add    today's warp aggregation written out: __any_sync, __match_any_sync, the leader's
//                  atomicAdd of the popcount (stays the match A/B after count_digit changes)
//   3 atomic       a plain shared atomicAdd(&h[d], 1u) by every lane
//   4 ballot_match the peers' mask by a ballot per digit bit (CCCL util_ptx.cuh's MatchAny), alone
//   5 ballot_add   that mask, then the leader's atomicAdd of the popcount
// The block's histogram is added to hist_out at the end (the host checks the counts: every mode
// that counts must count warps x 32 x iters).
// Threads per block: 512 (launch bounds 512, 2); shared memory: 16 KB (4096 counters).
#include "onchip_select.cuh"

namespace cutopk::bench {

constexpr int BINS = 4096;
constexpr int DIGIT_BITS = 12;
constexpr unsigned FULL = 0xffffffffu;

__device__ __forceinline__ unsigned ballot_match(unsigned digit) {
  unsigned peers = FULL;
#pragma unroll
  for (int bit = 0; bit < DIGIT_BITS; ++bit) {
    const bool set = (digit >> bit) & 1u;
    const unsigned b = __ballot_sync(FULL, set);
    peers &= set ? b : ~b;
  }
  return peers;
}

__device__ __forceinline__ void add_as_leader(unsigned* hist, unsigned digit, unsigned peers) {
  const unsigned lane = threadIdx.x & 31;
  if (lane == (unsigned)(__ffs(peers) - 1)) atomicAdd(&hist[digit], (unsigned)__popc(peers));
}

__device__ __forceinline__ unsigned step(int mode, unsigned* hist, unsigned digit) {
  switch (mode) {
    case 0:
      return __match_any_sync(FULL, digit);
    case 1:
      onchip::count_digit(hist, digit, true);
      return 0;
    case 2: {
      if (!__any_sync(FULL, true)) return 0;
      const unsigned peers = __match_any_sync(FULL, digit);
      add_as_leader(hist, digit, peers);
      return 0;
    }
    case 3:
      atomicAdd(&hist[digit], 1u);
      return 0;
    case 4:
      return ballot_match(digit);
    default:
      add_as_leader(hist, digit, ballot_match(digit));
      return 0;
  }
}

}  // namespace cutopk::bench

extern "C" __global__ void __launch_bounds__(512, 2)
    count_primitives(int mode, int distinct, int iters, unsigned long long* cycles, unsigned* hist_out) {
  using namespace cutopk::bench;
  __shared__ unsigned hist[BINS];
  for (int i = threadIdx.x; i < BINS; i += blockDim.x) hist[i] = 0;
  __syncthreads();
  const unsigned lane = threadIdx.x & 31;
  const unsigned mine = lane % (unsigned)distinct;
  unsigned folded = 0;
  const long long start = clock64();
  for (int i = 0; i < iters; ++i) folded ^= step(mode, hist, (mine + 32u * (unsigned)i) & (BINS - 1));
  const long long end = clock64();
  const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  if (lane == 0) cycles[warp] = (unsigned long long)(end - start);
  if (folded == 0x9e3779b9u) hist[0] += 1;  // keeps the match-only modes' masks alive; never true
  __syncthreads();
  for (int i = threadIdx.x; i < BINS; i += blockDim.x)
    if (hist[i]) atomicAdd(&hist_out[i], hist[i]);
}
