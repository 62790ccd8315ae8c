"""The benchmark's own logic, on the CPU: the grid, the input distributions, the answer checker,
timing, the output files, the GPU code path on a stand-in CuPy, and `python -m cutopk` end to end."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest
from cutopk_bench import plots, shims
from support.backends import cuda_is_standin, hardware_only
from support.scripts import load_benchmark

import cutopk
from cutopk._core import entry
from cutopk._demo import baselines, check, cli, env, grid, inputs, loop, report, timing

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
    assert [c.regime for c in grid.in_regimes(gpu, ["knn"])] == ["knn"]
    with pytest.raises(ValueError, match="unknown"):
        grid.in_regimes(gpu, ["nope"])


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


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_integer_inputs_span_the_dtypes_whole_range(dtype):
    x = inputs.values(grid.Case("t", 4, 1000, 8, dtype=dtype))
    info = np.iinfo(dtype)
    assert x.dtype == np.dtype(dtype) and x.shape == (4, 1000)
    assert x.min() == info.min and x.max() == info.max  # 4000 draws of 256 values: every end hit
    assert len(np.unique(x)) > 200


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
    def broken(x, axis, case, gpu, only=()):
        good = baselines.numpy_naive_route(x, axis, case.k, case.mode)
        off = baselines.Route(
            "off-by-one", lambda: baselines.numpy_naive_route(x, axis, case.k + 1, case.mode).call()
        )
        shifted = baselines.Route("shifted", lambda: (good.call()[0], (good.call()[1] + 1) % case.n))
        return [good, off, shifted]

    monkeypatch.setattr(baselines, "peers", broken)
    session = loop.Session(False, timing.CpuTimer(repeat=3))
    result = loop.measure(grid.Case("t", 4, 500, 5), session)
    assert result["peers"]["numpy-naive"]["status"] == "ok"
    for name in ("off-by-one", "shifted"):
        assert result["peers"][name]["status"] == "mismatch" and "median_ms" not in result["peers"][name]


def test_an_unsorted_peer_is_compared_as_a_multiset_and_the_files_say_so(monkeypatch):
    def unordered(x, axis, case, gpu, only=()):
        good = baselines.numpy_naive_route(x, axis, case.k, case.mode)

        def call():
            v, i = good.call()
            return v[..., ::-1], i[..., ::-1]  # the K in the opposite order

        return [baselines.Route("rev", call, sorts=False, detail="reversed"),
                baselines.Route("rev-claims-sorted", call)]  # fmt: skip

    monkeypatch.setattr(baselines, "peers", unordered)
    result = loop.measure(grid.Case("t", 4, 500, 5), loop.Session(False, timing.CpuTimer(repeat=3)))
    rev = result["peers"]["rev"]
    assert (rev["status"], rev["route"], rev["sorted"]) == ("ok", "reversed", False)
    assert result["peers"]["rev-claims-sorted"]["status"] == "mismatch"
    # Set against cutopk's sorted=False call, timed for it in the same case (issue 50 item 2).
    assert rev["against"] == "cutopk sorted=False" and "median_ms" in result["cutopk_unsorted"]
    assert rev["speedup"] == pytest.approx(rev["median_ms"] / result["cutopk_unsorted"]["median_ms"])
    line = loop.summary([result], ["rev"])[0]
    assert line.startswith("rev against cutopk sorted=False: cutopk is")


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
    session = loop.Session(False, timing.CpuTimer(repeat=3))
    results = [loop.measure(grid.Case("moe", 64, 128, 4), session),
               loop.measure(grid.Case("llm", 2, 3000, 20, dist="nan"), session)]  # fmt: skip
    r = results[0]
    # The NumPy backend's route for 64 x 128, k=4 (compiled where a C compiler is): the column names it.
    route = cutopk.plan(np.zeros((64, 128), np.float32), 4).params["route"]
    assert r["cutopk"]["median_ms"] > 0 and r["gbps"] > 0 and r["algorithm"] == f"select:{route}"
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
    session = loop.Session(False, timing.CpuTimer(repeat=3))
    result = loop.measure(grid.Case("moe", 64, 128, 4), session)
    result["peers"]["torch"] = {"status": "skipped", "note": "torch is not installed"}
    table = report.Table(["numpy-naive", "numpy-sort", "torch"], gpu=False, total=1)
    table.header()
    table.row(0, result)
    table.footer(loop.summary([result], ["numpy-naive"]))
    out = capsys.readouterr().out
    assert "moe 64x128 k=4 largest" in out and " skip " in out
    assert "torch: skipped: torch is not installed" in out and "geometric mean over 1 cases" in out


def test_a_table_without_notes_prints_the_summary_only():
    out = io.StringIO()
    table = report.Table(["numpy-sort"], gpu=False, total=0, stream=out)
    table.footer(["0 cases measured, 0 skipped, in 0 s"])
    assert out.getvalue() == "0 cases measured, 0 skipped, in 0 s\n"


def test_default_out_dir_names_date_and_device():
    meta = {"date": "2026-11-22T10:00:00+00:00", "device": "NVIDIA H100 80GB HBM3", "cpu": "x"}
    out = env.default_out_dir(meta)
    assert out.name == "2026-11-22-nvidia-h100-80gb-hbm3" and out.parent.name == "results"


def test_cases_that_do_not_fit_are_skipped_and_said_so(monkeypatch, capsys):
    real = loop.os.sysconf
    free = {"SC_AVPHYS_PAGES": 256, "SC_PAGE_SIZE": 4096}  # 1 MiB of host memory free
    monkeypatch.setattr(loop.os, "sysconf", lambda name: free.get(name) or real(name))
    monkeypatch.setattr(env, "gpu_unavailable", lambda: "a CPU run")  # host memory is what is checked
    assert "host memory" in loop.does_not_fit(grid.Case("t", 1024, 1024, 1), gpu=False)
    assert loop.does_not_fit(grid.Case("t", 16, 1024, 1), gpu=False) is None
    results = loop.run(regimes=["huge"], repeat=3)
    assert results == [] and "case skipped: needs about" in capsys.readouterr().out


# --- the GPU code path on a stand-in CuPy (NumPy arrays, fake events) ---------------------------


def fake_cupy(devices: int = 1, broken: bool = False) -> types.ModuleType:
    """Just enough of CuPy's API for the loop: arrays are NumPy's, events read the host clock."""
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
    results = shims.run(plots=True, repeat=3)  # a GPU run from a checkout saves by default
    out = capsys.readouterr().out
    assert "GPU found: FakeGPU" in out and "copy bandwidth measured now" in out
    assert len(results) == 4
    for r in results:
        assert r["self_check"] == "ok" and r["bandwidth_pct"] > 0
        assert r["peers"]["cupy"]["status"] == "ok"
        # jax: timed, skipped on a case, or (not installed) left out of the run with its column
        assert r["peers"].get("jax", {"status": "skipped"})["status"] in ("ok", "skipped")
        assert ("jax" in r["peers"]) == ("jax" not in meta_left_out(tmp_path))
        if HAS_TORCH:
            assert r["peers"]["torch"]["status"] == "ok", r["peers"]["torch"]
    meta = json.loads((tmp_path / "quick.json").read_text())["meta"]
    assert meta["device"] == "FakeGPU" and meta["backend"] == "cuda" and meta["copy_gbps"] > 0
    assert meta["timer"]["clock"] == "cuda events" and meta["timer"]["spin_ms"] == 1.0
    pngs = {"quick-speedup.png", "quick-bandwidth.png"} if HAS_MPL else set()
    assert {p.name for p in tmp_path.iterdir()} >= {"quick.csv", *pngs}


def meta_left_out(folder) -> dict:
    return json.loads((folder / "quick.json").read_text())["meta"]["peers_left_out"]


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


def test_the_demo_has_no_plots_and_imports_no_benchmark():
    """``python -m cutopk`` is the package's demo: it offers no ``--plots`` (benchmarks/run.py does)
    and loads nothing of the benchmark package, which lives outside cutopk."""
    code = (
        "import sys, contextlib, io\n"
        "from cutopk._demo import cli, tune\n"
        "import cutopk.__main__\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        cli.main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('--plots' in out.getvalue(), sorted(m for m in sys.modules if m.startswith('cutopk_bench')))\n"
    )
    env_vars = os.environ | {"PYTHONPATH": "benchmarks"}  # where an import of it would find it
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, env=env_vars
    )
    assert proc.stdout.split() == ["False", "[]"], proc.stdout
    with pytest.raises(SystemExit):  # the benchmark's command line has them
        shims.main(["--help"])


def test_unknown_peer_is_an_error():
    with pytest.raises(SystemExit):
        shims.main(["--peers", "nope"])


def test_python_m_cutopk_lists_the_full_grid():
    proc = subprocess.run([sys.executable, "-m", "cutopk", "--full", "--list"], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    last = proc.stdout.strip().splitlines()[-1]
    if env.gpu_unavailable() is None and not cuda_is_standin():  # the child sees no stand-in
        assert last == f"{len(grid.full_grid())} cases"
    else:  # what a CPU run measures: the full grid without its cases of more than 2**24 elements
        kept = sum(c.elements <= loop.CPU_FULL_MAX_ELEMENTS for c in grid.full_grid())
        assert (
            last == f"{kept} cases ({len(grid.full_grid()) - kept} more left out by --max-elements 16777216)"
        )


@pytest.mark.gpu
def test_gpu_benchmark_quick_run(tmp_path):
    if env.gpu_unavailable() is not None:
        pytest.skip(f"no GPU: {env.gpu_unavailable()}")
    hardware_only("times kernels with CUDA events; test_gpu_path_on_a_stand_in_cupy runs the code path")
    results = loop.run(regimes=["moe"], out=tmp_path, repeat=3)
    assert results and all(r["bandwidth_pct"] for r in results)
    assert all(r["self_check"] == "ok" for r in results)


def test_a_wrong_cutopk_answer_on_the_gpu_path_is_flagged_and_peers_keep_their_times(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())

    def wrong_rule(x, axis, k, mode, nan="largest"):  # NaN last instead of first: a wrong answer
        return baselines.Route("cutopk", lambda: cutopk.top_k(x, k, axis=axis, mode=mode, nan="last"))

    monkeypatch.setattr(baselines, "cutopk_route", wrong_rule)
    session = loop.Session(True, timing.GpuTimer(repeat=3), copy_bps=1e9)
    result = loop.measure(grid.Case("llm", 2, 3000, 20, dist="nan"), session)
    assert result["self_check"].startswith("mismatch: values differ")
    assert result["peers"]["cupy"]["status"] == "ok"
    table = report.Table(["torch", "jax", "cupy"], gpu=True, total=1)
    table.row(0, result)
    table.footer(loop.summary([result], ["cupy"]))
    out = capsys.readouterr().out
    assert "WRONG" in out and "differs from its NumPy backend's on 1 cases" in out


# --- command-line options (issue 19, item 10) ---------------------------------------------------


def _fails_with(argv: list[str], capsys, *needles: str) -> str:
    """``main(argv)`` stops with argparse's usage error (exit 2, no traceback) naming ``needles``."""
    with pytest.raises(SystemExit) as exc:
        shims.main(argv)
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

    monkeypatch.setattr(loop, "measure", measure)


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
    assert shims.main(["--full", "--list", "--max-elements", "100000"]) == 0
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
    from cutopk_bench import cub

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
        shims.main(["--help"])
    assert "./cutopk-results/<date>-<device>/" in "".join(capsys.readouterr().out.split())  # unwrapped


# --- benchmarks/irregular.py ------------------------------------------------------------------


def _irregular_script(monkeypatch):
    return load_benchmark(monkeypatch, "irregular.py", "bench_irregular")


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


# --- checker, environment, table and timers: the paths a plain CPU run does not take ----------


def test_checker_reads_device_and_array_like_answers():
    class DeviceArray:  # CuPy's way to the host: .get()
        def __init__(self, a):
            self.a = a

        def get(self):
            return self.a

    class ArrayLike:  # JAX's: __array__
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    x = np.array([[3.0, 1.0, 3.0, 2.0]], dtype=np.float32)
    want = cutopk.top_k(x, 2).values
    assert check.check(x, -1, want, (DeviceArray(want), ArrayLike(np.array([[2, 0]])))) is None
    assert check.check(x, -1, want, None).startswith("cannot read the answer: TypeError")


def test_checker_catches_an_index_given_twice():
    x = np.array([[3.0, 1.0, 3.0, 2.0]], dtype=np.float32)
    want = cutopk.top_k(x, 2).values
    assert check.check(x, -1, want, (want, np.array([[0, 0]]))) == "an index appears twice in a row"


def test_bits_of_integers_are_their_twos_complement_patterns():
    assert check.bits(np.array([-1, 2, -128], np.int8)).tolist() == [255, 2, 128]


def test_gpu_that_computes_wrong_sums_is_no_gpu(monkeypatch):
    cp = fake_cupy()
    cp.arange = lambda n: np.zeros(n, np.int64)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    assert env.gpu_unavailable() == "CuPy runs kernels on the GPU but computes wrong sums"


@pytest.mark.parametrize("cpuinfo", [OSError("no /proc"), "processor\t: 0\nBogoMIPS\t: 50.00\n"])
def test_cpu_model_falls_back_to_platform_without_a_model_name(monkeypatch, cpuinfo):
    def read_text(self):
        if isinstance(cpuinfo, Exception):
            raise cpuinfo
        return cpuinfo

    monkeypatch.setattr(env.pathlib.Path, "read_text", read_text)
    monkeypatch.setattr(env.platform, "processor", lambda: "")
    monkeypatch.setattr(env.platform, "machine", lambda: "aarch64")
    assert env.cpu_model() == "aarch64"


def test_metadata_outside_a_git_checkout_has_no_commit(monkeypatch, tmp_path):
    monkeypatch.setattr(env, "REPO", tmp_path)  # no .git at all
    meta = env.metadata(False)
    assert meta["git_commit"] is None and meta["git_dirty"] is None
    (tmp_path / ".git").mkdir()  # a .git that git does not accept: the command fails
    assert env._git("rev-parse", "HEAD") is None


class _Terminal:
    """A stream that says it is a terminal and keeps what was written."""

    def __init__(self):
        self.text = ""

    def isatty(self):
        return True

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_table_on_a_terminal_shows_progress_and_replaces_it_with_the_row():
    term = _Terminal()
    table = report.Table([], gpu=False, total=4, stream=term)
    table.progress(1, "moe 64x128 k=4 largest")
    assert term.text.startswith("\r[" + "#" * 7 + "." * 23 + "] 2/4 moe 64x128 k=4 largest")
    failed = {"label": "moe 64x128 k=4 largest", "cutopk": {"note": "RuntimeError: no memory"}, "peers": {}}
    table.row(1, failed)
    assert "\r" + " " * 110 + "\r" in term.text and "FAILED" in term.text
    assert table.notes == {"cutopk: RuntimeError: no memory": ["moe 64x128 k=4 largest"]}


def test_cpu_timer_warms_up_untimed():
    calls = []
    stats = timing.CpuTimer(repeat=3, warmup=2, min_repeat=3, budget=10.0)(lambda: calls.append(1))
    assert stats["repeat"] == 3 and len(calls) == 2 + 3


def test_gpu_timer_without_its_spin_kernel_times_the_host_too(monkeypatch):
    cp = fake_cupy()
    spins, syncs = [], []

    def raw_kernel(source, name):
        raise RuntimeError("nvrtc: cannot compile")

    class Device(cp.cuda.Device):
        def synchronize(self):
            syncs.append(1)

    cp.RawKernel = raw_kernel
    cp.cuda.Device = Device
    monkeypatch.setitem(sys.modules, "cupy", cp)
    timer = timing.GpuTimer(repeat=3, warmup=0, min_repeat=3)
    assert timer.spin is None and loop._timer_record(timer)["spin_ms"] is None
    timer(lambda: spins.append(1))
    assert syncs == [] and len(spins) == 3
    timer(lambda: None, own_stream=True)  # a route on its own stream: the device is synchronized first
    assert len(syncs) == 3


# --- the loop's reports of what could not be measured ------------------------------------------


def test_unknown_free_host_memory_lets_every_case_try(monkeypatch):
    def sysconf(name):
        raise ValueError(f"unrecognized configuration name {name}")

    monkeypatch.setattr(loop.os, "sysconf", sysconf)
    assert loop._free_host_bytes() == 1 << 62
    assert loop.does_not_fit(grid.Case("t", 1 << 20, 1 << 20, 1), gpu=False) is None


def test_case_too_large_for_the_gpu_is_skipped_and_said_so(monkeypatch):
    cp = fake_cupy()
    cp.cuda.runtime.memGetInfo = lambda: (1 << 20, 1 << 33)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    why = loop.does_not_fit(grid.Case("t", 1024, 1024, 1), gpu=True)
    assert why == "needs about 0.0 GiB of GPU memory, 0.0 GiB free"
    assert loop.does_not_fit(grid.Case("t", 16, 1024, 1), gpu=True) is None


def test_releasing_between_gpu_cases_empties_the_pools(monkeypatch):
    cp, freed, emptied = fake_cupy(), [], []
    cp.get_default_memory_pool = lambda: types.SimpleNamespace(free_all_blocks=lambda: freed.append(1))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "torch", None)  # no peer imported torch: it is left alone
    loop._release(True)
    assert freed == [1]
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(empty_cache=lambda: emptied.append(1)))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    loop._release(True)
    loop._release(False)  # the CPU has no pool to release
    assert freed == [1, 1] and emptied == [1]


def test_self_check_skips_large_cases_and_names_wrong_indices():
    case = grid.Case("t", 2, 100, 3)
    x = inputs.values(case)
    right = cutopk.top_k(x, 3, nan="largest")
    assert loop.self_check(x, 1, case, right, limit=100) == ("skipped: more than 100 elements", None)
    swapped = (right.values, right.indices[:, ::-1].copy())
    assert loop.self_check(x, 1, case, swapped, limit=1000)[0] == (
        "mismatch: indices differ from the NumPy backend's"
    )


def test_the_algorithm_column_names_the_cpu_route(monkeypatch):
    """Issue 36 item 11: every CPU case said ``select``, the compiled route's too."""
    from cutopk.numpy import compiled

    long_rows, case = np.zeros((2, 9000), np.float32), grid.Case("t", 2, 9000, 10)
    monkeypatch.setenv(compiled.ENV_VAR, "0")
    assert loop._algorithm(long_rows, case, 1) == "select:filter"
    assert (
        loop._algorithm(np.zeros((64, 128), np.float32), grid.Case("t", 64, 128, 4), 1)
        == "select:small-argsort"  # a small call's own function
    )
    monkeypatch.delenv(compiled.ENV_VAR)
    if compiled.unavailable_reason() is not None:
        pytest.skip(f"the compiled route cannot run here: {compiled.unavailable_reason()}")
    assert loop._algorithm(long_rows, case, 1) == "select:compiled"


def test_the_algorithm_column_of_a_gpu_array_is_the_kernel_plans():
    import cupy

    case = grid.Case("t", 4, 2000, 16)
    x = cupy.asarray(inputs.values(case))
    plan = cutopk.plan(x, 16, nan="largest")
    assert "route" not in plan.params  # a CUDA plan names no NumPy route
    assert loop._algorithm(x, case, 1) == plan.algorithm + ("+copy" if plan.copy else "")


def test_a_plan_that_fails_is_shown_as_a_question_mark(monkeypatch):
    def plan(*args, **kwargs):
        raise RuntimeError("no plan")

    monkeypatch.setattr(entry, "plan", plan)
    assert loop._algorithm(np.zeros((2, 8), np.float32), grid.Case("t", 2, 8, 1), 1) == "? (RuntimeError)"


def test_cutopk_failing_on_a_case_is_a_note_and_the_summary_counts_it(monkeypatch):
    def broken(x, axis, k, mode, nan="largest"):
        return baselines.Route("cutopk", lambda: (_ for _ in ()).throw(MemoryError("out of\nmemory")))

    monkeypatch.setattr(baselines, "cutopk_route", broken)
    result = loop.measure(grid.Case("t", 4, 500, 5), loop.Session(False, timing.CpuTimer(repeat=3)))
    assert result["cutopk"] == {"note": "MemoryError: out of memory"} and result["peers"] == {}
    assert loop.summary([result], ["numpy-sort"]) == ["cutopk failed on 1 cases: ['t 4x500 k=5 largest']"]


def test_session_peers_limit_what_is_measured():
    session = loop.Session(False, timing.CpuTimer(repeat=3), peers=("numpy-sort",))
    result = loop.measure(grid.Case("t", 4, 500, 5), session)
    assert list(result["peers"]) == ["numpy-sort"]


def test_a_peer_that_raises_is_an_error_and_a_mismatch_is_counted(monkeypatch):
    def peers(x, axis, case, gpu, only=()):
        good = baselines.numpy_sort_route(x, axis, case.k, case.mode)
        wrong = baselines.Route("wrong", lambda: (good.call()[0] + 1, good.call()[1]), nan="last")
        return [baselines.Route("raises", lambda: np.take(x, [10**9])), wrong]

    monkeypatch.setattr(baselines, "peers", peers)
    result = loop.measure(grid.Case("t", 4, 500, 5), loop.Session(False, timing.CpuTimer(repeat=3)))
    raised = result["peers"]["raises"]
    assert raised["status"] == "error" and raised["note"].startswith("IndexError: index 1000000000")
    assert loop.summary([result], ["wrong"]) == [
        "wrong: 1 answers differ from cutopk's (see notes): no time reported for them"
    ]


@pytest.mark.parametrize(("name", "need"), [("cupy", 500 * (3 * 4 + 24) * 4), ("jax", 500 * 3 * 8 * 4)])
def test_gpu_peer_that_needs_more_memory_than_is_free_is_skipped(monkeypatch, name, need):
    cp = fake_cupy()
    cp.cuda.runtime.memGetInfo = lambda: (need - 1, 4 * need)  # for JAX 0.75 of the total is more
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    route = baselines.Route(name, lambda: pytest.fail("a skipped peer ran"))
    case = grid.Case("t", 4, 500, 5)
    session = loop.Session(True, timing.CpuTimer(repeat=3))
    x = np.zeros((4, 500), np.float32)
    out = loop._measure_peer(route, case, x, x, 1, {}, {"median": 1.0}, session, 4)
    assert out == {"status": "skipped", "note": f"needs about 0.0 GiB, {(need - 1) / (1 << 30):.1f} GiB free"}
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.1")  # JAX's own pool is the smaller cap
    if name == "jax":
        cp.cuda.runtime.memGetInfo = lambda: (100 * need, 4 * need)
        assert (
            loop._measure_peer(route, case, x, x, 1, {}, {"median": 1.0}, session, 4)["status"] == "skipped"
        )


# --- the CUB peer's facts, and the run loop's limits ---------------------------------------------


def test_cub_facts_only_when_a_cub_peer_may_run(monkeypatch, capsys):
    from cutopk_bench import cub

    assert shims.cub_facts({"compute_capability": "90"}, ("torch",)) is None
    lib = types.SimpleNamespace(version=300500, path="/x/libcutopk_cub.so")
    monkeypatch.setattr(cub, "available", lambda arch: (lib, None) if arch == "sm_90" else (None, "no"))
    facts = shims.cub_facts({"compute_capability": "90"}, ())
    assert facts == {
        "available": True,
        "cub_version": 300500,
        "library": "/x/libcutopk_cub.so",
        "note": cub.NOTE,
    }
    assert "CUB peer: CUB 3.5.0 from /x/libcutopk_cub.so" in capsys.readouterr().out
    assert shims.cub_facts({"compute_capability": "80"}, ("cub",)) == {"available": False, "reason": "no"}


def test_cpu_start_without_torch_says_so(monkeypatch, capsys):
    real = baselines.missing
    monkeypatch.setattr(baselines, "missing", lambda m: "torch is not installed" if m == "torch" else real(m))
    monkeypatch.setattr(env, "gpu_unavailable", lambda: "CuPy is not installed")
    session = loop.start(None, ())
    assert not session.gpu and session.timer.repeat == 7
    assert "no GPU found (CuPy is not installed)" in capsys.readouterr().out


def test_run_refuses_an_unwritable_out_before_measuring(tmp_path, monkeypatch, no_measuring):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ValueError, match=r"^out: cannot write into"):
        loop.run(out=blocker)
    monkeypatch.setattr(env, "results_base", lambda: blocker / "results")
    monkeypatch.setattr(env, "gpu_unavailable", lambda: "CuPy is not installed")
    with pytest.raises(ValueError, match=r"^save: cannot write into"):
        loop.run(regimes=["moe"], save=True)


def _stub_measure(monkeypatch, behaviour):
    """loop.measure replaced: ``behaviour(case)`` returns a result or raises."""
    monkeypatch.setattr(env, "gpu_unavailable", lambda: "CuPy is not installed")

    def measure(case, session):
        return behaviour(case) | {"case": dataclasses.asdict(case), "label": case.label(), "peers": {}}

    monkeypatch.setattr(loop, "measure", measure)


def test_full_cpu_run_leaves_out_the_largest_cases_and_a_time_limit_stops_new_ones(monkeypatch, capsys):
    seen = []
    _stub_measure(monkeypatch, lambda case: seen.append(case) or {"cutopk": {"note": "stub"}})
    results = loop.run(full=True, regimes=["knn"], time_limit=1e-9)
    out = capsys.readouterr().out
    assert "CPU: shapes with more than 2**24 elements are left out of the full grid" in out
    assert results == [] and seen == []
    assert "case skipped: --time-limit 1e-09 s reached" in out


def test_an_interrupted_run_writes_what_it_measured(monkeypatch, tmp_path, capsys):
    count = []

    def behaviour(case):
        count.append(case)
        if len(count) == 2:
            raise RuntimeError("cudaErrorMemoryAllocation")
        if len(count) == 3:
            raise KeyboardInterrupt
        return {"cutopk": {"note": "stub"}}

    _stub_measure(monkeypatch, behaviour)
    monkeypatch.setattr(grid, "quick_grid", lambda gpu: [grid.Case("moe", 4, 64, 2 + i) for i in range(4)])
    results = loop.run(regimes=["moe"], out=tmp_path)
    out = capsys.readouterr().out
    assert len(results) == 1 and "interrupted: writing what was measured" in out
    assert "case failed: RuntimeError: cudaErrorMemoryAllocation" in out
    data = json.loads((tmp_path / "quick-moe.json").read_text())
    assert len(data["results"]) == 1 and data["meta"]["skipped"][0]["reason"].startswith("RuntimeError")


def test_a_count_that_is_not_a_number_is_a_usage_error(capsys, no_measuring):
    _fails_with(["--repeat", "many"], capsys, "--repeat", "expected an integer greater than 0, got 'many'")


def test_cases_for_without_a_limit_keeps_the_whole_quick_grid():
    cases, left_out = cli.cases_for(False, [], False, None)
    assert cases == grid.quick_grid(False) and left_out == []


def test_the_console_script_module_runs_nothing_when_imported():
    import importlib

    from cutopk import _demo

    module = importlib.import_module("cutopk.__main__")
    assert module.main is _demo.main  # the benchmark's command, or `tune` (cli.main otherwise)


# --- the peers' routes: set-up paths a CPU-only machine does not take ---------------------------


def fake_jax(backend: str = "gpu", refuses: bool = False) -> types.ModuleType:
    """Just enough of JAX for ``baselines.jax_route``, on NumPy: ``lax.top_k`` takes the largest K of
    the last axis (ties to the lower index), ``jit`` calls the function as it is."""
    import importlib.machinery

    jax = types.ModuleType("jax")
    jax.__spec__ = importlib.machinery.ModuleSpec("jax", None)  # found by importlib.util.find_spec
    jnp = types.ModuleType("jax.numpy")
    jnp.__spec__ = importlib.machinery.ModuleSpec("jax.numpy", None)

    class Array(np.ndarray):
        def block_until_ready(self):
            return self

    def asarray(a):
        if refuses:
            raise TypeError("unsupported strides")
        return np.asarray(a).view(Array)

    def top_k(a, k):
        order = np.argsort(-a.astype(np.float64), axis=-1, kind="stable")[..., :k]
        return np.take_along_axis(a, order, axis=-1).view(Array), order.view(Array)

    jnp.asarray, jnp.moveaxis = asarray, np.moveaxis
    from ml_dtypes import bfloat16

    jnp.bfloat16 = bfloat16
    jax.numpy = jnp
    jax.default_backend = lambda: backend
    jax.jit = lambda f: f
    jax.dlpack = types.SimpleNamespace(from_dlpack=asarray)
    jax.lax = types.SimpleNamespace(top_k=top_k, bitcast_convert_type=lambda a, dt: a.view(dt))
    return jax


@pytest.fixture
def with_fake_jax(monkeypatch):
    def install(**kw):
        jax = fake_jax(**kw)
        monkeypatch.setitem(sys.modules, "jax", jax)
        monkeypatch.setitem(sys.modules, "jax.numpy", jax.numpy)
        return jax

    return install


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("mode", ["largest", "smallest"])
@pytest.mark.parametrize("layout", ["rows", "axis0", "middle"])
def test_jax_route_moves_the_axis_and_negates_for_the_smallest(with_fake_jax, dtype, mode, layout):
    with_fake_jax()
    case = grid.Case("t", 6, 300, 7, mode, dtype=dtype, layout=layout)
    x, axis = inputs.arrange(inputs.values(case), case)
    route = baselines.jax_route(x, axis, case.k, mode, case.dist, dtype)
    assert route.own_stream and route.sorts
    want = cutopk.top_k(x, case.k, axis=axis, mode=mode, nan="largest").values
    assert check.check(x, axis, want, route.call()) is None


def test_jax_route_is_skipped_with_the_reason(with_fake_jax, monkeypatch):
    x = np.zeros((2, 8), np.float32)
    monkeypatch.setitem(sys.modules, "jax", None)
    monkeypatch.setattr(baselines, "missing", lambda m: f"{m} is not installed")
    assert baselines.jax_route(x, 1, 2, "largest", "uniform").reason == "jax is not installed"
    monkeypatch.undo()
    with_fake_jax()
    assert "-NaN would rank first" in baselines.jax_route(x, 1, 2, "smallest", "nan").reason
    with_fake_jax(backend="cpu")
    device_array = types.SimpleNamespace(shape=(2, 8))  # not NumPy's: a GPU array for JAX to import
    reason = baselines.jax_route(device_array, 1, 2, "largest", "uniform").reason
    assert reason == "JAX has no GPU backend here (its default is cpu)"
    with_fake_jax(refuses=True)
    reason = baselines.jax_route(x, 1, 2, "largest", "uniform").reason
    assert reason == "JAX cannot import this array: TypeError: unsupported strides"


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_route_on_a_gpu_array_with_a_cpu_torch_is_skipped():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this torch has CUDA")
    route = baselines.torch_route(types.SimpleNamespace(shape=(2, 8)), 1, 2, "largest", "float32")
    assert route.call is None and route.reason == f"this torch ({torch.__version__}) has no CUDA"


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_threads_route_runs_on_the_default_count_and_restores_one_thread(monkeypatch):
    import torch

    x = inputs.values(grid.Case("t", 3, 500, 7, dist="ties_at_k"))
    monkeypatch.setattr(baselines.os, "sched_getaffinity", lambda pid: {0, 1, 2})  # three CPUs to use
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


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
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

    monkeypatch.setattr(loop, "measure", measure)
    torch.set_num_threads(2)
    try:
        loop.run(cases=[grid.Case("t", 2, 100, 3)], out=tmp_path, stem="t")
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    meta = json.loads((tmp_path / "t.json").read_text())["meta"]
    assert meta["torch_threads"] == 1 and meta["peers"] == list(baselines.CPU_PEERS)
    assert "torch.topk on the CPU (1 thread)" in capsys.readouterr().out


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
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


def test_torch_routes_without_torch_are_skipped_under_their_own_names(monkeypatch):
    real = baselines.missing
    monkeypatch.setattr(baselines, "missing", lambda m: "torch is not installed" if m == "torch" else real(m))
    x = np.zeros((2, 8), np.float32)
    assert baselines.torch_route(x, 1, 2, "largest", "float32").reason == "torch is not installed"
    threads = baselines.cpu_thread_routes(x, 1, 2, "largest", "float32")["torch-threads"]()
    assert (threads.name, threads.call, threads.reason) == ("torch-threads", None, "torch is not installed")


def test_cpu_count_without_affinity_is_the_machine_count(monkeypatch):
    monkeypatch.delattr(baselines.os, "sched_getaffinity")
    monkeypatch.setattr(baselines.os, "cpu_count", lambda: None)
    assert baselines._cpus() == 1
    monkeypatch.setattr(baselines.os, "cpu_count", lambda: 12)
    assert baselines._cpus() == 12


def test_cub_route_hands_over_to_the_shim_when_it_loads(monkeypatch):
    from cutopk_bench import cub

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    lib = object()
    monkeypatch.setattr(cub, "available", lambda arch: (lib, None))
    seen = []
    monkeypatch.setattr(cub, "route", lambda *args: seen.append(args) or "the shim's route")
    x = np.zeros((2, 8), np.float32)
    assert shims.cub_route(x, 1, 2, "largest", "float32", sort=True) == "the shim's route"
    assert seen == [(x, 1, 2, "largest", "float32", lib, True)]
    assert baselines.peer_unavailable("cupy", gpu=True) is None


def test_a_peer_that_cannot_be_set_up_is_skipped_with_the_reason(monkeypatch):
    def fails(*args):
        raise ImportError("libcudart.so.13: cannot open shared object file")

    monkeypatch.setattr(baselines, "numpy_sort_route", fails)
    case = grid.Case("t", 2, 50, 3)
    routes = {r.name: r for r in baselines.peers(np.zeros((2, 50), np.float32), 1, case, gpu=False)}
    assert routes["numpy-sort"].call is None
    assert (
        routes["numpy-sort"].reason
        == "cannot set up: ImportError: libcudart.so.13: cannot open shared object file"
    )
    assert routes["numpy-naive"].call is not None


def test_a_run_without_files_measures_every_case_and_writes_nothing(monkeypatch, tmp_path, capsys):
    _stub_measure(monkeypatch, lambda case: {"cutopk": {"note": "stub"}})
    monkeypatch.setattr(grid, "quick_grid", lambda gpu: [grid.Case("moe", 4, 64, 2 + i) for i in range(3)])
    monkeypatch.chdir(tmp_path)
    assert len(loop.run(regimes=["moe"], save=False)) == 3
    assert "wrote" not in capsys.readouterr().out and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not HAS_MPL, reason="matplotlib is not installed")
def test_no_speedup_plot_without_a_timed_peer(tmp_path):
    result = {
        "case": dataclasses.asdict(grid.Case("moe", 4, 64, 2)),
        "peers": {"torch": {"status": "skipped"}},
    }
    assert plots.plot([result], ["torch"], tmp_path, "quick") == [] and list(tmp_path.iterdir()) == []


# --- the command line as a new user meets it (issue 49) -----------------------------------------


@pytest.fixture
def cpu_run(monkeypatch):
    """The CPU benchmark, even where the CuPy stand-in is importable."""
    monkeypatch.setattr(env, "gpu_unavailable", lambda: "a CPU run")


def test_a_count_that_is_not_an_integer_says_integer(capsys, no_measuring):
    _fails_with(["--repeat", "1.5"], capsys, "--repeat", "expected an integer greater than 0, got '1.5'")
    _fails_with(["--time-limit", "soon"], capsys, "expected a number greater than 0, got 'soon'")


@pytest.mark.parametrize("regime", ["", ",", " "])
def test_an_empty_regime_is_a_usage_error_not_every_regime(regime, capsys, no_measuring):
    _fails_with(["--regime", regime], capsys, "--regime", "expected some of", "moe")


def test_plots_without_matplotlib_is_a_usage_error_with_the_install_hint(
    monkeypatch, tmp_path, capsys, no_measuring
):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # find_spec then finds nothing
    _fails_with(
        ["--plots", "--out", str(tmp_path)], capsys, "--plots: matplotlib is not installed", "pip install"
    )


@pytest.mark.parametrize("limit", [["--max-elements", "1"], ["--time-limit", "1e-9"]])
def test_a_run_that_measured_nothing_fails_and_says_why(limit, capsys, cpu_run):
    assert shims.main([*limit, "--no-save", "--regime", "moe"]) == 1
    captured = capsys.readouterr()
    assert "no case was measured" in captured.err and "case skipped" in captured.out


def test_a_peer_that_cannot_run_at_all_is_said_once_and_has_no_column(monkeypatch, capsys, cpu_run):
    monkeypatch.setattr(
        baselines, "peer_missing", lambda name: "torch is not installed" if "torch" in name else None
    )
    cases = [grid.Case("moe", 64, 128, 4), grid.Case("moe", 32, 128, 2)]
    results = loop.run(cases=cases, repeat=1)
    out = capsys.readouterr().out
    assert out.count("torch is not installed") == 2  # torch's line and torch-threads' line, once each
    header = next(line for line in out.splitlines() if line.startswith("#"))
    assert "numpy-naive" in header and "torch" not in header and " skip " not in out
    assert all(set(r["peers"]) == {"numpy-naive", "numpy-sort", "cutopk-1thread"} for r in results)


def test_output_lines_fit_a_terminal(capsys, cpu_run):
    # Prose wrapped to report.WIDTH; the table one row per case, its peer cells ratios only.
    loop.run(cases=[grid.Case("indexer", 4, 2048, 16, dist="ties_at_k")], repeat=1)
    lines = capsys.readouterr().out.splitlines()
    table = [line for line in lines if line[:1].isdigit() or line.startswith(("#", "-"))]
    assert table and max(map(len, table)) <= 160, table
    assert max(len(line) for line in lines if line not in table) <= report.WIDTH
