"""The lease command (tools/gpu_session.sh lease, benchmarks/lease.py, benchmarks/cutopk_bench/lease.py): its
dry run on the CPU prints and checks the plan, its plan fits 9 minutes and 8 files, and a step that
hangs costs that step only. Nothing here runs a GPU."""

from __future__ import annotations

import re
import sys
import time

import pytest
from cutopk_bench import lease
from support import gpu_session


@pytest.mark.skipif(sys.platform != "linux", reason="the lease is a bash script for the lent Linux machines")
def test_dry_run_of_the_lease_prints_every_step_and_fits_nine_minutes(tmp_path):
    proc = gpu_session.dry_run("lease", tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    order = [m for m in re.findall(r"^--- (\w+) ", out, flags=re.M)]
    assert order == ["M0", "M1", "M2", "M3", "M4", "M5", "M6", "M7", "SB"]
    estimates = [float(s) for s in re.findall(r"^--- \w+ .*: estimate (\d+) s", out, flags=re.M)]
    assert sum(estimates[:-1]) + lease.SCOREBOARD_MIN_S <= 540 and sum(estimates) <= 540
    assert out.count("    basis: ") == 9 and "compute-sanitizer --error-exitcode 99 --tool memcheck" in out
    assert "ncu --clock-control none" in out and "benchmarks/scoreboard.py --out" in out
    assert re.search(r"files \((\d+), at most 8\)", out) and int(re.search(r"files \((\d+),", out)[1]) <= 8
    assert "lease dry run: the plan holds" in out and "=== lease: exit 0" in out
    # M6 writes the forced-family CSV that benchmarks/make_dispatch_table.py reads
    assert re.search(r"^dry run M6: .*: exit 0: would write the forced-family CSV", out, flags=re.M)
    assert (tmp_path / "lease.log").is_file()


def test_plan_check_refuses_a_plan_over_budget_or_with_too_many_files():
    steps = lease.steps()
    assert lease.check_plan(steps) == []
    assert "over 300 s" in lease.check_plan(steps, budget=300)[0]
    many = steps + tuple(
        lease.LeaseStep(f"X{i}", "extra", f"x{i}.csv", 0.0, "test", (("true",),), 1.0) for i in range(3)
    )
    assert any("the device tool returns 8" in p for p in lease.check_plan(many))


def test_estimates_that_ran_before_come_from_the_last_gpu_runs_logs():
    assert lease.logged_seconds("tests-after-fixes.log")[0] == pytest.approx(42.76)
    m1 = next(s for s in lease.steps() if s.name == "M1")
    assert "42.76 s" in m1.basis and "23.11 s" in m1.basis
    m6 = next(s for s in lease.steps() if s.name == "M6")
    assert "benchmark phases logged in benchmarks/results/2026-11-25-nvidia-h200" in m6.basis
    assert "each timed eager and graph" in m6.basis and lease.FORCED_TIMINGS == ("eager", "graph")


def test_a_hung_command_is_ended_at_its_limit_with_its_children(tmp_path):
    marker = tmp_path / "child-alive"
    script = f"sleep 30 & sleep 2.5; touch {marker}; wait"  # a child that would outlive a plain kill
    t0 = time.monotonic()
    with open(tmp_path / "log", "w") as f:
        assert lease.run_bounded(["bash", "-c", script], 1.0, f) == 124
    assert time.monotonic() - t0 < 10
    time.sleep(2.0)
    assert not marker.exists(), "the command's process group outlived its limit"


def test_a_step_that_hangs_costs_that_step_and_the_next_one_runs(tmp_path, monkeypatch, capsys):
    hang = lease.LeaseStep(
        "H",
        "hangs",
        "h.log",
        1.0,
        "test",
        ((sys.executable, "-c", "import time; time.sleep(60)"),),
        5.5,
        stdout_to_file=True,
    )
    after = lease.LeaseStep("A", "after", "a.csv", 1.0, "test", (("bash", "-c", "echo ran > {file}"),), 10.0)
    monkeypatch.setattr(lease, "steps", lambda: (hang, after))
    monkeypatch.setattr(lease, "SCOREBOARD_MIN_S", 1.0)
    monkeypatch.setattr(
        lease,
        "scoreboard_step",
        lambda left: lease.LeaseStep(
            "SB", "sb", "sb.txt", left, "test", (("bash", "-c", "echo sb > {file}"),), left
        ),
    )
    t0 = time.monotonic()
    assert lease.run(str(tmp_path), budget=40.0) == 1  # the hung step's exit counts
    assert time.monotonic() - t0 < 25
    assert (tmp_path / "a.csv").read_text() == "ran\n" and (tmp_path / "sb.txt").read_text() == "sb\n"
    out = capsys.readouterr().out
    assert re.search(r"no end in \d s, ended \(the next step starts\)", out) and "=== H: exit 124" in out
    assert re.search(r"^H +124 limit +\d+ +1$", out, flags=re.M) and re.search(r"^A +0 ", out, flags=re.M)


def test_the_steps_python_gets_the_lease_watchdog_and_the_scoreboard_its_own(tmp_path, monkeypatch):
    monkeypatch.delenv("CUTOPK_BENCH_STEP_LIMIT", raising=False)
    show = ["bash", "-c", 'echo "limit=${CUTOPK_BENCH_STEP_LIMIT:-unset}"']
    for watchdog_s, want in ((lease.WATCHDOG_S, "limit=30"), (None, "limit=unset")):
        with open(tmp_path / "log", "w") as f:
            assert lease.run_bounded(show, 5.0, f, watchdog_s) == 0
        assert (tmp_path / "log").read_text().strip() == want
    assert all(s.watchdog_s == lease.WATCHDOG_S for s in lease.steps())
    assert lease.scoreboard_step(100.0).watchdog_s is None
