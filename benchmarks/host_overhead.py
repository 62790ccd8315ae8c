"""Host time per call: what cutopk's Python costs before (and around) its kernel launches.

    PYTHONPATH=. python benchmarks/host_overhead.py [--calls 2000] [--repeat 7] [--out FILE.md]
    PYTHONPATH=. python benchmarks/host_overhead.py --only cupy    # the CuPy path only: seconds

**The CuPy path** (issue 39: on an H100 no cutopk call took under 30 µs, the CUDA events
bracketing the whole Python call): ``cutopk.top_k(x, k, axis=1, mode="largest", nan="largest")``
as the scoreboard calls it, on a CuPy array of the scoreboard's small rows (1x8192 k=512, 1x32000
k=50, 8x128256 k=50, 64x8192 k=2048; float32 and bfloat16), with a warm call cache. CuPy is the
test stand-in (tests/standin/cupy) made thin: every kernel launch is a no-op and ``cupy.empty``
hands back cached arrays (the stand-in's own allocator is Python, tens of µs, where CuPy's pool is
Cython), so what is timed is cutopk's own Python plus a few cheap stand-in calls (the array's
``data``, the current device). CuPy's real costs per call (two ``cupy.empty``, one
``RawKernel`` launch with its argument packing) come on top on a GPU and are not measured here.
Times are this thread's CPU time (``time.thread_time_ns``; least of ``--repeat`` runs): the
machine is shared, and the wall clock (also reported) times the neighbours too. The steps of a
warm call come from cProfile (each step's cumulative time, scaled to the unprofiled total).
Where CuPy has a GPU, the same rows run on it instead, with real CuPy (launches and allocations
real, not counted, no synchronisation inside a timed run): cutopk's Python and CuPy's together.

**The simulator-target grid** (issue 28):

Per shape of the GPU quick grid, the CUDA code path is timed with everything real except the
kernel launch itself: the simulator target (NumPy arrays) with a recording module in place of
the compiled one, so argument checks, the call cache, layout, allocations and the launch
arguments all run, and the launch only counts. The input is a view with the shape's strides over
a few bytes (nothing reads it), so the grid's largest shapes cost no memory. Beside it, in the
same run: ``torch.topk`` on a 1x128 CPU tensor (the framework-overhead reference: a whole call
of a tiny problem), NumPy's argpartition route and cutopk's NumPy backend on 1x128 and 65536x8.

Reported per shape (the quick grid's, and one row per kernel family, forced): microseconds per
cached call (the median over ``--repeat`` runs of ``--calls`` calls) and its ratio to torch.topk's
1x128 CPU call, the first call of a new signature (checks and planning; the module is already
compiled), launches (kernels and the array library's copies, which are counted, not run) and
allocations per call (a warm call: the outputs; the scratch comes from the cached workspace).
With CuPy and a GPU, also the wall-clock time per call against ``torch.topk`` on the GPU.

Goals (issue 28): a cached CUDA-path call costs at most 2x the host time of torch.topk's whole
1x128 CPU call, on every family; an axis-0 call at most 2x its transposed twin. (Issue 12: the
NumPy backend on 1x128 and 65536x8 is no slower than the argpartition route; a first call stays
under 10x a cached one.)
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time

import numpy as np

import cutopk
from cutopk import _demo
from cutopk._core import call as _call
from cutopk._core.call import observe_launches as recording_launches
from cutopk._demo.baselines import numpy_naive_route
from cutopk._demo.grid import quick_grid


def _dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def unread_input(case) -> tuple[np.ndarray, int]:
    """A view with the case's shape and strides over 16 bytes (never read: the launches only
    count), and the axis to select along. Where the plan copies the input first, the copy reads
    it, so those cases get real (zeroed) memory."""
    dt = _dtype(case.dtype)
    x, axis = _strided_view(np.zeros(16, np.uint8).view(dt), case)
    forced = {"algorithm": case.family} if isinstance(case, _FamilyCase) else {}
    if cutopk.plan(x, case.k, axis=axis, mode=case.mode, backend="sim", **forced).copy:
        x, axis = _strided_view(np.zeros(case.rows * case.n, dt), case)
    return x, axis


def _strided_view(base, case):
    item = base.dtype.itemsize
    if case.layout == "axis0":  # (n, rows) C-contiguous, selected along axis 0
        return np.lib.stride_tricks.as_strided(base, (case.n, case.rows), (case.rows * item, item)), 0
    if case.layout == "transposed":  # (rows, n) view of a C-contiguous (n, rows)
        return np.lib.stride_tricks.as_strided(base, (case.rows, case.n), (item, case.rows * item)), 1
    return np.lib.stride_tricks.as_strided(base, (case.rows, case.n), (case.n * item, item)), 1


def _runs_us(fn, calls: int, repeat: int, clock) -> list[float]:
    """The mean time of ``calls`` calls by ``clock`` (ns), in microseconds, for each of ``repeat``
    runs after one warm-up call."""
    fn()
    runs = []
    for _ in range(repeat):
        t0 = clock()
        for _ in range(calls):
            fn()
        runs.append((clock() - t0) / calls / 1e3)
    return runs


def per_call_us(fn, calls: int, repeat: int) -> float:
    """Median over ``repeat`` runs of the mean time of ``calls`` calls, in microseconds."""
    return statistics.median(_runs_us(fn, calls, repeat, time.perf_counter_ns))


def first_call_us(fn, repeat: int) -> float:
    """Median time of a call with a cold call cache (the compiled module stays), microseconds."""
    runs = []
    for _ in range(repeat):
        _call.CACHE.clear()
        t0 = time.perf_counter_ns()
        fn()
        runs.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(runs)


# Every kernel family at least once, forced (the grid's shapes pick only some of them).
FAMILY_CASES = [
    ("warp_row", (64, 128), 8),
    ("warp_radix", (1024, 2048), 16),
    ("thread_row", (64, 300), 5),
    ("bitonic", (8, 2048), 100),
    ("radix", (4, 100_000), 100),
    ("sort", (3, 200), 7),
    ("multiblock", (2, 5000), 40),
]


class _FamilyCase:
    """A family row: the shape of a quick-grid case, row-major, the family forced."""

    def __init__(self, family, shape, k):
        self.family, self.rows, self.n, self.k = family, shape[0], shape[1], k
        self.dtype, self.layout, self.mode = "float32", "rows", "largest"

    def label(self) -> str:
        return f"family {self.family} {self.rows}x{self.n} k={self.k}"


def _cases():
    return [*quick_grid(gpu=True), *(_FamilyCase(*c) for c in FAMILY_CASES)]


def cuda_path_rows(calls: int, repeat: int) -> list[dict]:
    rows = []
    for case in _cases():
        with recording_launches() as rec:
            x, axis = unread_input(case)
            kw = {"axis": axis, "mode": case.mode, "backend": "sim"}
            if isinstance(case, _FamilyCase):
                kw["algorithm"] = case.family

            def call(x=x, kw=kw, k=case.k):
                return cutopk.top_k(x, k, **kw)

            call()
            before = (len(rec.launches), rec.allocations)
            call()
            per = (len(rec.launches) - before[0], rec.allocations - before[1])
            algorithm = cutopk.plan(x, case.k, **kw).algorithm
            copies = rec.copies
            call()
            copies = rec.copies - copies
        # Timed without the allocation counting (its own cost is not the host path's).
        with recording_launches(count_allocations=False):
            cached = per_call_us(call, max(10, calls // max(1, per[0] * 10)), repeat)
            first = first_call_us(call, repeat)
        rows.append(
            {
                "case": case.label(),
                "algorithm": algorithm,
                "cached_us": cached,
                "first_us": first,
                "launches": per[0] + copies,
                "allocations": per[1],
            }
        )
    return rows


def reference_rows(calls: int, repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    out = {}
    for shape, k in (((1, 128), 8), ((65536, 8), 2)):
        x = rng.random(shape, dtype=np.float32)
        label = f"{shape[0]}x{shape[1]} k={k}"
        n_calls = calls if shape[0] == 1 else max(5, calls // 200)
        out[f"numpy backend {label}"] = per_call_us(lambda x=x, k=k: cutopk.top_k(x, k), n_calls, repeat)
        route = numpy_naive_route(x, 1, k, "largest")
        out[f"np.argpartition route {label}"] = per_call_us(route.call, n_calls, repeat)
    if _demo.baselines.missing("torch") is None:
        import torch

        t = torch.from_numpy(rng.random((1, 128), dtype=np.float32))
        out["torch.topk 1x128 k=8 (CPU)"] = per_call_us(lambda: torch.topk(t, 8), calls, repeat)
    return out


def gpu_rows(calls: int, repeat: int) -> list[dict]:
    """Wall-clock per call on a GPU, cutopk against torch.topk on the same tensors (synchronised
    once per batch of calls, so it is the steady-state issue rate a training loop sees)."""
    try:
        import cupy
        import torch

        if cupy.cuda.runtime.getDeviceCount() == 0 or not torch.cuda.is_available():
            return []
    except Exception:  # noqa: BLE001 - no GPU stack: nothing to report
        return []
    rows = []
    for shape, k in (((4096, 128), 8), ((1, 128256), 50), ((64, 128256), 50), ((1, 128), 8)):
        t = torch.rand(shape, device="cuda")

        def ours(t=t, k=k):
            cutopk.top_k(t, k)

        def theirs(t=t, k=k):
            torch.topk(t, k)

        result = {}
        for name, fn in (("cutopk", ours), ("torch.topk", theirs)):

            def batch(fn=fn):
                for _ in range(calls):
                    fn()
                torch.cuda.synchronize()

            batch()
            result[name] = statistics.median(_timed(batch) for _ in range(repeat)) / calls
        rows.append({"case": f"{shape[0]}x{shape[1]} k={k}", **result})
    return rows


# ---- the CuPy path: cutopk.top_k on a CuPy array, the launch and the allocator made thin


# The scoreboard's small, latency-bound rows (issue 39: no cutopk call under 30 us on an H100).
CUPY_SHAPES = [((1, 8192), 512), ((1, 32000), 50), ((8, 128256), 50), ((64, 8192), 2048)]
CUPY_DTYPES = ("float32", "bfloat16")
# Families of several launches or with scratch (the workspace and its tickets), forced on one shape.
CUPY_FORCED = [((8, 128256), 50, "split"), ((8, 128256), 50, "multiblock")]


def _cupy_cases() -> list[tuple]:
    """``(shape, k, dtype, algorithm)`` of every CuPy-path row."""
    cases = [(shape, k, dtype, "auto") for shape, k in CUPY_SHAPES for dtype in CUPY_DTYPES]
    return cases + [(shape, k, "float32", algorithm) for shape, k, algorithm in CUPY_FORCED]


# The steps of a warm call: each the cumulative profile time of the functions named (in the file
# named), less the steps named after it that run inside them. What no step names is the entry's
# own glue (top_k, select, the result tuple). Both the code before issue 39's short path (_wrap,
# prepare) and after it (cached_cupy, plain) are named, so one script times either tree (and the
# call cache's key by its name before issue 40, _signature, and after, cache_key).
STEPS = (
    ("call cache: key and lookup", (("_core/call.py", "_signature"), ("_core/call.py", "cache_key"), ("_core/call.py", "get"), ("_core/call.py", "hit")), ()),
    ("input kind, backend, CuPy probe, device (wrap)", (("_core/call.py", "_wrap"),), ()),
    ("short path: CuPy type and device", (("_core/call.py", "cached_cupy"),), ("call cache: key and lookup",)),
    ("outputs: allocation (thin allocator)", (("host_overhead.py", "empty"), ("_creation/basic.py", "empty")), ()),
    ("workspace and tickets", (("cuda/workspace.py", "take"), ("cuda/workspace.py", "tickets")), ()),
    ("launch call (a no-op here)", (("host_overhead.py", "__call__"), ("~", "cupy.cuda.function.Function")), ()),
    (
        "launch arguments (runner)",
        (("cuda/runner.py", "Runner._run_single"), ("cuda/runner.py", "Runner.run")),
        ("workspace and tickets", "launch call (a no-op here)"),
    ),
    ("alignment check", (("cuda/launcher.py", "_aligned"),), ()),
    (
        "prepared call: alignment, outputs' shapes (GpuCall.run / plain)",
        (("cuda/launcher.py", "GpuCall.run"), ("cuda/launcher.py", "plain")),
        ("outputs: allocation (thin allocator)", "launch arguments (runner)", "workspace and tickets",
         "launch call (a no-op here)", "alignment check"),
    ),
)  # fmt: skip
REST = "entry: top_k, select, scope, result (the rest)"


def _install_standin() -> None:
    """``import cupy`` as the CuPy stand-in of tests/standin (no GPU needed)."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(os.path.dirname(here), "tests"))
    from standin import install_cupy

    install_cupy()


class _NoLaunch:
    """A kernel whose launch does nothing (and counts): the time left is cutopk's."""

    max_dynamic_shared_size_bytes = 48 * 1024

    def __init__(self, counter: list):
        self.counter = counter

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        self.counter[0] += 1


class _NoModule:
    def __init__(self, counter: list):
        self.counter = counter

    def get_function(self, name: str):
        return _NoLaunch(self.counter)


class _ThinAllocator:
    """``cupy.empty`` made thin: the stand-in's allocation is Python (tens of µs) where CuPy's
    pool is Cython (about a µs), so a warm call gets cached arrays back (one dict read), counted."""

    def __init__(self, cupy):
        self.real, self.cache, self.count = cupy.empty, {}, 0

    def empty(self, shape, dtype=float, order="C"):
        self.count += 1
        key = (shape if type(shape) is tuple else (shape,), dtype, order)
        arr = self.cache.get(key)
        if arr is None:
            arr = self.cache[key] = self.real(shape, dtype, order)
        return arr


@contextlib.contextmanager
def thin_cupy():
    """The stand-in CuPy with no-op launches and the thin allocator; yields ``(cupy, launches,
    allocator)``. The call cache and the workspaces start and end empty."""
    from unittest import mock

    from cutopk.cuda import launcher as _launcher
    from cutopk.cuda import workspace as _workspace

    _install_standin()
    import cupy

    launches = [0]
    alloc = _ThinAllocator(cupy)
    with (
        mock.patch.object(_launcher, "_build_family", lambda target, cxx, family: _NoModule(launches)),
        mock.patch.dict(_launcher._MODULES, clear=True),
        mock.patch.dict(_launcher._PLACEHOLDERS, clear=True),
        mock.patch.object(cupy, "empty", alloc.empty),
    ):
        _call.CACHE.clear()
        _workspace.release_workspace()
        try:
            yield cupy, launches, alloc
        finally:
            _call.CACHE.clear()
            _workspace.release_workspace()


def _gpu_cupy():
    """CuPy with a GPU, or None (then the stand-in's modules are what ``import cupy`` finds)."""
    try:
        import cupy

        if cupy.__name__ == "standin.cupy":  # installed already (a test): no GPU behind it
            return None
        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:  # noqa: BLE001 - no CuPy, or one without a usable GPU
        for name in [n for n in sys.modules if n.split(".")[0] in ("cupy", "cupyx", "cupy_backends")]:
            del sys.modules[name]
    return None


@contextlib.contextmanager
def real_cupy(cupy):
    """On a GPU: CuPy as it is (real launches and allocations, which are not counted); yields
    ``(cupy, None, None)``."""
    _call.CACHE.clear()
    try:
        yield cupy, None, None
    finally:
        _call.CACHE.clear()
        cupy.cuda.Device().synchronize()


def _matches(file: str, line: int, func: str, where: str, name: str) -> bool:
    """Whether a profile entry is the function ``name`` of the file ending in ``where``: a plain
    name matches every function so named there; ``Class.method`` only that method (its line)."""
    if where == "~":  # a C or Cython function: CuPy's launch, say
        return file == "~" and name in func
    if not file.endswith(where):
        return False
    if "." not in name:
        return func == name
    import importlib

    module = importlib.import_module("cutopk." + where.removesuffix(".py").replace("/", "."))
    owner, _, method = name.partition(".")
    code = getattr(getattr(getattr(module, owner, None), method, None), "__code__", None)
    return code is not None and func == code.co_name and line == code.co_firstlineno


def _steps_of(stats, per_call_scale: float) -> dict[str, float]:
    """Each step's µs per call from a profile (cumulative times, scaled to the unprofiled run)."""
    out: dict[str, float] = {}
    for label, names, inner in STEPS:
        total = 0.0
        for (file, line, func), (_, _, _, cum, _) in stats.stats.items():
            if any(_matches(file, line, func, f, n) for f, n in names):
                total += cum
        out[label] = max(0.0, total * per_call_scale - sum(out[i] for i in inner))
    return out


def cpu_per_call_us(fn, calls: int, repeat: int) -> float:
    """The least over ``repeat`` runs of the mean CPU time of this thread over ``calls`` calls, in
    µs: the machine this runs on is shared, and wall-clock loops there time the neighbours too."""
    return min(_runs_us(fn, calls, repeat, time.thread_time_ns))


def cupy_path_rows(calls: int, repeat: int, profile: bool) -> list[dict]:
    import cProfile
    import pstats

    rows = []
    gpu = _gpu_cupy()
    with thin_cupy() if gpu is None else real_cupy(gpu) as (cupy, launches, alloc):
        for (rows_, n), k, dtype, algorithm in _cupy_cases():
            x = cupy.asarray(np.random.default_rng(0).random((rows_, n)).astype(_dtype(dtype)))

            def call(x=x, k=k, algorithm=algorithm):  # as the scoreboard calls it (_demo/baselines.py)
                return cutopk.top_k(x, k, axis=1, mode="largest", nan="largest", algorithm=algorithm)

            call()  # on a GPU: the modules compiled (or loaded) before any timing
            first = first_call_us(call, repeat)
            call()
            per: tuple = ("-", "-")  # not counted on a GPU
            if launches is not None:
                before = (launches[0], alloc.count)
                call()
                per = (launches[0] - before[0], alloc.count - before[1])
            cached = cpu_per_call_us(call, calls, repeat)
            wall = per_call_us(call, calls, repeat)
            row = {
                "case": f"{rows_}x{n} k={k} {dtype}" + ("" if algorithm == "auto" else f" ({algorithm})"),
                "algorithm": cutopk.plan(x, k, algorithm=algorithm).algorithm,
                "cached_us": cached,
                "wall_us": wall,
                "first_us": first,
                "launches": per[0],
                "allocations": per[1],
                "gpu": gpu is not None,
            }
            if profile:
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(calls):
                    call()
                prof.disable()
                stats = pstats.Stats(prof)
                profiled = stats.total_tt / calls * 1e6
                steps = _steps_of(stats, cached / profiled / calls * 1e6)
                steps[REST] = max(0.0, cached - sum(steps.values()))
                row["steps"] = steps
            rows.append(row)
    return rows


def cupy_report(rows: list[dict]) -> str:
    title = "## CuPy path (the stand-in, launches no-ops, thin allocator): host time per warm call"
    if rows and rows[0]["gpu"]:
        title = "## CuPy path on a GPU (real CuPy: launches and allocations run, uncounted): host time per warm call"
    lines = [
        title,
        "",
        "| case | algorithm | warm µs (CPU time) | warm µs (wall) | first call µs | launches | allocations |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['case']} | {r['algorithm']} | {r['cached_us']:.2f} | {r['wall_us']:.2f} | {r['first_us']:.0f} | "
        f"{r['launches']} | {r['allocations']} |"
        for r in rows
    ]
    if rows and "steps" in rows[0]:
        labels = list(rows[0]["steps"])
        lines += [
            "",
            "Steps of a warm call, µs of CPU time (cProfile's shares scaled to the unprofiled time):",
            "",
        ]
        lines += ["| step | " + " | ".join(r["case"] for r in rows) + " |"]
        lines += ["|---|" + "---:|" * len(rows)]
        for label in labels:
            lines.append(f"| {label} | " + " | ".join(f"{r['steps'][label]:.2f}" for r in rows) + " |")
    return "\n".join(lines)


def _timed(fn) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e3


def report(cuda_rows, refs, gpu) -> str:
    torch_ref = refs.get("torch.topk 1x128 k=8 (CPU)")
    lines = [
        "## CUDA code path, host time per call (launches recorded, not run)",
        "",
        "| case | algorithm | cached µs | first call µs | first/cached | launches | allocations |"
        + (" cached / torch.topk 1x128 CPU |" if torch_ref else ""),
        "|---|---|---:|---:|---:|---:|---:|" + ("---:|" if torch_ref else ""),
    ]
    for r in cuda_rows:
        ratio = f" {r['cached_us'] / torch_ref:.2f}x |" if torch_ref else ""
        lines.append(
            f"| {r['case']} | {r['algorithm']} | {r['cached_us']:.1f} | {r['first_us']:.1f} | "
            f"{r['first_us'] / r['cached_us']:.1f}x | {r['launches']} | {r['allocations']} |{ratio}"
        )
    by_case = {r["case"]: r["cached_us"] for r in cuda_rows}
    axis0 = [c for c in by_case if c.endswith(" axis0")]
    for case in axis0:
        twin = case.removesuffix(" axis0") + " transposed"
        if twin in by_case:
            lines += [
                "",
                f"Axis 0 against its transposed twin: {by_case[case]:.1f} µs / {by_case[twin]:.1f} µs = "
                f"{by_case[case] / by_case[twin]:.2f}x (goal: at most 2x).",
            ]
    lines += ["", "## References (same run)", "", "| route | µs per call |", "|---|---:|"]
    lines += [f"| {name} | {us:.1f} |" for name, us in refs.items()]
    if gpu:
        lines += [
            "",
            "## GPU wall clock per call",
            "",
            "| case | cutopk µs | torch.topk µs |",
            "|---|---:|---:|",
        ]
        lines += [f"| {r['case']} | {r['cutopk']:.1f} | {r['torch.topk']:.1f} |" for r in gpu]
    else:
        lines += ["", "No GPU here: the GPU wall-clock comparison did not run."]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed run (default 2000)")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per figure (median; default 7)")
    parser.add_argument(
        "--only", choices=("all", "cupy", "sim"), default="all",
        help="cupy: the CuPy path only (seconds); sim: the simulator-target grid only",
    )  # fmt: skip
    parser.add_argument("--no-profile", action="store_true", help="CuPy path: no per-step profile")
    parser.add_argument("--out", help="also write the markdown report to this file")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.repeat < 1:
        parser.error("--calls and --repeat must be positive")
    parts = []
    if args.only in ("all", "cupy"):
        parts.append(cupy_report(cupy_path_rows(args.calls, args.repeat, not args.no_profile)))
    if args.only in ("all", "sim"):
        refs = reference_rows(args.calls, args.repeat)
        cuda_rows = cuda_path_rows(args.calls, args.repeat)
        parts.append(report(cuda_rows, refs, gpu_rows(args.calls, args.repeat)))
    text = "\n\n".join(parts)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
