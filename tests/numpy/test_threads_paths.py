"""The thread pool's edges (cutopk/numpy/threads.py): CPU counts without affinity, the caller's CPU
where it cannot be found, worker placement that cannot or need not move, the bounded tables of
trials and decisions, costs set by hand, and answers that do not depend on the pool."""

from __future__ import annotations

import ctypes
import threading
import types

import pytest

from cutopk.numpy import threads

COSTS = (50e-6, 1e-9, {family: 0.9 for family in threads.PROBES}, 1e-6)


def test_without_affinity_the_cpu_count_is_the_machines(monkeypatch):
    def refuse(pid):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(threads.os, "sched_getaffinity", refuse)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 6)
    monkeypatch.setitem(threads._state, "cpus", None)
    assert threads._cpus() == 6 and threads._state["cpus"] == 6  # asked once
    monkeypatch.setattr(threads.os, "cpu_count", lambda: None)  # unknown: one
    monkeypatch.setitem(threads._state, "cpus", None)
    assert threads._cpus() == 1


def test_on_one_cpu_the_callers_cpu_is_not_looked_up(monkeypatch):
    def refuse(*args):
        raise AssertionError("sched_getcpu looked up on one CPU")

    monkeypatch.setattr(ctypes, "CDLL", refuse)
    monkeypatch.setitem(threads._state, "cpus", 1)
    monkeypatch.setitem(threads._state, "getcpu", 0)
    assert threads._caller_cpu() is None and threads._state["getcpu"] is None


def test_a_libc_without_sched_getcpu_means_no_placement(monkeypatch):
    monkeypatch.setattr(ctypes, "CDLL", lambda name: types.SimpleNamespace())  # no sched_getcpu
    monkeypatch.setitem(threads._state, "cpus", 4)
    monkeypatch.setitem(threads._state, "getcpu", 0)
    assert threads._caller_cpu() is None and threads._state["getcpu"] is None


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
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(allowed))
    monkeypatch.setattr(threads.os, "sched_setaffinity", lambda pid, cpus: moves.append(cpus))

    def place():
        threads._keep_off(cpu)
        return threads._placement.off

    assert _in_a_worker(place) == cpu and moves == []


def test_a_worker_that_may_not_move_stays_where_it_is(monkeypatch):
    tried = []

    def refuse(pid, cpus):
        tried.append(cpus)
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    monkeypatch.setattr(threads.os, "sched_setaffinity", refuse)
    _in_a_worker(lambda: threads._keep_off(1))
    assert tried == [{0, 2}]


# --- bounded tables ------------------------------------------------------------------------------


@pytest.fixture
def measured(monkeypatch):
    """Costs as if measured (so trials run), empty tables, four CPUs."""
    monkeypatch.setitem(threads._state, "cpus", 4)
    monkeypatch.setitem(threads._state, "costs", COSTS)
    monkeypatch.setitem(threads._state, "measured", COSTS)
    monkeypatch.setattr(threads, "_trials", {})
    monkeypatch.setattr(threads, "_decisions", {})
    monkeypatch.setattr(threads, "TRIAL_MAX_SHAPES", 3)


def test_the_trials_table_starts_again_when_full(measured):
    for key in ("a", "b", "c"):
        assert threads.trial(key, 2) == 1  # each new shape's first call: one thread
    assert len(threads._trials) == 3
    assert threads.trial("d", 2) == 1
    assert list(threads._trials) == ["d"]


def test_a_time_for_a_shape_or_count_not_on_trial_is_dropped(measured):
    threads.record("never tried", 2, 1e-3)
    assert threads._trials == {}
    threads.trial("a", 4)
    threads.record("a", 3, 1e-3)  # not a count this shape is tried on
    assert threads._trials == {"a": {1: [], 4: []}}


def test_the_decisions_table_starts_again_when_full(measured):
    answers = [threads.threads_for(2, passes) for passes in (1e3, 1e4, 1e5)]
    assert len(threads._decisions) == 3
    assert threads.threads_for(2, 1e9)[0] == 2  # a long call: two threads pay at these costs
    assert len(threads._decisions) == 1
    assert [threads.threads_for(2, passes) for passes in (1e3, 1e4, 1e5)] == answers  # worked out again


def test_costs_set_by_hand_are_taken_at_their_word_and_none_measures_again(monkeypatch):
    monkeypatch.setitem(threads._state, "costs", None)
    monkeypatch.setattr(threads, "_trials", {"a shape": {1: [1e-3], 2: []}})
    threads.set_costs(1e-6, element_s=1e-8, efficiency=0.5, call_s=2e-7)
    assert threads.costs() == (1e-6, 1e-8, dict.fromkeys(threads.PROBES, 0.5), 2e-7)
    assert threads._trials == {} and threads.trial("a shape", 2) == 0  # not measured: no trials
    threads.set_costs(None)
    assert threads._state["costs"] is None
    monkeypatch.setattr(threads, "_measure", lambda: COSTS)
    assert threads.costs() is COSTS and threads._state["measured"] is COSTS


# --- the pool ------------------------------------------------------------------------------------


def test_run_gives_every_answer_in_order_on_two_threads():
    assert threads.run(lambda i: i * i, list(range(50)), 2) == [i * i for i in range(50)]


def test_the_first_error_of_a_run_reaches_the_caller():
    def fn(i):
        if i == 3:
            raise KeyError(i)
        return i

    with pytest.raises(KeyError, match="3"):
        threads.run(fn, list(range(8)), 2)
