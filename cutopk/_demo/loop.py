"""Running the grid: per case, the input, cutopk's answer and time, every peer checked then timed.

``python -m cutopk`` (:mod:`.cli`) runs :func:`run` with the demo's :class:`Kit`: the peers of
:mod:`.baselines`. ``benchmarks/run.py`` runs the same loop with a kit of its own
(``benchmarks/cutopk_bench/shims.py``: CUB's and FlashInfer's peers, the watchdog, the plots); the
package never imports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import numpy as np

from .._core import entry
from . import baselines, check, env, grid, inputs, pairs, report, timing
from .pairs import summary
from .route import Route

GIB = 1 << 30
CPU_FULL_MAX_ELEMENTS = 1 << 24  # the full grid on the CPU leaves out larger cases unless told otherwise
REGIME_NAMES = (*grid.REGIMES, "layout")


def unguarded(step: str) -> AbstractContextManager:
    """A step guard that guards nothing (the demo's; a benchmark's watchdog ends a hung step)."""
    return contextlib.nullcontext()


class Kit:
    """What a run sets beside cutopk, and how it guards its steps: the demo's peers
    (:mod:`.baselines`, read when asked, so that a test's replacement is seen). A benchmark's kit
    subclasses it to add peers, a start-up per GPU run, a guard and plots."""

    records: tuple[str, ...] = ()  # the files' ``meta`` keys that :meth:`start` fills (None on the CPU)
    unsorted: tuple[str, ...] = ()  # the GPU peers whose K come unordered (none of the demo's)
    plots = False  # :meth:`plot` writes plots (the command line offers ``--plots``)

    def peer_names(self, gpu: bool) -> tuple[str, ...]:
        """The peers' names, in column order."""
        return baselines.GPU_PEERS if gpu else baselines.CPU_PEERS

    def routes(self, x, axis: int, case: grid.Case, gpu: bool, only: tuple[str, ...] = ()) -> list[Route]:
        """The peers' routes for one input (``only`` these when given)."""
        return baselines.peers(x, axis, case, gpu, only)

    def unavailable(self, name: str, gpu: bool) -> str | None:
        """Why the peer ``name``, asked for with ``--peers``, cannot run here, or None."""
        return baselines.peer_unavailable(name, gpu)

    def start(self, record: dict, peers: tuple[str, ...]) -> dict[str, dict | None]:
        """A GPU run's set-up on the device of ``record`` (``env.device_record``; said as it
        goes): records for the files' ``meta``, read back by :meth:`absent`."""
        return {}

    def absent(self, name: str, loaded: dict[str, dict | None]) -> str | None:
        """Why the peer ``name`` cannot run at all in this run, already said by :meth:`start`, or
        None (the loop then asks whether a module it needs is missing)."""
        return None

    def guard(self, gpu: bool) -> Callable[[str], AbstractContextManager]:
        """The guard of each step (a context manager per call, named for the step)."""
        return unguarded

    def plot(self, results: list[dict], names: list[str], out: pathlib.Path, stem: str) -> list[pathlib.Path]:
        """Write plots of the results (``--plots``); the demo writes none."""
        raise NotImplementedError("the demo writes no plots: benchmarks/run.py --plots does")


DEMO = Kit()


@dataclasses.dataclass
class Session:
    """What every measurement of one run shares."""

    gpu: bool
    timer: Callable[..., dict]  # timing.CpuTimer or timing.GpuTimer: fn -> its statistics
    copy_bps: float | None = None
    peers: tuple[str, ...] = ()
    self_check_max: int = 1 << 27
    loaded: dict[str, dict | None] = dataclasses.field(default_factory=dict)  # Kit.start's records
    left_out: tuple[str, ...] = ()  # peers that cannot run at all here: no column, said once
    # Around every call: a benchmark's watchdog ends the run, naming the step, when a call never
    # returns (a hung kernel cannot be interrupted).
    guard: Callable[[str], AbstractContextManager] = unguarded
    timing: str = "eager"  # timing.TIMINGS: eager calls, or replays of a captured graph
    unsorted: bool = False  # an unsorted GPU peer runs: the table shows cutopk's sorted=False call
    kit: Kit = DEMO


def _free_device_bytes() -> int:
    import cupy

    return cupy.cuda.runtime.memGetInfo()[0] + cupy.get_default_memory_pool().free_bytes()


def _free_host_bytes() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # unknown: let the allocation itself fail and be reported


def does_not_fit(case: grid.Case, gpu: bool) -> str | None:
    """Why the case's input cannot be held (host: float32 draw, dtype copy, layout copy; device:
    input, layout copy, outputs), or None."""
    itemsize = inputs.numpy_dtype(case.dtype).itemsize
    host = case.elements * (4 + 2 * itemsize)
    if host > _free_host_bytes():
        return f"needs about {host / GIB:.1f} GiB of host memory, {_free_host_bytes() / GIB:.1f} GiB free"
    if gpu:
        dev = case.elements * 2 * itemsize + case.rows * case.k * (itemsize + 8)
        if dev > _free_device_bytes():
            return f"needs about {dev / GIB:.1f} GiB of GPU memory, {_free_device_bytes() / GIB:.1f} GiB free"
    return None


def _peer_memory(name: str, case: grid.Case, itemsize: int) -> int:
    """Rough device bytes a peer allocates besides its outputs (sort-based routes hold indices
    and double buffers for the whole input; torch's radix select needs little)."""
    per_element = {"cupy": 3 * itemsize + 24, "jax": 3 * (itemsize + 4)}.get(name, 0)
    return case.elements * per_element


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:200]


def _release(gpu: bool) -> None:
    """Hand cached device memory back between cases, so the next (maybe larger) case fits."""
    if not gpu:
        return
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    if sys.modules.get("torch") is not None:  # only when a peer imported it
        sys.modules["torch"].cuda.empty_cache()


def self_check(
    x_host: np.ndarray, axis: int, case: grid.Case, ours, limit: int
) -> tuple[str, np.ndarray | None]:
    """cutopk's CUDA answer against its NumPy backend (identical values and indices, SPEC.md
    rule 5); skipped above ``limit`` elements, where the single-threaded reference is slow.

    Returns the verdict and, on a mismatch, the reference values (the peers are then checked
    against those, so that they keep their times while cutopk's row says it is wrong).
    """
    if case.elements > limit:
        return f"skipped: more than {limit} elements", None
    ref = entry.top_k(x_host, case.k, axis=axis, mode=case.mode, nan="largest", backend="numpy")
    values, indices = (check.to_numpy(a) for a in ours)
    if not np.array_equal(check.bits(values), check.bits(ref.values)):
        return "mismatch: values differ from the NumPy backend's", ref.values
    if not np.array_equal(indices, ref.indices):
        return "mismatch: indices differ from the NumPy backend's", ref.values
    return "ok", None


def _algorithm(x, case: grid.Case, axis: int) -> str:
    try:
        p = entry.plan(x, case.k, axis=axis, mode=case.mode, nan="largest")
    except Exception as exc:  # noqa: BLE001 - the plan is informative only
        return f"? ({type(exc).__name__})"
    name = p["algorithm"] if isinstance(p, dict) else getattr(p, "algorithm", "?")
    copied = p.get("copy") if isinstance(p, dict) else getattr(p, "copy", False)
    params = p.get("params") if isinstance(p, dict) else getattr(p, "params", None)
    if isinstance(params, dict) and "route" in params:  # the NumPy backend: which of its routes
        name = f"{name}:{params['route']}"
    return f"{name}{'+copy' if copied else ''}"


def measure(case: grid.Case, session: Session) -> dict:
    """Check and time cutopk and every peer on one case; a failure becomes a note, never an
    exception."""
    result: dict = {"case": dataclasses.asdict(case), "label": case.label(), "peers": {}}
    host = inputs.values(case)
    x_host, axis = inputs.arrange(host, case)
    x = x_host
    if session.gpu:
        import cupy

        x, axis = inputs.arrange(cupy.asarray(host), case, cupy)
    del host
    itemsize = x_host.itemsize
    result["bytes"] = x_host.nbytes + case.rows * case.k * (itemsize + 8)  # input read, outputs written
    result["algorithm"] = _algorithm(x, case, axis)

    ours = baselines.cutopk_route(x, axis, case.k, case.mode)
    assert ours.call is not None  # cutopk's own route is never skipped
    try:
        with session.guard(f"{case.label()}: cutopk"):
            first = ours.call()
            expected = {"largest": check.to_numpy(first.values)}
        if session.gpu:
            result["self_check"], ref = self_check(x_host, axis, case, first, session.self_check_max)
            if ref is not None:
                expected["largest"] = ref
        with session.guard(f"{case.label()}: cutopk, timed"):
            t = session.timer(ours.call)
    except Exception as exc:  # noqa: BLE001 - cutopk failing on a case is reported, and the run goes on
        result["cutopk"] = {"note": _error(exc)}
        return result
    result["cutopk"] = pairs.stats(t)
    result["timing"] = session.timing
    routes = [
        r
        for r in session.kit.routes(x, axis, case, session.gpu, session.peers)
        if r.name not in session.left_out
    ]
    against = {True: t, False: pairs.time_unsorted(x, x_host, axis, case, expected, session, result, routes)}
    result["gbps"] = result["bytes"] / t["median"] / 1e9
    result["bandwidth_pct"] = (
        100 * result["bytes"] / t["median"] / session.copy_bps if session.copy_bps else None
    )

    for route in routes:
        result["peers"][route.name] = _measure_peer(
            route, case, x, x_host, axis, expected, against[route.sorts], session, itemsize
        )
    return result


def _measure_peer(route, case, x, x_host, axis, expected, ours_t, session, itemsize) -> dict:
    if route.call is None:
        return {"status": "skipped", "note": route.reason}
    if session.gpu:
        need, free = _peer_memory(route.name, case, itemsize), _free_device_bytes()
        if route.name == "jax":  # JAX allocates from its own pool, capped by env.prepare_jax
            import cupy

            share = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))
            free = min(free, int(share * cupy.cuda.runtime.memGetInfo()[1]))
        if need > free:
            return {
                "status": "skipped",
                "note": f"needs about {need / GIB:.1f} GiB, {free / GIB:.1f} GiB free",
            }
    try:
        with session.guard(f"{case.label()}: {route.name}"):  # the check waits for it
            answer = route.call()  # also the warm-up (and JAX's compilation)
            if route.nan not in expected:
                rule = entry.top_k(x, case.k, axis=axis, mode=case.mode, nan=route.nan)
                expected[route.nan] = check.to_numpy(rule.values)
            problem = check.check(x_host, axis, expected[route.nan], answer, route.sorts)
        del answer
        if problem:
            return {"status": "mismatch", "note": problem}
        with session.guard(f"{case.label()}: {route.name}, timed"):
            t = session.timer(route.call, own_stream=route.own_stream, capture=route.capture)
    except timing.Uncapturable as exc:
        return {"status": "skipped", "note": f"not timed under graph replay: {exc}"}
    except Exception as exc:  # noqa: BLE001 - a peer failing (memory, dtype, layout) is reported
        _release(session.gpu)
        return {"status": "error", "note": _error(exc)}
    out = pairs.stats(t) | {"status": "ok", "note": None, **pairs.speedup(t, ours_t, route.sorts)}
    if route.detail:
        out["route"] = route.detail
    if not route.sorts:
        out["sorted"] = False  # its time does not include ordering the K
    return out


def start(repeat: int | None, peers: tuple[str, ...], timing_mode: str = "eager", kit: Kit = DEMO) -> Session:
    """Pick the GPU when CuPy can use one, say which backend runs and why, set up the timer."""
    reason = env.gpu_unavailable()
    if reason is None:
        env.prepare_jax()
        record = env.device_record()
        timer = timing.GpuTimer(repeat or 20)
        replay = (
            timing.GraphTimer(timer, flush=timing_mode == "graph-flush") if timing_mode != "eager" else None
        )
        report.say(
            f"GPU found: {record['device']} (compute capability {record['compute_capability']}, driver "
            f"{record['driver']}, CUDA runtime {record['cuda_runtime']}): benchmarking cutopk's CUDA backend "
            f"against {', '.join(kit.peer_names(True))}"
        )
        copy_bps = timer.copy_bandwidth()
        report.say(f"device-to-device copy bandwidth measured now: {copy_bps / 1e9:.0f} GB/s (read + write)")
        return Session(
            True,
            replay or timer,
            copy_bps,
            peers,
            loaded=kit.start(record, peers),
            guard=kit.guard(True),
            timing=timing_mode,
            kit=kit,
        )
    if baselines.missing("torch") is None:
        import torch

        torch.set_num_threads(1)  # the NumPy backend is single-threaded: compare like with like
    from ..numpy import compiled, threads

    task_s, _, efficiency, _ = threads.costs()
    compiled_why = compiled.unavailable_reason()
    speedups = ", ".join(f"{1 + e:.2f}x on {family} blocks" for family, e in efficiency.items())
    report.say(
        f"no GPU found ({reason}): benchmarking the NumPy backend on the CPU against NumPy's own "
        "routes and torch.topk on the CPU (1 thread) where installed; shapes are scaled down for the CPU"
    )
    report.say(
        f"CPU: {env.cpu_model()}, {threads._cpus()} cores for this process; cutopk uses up to "
        f"{threads.get_num_threads()} threads where its cost model says they pay (measured now: "
        f"{task_s * 1e6:.0f} us per task handed over, two threads {speedups}); the cutopk-1thread and "
        "torch-threads columns compare at one thread and at torch's default; the compiled route for "
        f"long rows: {'loaded' if compiled_why is None else 'not used, ' + compiled_why}"
    )
    return Session(False, timing.CpuTimer(repeat or 7), None, peers, guard=kit.guard(False), kit=kit)


def _absent_peers(names: list[str], session: Session) -> dict[str, str]:
    """The peers that cannot run at all in this run, and why; each is said once here (or by the
    shim's own line at start-up) and its column is left out, rather than "skip" on every row."""
    absent = {}
    for name in names:
        if why := session.kit.absent(name, session.loaded):
            absent[name] = why  # said by the kit's start
        elif why := baselines.peer_missing(name):
            absent[name] = why
            report.say(f"{name} peer left out: {why}")
    return absent


def run(
    full: bool = False,
    regimes: list[str] | None = None,
    out: pathlib.Path | None = None,
    save: bool | None = None,
    plots: bool = False,
    repeat: int | None = None,
    max_elements: int | None = None,
    time_limit: float | None = None,
    peers: tuple[str, ...] = (),
    cases: list[grid.Case] | None = None,
    stem: str | None = None,
    cost: Callable[[grid.Case], float] | None = None,
    extra: dict | None = None,
    timing_mode: str = "eager",
    kit: Kit = DEMO,
) -> list[dict]:
    """Run the quick or full grid, print the table, and write files.

    Parameters
    ----------
    full : bool
        The full grid instead of the quick one.
    regimes : list of str, optional
        Only these regimes (``grid.REGIMES`` and ``"layout"``).
    out : pathlib.Path, optional
        Folder for ``<stem>.json`` / ``.csv`` (and plots).
    save : bool, optional
        Write into ``env.default_out_dir`` when ``out`` is not given (``benchmarks/results/<date>-<device>/``
        in a source checkout, ``./cutopk-results/<date>-<device>/`` otherwise); by default only a GPU
        run from a source checkout does.
    plots : bool
        Also write plots (``Kit.plot``: the benchmark's kit writes PNGs with matplotlib).
    repeat, max_elements, time_limit, peers
        As the command-line options of the same names.
    cases, stem
        These cases instead of a grid's, written as ``<stem>.json`` / ``.csv`` (the scoreboard).
    cost
        Estimated seconds a case takes: with ``time_limit``, a case that would end after the limit
        is not started (the later, cheaper ones may still be).
    extra
        More metadata for the files.
    timing_mode
        ``--timing``: ``eager`` calls, or ``graph`` / ``graph-flush`` replays (timing.GraphTimer).
    kit
        The peers and the guard (:class:`Kit`): the demo's, or a benchmark's.

    Returns
    -------
    list of dict
        One result per measured case (the JSON file's ``results``).
    """
    t0 = time.monotonic()
    if out is not None and (why := env.unwritable(out)):
        raise ValueError(f"out: {why}")
    session = start(repeat, peers, timing_mode, kit)
    if max_elements is None and not session.gpu and full:
        max_elements = CPU_FULL_MAX_ELEMENTS
        print("CPU: shapes with more than 2**24 elements are left out of the full grid (--max-elements)")
    if cases is None:
        cases = grid.in_regimes(grid.full_grid() if full else grid.quick_grid(session.gpu), regimes)
    names = [n for n in kit.peer_names(session.gpu) if not peers or n in peers]
    absent = _absent_peers(names, session)
    names = [n for n in names if n not in absent]
    session.left_out = tuple(absent)
    session.unsorted = session.gpu and bool(set(names) & set(kit.unsorted))
    meta = env.metadata(session.gpu) | {
        "grid": "full" if full else "quick",
        "regimes": regimes or "all",
        "peers": names,
        "peers_left_out": absent,
        "copy_gbps": session.copy_bps / 1e9 if session.copy_bps else None,
        **{key: session.loaded.get(key) for key in kit.records},
        "timer": _timer_record(session.timer),
        "timing": session.timing,
        "argv": sys.argv,
    }
    meta |= extra or {}
    if sys.modules.get("torch") is not None and not session.gpu:
        meta["torch_threads"] = sys.modules["torch"].get_num_threads()
    stem = stem or ("full" if full else "quick") + ("-" + "-".join(regimes) if regimes else "")
    if save is None:  # GPU results from a source checkout are kept unless --no-save
        save = session.gpu and env.in_checkout()
    if save and out is None:
        out = env.default_out_dir(meta)
        if why := env.unwritable(out):
            raise ValueError(f"save: {why}")
    table = report.Table(
        names, session.gpu, len(cases), labels=[c.label() for c in cases], unsorted=session.unsorted
    )
    table.header()
    results, skipped = [], []
    for i, case in enumerate(cases):
        why = (
            f"more than --max-elements {max_elements}"
            if max_elements and case.elements > max_elements
            else None
        ) or does_not_fit(case, session.gpu)
        if time_limit and time.monotonic() - t0 > time_limit:
            why = f"--time-limit {time_limit:g} s reached"
        elif time_limit and cost and (end := time.monotonic() - t0 + cost(case)) > time_limit:
            why = f"would end about {end:.0f} s in (estimated {cost(case):.1f} s), after the {time_limit:g} s limit"
        if why:
            skipped.append({"case": dataclasses.asdict(case), "label": case.label(), "reason": why})
            table.note(case.label(), "case skipped", why)
            continue
        table.progress(i, case.label())
        started = time.monotonic()
        try:
            results.append(measure(case, session) | {"wall_s": round(time.monotonic() - started, 2)})
        except KeyboardInterrupt:
            print("\ninterrupted: writing what was measured")
            break
        except Exception as exc:  # noqa: BLE001 - out of memory, or an input the device cannot hold
            skipped.append({"case": dataclasses.asdict(case), "label": case.label(), "reason": _error(exc)})
            table.note(case.label(), "case failed", _error(exc))
            continue
        finally:
            _release(session.gpu)
        table.row(i, results[-1])
        if out is not None:  # after every case, so an interrupted run keeps what it measured
            report.write(results, meta | {"skipped": skipped}, out, stem)
    lines = summary(results, names)
    lines.append(f"{len(results)} cases measured, {len(skipped)} skipped, in {time.monotonic() - t0:.0f} s")
    table.footer(lines)
    if out is not None:
        files = report.write(results, meta | {"skipped": skipped}, out, stem)
        if plots:
            files += kit.plot(results, names, out, stem)
        print("wrote " + ", ".join(str(f) for f in files))
    return results


def _timer_record(timer) -> dict:
    record = {k: getattr(timer, k) for k in ("repeat", "min_repeat", "warmup", "budget")}
    if isinstance(timer, timing.GraphTimer):
        return (
            record
            | {"graph_calls": timer.calls, "l2_flush": timer.flush}
            | _timer_record(timer.base)
            | record
        )
    record["clock"] = "cuda events" if isinstance(timer, timing.GpuTimer) else "time.perf_counter"
    if isinstance(timer, timing.GpuTimer):
        record["l2_flush_bytes"] = int(timer.flush.nbytes)
        record["spin_ms"] = (
            timer.spin_ns / 1e6 if timer.spin is not None else None
        )  # None: host overhead timed
    return record
