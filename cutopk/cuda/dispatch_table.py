"""A measured dispatch table: which kernel family won on which shapes, for one kind of GPU.

The dispatcher (:mod:`cutopk.cuda.dispatch`) asks a table first and its hand rules only where no
entry covers a shape. A table comes from forced-family measurements (every family that can take
a shape timed on it): the package's own per-architecture tables (``cutopk/cuda/tables/sm90.json``,
written by ``benchmarks/make_dispatch_table.py`` from committed results) or the user's own
(``python -m cutopk tune``). This module is the pure part: the types and the reading of a table's
JSON object, no files (loading, caching and warnings live in :mod:`cutopk.cuda.tables`).

An entry covers the shapes of its own row length n, K and key width whose rows lie within half
an octave of its own (the same power of two when rounded in log2). n and K are exact: they are a
model's constants (its vocabulary, its sampling K) and a family's cost jumps with n (whether a row
fits a block's shared memory), so a neighbouring n is a guess no measurement made; the batch
varies from call to call, and its cost changes with the octave, not the exact count.
The choice of family never changes a result (every family is exact, with the same tie and NaN
rules), so a table can make a call slower, never wrong; an entry whose family cannot take a shape
(its limits, :func:`why_not`) is passed over.
"""

from __future__ import annotations

import dataclasses
import math

FORMAT = 1  # the "format" field of a table's JSON object; a table of another format is ignored


class TableError(ValueError):
    """A table's JSON object is not a dispatch table (the loader warns and ignores it)."""


def cell(x: int) -> int:
    """The octave an entry covers: ``round(log2(x))`` (1 for x <= 1: 0)."""
    return round(math.log2(x)) if x > 1 else 0


@dataclasses.dataclass(frozen=True)
class TableEntry:
    """One measured shape: ``family`` was the fastest of the families timed on rows x n, K, keys
    of ``key_bytes``. ``source``: the file and case that measured it; ``timed``: every family
    measured there and its time (ms, or its time relative to torch.topk in the same run, as the
    table's ``unit`` says)."""

    rows: int
    n: int
    k: int
    key_bytes: int
    family: str
    source: str
    timed: tuple[tuple[str, float], ...] = ()

    def covers(self, rows: int, n: int, k: int, key_bytes: int) -> bool:
        return key_bytes == self.key_bytes and n == self.n and k == self.k and cell(rows) == cell(self.rows)


@dataclasses.dataclass(frozen=True)
class DispatchTable:
    """A dispatch table: ``name`` says where it came from (printed by ``plan()``), ``entries``
    the measured shapes. ``key``: what it was measured on (device, cutopk, CUDA, driver), for a
    user's table; empty for the package's own."""

    name: str
    entries: tuple[TableEntry, ...] = ()
    key: tuple[tuple[str, str], ...] = ()

    def lookup(self, rows: int, n: int, k: int, key_bytes: int) -> TableEntry | None:
        """The first entry covering the shape, else None."""
        for entry in self.entries:
            if entry.covers(rows, n, k, key_bytes):
                return entry
        return None


def _positive_int(obj: dict, name: str) -> int:
    value = obj.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise TableError(f"entry field {name!r}: expected a positive integer, got {value!r}")
    return value


def from_json(obj: object, name: str, families: tuple[str, ...]) -> DispatchTable:
    """The table of a parsed JSON object; :class:`TableError` when it is not one (another format,
    a missing field, a family not in ``families``)."""
    if not isinstance(obj, dict):
        raise TableError(f"expected a JSON object, got {type(obj).__name__}")
    if obj.get("format") != FORMAT:
        raise TableError(f"format: expected {FORMAT}, got {obj.get('format')!r}")
    raw = obj.get("entries")
    if not isinstance(raw, list):
        raise TableError("entries: expected a list")
    entries = []
    for item in raw:
        if not isinstance(item, dict):
            raise TableError(f"entry: expected an object, got {item!r}")
        family = item.get("family")
        if family not in families:
            raise TableError(f"entry family: expected one of {', '.join(families)}, got {family!r}")
        timed = item.get("timed", {})
        if not isinstance(timed, dict) or not all(isinstance(v, (int, float)) for v in timed.values()):
            raise TableError(f"entry timed: expected an object of numbers, got {timed!r}")
        entries.append(
            TableEntry(
                _positive_int(item, "rows"), _positive_int(item, "n"), _positive_int(item, "k"),
                _positive_int(item, "key_bytes"), family, str(item.get("source", "")),
                tuple((str(f), float(t)) for f, t in timed.items()),
            )
        )  # fmt: skip
    key = obj.get("key", {})
    if not isinstance(key, dict):
        raise TableError("key: expected an object")
    return DispatchTable(name, tuple(entries), tuple((str(a), str(b)) for a, b in sorted(key.items())))


def to_json(table: DispatchTable, **extra: object) -> dict:
    """The JSON object of ``table`` (what :func:`from_json` reads), with ``extra`` fields (notes,
    what the measurements lacked) beside the entries."""
    return {
        "format": FORMAT,
        "key": dict(table.key),
        **extra,
        "entries": [
            {"rows": e.rows, "n": e.n, "k": e.k, "key_bytes": e.key_bytes, "family": e.family,
             "source": e.source, "timed": dict(e.timed)}
            for e in table.entries
        ],
    }  # fmt: skip
