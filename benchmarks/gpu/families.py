"""The lease's family steps (benchmarks/cutopk_bench/lease.py): M1's sanitizer target, M5's ncu target, M6's
forced-family table and M7's host time per call.

    python3 benchmarks/gpu/families.py check             # M1: never-run families, two shapes each, bit-exact
    python3 benchmarks/gpu/families.py profile           # M5: six kernels once each inside the profiler window
    python3 benchmarks/gpu/families.py table --out M6.csv [--time-limit S]
    python3 benchmarks/gpu/families.py host --out M7.csv
    python3 benchmarks/gpu/families.py {check,profile,table,host} --dry-run   # on the CPU: what it would run

``table``: every family that can take each shape (``dispatch.why_not``) forced, checked and timed
by ``cutopk._demo.tune.measure`` (``python -m cutopk tune``'s measurement: answer against the NumPy
backend's, CUDA events, L2 flushed, at most 10 repetitions in 0.2 s), eagerly and under graph
replay (``--timing eager,graph``: 10 calls captured, replayed); torch.topk, FlashInfer (sorted and
unsorted) and CUB checked and timed the same two ways on the same input. The file is the
forced-family CSV (benchmarks/README.md, "Dispatch tables"): ``# name: value`` lines (the
device's ``compute_capability`` and ``sm_count``, the commit), then a row per family, shape and
timing whose ``<peer>_median_ms``/``_status``/... columns hold that shape's peer times in that
timing, as in the benchmark's CSV; rows with an empty ``algorithm`` carry a ``note`` (what was
left out, and why). ``python benchmarks/make_dispatch_table.py M6.csv`` makes a table of it.
Written a shape at a time (a hang, ended by the watchdog, costs the shape in progress).
``host``: calls back to back, no spin kernel and no flush, one synchronisation at the end:
calls per second for cutopk on a CuPy array, cutopk on a torch tensor through its operator
(``torch.ops.cutopk.top_k`` where registered), torch.topk and FlashInfer.
Each measurement runs under the benchmark watchdog (``$CUTOPK_BENCH_STEP_LIMIT``).
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # benchmarks/: the benchmark package

import numpy as np
from cutopk_bench import lease, shims, watchdog

from cutopk._demo import baselines, check, env, grid, inputs, timing, tune
from cutopk.cuda import dispatch

# M1: the families never run on a GPU, two shapes each (rows, n, k, dtype): cluster; split (forced:
# the dispatcher gives sm_90 cluster); multiblock's pass 1 streaming filter (a long row, small K)
# and large K picked from the candidates with the order tiles (K past the finishing block).
CHECKS = (
    ("cluster", (1, 65536, 50, "float32")),
    ("cluster", (4, 131072, 1024, "bfloat16")),
    ("split", (1, 131072, 50, "float32")),
    ("split", (8, 262144, 1024, "float32")),
    ("multiblock", (1, 1 << 21, 64, "float32")),
    ("multiblock", (2, 1 << 20, 16, "float16")),
    ("multiblock", (1, 1 << 20, 8192, "float32")),
    ("multiblock", (4, 262144, 4096, "bfloat16")),
)
# M5: four cutopk kernels (the dispatcher's choice) and FlashInfer's two (FilteredTopK on
# 128 x 32000, its route on 1 x 262144).
PROFILE = (
    ("cutopk", (1, 8192, 512, "float32")),
    ("cutopk", (1, 32000, 1024, "float32")),
    ("cutopk", (1, 262144, 50, "float32")),
    ("cutopk", (16, 65536, 2048, "bfloat16")),
    ("flashinfer-unsorted", (128, 32000, 50, "float32")),
    ("flashinfer-unsorted", (1, 262144, 50, "float32")),
)
HOST_SHAPES = ((1, 8192, 512, "float32"), (32, 32000, 50, "float32"))
HOST_CALLS = 2000
FIELDS = ("step", "case", "route", "timing", "median_us", "q1_us", "q3_us", "repeats", "calls_per_s", "note")
# M6: each peer's cells beside the families' on their row (the runner's CSV's peer columns).
PEER_FIELDS = ("median_ms", "min_ms", "max_ms", "status", "note", "route", "sorted")


def case_of(shape: tuple[int, int, int, str]) -> grid.Case:
    rows, n, k, dtype = shape
    return grid.Case("lease", rows, n, k, dtype=dtype)


def key_bytes(dtype: str) -> int:
    return np.dtype(inputs.numpy_dtype(dtype)).itemsize


def families_for(shape, device: dispatch.Device) -> list[str]:
    rows, n, k, dtype = shape
    return [f for f in dispatch.FAMILIES if dispatch.why_not(f, n, k, key_bytes(dtype), device, rows) is None]


def device_facts() -> dispatch.Device:
    from cutopk.cuda import device

    return device.device_facts("cuda", device.device_id("cuda"))


class Rows:
    """The step's CSV, one row written (and flushed) at a time."""

    def __init__(self, path: str | None, step: str):
        self.step = step
        self.file = open(path, "a", newline="") if path else None
        self.writer = csv.DictWriter(self.file or sys.stdout, FIELDS)
        if self.file is None or self.file.tell() == 0:
            self.writer.writeheader()

    def add(self, **row) -> None:
        self.writer.writerow({"step": self.step, **row})
        if self.file:
            self.file.flush()
        print(" ".join(f"{k}={v}" for k, v in row.items() if v not in (None, "")), flush=True)

    def close(self) -> None:
        if self.file:
            self.file.close()


class Sheet:
    """M6's forced-family CSV: ``# name: value`` lines, then ``columns``, a row written (and
    flushed) at a time; the file is written anew (make_dispatch_table reads one header)."""

    SHOWN = ("rows", "n", "k", "dtype", "algorithm", "timing", "cutopk_ms", "torch_median_ms", "note")

    def __init__(self, path: str | None, columns: tuple[str, ...], meta: dict):
        self.file = open(path, "w", newline="", encoding="utf-8") if path else None
        out = self.file or sys.stdout
        for name, value in meta.items():
            out.write(f"# {name}: {value}\n")
        self.writer = csv.DictWriter(out, columns)
        self.writer.writeheader()

    def add(self, row: dict) -> None:
        self.writer.writerow(row)
        if self.file:
            self.file.flush()
            print(" ".join(f"{k}={row[k]}" for k in self.SHOWN if row.get(k) not in (None, "")), flush=True)

    def close(self) -> None:
        if self.file:
            self.file.close()


def run_check(dry: bool) -> int:
    """M1's sanitizer target: each never-run family forced on its two shapes, against the NumPy backend."""
    import cutopk

    bad = 0
    dog = watchdog.Watchdog(watchdog.limit_from_env())
    facts = lease.hopper() if dry else device_facts()
    for family, shape in CHECKS:
        case = case_of(shape)
        why = dispatch.why_not(family, case.n, case.k, key_bytes(case.dtype), facts, case.rows)
        if why or dry:
            print(f"{family} {case.label()}: {'would check' if not why else 'cannot take it: ' + why}")
            continue
        import cupy

        host = inputs.values(case)
        expected = cutopk.top_k(host, case.k, backend="numpy", nan="largest")
        with dog.watch(f"{family} {case.label()}"):
            got = cutopk.top_k(cupy.asarray(host), case.k, algorithm=family, nan="largest")
            cupy.cuda.Device().synchronize()
        same = np.array_equal(check.bits(check.to_numpy(got[0])), check.bits(expected[0])) and np.array_equal(
            check.to_numpy(got[1]), expected[1]
        )
        bad += not same
        print(f"{family} {case.label()}: {'bit-exact' if same else 'WRONG'}", flush=True)
    return 1 if bad else 0


def run_profile(dry: bool) -> int:
    """M5's target: each kernel once between cudaProfilerStart and Stop, after a warm-up call."""
    for who, shape in PROFILE:
        case = case_of(shape)
        if dry:
            print(f"would profile {who} {case.label()}")
            continue
        import cupy

        x = cupy.asarray(inputs.values(case))
        route = _route(who, x, case)
        if route.call is None:
            print(f"{who} {case.label()}: skipped, {route.reason}", flush=True)
            continue
        runtime = cupy.cuda.runtime  # as benchmarks/scoreboard.py's profile(): either spelling
        start = getattr(runtime, "profilerStart", None) or cupy.cuda.profiler.start
        stop = getattr(runtime, "profilerStop", None) or cupy.cuda.profiler.stop
        route.call()
        cupy.cuda.Device().synchronize()
        start()
        route.call()
        cupy.cuda.Device().synchronize()
        stop()
        print(f"profiled {who} {case.label()} {route.detail or ''}", flush=True)
    return 0


def _route(who: str, x, case: grid.Case, family: str = "auto"):
    if who == "cutopk":
        import cutopk

        return baselines.Route(
            family if family != "auto" else "cutopk",
            lambda: cutopk.top_k(x, case.k, algorithm=family, nan="largest"),
        )
    return shims.KIT.routes(x, 1, case, True, only=(who,))[0]


def table_columns(peers) -> tuple[str, ...]:
    """M6.csv's columns: the forced-family CSV's (``tune.COLUMNS``), each peer's, a ``note``."""
    return (*tune.COLUMNS, *(f"{p}_{field}" for p in peers for field in PEER_FIELDS), "note")


def _case_fields(case: grid.Case) -> dict:
    return {f: getattr(case, f) for f in ("regime", "rows", "n", "k", "mode", "dtype", "dist", "layout")}


def time_peers(x, host, case: grid.Case, expected, timers: dict, dog, peers) -> dict[str, dict]:
    """``{timing: {column: value}}``: each of ``peers`` on the device input ``x`` (``host``: its
    copy), checked once against the NumPy backend's ``expected`` values (``check.check``; an
    unsorted peer as a multiset), then timed by each of ``timers``."""
    cells: dict[str, dict] = {mode: {} for mode in timers}
    for route in shims.KIT.routes(x, 1, case, True, only=tuple(peers)):
        for mode, cell in _peer_cells(route, host, case, expected, timers, dog).items():
            cells[mode].update({f"{route.name}_{field}": value for field, value in cell.items()})
    return cells


def _peer_cells(route, host, case: grid.Case, expected, timers: dict, dog) -> dict[str, dict]:
    """One peer's cells for each timing; ``status`` as the runner's: ok, skipped, mismatch, error."""
    if route.call is None:
        return {mode: {"status": "skipped", "note": route.reason} for mode in timers}
    try:
        with dog.watch(f"{case.label()}: {route.name}"):
            why = check.check(host, 1, expected, route.call(), sorts=route.sorts)
    except Exception as exc:  # noqa: BLE001 - one peer's failure is its cells, not the end
        return {mode: {"status": "error", "note": f"{type(exc).__name__}: {exc}"[:200]} for mode in timers}
    if why:
        return {mode: {"status": "mismatch", "note": why} for mode in timers}
    return {
        mode: _time_peer(route, timer, dog, f"{case.label()}: {route.name}, {mode}")
        for mode, timer in timers.items()
    }


def _time_peer(route, timer, dog, label: str) -> dict:
    try:
        with dog.watch(label):
            t = timer(route.call, route.own_stream, route.capture)
    except timing.Uncapturable as exc:
        return {"status": "skipped", "note": f"not timed under graph replay: {exc}"}
    except Exception as exc:  # noqa: BLE001 - as in _peer_cells
        return {"status": "error", "note": f"{type(exc).__name__}: {exc}"[:200]}
    return {"median_ms": t["median"] * 1e3, "min_ms": t["min"] * 1e3, "max_ms": t["max"] * 1e3,
            "status": "ok", "route": route.detail or "", "sorted": route.sorts}  # fmt: skip


def run_table(out: str | None, time_limit: float, dry: bool) -> int:
    """M6: every family forced on each of :func:`lease.forced_shapes` through ``tune.measure``
    (eager and graph replay), the peers beside them; the forced-family CSV, a shape at a time."""
    cases = [case_of(s) for s in lease.forced_shapes()]
    peers = lease.FORCED_PEERS
    if dry:
        facts = lease.hopper()
        for case in cases:
            fams = families_for((case.rows, case.n, case.k, case.dtype), facts)
            print(
                f"would time {case.label()} ({', '.join(lease.FORCED_TIMINGS)}): {', '.join(fams)} + {', '.join(peers)}"
            )
        print(f"would write the forced-family CSV ({len(table_columns(peers))} columns) to {out or 'stdout'}")
        return 0
    import cupy

    t0 = time.monotonic()
    facts = device_facts()
    clocks = tune.timers(lease.FORCED_TIMINGS)
    dog = watchdog.Watchdog(watchdog.limit_from_env())
    meta = {**env.metadata(gpu=True), "timing": ",".join(lease.FORCED_TIMINGS), "peers": list(peers),
            "made_by": "benchmarks/gpu/families.py table (the lease's M6)"}  # fmt: skip
    sheet = Sheet(out, table_columns(peers), meta)
    for case in cases:
        left = time_limit - (time.monotonic() - t0)
        if left < 10:
            sheet.add({**_case_fields(case), "note": "not started: --time-limit reached"})
            continue
        arrays: dict = {}
        try:
            rows, left_out = tune.measure([case], facts, clocks, left, tune.Progress(0), dog.watch, arrays)
            if case not in arrays:
                sheet.add({**_case_fields(case), "note": "no family can take it here"})
                continue
            x, expected = arrays[case]
            cells = time_peers(x, cupy.asnumpy(x), case, expected.values, clocks, dog, peers)
        except Exception as exc:  # noqa: BLE001 - a shape that fails (memory) is a row, not the end
            sheet.add({**_case_fields(case), "note": f"failed: {type(exc).__name__}: {exc}"[:200]})
            continue
        for mode in lease.FORCED_TIMINGS:
            mine = [r for r in rows if r["timing"] == mode]
            for row in mine or [{**_case_fields(case), "timing": mode, "note": "no family timed"}]:
                sheet.add({**row, **cells[mode]})
        for line in left_out:
            sheet.add({**_case_fields(case), "note": f"left out: {line}"})
        del arrays
        cupy.get_default_memory_pool().free_all_blocks()
    sheet.close()
    return 0


def run_host(out: str | None, dry: bool) -> int:
    """M7: calls per second, back to back (no spin kernel, no flush), one synchronisation."""
    names = ("cutopk-cupy", "cutopk-torch-op", "torch", "flashinfer", "flashinfer-unsorted")
    if dry:
        for shape in HOST_SHAPES:
            print(f"would call {case_of(shape).label()} {HOST_CALLS} times each: {', '.join(names)}")
        return 0
    import cupy

    rows = Rows(out, "M7")
    dog = watchdog.Watchdog(watchdog.limit_from_env())
    for shape in HOST_SHAPES:
        case = case_of(shape)
        x = cupy.asarray(inputs.values(case))
        for name in names:
            try:
                call, why = _host_call(name, x, case)
                if call is not None:
                    with dog.watch(f"{case.label()}: {name}"):
                        took = _calls_back_to_back(call)
            except Exception as exc:  # noqa: BLE001 - one route's failure is a row, not the end
                call, why = None, f"failed: {type(exc).__name__}: {exc}"[:200]
            if call is None:
                rows.add(
                    case=case.label(),
                    route=name,
                    timing="host",
                    note=why if why.startswith("failed") else f"skipped: {why}",
                )
                continue
            rows.add(
                case=case.label(),
                route=name,
                timing="host",
                median_us=f"{took / HOST_CALLS * 1e6:.2f}",
                repeats=HOST_CALLS,
                calls_per_s=f"{HOST_CALLS / took:.0f}",
            )
    rows.close()
    return 0


def _calls_back_to_back(call) -> float:
    """Seconds for HOST_CALLS calls after 20 warm-up calls, one synchronisation at each end."""
    import cupy

    for _ in range(20):
        call()
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    for _ in range(HOST_CALLS):
        call()
    cupy.cuda.Device().synchronize()
    return time.perf_counter() - start


def _host_call(name: str, x, case: grid.Case):
    import cutopk

    if name == "cutopk-cupy":
        return (lambda: cutopk.top_k(x, case.k, nan="largest")), None
    if name == "cutopk-torch-op":
        if why := baselines.missing("torch"):
            return None, why
        import torch

        import cutopk.torch_ops

        t = torch.from_dlpack(x)
        op = getattr(getattr(torch.ops, "cutopk", None), "top_k", None)
        if op is None:
            return None, "torch.ops.cutopk.top_k is not registered"
        return (lambda: op(t, case.k)), None
    route = shims.KIT.routes(x, 1, case, True, only=(name,))[0]
    return route.call, route.reason


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/gpu/families.py", description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("check", "profile", "table", "host"))
    p.add_argument("--out", help="the CSV file (table: written anew; host: appended)")
    p.add_argument(
        "--time-limit", type=float, default=300.0, help="table: start no shape after this many seconds"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print what would run, measure nothing (no GPU needed)"
    )
    args = p.parse_args(argv)
    if args.what == "check":
        return run_check(args.dry_run)
    if args.what == "profile":
        return run_profile(args.dry_run)
    if args.what == "table":
        return run_table(args.out, args.time_limit, args.dry_run)
    return run_host(args.out, args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
