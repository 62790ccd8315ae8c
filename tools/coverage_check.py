"""The coverage bar: reads the combined coverage data as ``coverage json`` writes it, prints the
statement+branch coverage of every module of the package, and fails when the total is under
98% or a CUDA-path module (the launchers, device scope, array interop, outputs, the irregular
routes and the Dask front end) is under 95%.

    coverage run -m pytest          # [tool.coverage.run] in pyproject.toml: branch, parallel
    coverage combine
    coverage json -o coverage.json
    python tools/coverage_check.py coverage.json

Percentages are coverage.py's own ``percent_covered``: covered lines plus covered branches over
all lines plus all branches. Lines that only a GPU can run are listed in docs/hardware-only.md.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import pathlib
import sys

TOTAL_BAR = 98.0
CUDA_PATH_BAR = 95.0
# Paths relative to the repository root; fnmatch's * also crosses "/", so cutopk/cuda/* takes in
# the launcher modules and the family modules.
CUDA_PATH = (
    "cutopk/cuda/*",
    "cutopk/_interop.py",
    "cutopk/_core/out.py",
    "cutopk/irregular/segmented.py",
    "cutopk/irregular/merge.py",
    "cutopk/dask.py",
)


def is_cuda_path(name: str) -> bool:
    """Whether a measured file is one of the CUDA-path modules held to the per-module bar."""
    return any(fnmatch.fnmatch(name, pattern) for pattern in CUDA_PATH)


def check(
    data: dict, total_bar: float = TOTAL_BAR, module_bar: float = CUDA_PATH_BAR
) -> tuple[list[str], list[str]]:
    """The report's lines and the failures (empty when the bars are met) for ``coverage json`` data."""
    files = {
        pathlib.PurePath(name).as_posix(): entry["summary"] for name, entry in data.get("files", {}).items()
    }
    if not files:
        return [], ["the coverage data measured no file: was `coverage combine` run?"]
    if not data["meta"].get("branch_coverage"):
        return [], ["the coverage data has no branch coverage: run coverage with branch = true"]
    width = max(len(name) for name in files)
    lines = [f"{'module':<{width}}  {'stmts':>5} {'miss':>5} {'branch':>6} {'part':>5} {'cover':>7}  bar"]
    failures = []
    for name in sorted(files):
        s = files[name]
        bar = module_bar if is_cuda_path(name) else None
        mark = f">= {bar:g}%" if bar is not None else ""
        if bar is not None and s["percent_covered"] < bar:
            mark += "  FAIL"
            failures.append(f"{name}: {s['percent_covered']:.2f}% < {bar:g}% (a CUDA-path module)")
        lines.append(
            f"{name:<{width}}  {s['num_statements']:>5} {s['missing_lines']:>5} {s['num_branches']:>6} "
            f"{s['num_partial_branches']:>5} {s['percent_covered']:>6.2f}%  {mark}".rstrip()
        )
    for pattern in CUDA_PATH:
        if not any(fnmatch.fnmatch(name, pattern) for name in files):
            failures.append(f"{pattern}: no measured file matches this CUDA-path module")
    total = data["totals"]["percent_covered"]
    mark = f">= {total_bar:g}%"
    if total < total_bar:
        mark += "  FAIL"
        failures.append(f"total: {total:.2f}% < {total_bar:g}%")
    lines.append(f"{'TOTAL':<{width}}  {'':>5} {'':>5} {'':>6} {'':>5} {total:>6.2f}%  {mark}")
    return lines, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", nargs="?", default="coverage.json", help="what `coverage json` wrote")
    parser.add_argument("--total", type=float, default=TOTAL_BAR, help="bar for the total, in percent")
    parser.add_argument("--module", type=float, default=CUDA_PATH_BAR, help="bar for each CUDA-path module")
    args = parser.parse_args(argv)
    try:
        data = json.loads(pathlib.Path(args.json).read_text())
    except (OSError, ValueError) as exc:
        print(f"coverage_check: cannot read {args.json}: {exc}", file=sys.stderr)
        return 2
    lines, failures = check(data, args.total, args.module)
    print("\n".join(lines))
    for failure in failures:
        print(f"coverage below the bar: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
