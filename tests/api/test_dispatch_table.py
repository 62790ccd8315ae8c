"""The dispatcher's measured tables (issue 50 item 3): the committed sm_90 table against today's
hand rules, an entry's choice and what plan() says chose, and tables that are missing, stale or
corrupt (one warning, the next table or the rules, the same answers)."""

from __future__ import annotations

import json
import pathlib
import re
import warnings

import numpy as np
import pytest
from support.backends import sim_unavailable_reason
from support.reference import assert_same
from support.scripts import load_benchmark

import cutopk
from cutopk._core import call as _call
from cutopk._demo import tabulate
from cutopk.cuda import device as _device
from cutopk.cuda import dispatch as _dispatch
from cutopk.cuda import dispatch_table as _table
from cutopk.cuda import tables as _tables

ROOT = pathlib.Path(__file__).resolve().parents[2]
H100 = tabulate.device_for("90", 132)


@pytest.fixture
def clean(monkeypatch, tmp_path):
    """No user table, no named table, no prepared calls from other tests."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(_tables.ENV, raising=False)
    _call.CACHE.clear()
    _device.device_facts.cache_clear()
    yield tmp_path
    _call.CACHE.clear()
    _device.device_facts.cache_clear()


def test_the_committed_sm90_table_is_what_the_script_makes_of_the_committed_results(monkeypatch):
    script = load_benchmark(monkeypatch, "make_dispatch_table.py", "make_dispatch_table")
    made = script.tables([ROOT / f for f in script.COMMITTED])
    committed = json.loads((ROOT / "cutopk" / "cuda" / "tables" / "sm90.json").read_text())
    assert made["90"] == committed


def test_the_committed_sm90_table_reproduces_the_hand_rules_where_the_results_measured_them():
    table = _tables.read(ROOT / "cutopk" / "cuda" / "tables" / "sm90.json", "sm90")
    assert len(table.entries) >= 20
    for e in table.entries:
        assert e.family == _dispatch.choose(e.rows, e.n, e.k, e.key_bytes, H100), e
        assert "benchmarks/results/" in e.source and len(e.timed) >= 2
        with_table = _dispatch.choose_why(e.rows, e.n, e.k, e.key_bytes, _dispatch_with(table))
        assert with_table == (e.family, f"table sm90: {e.source}")


def test_the_h100_run_alone_compares_no_two_families_on_one_shape():
    """Each of its cases ran auto's one family: the table it supports has no entry, and every
    shape says why (what a forced-family run, the lease's M6, will supply)."""
    path = ROOT / "benchmarks/results/2026-11-26-nvidia-h100-80gb-hbm3/scoreboard.csv"
    facts, found = tabulate.read_csv(path, "h100")
    table, lacks = tabulate.build(found, tabulate.device_for(facts["compute_capability"], 132), "sm90")
    assert table.entries == () and lacks and all("only" in line and "no comparison" in line for line in lacks)


def _dispatch_with(table: _table.DispatchTable) -> _dispatch.Device:
    return _dispatch.Device(H100.sm_count, H100.shared_bytes, H100.clusters, table)


def _entry(family: str, rows=4, n=3000, k=40) -> _table.TableEntry:
    return _table.TableEntry(rows, n, k, 4, family, "test: a made-up case")


def test_an_entry_covers_its_n_and_k_over_its_octave_of_rows_and_plan_says_what_chose():
    device = _dispatch_with(_table.DispatchTable("mine", (_entry("bitonic"),)))
    assert _dispatch.choose(4, 3000, 40, 4, H100) == "radix"  # the rule
    p = _dispatch.plan(5, 3000, 40, 4, device, copy=False)  # the octave of 4 rows, n and K its own
    assert (p.algorithm, p.chosen_by) == ("bitonic", "table mine: test: a made-up case")
    assert _dispatch.plan(4, 3500, 40, 4, device, copy=False).chosen_by == "rules"  # a neighbouring n
    assert _dispatch.plan(4, 3000, 36, 4, device, copy=False).chosen_by == "rules"  # a neighbouring K
    assert _dispatch.plan(8, 3000, 40, 4, device, copy=False).chosen_by == "rules"  # another octave of rows
    assert _dispatch.plan(4, 3000, 40, 2, device, copy=False).chosen_by == "rules"  # other keys
    assert _dispatch.plan(4, 3000, 40, 4, device, copy=False, outer=True).chosen_by == "rules"
    forced = _dispatch.plan(4, 3000, 40, 4, device, copy=False, algorithm="radix")
    assert (forced.algorithm, forced.chosen_by) == ("radix", "forced")


def test_an_entry_whose_family_cannot_take_the_shape_leaves_it_to_the_rules():
    device = _dispatch_with(_table.DispatchTable("mine", (_entry("warp_row", k=40),)))  # warp_row: K <= 32
    assert _dispatch.why_not("warp_row", 3000, 40, 4, device) is not None
    assert _dispatch.choose_why(4, 3000, 40, 4, device) == ("radix", "rules")


def _families_for(rows, n, k) -> list[str]:
    return [f for f in _dispatch.ALGORITHMS if _dispatch.why_not(f, n, k, 4, H100, rows) is None]


@pytest.mark.parametrize("shape", [(3, 1500, 40), (2, 9000, 300)])
def test_whichever_family_a_table_names_the_answers_are_the_same(monkeypatch, shape):
    """The choice of family never changes a result: a table naming each family that can take the
    shape, in turn, gives the NumPy backend's values and indices bit for bit (the simulator runs
    each family's kernels)."""
    if sim_unavailable_reason():
        pytest.skip(sim_unavailable_reason())
    rows, n, k = shape
    x = np.random.default_rng(50).integers(0, 200, size=(rows, n)).astype(np.float32)  # ties
    expected = cutopk.top_k(x, k, backend="numpy")
    families = _families_for(rows, n, k)
    assert len(families) >= 4, families
    for family in families:
        device = _dispatch.Device(
            H100.sm_count, H100.shared_bytes, True, _table.DispatchTable("t", (_entry(family, *shape),))
        )
        monkeypatch.setattr(_device, "device_facts", lambda target, dev, d=device: d)
        _call.CACHE.clear()
        assert cutopk.plan(x, k, backend="sim").chosen_by.startswith("table t"), family
        assert cutopk.plan(x, k, backend="sim").algorithm == family
        assert_same(cutopk.top_k(x, k, backend="sim"), expected)
    _call.CACHE.clear()


def _write(path: pathlib.Path, obj) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


KEY = _tables.device_key("Card", "90", 13000, 13000)


def _user_table(family="bitonic", key=KEY):
    return _table.to_json(_table.DispatchTable("x", (_entry(family),), tuple(key.items())))


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "cannot be read (not JSON"),
        ({"format": 99, "entries": []}, "cannot be read (format"),
        (
            {"format": 1, "entries": [{"rows": 1, "n": 2, "k": 1, "key_bytes": 4, "family": "magic"}]},
            "family",
        ),
        (
            {"format": 1, "entries": [{"rows": 0, "n": 2, "k": 1, "key_bytes": 4, "family": "radix"}]},
            "'rows'",
        ),
        (_user_table(key={**KEY, "cutopk": "0.0.1"}), "stale: measured with another cutopk"),
        (_user_table(key={**KEY, "driver": "12000"}), "stale: measured with another driver"),
    ],
)
def test_a_corrupt_or_stale_user_table_is_ignored_with_one_warning(clean, content, says):
    _write(_tables.user_path("Card"), content)
    with pytest.warns(_tables.TableWarning, match=re.escape(says)) as caught:
        table = _tables.load("90", KEY)
    assert len(caught) == 1
    assert table is not None and table.name == "sm90"  # the package's table instead


def test_a_user_table_of_this_key_is_preferred(clean):
    _write(_tables.user_path("Card"), _user_table())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = _tables.load("90", KEY)
    assert table is not None and table.name.startswith("tuned") and table.entries[0].family == "bitonic"


def test_a_named_table_that_is_missing_warns_and_off_means_the_rules(clean, monkeypatch):
    monkeypatch.setenv(_tables.ENV, str(clean / "nowhere.json"))
    with pytest.warns(_tables.TableWarning, match="does not exist"):
        assert _tables.load("80", KEY) is None  # sm_80 has no table: default.json, no entries
    monkeypatch.setenv(_tables.ENV, "off")
    assert _tables.load("90", KEY) is None


def test_a_corrupt_table_on_the_stand_in_warns_once_and_answers_right(clean, monkeypatch):
    cupy = pytest.importorskip("cupy")
    if sim_unavailable_reason():
        pytest.skip(sim_unavailable_reason())
    monkeypatch.setenv(_tables.ENV, str(_write(clean / "bad.json", "[1, 2")))
    host = np.random.default_rng(3).random((4, 3000), dtype=np.float32)
    x = cupy.asarray(host)
    with pytest.warns(_tables.TableWarning) as caught:
        first = cutopk.top_k(x, 40)
        second = cutopk.top_k(x[:2], 40)
        p = cutopk.plan(x, 40)
    assert len(caught) == 1
    assert p.chosen_by in ("rules",) or p.chosen_by.startswith("table sm90")
    expected = cutopk.top_k(host, 40, backend="numpy")
    assert_same((first.values.get(), first.indices.get()), expected)
    assert_same((second.values.get(), second.indices.get()), cutopk.top_k(host[:2], 40, backend="numpy"))


def test_long_rows_on_the_stand_in_h100_go_to_cluster_by_the_rules_not_split(clean):
    """The H100 run's finding (every long row ran split, the fallback for GPUs without clusters)
    stays fixed with the table in place: the committed results never timed cluster, so the table
    leaves these rows to the rules, which give sm_90 the cluster family."""
    cupy = pytest.importorskip("cupy")
    if getattr(cupy, "__name__", "") != "standin.cupy":
        pytest.skip("the stand-in's H100 facts")
    x = cupy.zeros((8, 128256), dtype=cupy.float32)
    p = cutopk.plan(x, 50)
    assert (p.algorithm, p.chosen_by) == ("cluster", "rules")
    lacks = json.loads((ROOT / "cutopk" / "cuda" / "tables" / "sm90.json").read_text())["lacks"]
    assert (
        "8x128256 k=50 (4-byte keys): today's rule chooses cluster, not timed (timed: multiblock, split)"
        in lacks
    )


def test_a_device_whose_versions_cannot_be_read_still_gets_the_package_table(clean, monkeypatch):
    cupy = pytest.importorskip("cupy")
    if getattr(cupy, "__name__", "") != "standin.cupy":
        pytest.skip("the stand-in's H100")

    def fails(device, capability):
        raise AttributeError("module 'cupy.cuda.runtime' has no attribute 'driverGetVersion'")

    monkeypatch.setattr(_device, "table_key", fails)
    facts = _device.device_facts("cuda", 0)
    assert facts.table is not None and facts.table.name == "sm90" and facts.clusters


GOOD_ENTRY = {"rows": 4, "n": 3000, "k": 40, "key_bytes": 4, "family": "radix", "timed": {"radix": 1.0}}


@pytest.mark.parametrize(
    "obj, message",
    [
        ([], r"^expected a JSON object, got list"),
        ({"format": 99, "entries": []}, r"^format: expected 1, got 99"),
        ({"format": 1, "entries": {}}, r"^entries: expected a list"),
        ({"format": 1, "entries": ["radix"]}, r"^entry: expected an object, got 'radix'"),
        ({"format": 1, "entries": [{**GOOD_ENTRY, "family": "fastest"}]}, r"^entry family: expected one of .*got 'fastest'"),
        ({"format": 1, "entries": [{**GOOD_ENTRY, "timed": {"radix": "1"}}]}, r"^entry timed: expected an object of numbers"),
        ({"format": 1, "entries": [{**GOOD_ENTRY, "n": 0}]}, r"^entry field 'n': expected a positive integer, got 0"),
        ({"format": 1, "entries": [{**GOOD_ENTRY, "k": True}]}, r"^entry field 'k': expected a positive integer, got True"),
        ({"format": 1, "entries": [GOOD_ENTRY], "key": []}, r"^key: expected an object"),
    ],
)  # fmt: skip
def test_an_object_that_is_not_a_table_is_a_table_error_naming_its_field(obj, message):
    with pytest.raises(_table.TableError, match=message):
        _table.from_json(obj, "bad", ("radix", "resident"))
    good = _table.from_json({"format": 1, "entries": [GOOD_ENTRY], "key": {"device": "x"}}, "ok", ("radix",))
    assert good.entries[0].family == "radix" and good.key == (("device", "x"),)
    assert _table.from_json(_table.to_json(good), "again", ("radix",)).entries == good.entries
