"""M2 of the lease: the counting primitives in cycles per warp operation (count_primitives.cu).

    python3 benchmarks/gpu/count_primitives.py --out M2.csv [--iters 1024]
    python3 benchmarks/gpu/count_primitives.py --sim        # on the CPU simulator: runs and checks, cycles meaningless
    python3 benchmarks/gpu/count_primitives.py --dry-run    # what would run

Compiled by NVRTC through CuPy (``-std=c++17``, the headers inlined as the launcher does), launched
with 2 blocks of 512 threads per SM (every block resident: the whole GPU busy) for each primitive
and each number of distinct digits per warp: 1, 2, 4, 8, 13, 16 and 32, and every count from 1 to
32 for the plain atomic. Each row: cycles per warp operation (each warp's clock64 difference over
its iterations; mean, min and max over the warps), and whether the counting modes counted every
lane of every iteration once. On the simulator clock64 counts its own polls, not cycles.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/: the benchmark package

import numpy as np
from cutopk_bench import watchdog

from cutopk.cuda import kernel_source

SOURCE = pathlib.Path(__file__).with_name("count_primitives.cu")
MODES = ("match", "count_digit", "match_add", "atomic", "ballot_match", "ballot_add")
COUNTS = (False, True, True, True, False, True)  # the modes that add to the histogram
DISTINCT = (1, 2, 4, 8, 13, 16, 32)
FIELDS = ("primitive", "distinct", "cycles_per_op", "min", "max", "warps", "iters", "counted")
BLOCK = 512


def source() -> str:
    """count_primitives.cu with the headers it includes inlined (the local-header rule of the
    launcher's and the simulator's modules)."""
    text = SOURCE.read_text()
    heads = re.findall(r'#include "([^"]+)"', text)
    inlined = "\n".join(kernel_source._inline(kernel_source.files_of(h)) for h in heads)
    return inlined + "\n" + re.sub(r'#include "[^"]+"\n', "", text)


def plan() -> list[tuple[str, int]]:
    rows = []
    for mode in MODES:
        for d in range(1, 33) if mode == "atomic" else DISTINCT:
            rows.append((mode, d))
    return rows


def measure(launch, xp, blocks: int, iters: int, rows=None):
    """Yields one CSV row per (primitive, distinct): ``launch(grid, block, args)`` runs the kernel."""
    warps = blocks * BLOCK // 32
    for mode, distinct in rows or plan():
        cycles = xp.zeros(warps, dtype=xp.uint64)
        hist = xp.zeros(4096, dtype=xp.uint32)
        launch(
            (blocks,),
            (BLOCK,),
            (np.int32(MODES.index(mode)), np.int32(distinct), np.int32(iters), cycles, hist),
        )
        c = np.asarray(cycles.get() if hasattr(cycles, "get") else cycles, dtype=np.float64) / iters
        total = int((hist.get() if hasattr(hist, "get") else hist).sum(dtype=np.int64))
        counted = total == warps * 32 * iters if COUNTS[MODES.index(mode)] else total == 0
        yield {
            "primitive": mode,
            "distinct": distinct,
            "cycles_per_op": f"{c.mean():.1f}",
            "min": f"{c.min():.1f}",
            "max": f"{c.max():.1f}",
            "warps": warps,
            "iters": iters,
            "counted": "ok" if counted else f"WRONG {total}",
        }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/gpu/count_primitives.py", description=__doc__.split("\n")[0])
    p.add_argument("--out", help="the CSV file (default: stdout)")
    p.add_argument("--iters", type=int, default=1024, help="operations per warp (default 1024)")
    p.add_argument("--sim", action="store_true", help="on the CPU simulator (one block, a few iterations)")
    p.add_argument("--dry-run", action="store_true", help="print what would run")
    args = p.parse_args(argv)
    if args.dry_run:
        print(
            f"would compile {SOURCE.name} ({len(source())} characters with its headers) with NVRTC and run "
            f"{len(plan())} launches of 2 blocks x {BLOCK} threads per SM, {args.iters} operations a warp"
        )
        return 0
    if args.sim:
        from cutopk import sim

        launch, xp, blocks, iters = (
            sim.RawModule(source()).get_function("count_primitives"),
            np,
            1,
            min(args.iters, 4),
        )
    else:
        import cupy

        mod = cupy.RawModule(code=source(), options=("-std=c++17",))
        launch, xp = mod.get_function("count_primitives"), cupy
        blocks, iters = 2 * cupy.cuda.Device().attributes["MultiProcessorCount"], args.iters
    out = open(args.out, "w", newline="") if args.out else sys.stdout
    writer = csv.DictWriter(out, FIELDS)
    writer.writeheader()
    dog, bad = watchdog.Watchdog(watchdog.limit_from_env() if not args.sim else 0), 0
    with dog.watch("count_primitives"):
        for row in measure(launch, xp, blocks, iters):
            writer.writerow(row)
            out.flush()
            bad += row["counted"] != "ok"
            if out is not sys.stdout:
                print(" ".join(str(v) for v in row.values()), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
