"""Long rows: launches, scratch and global-memory traffic of each plan, and the time that traffic
implies at H100 HBM3 bandwidth (issue 28, item 5).

    PYTHONPATH=. python benchmarks/long_rows.py [--out FILE.md] [--no-sim]

Per case (the issue's table, then the long-row cases of the benchmark grid: float32 / uniform /
row-major points whose plan is the multi-block select): from ``cutopk.plan`` on the simulator
backend (nothing is read: the input is a view with the case's shape over 16 bytes) the
launches, the scratch (and its ratio to the input), ``plan.global_bytes`` (and its ratio to the
input plus the outputs: what any top-K must move) and that many bytes at 3.35 TB/s.

For the issue's cases, a scaled-down version (at most SIM_ROWS rows of SIM_N elements, the same
dtype, K and algorithm) runs on the simulator with traffic counting: the bytes it moved in
32-byte sectors, beside the plan's bytes for that shape, and the sector efficiency (input plus
outputs over the bytes moved in sectors). Keys are uniform random bits (NaN bit patterns
replaced): the spread keys the plan's formulas assume.

Nothing here runs on a GPU: the times are what the counted bytes imply at peak bandwidth, not
measurements.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import numpy as np

import cutopk
from cutopk import sim
from cutopk._demo.grid import REGIMES, Case, regime_cases

HBM3_BYTES_PER_S = 3.35e12  # H100 SXM5 HBM3
SIM_ROWS = 2
SIM_N = 1 << 16

ISSUE_CASES = [
    Case("issue", 128, 151936, 256),
    Case("issue", 1, 1 << 24, 1024),
    Case("issue", 4, 1 << 20, 64),
    Case("issue", 1, 1 << 22, 1),
    Case("issue", 16, 1 << 18, 2048),
    Case("issue", 32, 128256, 50, dtype="float16"),
    Case("issue", 8, 1 << 20, 100, dtype="float64"),
    Case("issue", 8, 1 << 20, 100, dtype="int64"),
    Case("issue", 2, 1 << 22, 16, dtype="int8"),
]

# Published kernel times for the same shape (rows, n, k, dtype) of AIR top-k (Zhang et al.,
# "Parallel Top-K Algorithms on GPU: A Comprehensive Study and New Methods", SC'23) or CUB
# DeviceTopK, with their source. None found for any case of this table (see the results file
# for the nearest published figures, other shapes or GPUs).
PUBLISHED: dict[tuple, str] = {}


def _unread(case: Case) -> np.ndarray:
    """The case's (rows, n) input as a view over 16 bytes: plan() reads nothing."""
    dt = np.dtype(case.dtype)
    base = np.zeros(16, np.uint8).view(dt)
    return np.lib.stride_tricks.as_strided(base, (case.rows, case.n), (case.n * dt.itemsize, dt.itemsize))


def _spread(rows: int, n: int, dtype: str) -> np.ndarray:
    """Uniform random bits as ``dtype``; NaN patterns replaced by zero."""
    dt = np.dtype(dtype)
    raw = np.random.default_rng(28).integers(0, 256, rows * n * dt.itemsize, dtype=np.uint8)
    x = raw.view(dt).reshape(rows, n).copy()
    if dt.kind == "f":
        x[np.isnan(x)] = 0
    return x


def _io_bytes(rows: int, n: int, k: int, itemsize: int) -> int:
    """The input and the outputs (values and int64 indices): what any top-K must move."""
    return rows * n * itemsize + rows * k * (itemsize + 8)


@dataclasses.dataclass
class Row:
    case: Case
    algorithm: str
    launches: int
    scratch: int
    global_bytes: int
    io: int
    sim: str = ""


def _plan_row(case: Case) -> Row:
    x = _unread(case)
    p = cutopk.plan(x, case.k, backend="sim", mode=case.mode)
    io = _io_bytes(case.rows, case.n, case.k, x.itemsize)
    return Row(case, p.algorithm, p.launch_count, p.scratch_bytes, p.global_bytes, io)


def _sim_columns(case: Case, algorithm: str, sim_n: int = SIM_N) -> str:
    """Counted bytes of a scaled-down run: ``shape | plan bytes | counted bytes | efficiency``."""
    rows, n = min(case.rows, SIM_ROWS), min(case.n, sim_n)
    k = min(case.k, n)
    x = _spread(rows, n, case.dtype)
    kw = {"algorithm": algorithm, "mode": case.mode}
    try:
        p = cutopk.plan(x, k, backend="sim", **kw)
    except ValueError:  # the algorithm does not take the scaled shape: let the dispatcher choose
        kw.pop("algorithm")
        p = cutopk.plan(x, k, backend="sim", **kw)
    cutopk.top_k(x, k, backend="sim", **kw)
    with sim.counting_traffic() as records:
        cutopk.top_k(x, k, backend="sim", **kw)
    moved = 32 * sum(r.sectors for r in records)
    kernels = sum(x.global_bytes for x in p.launches if x.grid)
    efficiency = _io_bytes(rows, n, k, x.itemsize) / moved if moved else float("nan")
    return f"{rows}x{n} k={k} {p.algorithm} | {kernels:,} | {moved:,} | {efficiency:.2f}"


def _long_row_grid() -> list[Case]:
    cases = []
    for name in REGIMES:
        for case in regime_cases(name):
            if _plan_row(case).algorithm == "multiblock":
                cases.append(case)
    return cases


def _label(case: Case) -> str:
    return f"{case.rows}x{case.n} k={case.k} {case.dtype}" + (
        f" {case.mode}" if case.mode != "largest" else ""
    )


def _table(rows: list[Row], with_sim: bool) -> list[str]:
    head = (
        "| case | algorithm | launches | scratch B (x input) | plan global B (x in+out) | at 3.35 TB/s µs |"
    )
    rule = "|---|---|---:|---:|---:|---:|"
    if with_sim:
        head += " simulated shape | plan B (kernels) | counted B (sectors) | sector efficiency |"
        rule += "---|---:|---:|---:|"
    head += " published (same shape) |"
    rule += "---|"
    out = [head, rule]
    for r in rows:
        inp = r.case.rows * r.case.n * np.dtype(r.case.dtype).itemsize
        us = r.global_bytes / HBM3_BYTES_PER_S * 1e6
        line = (
            f"| {_label(r.case)} | {r.algorithm} | {r.launches} | {r.scratch:,} ({r.scratch / inp:.2f}x) | "
            f"{r.global_bytes:,} ({r.global_bytes / r.io:.2f}x) | {us:.1f} |"
        )
        if with_sim:
            line += f" {r.sim} |"
        key = (r.case.rows, r.case.n, r.case.k, r.case.dtype)
        line += f" {PUBLISHED.get(key, 'none found')} |"
        out.append(line)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the markdown tables here as well")
    ap.add_argument("--no-sim", action="store_true", help="plans only: no simulated runs")
    ap.add_argument(
        "--sim-n", type=int, default=SIM_N, help=f"row length of the simulated runs (default {SIM_N})"
    )
    args = ap.parse_args(argv)
    start = time.perf_counter()
    issue = [_plan_row(c) for c in ISSUE_CASES]
    if not args.no_sim:
        for r in issue:
            r.sim = _sim_columns(r.case, r.algorithm, args.sim_n)
    grid = [_plan_row(c) for c in _long_row_grid()]
    lines = [
        "No GPU run: launches, scratch and bytes are plan() counts (the simulator backend's plan, an",
        "H100's 132 SMs); times are those bytes at 3.35 TB/s, not measurements.",
        "",
        "## The issue's cases",
        "",
        *_table(issue, not args.no_sim),
        "",
        "## Long-row cases of the benchmark grid (float32, uniform, row-major; plans only)",
        "",
        *_table(grid, False),
        "",
        f"({time.perf_counter() - start:.1f} s)",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
