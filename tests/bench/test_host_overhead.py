"""benchmarks/host_overhead.py --only cupy (issue 39): the CuPy path's warm call runs on the thin
stand-in, one launch and two allocations per call on the scoreboard's small rows, with every step
of the profile named. Tiny counts: what is checked is that the tool runs, not its times."""

from __future__ import annotations

import pathlib

import pytest
from support.backends import cuda_is_standin, require
from support.scripts import load_benchmark

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_cupy_path_rows_run_one_launch_and_two_allocations(monkeypatch):
    require("cuda")
    if not cuda_is_standin():
        pytest.skip("the tool installs the CuPy stand-in: not in a session on a real GPU")
    module = load_benchmark(monkeypatch, "host_overhead.py", "bench_host_overhead")
    rows = module.cupy_path_rows(calls=3, repeat=1, profile=True)
    assert len(rows) == len(module.CUPY_SHAPES) * len(module.CUPY_DTYPES) + len(module.CUPY_FORCED)
    for row in rows:
        assert row["allocations"] == 2, row
        assert row["launches"] == (4 if row["algorithm"] == "multiblock" else 1), row
        assert set(row["steps"]) == {label for label, _, _ in module.STEPS} | {module.REST}
    text = module.cupy_report(rows)
    assert "1x8192 k=512 bfloat16" in text and "launch arguments (runner)" in text
