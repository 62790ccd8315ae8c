"""The NumPy backend's thread pool: how many threads, and running independent blocks on them.

NumPy releases the GIL inside its partition, sort, comparison and reduction loops, so blocks of
rows (or column ranges of one long row) handed to a pool of Python threads run on several cores.
Every block writes its own part of the result and the merge order is fixed, so the answer is
identical for every thread count.

The thread count, in order of precedence:

1. the :func:`num_threads` context manager, for the code in its block only (a
   :mod:`contextvars` value: other threads, and other asyncio tasks, do not see it);
2. :func:`set_num_threads`, for the whole process;
3. the environment variable ``CUTOPK_NUM_THREADS`` (a positive integer; parsed again only when
   its text changes);
4. the CPUs this process may run on (``os.sched_getaffinity``, else ``os.cpu_count()``; asked
   once, and again in a forked child).

That count is a ceiling, bounded by the CPUs this process may use (a count above them is not
tried, and ``plan().params["threads_why"]`` says so): a call uses only as many threads as pay for themselves
(:func:`threads_for`), by a cost model whose constants are measured once per process, at the
first call that could split (:func:`costs`, some 10-20 ms): what handing a task to the pool and
waiting for it costs on this machine now, what one vectorised pass costs per element, what a
second thread adds, and what each NumPy call of a block costs while threads take turns at the
GIL (on a virtual machine whose idle cores sleep, the turns are most of the cost of splitting a
short call: see :func:`_measure`).

The compiled route (``compiled.c``) splits its calls itself, between the caller and a pool of
C threads of its own: its thread count comes from :mod:`cutopk.numpy.compiled_threads`, on that
pool's measured costs (a handover of a few microseconds, no GIL turns), and this pool runs none
of its blocks.

A split the model promises is timed on the first calls of its shape, against one thread, before
it is kept (:func:`trial`). The pool's workers are kept off the core of the thread that hands
them work (:func:`_keep_off`: their own affinity, on Linux): on a virtual machine whose idle
cores sleep, the scheduler would otherwise queue a woken worker on the caller's core.

``threadpoolctl.threadpool_limits`` does not govern this pool: threadpoolctl finds the pools it
controls by the shared libraries loaded in the process, and this pool is plain Python with no
library of its own to be found by (a controller registered for it would have to claim another
package's library file). Use ``CUTOPK_NUM_THREADS`` or :func:`num_threads` beside it.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import operator
import os
import statistics
import threading
import time
import types
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from .. import _environ

if TYPE_CHECKING:  # for the annotations: the probes import NumPy where they run
    import numpy

ENV_VAR = "CUTOPK_NUM_THREADS"

_lock = threading.Lock()
# "set": set_num_threads's process-wide count; "pool"/"size": the shared pool and its workers.
# "cpus": the CPU count, asked once; "env": the last CUTOPK_NUM_THREADS text and its value;
# "costs": the measured (task seconds, seconds per element-pass), see costs().
_state: dict = {
    "set": None,
    "pool": None,
    "size": 0,
    "cpus": None,
    "env": ("", None),
    "costs": None,
    "measured": None,
}
_UNSET = object()
# num_threads's count, scoped to its block: None there means "the environment / CPU count".
_scoped: contextvars.ContextVar = contextvars.ContextVar("cutopk_num_threads", default=_UNSET)


def _cpus() -> int:
    cpus = _state["cpus"]
    if cpus is None:
        try:
            cpus = max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            cpus = max(1, os.cpu_count() or 1)
        _state["cpus"] = cpus
    return cpus


# The pool's workers are kept off the core the caller runs on (Linux). On a virtual machine
# whose idle cores sleep (here: the haltpoll driver with guest_halt_poll_ns 0), the scheduler
# passes over a sleeping core when it wakes a worker and queues the worker on the caller's own
# core, where the two take turns: in some processes every split ran so (a second thread 1.0x as
# fast, measured), in others none. Only the pool's own threads are placed; the caller's thread
# and the rest of the process are left as they are.
_placement = threading.local()


def _caller_cpu() -> int | None:
    """The CPU this thread runs on now, where the workers can be kept off it; else None."""
    getcpu = _state.get("getcpu", 0)
    if getcpu == 0:  # not looked up yet
        getcpu = None
        if hasattr(os, "sched_setaffinity") and _cpus() > 1:
            try:
                import ctypes

                getcpu = ctypes.CDLL(None).sched_getcpu
                getcpu.restype = ctypes.c_int
                getcpu.argtypes = ()
            except (OSError, AttributeError):
                getcpu = None
        _state["getcpu"] = getcpu
    if getcpu is None:
        return None
    cpu = getcpu()
    return cpu if cpu >= 0 else None


def _keep_off(cpu: int | None) -> None:
    """Let this worker thread run on any of the process's CPUs but ``cpu`` (the caller's)."""
    if cpu is None or getattr(_placement, "off", None) == cpu:
        return
    _placement.off = cpu
    try:
        allowed = _placement.allowed = getattr(_placement, "allowed", None) or os.sched_getaffinity(0)
        if cpu in allowed and len(allowed) > 1:
            os.sched_setaffinity(0, allowed - {cpu})
    except OSError:
        pass


def _check(n: Any, source: str) -> int:  # Any: what is not an integer is refused here
    """``n`` as a positive int: anything ``operator.index`` accepts (NumPy integers too), not a
    bool. Not an integer (``2.0``, ``"2"``, a bool): ``TypeError``, as for ``k``; below 1:
    ``ValueError``."""
    if isinstance(n, bool) or "bool" in str(getattr(n, "dtype", "")):
        raise TypeError(f"{source}: expected a positive integer number of threads, got bool {n!r}")
    try:
        value = operator.index(n)
    except TypeError:
        raise TypeError(
            f"{source}: expected a positive integer number of threads, got {type(n).__name__} {n!r}"
        ) from None
    if value < 1:
        raise ValueError(f"{source}: expected a positive integer number of threads, got {n!r}")
    return value


def get_num_threads() -> int:
    """The number of threads the NumPy backend uses (see the module doc for the precedence).

    >>> from cutopk.numpy import threads
    >>> threads.get_num_threads() >= 1
    True
    """
    scoped = _scoped.get()
    if scoped is _UNSET:  # no num_threads block: the process-wide setting, if any
        scoped = _state["set"]
    if scoped is not None:
        return scoped
    env = _environ.get(ENV_VAR) or ""
    seen, value = _state["env"]
    if env != seen or value is None:
        if not env.strip():
            return _cpus()
        # A bad value raises on every call: never cached.
        value = _environ.integer(ENV_VAR, 0, minimum=1, expected="a positive integer number of threads")
        _state["env"] = (env, value)
    return value


def set_num_threads(n: int | None) -> int | None:
    """Set the NumPy backend's thread count for the whole process (``None``: back to the
    environment / CPU count); a :func:`num_threads` block still takes precedence inside it.

    ``n``: any positive integer ``operator.index`` accepts (``numpy.int64(2)`` too), not a bool.
    Returns the previous setting (``None`` when none was set), so it can be restored.
    """
    previous = _state["set"]
    _state["set"] = None if n is None else _check(n, "n")
    return previous


@contextlib.contextmanager
def num_threads(n: int | None) -> Iterator[None]:
    """Within the block, the NumPy backend uses ``n`` threads (``None``: the environment / CPU
    count), in this thread (or asyncio task) only: a :mod:`contextvars` value, so other threads'
    calls and the process-wide :func:`set_num_threads` setting are left as they are.

    >>> import numpy as np, cutopk
    >>> from cutopk.numpy import threads
    >>> with threads.num_threads(1):
    ...     cutopk.top_k(np.arange(5.0), 2).indices.tolist()
    [4, 3]
    """
    token = _scoped.set(None if n is None else _check(n, "n"))
    try:
        yield
    finally:
        _scoped.reset(token)


def _forget_pool() -> None:
    """In a forked child the parent's worker threads do not exist: start a new pool there (and
    ask the CPU count and the costs again: the child may run elsewhere). The pool's lock is new
    too: a thread that held it at the fork is not in the child, and would never release it."""
    global _lock
    _lock = threading.Lock()
    _state["pool"], _state["size"], _state["cpus"], _state["costs"] = None, 0, None, None
    _trials.clear()


# A split must promise at least this much: the predicted time on t threads at most this share
# of the one-thread time (a margin for the model's error: threads must never hurt). A smaller
# share keeps the large shapes from splitting where a second thread pays, a larger one would
# split the small ones where it does not (benchmarks/results/2026-11-25-cpu-numpy.md,
# benchmarks/results/2026-12-02-cpu-compiled-choice.md).
SPLIT_GAIN = 0.85
# The probes. The hand-over: a comparison and a count over this many float32 elements, a block
# on each of two threads. What a second thread adds (per family of routes) and what a NumPy call
# costs while two threads take turns at the GIL: blocks that write into memory of their own
# (fresh memory comes as new pages on some threads and not others: that would be measured
# instead), few long calls for the first, many short ones over the same elements for the second.
_PROBE_ELEMENTS = 1 << 16
_PROBE_RUNS = 5
_LONG_ELEMENTS, _LONG_CALLS = 1 << 19, 4  # some 25 us a call
_SHORT_ELEMENTS, _SHORT_CALLS = 1 << 15, 64  # some 1.5 us a call: the GIL's turns dominate
_BLOCK_ROWS, _BLOCK_COLS, _BLOCK_RUNS = 8192, 16, 5


def _probe_pass(a: numpy.ndarray) -> int:
    return int((a > 0.5).sum())


class _Block:
    """A probe block: its input and memory of its own for the results."""

    def __init__(self, np: types.ModuleType, elements: int, calls: int) -> None:
        self.a = np.linspace(0.0, 1.0, elements, dtype=np.float32)
        self.mask = np.empty(elements, dtype=bool)
        self.calls = calls
        self.rows = np.empty((_BLOCK_ROWS, _BLOCK_COLS), dtype=np.int64)


def _probe_scan(block: _Block) -> None:
    """Comparisons over the block, the other routes' staple."""
    import numpy as np

    for _ in range(block.calls):
        np.greater(block.a, 0.5, out=block.mask)


def _probe_sort(block: _Block) -> None:
    """A block of the short-row route: widened composites, sorted along short rows."""
    import numpy as np

    rows = block.rows
    np.copyto(rows, block.a[: rows.size].view(np.int32).reshape(rows.shape))
    rows <<= np.int64(4)
    rows |= np.arange(_BLOCK_COLS)
    rows.sort(axis=1)


# The probe of each family of routes (the short-row sorts scale differently from the rest).
PROBES = {"sort": _probe_sort, "scan": _probe_scan}


def _inline_and_pooled(
    fn: Callable, items: list, runs: int, stat: Callable[[list[float]], float] = statistics.median
) -> tuple[float, float]:
    """Seconds (``stat`` of ``runs``) of ``fn`` over ``items`` in this thread, and on two threads."""
    inline, pooled = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        for item in items:
            fn(item)
        t1 = time.perf_counter()
        run(fn, items, 2)
        t2 = time.perf_counter()
        inline.append(t1 - t0)
        pooled.append(t2 - t1)
    return stat(inline), stat(pooled)


def _measure() -> tuple[float, float, dict, float]:
    """``(task_s, element_s, efficiency, call_s)``: the extra seconds a task handed to the pool
    costs (hand-over, wake-up), the seconds of one vectorised pass per element, per family of
    routes (``PROBES``) what a second thread adds to the speed of blocks like the backend's
    (1: twice as fast; 0: nothing: a busy or a single core, memory bandwidth), and the extra
    seconds of one NumPy call of a block while two threads run side by side: each call gives
    up the GIL and takes it back, and the other thread may hold it then (on a virtual machine
    whose idle cores sleep, a thread waiting for the GIL is woken across cores: some 3 us a
    call, against 0.5 us for a short call's own cost). Medians of a few runs of small
    probes: some 10-20 ms in all."""
    import numpy as np

    a = np.linspace(0.0, 1.0, _PROBE_ELEMENTS, dtype=np.float32)
    run(_probe_pass, [a, a], 2)  # the pool's threads start here, outside the measurement
    one, two = _inline_and_pooled(_probe_pass, [a, a], _PROBE_RUNS)
    # Perfectly split, the two items take half the inline time: the rest is the task's cost.
    task_s = max(0.0, two - one / 2)
    efficiency = {}
    for family, probe in PROBES.items():
        # The fastest runs: the scheduler may leave the pool's worker on this thread's core for
        # a while (see TRIALS), and a split the model then promises is timed before it is kept.
        blocks = [_Block(np, _LONG_ELEMENTS, _LONG_CALLS) for _ in range(2)]
        one_b, two_b = _inline_and_pooled(probe, blocks, _BLOCK_RUNS, min)
        efficiency[family] = min(1.0, max(0.0, one_b / max(two_b - task_s, 1e-9) - 1.0))
    # The same elements in many short calls: what the calls add beyond the split work.
    blocks = [_Block(np, _SHORT_ELEMENTS, _SHORT_CALLS) for _ in range(2)]
    one_s, two_s = _inline_and_pooled(_probe_scan, blocks, _BLOCK_RUNS)
    split = one_s / (1 + efficiency["scan"])
    call_s = max(0.0, two_s - split - task_s) / _SHORT_CALLS
    return task_s, one / (2 * _PROBE_ELEMENTS), efficiency, call_s


def costs() -> tuple[float, float, dict, float]:
    """The cost model's ``(task_s, element_s, efficiency, call_s)``, measured at the first call (see
    :func:`_measure`)."""
    measured = _state["costs"]
    if measured is None:
        measured = _state["costs"] = _state["measured"] = _measure()
    return measured


# A split the model predicts to pay is timed on the calls themselves before it is kept: the
# model's probes cannot see everything a route's blocks meet (on a virtual machine whose idle
# cores sleep, the scheduler may wake a worker on the caller's own core, where the two take
# turns instead of running side by side: 20x100000 k=10 in two blocks ran 0.9x as fast on two
# threads as on one, where the probes promised 1.9x). The first ``2 * TRIALS`` calls of a shape
# run on one thread and on the model's count by turns; the split is kept where its fastest call
# took at most ``TRIAL_GAIN`` of the fastest one-thread call. Only with measured costs (costs
# set by hand, as tests do, are taken at their word).
TRIALS = 3
TRIAL_GAIN = 0.9
# A verdict holds for this many calls of its shape, then the trials run again: a disturbance
# during the trials (another process on the second core, a library's spinning threads) does not
# settle a shape for good, and a machine whose load changes is followed. The trials' cost: at
# most 3 calls in 259 on the slower count.
RETRIAL_CALLS = 256
TRIAL_MAX_SHAPES = 1024
# Shape key -> {thread count: [seconds, ...]} while tried, then [verdict, one-thread seconds,
# split seconds, calls left until the next trials].
_trials: dict = {}


def _verifying() -> bool:
    return _state["costs"] is not None and _state["costs"] is _state.get("measured")


def measured() -> bool:
    """Whether the model's costs were measured here (not set by hand: :func:`set_costs`, tests)."""
    return _verifying()


def verdict(key: Hashable, threads: int, ceiling: int, why: str) -> tuple[int, str]:
    """The model's ``(threads, why)`` (of ``ceiling`` threads) for a call of shape ``key``
    (hashable), as the trials of that shape have settled it; while they run, the model's
    count, marked as being measured."""
    if threads <= 1 or not _verifying():
        return threads, why
    entry = _trials.get(key)
    if isinstance(entry, list):
        t, figures = entry[0], entry[4]
        if t == threads:
            return threads, f"{why}; {figures}"
        return 1, f"1 of {ceiling}: splitting did not pay ({figures})"
    return threads, f"{why}; being measured on the calls themselves"


def trial(key: Hashable, threads: int) -> int:
    """The thread count the next call of shape ``key`` runs on while its trials last (see
    ``TRIALS``): one thread and ``threads`` by turns; 0 when they are over (or not wanted)."""
    if threads <= 1 or not _verifying():
        return 0
    entry = _trials.get(key)
    if isinstance(entry, list):  # settled: until its calls run out, then tried again
        entry[3] -= 1
        if entry[3] > 0:
            return 0
        entry = None
    if entry is None:
        if len(_trials) >= TRIAL_MAX_SHAPES:
            _trials.clear()
        entry = _trials[key] = {1: [], threads: []}
    return 1 if len(entry[1]) <= len(entry.get(threads, ())) else threads


def record(key: Hashable, threads: int, seconds: float) -> None:
    """One trial call of shape ``key`` took ``seconds`` on ``threads`` threads; the last one
    settles the shape's verdict: the split's count, or 1."""
    entry = _trials.get(key)
    if not isinstance(entry, dict) or threads not in entry:
        return
    entry[threads].append(seconds)
    split = max(entry)
    if all(len(times) >= TRIALS for times in entry.values()):
        one, best = min(entry[1]), min(entry[split])
        # The figures' text made once: verdict() runs on every call of the shape (some 3 us a call).
        figures = f"measured {best * 1e6:.0f} us on {split} threads against {one * 1e6:.0f} us on one"
        _trials[key] = [split if best <= TRIAL_GAIN * one else 1, one, best, RETRIAL_CALLS, figures]


def set_costs(
    task_s: float | None, element_s: float = 0.0, efficiency: float = 1.0, call_s: float = 0.0
) -> None:
    """Set the cost model's constants (tests, or a machine the probes misjudge), one efficiency
    for every family (see :func:`_measure` for their meaning); ``None``: measure again at the
    next call that could split."""
    _trials.clear()
    _state["costs"] = (
        None
        if task_s is None
        else (float(task_s), float(element_s), dict.fromkeys(PROBES, float(efficiency)), float(call_s))
    )


def usable_threads(threads: int) -> tuple[int, str]:
    """``threads`` bounded by the CPUs this process may use (more never run side by side: a
    count of 10**7 had the cost model try every count, seconds for every new shape), and a note
    for the plan's ``threads_why`` where the bound took effect ("" where not)."""
    cpus = _cpus()
    if threads <= cpus:
        return threads, ""
    return cpus, f" ({threads} asked, {cpus} CPUs usable)"


def threads_for(
    threads: int, element_passes: float, family: str = "scan", block_calls: int = 0, blocks: int = 0
) -> tuple[int, str]:
    """How many of ``threads`` a call with ``element_passes`` of work (elements times the
    vectorised passes over them) uses, and why, for a route of ``family`` (a key of
    ``PROBES``) in ``blocks`` blocks (0: one per thread) of ``block_calls`` NumPy calls each:
    the count ``t`` whose predicted time ``work / (1 + (t - 1) * efficiency) + task_s * (t - 1)
    + call_s * block_calls * ceil(blocks / t)`` (each thread's calls, every one of them a turn
    at the GIL beside the other threads) is least, provided that it is at most ``SPLIT_GAIN``
    of the one-thread time; else one thread."""
    if threads <= 1:
        return 1, "one thread asked for"
    measured = costs()
    key = (threads, element_passes, family, block_calls, blocks)
    known = _decisions.get(key)
    if known is not None and known[0] is measured:  # the same question under the same costs
        return known[1]
    if len(_decisions) >= TRIAL_MAX_SHAPES:
        _decisions.clear()
    answer = _decisions[key] = (measured, _threads_for(measured, *key))
    return answer[1]


_decisions: dict = {}  # threads_for's answers, with the costs they were worked out under


def _threads_for(
    measured: tuple, threads: int, element_passes: float, family: str, block_calls: int, blocks: int
) -> tuple[int, str]:
    task_s, element_s, efficiencies, call_s = measured
    # A float for every family (tests inject that), else the family's own.
    efficiency = efficiencies if isinstance(efficiencies, float) else efficiencies[family]
    work = element_passes * element_s
    best, best_t, best_calls = work, 1, 0
    usable, capped = usable_threads(threads)  # the loop stays short whatever count is asked for
    asked = f"{threads}{capped}"
    for t in range(2, usable + 1):
        calls = block_calls * -(-max(blocks, t) // t)
        predicted = work / (1 + (t - 1) * efficiency) + task_s * (t - 1) + call_s * calls
        if predicted < best:
            best, best_t, best_calls = predicted, t, calls
    t = best_t if best_t > 1 else 2
    calls = best_calls if best_t > 1 else block_calls * -(-max(blocks, t) // t)
    figures = (
        f"{work * 1e6:.0f} us of work, {task_s * 1e6:.0f} us per task handed over, "
        f"{calls} NumPy calls a thread at {call_s * 1e6:.1f} us each beside other threads, "
        f"a second thread {1 + efficiency:.2f}x as fast"
    )
    if best_t == 1 or best > SPLIT_GAIN * work:
        return 1, f"1 of {asked}: splitting would not pay ({figures})"
    return best_t, f"{best_t} of {asked}: predicted {best * 1e6:.0f} us ({figures})"


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _submit(fn: Callable, copies: int) -> None:
    """Queue ``copies`` calls of ``fn`` on the shared pool, grown first to ``copies`` workers.

    The pool is looked up, grown and given its work under one lock: a larger pool replaces the
    old one only between two callers' submissions, so no caller submits to a pool that another
    has shut down. The old pool still runs what was queued on it, then its threads exit."""
    with _lock:
        pool = _state["pool"]
        if pool is None or _state["size"] < copies:
            if pool is not None:
                pool.shutdown(wait=False)
            pool = _state["pool"] = ThreadPoolExecutor(copies, thread_name_prefix="cutopk")
            _state["size"] = copies
        for _ in range(copies):
            pool.submit(fn)


def run(fn: Callable, items: Sequence | numpy.ndarray, threads: int) -> list:
    """``[fn(item) for item in items]``, on up to ``threads`` threads, this one included.

    The items are handed out one at a time to whichever thread is free (blocks cost unequal
    time: ties, NaNs). The call returns when every item is done, not when every helper has
    started: on a busy machine a helper the scheduler wakes late finds nothing left and the
    caller does not wait for it. The first exception reaches the caller. ``fn`` must not call
    :func:`run` itself (a worker waiting on its own pool could wait forever).
    """
    n = len(items)
    workers = min(threads, n)
    if workers <= 1:
        return [fn(item) for item in items]
    results: list = [None] * n
    claim, completed = itertools.count(), itertools.count(1)  # next() is atomic under the GIL
    finished = threading.Event()
    errors: list = []

    here = _caller_cpu()

    def helper() -> None:
        _keep_off(here)
        work()

    def work() -> None:
        while True:  # claim never runs out: the loop ends at the last item or the first error
            i = next(claim)
            if i >= n or errors:
                return
            try:
                results[i] = fn(items[i])
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                errors.append(exc)
                finished.set()
                return
            if next(completed) == n:
                finished.set()

    _submit(helper, workers - 1)
    work()
    finished.wait()
    if errors:
        raise errors[0]
    return results
