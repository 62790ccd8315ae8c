"""The lease's GPU steps run end to end on the CuPy stand-in (launches on the simulator; the torch
CUDA stand-in for torch), on tiny shapes: M1's sanitizer target, M5's profiled window, M6's table,
M7's host calls and M2's launches write what they should, with every answer checked. Their times
are the simulator's, meaningless; what is tested is that each step's code runs and writes its rows."""

from __future__ import annotations

import csv
import importlib.util
import pathlib
import time

import pytest
from support.backends import require

from cutopk._bench import lease, timing

REPO = pathlib.Path(__file__).resolve().parents[2]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / "gpu" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def families():
    require("cuda")
    return _script("families")


def _rows(path: pathlib.Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class WallTimer:
    """GpuTimer's interface on the wall clock (the stand-in has no CUDA events): calls ``fn`` 3 times."""

    def __init__(self, repeat: int = 20):
        self.repeat = repeat

    def __call__(self, fn, own_stream: bool = False) -> dict:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return timing.summarize(times)


def test_the_forced_family_table_times_every_family_and_peer_it_can(families, tmp_path, monkeypatch):
    from standin import torch_cuda

    torch_cuda.install(monkeypatch)
    monkeypatch.setattr(timing, "GpuTimer", WallTimer)
    monkeypatch.setattr(lease, "forced_shapes", lambda: [(2, 4096, 16, "float32")])
    monkeypatch.setattr(lease, "FORCED_PEERS", ("torch", "cub"))
    assert families.run_table(str(tmp_path / "M6.csv"), 100, False) == 0
    rows = _rows(tmp_path / "M6.csv")
    facts = families.device_facts()
    names = [r["route"] for r in rows]
    assert names == [
        *families.families_for((2, 4096, 16, "float32"), facts),
        "torch",
        "cub",
        "(graph replay)",
    ]
    timed = [r["route"] for r in rows if r["median_us"] and float(r["median_us"]) > 0]
    assert timed == names[:-2] or timed == names[:-1], rows  # every family and torch; cub where built
    assert all(r["note"].startswith("skipped") for r in rows if not r["median_us"] and r["timing"] == "eager")
    assert rows[-1]["note"] == "not built: issue 50 item 2"


def test_the_host_calls_give_calls_per_second_or_say_why_not(families, tmp_path, monkeypatch):
    from standin import torch_cuda

    torch_cuda.install(monkeypatch)
    monkeypatch.setattr(families, "HOST_SHAPES", ((1, 4096, 16, "float32"),))
    monkeypatch.setattr(families, "HOST_CALLS", 3)
    assert families.run_host(str(tmp_path / "M7.csv"), False) == 0
    rows = {r["route"]: r for r in _rows(tmp_path / "M7.csv")}
    assert list(rows) == ["cutopk-cupy", "cutopk-torch-op", "torch", "flashinfer", "flashinfer-unsorted"]
    for name in ("cutopk-cupy", "cutopk-torch-op", "torch"):
        assert float(rows[name]["calls_per_s"]) > 0, rows[name]
    assert all(rows[n]["calls_per_s"] or rows[n]["note"] for n in rows)


def test_the_sanitizers_target_checks_each_family_bit_for_bit(families, monkeypatch, capsys):
    shapes = (("split", (1, 8192, 16, "float32")), ("multiblock", (1, 1 << 16, 16, "float32")))
    monkeypatch.setattr(families, "CHECKS", shapes)
    assert families.run_check(False) == 0
    out = capsys.readouterr().out
    assert out.count(": bit-exact") == 2


def test_the_profiled_window_holds_one_call_of_each_kernel(families, monkeypatch, capsys):
    import cupy

    events: list[str] = []
    monkeypatch.setattr(cupy.cuda.runtime, "profilerStart", lambda: events.append("start"), raising=False)
    monkeypatch.setattr(cupy.cuda.runtime, "profilerStop", lambda: events.append("stop"), raising=False)
    monkeypatch.setattr(
        families, "PROFILE", (("cutopk", (1, 4096, 16, "float32")), ("cutopk", (2, 8192, 64, "float32")))
    )
    assert families.run_profile(False) == 0
    assert events == ["start", "stop", "start", "stop"]
    assert capsys.readouterr().out.count("profiled cutopk") == 2


def test_the_counting_primitives_run_through_cupy(tmp_path, monkeypatch):
    require("cuda")
    cp = _script("count_primitives")
    monkeypatch.setattr(
        cp, "plan", lambda: [("match", 1), ("count_digit", 13), ("atomic", 3), ("ballot_add", 32)]
    )
    assert cp.main(["--iters", "2", "--out", str(tmp_path / "M2.csv")]) == 0
    rows = _rows(tmp_path / "M2.csv")
    assert [(r["primitive"], r["distinct"]) for r in rows] == [
        ("match", "1"),
        ("count_digit", "13"),
        ("atomic", "3"),
        ("ballot_add", "32"),
    ]
    assert all(r["counted"] == "ok" for r in rows)
