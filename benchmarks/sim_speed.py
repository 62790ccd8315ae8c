"""Speed of the CPU simulator's thread switching: one 256-thread block doing 50 barriers and
200 warp shuffles per thread (the budget in the simulator issue is 5 ms for this launch).

    python benchmarks/sim_speed.py [--repeat 20] [--check]
    python3 benchmarks/sim_speed.py --calibrate

With --check the exit status is 1 when even the fastest launch is over budget (the minimum, not
the median, so that other work on a shared CI machine does not fail it). The budget is 5 ms on a
machine as fast as the one it was set on, and grows with a slower machine's time for a fixed
pure-Python loop (the fastest of several): CI machines differ by up to 2x in single-core speed, and
an absolute budget failed a slow one on code that ran 1.7x under it on a fast one. --calibrate
prints that loop's time alone and needs nothing but Python (.ci/run prints it before and after
its steps, so that a run's time can be read against the machine's speed).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

BUDGET_MS = 5.0
# The calibration loop's fastest time on the machine where the launch took 3.0 ms against the 5 ms
# budget (2 cores, Python 3.11): a machine that runs the loop slower gets a budget as much larger.
REFERENCE_CALIBRATION_MS = 15.0
CALIBRATION_ITERATIONS = 300_000

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


def calibration_ms(repeat: int = 7) -> float:
    """The fastest of ``repeat`` runs of a fixed integer loop, in ms: this machine's speed."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        total = 0
        for i in range(CALIBRATION_ITERATIONS):
            total += i * i
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def budget_ms(calibration: float) -> float:
    """The launch's budget on a machine whose calibration loop takes ``calibration`` ms: 5 ms,
    scaled up on a slower machine than the reference, never down."""
    return BUDGET_MS * max(1.0, calibration / REFERENCE_CALIBRATION_MS)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--check", action="store_true", help="exit 1 if the fastest launch is over budget")
    parser.add_argument("--calibrate", action="store_true", help="only time the calibration loop")
    args = parser.parse_args(argv)
    if args.calibrate:
        print(
            f"calibration loop {calibration_ms():.1f} ms (the machine's speed; "
            f"{REFERENCE_CALIBRATION_MS:.1f} ms on the reference machine)"
        )
        return 0
    import numpy as np  # here, not above: --calibrate runs in a bare Python

    from cutopk import sim

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
    calibration = calibration_ms()
    budget = budget_ms(calibration)
    print(
        f"256 threads x (50 barriers + 200 shuffles): median {med:.2f} ms, min {min(times) * 1e3:.2f} ms "
        f"over {args.repeat} launches ({med * 1e6 / switches:.0f} ns per synchronising call); "
        f"budget {budget:.2f} ms (calibration loop {calibration:.1f} ms, reference "
        f"{REFERENCE_CALIBRATION_MS:.1f} ms)"
    )
    return 1 if args.check and min(times) * 1e3 > budget else 0


if __name__ == "__main__":
    sys.exit(main())
