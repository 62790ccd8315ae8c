"""The benchmark's less travelled paths, on the CPU: the torch-only peers and hand-overs (run by
CI's second run, with torch), integer inputs, the recorder's counted copies, the table without
notes, the scoreboard's reference folder and cost fit when their files are missing or odd."""

from __future__ import annotations

import dataclasses
import io
import json

import numpy as np
import pytest
from cutopk_bench import flashinfer as fi
from cutopk_bench import scoreboard, shims
from support.launches import recording_launches

import cutopk
from cutopk._demo import baselines, check, env, grid, inputs, report, runner
from cutopk.cuda import launcher

HAS_TORCH = baselines.missing("torch") is None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")


# --- inputs and the recorder ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_integer_inputs_span_the_dtypes_whole_range(dtype):
    x = inputs.values(grid.Case("t", 4, 1000, 8, dtype=dtype))
    info = np.iinfo(dtype)
    assert x.dtype == np.dtype(dtype) and x.shape == (4, 1000)
    assert x.min() == info.min and x.max() == info.max  # 4000 draws of 256 values: every end hit
    assert len(np.unique(x)) > 200


def test_the_recorder_counts_a_copy_to_contiguous_rows_without_making_it():
    a = np.arange(24.0).reshape(4, 6).T  # F-order: needs a copy
    with recording_launches() as rec:
        xp = launcher.array_module("sim")
        same = xp.ascontiguousarray(np.ones((2, 3)))
        assert rec.allocations == 0 and rec.allocated == []  # already C-contiguous: NumPy's own
        copy = xp.ascontiguousarray(a)
        assert copy.shape == a.shape and copy.dtype == a.dtype and copy.flags.c_contiguous
        assert rec.allocations == 1 and rec.allocated == [a.nbytes]
    assert same.flags.c_contiguous
    with recording_launches(count_allocations=False) as rec:
        launcher.array_module("sim").ascontiguousarray(a)
        assert rec.allocations == 0 and rec.allocated == []


# --- the table -----------------------------------------------------------------------------------


def test_a_table_without_notes_prints_the_summary_only():
    out = io.StringIO()
    table = report.Table(["numpy-sort"], gpu=False, total=0, stream=out)
    table.footer(["0 cases measured, 0 skipped, in 0 s"])
    assert out.getvalue() == "0 cases measured, 0 skipped, in 0 s\n"


# --- the scoreboard's reference run ----------------------------------------------------------------


def test_a_reference_folder_without_csv_files_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"no benchmark CSV files in {tmp_path}"):
        scoreboard.reference_rows(tmp_path)


def _phase(folder, i: int, cases: int, seconds: int, rows: int, csv: bool = True) -> None:
    """A benchmark log that says it measured ``cases`` in ``seconds`` and wrote ``phase<i>``, and
    (``csv``) that CSV file with ``cases`` rows of ``rows`` x 1000 elements."""
    logs = folder / "logs"
    logs.mkdir(exist_ok=True)
    (logs / f"bench-{i}.log").write_text(
        f"{cases} cases measured, 0 skipped, in {seconds} s\nwrote /x/phase{i}.json, /x/phase{i}.csv\n"
    )
    if csv:
        lines = ["# meta: x", "regime,rows,n,k,mode,dtype,dist,layout"]
        lines += [f"t,{rows},1000,{c + 1},largest,float32,uniform,rows" for c in range(cases)]
        (folder / f"phase{i}.csv").write_text("\n".join(lines) + "\n")


def test_phase_logs_leave_out_a_log_whose_csv_file_is_gone(tmp_path):
    _phase(tmp_path, 1, cases=2, seconds=10, rows=1000)
    _phase(tmp_path, 2, cases=3, seconds=20, rows=1000, csv=False)
    (tmp_path / "logs" / "bench-3.log").write_text("interrupted before its summary\n")
    assert scoreboard.phase_logs(tmp_path) == [(2, 2 * 1000 * 1000 / 1e9, 10.0)]


def test_the_cost_fit_needs_three_phases(tmp_path):
    _phase(tmp_path, 1, cases=2, seconds=10, rows=1000)
    _phase(tmp_path, 2, cases=4, seconds=20, rows=1000)
    with pytest.raises(ValueError, match=r"logs: 2 benchmark logs with their CSV files, 3 needed"):
        scoreboard.fit_cost(tmp_path)


def test_the_cost_fit_drops_a_negative_coefficient_and_fits_again(tmp_path):
    # seconds = 12 + 5 * cases - 1000 * gelements exactly: more elements take less time, and the
    # unconstrained fit gives the elements a cost of -1000 s per Gelement, which a model of time
    # cannot have. (Data that fit with a zero cost, as before, left the sign to rounding: OpenBLAS's
    # AVX-512 kernels gave +3.5e-13 and kept it, its Haswell ones -1.7e-18.)
    phases = [(2, 4000), (4, 2000), (6, 1000), (8, 500)]
    for i, (cases, rows) in enumerate(phases):
        seconds = 12 + 5 * cases - cases * rows // 1000
        _phase(tmp_path, i, cases=cases, seconds=seconds, rows=rows)
    logs = scoreboard.phase_logs(tmp_path)
    unconstrained = np.linalg.lstsq(np.array([[1.0, n, g] for n, g, _ in logs]), [s for *_, s in logs])[0]
    assert unconstrained[2] == pytest.approx(-1000)
    model = scoreboard.fit_cost(tmp_path)
    assert (
        model.per_gelement == 0.0 and model.per_case == pytest.approx(5.7) and model.start == pytest.approx(2)
    )
    for cases, _, seconds in logs:
        assert model.start + model.per_case * cases == pytest.approx(seconds, rel=0.1)
    assert model.source == f"4 benchmark phases logged in {tmp_path}"


# --- peers that need torch (CI's second run) ----------------------------------------------------------


class _FakeLibrary:
    """What flashinfer.available hands over where the shim loads."""


@needs_torch
def test_flashinfer_route_says_why_the_shim_is_missing_or_hands_over_to_it(monkeypatch):
    import cupy

    cc = cupy.cuda.Device().compute_capability  # "90" on the stand-in's device 0
    x = np.zeros((4, 3000), np.float32)
    case = grid.Case("llm", 4, 3000, 5)
    monkeypatch.setattr(fi, "available", lambda arch: (None, f"no shim for {arch}"))
    route = shims.flashinfer_route(x, 1, case, sort=True)
    assert (route.name, route.call, route.reason) == ("flashinfer", None, f"no shim for sm_{cc}")
    lib, seen = _FakeLibrary(), []
    monkeypatch.setattr(fi, "available", lambda arch: (lib, None))
    monkeypatch.setattr(fi, "route", lambda *args: seen.append(args) or "the shim's route")
    assert shims.flashinfer_route(x, 1, case, sort=False) == "the shim's route"
    # the major version, and the SMs and opt-in shared bytes (a launch wider than the GPU is refused)
    assert seen == [(x, 1, case, lib, int(cc) // 10, False, (132, 227 * 1024))]


def test_a_flashinfer_peer_asked_for_says_what_it_lacks(monkeypatch):
    monkeypatch.setattr(fi, "available", lambda arch: (None, f"the FlashInfer shim for {arch} is not built"))
    import cupy

    why = shims.KIT.unavailable("flashinfer-unsorted", gpu=True)
    # torch first (FlashInfer's top_k allocates and sorts with it), then the shim.
    arch = f"sm_{cupy.cuda.Device().compute_capability}"
    assert why == (f"the FlashInfer shim for {arch} is not built" if HAS_TORCH else "torch is not installed")


@needs_torch
def test_torch_threads_route_runs_on_the_default_count_and_restores_one_thread(monkeypatch):
    import torch

    x = inputs.values(grid.Case("t", 3, 500, 7, dist="ties_at_k"))
    monkeypatch.setattr(baselines, "_cpus", lambda: 3)
    seen = []
    real_topk = torch.topk
    monkeypatch.setattr(
        torch, "topk", lambda *a, **kw: seen.append(torch.get_num_threads()) or real_topk(*a, **kw)
    )
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        route = baselines.cpu_thread_routes(x, 1, 7, "smallest", "float32")["torch-threads"]()
        assert route.name == "torch-threads"
        values, indices = route.call()
        assert seen == [3] and torch.get_num_threads() == 1  # set for the call only
    finally:
        torch.set_num_threads(before)
    expected = cutopk.top_k(x, 7, mode="smallest")
    np.testing.assert_array_equal(values.numpy(), expected.values)
    np.testing.assert_array_equal(np.sort(indices.numpy(), axis=1), np.sort(expected.indices, axis=1))


@needs_torch
def test_a_cpu_session_puts_torch_on_one_thread_and_the_files_say_so(monkeypatch, tmp_path, capsys):
    import torch

    before = torch.get_num_threads()
    monkeypatch.setattr(env, "gpu_unavailable", lambda: "CuPy is not installed")

    def measure(case, session):
        return {
            "case": dataclasses.asdict(case),
            "label": case.label(),
            "peers": {},
            "cutopk": {"note": "stub"},
        }

    monkeypatch.setattr(runner, "measure", measure)
    torch.set_num_threads(2)
    try:
        runner.run(cases=[grid.Case("t", 2, 100, 3)], out=tmp_path, stem="t")
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    meta = json.loads((tmp_path / "t.json").read_text())["meta"]
    assert meta["torch_threads"] == 1 and meta["peers"] == list(baselines.CPU_PEERS)
    assert "torch.topk on the CPU (1 thread)" in capsys.readouterr().out


def test_the_algorithm_column_of_a_gpu_array_is_the_kernel_plans():
    import cupy

    case = grid.Case("t", 4, 2000, 16)
    x = cupy.asarray(inputs.values(case))
    plan = cutopk.plan(x, 16, nan="largest")
    assert "route" not in plan.params  # a CUDA plan names no NumPy route
    assert runner._algorithm(x, case, 1) == plan.algorithm + ("+copy" if plan.copy else "")


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_route_on_a_gpu_array_reads_it_through_dlpack(monkeypatch, dtype):
    """The GPU peer's hand-over (a zero-copy DLPack view; bfloat16 as its bits, reinterpreted) on
    the torch CUDA stand-in over the CuPy stand-in: torch.topk then runs on the CPU build."""
    import cupy
    from standin import torch_cuda

    torch_cuda.install(monkeypatch)
    case = grid.Case("t", 3, 400, 9, dtype=dtype, dist="ties_at_k")
    host = inputs.values(case)
    route = baselines.torch_route(cupy.asarray(host), 1, 9, "largest", dtype)
    assert route.name == "torch" and route.reason is None
    values, indices = route.call()
    assert values.is_cuda and str(values.dtype) == f"torch.{dtype}"
    expected = cutopk.top_k(host, 9, nan="largest").values
    assert check.check(host, 1, expected, (values, indices), sorts=True) is None
    wrong = values.clone()
    wrong[0, 0] = 0
    assert check.check(host, 1, expected, (wrong, indices), sorts=True) is not None  # the check can fail
