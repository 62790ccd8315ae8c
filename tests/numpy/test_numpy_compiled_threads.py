"""The compiled route on several threads (issue 42): one ``compiled.select`` call shares its rows
between the caller and the C file's own pool. Bit for bit the one-thread answer and the NumPy
routes' for every method, dtype, layout, K and thread count (threads beyond the rows, one row);
the pool's sleeping paths; a forked child (also while another thread's split holds the pool);
several Python threads calling at once; process exit with the workers alive; ``plan()``'s
naming of the split; and the cost model's use of the pool's own costs. No timing is asserted."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.inputs import dtype_of, make_values, random_bits
from support.reference import check_top_k

import cutopk
from cutopk.numpy import backend as _numpy
from cutopk.numpy import compiled
from cutopk.numpy import compiled_threads as _compiled_threads
from cutopk.numpy import routes as _routes
from cutopk.numpy import threads as _threads

pytestmark = pytest.mark.skipif(
    not compiled.available(), reason=f"compiled route: {compiled.unavailable_reason()}"
)

DTYPES = ("float16", "float32", "float64", "int8", "uint16", "int32", "uint64", "bfloat16")
METHODS = tuple(compiled.METHODS)


def _dtype(name):
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    return dtype_of(name)


def _methods_for(x):
    return [m for m in METHODS if (m != "count" or x.itemsize <= 2) and (m != "rank" or x.itemsize <= 4)]


def _select(x, k, threads, method, largest=True, nan_first=False, order="value"):
    out = np.full((x.shape[0], k), -1, np.int64)  # every row must be written, by one thread
    compiled.select(x, k, largest, nan_first, order, out, method=method, threads=threads)
    return out


def _routes_answer(x, k, largest=True, nan_first=False, order="value"):
    return _numpy.select_rows(np.ascontiguousarray(x), k, largest, nan_first, order)


@pytest.fixture
def spin(request):
    """The pool as it runs (workers spin a while, then sleep), or with no spin at all: every
    handover then wakes a sleeping worker and the caller sleeps until the last piece."""
    if request.param == "sleep":
        compiled.set_spin(0)
    yield request.param
    compiled.set_spin(200_000)


@pytest.mark.parametrize(
    ("dtype", "spin"),
    [(d, "spin") for d in DTYPES if d not in ("int32", "bfloat16")]  # as float32, float16 there
    + [(d, "sleep") for d in ("float32", "int8")],
    indirect=["spin"],
)
def test_every_method_on_every_thread_count(dtype, spin):
    """1, 2, 3, 70 and 130 rows (pieces of one row; column groups of 64 and a part one), as rows
    and side by side, reversed, strided; ties, NaN, infinities, both zeros; K from 1 to N."""
    dt = _dtype(dtype)
    rng = np.random.default_rng(zlib.crc32(dtype.encode()))
    for rows, n, dist in ((1, 300, "extremes"), (2, 70, "few_distinct"), (3, 13, "sorted"), (70, 65, "extremes"), (130, 40, "few_distinct")):  # fmt: skip
        x = make_values(rng, dt, (rows, n), dist)
        for view in (x, x[:, ::-1], np.asfortranarray(x), x[::2, 1::3]):
            m = view.shape[1]
            for k, (largest, nan_first), order in itertools.product(
                sorted({1, min(3, m), m}), ((True, False), (True, True), (False, False)), ("value", "index")
            ):
                expected = _routes_answer(view, k, largest, nan_first, order)
                for method, threads in itertools.product(_methods_for(view), (2, 3, 8)):
                    got = _select(view, k, threads, method, largest, nan_first, order)
                    np.testing.assert_array_equal(
                        got, expected, err_msg=f"{method} {threads} threads {view.strides} k={k}"
                    )


@settings(max_examples=30, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    rows=st.integers(1, 200),
    n=st.integers(1, 120),
    k_share=st.floats(0, 1),
    threads=st.integers(2, 9),
    outer=st.booleans(),
    levels=st.sampled_from((0, 3)),
    method=st.sampled_from(METHODS),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_rows_on_random_thread_counts(dtype, rows, n, k_share, threads, outer, levels, method, seed):
    dt = _dtype(dtype)
    rng = np.random.default_rng(seed)
    shape = (n, rows) if outer else (rows, n)
    raw = random_bits(rng, dt, shape, levels)
    x = raw.T if outer else raw
    k = max(1, round(k_share * n))
    if (method == "count" and dt.itemsize > 2) or (method == "rank" and dt.itemsize > 4):
        method = "insert"
    np.testing.assert_array_equal(_select(x, k, threads, method), _routes_answer(x, k))


def test_a_split_starts_workers_and_the_backend_takes_no_python_pool(monkeypatch):
    """The compiled routes go through one C call on the model's thread count: the Python pool
    (``threads.run``) is not used, and the C pool has a worker."""

    def no_python_pool(*args, **kwargs):
        raise AssertionError("a compiled route handed blocks to the Python pool")

    monkeypatch.setattr(_threads, "run", no_python_pool)
    monkeypatch.setitem(_threads._state, "costs", (0.0, 1.0, 1.0, 0.0))  # splitting always pays
    x = make_values(np.random.default_rng(3), np.dtype(np.float32), (300, 128), "few_distinct")
    with cutopk.num_threads(2):
        assert cutopk.plan(x, 8).params["route"] == "compiled-rank"
        check_top_k(x, 8)
        check_top_k(x, 4, axis=0)  # compiled-columns
    assert compiled.workers() >= 1


def test_plan_names_the_pool_and_its_thread_count(monkeypatch):
    x = np.zeros((4096, 128), np.float32)
    monkeypatch.setitem(_threads._state, "costs", (1e-6, 1e-9, 1.0, 0.0))  # set by hand: splits
    with cutopk.num_threads(2):
        params = cutopk.plan(x, 8).params
    assert (params["route"], params["threads"]) == ("compiled-rank", 2)
    assert params["threads_why"].startswith("2 of 2 in the compiled route's pool"), params["threads_why"]
    with cutopk.num_threads(1):
        params = cutopk.plan(x, 8).params
    assert (params["route"], params["threads"], params["threads_why"]) == (
        "compiled-rank",
        1,
        "one thread asked for",
    )


def test_the_cost_model_reads_the_pools_measured_costs(monkeypatch):
    """Measured costs: the pool's own handover and gain decide, not the Python pool's; a pool not
    measured yet (a plan before the first build) is said to be guessed; a measurement
    ``MEASURE_S`` old is taken again where it found a poor second thread, kept where it found a
    useful one."""
    measured = (500e-6, 1e-9, {"scan": 1.0, "sort": 1.0}, 0.0)  # a Python task would cost 500 us
    monkeypatch.setitem(_threads._state, "costs", measured)
    monkeypatch.setitem(_threads._state, "measured", measured)
    monkeypatch.setattr(_compiled_threads, "_state", {"costs": None})
    now = time.monotonic()
    work = 100_000 * 6  # some 600 us of element-passes
    _compiled_threads._state["costs"] = (2e-6, 0.9, now)
    t, why = _compiled_threads.threads_for(2, work, 100)
    assert t == 2 and "2.0 us per handover" in why and "1.90x" in why, why
    _compiled_threads._state["costs"] = (2e-6, 0.05, now)  # a busy second core
    t, why = _compiled_threads.threads_for(2, work, 100)
    assert t == 1 and "would not pay" in why, why
    t, why = _compiled_threads.threads_for(4, work, 2)  # two pieces: two threads at most
    assert t <= 2, why
    monkeypatch.setattr(compiled, "measure_pool", lambda: None)
    _compiled_threads._state["costs"] = None
    assert "not measured yet" in _compiled_threads.threads_for(2, work, 100)[1]
    monkeypatch.setattr(compiled, "measure_pool", lambda: (3e-6, 0.9))
    _compiled_threads._state["costs"] = (2e-6, 0.05, now - _compiled_threads.MEASURE_S - 1)
    t, why = _compiled_threads.threads_for(2, work, 100)
    assert t == 2 and "3.0 us per handover" in why, why
    monkeypatch.setattr(compiled, "measure_pool", lambda: pytest.fail("a useful pool measured again"))
    _compiled_threads._state["costs"] = (2e-6, 0.9, now - _compiled_threads.MEASURE_S - 1)
    t, why = _compiled_threads.threads_for(2, work, 100)
    assert t == 2 and "2.0 us per handover" in why, why


def test_the_pool_probe_gives_a_handover_and_a_gain():
    handover, efficiency = compiled.measure_pool()
    assert handover >= 0 and 0 <= efficiency <= 1


def test_callers_on_several_python_threads_at_once():
    """Four Python threads split calls at once: one holds the pool, the others run their rows
    alone (never waiting); every answer exact."""
    rng = np.random.default_rng(9)
    cases = [
        (make_values(rng, np.dtype(np.float32), (257, 100), "few_distinct"), 5, "rank"),
        (make_values(rng, np.dtype(np.int8), (129, 300), "uniform"), 17, "count"),
        (np.asfortranarray(make_values(rng, np.dtype(np.float64), (200, 70), "extremes")), 3, "columns"),
        (make_values(rng, np.dtype(np.uint64), (90, 200), "sorted"), 4, "insert"),
    ]
    expected = [_routes_answer(x, k) for x, k, _ in cases]
    failures: list = []

    def caller(i: int) -> None:
        x, k, method = cases[i]
        for turn in range(40):
            got = _select(x, k, 2 + turn % 3, method)
            if not np.array_equal(got, expected[i]):
                failures.append((method, turn))
                return

    callers = [threading.Thread(target=caller, args=(i,)) for i in range(len(cases))]
    for t in callers:
        t.start()
    for t in callers:
        t.join(120)
    assert not any(t.is_alive() for t in callers) and not failures, failures


def _in_child(body) -> int:
    """Fork; the child runs ``body`` (a watchdog kills it after 60 s: a deadlock fails the test)
    and exits 0 where it returns True. The parent's status of the child."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() beside threads (Python 3.12+)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(60)
            code = 0 if body() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_starts_workers_of_its_own():
    x = make_values(np.random.default_rng(4), np.dtype(np.float32), (64, 200), "few_distinct")
    expected = _routes_answer(x, 6)
    assert np.array_equal(_select(x, 6, 2, "rank"), expected) and compiled.workers() >= 1

    def child() -> bool:
        none_yet = compiled.workers() == 0  # the parent's did not survive the fork
        same = np.array_equal(_select(x, 6, 2, "rank"), expected)
        return none_yet and same and compiled.workers() >= 1

    assert _in_child(child) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_fork_while_another_thread_splits_leaves_the_child_a_working_pool():
    """Another thread splits calls without pause (the pool's locks held at times) while this one
    forks: each child still splits and answers exactly."""
    x = make_values(np.random.default_rng(7), np.dtype(np.int16), (128, 300), "few_distinct")
    expected = _routes_answer(x, 9)
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            _select(x, 9, 2, "threshold")

    other = threading.Thread(target=busy)
    other.start()
    try:
        statuses = [_in_child(lambda: np.array_equal(_select(x, 9, 2, "count"), expected)) for _ in range(5)]
    finally:
        stop.set()
        other.join()
    assert statuses == [0] * 5


def test_the_process_exits_with_its_workers_alive():
    """A process whose pool has workers (spinning, then sleeping) exits at once: the library's
    destructor stops them; none holds the exit up."""
    code = textwrap.dedent(
        """
        import numpy as np
        from cutopk.numpy import compiled
        assert compiled.available(), compiled.unavailable_reason()
        out = np.empty((64, 4), np.int64)
        compiled.select(np.ones((64, 100), np.float32), 4, True, False, "value", out, threads=3)
        assert compiled.workers() == 2
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_compiled_routes_count_blocks_by_rows_or_column_groups():
    """The model's pieces: a row each, 64 rows side by side for columns; one row never splits."""
    assert _routes.split("compiled", 1, 1 << 20, 1, 2)[0] == 1
    name, _, step = _routes.route_on(np.zeros((4096, 128), np.float32).T, 8, 2)
    assert (name, step) == ("compiled-columns", 64)


def test_the_cost_models_answer_is_kept_while_the_costs_are_the_same(monkeypatch):
    """A shape's answer (its text costs some 6 us) is worked out once per set of costs: the same
    answer object while they hold, a new one once the pool's measurement changes."""
    measured = (500e-6, 1e-9, {"scan": 1.0, "sort": 1.0}, 0.0)
    monkeypatch.setitem(_threads._state, "costs", measured)
    monkeypatch.setitem(_threads._state, "measured", measured)
    monkeypatch.setattr(_compiled_threads, "_state", {"costs": (2e-6, 0.9, float("inf"))})
    monkeypatch.setattr(_compiled_threads, "_decisions", {})
    first = _compiled_threads.threads_for(2, 600_000, 100)
    assert _compiled_threads.threads_for(2, 600_000, 100) is first and first[0] == 2
    _compiled_threads._state["costs"] = (2e-6, 0.05, float("inf"))  # measured again: a busy core
    assert _compiled_threads.threads_for(2, 600_000, 100)[0] == 1
