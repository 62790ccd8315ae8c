"""One lent GPU's 10-minute command: the steps of issue 50, in order, each bounded, each writing its file.

``bash tools/gpu_session.sh lease`` (``benchmarks/lease.py``) runs :data:`STEPS` and then the
scoreboard with the time left, in at most :data:`BUDGET_S` seconds, and writes at most
:data:`MAX_FILES` files under ``$OUT`` (the device tool returns no more):

====  =====================  =========================================================================
step  file                   what
====  =====================  =========================================================================
M0    lease.log              facts: nvidia-smi (read only), SMs, shared memory, the clusters that fit
M1    M1.log                 the gpu-marked tests of the kernels never run on a GPU, then
                             compute-sanitizer memcheck and racecheck on two shapes of each
M2    M2.csv                 the counting primitives in cycles per warp operation (clock64)
M3    M3.csv                 phase clocks: cycles per named step of the on-chip families
M4    M3.csv                 A/B variants (compile-time switches) on M3's shapes, rows beside M3's
M5    M5.csv                 ncu (``--clock-control none``), named metrics, six kernels
M6    M6.csv                 forced families on 26 shapes, eager and graph replay (tune's measure),
                             the peers beside them: the forced-family CSV make_dispatch_table reads
M7    M7.csv                 host time per eager call (calls per second, no spin kernel)
SB    scoreboard.tar.gz      benchmarks/scoreboard.py with the time left
====  =====================  =========================================================================

``lease.log`` is the driver's own log (the shell script tees it): the plan, every step's start,
exit and seconds, M0's facts, and what the other steps print (their data goes to their files, each
written as the step goes, so a step ended at its limit keeps what it measured).

**Bounds.** Each command runs in a process group of its own under a limit (its step's ``limit_s``,
or less when the lease's time is short); at the limit the group is killed (SIGTERM, then SIGKILL)
and the next step starts, so a hang costs one step. Inside the Python steps the benchmark watchdog
(:mod:`.watchdog`, ``$CUTOPK_BENCH_STEP_LIMIT``, here :data:`WATCHDOG_S`) ends a measurement that
does not answer, naming it. A process stuck in the driver past SIGKILL is left behind after
:data:`ABANDON_S` seconds.

**Estimates.** Each step's ``estimate_s`` carries its basis: the last GPU run's logs where the step
(or the tool it runs) ran before, else a stated estimate. The dry run prints them and fails when
they sum to more than :data:`BUDGET_S` with the scoreboard's minimum (:data:`SCOREBOARD_MIN_S`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shlex
import signal
import subprocess
import time
from typing import TYPE_CHECKING

from cutopk._demo import env

if TYPE_CHECKING:
    from cutopk.cuda import dispatch as dispatch_types

BUDGET_S = 540.0  # 9 minutes of the 10 a command may take: the files still come back
MAX_FILES = 8  # the device tool returns at most 8 files from $OUT
SCOREBOARD_MIN_S = 60.0  # the scoreboard runs only with at least this much left
WATCHDOG_S = 30.0  # one measurement inside a Python step (a GPU call that never returns)
ABANDON_S = 10.0  # after SIGKILL, how long to wait for a process stuck in the driver
LOG = "lease.log"
H200_LOGS = "benchmarks/results/2026-11-25-nvidia-h200/logs"
# The files of the never-run kernels' tests (cluster, split, streaming, block_row and the ordering
# step resident now takes, pass 1's streaming filter, large K picked from the candidates, the order
# tiles) and of the device facts they depend on.
NEVER_RUN_TESTS = (
    "tests/gpu/test_cluster.py",
    "tests/gpu/test_cluster_shape_refused.py",
    "tests/gpu/test_split.py",
    "tests/gpu/test_streaming.py",
    "tests/gpu/test_block_row.py",
    "tests/gpu/test_order_winners.py",
    "tests/gpu/test_multiblock_filter.py",
    "tests/gpu/test_multiblock_select.py",
    "tests/gpu/test_block_order.py",
    "tests/gpu/test_device_facts.py",
)
PYTEST = ("python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", "--tb=short")
# ncu's sections for what the issue names (issue-active: SchedulerStats; warps active: Occupancy;
# stall reasons: WarpStateStats; instructions by opcode, MATCH and ATOMS among them: InstructionStats'
# sass__inst_executed_per_opcode; shared bank conflicts: MemoryWorkloadAnalysis_Tables; DRAM
# throughput: SpeedOfLight), and the same facts as single metrics, for the CSV's columns. A section
# name ncu does not know only warns; an unknown metric would end the run, so these are the ones
# its own sections use.
NCU_SECTIONS = (
    "SpeedOfLight",
    "SchedulerStats",
    "Occupancy",
    "WarpStateStats",
    "InstructionStats",
    "MemoryWorkloadAnalysis_Tables",
)
NCU_METRICS = (
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__sass_inst_executed_op_shared_atom.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__time_duration.sum",
)


@dataclasses.dataclass(frozen=True)
class LeaseStep:
    """One step: its commands run in order, each argv's ``{out}``, ``{file}`` and ``{left}`` filled
    in (the output folder, the step's file, the seconds the command may take)."""

    name: str
    title: str
    file: str
    estimate_s: float
    basis: str
    commands: tuple[tuple[str, ...], ...]
    limit_s: float
    stdout_to_file: bool = False  # the command's output is the step's file (pytest, ncu's CSV)
    watchdog_s: float | None = (
        WATCHDOG_S  # $CUTOPK_BENCH_STEP_LIMIT for its Python (None: the benchmark's own)
    )

    def argv(self, command: tuple[str, ...], out: str, left: float) -> list[str]:
        values = {"out": out, "file": os.path.join(out, self.file), "left": f"{left:.0f}"}
        return [part.format(**values) for part in command]


def logged_seconds(name: str) -> list[float]:
    """The seconds of each pytest summary line ("... passed ... in 44.63s") in a log of the last GPU
    run (:data:`H200_LOGS`); empty when the log is not there."""
    path = env.REPO / H200_LOGS / name
    if not path.is_file():
        return []
    return [float(m) for m in re.findall(r"\bpassed\b.* in ([0-9.]+)s\b", path.read_text())]


def _m1_estimate() -> tuple[float, str]:
    """M1's seconds: the whole -m gpu suite's time in the last GPU run (these files are a part of it,
    but here in 8 workers, not 16), and the sanitizers' per-process times there."""
    suite = logged_seconds("tests-after-fixes.log")[:1] or [45.0]
    memcheck = logged_seconds("ties-fix-memcheck.log")[:1] or [2.1]
    racecheck = logged_seconds("ties-fix-racecheck.log")[:1] or [23.1]
    # the sanitizers' target: one process, 8 launches and their compiles (found in CuPy's cache)
    total = suite[0] + (10 + memcheck[0]) + (10 + racecheck[0])
    basis = (
        f"{H200_LOGS}: the whole -m gpu suite {suite[0]:g} s on 16 workers (tests-after-fixes.log; these "
        f"7 files are a part of it, on 8 workers), memcheck {memcheck[0]:g} s and racecheck {racecheck[0]:g} s "
        f"of 16 multiblock tests (ties-fix-*.log), each + 10 s for a process start under the sanitizer"
    )
    return total, basis


def _m1_commands() -> tuple[tuple[str, ...], ...]:
    # 8 workers where pytest-xdist is there (the lent machines' image has it): NVRTC's compiles,
    # not the GPU, bound the tests; without it, one process (an unknown -n would end pytest)
    workers = ("-n", "8") if importlib.util.find_spec("xdist") else ()
    # CuPy's pool off: each allocation its own cudaMalloc, so an out-of-bounds access leaves it
    # and a watchdog for each launch that allows for the sanitizer's slowdown (racecheck's is large)
    sanitize = (
        "env",
        "CUTOPK_CUPY_NO_POOL=1",
        "CUTOPK_BENCH_STEP_LIMIT=90",
        "compute-sanitizer",
        "--error-exitcode",
        "99",
        "--tool",
    )
    target = ("python3", "benchmarks/gpu/families.py", "check")
    return (
        (*PYTEST, *workers, "-m", "gpu", *NEVER_RUN_TESTS),
        (*sanitize, "memcheck", *target),
        (*sanitize, "racecheck", "--racecheck-report", "hazard", *target),
    )


def _m6_estimate() -> tuple[float, str]:
    """M6's seconds from the scoreboard's cost model (the 2026-11-25 H200 run's logged phases): a
    route timed one way costs a sixth of a case (the fit's cases timed about 6 routes each, their
    input and its checks included), and M6 times each route eagerly and under graph replay."""
    from cutopk.cuda import dispatch

    from . import scoreboard as sb

    model = sb.fit_cost()
    routes = 0
    seconds = 0.0
    shapes = forced_shapes()
    for rows, n, k, dtype in shapes:
        families = [
            f
            for f in dispatch.FAMILIES
            if dispatch.why_not(f, n, k, 2 if dtype != "float32" else 4, hopper(), rows) is None
        ]
        count = len(families) + len(FORCED_PEERS)
        routes += count
        seconds += (model.per_case + model.per_gelement * rows * n / 1e9) * count * len(FORCED_TIMINGS) / 6
    total = model.start + sb.NVRTC_S + seconds
    basis = (
        f"{len(shapes)} shapes x {routes} routes (families and peers), each timed {' and '.join(FORCED_TIMINGS)} "
        f"(tune's timer: at most 10 repetitions in 0.2 s), a sixth of a case each at the scoreboard's cost model "
        f"({model.source}: {model.start:.1f} s start, {model.per_case:.2f} s a case of ~6 routes, "
        f"{model.per_gelement:.1f} s per 1e9 elements) + {sb.NVRTC_S:g} s of cold NVRTC compiles"
    )
    return total, basis


def hopper() -> dispatch_types.Device:
    """An H100's or H200's facts as the dispatcher sees them (132 SMs, 227 KB of opt-in shared memory
    per block, clusters): what the dry runs plan with, for the lent sm_90 machines."""
    from cutopk.cuda import dispatch

    return dispatch.Device(sm_count=132, shared_bytes=dispatch.shared_limit(48 << 10, 232448), clusters=True)


FORCED_PEERS = ("torch", "flashinfer", "flashinfer-unsorted", "cub")
FORCED_TIMINGS = ("eager", "graph")  # M6's: python -m cutopk tune --timing eager,graph


def forced_shapes() -> list[tuple[int, int, int, str]]:
    """M6's shapes, ``python -m cutopk tune``'s (``tune.SHAPES``): (rows, n, k, dtype). 1/16/128/256
    rows x 32000/131072/262144 x k 50/1024 in float32, then the indexer's 16 x 65536 bfloat16
    k=2048 and 1 x 8192 k=512."""
    from cutopk._demo import tune

    return [(c.rows, c.n, c.k, c.dtype) for c in tune.SHAPES]


def _ncu_command() -> tuple[str, ...]:
    """M5: ncu over families.py's profiled window (cudaProfilerStart/Stop), clocks left alone."""
    options = ("--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "raw")
    sections = tuple(a for name in NCU_SECTIONS for a in ("--section", name))
    target = ("python3", "benchmarks/gpu/families.py", "profile")
    return ("ncu", *options, *sections, "--metrics", ",".join(NCU_METRICS), *target)


def steps() -> tuple[LeaseStep, ...]:
    """The lease's steps M0-M7 (the scoreboard comes after, with the time left)."""
    m1_s, m1_basis = _m1_estimate()
    m6_s, m6_basis = _m6_estimate()
    return (
        LeaseStep(
            "M0",
            "facts",
            LOG,
            10.0,
            "stated: nvidia-smi and one Python process (CuPy import, device attributes, 4 occupancy queries)",
            (("python3", "benchmarks/gpu/facts.py"),),
            30.0,
        ),
        LeaseStep(
            "M1",
            "correctness of the never-run kernels",
            "M1.log",
            m1_s,
            m1_basis,
            _m1_commands(),
            200.0,
            stdout_to_file=True,
        ),
        LeaseStep(
            "M2",
            "counting primitives (clock64)",
            "M2.csv",
            15.0,
            "stated: one NVRTC compile of benchmarks/gpu/count_primitives.cu (about 2 s, as a family's "
            "module, benchmarks/results/2026-11-25-cpu-compile-cost.md) and 67 launches of about 1 ms "
            "(1024 operations a warp)",
            (("python3", "benchmarks/gpu/count_primitives.py", "--out", "{file}"),),
            60.0,
        ),
        LeaseStep(
            "M3",
            "phase clocks of the on-chip families",
            "M3.csv",
            40.0,
            "stated: 4 families' modules compiled again with CUTOPK_PHASE_CLOCKS (2.3-2.8 s each per dtype, "
            "2 dtypes, 2026-11-25-cpu-compile-cost.md) and 6 shapes x 3-4 families, 6 launches each",
            (("python3", "benchmarks/gpu/phase_clocks.py", "--out", "{file}"),),
            90.0,
        ),
        LeaseStep(
            "M4",
            "A/B variants on M3's shapes",
            "M3.csv",
            50.0,
            "stated: as M3 (40 s) for the match A/B (CUTOPK_COUNT_WITH_MATCH, the count-atomics branch's "
            "switch: the kernels honour it); the others not built",
            (("python3", "benchmarks/gpu/phase_clocks.py", "--variants", "--append", "--out", "{file}"),),
            90.0,
        ),
        LeaseStep(
            "M5",
            "ncu, named metrics, six kernels",
            "M5.csv",
            75.0,
            "stated: ncu's start (about 10 s) plus one replayed launch per kernel (six, about 40 passes each "
            "for these metrics, about 1 s a kernel) and the compiles; not run before (issue 39 item 5)",
            (_ncu_command(),),
            150.0,
            stdout_to_file=True,
        ),
        LeaseStep(
            "M6",
            "forced-family table",
            "M6.csv",
            m6_s,
            m6_basis,
            (
                (
                    "python3",
                    "benchmarks/gpu/families.py",
                    "table",
                    "--out",
                    "{file}",
                    "--time-limit",
                    "{left}",
                ),
            ),
            m6_s + 60.0,
        ),
        LeaseStep(
            "M7",
            "host time per eager call",
            "M7.csv",
            20.0,
            "stated: 2 shapes x 5 routes x 2000 calls of 15-100 us (the H100 run's floor: 30 us a call) "
            "plus the imports",
            (("python3", "benchmarks/gpu/families.py", "host", "--out", "{file}"),),
            60.0,
        ),
    )


def scoreboard_step(left: float) -> LeaseStep:
    """The scoreboard with ``left`` seconds: its cases get all but 30 s, then its files go into one
    archive (its folder is three levels below $OUT otherwise)."""
    cases = max(left - 30.0, 10.0)
    # its own timeout leaves 15 s for the archive; the folder goes once packed (files in it would
    # come back too, and count)
    run = (
        "timeout",
        f"{max(left - 15.0, 10.0):.0f}",
        "python3",
        "benchmarks/scoreboard.py",
        "--out",
        "{out}/scoreboard",
        "--time-limit",
        f"{cases:.0f}",
    )
    pack = ("tar", "-czf", "{out}/scoreboard.tar.gz", "-C", "{out}", "scoreboard")
    remove = ("rm", "-r", "{out}/scoreboard")
    return LeaseStep(
        "SB",
        "scoreboard with the time left",
        "scoreboard.tar.gz",
        left,
        f"the time left, at least {SCOREBOARD_MIN_S:g} s; its cases by its own cost model "
        "(benchmarks/scoreboard.py --dry-run lists them)",
        (run, pack, remove),
        left,
        watchdog_s=None,  # its own watchdog's 60 s: its cases are longer than one step of M0-M7
    )


def files(all_steps: tuple[LeaseStep, ...]) -> list[str]:
    """The files the lease writes under $OUT, in order, each once."""
    names = [LOG]
    for s in (*all_steps, scoreboard_step(SCOREBOARD_MIN_S)):
        if s.file not in names:
            names.append(s.file)
    return names


def check_plan(all_steps: tuple[LeaseStep, ...], budget: float = BUDGET_S) -> list[str]:
    """What is wrong with the plan (empty: nothing): the estimates with the scoreboard's minimum
    over ``budget``, more files than the device tool returns."""
    problems = []
    total = sum(s.estimate_s for s in all_steps) + SCOREBOARD_MIN_S
    if total > budget:
        problems.append(
            f"the estimates sum to {total:.0f} s with the scoreboard's minimum, over {budget:.0f} s"
        )
    if len(files(all_steps)) > MAX_FILES:
        problems.append(f"{len(files(all_steps))} files, the device tool returns {MAX_FILES}")
    return problems


def print_plan(all_steps: tuple[LeaseStep, ...], out: str, budget: float = BUDGET_S) -> None:
    total = sum(s.estimate_s for s in all_steps)
    print(f"lease plan: {len(all_steps)} steps then the scoreboard, {budget:.0f} s in all, files in {out}")
    for s in (*all_steps, scoreboard_step(budget - total)):
        print(
            f"--- {s.name} {s.title}: estimate {s.estimate_s:.0f} s, limit {s.limit_s:.0f} s, writes {s.file}"
        )
        print(f"    basis: {s.basis}")
        for command in s.commands:
            line = shlex.join(s.argv(command, out, s.limit_s))
            print(f"    $ {line}{' > ' + os.path.join(out, s.file) if s.stdout_to_file else ''}")
    print(
        f"estimates: M0-M7 {total:.0f} s, the scoreboard the {budget - total:.0f} s left "
        f"(at least {SCOREBOARD_MIN_S:g}): {total + max(budget - total, SCOREBOARD_MIN_S):.0f} s "
        f"of {budget:.0f}"
    )
    names = files(all_steps)
    print(f"files ({len(names)}, at most {MAX_FILES}): {', '.join(names)}")


def run_bounded(argv: list[str], limit_s: float, stdout=None, watchdog_s: float | None = None) -> int:
    """``argv`` in a process group of its own, killed at ``limit_s``, its output into the file
    ``stdout`` (None: this process's), with ``$CUTOPK_BENCH_STEP_LIMIT`` set to ``watchdog_s`` unless
    the caller's environment sets it: its exit status, 124 when it was ended at the limit (as
    timeout(1) says), 127 when the program is missing."""
    env = dict(os.environ)
    if watchdog_s is not None:
        env.setdefault("CUTOPK_BENCH_STEP_LIMIT", f"{watchdog_s:g}")
    try:
        # into the step's file both streams; else this process's own (the lease's log)
        proc = subprocess.Popen(
            argv,
            stdout=stdout,
            stderr=None if stdout is None else subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError:
        print(f"{argv[0]}: not found", flush=True)
        return 127
    try:
        return proc.wait(timeout=max(limit_s, 1.0))
    except subprocess.TimeoutExpired:
        pass
    print(
        f"\n{shlex.join(argv[:4])} ...: no end in {limit_s:.0f} s, ended (the next step starts)", flush=True
    )
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, ABANDON_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    return 124


def run(out: str, budget: float = BUDGET_S) -> int:
    """Every step in order within ``budget`` seconds; 0 when every command exited 0."""
    t0 = time.monotonic()
    all_steps = steps()
    print_plan(all_steps, out, budget)
    status = 0
    done: list[tuple[str, str, float, float]] = []
    later = {s.name: sum(x.estimate_s for x in all_steps[i + 1 :]) for i, s in enumerate(all_steps)}
    for s in all_steps:
        # a step may overrun its estimate, not into the later steps' time or the scoreboard's minimum
        room = budget - (time.monotonic() - t0) - SCOREBOARD_MIN_S - 0.5 * later[s.name]
        status |= _run_step(s, out, min(s.limit_s, room), t0, done)
    left = budget - (time.monotonic() - t0)
    if left >= SCOREBOARD_MIN_S:
        status |= _run_step(scoreboard_step(left), out, left, t0, done)
    else:
        print(f"=== SB skipped: {left:.0f} s left, under {SCOREBOARD_MIN_S:g} s", flush=True)
        done.append(("SB", "skipped", 0.0, 0.0))
    # last, so that the device tool's output tail holds it
    print("step  exit     seconds  estimate")
    for name, rc, took, estimate in done:
        print(f"{name:<5} {rc:<8} {took:7.0f}  {estimate:8.0f}")
    print(f"lease: {time.monotonic() - t0:.0f} s of {budget:.0f}, exit {status}", flush=True)
    return status


def _run_step(
    s: LeaseStep, out: str, limit: float, t0: float, done: list[tuple[str, str, float, float]]
) -> int:
    """Runs the step's commands within ``limit`` seconds; appends (name, exit, seconds, estimate) to ``done``."""
    if limit < 5:
        print(f"=== {s.name} skipped: {limit:.0f} s left for it", flush=True)
        done.append((s.name, "skipped", 0.0, s.estimate_s))
        return 1
    print(f"=== {s.name} {s.title} ({time.monotonic() - t0:.0f} s in, at most {limit:.0f} s)", flush=True)
    start, rc = time.monotonic(), 0
    for command in s.commands:
        left = limit - (time.monotonic() - start)
        argv = s.argv(command, out, left)
        print(f"$ {shlex.join(argv)}", flush=True)
        if s.stdout_to_file:
            with open(os.path.join(out, s.file), "a") as f:
                f.write(f"$ {shlex.join(argv)}\n")
                f.flush()
                code = run_bounded(argv, left, f, s.watchdog_s)
        else:
            code = run_bounded(argv, left, None, s.watchdog_s)
        rc = rc or code
        print(f"  exit {code}", flush=True)
    took = time.monotonic() - start
    print(f"=== {s.name}: exit {rc}, {took:.0f} s (estimate {s.estimate_s:.0f} s)", flush=True)
    done.append((s.name, "124 limit" if rc == 124 else str(rc), took, s.estimate_s))
    return 1 if rc else 0
