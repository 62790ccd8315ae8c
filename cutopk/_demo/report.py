"""Results out: the progress line and the terminal table, and the CSV / JSON files.

One result is a dict (see ``loop.measure``): the case, cutopk's timing and plan, and one entry
per peer with a ``status`` of ``ok`` (timed), ``skipped``, ``mismatch`` or ``error`` and a note.
"""

from __future__ import annotations

import csv
import json
import pathlib
import sys
import textwrap
from collections.abc import Sequence

CASE_FIELDS = ("regime", "rows", "n", "k", "mode", "dtype", "dist", "layout")
STATUS_WORD = {"skipped": "skip", "mismatch": "MISMATCH", "error": "error"}


class Table:
    """Prints one row per case under a header; on a terminal a progress bar stands on the last
    line while a case runs and the row replaces it; into a file or pipe, plain lines only.

    Laid out to fit a terminal: each peer's cell is its time over cutopk's (its own time is that
    ratio times cutopk's, and both are in the files), each column as wide as its longest entry, and
    the algorithm, whose length varies, last."""

    def __init__(
        self,
        peers: list[str],
        gpu: bool,
        total: int,
        stream=None,
        labels: Sequence[str] = (),
        unsorted: bool = False,
    ):
        self.peers, self.gpu, self.total = peers, gpu, total
        self.unsorted = unsorted  # a column for cutopk's sorted=False call, the unsorted peers' like
        self.out = stream or sys.stdout
        self.tty = self.out.isatty()
        self.notes: dict[str, list[str]] = {}
        case_width = max((len(label) for label in labels), default=40)
        self.widths = (1 + 2 * len(str(total)), case_width, 9, 15, 6, *((6,) if gpu else ()),
                       *((11,) if unsorted else ()))  # fmt: skip
        self.peer_widths = [max(len(name), 7) for name in peers]

    def _line(self, cells, peer_cells, algorithm: str) -> str:
        line = " ".join(f"{c:<{w}}" for c, w in zip(cells, self.widths, strict=True))
        line += "".join(f" {c:>{w}}" for c, w in zip(peer_cells, self.peer_widths, strict=True))
        return f"{line}  {algorithm}".rstrip()

    def header(self) -> None:
        names = ("#", "case", "cutopk ms", "min-max ms", "GB/s", *(("%copy",) if self.gpu else ()),
                 *(("unsorted ms",) if self.unsorted else ()))  # fmt: skip
        line = self._line(names, self.peers, "algorithm")
        if self.peers:
            print("peer columns: the peer's time over cutopk's (above 1.00x cutopk is faster)"
                  + ("; a peer with unsorted K over cutopk's sorted=False call (unsorted ms), the others over "
                     "its sorted call (cutopk ms)" if self.unsorted else ""), file=self.out)  # fmt: skip
        print(line, file=self.out)
        print("-" * len(line), file=self.out)

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
            ours = (f"{c['median_ms']:.4g}", f"{c['min_ms']:.3g}-{c['max_ms']:.3g}")
            bw: tuple[str, ...] = (f"{result['gbps']:.1f}",)
            if self.gpu:
                bw += (f"{result['bandwidth_pct']:.1f}" if result.get("bandwidth_pct") else "",)
        else:
            ours, bw = ("FAILED", ""), ("",) * (2 if self.gpu else 1)
            self.note(result["label"], "cutopk", c.get("note", "failed"))
        if result.get("self_check", "ok") not in ("ok", None) and not result["self_check"].startswith(
            "skipped"
        ):
            ours = ("WRONG", ours[1])
            self.note(result["label"], "cutopk", result["self_check"])
        cells = (f"{i + 1}/{self.total}", result["label"], *ours, *bw)
        if self.unsorted:
            u = result.get("cutopk_unsorted", {})
            cells += (f"{u['median_ms']:.4g}" if "median_ms" in u else "-",)
            if "note" in u:
                self.note(result["label"], "cutopk sorted=False", u["note"])
        peer_cells = []
        for name in self.peers:
            p = result["peers"].get(name, {"status": "skipped", "note": "not run"})
            if p["status"] == "ok":
                peer_cells.append(f"{p['speedup']:.2f}x")
            else:
                peer_cells.append(STATUS_WORD[p["status"]])
                self.note(result["label"], name, f"{p['status']}: {p['note']}")
        print(self._line(cells, peer_cells, result.get("algorithm", "")), file=self.out, flush=True)

    def note(self, label: str, who: str, text: str) -> None:
        self.notes.setdefault(f"{who}: {text}", []).append(label)

    def footer(self, summary: list[str]) -> None:
        """The notes (why a cell is not a time, each reason once with the cases it hit) and the
        summary lines."""
        if self.notes:
            print("\nnotes:", file=self.out)
            for text, labels in self.notes.items():
                where = labels[0] if len(labels) == 1 else f"{len(labels)} cases, e.g. {labels[0]}"
                say(f"{text}  [{where}]", self.out, indent="  ")
        for line in summary:
            say(line, self.out)


WIDTH = 100  # prose lines are wrapped to this many characters (the table's lines are as wide as it is)


def say(text: str, stream=None, indent: str = "") -> None:
    """Print a line of prose wrapped to :data:`WIDTH`, its continuation lines indented once more."""
    lines = textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                          break_on_hyphens=False, break_long_words=False)  # fmt: skip
    print("\n".join(lines) or indent, file=stream or sys.stdout)


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
        timing=result.get("timing", "eager"),
        cutopk_unsorted_ms=result.get("cutopk_unsorted", {}).get("median_ms"),
    )
    for name in peers:
        p = result["peers"].get(name, {})
        for key in (
            "median_ms",
            "min_ms",
            "max_ms",
            "speedup",
            "status",
            "note",
            "route",
            "sorted",
            "against",
        ):
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
