"""``python -m cutopk tune`` end to end on the CuPy stand-in (its times are the simulator's, so
meaningless: what is tested is the run, the files, their format and that later calls use them)."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from support.backends import sim_unavailable_reason

import cutopk
from cutopk import _demo
from cutopk._core import call as _call
from cutopk._demo import tabulate, tune
from cutopk.cuda import device as _device
from cutopk.cuda import tables as _tables

SHAPES = "2x3000:40,3x1200:20"  # the second covers another octave: a second entry


@pytest.fixture
def standin(monkeypatch, tmp_path):
    cupy = pytest.importorskip("cupy")
    if not hasattr(cupy, "_state") or sim_unavailable_reason():  # the stand-in's own module
        pytest.skip(sim_unavailable_reason() or "a real CuPy: tune would time a real GPU")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(_tables.ENV, raising=False)
    _device.device_facts.cache_clear()
    _call.CACHE.clear()
    yield cupy
    _device.device_facts.cache_clear()
    _call.CACHE.clear()


def test_tune_measures_every_family_saves_a_keyed_table_and_later_calls_use_it(standin, capsys):
    assert _demo.main(["tune", "--shapes", SHAPES, "--repeat", "1"]) == 0
    out, err = capsys.readouterr()
    path = _tables.user_path("Stand-in H100")
    assert f"wrote {path}" in out and "tune [" in err and "2x3000 k=40 float32 radix" in err
    obj = json.loads(path.read_text())
    key = _tables.device_key("Stand-in H100", "90", 13000, 13000)
    assert obj["key"] == key and obj["unit"] == "ms" and obj["sources"] == [str(path.with_suffix(".csv"))]
    table = _tables.read(path, "t")
    assert {(e.rows, e.n, e.k, e.key_bytes) for e in table.entries} == {(2, 3000, 40, 4), (3, 1200, 20, 4)}
    assert all(len(e.timed) >= 3 and e.source.startswith("tune ") for e in table.entries)
    facts, rows = tabulate.read_csv(path.with_suffix(".csv"), "again")  # the forced-family CSV
    assert facts["device"] == "Stand-in H100" and facts["compute_capability"] == "90"
    (wide,) = [e for e in table.entries if e.n == 3000]
    assert {m.family for m in rows if m.n == 3000} == {family for family, _ in wide.timed}
    x = standin.asarray(np.random.default_rng(1).random((2, 3000), dtype=np.float32))
    p = cutopk.plan(x, 40)
    assert p.chosen_by.startswith(f"table tuned ({path.name})") and p.algorithm == wide.family


def test_a_tuned_table_of_another_cutopk_is_stale_and_warns_once(standin, monkeypatch, capsys):
    assert _demo.main(["tune", "--shapes", "2x3000:40", "--repeat", "1", "--time-limit", "0.001"]) == 0
    monkeypatch.setattr(_tables, "__version__", "99.0")
    _device.device_facts.cache_clear()
    _call.CACHE.clear()
    x = standin.asarray(np.random.default_rng(2).random((2, 3000), dtype=np.float32))
    with pytest.warns(_tables.TableWarning, match="stale: measured with another cutopk") as caught:
        cutopk.top_k(x, 40)
        p = cutopk.plan(x, 40)
    assert len(caught) == 1 and not p.chosen_by.startswith("table tuned")


def test_tune_stops_at_its_time_limit_and_says_what_it_left_out(standin, capsys):
    assert _demo.main(["tune", "--shapes", "2x3000:40", "--repeat", "1", "--time-limit", "0.001"]) == 0
    out = capsys.readouterr().out
    assert "left out: " in out and "would end after the 0.001 s limit" in out
    assert json.loads(_tables.user_path("Stand-in H100").read_text())["entries"] == []  # one family timed


@pytest.mark.parametrize("bad", ["2x3000", "2x30:40", "ax3:1", "2x3000:40:float99", "0x10:1"])
def test_tune_shapes_are_checked(bad):
    with pytest.raises(argparse.ArgumentTypeError, match="expected"):
        tune.parse_shapes(bad)


def test_tune_refuses_a_time_limit_past_two_minutes(capsys):
    with pytest.raises(SystemExit):
        _demo.main(["tune", "--time-limit", "300"])
    assert "--time-limit" in capsys.readouterr().err


def test_tune_times_each_family_eagerly_and_under_graph_replay(standin, capsys):
    """The lease's M6 step: every family eager and from a captured graph, a CSV row each."""
    argv = [
        "tune",
        "--shapes",
        "2x3000:40",
        "--repeat",
        "1",
        "--timing",
        "graph,eager",
        "--time-limit",
        "0.001",
    ]
    assert _demo.main(argv) == 0
    path = _tables.user_path("Stand-in H100")
    _, graph = tabulate.read_csv(path.with_suffix(".csv"), "g", "graph")
    _, eager = tabulate.read_csv(path.with_suffix(".csv"), "e", "eager")
    assert [m.family for m in graph] == [m.family for m in eager] == ["warp_radix"]  # the first family only
    assert json.loads(path.read_text())["timing"] == "graph"


def test_tune_timing_names_are_checked(capsys):
    with pytest.raises(SystemExit):
        _demo.main(["tune", "--timing", "eager,fast"])
    assert "--timing: expected some of eager, graph, graph-flush" in capsys.readouterr().err
