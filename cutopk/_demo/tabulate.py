"""Dispatch tables from forced-family measurements (``benchmarks/make_dispatch_table.py``, and
``python -m cutopk tune``).

The input is the benchmark's CSV (``report.write``), one row per case and family: ``algorithm``
names the family that ran, ``forced`` (when present) the family the case forced with
``algorithm=`` ("" or absent: the dispatcher's own choice), ``timing`` (when present) ``eager``
or ``graph``. Older files have neither column: each of their rows is one family, the one auto
chose. benchmarks/README.md ("Forced-family results") documents the format.

A shape gets an entry only where it is a measured comparison: at least two families timed on it,
today's hand rule's own choice among them (a table must not replace a family no GPU has timed
with one that merely ran); the entry names the fastest. What the measurements could not decide is
listed under ``lacks``.
"""

from __future__ import annotations

import csv
import dataclasses
import pathlib
import re

from ..cuda import dispatch
from ..cuda.dispatch_table import DispatchTable, TableEntry

# Opt-in shared memory per block by compute capability (CUDA programming guide, "Technical
# Specifications per Compute Capability"): the device facts a table's rule check plans with.
OPT_IN_SHARED = {"75": 64 << 10, "80": 163 << 10, "86": 99 << 10, "87": 163 << 10, "89": 99 << 10,
                 "90": 227 << 10, "100": 227 << 10, "120": 99 << 10}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One family timed on one shape: ``score`` (lower is faster) in the table's unit."""

    rows: int
    n: int
    k: int
    key_bytes: int
    family: str
    score: float
    source: str


def device_for(compute_capability: str, sm_count: int) -> dispatch.Device:
    """The dispatcher's facts for a device of this compute capability (no table: the rules)."""
    shared = dispatch.shared_limit(48 << 10, OPT_IN_SHARED.get(str(compute_capability), 0))
    return dispatch.Device(sm_count=sm_count, shared_bytes=shared, clusters=int(compute_capability) >= 90)


def key_bytes(dtype: str) -> int:
    bits = re.search(r"\d+", dtype)
    return int(bits.group()) // 8 if bits else 4


def read_csv(
    path: pathlib.Path, label: str, timing: str = "eager"
) -> tuple[dict[str, str], list[Measurement]]:
    """The header (``# name: value`` lines) and the measurements of one results CSV: the
    rows of contiguous, uniform inputs that cutopk answered right (``self_check`` ok or absent),
    timed as ``timing``. ``score``: cutopk's median over torch.topk's in the same row (so that
    runs on two cards of one architecture compare), or cutopk's median in ms where torch did not
    run. ``label``: how the entries cite the file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = {}
    for line in lines:
        if line.startswith("# ") and ": " in line:
            name, value = line[2:].split(": ", 1)
            header[name] = value
    out = []
    for row in csv.DictReader(line for line in lines if not line.startswith("#")):
        family = row.get("algorithm", "")
        if (
            row.get("layout", "rows") != "rows"
            or row.get("dist", "uniform") != "uniform"
            or row.get("timing", "eager") not in ("", timing)
            or family not in dispatch.FAMILIES  # "+copy", "?", a NumPy route
            or row.get("self_check", "ok") not in ("ok", "")
            or not row.get("cutopk_ms")
        ):
            continue
        ms = float(row["cutopk_ms"])
        torch = row.get("torch_median_ms") if row.get("torch_status") == "ok" else None
        case = f"{row.get('regime', '')} {row['rows']}x{row['n']} k={row['k']} {row.get('dtype', '')}".strip()
        out.append(
            Measurement(
                int(row["rows"]), int(row["n"]), int(row["k"]), key_bytes(row.get("dtype", "float32")), family,
                ms / float(torch) if torch else ms, f"{label}: {case} ({family} {ms:.4f} ms)",
            )
        )  # fmt: skip
    return header, out


def build(
    measurements: list[Measurement], device: dispatch.Device, name: str, key: dict[str, str] | None = None
) -> tuple[DispatchTable, list[str]]:
    """The table the measurements support, and what they lack (one line per shape left out)."""
    shapes: dict[tuple[int, int, int, int], dict[str, Measurement]] = {}
    for m in measurements:
        best = shapes.setdefault((m.rows, m.n, m.k, m.key_bytes), {})
        if m.family not in best or m.score < best[m.family].score:
            best[m.family] = m
    entries, lacks = [], []
    for (rows, n, k, kb), timed in sorted(shapes.items()):
        rule = dispatch.choose(rows, n, k, kb, device)
        shape = f"{rows}x{n} k={k} ({kb}-byte keys)"
        if len(timed) < 2:
            lacks.append(f"{shape}: only {next(iter(timed))} timed, no comparison")
            continue
        if rule not in timed:
            lacks.append(
                f"{shape}: today's rule chooses {rule}, not timed (timed: {', '.join(sorted(timed))})"
            )
            continue
        win = min(timed.values(), key=lambda m: m.score)
        others = "; ".join(timed[f].source for f in sorted(timed) if f != win.family)
        entries.append(
            TableEntry(rows, n, k, kb, win.family, f"{win.source} against {others}",
                  tuple((f, round(timed[f].score, 6)) for f in sorted(timed)))
        )  # fmt: skip
    return DispatchTable(name, tuple(entries), tuple(sorted((key or {}).items()))), lacks
