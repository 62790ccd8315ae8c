"""The lease's kernel steps on the CPU: M2's counting primitives (benchmarks/gpu/count_primitives.cu)
compile for sm_90 and count right on the simulator; M3's phase clocks (kernels/phase_clock.cuh) leave
the kernels' sm_90 PTX byte for byte as it is without them when off (so the machine code that ptxas
makes of it too), and on the simulator, switched on, stamp each named step once, in order. No GPU:
the cycles themselves are not measured."""

from __future__ import annotations

import csv
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from support.backends import require
from support.scripts import load_benchmark

from cutopk.cuda import kernel_source

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import check_sass  # noqa: E402

ON_CHIP = ("resident", "cluster", "split", "radix")


def _nvcc() -> str:
    nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("nvcc not found: sm_90 machine code cannot be built here")
    return nvcc


def _cubin(tmp: pathlib.Path, name: str, source: str, *options: str) -> dict[str, bytes]:
    """{function: machine code} of ``source`` built by nvcc for sm_90 as the launcher's NVRTC would."""
    src, out = tmp / f"{name}.cu", tmp / f"{name}.cubin"
    src.write_text(source)
    cmd = [_nvcc(), "-std=c++17", "-arch=sm_90", "-cubin", *options, "-o", str(out), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(check_sass.text_sections(out.read_bytes()))


def _ptx(tmp: pathlib.Path, name: str, source: str, *options: str) -> tuple[str, set[str]]:
    """(the PTX, its entry points) of ``source`` built by nvcc for sm_90 as the launcher's NVRTC
    would: what ptxas turns into the machine code, a deterministic function of it and the options,
    at about half of the cubin's compile time (the cluster family: 8 s against 15)."""
    src, out = tmp / f"{name}.cu", tmp / f"{name}.ptx"
    src.write_text(source)
    cmd = [_nvcc(), "-std=c++17", "-arch=sm_90", "-ptx", *options, "-o", str(out), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ptx = out.read_text()
    return ptx, set(re.findall(r"^\.visible \.entry (\w+)\(", ptx, flags=re.M))


def test_count_primitives_count_every_lane_once_on_the_simulator(monkeypatch):
    require("sim")
    from cutopk import sim

    cp = load_benchmark(monkeypatch, "gpu/count_primitives.py", "count_primitives")
    launch = sim.RawModule(cp.source()).get_function("count_primitives")
    rows = [(m, d) for m in cp.MODES for d in (1, 13, 32)]
    got = list(cp.measure(launch, np, 1, 3, rows))
    assert [(r["primitive"], r["distinct"]) for r in got] == rows
    assert all(r["counted"] == "ok" for r in got), [r for r in got if r["counted"] != "ok"]
    assert all(float(r["cycles_per_op"]) > 0 and r["warps"] == 16 for r in got)


def test_count_primitives_build_for_sm_90_with_the_match_and_the_shared_atomics(tmp_path, monkeypatch):
    cp = load_benchmark(monkeypatch, "gpu/count_primitives.py", "count_primitives")
    code = _cubin(tmp_path, "count_primitives", cp.source())
    assert list(code) == ["count_primitives"]
    if check_sass.find_cuobjdump()[0] is None:
        pytest.skip("cuobjdump/nvdisasm not found: built, but its instructions not read")
    sass = [
        text
        for _, _, text in check_sass.disassemble(str(tmp_path / "count_primitives.cubin"))[
            ("sm_90", "count_primitives")
        ]
    ]
    assert any(t.startswith("MATCH.ANY") for t in sass) and any(t.startswith("ATOMS") for t in sass)
    assert any(t.startswith("VOTE") for t in sass)  # the ballot loop


def _without_stamps(source: str) -> str:
    """The module's source with every CUTOPK_PHASE line gone: the kernels as they were before."""
    stripped = re.sub(r"^[ \t]*CUTOPK_PHASE\(\d+, \w+\);\n", "", source, flags=re.M)
    assert stripped != source
    return stripped


def test_phase_clocks_off_leave_the_on_chip_kernels_ptx_byte_identical(tmp_path):
    _nvcc()
    offs = {}
    for family in ON_CHIP:
        source = kernel_source.module_source(family, ("float32",))
        off, off_entries = offs[family] = _ptx(tmp_path, f"{family}-off", source)
        before, before_entries = _ptx(tmp_path, f"{family}-before", _without_stamps(source))
        names = (
            {f"{family}_topk_float32"}
            if family != "cluster"
            else {f"cluster_topk_float32_blocks{b}" for b in (2, 4, 8)}
        )
        assert off_entries == before_entries == names
        assert off == before, f"{family}: CUTOPK_PHASE off changed the PTX"
    on, _ = _ptx(
        tmp_path,
        "resident-on",
        kernel_source.module_source("resident", ("float32",)),
        "-DCUTOPK_PHASE_CLOCKS",
    )
    assert on != offs["resident"][0]


@pytest.mark.parametrize("family", ON_CHIP)
def test_phase_clocks_on_stamp_each_named_step_once_in_order_on_the_simulator(family, monkeypatch):
    require("sim")
    pc = load_benchmark(monkeypatch, "gpu/phase_clocks.py", "phase_clocks")
    import cutopk

    names = pc.steps_of(family)
    assert names[0] == "entry" and len(names) == len(set(names)) >= 4
    rows, n, k = 2, 4096, 64
    x = np.random.default_rng(5).standard_normal((rows, n)).astype(np.float32)
    built: dict = {}
    with pc.clocked_build("sim", ("CUTOPK_PHASE_CLOCKS",), built):
        cutopk.top_k(x, k, algorithm=family, backend="sim")
        buf = pc.stamps(built[family], "sim")
        buf[...] = 0
        got = cutopk.top_k(x, k, algorithm=family, backend="sim")
        stamps = np.array(buf).reshape(pc.BLOCKS, pc.STEPS)
    want = cutopk.top_k(x, k, backend="numpy")
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    stamped = stamps[stamps[:, 0] != 0]
    assert len(stamped) >= rows  # every block stamps its entry
    assert not stamps[:, len(names) :].any(), "a stamp past the named steps"
    full = stamped[(stamped[:, : len(names)] != 0).all(axis=1)]
    assert len(full) >= rows, "no block of a row passed every named step"  # the block that writes the row
    for row in stamped:
        seen = row[: len(names)][row[: len(names)] != 0]
        assert (np.diff(seen.astype(np.int64)) > 0).all(), f"{family}: stamps out of order {row}"
    # and the host's table: one row per step after the entry, every one stamped by some block
    table = pc.cycles(stamps.reshape(-1), len(names))
    assert len(table) == len(names) - 1 and all(table)


def test_a_variant_whose_switch_the_kernels_lack_is_a_row_saying_so(tmp_path, monkeypatch, capsys):
    pc = load_benchmark(monkeypatch, "gpu/phase_clocks.py", "phase_clocks")
    monkeypatch.setattr(
        pc,
        "VARIANTS",
        (
            ("absent", "CUTOPK_NO_SUCH_SWITCH", "nothing", ("resident",)),
            ("present", "CUTOPK_PHASE_CLOCKS", "a switch the kernels test", ("cluster", "split")),
        ),
    )
    out = tmp_path / "M3.csv"
    out.write_text("variant,family\n")  # M3's rows before
    assert pc.main(["--variants", "--append", "--dry-run", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "variant,family" and len(lines) == 2  # appended, no second header
    assert (
        lines[1].startswith("absent,") and "not built: no kernel file tests CUTOPK_NO_SUCH_SWITCH" in lines[1]
    )
    assert (
        "present: would run M3's shapes with -DCUTOPK_PHASE_CLOCKS on cluster, split"
        in capsys.readouterr().out
    )


def test_the_phase_table_gives_each_step_its_cycles_and_share(tmp_path, monkeypatch):
    pc = load_benchmark(monkeypatch, "gpu/phase_clocks.py", "phase_clocks")
    path = tmp_path / "M3.csv"
    path.write_text(
        "variant,family,case,step,index,cycles_median,cycles_max,blocks,share,note\n"
        "base,resident,1x8192 k=512,load,1,300,310,1,0.750,\n"
        "base,resident,1x8192 k=512,bucket,2,100,120,1,0.250,\n"
        "count_with_match,,,,,,,,,not built: no kernel file tests CUTOPK_COUNT_WITH_MATCH\n"
    )
    text = pc.table(str(path))
    assert "| base | resident | 1x8192 k=512 | load 300 (75%), bucket 100 (25%) | 400 |" in text
    assert text.endswith("- count_with_match: not built: no kernel file tests CUTOPK_COUNT_WITH_MATCH")


def test_a_built_variant_runs_in_a_process_of_its_own_and_appends_its_rows(tmp_path, monkeypatch):
    require("sim")
    pc = load_benchmark(monkeypatch, "gpu/phase_clocks.py", "phase_clocks")
    out = tmp_path / "M3.csv"
    base = ["--sim", "--shape", "1x8192:64", "--repeat", "1", "--out", str(out)]
    assert pc.main([*base, "--family", "cluster"]) == 0
    assert pc.main(["--variants", "--append", *base]) == 0
    rows = list(csv.DictReader(out.open()))
    matched = [r for r in rows if r["variant"] == "count_with_match" and r["family"] == "cluster"]
    assert [r["step"] for r in matched] == pc.steps_of("cluster")[1:]
    assert {r["variant"] for r in rows if r["note"].startswith("not built")} >= {
        "loads_at_entry",
        "threads_1024",
    }
    assert [r["variant"] for r in rows].count("base") == len(matched)
