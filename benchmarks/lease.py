"""One lent GPU's 10-minute command (``bash tools/gpu_session.sh lease``): M0-M7, then the scoreboard.

    python3 benchmarks/lease.py --out DIR [--budget 540]
    python3 benchmarks/lease.py --out DIR --dry-run     # on the CPU: the plan, checked, each step's dry run

The steps, their files, estimates and bounds are in ``benchmarks/cutopk_bench/lease.py``. The dry run prints
every command line, the step order, each step's estimate with its basis and the files it would
write; it fails when the estimates with the scoreboard's minimum exceed the budget, when more files
would come back than the device tool returns, when a step's script is missing, or when a step's own
dry run (its arguments, its shapes, the kernels it compiles) fails.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from cutopk_bench import lease

# Each step's dry run: the scripts' own --dry-run (what they would run, checked on the CPU).
DRY = {
    "M0": (("python3", "benchmarks/gpu/facts.py", "--dry-run"),),
    "M1": (
        (
            "python3",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--collect-only",
            "-m",
            "gpu",
            *lease.NEVER_RUN_TESTS,
        ),
        ("python3", "benchmarks/gpu/families.py", "check", "--dry-run"),
    ),
    "M2": (("python3", "benchmarks/gpu/count_primitives.py", "--dry-run"),),
    "M3": (("python3", "benchmarks/gpu/phase_clocks.py", "--dry-run"),),
    "M4": (("python3", "benchmarks/gpu/phase_clocks.py", "--variants", "--dry-run"),),
    "M5": (("python3", "benchmarks/gpu/families.py", "profile", "--dry-run"),),
    "M6": (("python3", "benchmarks/gpu/families.py", "table", "--dry-run"),),
    "M7": (("python3", "benchmarks/gpu/families.py", "host", "--dry-run"),),
}


def scripts(all_steps) -> list[str]:
    """The repository files the steps' commands name, missing ones first."""
    named = {part for s in all_steps for c in s.commands for part in c if part.endswith((".py", ".sh"))}
    return sorted(named, key=lambda p: (pathlib.Path(p).is_file(), p))


def dry_run(out: str, budget: float) -> int:
    t0 = time.monotonic()
    all_steps = lease.steps()
    lease.print_plan(all_steps, out, budget)
    problems = lease.check_plan(all_steps, budget)
    problems += [f"{p}: no such file" for p in scripts(all_steps) if not pathlib.Path(p).is_file()]
    for tool in ("compute-sanitizer", "ncu", "nvidia-smi"):
        print(
            f"{tool}: {'on PATH here' if shutil.which(tool) else 'not on PATH here (the lent machines have it)'}"
        )
    for name, commands in DRY.items():
        for command in commands:
            argv = [sys.executable if part == "python3" else part for part in command]
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
            lines = (proc.stdout + proc.stderr).strip().splitlines()
            tail = lines[-1] if lines else ""
            print(f"dry run {name}: {' '.join(command[1:4])} ...: exit {proc.returncode}: {tail}")
            if proc.returncode != 0:
                problems.append(f"{name}'s dry run failed: {' '.join(command)}\n" + "\n".join(lines[-20:]))
    if not problems:
        print(f"lease dry run: the plan holds ({time.monotonic() - t0:.1f} s here)")
        return 0
    print("lease dry run FAILED:\n" + "\n".join(f"- {p}" for p in problems), file=sys.stderr)
    return 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/lease.py", description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", "gpu-session"), help="where the files go ($OUT)")
    p.add_argument(
        "--budget", type=float, default=lease.BUDGET_S, help=f"seconds in all (default {lease.BUDGET_S:g})"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="on the CPU: print the plan, check it, run the dry runs"
    )
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.dry_run:
        return dry_run(args.out, args.budget)
    return lease.run(args.out, args.budget)


if __name__ == "__main__":
    sys.exit(main())
