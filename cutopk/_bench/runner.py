"""Running the grid: per case, the input, cutopk's answer and time, every peer checked then timed.

``python -m cutopk`` and ``benchmarks/run.py`` both end in :func:`main`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import sys
import textwrap
import time
from collections.abc import Callable

import numpy as np

from .._core import entry
from . import baselines, check, env, grid, inputs, pairs, report, timing, watchdog
from .pairs import summary

GIB = 1 << 30
CPU_FULL_MAX_ELEMENTS = 1 << 24  # the full grid on the CPU leaves out larger cases unless told otherwise
REGIME_NAMES = (*grid.REGIMES, "layout")


@dataclasses.dataclass
class Session:
    """What every measurement of one run shares."""

    gpu: bool
    timer: Callable[..., dict]  # timing.CpuTimer or timing.GpuTimer: fn -> its statistics
    copy_bps: float | None = None
    peers: tuple[str, ...] = ()
    self_check_max: int = 1 << 27
    cub: dict | None = None  # the CUB shim's version and library, or why it is unavailable
    flashinfer: dict | None = None  # the FlashInfer shim's likewise
    left_out: tuple[str, ...] = ()  # peers that cannot run at all here: no column, said once
    # Ends the run, naming the step, when a call never returns (a hung kernel cannot be interrupted).
    watchdog: watchdog.Watchdog = dataclasses.field(default_factory=lambda: watchdog.Watchdog(0))
    timing: str = "eager"  # timing.TIMINGS: eager calls, or replays of a captured graph
    unsorted: bool = False  # an unsorted GPU peer runs: the table shows cutopk's sorted=False call


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
        with session.watchdog.watch(f"{case.label()}: cutopk"):
            first = ours.call()
            expected = {"largest": check.to_numpy(first.values)}
        if session.gpu:
            result["self_check"], ref = self_check(x_host, axis, case, first, session.self_check_max)
            if ref is not None:
                expected["largest"] = ref
        with session.watchdog.watch(f"{case.label()}: cutopk, timed"):
            t = session.timer(ours.call)
    except Exception as exc:  # noqa: BLE001 - cutopk failing on a case is reported, and the run goes on
        result["cutopk"] = {"note": _error(exc)}
        return result
    result["cutopk"] = pairs.stats(t)
    result["timing"] = session.timing
    routes = [
        r
        for r in baselines.peers(x, axis, case, session.gpu, session.peers)
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
        with session.watchdog.watch(f"{case.label()}: {route.name}"):  # the check waits for it
            answer = route.call()  # also the warm-up (and JAX's compilation)
            if route.nan not in expected:
                rule = entry.top_k(x, case.k, axis=axis, mode=case.mode, nan=route.nan)
                expected[route.nan] = check.to_numpy(rule.values)
            problem = check.check(x_host, axis, expected[route.nan], answer, route.sorts)
        del answer
        if problem:
            return {"status": "mismatch", "note": problem}
        with session.watchdog.watch(f"{case.label()}: {route.name}, timed"):
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


def start(repeat: int | None, peers: tuple[str, ...], timing_mode: str = "eager") -> Session:
    """Pick the GPU when CuPy can use one, say which backend runs and why, set up the timer."""
    reason = env.gpu_unavailable()
    if reason is None:
        env.prepare_jax()
        facts = env.device_record()
        timer = timing.GpuTimer(repeat or 20)
        replay = (
            timing.GraphTimer(timer, flush=timing_mode == "graph-flush") if timing_mode != "eager" else None
        )
        report.say(
            f"GPU found: {facts['device']} (compute capability {facts['compute_capability']}, driver "
            f"{facts['driver']}, CUDA runtime {facts['cuda_runtime']}): benchmarking cutopk's CUDA backend "
            "against torch.topk, jax.lax.top_k, CuPy's argsort route, CUB's DeviceTopK and FlashInfer's top_k"
        )
        copy_bps = timer.copy_bandwidth()
        report.say(f"device-to-device copy bandwidth measured now: {copy_bps / 1e9:.0f} GB/s (read + write)")
        return Session(
            True,
            replay or timer,
            copy_bps,
            peers,
            cub=_cub_facts(facts, peers),
            flashinfer=_flashinfer_facts(facts, peers),
            watchdog=watchdog.Watchdog(watchdog.limit_from_env()),
            timing=timing_mode,
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
    return Session(False, timing.CpuTimer(repeat or 7), None, peers)


def _cub_facts(facts: dict, peers: tuple[str, ...]) -> dict | None:
    """Load the CUB shim for this GPU once, say whether the ``cub`` peer runs, and return what
    the files record about it."""
    if peers and not {"cub", "cub-sorted"} & set(peers):
        return None
    from . import cub

    lib, why = cub.available(cub.arch_of(facts["compute_capability"]))
    if lib is None:
        report.say(f"CUB peer skipped: {why}")
        return {"available": False, "reason": why}
    v = lib.version
    report.say(f"CUB peer: CUB {v // 100000}.{v // 100 % 1000}.{v % 100} from {lib.path}; {cub.NOTE}")
    return {"available": True, "cub_version": v, "library": str(lib.path), "note": cub.NOTE}


def _flashinfer_facts(facts: dict, peers: tuple[str, ...]) -> dict | None:
    """Load the FlashInfer shim for this GPU once and say whether its peers run (as _cub_facts)."""
    if peers and not {"flashinfer", "flashinfer-unsorted"} & set(peers):
        return None
    from . import flashinfer

    lib, why = flashinfer.available(flashinfer.arch_of(facts["compute_capability"]))
    if lib is None:
        report.say(f"FlashInfer peers skipped: {why}")
        return {"available": False, "reason": why}
    cub = "with" if lib.has_cub else "without"
    report.say(
        f"FlashInfer peers: FlashInfer {lib.version} ({cub} its CUB backend) from {lib.path}; {flashinfer.NOTE}"
    )
    return {"available": True, "version": lib.version, "cub_backend": lib.has_cub, "library": str(lib.path),
            "note": flashinfer.NOTE}  # fmt: skip


def _absent_peers(names: list[str], session: Session) -> dict[str, str]:
    """The peers that cannot run at all in this run, and why; each is said once here (or by the
    shim's own line at start-up) and its column is left out, rather than "skip" on every row."""
    absent = {}
    for name in names:
        shim = (
            session.cub
            if name.startswith("cub")
            else session.flashinfer
            if name.startswith("flash")
            else None
        )
        if shim is not None and not shim["available"]:
            absent[name] = shim["reason"]  # said by _cub_facts / _flashinfer_facts
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
        Also write PNG plots (needs matplotlib).
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

    Returns
    -------
    list of dict
        One result per measured case (the JSON file's ``results``).
    """
    t0 = time.monotonic()
    if out is not None and (why := env.unwritable(out)):
        raise ValueError(f"out: {why}")
    session = start(repeat, peers, timing_mode)
    if max_elements is None and not session.gpu and full:
        max_elements = CPU_FULL_MAX_ELEMENTS
        print("CPU: shapes with more than 2**24 elements are left out of the full grid (--max-elements)")
    if cases is None:
        cases = grid.select(grid.full_grid() if full else grid.quick_grid(session.gpu), regimes)
    names = [
        n for n in (baselines.GPU_PEERS if session.gpu else baselines.CPU_PEERS) if not peers or n in peers
    ]
    absent = _absent_peers(names, session)
    names = [n for n in names if n not in absent]
    session.left_out = tuple(absent)
    session.unsorted = session.gpu and bool(set(names) & set(pairs.UNSORTED))
    meta = env.metadata(session.gpu) | {
        "grid": "full" if full else "quick",
        "regimes": regimes or "all",
        "peers": names,
        "peers_left_out": absent,
        "copy_gbps": session.copy_bps / 1e9 if session.copy_bps else None,
        "cub": session.cub,
        "flashinfer": session.flashinfer,
        "timer": _timer_facts(session.timer),
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
            from . import plots as plotting

            files += plotting.plot(results, names, out, stem)
        print("wrote " + ", ".join(str(f) for f in files))
    return results


def _timer_facts(timer) -> dict:
    facts = {k: getattr(timer, k) for k in ("repeat", "min_repeat", "warmup", "budget")}
    if isinstance(timer, timing.GraphTimer):
        return (
            facts | {"graph_calls": timer.calls, "l2_flush": timer.flush} | _timer_facts(timer.base) | facts
        )
    facts["clock"] = "cuda events" if isinstance(timer, timing.GpuTimer) else "time.perf_counter"
    if isinstance(timer, timing.GpuTimer):
        facts["l2_flush_bytes"] = int(timer.flush.nbytes)
        facts["spin_ms"] = (
            timer.spin_ns / 1e6 if timer.spin is not None else None
        )  # None: host overhead timed
    return facts


def _positive(kind):
    """An argparse type: a number of ``kind`` greater than zero."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun} greater than 0, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected {noun} greater than 0, got {text}")
        return value

    noun = {int: "an integer", float: "a number"}[kind]
    parse.__name__ = f"positive {kind.__name__}"
    return parse


def _folder(text: str) -> pathlib.Path:
    """An argparse type: a folder path, not empty (``pathlib.Path("")`` is the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a folder, got an empty path {text!r}")
    return pathlib.Path(text)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's, without breaking lines inside hyphenated words (paths such as ./cutopk-results/)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def parser(prog: str = "python -m cutopk") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="cutopk's benchmark against torch, JAX, CuPy, CUB and NumPy (python -m cutopk tune: this GPU's dispatch table)",
        formatter_class=_HelpFormatter,
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the quick grid (default): a tour of every regime")
    size.add_argument("--full", action="store_true", help="the full grid (many minutes on a GPU)")
    p.add_argument("--regime", action="append", help="only these regimes (repeat or comma-separate): "
                   f"{', '.join(REGIME_NAMES)}")  # fmt: skip
    files = p.add_mutually_exclusive_group()
    files.add_argument("--out", type=_folder, help="write <grid>.json / .csv (and plots) into this folder")
    files.add_argument("--save", action="store_const", const=True, help="write into benchmarks/results/<date>-<device>/ "
                       "in a source checkout, else into ./cutopk-results/<date>-<device>/ (the default for a GPU "
                       "run from a source checkout)")  # fmt: skip
    files.add_argument("--no-save", dest="save", action="store_const", const=False, help="do not write files")
    p.add_argument("--plots", action="store_true", help="also write PNG plots (needs matplotlib), into the "
                   "folder of the other files: not with --no-save")  # fmt: skip
    p.add_argument(
        "--repeat", type=_positive(int), help="most timed repetitions per measurement (GPU 20, CPU 7)"
    )
    p.add_argument("--max-elements", type=_positive(int), help="leave out cases with more elements than this")
    p.add_argument("--time-limit", type=_positive(float), help="start no new case after this many seconds")
    p.add_argument("--peers", help="only these peers, comma-separated (e.g. torch,cupy); one that cannot run "
                   "here is an error")  # fmt: skip
    p.add_argument("--timing", choices=timing.TIMINGS, default="eager", help="eager calls (default), or "
                   "replays of a captured CUDA graph: graph (10 calls a replay), graph-flush (one, L2 flushed)")  # fmt: skip
    p.add_argument(
        "--list", action="store_true", help="print the grid's cases (as --max-elements leaves them) and exit"
    )
    return p


def cases_for(full: bool, regimes: list[str], gpu: bool, max_elements: int | None) -> tuple[list, list]:
    """The grid's cases for this run, split into those measured and those left out by
    ``max_elements`` (on the CPU the full grid leaves out more than 2**24 elements by default)."""
    cases = grid.select(grid.full_grid() if full else grid.quick_grid(gpu), regimes)
    if max_elements is None and full and not gpu:
        max_elements = CPU_FULL_MAX_ELEMENTS
    if max_elements is None:
        return cases, []
    return [c for c in cases if c.elements <= max_elements], [c for c in cases if c.elements > max_elements]


def main(argv: list[str] | None = None, prog: str = "python -m cutopk", **defaults) -> int:
    """The command line; ``defaults`` preset options (``benchmarks/run.py``: full grid, saved).

    Every option is checked before anything is measured: a mistake is argparse's usage error
    (exit status 2), never a traceback after minutes of benchmarking."""
    p = parser(prog)
    p.set_defaults(**defaults)
    args = p.parse_args(argv)
    gpu = env.gpu_unavailable() is None
    # --peers first, with or without --list: a peer that is unknown or cannot run here is an error.
    peers = tuple(name for name in (args.peers or "").split(",") if name)
    known = {*baselines.GPU_PEERS, *baselines.CPU_PEERS}
    if set(peers) - known:
        p.error(f"--peers: unknown {sorted(set(peers) - known)}; expected some of {sorted(known)}")
    for name in peers:
        if why := baselines.peer_unavailable(name, gpu):
            p.error(f"--peers: {name} cannot run here: {why}")
    full = args.full and not args.quick  # --quick wins over a preset --full
    save = False if args.out is not None else args.save  # --out wins over a preset --save
    regimes = [r for item in args.regime or [] for r in item.split(",") if r]
    if unknown := [r for r in regimes if r not in REGIME_NAMES]:
        p.error(f"--regime: unknown {', '.join(unknown)}; expected some of {', '.join(REGIME_NAMES)}")
    if args.regime is not None and not regimes:  # --regime '' would otherwise mean every regime
        p.error(f"--regime: expected some of {', '.join(REGIME_NAMES)}, got {','.join(args.regime)!r}")
    if args.timing != "eager" and not gpu:
        p.error(f"--timing {args.timing}: graph replay needs a GPU ({env.gpu_unavailable()})")
    if args.plots and args.out is None and save is False:
        p.error("--plots: no plot can be written with --no-save; give --out DIR or --save instead")
    if args.plots and (why := baselines.missing("matplotlib")):
        p.error(f"--plots: {why}; install it with pip install matplotlib (or the bench extra, cutopk[bench])")
    np.seterr(all="ignore")  # -inf - inf and NaN comparisons in the peers' routes are expected
    if args.list:
        cases, left_out = cases_for(full, regimes, gpu, args.max_elements)
        for c in cases:
            print(c.label())
        limit = args.max_elements or CPU_FULL_MAX_ELEMENTS  # left_out is empty without either
        more = f" ({len(left_out)} more left out by --max-elements {limit})" if left_out else ""
        print(f"{len(cases)} cases{more}")
        return 0
    if args.out is not None and (why := env.unwritable(args.out)):
        p.error(f"--out: {why}")
    if save and (why := env.unwritable(env.results_base())):
        p.error(f"--save: {why}")
    results = run(
        full, regimes, args.out, save, args.plots, args.repeat, args.max_elements, args.time_limit, peers,
        timing_mode=args.timing,
    )  # fmt: skip
    if not results:  # each case's reason is among the notes above
        print("no case was measured (see the notes above): nothing to compare", file=sys.stderr)
        return 1
    return 0
