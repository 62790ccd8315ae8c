"""The benchmark's watchdog: a step that never returns ends the run, naming the case and the route,
instead of holding a lent GPU until its command's limit (benchmarks/cutopk_bench/watchdog.py)."""

from __future__ import annotations

import io
import time

import pytest
from cutopk_bench import shims, watchdog

from cutopk._demo import baselines, grid, loop, timing


class Exits:
    """Stands in for os._exit: records the code, returns (the test thread goes on)."""

    def __init__(self):
        self.codes: list[int] = []

    def __call__(self, code: int) -> None:
        self.codes.append(code)


def test_a_step_past_its_limit_is_named_and_nested_steps_restore_the_outer_one():
    dog = watchdog.Watchdog(10.0, exit=Exits())
    assert dog.check() is None
    with dog.watch("llm 1x32000 k=1 largest: cutopk"):
        start = time.monotonic()
        assert dog.check(now=start + 5) is None
        with dog.watch("llm 1x32000 k=1 largest: flashinfer"):
            message = dog.check(now=time.monotonic() + 11)
            assert "from llm 1x32000 k=1 largest: flashinfer" in message and "limit 10 s" in message
        assert "llm 1x32000 k=1 largest: cutopk (limit" in dog.check(now=time.monotonic() + 11)
    assert dog.check(now=time.monotonic() + 100) is None


def test_the_thread_ends_the_process_with_its_own_code_and_says_why():
    exits, out = Exits(), io.StringIO()
    dog = watchdog.Watchdog(0.05, exit=exits, out=out, poll_s=0.01)
    with dog.watch("huge 1x16777216 k=65536 largest: flashinfer-unsorted"):
        deadline = time.monotonic() + 5
        while not exits.codes and time.monotonic() < deadline:
            time.sleep(0.01)
    assert exits.codes == [watchdog.EXIT_CODE]
    assert (
        "no answer in" in out.getvalue()
        and "huge 1x16777216 k=65536 largest: flashinfer-unsorted" in out.getvalue()
    )


def test_no_limit_means_no_thread():
    dog = watchdog.Watchdog(0, exit=Exits())
    with dog.watch("anything"):
        assert dog.check(now=time.monotonic() + 1e6) is None
    assert dog._thread is None


@pytest.mark.parametrize(("text", "expected"), [("", 60.0), ("0", 0.0), ("12.5", 12.5)])
def test_the_limit_comes_from_the_environment(monkeypatch, text, expected):
    monkeypatch.setenv(watchdog.LIMIT_ENV, text)
    assert watchdog.limit_from_env() == expected


@pytest.mark.parametrize(
    ("text", "why"), [("soon", "a number .*got 'soon'"), ("-1", "a number >= 0.*got '-1'")]
)
def test_a_bad_limit_names_the_variable(monkeypatch, text, why):
    monkeypatch.setenv(watchdog.LIMIT_ENV, text)
    with pytest.raises(ValueError, match=f"{watchdog.LIMIT_ENV}: expected .*{why}"):
        watchdog.limit_from_env()


def test_the_loop_names_the_peer_that_did_not_answer(monkeypatch):
    def peers(x, axis, case, gpu, only=()):
        good = baselines.numpy_sort_route(x, axis, case.k, case.mode)

        def stuck():
            time.sleep(0.3)
            return good.call()

        return [baselines.Route("stuck", stuck)]

    monkeypatch.setattr(baselines, "peers", peers)
    exits, out = Exits(), io.StringIO()
    session = loop.Session(
        False,
        timing.CpuTimer(repeat=3),
        guard=watchdog.Watchdog(0.05, exit=exits, out=out, poll_s=0.01).watch,
    )
    loop.measure(grid.Case("t", 4, 500, 5), session)
    assert exits.codes and "from t 4x500 k=5 largest: stuck" in out.getvalue()


def test_a_cpu_run_has_no_watchdog_by_default():
    assert loop.Session(False, timing.CpuTimer(repeat=3)).guard is loop.unguarded  # the demo's
    assert shims.KIT.guard(False).__self__.limit_s == 0  # the benchmark's, on the CPU
