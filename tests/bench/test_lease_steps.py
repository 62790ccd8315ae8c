"""The lease's GPU steps run end to end on the CuPy stand-in (launches on the simulator; the torch
CUDA stand-in for torch), on tiny shapes: M1's sanitizer target, M5's profiled window, M6's table,
M7's host calls and M2's launches write what they should, with every answer checked. Their times
are the simulator's, meaningless; what is tested is that each step's code runs and writes its rows."""

from __future__ import annotations

import csv
import pathlib

import pytest
from cutopk_bench import lease
from support.backends import require
from support.scripts import load_benchmark

from cutopk._demo import timing


@pytest.fixture
def families(monkeypatch):
    require("cuda")
    return load_benchmark(monkeypatch, "gpu/families.py", "families")


def _rows(path: pathlib.Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


M6_SHAPE = (2, 3000, 40, "float32")


def _m6_csv(families, tmp_path, monkeypatch) -> pathlib.Path:
    """M6 on one small shape with every peer (those not built here say so), timed by tune's own
    timers at one repetition and one call a captured graph (the simulator is slow). The torch
    peer runs on the torch CUDA stand-in, which needs torch (CI's second run has it)."""
    pytest.importorskip("torch")
    from standin import torch_cuda

    from cutopk._demo import tune

    torch_cuda.install(monkeypatch)
    real = tune.timers

    def quick(modes, repeat=10):
        timers = real(modes, 1)
        for t in timers.values():
            if isinstance(t, timing.GraphTimer):
                t.calls = 1
        return timers

    monkeypatch.setattr(tune, "timers", quick)
    monkeypatch.setattr(lease, "forced_shapes", lambda: [M6_SHAPE])
    path = tmp_path / "M6.csv"
    assert families.run_table(str(path), 100, False) == 0
    return path


def _table_rows(path: pathlib.Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def test_the_forced_family_table_times_every_family_both_ways_with_the_peers_beside(
    families, tmp_path, monkeypatch
):
    rows = _table_rows(_m6_csv(families, tmp_path, monkeypatch))
    every = families.families_for(M6_SHAPE, families.device_facts())
    assert len(every) >= 5, every
    for mode in lease.FORCED_TIMINGS:
        timed = [r for r in rows if r["timing"] == mode and r["algorithm"]]
        assert [r["algorithm"] for r in timed] == every, (mode, rows)
        assert all(r["forced"] == r["algorithm"] and float(r["cutopk_ms"]) > 0 for r in timed)
        # torch timed beside every family, in the same timing; the peers not built here say why
        assert all(r["torch_status"] == "ok" and float(r["torch_median_ms"]) > 0 for r in timed), timed
        for peer in ("cub", "flashinfer", "flashinfer-unsorted"):
            assert all(r[f"{peer}_status"] in ("ok", "skipped") for r in timed)
            assert all(r[f"{peer}_note"] for r in timed if r[f"{peer}_status"] == "skipped")
    assert not [r for r in rows if not r["algorithm"]], "nothing left out on this shape"


def test_the_forced_family_csv_makes_a_dispatch_table_as_it_is(families, tmp_path, monkeypatch):
    """make_dispatch_table reads M6.csv with no conversion: a measurement of every family M6
    timed, each timing apart, scored over torch.topk's time on the same row, and an entry."""
    from cutopk._demo import tabulate

    path = _m6_csv(families, tmp_path, monkeypatch)
    every = set(families.families_for(M6_SHAPE, families.device_facts()))
    for mode in ("eager", "graph"):
        facts, measured = tabulate.read_csv(path, "M6", mode)
        assert {m.family for m in measured} == every and len(measured) == len(every)
        assert all(m.source.startswith("M6: lease 2x3000 k=40 float32") for m in measured)
    assert facts["compute_capability"] == "90" and facts["sm_count"] and facts["git_commit"]
    rows = {r["algorithm"]: r for r in _table_rows(path) if r["timing"] == "graph" and r["algorithm"]}
    (m,) = [m for m in measured if m.family == "radix"]  # graph: the last mode read
    assert m.score == pytest.approx(
        float(rows["radix"]["cutopk_ms"]) / float(rows["radix"]["torch_median_ms"])
    )
    make = load_benchmark(monkeypatch, "make_dispatch_table.py", "make_dispatch_table")
    for mode in ("eager", "graph"):
        (table,) = make.tables([path], mode).values()
        (entry,) = table["entries"]
        assert (entry["rows"], entry["n"], entry["k"], entry["key_bytes"]) == (2, 3000, 40, 4)
        assert set(entry["timed"]) == every and table["timing"] == mode
        assert entry["family"] == min(entry["timed"], key=entry["timed"].get)


def test_the_host_calls_give_calls_per_second_or_say_why_not(families, tmp_path, monkeypatch):
    pytest.importorskip("torch")  # the torch routes run on the torch CUDA stand-in
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
    cp = load_benchmark(monkeypatch, "gpu/count_primitives.py", "count_primitives")
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
