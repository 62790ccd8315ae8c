"""The benchmark's own logic, on the CPU: the grid, the input distributions, the answer checker,
the output files, and `python -m cutopk` end to end on a tiny grid."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import cutopk
from cutopk._bench import baselines, grid, inputs, report, runner


def test_full_grid_covers_every_regime_and_axis():
    cases = grid.full_grid(max_elements=1 << 40)
    assert {c.regime for c in cases} >= {"moe", "llm", "indexer", "knn", "huge", "layout"}
    assert all(c.k <= c.n for c in cases)
    assert {c.dist for c in cases} == set(grid.DISTRIBUTIONS)
    assert {c.layout for c in cases} >= set(grid.LAYOUTS)
    assert {c.dtype for c in cases} >= {"float32", "float16"}
    assert all(c.mode == "smallest" for c in cases if c.regime == "knn")
    moe = [c for c in cases if c.regime == "moe" and c.dist == "uniform" and c.dtype == "float32"]
    assert len(moe) == 3 * 4 * 4  # the full cartesian product of the MoE regime


def test_memory_limit_drops_large_shapes():
    assert all(c.elements <= 1 << 20 for c in grid.full_grid(max_elements=1 << 20))


def test_quick_grids_are_small():
    assert sum(c.elements for c in grid.quick_grid(gpu=False)) < 50_000_000
    assert {c.regime for c in grid.quick_grid(gpu=True)} >= {"moe", "llm", "indexer", "knn", "huge", "layout"}


def test_distributions_have_their_property():
    case = grid.Case("t", 64, 1000, 10)
    ties = inputs.values(grid.Case("t", 64, 1000, 10, dist="ties_at_k"))
    kth = np.sort(ties, axis=1)[:, -10]
    assert ((ties == kth[:, None]).sum(axis=1) > 200).all()  # about a third of each row
    nan = inputs.values(grid.Case("t", 64, 1000, 10, dist="nan"))
    assert 0.03 < np.isnan(nan).mean() < 0.07
    assert (np.diff(inputs.values(grid.Case("t", 4, 100, 1, dist="sorted")), axis=1) >= 0).all()
    assert (inputs.values(grid.Case("t", 4, 100, 1, dist="all_equal")) == 0.5).all()
    narrow = inputs.values(grid.Case("t", 4, 100, 1, dist="narrow")).view(np.uint32)
    assert (narrow >> 16 == narrow[0, 0] >> 16).all()  # same leading bits
    x = inputs.values(case)
    for layout in ("axis0", "middle", "transposed"):
        arranged, axis = inputs.arrange(x, grid.Case("t", 64, 1000, 10, layout=layout))
        assert arranged.shape[axis] == 1000


def test_checker_accepts_ties_and_catches_wrong_answers():
    x = np.array([[3.0, 1.0, 3.0, 2.0]])
    expected = cutopk.top_k(x, 2).values
    assert baselines.check(x, -1, expected, (np.array([[3.0, 3.0]]), np.array([[2, 0]]))) is None
    assert "different values" in baselines.check(
        x, -1, expected, (np.array([[3.0, 2.0]]), np.array([[0, 3]]))
    )
    assert "indices" in baselines.check(x, -1, expected, (np.array([[3.0, 3.0]]), np.array([[0, 1]])))


def test_numpy_routes_agree_with_cutopk():
    case = grid.Case("t", 8, 500, 7, "smallest", dist="nan")
    x, axis = inputs.arrange(inputs.values(case), case)
    expected = cutopk.top_k(x, 7, axis=axis, mode="smallest", nan="largest").values
    for route in (baselines.numpy_naive_route, baselines.numpy_sort_route):
        assert baselines.check(x, axis, expected, route(x, axis, 7, "smallest")()) is None


def test_measure_and_write(tmp_path):
    case = grid.Case("t", 16, 2000, 5)
    result = runner.measure(case, runner.timing.CpuTimer(repeat=1, warmup=0), gpu=False, copy_bps=None)
    assert result["cutopk_ms"] > 0 and result["peers_ms"]["numpy-naive"] > 0
    files = report.write([result], report.metadata(False), tmp_path, plots=False)
    data = json.loads(files[0].read_text())
    assert data["meta"]["backend"] == "numpy" and "numpy" in data["meta"] and "date" in data["meta"]
    assert (tmp_path / "results.csv").read_text().startswith("regime,rows,n,k")


def test_python_m_cutopk_runs(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "cutopk", "--regime", "moe", "--repeat", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "no GPU found" in proc.stdout or "GPU found" in proc.stdout
    assert "moe" in proc.stdout and "cutopk" in proc.stdout
    assert (tmp_path / "results.json").exists()


@pytest.mark.gpu
def test_gpu_benchmark_quick_run(tmp_path):
    if runner.gpu_available() is not None:
        pytest.skip(f"no GPU: {runner.gpu_available()}")
    results = runner.run(out=tmp_path, regimes=["moe"], repeat=2)
    assert results and all(r["bandwidth_pct"] is not None for r in results)
