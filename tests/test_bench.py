"""The benchmark's own logic, on the CPU: the grid, the input distributions, the answer checker,
timing, the output files, the GPU code path on a stand-in CuPy, and `python -m cutopk` end to end."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import types

import numpy as np
import pytest

import cutopk
from cutopk._bench import baselines, check, env, grid, inputs, plots, report, runner, timing

HAS_TORCH = baselines.missing("torch") is None
HAS_MPL = baselines.missing("matplotlib") is None


# --- grid -------------------------------------------------------------------------------------


def test_full_grid_has_every_regime_product_and_the_sampled_axes():
    cases = grid.full_grid()
    base = [c for c in cases if c.is_baseline_axis]
    sizes = {"moe": 3 * 4 * 4, "llm": 5 * 4 * 4, "indexer": 3 * 3 * 2, "knn": 3 * 3 * 4, "huge": 3 * 4}
    for name, size in sizes.items():
        assert len([c for c in base if c.regime == name]) == size, name
    assert all(c.k <= c.n for c in cases)
    assert all(c.mode == "smallest" for c in cases if c.regime == "knn")
    assert {c.dist for c in cases} == set(grid.DISTRIBUTIONS)
    assert {c.dtype for c in cases} == set(grid.DTYPES)
    assert {c.layout for c in cases} == set(grid.LAYOUTS)
    assert len(set(cases)) == len(cases)  # no case measured twice


def test_quick_grids():
    cpu, gpu = grid.quick_grid(gpu=False), grid.quick_grid(gpu=True)
    assert sum(c.elements for c in cpu) < 16_000_000  # scaled down: seconds on a laptop
    for cases in (cpu, gpu):
        assert {c.regime for c in cases} >= {*grid.REGIMES, "layout"}
        assert {c.dtype for c in cases} > {"float32"} and {c.dist for c in cases} > {"uniform"}
        assert {c.layout for c in cases} > {"rows"}
    assert [c.regime for c in grid.select(gpu, ["knn"])] == ["knn"]
    with pytest.raises(ValueError, match="unknown"):
        grid.select(gpu, ["nope"])


# --- inputs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("mode", ["largest", "smallest"])
def test_ties_at_k_ties_a_third_of_each_row_with_the_kth_value(dtype, mode):
    case = grid.Case("t", 16, 3000, 40, mode, dtype=dtype, dist="ties_at_k")
    x = inputs.values(case).astype(np.float32)
    kth = np.sort(x, axis=1)[:, -case.k if mode == "largest" else case.k - 1]
    share = (x == kth[:, None]).mean(axis=1)
    assert (share > 0.3).all() and x.dtype == np.float32


def test_special_value_fractions_and_orders():
    nan = inputs.values(grid.Case("t", 64, 2000, 10, dist="nan"))
    assert abs(np.isnan(nan).mean() - inputs.NAN_FRACTION) < 0.01
    inf = inputs.values(grid.Case("t", 64, 2000, 10, dist="inf"))
    assert abs((inf == np.inf).mean() - inputs.INF_FRACTION) < 0.01
    assert abs((inf == -np.inf).mean() - inputs.INF_FRACTION) < 0.01
    assert (np.diff(inputs.values(grid.Case("t", 4, 500, 1, dist="sorted")), axis=1) >= 0).all()
    assert (np.diff(inputs.values(grid.Case("t", 4, 500, 1, dist="reversed")), axis=1) <= 0).all()
    assert (inputs.values(grid.Case("t", 4, 500, 1, dist="all_equal")) == 0.5).all()
    uniform = inputs.values(grid.Case("t", 4, 500, 1, dtype="float16"))
    assert uniform.dtype == np.float16 and (uniform >= 0).all() and (uniform <= 1).all()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_narrow_values_share_their_leading_bits(dtype):
    x = inputs.values(grid.Case("t", 8, 1000, 1, dtype=dtype, dist="narrow"))
    b = x.view(f"u{x.itemsize}")
    assert (b >> 6 == b[0, 0] >> 6).all()  # only the lowest six bits vary
    assert len(np.unique(b)) == inputs.NARROW_LEVELS


def test_layouts():
    case = grid.Case("t", 8, 100, 3)
    x = inputs.values(case)
    a, axis = inputs.arrange(x, dataclasses.replace(case, layout="axis0"))
    assert (a.shape, axis, a.flags.c_contiguous) == ((100, 8), 0, True)
    a, axis = inputs.arrange(x, dataclasses.replace(case, layout="transposed"))
    assert (a.shape, axis, a.flags.c_contiguous, a.strides[1]) == ((8, 100), 1, False, 8 * 4)
    a, axis = inputs.arrange(x, dataclasses.replace(case, layout="middle"))
    assert (a.ndim, a.shape[axis], axis) == (3, 100, 1)
    a, axis = inputs.arrange(x, case)
    assert a is x and axis == 1


# --- checker and routes -----------------------------------------------------------------------


def test_checker_accepts_other_tie_breaks_and_catches_wrong_answers():
    x = np.array([[3.0, 1.0, 3.0, 2.0]], dtype=np.float32)
    want = cutopk.top_k(x, 2).values
    ok = (np.array([[3.0, 3.0]], np.float32), np.array([[2, 0]]))
    assert check.check(x, -1, want, ok) is None
    wrong_value = (np.array([[3.0, 2.0]], np.float32), np.array([[0, 3]]))
    assert "values differ" in check.check(x, -1, want, wrong_value)
    wrong_index = (np.array([[3.0, 3.0]], np.float32), np.array([[0, 1]]))
    assert "indices do not point" in check.check(x, -1, want, wrong_index)
    assert "out of range" in check.check(x, -1, want, (ok[0], np.array([[0, 9]])))
    assert "dtype" in check.check(x, -1, want, (ok[0].astype(np.float64), ok[1]))
    want3 = cutopk.top_k(x, 3).values
    unsorted = (np.array([[2.0, 3.0, 3.0]], np.float32), np.array([[3, 0, 2]]))
    assert "values differ" in check.check(x, -1, want3, unsorted, sorts=True)
    assert check.check(x, -1, want3, unsorted, sorts=False) is None


def test_checker_is_bit_exact_but_every_nan_is_one_value():
    x = np.array([[-0.0, 1.0]], dtype=np.float32)
    want = np.array([[1.0, -0.0]], np.float32)
    assert "values differ" in check.check(
        x, -1, want, (np.array([[1.0, 0.0]], np.float32), np.array([[1, 0]]))
    )
    other_nan = np.array([0x7FC00001], np.uint32).view(np.float32)[0]
    y = np.array([[other_nan, 1.0]], dtype=np.float32)
    assert check.check(y, -1, np.array([[np.nan]], np.float32), (y[:, :1], np.array([[0]]))) is None


ROUTES = [baselines.numpy_naive_route, baselines.numpy_sort_route]


@pytest.mark.parametrize("dist", grid.DISTRIBUTIONS)
@pytest.mark.parametrize("mode", ["largest", "smallest"])
@pytest.mark.parametrize("layout", ["rows", "axis0", "transposed"])
def test_cpu_routes_agree_with_cutopk(dist, mode, layout):
    case = grid.Case("t", 6, 300, 7, mode, dist=dist, layout=layout)
    x, axis = inputs.arrange(inputs.values(case), case)
    routes = [r(x, axis, case.k, mode) for r in ROUTES]
    if HAS_TORCH:
        routes.append(baselines.torch_route(x, axis, case.k, mode, "float32"))
    if baselines.missing("jax") is None:
        routes.append(baselines.jax_route(x, axis, case.k, mode, dist, "float32"))
    for route in (r for r in routes if r.call is not None):
        want = cutopk.top_k(x, case.k, axis=axis, mode=mode, nan=route.nan).values
        assert check.check(x, axis, want, route.call(), route.sorts) is None, route.name


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_route_takes_bfloat16():
    case = grid.Case("t", 4, 200, 5, dtype="bfloat16", dist="nan")
    x, axis = inputs.arrange(inputs.values(case), case)
    want = cutopk.top_k(x, 5, axis=axis, nan="largest").values
    assert check.check(x, axis, want, baselines.torch_route(x, axis, 5, "largest", "bfloat16").call()) is None


def test_a_wrong_peer_is_reported_as_a_mismatch_without_a_time(monkeypatch):
    def broken(x, axis, case, gpu):
        good = baselines.numpy_naive_route(x, axis, case.k, case.mode)
        off = baselines.Route(
            "off-by-one", lambda: baselines.numpy_naive_route(x, axis, case.k + 1, case.mode).call()
        )
        shifted = baselines.Route("shifted", lambda: (good.call()[0], (good.call()[1] + 1) % case.n))
        return [good, off, shifted]

    monkeypatch.setattr(baselines, "peers", broken)
    session = runner.Session(False, timing.CpuTimer(repeat=3))
    result = runner.measure(grid.Case("t", 4, 500, 5), session)
    assert result["peers"]["numpy-naive"]["status"] == "ok"
    for name in ("off-by-one", "shifted"):
        assert result["peers"][name]["status"] == "mismatch" and "median_ms" not in result["peers"][name]


def test_an_unsorted_peer_is_compared_as_a_multiset_and_the_files_say_so(monkeypatch):
    def unordered(x, axis, case, gpu):
        good = baselines.numpy_naive_route(x, axis, case.k, case.mode)

        def call():
            v, i = good.call()
            return v[..., ::-1], i[..., ::-1]  # the K in the opposite order

        return [baselines.Route("rev", call, sorts=False, detail="reversed"),
                baselines.Route("rev-claims-sorted", call)]  # fmt: skip

    monkeypatch.setattr(baselines, "peers", unordered)
    result = runner.measure(grid.Case("t", 4, 500, 5), runner.Session(False, timing.CpuTimer(repeat=3)))
    rev = result["peers"]["rev"]
    assert (rev["status"], rev["route"], rev["sorted"]) == ("ok", "reversed", False)
    assert result["peers"]["rev-claims-sorted"]["status"] == "mismatch"
    assert "rev's K are unsorted, its times exclude the sort" in runner.summary([result], ["rev"])[0]


# --- timing -----------------------------------------------------------------------------------


def test_cpu_timer_adapts_repetitions_to_its_budget():
    timer = timing.CpuTimer(repeat=9, min_repeat=3, budget=0.05)
    assert timer(lambda: None)["repeat"] == 9
    slow = timer(lambda: sum(range(300_000)) and None)
    assert 3 <= slow["repeat"] <= 9
    stats = timing.summarize([3.0, 1.0, 2.0, 10.0])
    assert (stats["median"], stats["min"], stats["max"]) == (2.5, 1.0, 10.0)
    assert stats["q1"] <= stats["median"] <= stats["q3"]


# --- output -----------------------------------------------------------------------------------


def test_measure_write_and_plot(tmp_path):
    session = runner.Session(False, timing.CpuTimer(repeat=3))
    results = [runner.measure(grid.Case("moe", 64, 128, 4), session),
               runner.measure(grid.Case("llm", 2, 3000, 20, dist="nan"), session)]  # fmt: skip
    r = results[0]
    assert r["cutopk"]["median_ms"] > 0 and r["gbps"] > 0 and r["algorithm"] == "select"
    assert r["peers"]["numpy-sort"]["status"] == "ok" and r["peers"]["numpy-sort"]["speedup"] > 0
    meta = env.metadata(False) | {"peers": ["numpy-naive", "numpy-sort", "torch"]}
    files = report.write(results, meta, tmp_path, "quick")
    data = json.loads(files[0].read_text())
    for key in ("date", "numpy", "cpu", "git_commit", "backend", "python", "torch", "jax", "cupy"):
        assert key in data["meta"], key
    assert data["meta"]["backend"] == "numpy" and len(data["results"]) == 2
    text = files[1].read_text()
    assert (
        text.startswith("# date: ")
        and "\nregime,rows,n,k,mode,dtype,dist,layout,algorithm,cutopk_ms," in text
    )
    assert "numpy-sort_speedup" in text
    if HAS_MPL:
        pngs = plots.plot(results, meta["peers"], tmp_path, "quick")
        assert [p.name for p in pngs] == ["quick-speedup.png"] and pngs[0].stat().st_size > 1000


def test_plots_are_skipped_with_a_message_without_matplotlib(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert plots.plot([], ["torch"], tmp_path, "quick") == []
    assert "matplotlib is not installed: no plots" in capsys.readouterr().out


def test_table_prints_rows_notes_and_summary(capsys):
    session = runner.Session(False, timing.CpuTimer(repeat=3))
    result = runner.measure(grid.Case("moe", 64, 128, 4), session)
    result["peers"]["torch"] = {"status": "skipped", "note": "torch is not installed"}
    table = report.Table(["numpy-naive", "numpy-sort", "torch"], gpu=False, total=1)
    table.header()
    table.row(0, result)
    table.footer(runner.summary([result], ["numpy-naive"]))
    out = capsys.readouterr().out
    assert "moe 64x128 k=4 largest" in out and "| skip" in out
    assert "torch: skipped: torch is not installed" in out and "geometric mean over 1 cases" in out


def test_default_out_dir_names_date_and_device():
    meta = {"date": "2026-11-22T10:00:00+00:00", "device": "NVIDIA H100 80GB HBM3", "cpu": "x"}
    out = env.default_out_dir(meta)
    assert out.name == "2026-11-22-nvidia-h100-80gb-hbm3" and out.parent.name == "results"


def test_cases_that_do_not_fit_are_skipped_and_said_so(monkeypatch, capsys):
    monkeypatch.setattr(runner, "_free_host_bytes", lambda: 1 << 20)
    assert "host memory" in runner.does_not_fit(grid.Case("t", 1024, 1024, 1), gpu=False)
    assert runner.does_not_fit(grid.Case("t", 16, 1024, 1), gpu=False) is None
    results = runner.run(regimes=["huge"], repeat=3)
    assert results == [] and "case skipped: needs about" in capsys.readouterr().out


# --- the GPU code path on a stand-in CuPy (NumPy arrays, fake events) ---------------------------


def fake_cupy(devices: int = 1, broken: bool = False) -> types.ModuleType:
    """Just enough of CuPy's API for the runner: arrays are NumPy's, events read the host clock."""
    import time

    cp = types.ModuleType("cupy")
    for name in ("asarray", "ascontiguousarray", "empty", "empty_like", "ones", "copyto", "argsort",
                 "take_along_axis", "float32", "uint8", "uint16", "arange"):  # fmt: skip
        setattr(cp, name, getattr(np, name))
    cp.ndarray = np.ndarray
    cp.RawKernel = lambda source, name: lambda grid, block, args: None  # the timer's spin kernel

    def count():
        if broken:
            raise RuntimeError("cudaErrorInsufficientDriver")
        return devices

    class Event:
        def record(self):
            self.t = time.perf_counter()

        def synchronize(self):
            pass

    class Device:
        id, compute_capability = 0, "90"

        def __init__(self, *args):
            self.attributes = {"L2CacheSize": 1 << 16}

        def synchronize(self):
            pass

    pool = types.SimpleNamespace(free_all_blocks=lambda: None, free_bytes=lambda: 0)
    props = {"name": b"FakeGPU", "multiProcessorCount": 2, "totalGlobalMem": 1 << 33, "l2CacheSize": 1 << 16}
    runtime = types.SimpleNamespace(getDeviceCount=count, getDeviceProperties=lambda i: props,
                                    driverGetVersion=lambda: 13000, runtimeGetVersion=lambda: 13000,
                                    memGetInfo=lambda: (1 << 32, 1 << 33))  # fmt: skip
    cp.cuda = types.SimpleNamespace(runtime=runtime, Device=Device, Event=Event,
                                    get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3)  # fmt: skip
    cp.get_default_memory_pool = lambda: pool
    return cp


def test_gpu_detection_never_raises(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(broken=True))
    assert "cannot use a GPU" in env.gpu_unavailable()
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(devices=0))
    assert env.gpu_unavailable() == "CuPy found no GPU"
    no_compiler = fake_cupy()
    no_compiler.arange = lambda n: (_ for _ in ()).throw(RuntimeError("nvrtc: libnvrtc.so not found"))
    monkeypatch.setitem(sys.modules, "cupy", no_compiler)
    assert "cannot run a kernel" in env.gpu_unavailable()
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    assert env.gpu_unavailable() is None
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    assert env.gpu_unavailable() == "CuPy is not installed"


def test_gpu_path_on_a_stand_in_cupy(monkeypatch, tmp_path, capsys):
    """Runs the GPU branch end to end (detection, copy bandwidth, events, self-check, peers,
    files) with NumPy arrays behind a fake CuPy: catches mistakes in code this machine cannot
    otherwise run. It says nothing about real GPU timings."""
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    for var in ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION"):
        monkeypatch.delenv(var, raising=False)
    small = [grid.Case("moe", 64, 128, 4), grid.Case("llm", 2, 4000, 50, dtype="float16", dist="nan"),
             grid.Case("llm", 2, 4000, 50, dtype="bfloat16"),
             grid.Case("layout", 32, 256, 8, layout="transposed")]  # fmt: skip
    monkeypatch.setattr(grid, "quick_grid", lambda gpu: small)
    monkeypatch.setattr(env, "default_out_dir", lambda meta: tmp_path)  # not the checkout's results/
    results = runner.run(plots=True, repeat=3)  # a GPU run from a checkout saves by default
    out = capsys.readouterr().out
    assert "GPU found: FakeGPU" in out and "copy bandwidth measured now" in out
    assert len(results) == 4
    for r in results:
        assert r["self_check"] == "ok" and r["bandwidth_pct"] > 0
        assert r["peers"]["cupy"]["status"] == "ok"
        assert r["peers"]["jax"]["status"] in ("ok", "skipped")
        if HAS_TORCH:
            assert r["peers"]["torch"]["status"] == "ok", r["peers"]["torch"]
    meta = json.loads((tmp_path / "quick.json").read_text())["meta"]
    assert meta["device"] == "FakeGPU" and meta["backend"] == "cuda" and meta["copy_gbps"] > 0
    assert meta["timer"]["clock"] == "cuda events" and meta["timer"]["spin_ms"] == 1.0
    pngs = {"quick-speedup.png", "quick-bandwidth.png"} if HAS_MPL else set()
    assert {p.name for p in tmp_path.iterdir()} >= {"quick.csv", *pngs}


# --- the command ------------------------------------------------------------------------------


def test_python_m_cutopk_runs(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "cutopk", "--quick", "--regime", "moe,llm", "--repeat", "3", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "no GPU found" in proc.stdout or "GPU found" in proc.stdout
    assert "moe 16384x128 k=8" in proc.stdout and "geometric mean" in proc.stdout
    assert (tmp_path / "quick-moe-llm.json").exists() and (tmp_path / "quick-moe-llm.csv").exists()


def test_unknown_peer_is_an_error():
    with pytest.raises(SystemExit):
        runner.main(["--peers", "nope"])


def test_python_m_cutopk_lists_the_full_grid():
    proc = subprocess.run([sys.executable, "-m", "cutopk", "--full", "--list"], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    last = proc.stdout.strip().splitlines()[-1]
    if env.gpu_unavailable() is None:
        assert last == f"{len(grid.full_grid())} cases"
    else:  # what a CPU run measures: the full grid without its cases of more than 2**24 elements
        kept = sum(c.elements <= runner.CPU_FULL_MAX_ELEMENTS for c in grid.full_grid())
        assert (
            last == f"{kept} cases ({len(grid.full_grid()) - kept} more left out by --max-elements 16777216)"
        )


@pytest.mark.gpu
def test_gpu_benchmark_quick_run(tmp_path):
    if env.gpu_unavailable() is not None:
        pytest.skip(f"no GPU: {env.gpu_unavailable()}")
    results = runner.run(regimes=["moe"], out=tmp_path, repeat=3)
    assert results and all(r["bandwidth_pct"] for r in results)
    assert all(r["self_check"] == "ok" for r in results)


def test_a_wrong_cutopk_answer_on_the_gpu_path_is_flagged_and_peers_keep_their_times(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())

    def wrong_rule(x, axis, k, mode, nan="largest"):  # NaN last instead of first: a wrong answer
        return baselines.Route("cutopk", lambda: cutopk.top_k(x, k, axis=axis, mode=mode, nan="last"))

    monkeypatch.setattr(baselines, "cutopk_route", wrong_rule)
    session = runner.Session(True, timing.GpuTimer(repeat=3), copy_bps=1e9)
    result = runner.measure(grid.Case("llm", 2, 3000, 20, dist="nan"), session)
    assert result["self_check"].startswith("mismatch: values differ")
    assert result["peers"]["cupy"]["status"] == "ok"
    table = report.Table(["torch", "jax", "cupy"], gpu=True, total=1)
    table.row(0, result)
    table.footer(runner.summary([result], ["cupy"]))
    out = capsys.readouterr().out
    assert "WRONG" in out and "differs from its NumPy backend's on 1 cases" in out


# --- command-line options (issue 19, item 10) ---------------------------------------------------


def _fails_with(argv: list[str], capsys, *needles: str) -> str:
    """``main(argv)`` stops with argparse's usage error (exit 2, no traceback) naming ``needles``."""
    with pytest.raises(SystemExit) as exc:
        runner.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def no_measuring(monkeypatch):
    """Any case measured fails the test: the options must be refused before the benchmark runs."""

    def measure(case, session):
        raise AssertionError(f"a case was measured: {case.label()}")

    monkeypatch.setattr(runner, "measure", measure)


def test_unknown_regime_is_a_usage_error(capsys, no_measuring):
    _fails_with(["--regime", "foo"], capsys, "--regime", "foo", "moe")
    _fails_with(["--regime", "moe,nope"], capsys, "nope")


@pytest.mark.parametrize("option", ["--repeat", "--max-elements", "--time-limit"])
@pytest.mark.parametrize("value", ["0", "-3"])
def test_counts_and_limits_must_be_positive(option, value, capsys, no_measuring):
    _fails_with([option, value], capsys, option, value)


def test_out_to_an_unwritable_place_fails_before_any_case(tmp_path, capsys, no_measuring):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _fails_with(["--out", str(blocker / "results")], capsys, "--out", "cannot write")
    _fails_with(["--out", str(blocker)], capsys, "--out", "cannot write")


def test_save_without_out_checks_its_folder_before_any_case(tmp_path, monkeypatch, capsys, no_measuring):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(env, "results_base", lambda: blocker / "results")
    _fails_with(["--save"], capsys, "--save", "cannot write")


@pytest.mark.parametrize(
    "pair", [["--save", "--no-save"], ["--out", "{}", "--no-save"], ["--out", "{}", "--save"]]
)
def test_save_options_exclude_each_other(pair, tmp_path, capsys, no_measuring):
    _fails_with([a.format(tmp_path) for a in pair], capsys, "not allowed with")


@pytest.mark.parametrize("out", ["", " "])
def test_an_empty_out_path_is_a_usage_error(out, tmp_path, monkeypatch, capsys, no_measuring):
    monkeypatch.chdir(tmp_path)
    _fails_with(["--out", out], capsys, "--out", "expected a folder, got an empty path")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("listing", [[], ["--list"]])
def test_peers_are_checked_before_anything_else(listing, capsys, no_measuring):
    _fails_with(["--peers", "nosuch", *listing], capsys, "--peers: unknown ['nosuch']")
    _fails_with(["--peers", "nosuch", "--regime", "nope", *listing], capsys, "--peers: unknown")


def test_plots_without_files_to_write_is_a_usage_error(capsys, no_measuring):
    _fails_with(["--plots", "--no-save"], capsys, "--plots: no plot can be written with --no-save")


def test_list_honours_max_elements(capsys):
    assert runner.main(["--full", "--list", "--max-elements", "100000"]) == 0
    out = capsys.readouterr().out.splitlines()
    listed = out[:-1]
    full = grid.full_grid()
    kept = [c for c in full if c.elements <= 100000]
    assert listed == [c.label() for c in kept] and 0 < len(kept) < len(full)
    assert out[-1] == f"{len(kept)} cases ({len(full) - len(kept)} more left out by --max-elements 100000)"


def test_a_requested_peer_that_cannot_run_is_an_error_not_a_silent_drop(monkeypatch, capsys, no_measuring):
    real = baselines.missing
    # torch as if installed, whether it is or not: in "torch,cub" below, cub is the peer that
    # cannot run (the check is of the behaviour, not of which absent peer is named first).
    fake = {"jax": "jax is not installed", "torch": None}
    monkeypatch.setattr(baselines, "missing", lambda m: fake[m] if m in fake else real(m))
    monkeypatch.setattr(env, "gpu_unavailable", lambda: None)  # a GPU run, where jax is a peer
    _fails_with(["--peers", "jax"], capsys, "--peers", "jax is not installed")
    from cutopk._bench import cub

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    monkeypatch.setattr(cub, "available", lambda arch: (None, f"the CUB shim is not built for {arch}"))
    _fails_with(["--peers", "torch,cub"], capsys, "--peers: cub cannot run here", "not built for sm_90")
    monkeypatch.setattr(env, "gpu_unavailable", lambda: "CuPy is not installed")  # a CPU run
    _fails_with(["--peers", "cupy"], capsys, "--peers", "cupy", "GPU")


def test_save_from_an_installed_package_goes_where_help_says(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(env, "in_checkout", lambda: False)
    monkeypatch.chdir(tmp_path)
    meta = {"date": "2026-11-22T10:00:00+00:00", "device": "NVIDIA H100 80GB HBM3", "cpu": "x"}
    assert env.default_out_dir(meta) == tmp_path / "cutopk-results" / "2026-11-22-nvidia-h100-80gb-hbm3"
    with pytest.raises(SystemExit):
        runner.main(["--help"])
    assert "./cutopk-results/<date>-<device>/" in "".join(capsys.readouterr().out.split())  # unwrapped


# --- benchmarks/irregular.py ------------------------------------------------------------------


def _irregular_script(monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_irregular", env.REPO / "benchmarks" / "irregular.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


IRREGULAR_TINY = ["--indexer", "4x64:8,3x50:20", "--segments", "40", "--merge", "2x3x100:5", "--repeat", "1"]


@pytest.fixture
def restore_threads():
    previous = cutopk.set_num_threads(None)
    torch_threads = __import__("torch").get_num_threads() if HAS_TORCH else None
    yield
    cutopk.set_num_threads(previous)
    if HAS_TORCH:
        __import__("torch").set_num_threads(torch_threads)


def test_irregular_benchmark_checks_every_route_and_saves(monkeypatch, tmp_path, capsys, restore_threads):
    """Tiny sizes on the NumPy backend: every route runs, every route with an answer has a check
    that passes on it and fails on it once an index is spoiled, and --save writes the tables."""
    irregular = _irregular_script(monkeypatch)
    measure, seen = irregular.measure, {}

    def spoiling_measure(be, routes, repeat):
        for r in routes:
            seen[r.name] = r.check is not None
            if r.check is None:
                continue
            values, indices = (be.host(a).copy() for a in r.fn())
            r.check(r.name, (values, indices))
            indices[-1, 0] = indices[-1, 1]  # the last row is full (its length is N >= K): always checked
            with pytest.raises(irregular.Mismatch):
                r.check(r.name, (values, indices))
        return measure(be, routes, repeat)

    monkeypatch.setattr(irregular, "measure", spoiling_measure)
    assert irregular.main([*IRREGULAR_TINY, "--save", str(tmp_path)]) == 0
    checked = {"lengths", "mask+top_k", "segmented", "pad+top_k", "merge", "shards+merge", "concat+top_k",
               "top_k(whole)"} | ({"mask+torch", "pad+torch"} if HAS_TORCH else set())  # fmt: skip
    parts = {"mask", "pad"} | ({"mask (torch)"} if HAS_TORCH else set())
    assert seen == {**dict.fromkeys(checked, True), **dict.fromkeys(parts, False)}
    (saved,) = tmp_path.iterdir()
    text = saved.read_text()
    assert saved.name.endswith("-cpu-irregular.md") and "nothing here ran on a GPU" in text
    assert text.count("## indexer") == 2 and "## CSR kNN" in text and "## sharded merge" in text
    assert "rows: lengths applied by a masked copy" in text and "load average" in text


def test_irregular_benchmark_stops_on_a_wrong_answer(monkeypatch, restore_threads):
    irregular = _irregular_script(monkeypatch)
    right = cutopk.segmented_top_k

    def off_by_one(data, offsets, k, **kw):  # the last segment's top two swapped
        values, indices = right(data, offsets, k, **kw)
        indices[-1, [0, 1]] = indices[-1, [1, 0]]
        return cutopk.TopK(values, indices)

    monkeypatch.setattr(cutopk, "segmented_top_k", off_by_one)
    with pytest.raises(irregular.Mismatch, match="segmented"):
        irregular.main(IRREGULAR_TINY)
