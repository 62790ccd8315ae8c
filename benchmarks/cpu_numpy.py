"""CPU benchmark of the NumPy backend against the routes a CPU user would otherwise take.

    python benchmarks/cpu_numpy.py [--quick] [--repeat 7] [--case moe,indexer] [--markdown FILE]
    python benchmarks/cpu_numpy.py --memory [--n 50000000]

On every case of the CPU quick grid (``python -m cutopk --list`` without a GPU) and, without
``--quick``, the larger shapes of ``EXTRA_CASES``, these routes run on the same input, taking turns within each repetition so that the machine's drift (other
processes, clock changes) hits them alike; the median of ``--repeat`` turns is reported (and
the minimum). A turn is one untimed call (routes under 10 ms), then as many timed calls as
cutopk makes in some 2 ms (its time is the mean); the routes take their turns in a new random
order every time. One-thread routes are timed by their thread's CPU time, the others
by the wall clock (see ``ONE_THREAD``):

- ``cutopk`` (all cores, the default) and ``cutopk-1t`` (one thread);
- ``naive``: ``np.argpartition`` + gather + ``argsort`` of the K (NumPy's own ``top_k`` route;
  it breaks ties arbitrarily);
- ``argsort``: a full stable ``np.argsort`` and a slice (exact, O(n log n));
- ``torch-1t`` and ``torch``: ``torch.topk`` with one thread and with torch's default count.

``cutopk-1t`` is also timed by the wall clock, for the ``cutopk-1t-wall / cutopk`` ratio (do the
default threads ever lose to one thread?). ``argsort`` is left out above ``ARGSORT_MAX_ELEMENTS``
(seconds a turn). The header gives the machine, its core count and the library versions.

Every route's answer is checked first (values bit for bit against cutopk's under the route's
NaN rule; indices may differ only between equal values), and cutopk's answers on one thread and
on all cores must be identical. Ratios are a peer's time over cutopk's at the same thread count
(above 1: cutopk is faster).

``--memory`` instead measures the memory of one call on one long float32 row (all equal, mostly
zeros, half NaN, K of a tenth of N, uniform; and a zero-stride view of 2**31 int8), each in a
fresh process and on the default thread count: the peak of NumPy's allocations during the call (``tracemalloc``, which NumPy
reports its buffers to) and the growth of the process's peak RSS (``resource.getrusage``), both
beside the input's and the outputs' sizes.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import subprocess
import sys
import textwrap
import time

import numpy as np

import cutopk
from cutopk._demo import baselines, check, env, grid, inputs
from cutopk.numpy import compiled as compiled_route
from cutopk.numpy import compiled_threads as _compiled_threads
from cutopk.numpy import threads as _threads

ROUTES = ("cutopk", "cutopk-1t", "naive", "argsort", "torch-1t", "torch")
# Routes on one thread are timed by that thread's CPU time (time.thread_time: what the route
# computes, without the time other processes on a shared machine take from it); routes on
# several threads by the wall clock. Every ratio compares routes on the same clock.
ONE_THREAD = ("cutopk-1t", "naive", "argsort", "torch-1t")
# Each peer's ratio is taken against cutopk at the same thread count.
AGAINST = {
    "naive": "cutopk-1t",
    "argsort": "cutopk-1t",
    "torch-1t": "cutopk-1t",
    "torch": "cutopk",
    "cutopk-1t-wall": "cutopk",
}
ARGSORT_MAX_ELEMENTS = 4_000_000
SETTLE_S = 0.02
TURN_S = 0.002
MAX_TURN_S = 0.05
WARM_MAX_S = 0.01
# Issue 29's shapes beyond the quick grid (too large for it): a full run, not --quick.
EXTRA_CASES = (
    grid.Case("llm", 8, 2_000_000, 100),
    grid.Case("indexer", 2048, 8192, 32),
    grid.Case("llm", 8, 128256, 50, dtype="float16"),
    grid.Case("llm", 8, 128256, 50, dtype="bfloat16"),
    grid.Case("indexer", 1024, 4096, 64, dtype="int8"),
    grid.Case("layout", 2048, 1024, 16, layout="axis0"),
    # Issue 42's batched short rows (the compiled route's short-row methods), 16-bit keys.
    grid.Case("batch", 1024, 4096, 64),
    grid.Case("batch", 2048, 1024, 16),
    grid.Case("batch", 1024, 4096, 64, dtype="int16"),
    # Issue 42 item 3: 8- and 16-bit keys with K large against the row (the count).
    grid.Case("batch", 256, 4096, 512, dtype="int16"),
    grid.Case("indexer", 64, 16384, 2048, dtype="float16"),
    grid.Case("indexer", 64, 65536, 4096, dtype="int8"),
)


def routes(x, axis: int, case: grid.Case) -> dict[str, baselines.Route]:
    k, mode = case.k, case.mode
    threads = baselines.cpu_thread_routes(x, axis, k, mode, case.dtype)
    out = {
        "cutopk": baselines.cutopk_route(x, axis, k, mode),
        "cutopk-1t": threads["cutopk-1thread"](),
        "naive": baselines.numpy_naive_route(x, axis, k, mode),
        "argsort": baselines.numpy_sort_route(x, axis, k, mode),
    }
    if x.size > ARGSORT_MAX_ELEMENTS:
        out["argsort"] = baselines.Route(
            "numpy-sort", None, f"left out above {ARGSORT_MAX_ELEMENTS:,} elements"
        )
    torch_one = baselines.torch_route(x, axis, k, mode, case.dtype)
    if torch_one.call is not None:
        import torch

        call = torch_one.call

        def one_thread():
            before = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return call()
            finally:
                torch.set_num_threads(before)

        torch_one.call = one_thread
    out["torch-1t"] = torch_one
    out["torch"] = threads["torch-threads"]()
    return out


def measure(case: grid.Case, repeat: int) -> dict:
    """Median seconds per route on one case (None for a route that is skipped or wrong)."""
    x, axis = inputs.arrange(inputs.values(case), case)
    fns = routes(x, axis, case)
    ours = cutopk.top_k(x, case.k, axis=axis, mode=case.mode, nan="largest")
    one = fns["cutopk-1t"].call()
    assert np.array_equal(check.bits(one.values), check.bits(ours.values)), "1 thread: other values"
    assert np.array_equal(one.indices, ours.indices), "1 thread: other indices"
    expected = {"largest": ours.values}
    notes, live = {}, {}
    for name, route in fns.items():
        if route.call is None:
            notes[name] = route.reason
            continue
        if route.nan not in expected:
            expected[route.nan] = cutopk.top_k(x, case.k, axis=axis, mode=case.mode, nan=route.nan).values
        problem = check.check(x, axis, expected[route.nan], route.call(), route.sorts)
        if problem:
            notes[name] = problem
        else:
            live[name] = route.call
        _settle(name)
    times = {name: [] for name in live}
    if "cutopk-1t" in live:
        times["cutopk-1t-wall"] = []
    once = {}
    for name, fn in live.items():
        once[name] = _once(fn)
        _settle(name)
    base = once.get("cutopk", min(once.values()))
    # Every route gets as many calls a turn as cutopk (at most MAX_TURN_S of them), after one
    # untimed call where that is cheap: the timed calls find the caches as the route leaves them.
    calls = {name: max(1, min(int(TURN_S / base), int(MAX_TURN_S / t), 1000)) for name, t in once.items()}
    warm = {name: t < WARM_MAX_S for name, t in once.items()}
    shuffle = random.Random(0)
    for _ in range(repeat):
        # A new order every turn: the route after another finds the caches, the allocator and
        # the cores as that one left them (after a full argsort of 1M elements, 8x128256 k=50
        # took 0.75 ms against 0.42 ms), so no route may always follow the same one.
        for name in shuffle.sample(list(live), len(live)):
            fn, m = live[name], calls[name]
            if warm[name]:
                fn()
            w0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(m):
                fn()
            c1, w1 = time.thread_time(), time.perf_counter()
            times[name].append((c1 - c0 if name in ONE_THREAD else w1 - w0) / m)
            if name == "cutopk-1t":
                times["cutopk-1t-wall"].append((w1 - w0) / m)
            _settle(name)
    threads = cutopk.plan(x, case.k, axis=axis, mode=case.mode, nan="largest").params.get("threads_why", "")
    return {
        "median": {n: statistics.median(t) for n, t in times.items()},
        "min": {n: min(t) for n, t in times.items()},
        "notes": notes,
        "threads": threads,
    }


def _settle(name: str) -> None:
    """After torch's threaded call, a pause: its OpenMP workers spin for a while after a
    parallel call, and the route called next would share its cores with them (8x128256: 0.58
    ms against 0.34; cutopk's first calls of a shape, which time its split against one thread,
    would find the split slower than it is)."""
    if name == "torch":
        time.sleep(SETTLE_S)


def machine_line() -> str:
    """The CPU, its cores, the thread counts and the library versions, in one line."""
    import platform

    try:
        import torch

        torch_text = f"torch {torch.__version__} ({torch.get_num_threads()} threads by default)"
    except ImportError:
        torch_text = "torch not installed"
    task_s, element_s, efficiency, call_s = _threads.costs()
    return (
        f"{env.cpu_model()}: {_threads._cpus()} cores for this process; cutopk threads "
        f"{_threads.get_num_threads()} (measured: {task_s * 1e6:.0f} us per task handed over, "
        f"{element_s * 1e9:.2f} ns per element-pass, {call_s * 1e6:.1f} us more per NumPy call beside "
        "another thread, a second thread "
        + ", ".join(f"{1 + e:.2f}x as fast on {f} blocks" for f, e in efficiency.items())
        + f"); compiled route: {_compiled_text()}; NumPy {np.__version__}, {torch_text}, "
        f"Python {platform.python_version()}"
    )


def _compiled_text() -> str:
    """The compiled route's state and, where it runs, its own pool's measured costs."""
    why = compiled_route.unavailable_reason()
    if why is not None:
        return why
    handover, efficiency, _ = _compiled_threads.pool_costs()
    return (
        f"built, its pool {handover * 1e6:.1f} us per handover, a second thread {1 + efficiency:.2f}x as fast"
    )


def _once(fn) -> float:
    """Seconds of one call of ``fn`` (its second: the first may load and plan)."""
    fn()
    t0 = time.perf_counter()
    fn()
    return max(time.perf_counter() - t0, 1e-7)


def ratios(results: list[tuple[grid.Case, dict]], stat: str = "median") -> dict[str, list[float]]:
    out = {peer: [] for peer in AGAINST}
    for _, r in results:
        med = r[stat]
        for peer, ours in AGAINST.items():
            if peer in med and ours in med:
                out[peer].append(med[peer] / med[ours])
    return out


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def _seconds(s: float) -> str:
    return f"{s * 1e6:.1f} us" if s < 1e-4 else f"{s * 1e3:.2f} ms"


def table(results: list[tuple[grid.Case, dict]], stat: str = "median") -> list[str]:
    head = (
        "| case | " + " | ".join(ROUTES) + " | " + " | ".join(f"{p} / {o}" for p, o in AGAINST.items()) + " |"
    )
    lines = [head, "|" + "---|" * (1 + len(ROUTES) + len(AGAINST))]
    for case, r in results:
        med = r[stat]
        cells = [_seconds(med[n]) if n in med else "-" for n in ROUTES]
        cells += [f"{med[p] / med[o]:.2f}x" if p in med and o in med else "-" for p, o in AGAINST.items()]
        lines.append(f"| {case.label()} | " + " | ".join(cells) + " |")
    geo = ratios(results, stat)
    cells = ["" for _ in ROUTES] + [f"**{geomean(v):.2f}x**" for v in geo.values()]
    lines.append("| geometric mean | " + " | ".join(cells) + " |")
    return lines


MEMORY_CASES = {
    "uniform, k=64": ("uniform", 64, "last"),
    "all equal, k=64": ("equal", 64, "last"),
    "mostly zeros, k=64": ("zeros", 64, "last"),
    "mostly zeros, k=1000": ("zeros", 1000, "last"),
    "half NaN, k=64": ("nan", 64, "last"),
    "half NaN first, k=64": ("nan", 64, "largest"),
    "uniform, k=n/10": ("uniform", "n // 10", "last"),
    "zero stride 2**31 int8, k=4": ("stride0", 4, "last"),
}

# The input is filled a chunk at a time, so that its making leaves no temporaries in the RSS.
_MEMORY_PROBE = """
import resource, sys, time, tracemalloc
import numpy as np
import cutopk
rng = np.random.default_rng(0)
n, kind = {n}, "{kind}"
if kind == "stride0":
    x = np.broadcast_to(np.int8(3), (n,))
else:
    x = np.empty(n, np.float32)
    for s in range(0, n, 1 << 20):
        m = min(n - s, 1 << 20)
        if kind == "uniform":
            x[s : s + m] = rng.random(m, dtype=np.float32)
        elif kind == "equal":
            x[s : s + m] = 0.5
        elif kind == "zeros":
            x[s : s + m] = rng.random(m, dtype=np.float32) < 1e-5
        elif kind == "nan":
            x[s : s + m] = np.where(rng.random(m, dtype=np.float32) < 0.5, np.nan, 1)
k = {k}
cutopk.top_k(x[:4096], min(k, 4096))  # imports and the thread pool, outside the measurement
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
t0 = time.perf_counter()
r = cutopk.top_k(x, k, nan="{nan}")
seconds = time.perf_counter() - t0
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
held = x.nbytes if x.strides[0] else x.itemsize
print(held, r.values.nbytes + r.indices.nbytes, peak, (after - before) * 1024, seconds)
"""


def memory(n: int) -> list[str]:
    """One fresh process per case (see the module doc); returns the table's lines."""
    lines = [
        f"| 1 x {n:,} row | K | input held | outputs | NumPy peak during the call | peak RSS growth | time |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, (kind, k, nan) in MEMORY_CASES.items():
        size = 2**31 if kind == "stride0" else n
        code = _MEMORY_PROBE.format(n=size, kind=kind, k=k, nan=nan)
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
        if done.returncode:
            lines.append(f"| {name} | {k} | failed: {done.stderr.strip().splitlines()[-1][:120]} |||||")
            continue
        held, outputs, peak, rss, seconds = (float(v) for v in done.stdout.split())
        kk = size // 10 if k == "n // 10" else k
        mb = 1e6
        lines.append(
            f"| {name} | {kk:,} | {held / mb:.0f} MB | {outputs / mb:.1f} MB | {peak / mb:.1f} MB "
            f"| {rss / mb:.1f} MB | {seconds:.2f} s |"
        )
        print(lines[-1])
        sys.stdout.flush()
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7, help="turns of every route per case (median reported)")
    p.add_argument(
        "--case", default="", help="only cases whose label contains one of these (comma-separated)"
    )
    p.add_argument("--markdown", help="also write the table to this file")
    p.add_argument("--quick", action="store_true", help="the quick grid only, 5 turns (a few minutes)")
    p.add_argument("--memory", action="store_true", help="measure memory on one long row instead")
    p.add_argument("--n", type=int, default=50_000_000, help="--memory: the row's length")
    args = p.parse_args(argv)
    if args.memory:
        lines = memory(args.n)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write("\n".join(lines) + "\n")
        return 0
    if args.repeat < 1:
        p.error(f"--repeat: expected a positive integer, got {args.repeat}")
    np.seterr(all="ignore")
    if args.quick and "--repeat" not in " ".join(argv if argv is not None else sys.argv):
        args.repeat = 5
    wanted = [w for w in args.case.split(",") if w]
    every = grid.quick_grid(gpu=False) + ([] if args.quick else list(EXTRA_CASES))
    cases = [c for c in every if not wanted or any(w in c.label() for w in wanted)]
    print(machine_line(), f"median of {args.repeat} turns per route", sep="\n")
    results = []
    for case in cases:
        r = measure(case, args.repeat)
        results.append((case, r))
        print(table([(case, r)])[2], *(f"  {n}: {why}" for n, why in r["notes"].items()), sep="\n")
        if r["threads"]:
            print(f"  cutopk's threads after the turns: {r['threads']}")
        sys.stdout.flush()
    lines = [machine_line(), "", f"Medians of {args.repeat} turns:", "", *table(results)]
    lines += ["", f"Minima of {args.repeat} turns:", "", *table(results, "min")]
    print("\n".join(lines))
    for stat in ("median", "min"):
        for peer, values in ratios(results, stat).items():
            worst = min(values) if values else float("nan")
            print(
                f"{stat}: {peer} / {AGAINST[peer]}: geometric mean {geomean(values):.2f}x, min {worst:.2f}x"
            )
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
