"""The NumPy backend on several threads, and its long-row path (column ranges merged exactly):
identical to the reference for every thread count, with ties across range boundaries."""

from __future__ import annotations

import ctypes
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import time
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.reference import check_top_k

import cutopk
from cutopk.numpy import backend as _numpy_backend
from cutopk.numpy import exact as _numpy_exact
from cutopk.numpy import long_rows as _long_rows
from cutopk.numpy import pivot_filter as _numpy_pivot_filter
from cutopk.numpy import routes as _numpy_routes
from cutopk.numpy import threads as _threads

THREADS = (1, 2, 3, 7)


@pytest.fixture
def tiny_ranges(monkeypatch):
    """Long-row path for rows of 64+ columns, ranges of 37 columns, few candidates per range:
    every step (pivot, candidates, radix, ties across ranges) runs on small inputs."""
    monkeypatch.setattr(_long_rows, "LONG_ROW_MIN_N", 64)
    monkeypatch.setattr(_long_rows, "RANGE_ELEMENTS", 37)
    monkeypatch.setattr(_long_rows, "CANDIDATE_SHARE", 1 / 8)
    monkeypatch.setattr(_numpy_routes, "BLOCK_BYTES", 64)  # many row blocks too
    monkeypatch.setattr(_numpy_routes, "FILTER_BLOCK_BYTES", 64)
    monkeypatch.setattr(_numpy_routes, "PARALLEL_MIN_ELEMENTS", 1)  # threads even on tiny inputs
    monkeypatch.setitem(_threads._state, "costs", (0.0, 1.0, 1.0, 0.0))  # splitting always pays


@pytest.mark.parametrize("threads", THREADS)
def test_row_blocks_on_threads(threads, monkeypatch):
    monkeypatch.setattr(_numpy_routes, "BLOCK_BYTES", 2048)
    monkeypatch.setattr(_numpy_routes, "FILTER_BLOCK_BYTES", 2048)
    monkeypatch.setattr(_numpy_routes, "PARALLEL_MIN_ELEMENTS", 1)
    monkeypatch.setitem(_threads._state, "costs", (0.0, 1.0, 1.0, 0.0))  # splitting always pays
    rng = np.random.default_rng(threads)
    x = rng.integers(0, 5, (301, 700)).astype(np.float32)
    x[::7, ::3] = np.nan
    with _threads.num_threads(threads):
        for k in (1, 3, 50, 700):
            check_top_k(x, k, nan="largest")
            check_top_k(x, k, mode="smallest", sorted="index")


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("dtype", (np.float32, np.float16, np.int8, np.uint64, np.float64))
def test_long_rows_on_threads(threads, dtype, tiny_ranges):
    rng = np.random.default_rng(threads)
    n = 1000
    rows = {
        "uniform": rng.integers(0, 1000, n),
        "equal": np.full(n, 3),
        "sparse": np.where(rng.random(n) < 0.02, rng.integers(1, 100, n), 0),
        "two values": rng.integers(0, 2, n),
    }
    with _threads.num_threads(threads):
        for row in rows.values():
            x = row.astype(dtype)
            for k in (1, 5, 36, 37, 38, 74, 500, 999, 1000):
                for mode in ("largest", "smallest"):
                    check_top_k(x, k, mode=mode)
                check_top_k(x, k, sorted="index")


@pytest.mark.parametrize("threads", THREADS)
def test_long_rows_with_nans(threads, tiny_ranges):
    rng = np.random.default_rng(8)
    x = rng.standard_normal(2000).astype(np.float32)
    x[rng.random(2000) < 0.5] = np.nan
    x[::5] = -0.0
    x[1::5] = 0.0
    with _threads.num_threads(threads):
        for k in (1, 10, 400, 1000, 1999):
            for mode in ("largest", "smallest"):
                for nan in ("last", "largest"):
                    check_top_k(x, k, mode=mode, nan=nan)


def test_ties_across_range_boundaries(tiny_ranges):
    # Ranges of 37: the tied value sits on both sides of every boundary; the first ones win.
    x = np.zeros(370, dtype=np.int16)
    x[30:44] = 5  # ranges 0 and 1
    x[70:80] = 5  # ranges 1 and 2
    x[200] = 9
    for threads in THREADS:
        with _threads.num_threads(threads):
            r = cutopk.top_k(x, 12)
            assert r.indices.tolist() == [200, *range(30, 41)]
            r = cutopk.top_k(x, 20, sorted="index")
            assert r.indices.tolist() == [*range(30, 44), *range(70, 75), 200]


def test_radix_select_runs_and_is_exact(tiny_ranges, monkeypatch):
    # A pivot that is never right forces the radix select on every call.
    calls = []
    original = _long_rows._radix_kth_key

    def spy(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(_long_rows, "_radix_kth_key", spy)

    def top_key(r, k):  # no key is above it: the pivot falls short
        return np.iinfo(r.key_t).max

    monkeypatch.setattr(_long_rows, "_pivot_key", top_key)
    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.int64, np.uint8, np.float16):
        x = rng.integers(0, 50, 3000).astype(dtype)
        for k in (1, 100, 2999):
            check_top_k(x, k)
            check_top_k(x, k, mode="smallest")
    assert calls


def test_zero_stride_row_is_read_in_ranges(tiny_ranges):
    x = np.broadcast_to(np.float32(2), (3, 5000))
    r = cutopk.top_k(x, 4)
    assert r.indices.tolist() == [[0, 1, 2, 3]] * 3


def test_thread_count_settings(monkeypatch):
    monkeypatch.delenv(_threads.ENV_VAR, raising=False)
    assert _threads.get_num_threads() >= 1
    monkeypatch.setenv(_threads.ENV_VAR, "3")
    assert _threads.get_num_threads() == 3
    with _threads.num_threads(5):
        assert _threads.get_num_threads() == 5
    assert _threads.get_num_threads() == 3
    monkeypatch.setenv(_threads.ENV_VAR, "zero")
    with pytest.raises(ValueError, match="CUTOPK_NUM_THREADS: expected a positive integer"):
        _threads.get_num_threads()
    with pytest.raises(ValueError, match="n: expected a positive integer"):
        _threads.set_num_threads(0)


def test_an_exception_in_a_worker_reaches_the_caller():
    def fn(i):
        if i == 5:
            raise KeyError(i)
        return i

    with pytest.raises(KeyError):
        _threads.run(fn, range(9), 3)
    assert _threads.run(lambda i: i * i, range(9), 4) == [i * i for i in range(9)]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 400),
    rows=st.integers(1, 9),
    k_share=st.floats(0, 1),
    levels=st.sampled_from([2, 5, 1000]),
    dtype=st.sampled_from(["float32", "float16", "int16", "uint32", "float64"]),
    mode=st.sampled_from(["largest", "smallest"]),
    nan=st.sampled_from(["last", "largest"]),
    order=st.sampled_from([True, "index", False]),
)
def test_identical_for_every_thread_count(seed, n, rows, k_share, levels, dtype, mode, nan, order):
    """Random shapes and values (few levels: heavy ties), forced through the long-row path with
    small ranges as well as row blocks: every thread count gives the reference's answer."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, levels, (rows, n)).astype(dtype)
    if dtype.startswith("float"):
        x[rng.random(x.shape) < 0.1] = np.nan
    k = round(k_share * n)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_long_rows, "LONG_ROW_MIN_N", 50)
        mp.setattr(_long_rows, "RANGE_ELEMENTS", 23)
        mp.setattr(_numpy_routes, "BLOCK_BYTES", 256)
        mp.setattr(_numpy_routes, "FILTER_BLOCK_BYTES", 512)
        mp.setattr(_numpy_routes, "PARALLEL_MIN_ELEMENTS", 1)
        mp.setitem(_threads._state, "costs", (0.0, 1.0, 1.0, 0.0))  # splitting always pays
        for threads in THREADS:
            with _threads.num_threads(threads):
                check_top_k(x, k, mode=mode, nan=nan, sorted=order)


@pytest.mark.parametrize("dtype", ("float32", "float64", "int8", "int32", "uint16", "int64", "uint64"))
@pytest.mark.parametrize("mode", ("largest", "smallest"))
def test_value_of_a_key_round_trips(dtype, mode):
    """The long-row path compares elements with the value whose key is the pivot: that value's
    key must be the pivot itself, for every dtype and mode (NaN keys have no value)."""
    from cutopk._request.keys import preference_keys

    rng = np.random.default_rng(1)
    info = np.iinfo(dtype) if "int" in dtype else None
    if info is not None:
        x = rng.integers(info.min, info.max, 500, dtype=dtype, endpoint=True)
        x[:2] = info.min, info.max
    else:
        x = rng.standard_normal(500).astype(dtype) * 1e30
        x[:6] = [-0.0, 0.0, np.inf, -np.inf, np.finfo(dtype).tiny / 4, np.nan]
    r = _long_rows._Row(x, mode == "largest", False)
    keys = preference_keys(x, mode == "largest", False)
    for key, v in zip(keys, x, strict=True):
        got = r.value_of(key)
        if info is None and np.isnan(v):
            assert got is None
            continue
        assert preference_keys(np.array([got], dtype=dtype), mode == "largest", False)[0] == key
        assert got == v


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(512, 2000),
    cols=st.integers(1, 40),
    k=st.integers(1, 32),
    levels=st.sampled_from([2, 30, 10**6]),
    nan=st.sampled_from(["last", "largest"]),
    mode=st.sampled_from(["largest", "smallest"]),
)
def test_outer_axis_identical_for_every_thread_count(seed, n, cols, k, levels, nan, mode):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, levels, (n, cols)).astype(np.float32)
    x[rng.random(x.shape) < 0.03] = np.nan
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_numpy_routes, "OUTER_BLOCK_BYTES", 4096 * 7)  # a few columns per block
        mp.setattr(_numpy_routes, "PARALLEL_MIN_ELEMENTS", 1)
        mp.setitem(_threads._state, "costs", (0.0, 1.0, 1.0, 0.0))  # splitting always pays
        for threads in THREADS:
            with _threads.num_threads(threads):
                check_top_k(x, k, axis=0, nan=nan, mode=mode)


def test_blocks_really_run_on_several_threads(monkeypatch):
    """The pool is used: blocks of one call run on more than one thread."""
    import threading

    seen = set()
    original = _numpy_backend.select_rows

    def spy(*args):
        seen.add(threading.get_ident())
        return original(*args)

    monkeypatch.setattr(_numpy_backend, "select_rows", spy)
    monkeypatch.setattr(_numpy_routes, "PARALLEL_MIN_ELEMENTS", 1)
    monkeypatch.setitem(_threads._state, "costs", (0.0, 1.0, 1.0, 0.0))  # splitting always pays
    monkeypatch.setattr(_numpy_routes, "BLOCK_BYTES", 512)
    x = np.random.default_rng(0).random((400, 100))
    with _threads.num_threads(4):
        for _ in range(20):  # scheduling may hand every block to one thread once
            check_top_k(x, 5)
            if len(seen) > 1:
                break
    assert len(seen) > 1


@pytest.mark.parametrize("dtype", (">f4", ">i2", "<f8", ">u8"))
def test_long_rows_in_other_byte_orders_and_strides(dtype, tiny_ranges):
    rng = np.random.default_rng(3)
    base = rng.integers(0, 40, 3001).astype(dtype)
    for x in (base, base[::-1], base[::3], np.broadcast_to(base[:1], (2000,))):
        for k in (1, 9, 300):
            for threads in (1, 3):
                with _threads.num_threads(threads):
                    r = check_top_k(x, k)
                    check_top_k(x, k, mode="smallest", sorted="index")
            assert r.values.dtype == x.dtype


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(512, 3000),
    rows=st.integers(1, 6),
    k=st.integers(1, 32),
    levels=st.sampled_from([1, 2, 3, 50, 10**6]),
    flat_max=st.sampled_from([1, 100, 1 << 19]),
    dtype=st.sampled_from(["float32", "int8", "float16", "float64"]),
    nan=st.sampled_from(["last", "largest"]),
    mode=st.sampled_from(["largest", "smallest"]),
    order=st.sampled_from([True, "index"]),
)
def test_pivot_filter_with_ties_and_few_levels(seed, n, rows, k, levels, flat_max, dtype, nan, mode, order):
    """The pivot filter's routes (candidates listed or settled on masks, ties at the pivot,
    short rows), chosen by the data and by the candidate limit, on 1 and 3 threads."""
    rng = np.random.default_rng(seed)
    top = {"int8": 100, "float16": 60000}.get(dtype, levels)  # values the dtype holds
    x = rng.integers(0, min(levels, top), (rows, n)).astype(dtype)
    if dtype.startswith("float") and levels > 1:
        x[rng.random(x.shape) < 0.05] = np.nan
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_numpy_pivot_filter, "FLAT_MAX_CANDIDATES", flat_max)
        mp.setattr(_numpy_exact, "FIRST_TRUE_MAX_COLUMNS", 1024)  # several chunks of the tie count
        mp.setattr(_numpy_routes, "PARALLEL_MIN_ELEMENTS", 1)
        mp.setitem(_threads._state, "costs", (0.0, 1.0, 1.0, 0.0))  # splitting always pays
        mp.setattr(_numpy_routes, "FILTER_BLOCK_BYTES", 4096)
        for threads in (1, 3):
            with _threads.num_threads(threads):
                check_top_k(x, k, mode=mode, nan=nan, sorted=order)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")  # Python 3.12+: the point here
def test_a_forked_child_gets_a_pool_of_its_own():
    import os

    x = np.random.default_rng(0).random((64, 5000))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_numpy_routes, "PARALLEL_MIN_ELEMENTS", 1)
        mp.setitem(_threads._state, "costs", (0.0, 1.0, 1.0, 0.0))  # splitting always pays
        with _threads.num_threads(3):
            want = cutopk.top_k(x, 4).indices  # the parent's pool now exists
            pid = os.fork()
            if pid == 0:  # the child: its answer through a pool of its own, then leave at once
                ok = np.array_equal(cutopk.top_k(x, 4).indices, want) and _threads._state["size"] > 0
                os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_growing_the_pool_never_fails_a_call_that_is_submitting_work(monkeypatch):
    """A call that grows the pool (a larger thread count) while another call is handing work to
    the old pool: the old pool is never shut down under that other call."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    grown = []

    class Pool(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            if not grown:  # the first submission: another thread grows the pool meanwhile
                grown.append(threading.Thread(target=_threads.run, args=(abs, [-1] * 8, 8)))
                grown[0].start()
                grown[0].join(0.5)  # returns at once where growing waits for this submission
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(_threads, "ThreadPoolExecutor", Pool)
    monkeypatch.setitem(_threads._state, "pool", None)
    monkeypatch.setitem(_threads._state, "size", 0)
    assert _threads.run(abs, [-1, -2, -3], 3) == [1, 2, 3]
    grown[0].join()
    assert _threads._state["size"] == 7


def test_num_threads_block_sets_the_count_of_its_own_thread_only():
    import threading

    seen = []
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen.append(cutopk.get_num_threads())
        done.set()

    before = cutopk.get_num_threads()
    t = threading.Thread(target=other)
    t.start()
    with cutopk.num_threads(before + 3):
        inside.set()
        done.wait()
        assert cutopk.get_num_threads() == before + 3
    t.join()
    assert seen == [before]
    assert cutopk.get_num_threads() == before


def test_num_threads_block_takes_precedence_over_the_process_wide_setting():
    previous = cutopk.set_num_threads(2)
    try:
        with cutopk.num_threads(5):
            assert cutopk.get_num_threads() == 5
            cutopk.set_num_threads(3)  # process-wide: the block keeps its own count
            assert cutopk.get_num_threads() == 5
        assert cutopk.get_num_threads() == 3
    finally:
        cutopk.set_num_threads(previous)


def test_num_threads_is_public_next_to_set_and_get():
    assert {"num_threads", "set_num_threads", "get_num_threads"} <= set(cutopk.__all__)
    assert cutopk.num_threads is _threads.num_threads


@pytest.mark.parametrize("n", [np.int64(2), np.int32(3), np.uint8(4), np.array(5)])
def test_thread_count_accepts_any_index_integer(n):
    previous = cutopk.set_num_threads(n)
    try:
        assert cutopk.get_num_threads() == int(n)
        assert type(cutopk.get_num_threads()) is int
        with cutopk.num_threads(n):
            assert cutopk.get_num_threads() == int(n)
    finally:
        cutopk.set_num_threads(previous)


@pytest.mark.parametrize(
    ("n", "error"),
    [(True, TypeError), (np.True_, TypeError), (2.0, TypeError), ("2", TypeError), (np.float64(2), TypeError),
     (0, ValueError), (-1, ValueError), (np.int64(0), ValueError)],
)  # fmt: skip
def test_thread_count_refuses_bools_non_integers_and_non_positive(n, error):
    """Not an integer: TypeError, as for ``k`` (issue 36 item 12); not positive: ValueError."""
    with pytest.raises(error, match="n: expected a positive integer number of threads"):
        cutopk.set_num_threads(n)
    with pytest.raises(error, match="n: expected a positive integer number of threads"):
        with cutopk.num_threads(n):
            pass


@pytest.mark.skipif(
    not hasattr(__import__("os"), "sched_setaffinity") or len(__import__("os").sched_getaffinity(0)) < 2,
    reason="needs Linux and two CPUs",
)
def test_pool_workers_are_kept_off_the_callers_core_and_the_caller_is_left_alone():
    import os
    import threading

    caller_mask = os.sched_getaffinity(0)
    seen = {}

    def where(i):
        seen[threading.current_thread().name] = (os.sched_getaffinity(0), _threads._caller_cpu())
        threading.Event().wait(0.002)  # long enough for the helper to take an item
        return i

    for _ in range(50):
        seen.clear()
        cpu = _threads._caller_cpu()
        _threads.run(where, list(range(8)), 2)
        helpers = {name: mask for name, (mask, _) in seen.items() if name != threading.current_thread().name}
        if helpers and _threads._caller_cpu() == cpu:
            break
    assert helpers, "no helper took an item"
    for mask in helpers.values():
        assert cpu not in mask and mask == caller_mask - {cpu}
    assert os.sched_getaffinity(0) == caller_mask  # the caller's own thread is not placed


def test_a_huge_thread_count_costs_nothing_extra(monkeypatch):
    """Issue 36 item 5: the cost model looped over every count up to the one asked for (10**7:
    seconds per new shape). Its loop stops at the CPUs this process may use, and the plan says
    which count ran out of how many asked."""
    monkeypatch.setitem(_threads._state, "cpus", 2)
    monkeypatch.setitem(_threads._state, "costs", (0.0, 1e-9, 1.0, 0.0))  # splitting always pays
    x = np.random.default_rng(0).standard_normal((256, 1024)).astype(np.float32)
    previous = cutopk.set_num_threads(10**7)
    try:
        start = time.perf_counter()
        p = cutopk.plan(x, 8).params
        check_top_k(x, 8)
        elapsed = time.perf_counter() - start
    finally:
        cutopk.set_num_threads(previous)
    assert elapsed < 1.0, f"{elapsed:.2f} s"  # 2.6-5 s before
    assert p["threads"] == 2 and p["threads_why"].endswith("(10000000 asked, 2 CPUs usable)"), p


def test_a_fork_while_the_pool_lock_is_held_does_not_hang_the_child():
    """The pool's lock, held by another thread at the fork (growing the pool, handing it work),
    would never be released in the child: the child's first split waited for ever. The child
    gets a lock of its own (as the compiled route's build lock, issue 36 item 2). In a
    subprocess, with a timeout: a regression fails, it does not hang the run."""
    code = textwrap.dedent(
        """
        import os, signal, sys
        from cutopk.numpy import threads

        threads._lock.acquire()  # as another thread inside _submit at the fork
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a hung child ends itself: nothing is left behind
            ok = threads.run(lambda i: i * i, list(range(8)), 2) == [i * i for i in range(8)]
            os._exit(0 if ok else 3)
        threads._lock.release()
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    root = pathlib.Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


# The thread pool's edges: CPU counts without affinity, the caller's CPU where it cannot be found,
# worker placement that cannot or need not move, the bounded tables of trials and decisions,
# costs set by hand, and answers that do not depend on the pool.
COSTS = (50e-6, 1e-9, {family: 0.9 for family in _threads.PROBES}, 1e-6)


def test_without_affinity_the_cpu_count_is_the_machines(monkeypatch):
    def refuse(pid):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(_threads.os, "sched_getaffinity", refuse)
    monkeypatch.setattr(_threads.os, "cpu_count", lambda: 6)
    monkeypatch.setitem(_threads._state, "cpus", None)
    assert _threads._cpus() == 6 and _threads._state["cpus"] == 6  # asked once
    monkeypatch.setattr(_threads.os, "cpu_count", lambda: None)  # unknown: one
    monkeypatch.setitem(_threads._state, "cpus", None)
    assert _threads._cpus() == 1


def test_on_one_cpu_the_callers_cpu_is_not_looked_up(monkeypatch):
    def refuse(*args):
        raise AssertionError("sched_getcpu looked up on one CPU")

    monkeypatch.setattr(ctypes, "CDLL", refuse)
    monkeypatch.setitem(_threads._state, "cpus", 1)
    monkeypatch.setitem(_threads._state, "getcpu", 0)
    assert _threads._caller_cpu() is None and _threads._state["getcpu"] is None


def test_a_libc_without_sched_getcpu_means_no_placement(monkeypatch):
    monkeypatch.setattr(ctypes, "CDLL", lambda name: types.SimpleNamespace())  # no sched_getcpu
    monkeypatch.setitem(_threads._state, "cpus", 4)
    monkeypatch.setitem(_threads._state, "getcpu", 0)
    assert _threads._caller_cpu() is None and _threads._state["getcpu"] is None


def _in_a_worker(fn):
    """``fn()`` on a thread of its own (placement is per thread and changes its affinity)."""
    out = []
    worker = threading.Thread(target=lambda: out.append(fn()))
    worker.start()
    worker.join(10)
    return out[0]


@pytest.mark.parametrize(
    ("allowed", "cpu"),
    [({0, 1, 2}, 7), ({3}, 3)],  # the caller's CPU is not one of ours; or it is our only one
)
def test_a_worker_is_not_moved_where_the_move_would_not_keep_it_off(monkeypatch, allowed, cpu):
    moves = []
    monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: set(allowed))
    monkeypatch.setattr(_threads.os, "sched_setaffinity", lambda pid, cpus: moves.append(cpus))

    def place():
        _threads._keep_off(cpu)
        return _threads._placement.off

    assert _in_a_worker(place) == cpu and moves == []


def test_a_worker_that_may_not_move_stays_where_it_is(monkeypatch):
    tried = []

    def refuse(pid, cpus):
        tried.append(cpus)
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    monkeypatch.setattr(_threads.os, "sched_setaffinity", refuse)
    _in_a_worker(lambda: _threads._keep_off(1))
    assert tried == [{0, 2}]


# --- bounded tables ------------------------------------------------------------------------------


@pytest.fixture
def measured(monkeypatch):
    """Costs as if measured (so trials run), empty tables, four CPUs."""
    monkeypatch.setitem(_threads._state, "cpus", 4)
    monkeypatch.setitem(_threads._state, "costs", COSTS)
    monkeypatch.setitem(_threads._state, "measured", COSTS)
    monkeypatch.setattr(_threads, "_trials", {})
    monkeypatch.setattr(_threads, "_decisions", {})
    monkeypatch.setattr(_threads, "TRIAL_MAX_SHAPES", 3)


def test_the_trials_table_starts_again_when_full(measured):
    for key in ("a", "b", "c"):
        assert _threads.trial(key, 2) == 1  # each new shape's first call: one thread
    assert len(_threads._trials) == 3
    assert _threads.trial("d", 2) == 1
    assert list(_threads._trials) == ["d"]


def test_a_time_for_a_shape_or_count_not_on_trial_is_dropped(measured):
    _threads.record("never tried", 2, 1e-3)
    assert _threads._trials == {}
    _threads.trial("a", 4)
    _threads.record("a", 3, 1e-3)  # not a count this shape is tried on
    assert _threads._trials == {"a": {1: [], 4: []}}


def test_the_decisions_table_starts_again_when_full(measured):
    answers = [_threads.threads_for(2, passes) for passes in (1e3, 1e4, 1e5)]
    assert len(_threads._decisions) == 3
    assert _threads.threads_for(2, 1e9)[0] == 2  # a long call: two _threads pay at these costs
    assert len(_threads._decisions) == 1
    assert [_threads.threads_for(2, passes) for passes in (1e3, 1e4, 1e5)] == answers  # worked out again


def test_costs_set_by_hand_are_taken_at_their_word_and_none_measures_again(monkeypatch):
    monkeypatch.setitem(_threads._state, "costs", None)
    monkeypatch.setattr(_threads, "_trials", {"a shape": {1: [1e-3], 2: []}})
    _threads.set_costs(1e-6, element_s=1e-8, efficiency=0.5, call_s=2e-7)
    assert _threads.costs() == (1e-6, 1e-8, dict.fromkeys(_threads.PROBES, 0.5), 2e-7)
    assert _threads._trials == {} and _threads.trial("a shape", 2) == 0  # not measured: no trials
    _threads.set_costs(None)
    assert _threads._state["costs"] is None
    monkeypatch.setattr(_threads, "_measure", lambda: COSTS)
    assert _threads.costs() is COSTS and _threads._state["measured"] is COSTS


# --- the pool ------------------------------------------------------------------------------------


def test_run_gives_every_answer_in_order_on_two_threads():
    assert _threads.run(lambda i: i * i, list(range(50)), 2) == [i * i for i in range(50)]


def test_the_first_error_of_a_run_reaches_the_caller():
    def fn(i):
        if i == 3:
            raise KeyError(i)
        return i

    with pytest.raises(KeyError, match="3"):
        _threads.run(fn, list(range(8)), 2)
