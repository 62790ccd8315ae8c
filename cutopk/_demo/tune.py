"""``python -m cutopk tune``: the dispatch table of this GPU, measured here, in at most two minutes.

Every kernel family that can take a shape is forced on it (``algorithm=``), its answer checked
against auto's (identical values and indices), and timed (CUDA events, L2 flushed, as the
benchmark times); the fastest family per shape becomes an entry (``tabulate.build``). The
measurements are written as a forced-family CSV (benchmarks/README.md, "Forced-family results")
and the table beside it, in the user's cache (``cutopk.cuda.tables.user_path``: one file per
device name), keyed by device, cutopk, CUDA runtime and driver versions: later processes on this
device prefer it (``plan().chosen_by`` says ``table tuned (...)``) until one of those changes.

The shapes (:data:`SHAPES`) are also those of the forced-family GPU run whose results make the
package's dispatch tables (cutopk/cuda/tables/): LLM sampling and indexer rows of 1..256 x
32000..262144, K 50 and 1024, float32, and two shapes of their own. ``--shapes`` measures others.
No case is started that would end after ``--time-limit`` (estimated from the time so far).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import json
import pathlib
import sys
import time

import numpy as np

from .._core import call as _call
from .._core import entry
from ..cuda import device as _device
from ..cuda import dispatch, dispatch_table, tables
from . import check, env, grid, inputs, tabulate, timing

SHAPES = (
    *(
        grid.Case("tune", r, n, k)
        for r in (1, 16, 128, 256)
        for n in (32000, 131072, 262144)
        for k in (50, 1024)
    ),
    grid.Case("tune", 16, 65536, 2048, dtype="bfloat16"),
    grid.Case("tune", 1, 8192, 512),
)
TIME_LIMIT = 110.0  # seconds of measurement; with the start (imports, the timer) within two minutes
COLUMNS = ("regime", "rows", "n", "k", "mode", "dtype", "dist", "layout", "algorithm", "forced", "timing",
           "cutopk_ms", "cutopk_min_ms", "cutopk_max_ms", "cutopk_repeat")  # fmt: skip


def parse_shapes(text: str) -> list[grid.Case]:
    """``ROWSxN:K[:DTYPE]`` items, comma-separated (``16x32000:50,1x8192:512:bfloat16``)."""
    cases = []
    for item in filter(None, text.split(",")):
        try:
            shape, k, *dtype = item.split(":")
            rows, n = shape.lower().split("x")
            case = grid.Case("tune", int(rows), int(n), int(k), dtype=dtype[0] if dtype else "float32")
            inputs.numpy_dtype(case.dtype)
        except (ValueError, TypeError, KeyError):
            raise argparse.ArgumentTypeError(f"expected ROWSxN:K[:DTYPE] items, got {item!r}") from None
        if min(case.rows, case.n, case.k) < 1 or case.k > case.n:
            raise argparse.ArgumentTypeError(f"expected rows, n >= K >= 1, got {item!r}")
        cases.append(case)
    return cases


class Progress:
    """One line on stderr, redrawn: a bar, the count, the step, the seconds so far."""

    def __init__(self, total: int, stream=None, width: int = 24):
        self.total, self.width, self.done = total, width, 0
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.t0 = time.monotonic()

    def step(self, what: str) -> None:
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        line = f"tune [{bar}] {self.done}/{self.total} {what} ({time.monotonic() - self.t0:.0f} s)"
        self.stream.write(("\r" + line.ljust(100)) if self.tty else line + "\n")
        self.stream.flush()
        self.done += 1

    def end(self) -> None:
        if self.tty:
            self.stream.write("\n")


def _families(case: grid.Case, facts: dispatch.Device) -> list[str]:
    kb = inputs.numpy_dtype(case.dtype).itemsize
    return [
        f for f in dispatch.ALGORITHMS if dispatch.why_not(f, case.n, case.k, kb, facts, case.rows) is None
    ]


def timers(modes, repeat: int = 10) -> dict:
    """The timer of each of ``modes`` (``timing.TIMINGS``) as tune times a family: at most
    ``repeat`` repetitions within 0.2 s, no warm-up (the answer's check was the warm-up); the
    graph modes replay captures on the same flush and spin kernel."""
    base = timing.GpuTimer(repeat, warmup=0, min_repeat=min(3, repeat), budget=0.2)
    return {m: base if m == "eager" else timing.GraphTimer(base, flush=m == "graph-flush") for m in modes}


def measure(
    cases,
    facts,
    timers: dict,
    time_limit: float,
    progress: Progress,
    watch=None,
    arrays: dict | None = None,
) -> tuple[list[dict], list[str]]:
    """The forced-family rows (``COLUMNS``: one per family, shape and timing of ``timers``) and
    what was left out, and why. ``watch``: a label's context manager around each call (the
    benchmark watchdog's ``watch``; none by default); ``arrays``: where the case in progress is
    kept as ``{case: (device input, NumPy backend's answer)}`` (the forced-family run times its
    peers on the same input and answer)."""
    import cupy

    watch = watch or (lambda label: contextlib.nullcontext())
    jobs = [(case, family) for case in cases for family in _families(case, facts)]
    progress.total = len(jobs)
    rows, left_out = [], []
    t0, done = time.monotonic(), 0
    arrays = {} if arrays is None else arrays
    for case, family in jobs:
        label = f"{case.rows}x{case.n} k={case.k} {case.dtype} {family}"
        spent = time.monotonic() - t0
        if done and spent + spent / done > time_limit:
            left_out.append(f"{label}: would end after the {time_limit:g} s limit")
            continue
        progress.step(label)
        if case not in arrays:
            arrays.clear()
            host = inputs.values(case)
            arrays[case] = (cupy.asarray(host), entry.top_k(host, case.k, backend="numpy"))
        x, expected = arrays[case]
        try:
            with watch(label):
                got = entry.top_k(x, case.k, algorithm=family)
                cupy.cuda.Device().synchronize()
            if not (
                np.array_equal(check.bits(got.values.get()), check.bits(expected.values))
                and np.array_equal(got.indices.get(), expected.indices)
            ):
                left_out.append(f"{label}: its answer differs from the NumPy backend's (not timed)")
                continue
            call = lambda x=x, k=case.k, family=family: entry.top_k(x, k, algorithm=family)  # noqa: E731
            for mode, timer in timers.items():
                try:
                    with watch(f"{label}, {mode}"):
                        t = timer(call)
                except timing.Uncapturable as exc:
                    left_out.append(f"{label}, {mode}: {exc}")
                    continue
                rows.append({
                    "regime": case.regime, "rows": case.rows, "n": case.n, "k": case.k, "mode": case.mode,
                    "dtype": case.dtype, "dist": case.dist, "layout": case.layout, "algorithm": family,
                    "forced": family, "timing": mode, "cutopk_ms": t["median"] * 1e3,
                    "cutopk_min_ms": t["min"] * 1e3, "cutopk_max_ms": t["max"] * 1e3, "cutopk_repeat": t["repeat"],
                })  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - a family failing here (memory) is left out, said
            left_out.append(f"{label}: {type(exc).__name__}: {exc}"[:200])
            continue
        done += 1
    progress.end()
    return rows, left_out


def write_csv(path: pathlib.Path, facts: dict, rows: list[dict]) -> None:
    """The forced-family CSV: ``# name: value`` header lines, then ``COLUMNS``."""
    with path.open("w", newline="", encoding="utf-8") as f:
        for name, value in facts.items():
            f.write(f"# {name}: {value}\n")
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="measure this GPU's dispatch table (every family "
                                "forced on each shape) and save it in the user's cache")  # fmt: skip
    p.add_argument("--shapes", type=parse_shapes, help="ROWSxN:K[:DTYPE],... instead of the default shapes")
    p.add_argument("--time-limit", type=float, default=TIME_LIMIT, help=f"seconds of measurement (default "
                   f"{TIME_LIMIT:g}, at most 110: the whole run within two minutes)")  # fmt: skip
    p.add_argument("--repeat", type=int, default=10, help="most timed repetitions per family and shape")
    p.add_argument("--timing", default="eager", help="comma-separated: eager, graph, graph-flush (each family "
                   "timed each way, a CSV row each); the table is made from the first")  # fmt: skip
    p.add_argument(
        "--out", type=pathlib.Path, help="the table's path (default: the user's cache for this device)"
    )
    return p


def main(argv: list[str] | None = None, prog: str = "python -m cutopk tune") -> int:
    p = parser(prog)
    args = p.parse_args(argv)
    if not 0 < args.time_limit <= TIME_LIMIT:
        p.error(f"--time-limit: expected a number in (0, {TIME_LIMIT:g}], got {args.time_limit:g}")
    if args.repeat < 1:
        p.error(f"--repeat: expected an integer of at least 1, got {args.repeat}")
    modes = [m for m in args.timing.split(",") if m]
    if not modes or set(modes) - set(timing.TIMINGS):
        p.error(f"--timing: expected some of {', '.join(timing.TIMINGS)}, got {args.timing!r}")
    if why := env.gpu_unavailable():
        print(f"tune needs a GPU: {why}", file=sys.stderr)
        return 1
    import cupy

    record = env.device_record()
    dev, cc = record["device_id"], str(record["compute_capability"])
    key = tables.device_key(record["device"], cc, record["cuda_runtime"], record["driver"])
    facts = _device.device_facts("cuda", dev)
    rules = dispatch.Device(facts.sm_count, facts.shared_bytes, facts.clusters)  # the rules, for build()
    out = args.out or tables.user_path(record["device"])
    if why := env.unwritable(out.parent):  # made if missing
        p.error(f"--out: {why}")
    cases = args.shapes or list(SHAPES)
    print(
        f"tune: {record['device']} (sm_{cc}), {len(cases)} shapes, at most {args.time_limit:g} s",
        file=sys.stderr,
    )
    rows, left_out = measure(cases, facts, timers(modes, args.repeat), args.time_limit, Progress(0))
    cupy.get_default_memory_pool().free_all_blocks()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    csv_path = out.with_suffix(".csv")
    write_csv(csv_path, {**key, "sm_count": facts.sm_count, "date": date}, rows)
    _, measured = tabulate.read_csv(csv_path, f"tune {date[:10]}", modes[0])
    table, lacks = tabulate.build(measured, rules, f"tuned ({out.name})", key)
    obj = dispatch_table.to_json(
        table, note="Made by python -m cutopk tune on this device.", unit="ms", timing=modes[0],
        sources=[str(csv_path)], lacks=lacks + left_out,
    )  # fmt: skip
    out.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")
    _device.device_facts.cache_clear()  # this process's later calls use the table too
    _call.CACHE.clear()
    changed = sum(e.family != dispatch.choose(e.rows, e.n, e.k, e.key_bytes, rules) for e in table.entries)
    print(
        f"wrote {out} ({len(table.entries)} entries, {changed} differing from the hand rules; {len(rows)} "
        f"timings in {csv_path.name}); later processes on this device use it (cutopk.plan(...).chosen_by)"
    )
    for line in left_out:
        print(f"  left out: {line}")
    return 0 if rows else 1
