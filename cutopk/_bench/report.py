"""Results out: the progress line and the terminal table, and the CSV / JSON files.

One result is a dict (see ``runner.measure``): the case, cutopk's timing and plan, and one entry
per peer with a ``status`` of ``ok`` (timed), ``skipped``, ``mismatch`` or ``error`` and a note.
"""

from __future__ import annotations

import csv
import json
import pathlib
import sys

CASE_FIELDS = ("regime", "rows", "n", "k", "mode", "dtype", "dist", "layout")
STATUS_WORD = {"skipped": "skip", "mismatch": "MISMATCH", "error": "error"}


class Table:
    """Prints one row per case under a header; on a terminal a progress bar stands on the last
    line while a case runs and the row replaces it; into a file or pipe, plain lines only."""

    def __init__(self, peers: list[str], gpu: bool, total: int, stream=None):
        self.peers, self.gpu, self.total = peers, gpu, total
        self.out = stream or sys.stdout
        self.tty = self.out.isatty()
        self.notes: dict[str, list[str]] = {}
        self.widths = (4 + 2 * len(str(total)), 46, 12, 10, 21, 8, 6)

    def header(self) -> None:
        names = ("#", "case", "algorithm", "cutopk ms", "min-max ms", "GB/s", "%copy" if self.gpu else "")
        cells = [f"{h:<{w}}" for h, w in zip(names, self.widths, strict=True)]
        line = " ".join(cells) + "".join(f" | {p + ' ms (x)':<18}" for p in self.peers)
        print(line.rstrip(), file=self.out)
        print("-" * len(line.rstrip()), file=self.out)

    def progress(self, i: int, label: str) -> None:
        if self.tty:
            done = int(30 * i / max(1, self.total))
            print(
                f"\r[{'#' * done}{'.' * (30 - done)}] {i + 1}/{self.total} {label[:70]:70s}",
                end="",
                file=self.out,
            )
            self.out.flush()

    def row(self, i: int, result: dict) -> None:
        if self.tty:
            print("\r" + " " * 110 + "\r", end="", file=self.out)
        c = result.get("cutopk", {})
        if "median_ms" in c:
            ours = (f"{c['median_ms']:.4g}", f"{c['min_ms']:.4g}-{c['max_ms']:.4g}")
            bw = (
                f"{result['gbps']:.1f}",
                f"{result['bandwidth_pct']:.1f}" if result.get("bandwidth_pct") else "",
            )
        else:
            ours, bw = ("FAILED", ""), ("", "")
            self.note(result["label"], "cutopk", c.get("note", "failed"))
        if result.get("self_check", "ok") not in ("ok", None) and not result["self_check"].startswith(
            "skipped"
        ):
            ours = ("WRONG", ours[1])
            self.note(result["label"], "cutopk", result["self_check"])
        values = (f"{i + 1}/{self.total}", result["label"], result.get("algorithm", ""), *ours, *bw)
        line = " ".join(f"{v:<{w}}" for v, w in zip(values, self.widths, strict=True))
        for name in self.peers:
            p = result["peers"].get(name, {"status": "skipped", "note": "not run"})
            if p["status"] == "ok":
                cell = f"{p['median_ms']:.4g} ({p['speedup']:.2f}x)"
            else:
                cell = STATUS_WORD[p["status"]]
                self.note(result["label"], name, f"{p['status']}: {p['note']}")
            line += f" | {cell:<18}"
        print(line.rstrip(), file=self.out, flush=True)

    def note(self, label: str, who: str, text: str) -> None:
        self.notes.setdefault(f"{who}: {text}", []).append(label)

    def footer(self, summary: list[str]) -> None:
        """The notes (why a cell is not a time, each reason once with the cases it hit) and the
        summary lines."""
        if self.notes:
            print("\nnotes:", file=self.out)
            for text, labels in self.notes.items():
                where = labels[0] if len(labels) == 1 else f"{len(labels)} cases, e.g. {labels[0]}"
                print(f"  {text}  [{where}]", file=self.out)
        for line in summary:
            print(line, file=self.out)


def flat_row(result: dict, peers: list[str]) -> dict:
    """One CSV row: the case fields, cutopk's numbers, then each peer's."""
    row = {f: result["case"][f] for f in CASE_FIELDS}
    c = result.get("cutopk", {})
    row.update(
        algorithm=result.get("algorithm"),
        cutopk_ms=c.get("median_ms"),
        cutopk_min_ms=c.get("min_ms"),
        cutopk_max_ms=c.get("max_ms"),
        cutopk_repeat=c.get("repeat"),
        bytes=result.get("bytes"),
        gbps=result.get("gbps"),
        bandwidth_pct=result.get("bandwidth_pct"),
        self_check=result.get("self_check"),
    )
    for name in peers:
        p = result["peers"].get(name, {})
        for key in ("median_ms", "min_ms", "max_ms", "speedup", "status", "note", "route", "sorted"):
            row[f"{name}_{key}"] = p.get(key)
    return row


def write(results: list[dict], meta: dict, out: pathlib.Path, stem: str) -> list[pathlib.Path]:
    """Write ``<stem>.json`` (metadata and every result) and ``<stem>.csv`` (metadata as ``#``
    comment lines, then one row per case) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out / f"{stem}.json", out / f"{stem}.csv"
    json_path.write_text(json.dumps({"meta": meta, "results": results}, indent=1, default=str) + "\n")
    peers = list(meta.get("peers", []))
    rows = [flat_row(r, peers) for r in results]
    with csv_path.open("w", newline="") as f:
        for key, value in meta.items():
            f.write(f"# {key}: {value}\n")
        fields = list(rows[0]) if rows else [*CASE_FIELDS, "cutopk_ms"]
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return [json_path, csv_path]
