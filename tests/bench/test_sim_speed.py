"""benchmarks/sim_speed.py: the launch's budget follows the machine's speed, and --check fails an
over-budget launch."""

from __future__ import annotations

import pytest
from support.scripts import load_benchmark

from cutopk import sim


def _script(monkeypatch):
    return load_benchmark(monkeypatch, "sim_speed.py", "bench_sim_speed")


def test_budget_is_5_ms_on_a_machine_as_fast_as_the_reference_and_grows_on_a_slower_one(monkeypatch):
    speed = _script(monkeypatch)
    reference = speed.REFERENCE_CALIBRATION_MS
    assert speed.budget_ms(reference) == pytest.approx(5.0)
    assert speed.budget_ms(reference / 2) == pytest.approx(5.0)  # a faster machine: never tighter
    assert speed.budget_ms(reference * 1.7) == pytest.approx(8.5)


def test_calibration_is_the_fastest_of_its_runs(monkeypatch):
    speed = _script(monkeypatch)
    ticks = iter([0.0, 0.030, 1.0, 1.020, 2.0, 2.025])
    monkeypatch.setattr(speed.time, "perf_counter", lambda: next(ticks))
    monkeypatch.setattr(speed, "CALIBRATION_ITERATIONS", 10)
    assert speed.calibration_ms(repeat=3) == pytest.approx(20.0)


def test_check_fails_a_launch_over_its_budget(monkeypatch, capsys):
    if not sim.is_available():
        pytest.skip(f"CPU simulator unavailable: {sim.unavailable_reason()}")
    speed = _script(monkeypatch)
    monkeypatch.setattr(speed, "calibration_ms", lambda: speed.REFERENCE_CALIBRATION_MS)
    monkeypatch.setattr(speed, "BUDGET_MS", 1e6)
    assert speed.main(["--repeat", "2", "--check"]) == 0
    monkeypatch.setattr(speed, "BUDGET_MS", 1e-6)
    assert speed.main(["--repeat", "2", "--check"]) == 1
    assert "budget 0.00 ms" in capsys.readouterr().out


def test_calibrate_prints_the_loop_alone_and_launches_nothing(monkeypatch, capsys):
    speed = _script(monkeypatch)
    monkeypatch.setattr(speed, "calibration_ms", lambda: 42.0)
    monkeypatch.setattr(sim, "RawModule", None)  # a launch would fail
    assert speed.main(["--calibrate"]) == 0
    assert capsys.readouterr().out.startswith("calibration loop 42.0 ms")
