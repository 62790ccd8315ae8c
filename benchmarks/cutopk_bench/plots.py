"""PNG plots of a run (needs matplotlib; skipped with a message without it).

- ``<stem>-speedup.png``: cutopk's speedup over each peer per regime (geometric mean of the
  peer's time over cutopk's, with the min and max as error bars); torch first when present, the
  sorted peers (over cutopk's sorted call) then the unsorted ones, hatched (over cutopk's
  ``sorted=False`` call): each bar says which it was.
- ``<stem>-bandwidth.png`` (GPU runs): cutopk's effective bandwidth as a percentage of the copy
  bandwidth measured in the same run, per case, against the bytes moved.
"""

from __future__ import annotations

import math
import pathlib


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def speedups(results: list[dict], peer: str) -> dict[str, list[float]]:
    """Per regime, the peer's median over cutopk's for every case where both were timed."""
    out: dict[str, list[float]] = {}
    for r in results:
        p = r["peers"].get(peer, {})
        if p.get("status") == "ok" and p.get("speedup"):
            out.setdefault(r["case"]["regime"], []).append(p["speedup"])
    return out


def plot(results: list[dict], peers: list[str], out: pathlib.Path, stem: str) -> list[pathlib.Path]:
    """Write the plots; return their paths (empty, with a message, without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display is needed or wanted
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots (pip install matplotlib)")
        return []
    files = []
    unsorted = {
        p for p in peers for r in results if r["peers"].get(p, {}).get("against") == "cutopk sorted=False"
    }
    ordered = sorted(peers, key=lambda p: (p in unsorted, p != "torch", p))
    per_peer = {p: speedups(results, p) for p in ordered}
    regimes = sorted({reg for s in per_peer.values() for reg in s})
    if regimes:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        width = 0.8 / max(1, len(ordered))
        for j, peer in enumerate(ordered):
            xs, ys, lo, hi = [], [], [], []
            for i, reg in enumerate(regimes):
                vals = per_peer[peer].get(reg)
                if vals:
                    g = geomean(vals)
                    xs.append(i + j * width)
                    ys.append(g)
                    lo.append(max(0.0, g - min(vals)))  # rounding can put g below min
                    hi.append(max(0.0, max(vals) - g))
            like = "cutopk sorted=False" if peer in unsorted else "cutopk sorted"
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=f"{peer} over {like}",
                   hatch="//" if peer in unsorted else None)  # fmt: skip
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(regimes))], regimes)
        ax.axhline(1, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.set_ylabel("speedup (peer time / cutopk time)")
        ax.set_title("cutopk speedup per regime (geometric mean, bars: min-max)")
        ax.legend()
        files.append(out / f"{stem}-speedup.png")
        fig.savefig(files[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)
    pct = [r for r in results if r.get("bandwidth_pct")]
    if pct:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for reg in sorted({r["case"]["regime"] for r in pct}):
            sel = [r for r in pct if r["case"]["regime"] == reg]
            ax.scatter([r["bytes"] / 1e6 for r in sel], [r["bandwidth_pct"] for r in sel], label=reg)
        ax.set_xscale("log")
        ax.set_xlabel("bytes read + written (MB)")
        ax.set_ylabel("% of measured copy bandwidth")
        ax.set_title("cutopk effective bandwidth")
        ax.legend()
        files.append(out / f"{stem}-bandwidth.png")
        fig.savefig(files[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)
    return files
