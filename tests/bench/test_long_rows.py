"""benchmarks/long_rows.py: the table of long-row plans (no GPU: counts and bandwidth-implied
times), with simulator-counted bytes beside the plan's on a scaled-down shape."""

from __future__ import annotations

import re

import pytest
from support.scripts import load_benchmark

from cutopk import sim


def _script(monkeypatch):
    return load_benchmark(monkeypatch, "long_rows.py", "bench_long_rows")


def test_long_rows_table_says_no_gpu_and_counts_every_issue_case(monkeypatch, tmp_path, capsys):
    long_rows = _script(monkeypatch)
    out = tmp_path / "long.md"
    assert long_rows.main(["--no-sim", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("No GPU run")
    for case in long_rows.ISSUE_CASES:
        assert f"| {case.rows}x{case.n} k={case.k} {case.dtype} | multiblock |" in text
    assert "none found" in text and "at 3.35 TB/s" in text


def test_long_rows_simulated_bytes_match_the_plan(monkeypatch):
    if not sim.is_available():
        pytest.skip(f"CPU simulator unavailable: {sim.unavailable_reason()}")
    long_rows = _script(monkeypatch)
    cells = long_rows._sim_columns(long_rows.ISSUE_CASES[3], "multiblock", 8192)  # 1 x 8192, k=1
    shape, planned, counted, efficiency = (c.strip() for c in cells.split("|"))
    assert shape == "1x8192 k=1 multiblock"
    planned, counted = (int(re.sub(",", "", v)) for v in (planned, counted))
    assert abs(planned - counted) <= 0.1 * counted
    assert 0 < float(efficiency) < 1
