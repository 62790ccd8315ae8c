"""Launches in a forked child (``isolate=True``), driven directly: what the parent learns when
the child fails, writes diagnostics, or outlives its time limit, with and without pidfd."""

from __future__ import annotations

import os
import signal
import time

import pytest

from cutopk.sim import _isolate


def test_a_launch_that_raises_in_the_child_is_reported_as_a_failed_child():
    def launch():
        raise RuntimeError("the runtime is not loaded")

    outcome = _isolate.run(launch, timeout_s=None)
    assert outcome.died == "the child process exited with status 3" and outcome.rc == -1
    assert "isolated launch failed in the child: RuntimeError('the runtime is not loaded')" in outcome.stderr


def test_a_child_killed_by_a_signal_is_named_by_it():
    def launch():
        os.kill(os.getpid(), signal.SIGKILL)
        return 0, "", []

    assert _isolate.run(launch, timeout_s=None).died == "the child process died of SIGKILL"


def test_the_childs_diagnostics_are_passed_on_with_its_result(capfd):
    def launch():
        os.write(2, b"printf from a kernel thread\n")
        return 7, "a fault", [0x10, 0x20]

    outcome = _isolate.run(launch, timeout_s=30)
    assert (outcome.rc, outcome.message, outcome.frames, outcome.died) == (7, "a fault", [0x10, 0x20], None)
    assert outcome.stderr == "printf from a kernel thread\n"
    assert "printf from a kernel thread" in capfd.readouterr().err


@pytest.fixture
def no_pidfd(monkeypatch):
    monkeypatch.delattr(_isolate.os, "pidfd_open", raising=False)  # an old kernel or Python


def test_without_pidfd_a_child_that_finishes_in_time_is_polled(no_pidfd):
    outcome = _isolate.run(lambda: (0, "", []), timeout_s=30)
    assert outcome.died is None and outcome.rc == 0


def test_without_pidfd_a_child_that_overruns_is_killed(no_pidfd):
    def hang():
        time.sleep(60)
        return 0, "", []

    started = time.monotonic()
    outcome = _isolate.run(hang, timeout_s=0.2)
    assert outcome.died == "still running after timeout_s=0.2 s, killed -- hang"
    assert time.monotonic() - started < 10
