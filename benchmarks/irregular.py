"""CPU benchmark of merge_top_k and segmented_top_k (NumPy backend) against the routes they replace.

    python benchmarks/irregular_cpu.py [--repeat 9] [--seed 0]

Two regimes, each route timed in one process on the same input, the routes taking turns within
each repetition; medians (min, max) of ``--repeat`` runs:

- **sharded merge**: 8 shards of 16 x 32000 float32 (a vocabulary split over 8 devices), K=50.
  ``merge``: ``merge_top_k`` of the shards' top-K results (the merge alone, as on the device that
  gathers the shards' results); ``shards+merge``: the 8 shard ``top_k`` calls and the merge;
  ``concat+top_k``: ``np.concatenate`` of the shards and one ``top_k`` (the route that needs the
  whole vocabulary in one place); ``top_k(whole)``: ``top_k`` on an already whole array.
- **CSR kNN**: S segments of lognormal lengths (median ~100, a long tail), float32 distances,
  K=10 smallest. ``segmented``: ``segmented_top_k``; ``pad+top_k``: scatter into a
  (S, longest) matrix filled with +inf, then ``top_k`` (mode smallest); ``pad+torch``: the same
  padded matrix and ``torch.topk(largest=False)`` with one thread; the padding itself is also
  timed on its own (``pad only``). The padded routes are not exact for segments shorter than K
  (they return +inf fillers) and break ties in the fill arbitrarily (torch); they are the peer
  routes, not equivalents.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import cutopk


def time_routes(fns: dict, repeat: int) -> dict:
    times = {name: [] for name in fns}
    for fn in fns.values():
        fn()  # warm-up
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(t), min(t), max(t)) for name, t in times.items()}


def report(title: str, stats: dict, base: str) -> None:
    print(title)
    for name, (med, lo, hi) in stats.items():
        ratio = "" if name == base else f"   {med / stats[base][0]:6.2f}x {base}"
        print(f"  {name:14s} {med * 1e3:9.3f} ms  (min {lo * 1e3:.3f}, max {hi * 1e3:.3f}){ratio}")


def sharded_merge(rng, repeat: int) -> None:
    shards, rows, width, k = 8, 16, 32000, 50
    logits = [rng.standard_normal((rows, width), dtype=np.float32) for _ in range(shards)]
    whole = np.concatenate(logits, axis=1)

    def shard_tops():
        return [
            (top.values, top.indices + s * width)
            for s, top in enumerate(cutopk.top_k(x, k, sorted=False) for x in logits)
        ]

    parts = shard_tops()
    expected = cutopk.top_k(whole, k)
    got = cutopk.merge_top_k(parts, k)
    assert np.array_equal(got.indices, expected.indices) and np.array_equal(got.values, expected.values)
    stats = time_routes(
        {
            "merge": lambda: cutopk.merge_top_k(parts, k),
            "shards+merge": lambda: cutopk.merge_top_k(shard_tops(), k),
            "concat+top_k": lambda: cutopk.top_k(np.concatenate(logits, axis=1), k),
            "top_k(whole)": lambda: cutopk.top_k(whole, k),
        },
        repeat,
    )
    report(f"sharded merge: {shards} shards of {rows}x{width} float32, K={k}", stats, "merge")


def csr_knn(rng, repeat: int, segments: int) -> None:
    k = 10
    lengths = np.minimum(rng.lognormal(np.log(100), 1.0, segments).astype(np.int64), 20000)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    data = rng.random(int(offsets[-1]), dtype=np.float32)
    longest = int(lengths.max())

    def pad():
        padded = np.full((segments, longest), np.inf, dtype=np.float32)
        cols = np.arange(data.size) - np.repeat(offsets[:-1], lengths)
        padded[np.repeat(np.arange(segments), lengths), cols] = data
        return padded

    padded = pad()
    got = cutopk.segmented_top_k(data, offsets, k, mode="smallest")
    expected = cutopk.top_k(padded, k, mode="smallest")
    full = lengths >= k
    assert np.array_equal(got.indices[full], expected.indices[full])
    routes = {
        "segmented": lambda: cutopk.segmented_top_k(data, offsets, k, mode="smallest"),
        "pad+top_k": lambda: cutopk.top_k(pad(), k, mode="smallest"),
        "pad only": pad,
    }
    try:
        import torch

        torch.set_num_threads(1)
        routes["pad+torch"] = lambda: torch.topk(torch.from_numpy(pad()), k, dim=1, largest=False)
    except ImportError:
        print("torch: not installed, skipped")
    stats = time_routes(routes, repeat)
    report(
        f"CSR kNN: {segments} segments, lengths lognormal (median {int(np.median(lengths))}, "
        f"max {longest}, total {data.size}), float32, K={k} smallest",
        stats,
        "segmented",
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--segments", type=int, default=10000)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"CPU (NumPy backend), median of {args.repeat}")
    sharded_merge(rng, args.repeat)
    csr_knn(rng, args.repeat, args.segments)


if __name__ == "__main__":
    main()
