"""CPU benchmark of the NumPy backend against the routes a CPU user would otherwise take.

    python benchmarks/cpu_numpy.py [--repeat 7] [--case moe,indexer] [--markdown FILE]

On every case of the CPU quick grid (``python -m cutopk --list`` without a GPU), these routes
run on the same input, taking turns within each repetition so that the machine's drift (other
processes, clock changes) hits them alike; the median of ``--repeat`` turns is reported:

- ``cutopk`` (all cores, the default) and ``cutopk-1t`` (one thread);
- ``naive``: ``np.argpartition`` + gather + ``argsort`` of the K (NumPy's own ``top_k`` route;
  it breaks ties arbitrarily);
- ``argsort``: a full stable ``np.argsort`` and a slice (exact, O(n log n));
- ``torch-1t`` and ``torch``: ``torch.topk`` with one thread and with torch's default count.

Every route's answer is checked first (values bit for bit against cutopk's under the route's
NaN rule; indices may differ only between equal values), and cutopk's answers on one thread and
on all cores must be identical. Ratios are a peer's time over cutopk's at the same thread count
(above 1: cutopk is faster).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

import numpy as np

import cutopk
from cutopk import _numpy_threads
from cutopk._bench import baselines, check, grid, inputs

ROUTES = ("cutopk", "cutopk-1t", "naive", "argsort", "torch-1t", "torch")
# Each peer's ratio is taken against cutopk at the same thread count.
AGAINST = {"naive": "cutopk-1t", "argsort": "cutopk-1t", "torch-1t": "cutopk-1t", "torch": "cutopk"}


def routes(x, axis: int, case: grid.Case) -> dict[str, baselines.Route]:
    k, mode = case.k, case.mode
    threads = baselines.cpu_thread_routes(x, axis, k, mode, case.dtype)
    out = {
        "cutopk": baselines.cutopk_route(x, axis, k, mode),
        "cutopk-1t": threads["cutopk-1thread"](),
        "naive": baselines.numpy_naive_route(x, axis, k, mode),
        "argsort": baselines.numpy_sort_route(x, axis, k, mode),
    }
    torch_one = baselines.torch_route(x, axis, k, mode, case.dtype)
    if torch_one.call is not None:
        import torch

        call = torch_one.call

        def one_thread():
            before = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return call()
            finally:
                torch.set_num_threads(before)

        torch_one.call = one_thread
    out["torch-1t"] = torch_one
    out["torch"] = threads["torch-threads"]()
    return out


def measure(case: grid.Case, repeat: int) -> dict:
    """Median seconds per route on one case (None for a route that is skipped or wrong)."""
    x, axis = inputs.arrange(inputs.values(case), case)
    fns = routes(x, axis, case)
    ours = cutopk.top_k(x, case.k, axis=axis, mode=case.mode, nan="largest")
    one = fns["cutopk-1t"].call()
    assert np.array_equal(check.bits(one.values), check.bits(ours.values)), "1 thread: other values"
    assert np.array_equal(one.indices, ours.indices), "1 thread: other indices"
    expected = {"largest": ours.values}
    notes, live = {}, {}
    for name, route in fns.items():
        if route.call is None:
            notes[name] = route.reason
            continue
        if route.nan not in expected:
            expected[route.nan] = cutopk.top_k(x, case.k, axis=axis, mode=case.mode, nan=route.nan).values
        problem = check.check(x, axis, expected[route.nan], route.call(), route.sorts)
        if problem:
            notes[name] = problem
        else:
            live[name] = route.call
    times = {name: [] for name in live}
    for _ in range(repeat):
        for name, fn in live.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {"median": {n: statistics.median(t) for n, t in times.items()}, "notes": notes}


def ratios(results: list[tuple[grid.Case, dict]]) -> dict[str, list[float]]:
    out = {peer: [] for peer in AGAINST}
    for _, r in results:
        med = r["median"]
        for peer, ours in AGAINST.items():
            if peer in med and ours in med:
                out[peer].append(med[peer] / med[ours])
    return out


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def table(results: list[tuple[grid.Case, dict]]) -> list[str]:
    head = (
        "| case | " + " | ".join(ROUTES) + " | " + " | ".join(f"{p} / {AGAINST[p]}" for p in AGAINST) + " |"
    )
    lines = [head, "|" + "---|" * (1 + len(ROUTES) + len(AGAINST))]
    for case, r in results:
        med = r["median"]
        cells = [f"{med[n] * 1e3:.2f} ms" if n in med else "-" for n in ROUTES]
        cells += [f"{med[p] / med[o]:.2f}x" if p in med and o in med else "-" for p, o in AGAINST.items()]
        lines.append(f"| {case.label()} | " + " | ".join(cells) + " |")
    geo = ratios(results)
    cells = ["" for _ in ROUTES] + [f"**{geomean(v):.2f}x**" for v in geo.values()]
    lines.append("| geometric mean | " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7, help="turns of every route per case (median reported)")
    p.add_argument(
        "--case", default="", help="only cases whose label contains one of these (comma-separated)"
    )
    p.add_argument("--markdown", help="also write the table to this file")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat: expected a positive integer, got {args.repeat}")
    np.seterr(all="ignore")
    wanted = [w for w in args.case.split(",") if w]
    cases = [c for c in grid.quick_grid(gpu=False) if not wanted or any(w in c.label() for w in wanted)]
    print(f"cutopk threads: {_numpy_threads.get_num_threads()}; median of {args.repeat} turns per route")
    results = []
    for case in cases:
        r = measure(case, args.repeat)
        results.append((case, r))
        print(table([(case, r)])[2], *(f"  {n}: {why}" for n, why in r["notes"].items()), sep="\n")
        sys.stdout.flush()
    lines = table(results)
    print("\n".join(lines))
    for peer, values in ratios(results).items():
        worst = min(values) if values else float("nan")
        print(f"{peer} / {AGAINST[peer]}: geometric mean {geomean(values):.2f}x, min {worst:.2f}x")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
