"""Issue 50 item 2 on the CuPy stand-in (kernels on the simulator, its times meaningless): the
graph-replay timer captures once and replays, CuPy's and torch's captures, routes that cannot be
captured said once, and cutopk's sorted=False call set against the unsorted peers."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from support.backends import cuda_is_standin, sim_unavailable_reason

import cutopk
from cutopk._demo import baselines, cli, grid, loop, report, timing
from cutopk._demo.route import Route


@pytest.fixture
def cupy():
    cp = pytest.importorskip("cupy")
    if not cuda_is_standin() or sim_unavailable_reason():
        pytest.skip(sim_unavailable_reason() or "the stand-in's checks; a real GPU runs the benchmark itself")
    return cp


def _graph_timer(flush: bool = False) -> timing.GraphTimer:
    return timing.GraphTimer(timing.GpuTimer(repeat=3, warmup=0, min_repeat=3), flush=flush, calls=4)


def test_a_graph_is_captured_once_and_its_replays_are_timed(cupy):
    x = cupy.asarray(np.random.default_rng(0).random((4, 3000), dtype=np.float32))
    calls = []

    def fn():
        calls.append(1)
        return cutopk.top_k(x, 40)

    t = _graph_timer()(fn)
    # Two warm-up calls and four captured: the three timed replays call no Python.
    assert len(calls) == 2 + 4 and t["repeat"] == 3 and t["median"] > 0
    flushed = _graph_timer(flush=True)
    assert flushed.calls == 1
    calls.clear()
    flushed(fn)
    assert len(calls) == 2 + 1


def test_a_call_that_waits_for_the_host_cannot_be_captured_and_says_why(cupy):
    x = cupy.asarray(np.ones((2, 500), dtype=np.float32))
    with pytest.raises(timing.Uncapturable, match=r"CuPy.s stream capture failed: .*capturing"):
        _graph_timer()(lambda: cutopk.top_k(x, 4).values.get())  # a copy to the host
    with pytest.raises(timing.Uncapturable, match="XLA's own stream"):
        _graph_timer()(lambda: None, capture=baselines.JAX_UNCAPTURED)
    cutopk.top_k(x, 4)  # the stream is usable again: no capture was left open


def test_a_torch_route_is_captured_with_torch_cuda_graph(cupy, monkeypatch):
    torch = pytest.importorskip("torch")
    from standin import torch_cuda

    torch_cuda.install(monkeypatch)
    t = torch_cuda.to_cuda(torch.rand(3, 2000))
    seen = []

    def fn():
        seen.append(torch.cuda.current_stream().cuda_stream)
        return cutopk.top_k(t, 16)

    stats = _graph_timer()(fn, capture="torch")
    assert stats["repeat"] == 3 and len(seen) == 6 and len(set(seen[2:])) == 1 and seen[2] != 0


def _peers(x, axis, case, gpu, only=()):
    """Capturable stand-ins for a sorted and an unsorted peer (cutopk's own calls: CuPy's argsort
    route allocates while the stand-in captures), and one that cannot be captured."""

    def twin():
        return cutopk.top_k(x, case.k, axis=axis, mode=case.mode)

    def rev():
        r = cutopk.top_k(x, case.k, axis=axis, mode=case.mode, sorted=False)
        return r.values[..., ::-1], r.indices[..., ::-1]

    return [
        Route("twin", twin),
        Route("rev", rev, sorts=False),
        Route("nocap", twin, capture="it cannot, for a test"),
    ]


class _Kit(loop.Kit):
    """Three peers of the test's own: a sorted one, an unsorted one, one that cannot be captured."""

    unsorted = ("rev",)  # as cub and flashinfer-unsorted are

    def peer_names(self, gpu):
        return ("twin", "rev", "nocap")

    def routes(self, x, axis, case, gpu, only=()):
        return _peers(x, axis, case, gpu, only)


def test_graph_timing_end_to_end_sets_each_peer_against_its_like(cupy, tmp_path, capsys):
    cases = [grid.Case("llm", 2, 1500, 20), grid.Case("llm", 3, 600, 8)]
    results = loop.run(cases=cases, out=tmp_path, stem="g", repeat=3, timing_mode="graph", kit=_Kit())
    out = capsys.readouterr().out
    assert len(results) == 2
    for r in results:
        assert r["timing"] == "graph" and "median_ms" in r["cutopk_unsorted"]
        assert r["peers"]["twin"]["against"] == "cutopk sorted=True"
        rev = r["peers"]["rev"]
        assert rev["against"] == "cutopk sorted=False" and rev["sorted"] is False
        assert rev["speedup"] == pytest.approx(rev["median_ms"] / r["cutopk_unsorted"]["median_ms"])
        assert r["peers"]["nocap"] == {
            "status": "skipped",
            "note": "not timed under graph replay: it cannot, for a test",
        }
    # Said once, with the cases it hit; both columns in the summary; the unsorted call's column.
    assert out.count("not timed under graph replay: it cannot, for a test") == 1 and "[2 cases" in out
    assert "twin against cutopk sorted=True: cutopk is" in out
    assert "rev against cutopk sorted=False: cutopk is" in out and "unsorted ms" in out
    meta = json.loads((tmp_path / "g.json").read_text())["meta"]
    assert (
        meta["timing"] == "graph"
        and meta["timer"]["graph_calls"] == 10
        and meta["timer"]["l2_flush"] is False
    )
    rows = list(
        csv.DictReader(line for line in (tmp_path / "g.csv").read_text().splitlines() if line[:1] != "#")
    )
    assert {row["timing"] for row in rows} == {"graph"} and all(
        float(row["cutopk_unsorted_ms"]) > 0 for row in rows
    )
    assert {row["rev_against"] for row in rows} == {"cutopk sorted=False"}


def test_graph_timing_needs_a_gpu(monkeypatch, capsys):
    monkeypatch.setattr(loop.env, "gpu_unavailable", lambda: "CuPy is not installed")
    with pytest.raises(SystemExit):
        cli.main(["--timing", "graph"])
    assert "--timing graph: graph replay needs a GPU" in capsys.readouterr().err


def test_the_table_shows_the_unsorted_call_only_where_an_unsorted_peer_runs(capsys):
    result = {"label": "c", "cutopk": {"median_ms": 1.0, "min_ms": 1.0, "max_ms": 1.0}, "gbps": 1.0,
              "bandwidth_pct": 1.0, "cutopk_unsorted": {"median_ms": 0.5}, "peers": {}}  # fmt: skip
    report.Table([], gpu=True, total=1, unsorted=True).row(0, result)
    report.Table([], gpu=True, total=1).row(0, result)
    first, second = capsys.readouterr().out.splitlines()
    assert "0.5" in first and "0.5" not in second


def test_each_replay_queues_behind_the_spin_kernel(cupy):
    """So that the host's submission of the graph is not timed (where the spin kernel built)."""
    x = cupy.asarray(np.ones((2, 500), dtype=np.float32))
    base = timing.GpuTimer(repeat=3, warmup=0, min_repeat=3)
    spins = []
    base.spin = lambda grid, block, args: spins.append(args)
    timing.GraphTimer(base, flush=False, calls=2)(lambda: cutopk.top_k(x, 4))
    assert len(spins) == 3 and all(int(a[0]) == base.spin_ns for a in spins)


def test_the_speedup_plot_names_and_hatches_the_call_each_peer_is_against(monkeypatch, tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    from cutopk_bench import plots
    from matplotlib.axes import Axes

    matplotlib.use("Agg")
    bars = []
    real = Axes.bar

    def bar(self, *args, **kwargs):
        bars.append((kwargs.get("label"), kwargs.get("hatch")))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Axes, "bar", bar)
    cell = {"status": "ok", "speedup": 2.0}
    results = [{"case": {"regime": "llm"}, "peers": {"torch": cell | {"against": "cutopk sorted=True"},
                                                      "cub": cell | {"against": "cutopk sorted=False"}}}]  # fmt: skip
    assert plots.plot(results, ["cub", "torch"], tmp_path, "p")
    assert bars == [("torch over cutopk sorted", None), ("cub over cutopk sorted=False", "//")]
