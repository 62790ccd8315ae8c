"""Running the grid: inputs, routes, checks, timings, and the report."""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib

import numpy as np

import cutopk

from . import baselines, grid, inputs, report, timing


def gpu_available() -> str | None:
    """None when CuPy sees a GPU, else why not."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return None
        return "CuPy found no GPU"
    except ImportError:
        return "CuPy is not installed"
    except Exception as exc:  # noqa: BLE001 - a broken driver or runtime means no GPU to use
        return f"CuPy cannot use a GPU ({exc})"


def _routes(case, x_dev, axis, gpu):
    """The peers for one case: {name: callable or None}, and the reasons for the skipped."""
    routes, notes = {}, {}
    for name in ("torch", "jax", "cupy") if gpu else ("numpy-naive", "numpy-sort", "torch"):
        reason = baselines.available(name.split("-")[0])
        fn = None
        if reason is None:
            if name == "torch":
                fn = (
                    baselines.torch_route(x_dev, axis, case.k, case.mode)
                    if case.dtype != "bfloat16"
                    else None
                )
                reason = None if fn else "bfloat16 arrays do not cross DLPack into torch here"
            elif name == "jax":
                fn, reason = baselines.jax_route(x_dev, axis, case.k, case.mode, case.dist)
            elif name == "cupy":
                fn = baselines.cupy_route(x_dev, axis, case.k, case.mode)
            elif name == "numpy-naive":
                fn = baselines.numpy_naive_route(x_dev, axis, case.k, case.mode)
            else:
                fn = baselines.numpy_sort_route(x_dev, axis, case.k, case.mode)
        routes[name], notes[name] = fn, reason
    return routes, notes


def measure(case: grid.Case, timer, gpu: bool, copy_bps: float | None) -> dict:
    x_host, axis = inputs.arrange(inputs.values(case), case)
    x_dev = x_host
    if gpu:
        import cupy

        x_dev = cupy.asarray(x_host)
    ours = baselines.cutopk_route(x_dev, axis, case.k, case.mode)
    expected = baselines.to_numpy(ours()[0])
    t = timer(ours)
    routes, notes = _routes(case, x_dev, axis, gpu)
    peers_ms = {}
    for name, fn in routes.items():
        if fn is None:
            peers_ms[name] = None
            continue
        try:
            problem = baselines.check(x_host, axis, expected, fn())
        except Exception as exc:  # noqa: BLE001 - a peer that fails on this input is reported, not fatal
            problem = f"failed: {type(exc).__name__}: {exc}"[:120]
        if problem:
            peers_ms[name], notes[name] = None, f"mismatch: {problem}"
            continue
        peers_ms[name] = timer(fn)["median"] * 1e3
    moved = x_host.nbytes + case.rows * case.k * (x_host.itemsize + 8)
    result = {"case": dataclasses.asdict(case), "label": case.label(), "cutopk_ms": t["median"] * 1e3,
              "cutopk_min_ms": t["min"] * 1e3, "cutopk_max_ms": t["max"] * 1e3, "peers_ms": peers_ms,
              "peer_notes": {k: v for k, v in notes.items() if v}, "bytes": moved,
              "algorithm": getattr(cutopk.plan(x_dev, case.k, axis=axis, mode=case.mode), "algorithm", "select")}  # fmt: skip
    result["gbps"] = moved / t["median"] / 1e9
    result["bandwidth_pct"] = 100 * moved / t["median"] / copy_bps if copy_bps else None
    return result


def run(full: bool = False, out: pathlib.Path | None = None, plots: bool = False, regimes=None,
        repeat: int | None = None, max_elements: int | None = None) -> list[dict]:  # fmt: skip
    """Run the quick or full grid; print the table; write CSV/JSON (and plots) under ``out``."""
    reason = gpu_available()
    gpu = reason is None
    if gpu:
        import cupy

        name = report.metadata(True)["device"]
        print(f"GPU found: {name}; benchmarking cutopk's CUDA backend against torch, JAX and CuPy")
        timer = timing.GpuTimer(repeat or 20)
        free = cupy.cuda.runtime.memGetInfo()[0]
        limit = max_elements or free // 16  # input, keys and the peers' temporaries must fit
        copy_bps = timer.copy_bandwidth()
        print(f"measured device-to-device copy bandwidth: {copy_bps / 1e9:.0f} GB/s")
    else:
        print(f"no GPU found ({reason}): benchmarking the NumPy backend on the CPU against NumPy's own routes "
              "(and torch on the CPU if installed); shapes are scaled down for the CPU")  # fmt: skip
        timer = timing.CpuTimer(repeat or 5)
        limit, copy_bps = max_elements or (1 << 24), None
    cases = grid.full_grid(limit) if full else [c for c in grid.quick_grid(gpu) if c.elements <= limit]
    if regimes:
        cases = [c for c in cases if c.regime in regimes]
    results = []
    for i, case in enumerate(cases):
        report.progress(i, len(cases), case.label())
        try:
            result = measure(case, timer, gpu, copy_bps)
        except MemoryError as exc:
            print(f"\nskipped {case.label()}: out of memory ({exc})")
            continue
        results.append(result)
        if report.sys.stdout.isatty():
            print("\r", end="")
        print(report.row_text(result))
    _summary(results)
    if out is not None:
        files = report.write(results, report.metadata(gpu), out, plots)
        print("wrote " + ", ".join(str(f) for f in files))
    return results


def _summary(results: list[dict]) -> None:
    peers = sorted({p for r in results for p, ms in r["peers_ms"].items() if ms})
    for peer in peers:
        ratios = [r["peers_ms"][peer] / r["cutopk_ms"] for r in results if r["peers_ms"].get(peer)]
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"{peer}: cutopk is {geo:.2f}x faster in geometric mean over {len(ratios)} shapes "
              f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)")  # fmt: skip
    mismatches = [
        (r["label"], p, n) for r in results for p, n in r["peer_notes"].items() if n.startswith("mismatch")
    ]
    for label, peer, note in mismatches:
        print(f"answer check: {peer} on {label.strip()}: {note}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cutopk", description="cutopk's benchmark (quick by default)"
    )
    parser.add_argument("--full", action="store_true", help="the full grid (GPU: many minutes)")
    parser.add_argument(
        "--out", type=pathlib.Path, help="write results.json/.csv (and plots) into this folder"
    )
    parser.add_argument("--plots", action="store_true", help="also write PNG plots (needs matplotlib)")
    parser.add_argument(
        "--regime", action="append", help="only these regimes (moe, llm, indexer, knn, huge, layout, cpu)"
    )
    parser.add_argument("--repeat", type=int, help="timed repetitions per measurement")
    parser.add_argument("--max-elements", type=int, help="skip shapes with more elements than this")
    args = parser.parse_args(argv)
    np.seterr(all="ignore")
    run(args.full, args.out, args.plots, args.regime, args.repeat, args.max_elements)
    return 0
