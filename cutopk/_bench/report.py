"""Results out: the terminal table, CSV and JSON with the run's metadata, and the plots."""

from __future__ import annotations

import csv
import datetime
import json
import math
import pathlib
import platform
import subprocess
import sys


def metadata(gpu: bool) -> dict:
    """Device, driver, CUDA and library versions, CPU, git commit and date of this run."""
    import numpy

    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "numpy": numpy.__version__, "cpu": _cpu_model(),
            "git_commit": _git_commit(), "backend": "cuda" if gpu else "numpy"}  # fmt: skip
    for name in ("cupy", "torch", "jax"):
        try:
            meta[name] = __import__(name).__version__
        except ImportError:
            meta[name] = None
    if gpu:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        meta["device"] = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        meta["driver"] = cupy.cuda.runtime.driverGetVersion()
        meta["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
    return meta


def _cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    here = pathlib.Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def progress(i: int, total: int, label: str) -> None:
    """A one-line progress bar on a terminal; nothing when the output is a file."""
    if sys.stdout.isatty():
        done = int(30 * i / max(1, total))
        print(f"\r[{'#' * done}{'.' * (30 - done)}] {i}/{total} {label[:60]:60s}", end="", flush=True)


def row_text(result: dict) -> str:
    parts = [f"{result['label']:58s} cutopk {result['cutopk_ms']:9.3f} ms"]
    for peer, ms in result["peers_ms"].items():
        parts.append(
            f"{peer} {ms:9.3f} ms ({ms / result['cutopk_ms']:5.2f}x)"
            if ms
            else f"{peer} {result['peer_notes'][peer]}"
        )
    if result.get("bandwidth_pct") is not None:
        parts.append(f"{result['gbps']:7.1f} GB/s = {result['bandwidth_pct']:5.1f}% of copy")
    return " | ".join(parts)


def write(results: list[dict], meta: dict, out: pathlib.Path, plots: bool) -> list[pathlib.Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "results.json", out / "results.csv"]
    files[0].write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    peers = sorted({p for r in results for p in r["peers_ms"]})
    with files[1].open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["regime", "rows", "n", "k", "mode", "dtype", "dist", "layout", "cutopk_ms", "gbps", "bandwidth_pct",
                    *[f"{p}_ms" for p in peers]])  # fmt: skip
        for r in results:
            c = r["case"]
            w.writerow([c["regime"], c["rows"], c["n"], c["k"], c["mode"], c["dtype"], c["dist"], c["layout"],
                        f"{r['cutopk_ms']:.4f}", r.get("gbps"), r.get("bandwidth_pct"),
                        *[r["peers_ms"].get(p) for p in peers]])  # fmt: skip
    if plots:
        files += _plots(results, out, peers)
    return files


def _plots(results, out, peers) -> list[pathlib.Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots")
        return []
    files = []
    reference = "torch" if "torch" in peers else (peers[0] if peers else None)
    if reference:
        regimes = sorted({r["case"]["regime"] for r in results})
        means = []
        for regime in regimes:
            ratios = [r["peers_ms"][reference] / r["cutopk_ms"] for r in results
                      if r["case"]["regime"] == regime and r["peers_ms"].get(reference)]  # fmt: skip
            means.append(math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else 0)
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.bar(regimes, means)
        ax.axhline(1, color="k", lw=0.8)
        ax.set_ylabel(f"speedup over {reference} (geometric mean)")
        ax.set_title("cutopk vs " + reference)
        files.append(out / f"speedup_over_{reference}.png")
        fig.savefig(files[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)
    pct = [r for r in results if r.get("bandwidth_pct") is not None]
    if pct:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.scatter([r["bytes"] / 1e6 for r in pct], [r["bandwidth_pct"] for r in pct])
        ax.set_xscale("log")
        ax.set_xlabel("bytes moved (MB)")
        ax.set_ylabel("% of measured copy bandwidth")
        files.append(out / "bandwidth.png")
        fig.savefig(files[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)
    return files
