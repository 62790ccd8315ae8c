"""Speed of the CPU simulator's thread switching: one 256-thread block doing 50 barriers and
200 warp shuffles per thread (the budget in the simulator issue is 5 ms for this launch).

    python benchmarks/sim_speed.py [--repeat 20] [--check]

With --check the exit status is 1 when even the fastest launch is over budget (the minimum, not
the median, so that other work on a shared CI machine does not fail it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from cutopk import sim

BUDGET_MS = 5.0

KERNEL = r"""
extern "C" __global__ void __launch_bounds__(256) sync_heavy(int* out) {
  int v = threadIdx.x;
  for (int round = 0; round < 50; ++round) {
    for (int s = 0; s < 4; ++s) v += __shfl_xor_sync(0xffffffffu, v, 1 << s);
    __syncthreads();
  }
  out[threadIdx.x] = v;
}
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--check", action="store_true", help="exit 1 if the fastest launch exceeds 5 ms")
    args = parser.parse_args(argv)
    fn = sim.RawModule(code=KERNEL).get_function("sync_heavy")
    out = np.zeros(256, np.int32)
    fn(1, 256, (out,))  # build and warm up
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        fn(1, 256, (out,))
        times.append(time.perf_counter() - t0)
    med = statistics.median(times) * 1e3
    switches = 256 * (50 + 200)
    print(
        f"256 threads x (50 barriers + 200 shuffles): median {med:.2f} ms, min {min(times) * 1e3:.2f} ms "
        f"over {args.repeat} launches ({med * 1e6 / switches:.0f} ns per synchronising call); budget 5 ms"
    )
    return 1 if args.check and min(times) * 1e3 > BUDGET_MS else 0


if __name__ == "__main__":
    sys.exit(main())
