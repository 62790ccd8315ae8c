"""The coverage bar (tools/coverage_check.py) fails below 98% in total or 95% for a CUDA-path
module, and passes data that meets both; it is fed data in the shape `coverage json` writes."""

from __future__ import annotations

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))

import coverage_check

CUDA_PATH_FILES = [
    "cutopk/cuda/launcher.py",
    "cutopk/cuda/shared_memory.py",
    "cutopk/cuda/device.py",
    "cutopk/_interop.py",
    "cutopk/_core/out.py",
    "cutopk/irregular/segmented.py",
    "cutopk/irregular/merge.py",
    "cutopk/dask.py",
]


def summary(percent: float) -> dict:
    return {
        "num_statements": 100,
        "missing_lines": round(100 - percent),
        "num_branches": 10,
        "num_partial_branches": 0,
        "percent_covered": percent,
    }


def data(total: float = 99.0, **percent: float) -> dict:
    """Coverage data with every CUDA-path module at 99% unless ``percent`` says otherwise."""
    files = {name: summary(99.0) for name in [*CUDA_PATH_FILES, "cutopk/numpy/backend.py"]}
    for key, value in percent.items():
        files[f"cutopk/{key}.py"] = summary(value)
    return {
        "meta": {"branch_coverage": True},
        "files": {name: {"summary": s} for name, s in files.items()},
        "totals": {"percent_covered": total},
    }


def test_data_over_both_bars_passes_and_prints_every_module():
    lines, failures = coverage_check.check(data())
    assert failures == []
    assert len(lines) == 1 + len(CUDA_PATH_FILES) + 1 + 1  # header, modules, TOTAL
    assert any(line.startswith("cutopk/numpy/backend.py") and line.endswith("99.00%") for line in lines)
    assert lines[-1].startswith("TOTAL") and "99.00%" in lines[-1]


def test_total_under_98_percent_fails():
    _, failures = coverage_check.check(data(total=97.99))
    assert failures == ["total: 97.99% < 98%"]


def test_cuda_path_module_under_95_percent_fails_but_another_module_does_not():
    _, failures = coverage_check.check(data(**{"cuda/shared_memory": 94.9, "numpy/backend": 50.0}))
    assert failures == ["cutopk/cuda/shared_memory.py: 94.90% < 95% (a CUDA-path module)"]


def test_a_cuda_path_module_missing_from_the_data_fails():
    d = data()
    del d["files"]["cutopk/_core/out.py"]
    _, failures = coverage_check.check(d)
    assert failures == ["cutopk/_core/out.py: no measured file matches this CUDA-path module"]


def test_statement_only_data_is_refused():
    d = data()
    d["meta"]["branch_coverage"] = False
    _, failures = coverage_check.check(d)
    assert failures == ["the coverage data has no branch coverage: run coverage with branch = true"]


def test_command_line_exit_status_and_table(tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(data()))
    bad.write_text(json.dumps(data(**{"irregular/merge": 90.0})))
    assert coverage_check.main([str(good)]) == 0
    assert "cutopk/irregular/merge.py" in capsys.readouterr().out
    assert coverage_check.main([str(bad)]) == 1
    assert "cutopk/irregular/merge.py: 90.00% < 95%" in capsys.readouterr().err
    assert coverage_check.main([str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
