"""CPU benchmark of the NumPy backend against the routes a NumPy user would otherwise take.

    python benchmarks/cpu_numpy.py [--rows 4096] [--n 4096] [--k 64] [--repeat 7]

Routes, timed side by side in one process on the same input (median of ``--repeat`` runs):
- ``cutopk``: ``cutopk.top_k(x, k)`` (exact, ties by lower index);
- ``naive``: ``np.argpartition`` + ``take_along_axis`` + ``argsort`` of the K (the route of
  NumPy's own ``top_k``; it breaks ties arbitrarily);
- ``argsort``: a full ``np.argsort(-x, kind="stable")`` and a slice (exact, O(n log n));
- ``torch``: ``torch.topk`` on the CPU with one thread, when torch is installed.
Prints the times and the ratios that the package-foundation issue asks for.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import cutopk


def naive(x, k):
    part = np.argpartition(x, x.shape[1] - k, axis=1)[:, -k:]
    vals = np.take_along_axis(x, part, axis=1)
    order = np.argsort(-vals, axis=1)
    return np.take_along_axis(vals, order, axis=1), np.take_along_axis(part, order, axis=1)


def full_sort(x, k):
    idx = np.argsort(-x, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(x, idx, axis=1), idx


def routes(k):
    out = {
        "cutopk": lambda x: cutopk.top_k(x, k),
        "naive": lambda x: naive(x, k),
        "argsort": lambda x: full_sort(x, k),
    }
    try:
        import torch
    except ImportError:
        print("torch: not installed, skipped")
        return out
    torch.set_num_threads(1)
    out["torch"] = lambda x: torch.topk(torch.from_numpy(x), k, dim=1)
    return out


def time_routes(fns, x, repeat):
    """Median, min and max seconds per route; the routes take turns within each repetition so
    that drift in the machine's speed (other processes, clock changes) hits all of them alike."""
    times = {name: [] for name in fns}
    for fn in fns.values():
        fn(x)  # warm-up
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(x)
            times[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(t), min(t), max(t)) for name, t in times.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--k", type=int, default=64)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    x = np.random.default_rng(args.seed).random((args.rows, args.n), dtype=np.float32)
    ref_values = full_sort(x, args.k)[0]
    print(f"{args.rows}x{args.n} float32 uniform, k={args.k}, median of {args.repeat}")
    fns = routes(args.k)
    for name, fn in fns.items():
        values = np.asarray(fn(x)[0])
        assert np.array_equal(values, ref_values), f"{name} returned different values"
    stats = time_routes(fns, x, args.repeat)
    for name, (med, lo, hi) in stats.items():
        print(f"  {name:8s} {med * 1e3:9.2f} ms  (min {lo * 1e3:.2f}, max {hi * 1e3:.2f})")
    base = stats["cutopk"][0]
    for name, (med, _, _) in stats.items():
        if name != "cutopk":
            print(f"  {name} / cutopk = {med / base:.2f}x")


if __name__ == "__main__":
    main()
