"""The NVRTC check (tools/check_nvrtc.py): the programs the launcher builds compile with the NVRTC
of each CUDA wheel folder in ``CUTOPK_NVRTC_DIRS`` (``os.pathsep``-separated; make one with
``python tools/check_nvrtc.py --install DIR VERSION``) with no spill and no stack frame, and each
kernel file compiles alone. Without such a folder those tests skip, with the reason; the checks
of the check itself, and of the multiblock State's layout check, need none."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from cutopk.cuda import kernel_constants as _kernel_constants
from cutopk.cuda import launcher as _launcher
from cutopk.sim import _toolchain

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import check_nvrtc  # noqa: E402

FOLDERS = [d for d in os.environ.get("CUTOPK_NVRTC_DIRS", "").split(os.pathsep) if d]
needs_nvrtc = pytest.mark.skipif(
    not FOLDERS,
    reason="no NVRTC wheel folder: set CUTOPK_NVRTC_DIRS (python tools/check_nvrtc.py --install DIR VERSION)",
)


def _log(name: str, stack: int, stores: int, loads: int, arch: str = "sm_80") -> str:
    # What NVRTC's program log holds with --ptxas-options=-v.
    return (
        f"ptxas info    : Compiling entry function '{name}' for '{arch}'\n"
        f"ptxas info    : Function properties for {name}\n"
        f"ptxas         .     {stack} bytes stack frame, {stores} bytes spill stores, {loads} bytes spill loads\n"
        "ptxas info    : Used 64 registers, used 1 barriers, 400 bytes cmem[0]\n"
    )


def test_a_spill_or_a_stack_frame_fails_naming_version_arch_and_kernel():
    lowered = {
        "warp_radix_topk<long long>": "_Z15warp_radix_topkIxEvPKT_",
        "radix_topk<float>": "_Z10radix_topkIfEv",
    }
    log = _log("_Z15warp_radix_topkIxEvPKT_", 8, 4, 4) + _log("_Z10radix_topkIfEv", 0, 0, 0)
    rows, failures = check_nvrtc.findings("NVRTC 13.5, sm_80", log, lowered)
    assert [r["pretty"] for r in rows] == ["warp_radix_topk<long long>", "radix_topk<float>"]
    assert failures == [
        "NVRTC 13.5, sm_80, warp_radix_topk<long long>: spills 4 bytes stored / 4 bytes loaded and a stack frame of 8 bytes"
    ]
    _, failures = check_nvrtc.findings("NVRTC 12.9, sm_75", _log("_Z1kv", 16, 0, 0), {"k": "_Z1kv"})
    assert failures == ["NVRTC 12.9, sm_75, k: a stack frame of 16 bytes"]


def test_a_name_that_does_not_lower_or_build_fails():
    log = _log("_Z1av", 0, 0, 0)
    _, failures = check_nvrtc.findings("NVRTC 13.0, sm_90", log, {"a": "_Z1av", "b": None, "c": "_Z1cv"})
    assert failures == [
        "NVRTC 13.0, sm_90: the name expression b did not lower (nvrtcGetLoweredName)",
        "NVRTC 13.0, sm_90: no ptxas report for c (_Z1cv): was it compiled?",
    ]


def test_programs_are_the_launchers_modules():
    # One program per (element type, kernel family), each a module the launcher builds, with the
    # extern "C" kernels it must hold; the check merges those with the same text into one compile.
    programs = _launcher.programs()
    assert len(programs) == len(_launcher._dtypes.SUPPORTED) * len(_launcher.FAMILIES)
    for program in programs:
        assert program.name_expressions == () and program.kernels
        assert all(f"void {k}(" in program.source or f" {k}(" in program.source for k in program.kernels)
    merged = check_nvrtc.merged_programs()
    assert sum(len(kernels) for _, _, kernels in merged) == sum(len(p.kernels) for p in programs)


def test_every_kernel_file_is_checked_alone():
    names = [name for name, _ in check_nvrtc.alone_programs()]
    assert sorted(names) == sorted(p.name for p in _launcher.kernel_dir().glob("*.cu*"))
    assert "constants.cuh" in names and "entry.cuh" in names


def test_the_programs_that_branch_on_the_architecture_are_the_cluster_and_copying_families():
    # --ptx-arch compiles these for the other architecture: every other program's front-end work
    # is the same on every architecture, so a new `#if __CUDA_ARCH__` must show up here. cluster's
    # entry point, and async_copy.cuh's cp.async (block_row and streaming copy rows with it).
    branching = [s for s, _, _ in check_nvrtc.merged_programs() if check_nvrtc.arch_dependent(s)]
    families = ("cluster", "block_row", "streaming")
    expected = [p.source for p in _launcher.programs() if p.family in families]
    assert branching and sorted(branching) == sorted(expected)


class _FakeNvrtc:
    """NVRTC's compile, answered from a table: (ok, log, lowered) per call, options recorded."""

    def __init__(self, *answers):
        self.answers, self.options = list(answers), []

    def compile(self, source, name, options, names):
        self.options.append(options)
        return self.answers.pop(0)


def test_ptx_compiles_for_compute_not_sm_and_reports_errors_and_unlowered_names(tmp_path):
    for sub in ("nvidia/cu13/include/nv", "nvidia/cu13/include/cccl"):
        (tmp_path / sub).mkdir(parents=True)
    (tmp_path / "nvidia/cu13/include/cuda_fp16.h").write_text("")
    fake = _FakeNvrtc(
        (True, "", {"a": "_Z1av"}),
        (False, "cutopk.cu(3): error: identifier x is undefined", {}),
        (True, "", {"b": None}),
    )
    programs = [(i, 3, "// ---- cluster.cu\nx\nx\n", ["a"]) for i in range(3)]
    failures = check_nvrtc.ptx_failures(fake, "12.9", tmp_path, "75", programs)
    assert all(
        "-arch=compute_75" in o and not any("sm_" in x or "ptxas" in x for x in o) for o in fake.options
    )
    assert len(failures) == 2
    assert failures[0].startswith(
        "NVRTC 12.9, compute_75 (PTX): program 2 of 3 does not compile (kernels/cluster.cu)"
    )
    assert "identifier x is undefined" in failures[0]
    assert failures[1] == "NVRTC 12.9, compute_75 (PTX): the name expression b did not lower"


def test_the_front_end_check_parses_every_arch_and_the_branching_programs_on_the_ptx_archs(tmp_path):
    # Three programs, the second branching on __CUDA_ARCH__; sm_90, and sm_75 as a --ptx-arch:
    # all three for sm_90, the branching one alone for sm_75; the third fails on sm_90.
    _wheel_folder(tmp_path)
    programs = [
        ("// ---- radix.cu\n", [], ["radix_topk_uint8"]),
        ("// ---- cluster.cu\n#if __CUDA_ARCH__ >= 900\n#endif\n", [], ["cluster_topk_uint8_blocks2"]),
        ("// ---- split.cu\nx\n", [], ["split_topk_uint8"]),
    ]
    assert [check_nvrtc.arch_dependent(p[0]) for p in programs] == [False, True, False]
    fake = _FakeNvrtc(
        (True, "", {}),
        (True, "", {}),
        (False, "cutopk.cu(2): error: identifier x is undefined", {}),
        (True, "", {}),
    )
    failures = check_nvrtc.front_end_failures(fake, "12.9", tmp_path, ["90"], ["75"], programs)
    assert [next(o for o in opts if o.startswith("-arch=")) for opts in fake.options] == [
        "-arch=sm_90"
    ] * 3 + ["-arch=sm_75"]
    assert all("-fdevice-syntax-only" in opts for opts in fake.options)
    assert len(failures) == 1
    assert failures[0].startswith(
        "NVRTC 12.9, sm_90 (front end only): program 3 of 3 does not compile (kernels/split.cu)"
    )
    assert "identifier x is undefined" in failures[0]


def _record_workers(monkeypatch) -> list[list[str]]:
    """The command lines of the worker processes main() starts (each answers an empty report)."""
    seen = []

    def run(cmd, **kwargs):
        seen.append(cmd)
        report = {"folder": cmd[3], "version": "13.5", "builds": [], "seconds": {}, "failures": []}
        return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(report) + "\n", stderr="")

    monkeypatch.setattr(check_nvrtc.subprocess, "run", run)
    return seen


def test_front_end_element_types_go_with_a_cubin_subset_and_reach_the_worker(monkeypatch):
    seen = _record_workers(monkeypatch)
    argv = ["a", "--arch", "90", "--dtype", "int8", "--front-end-dtype", "uint8", "uint16"]
    assert check_nvrtc.main(argv) == 0
    assert seen[-1][2:] == [
        "--worker", "a", "--arch", "90", "--dtype", "int8", "--front-end-dtype", "uint8", "uint16"
    ]  # fmt: skip
    for wrong in (["--front-end-dtype", "uint8"], ["--dtype", "int8", "--front-end-dtype", "int8"]):
        with pytest.raises(SystemExit):  # every type to cubins already, or one type asked for twice
            check_nvrtc.main(["a", *wrong])
    with pytest.raises(SystemExit):
        check_nvrtc.main(["a", "--dtype", "int8", "--front-end-dtype", "uint9"])
    assert len(seen) == 1


def test_the_ptx_options_reach_each_folders_worker(monkeypatch, capsys):
    seen = _record_workers(monkeypatch)
    argv = ["a", "b", "--arch", "90", "--ptx-only", "--ptx-arch", "75", "--no-alone"]
    assert check_nvrtc.main(argv) == 0
    assert [cmd[2:] for cmd in seen] == [
        ["--worker", f, "--arch", "90", "--ptx-arch", "75", "--ptx-only", "--no-alone"] for f in "ab"
    ]
    assert check_nvrtc.main(["a"]) == 0 and seen[-1][2:] == ["--worker", "a", "--arch", "75", "80", "90"]
    assert check_nvrtc.main(["a", "--sass"]) == 0 and seen[-1][-1] == "--sass"
    assert check_nvrtc.main(["a", "--dtype", "int8", "bfloat16"]) == 0
    assert seen[-1][2:] == ["--worker", "a", "--arch", "75", "80", "90", "--dtype", "int8", "bfloat16"]


def test_a_dtype_subset_keeps_only_those_element_types_programs():
    chosen = check_nvrtc.merged_programs(dtypes=("int8", "bfloat16"))
    expected = {p.source for p in _launcher.programs() if p.dtype in ("int8", "bfloat16")}
    assert chosen and {source for source, _, _ in chosen} == expected
    with pytest.raises(SystemExit):
        check_nvrtc.main(["a", "--dtype", "int9"])


def _wheel_folder(tmp_path):
    for sub in ("nvidia/cu13/include/nv", "nvidia/cu13/include/cccl"):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
    (tmp_path / "nvidia/cu13/include/cuda_fp16.h").write_text("")
    return tmp_path


class _FakeCubins:
    """NVRTC with a cubin per compile: one program, two kernels, sm_80."""

    version = (13, 5)

    def compile_cubin(self, source, name, options, names, cubin=True):
        log = _log("radix_topk_float32", 0, 0, 0) + _log("bitonic_topk_float32", 0, 0, 0)
        return True, log, {}, b"CUBIN" if cubin else None


def test_the_sass_check_runs_on_every_cubin_and_fails_naming_version_and_kernel(tmp_path, monkeypatch):
    seen = []

    def disassemble(arch, cubins):
        seen.append((arch, cubins))
        # radix_topk streams rows: one scalar load and no LDG.E.128 breaks two rules.
        return {
            ("sm_80", "radix_topk_float32"): [(0x10, False, "LDG.E R2, [R4.64]"), (0x20, False, "EXIT")],
            ("sm_80", "bitonic_topk_float32"): [(0x10, False, "EXIT")],
        }

    monkeypatch.setattr(check_nvrtc, "find_library", lambda folder: folder)
    monkeypatch.setattr(check_nvrtc, "Nvrtc", lambda lib: _FakeCubins())
    monkeypatch.setattr(check_nvrtc, "merged_programs", lambda *_: [("src", [], ["radix_topk_float32"])])
    monkeypatch.setattr(check_nvrtc, "disassemble", disassemble)
    monkeypatch.setattr(check_nvrtc.check_sass, "find_cuobjdump", lambda: ("cuobjdump", {}))
    report = check_nvrtc.check_folder(_wheel_folder(tmp_path), ["80"], True, False, sass=True)
    assert seen == [("sm_80", [b"CUBIN"])] and report["sass"] == 2  # one call for the architecture
    assert report["failures"] == [
        "NVRTC 13.5, SASS check: radix_topk_float32 (sm_80): no 128-bit global load (LDG.E.128) for contiguous rows",
        "NVRTC 13.5, SASS check: radix_topk_float32 (sm_80): at most 1 global loads in flight before a use (want 4)",
    ]
    # Without --sass no cubin is asked for and nothing is disassembled.
    report = check_nvrtc.check_folder(_wheel_folder(tmp_path), ["80"], True, False)
    assert seen == [("sm_80", [b"CUBIN"])] and "sass" not in report and report["failures"] == []


def test_a_build_missing_from_the_disassembly_or_no_cuobjdump_fails(tmp_path, monkeypatch):
    builds = [{"arch": "sm_90", "name": "a"}, {"arch": "sm_90", "name": "b"}]
    assert check_nvrtc.sass_failures("13.5", builds, {("sm_90", "a"): [(0, False, "EXIT")]}) == [
        "NVRTC 13.5, sm_90: the SASS of b is not in the cubin's disassembly"
    ]
    monkeypatch.setattr(check_nvrtc, "find_library", lambda folder: folder)
    monkeypatch.setattr(check_nvrtc, "Nvrtc", lambda lib: _FakeCubins())
    monkeypatch.setattr(check_nvrtc, "merged_programs", lambda *_: [("src", [], [])])
    monkeypatch.setattr(check_nvrtc.check_sass, "find_cuobjdump", lambda: (None, {}))
    report = check_nvrtc.check_folder(_wheel_folder(tmp_path), ["80"], True, False, sass=True)
    assert report["failures"] == [f"NVRTC 13.5: the SASS check cannot run: {check_nvrtc.NO_CUOBJDUMP}"]


def _mb_state_block(source: str) -> str:
    # multiblock::State, its enums and its layout checks: plain C++ from multiblock_state.cuh.
    start = source.index("// What a launch does for a row.")
    return source[start : source.index("constexpr int MAX_BINS", start)]


def _syntax_check(text: str) -> subprocess.CompletedProcess:
    cxx = _toolchain.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler (set CXX, or install g++)")
    return subprocess.run(
        [cxx, "-std=c++17", "-fsyntax-only", "-x", "c++", "-"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )


def test_mb_state_layout_check_catches_a_moved_field():
    # The layout check the test side's MB_STATE relies on, without offsetof: swapping two fields
    # of one size (no size or padding changes) or widening one must fail to compile.
    header = _kernel_constants.HEADER.read_text()
    block = _mb_state_block((_launcher.kernel_dir() / "multiblock_state.cuh").read_text())
    assert _syntax_check(header + block).returncode == 0, _syntax_check(header + block).stderr
    cut = re.search(r"\n  int cut; [^\n]*", block)[0]
    width = re.search(r"\n  int width; [^\n]*", block)[0]
    swapped = block.replace(cut, "@@").replace(width, cut).replace("@@", width)
    assert swapped != block
    proc = _syntax_check(header + swapped)
    assert proc.returncode != 0 and "fields in order" in proc.stderr
    widened = block.replace("\n  int staging;", "\n  long long staging;")
    proc = _syntax_check(header + widened)
    assert proc.returncode != 0


@needs_nvrtc
@pytest.mark.parametrize("folder", FOLDERS)
def test_kernel_files_compile_alone_with_nvrtc(folder):
    # `#include "x.cuh"` and each .cu, alone, with -I kernels: every file includes what it uses.
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools/check_nvrtc.py"), folder, "--arch", "80", "--only-alone"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_nvrtc
@pytest.mark.parametrize("folder", FOLDERS)
def test_ptx_only_and_the_pre_sm90_branch_compile_with_nvrtc(folder):
    # --ptx-only: the front end only, every program for compute_90 and the branching ones
    # (cluster.cu) for compute_75 too (.ci/run's subset uses --ptx-arch beside cubins); no cubin,
    # so no register report.
    tool = [sys.executable, str(ROOT / "tools/check_nvrtc.py"), folder]
    cmd = [*tool, "--arch", "90", "--ptx-only", "--ptx-arch", "75", "--no-alone"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ": 0 kernel builds, " in proc.stdout and " programs to PTX only, " in proc.stdout


@needs_nvrtc
@pytest.mark.parametrize("folder", FOLDERS)
def test_launcher_programs_compile_with_nvrtc_without_spills(folder):
    # What CuPy does on a user's first call, for sm_75, sm_80 and sm_90 (about 35 s per arch).
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools/check_nvrtc.py"), folder, "--no-alone"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_nvrtc
@pytest.mark.parametrize("folder", FOLDERS)
def test_the_front_end_alone_finds_an_error_in_a_template_a_kernel_instantiates(folder):
    # -fdevice-syntax-only: parsing and template instantiation, no back end. One element type's
    # resident program compiles; with a kernel that instantiates a broken template it does not.
    script = f"""
import pathlib, sys
sys.path.insert(0, {str(ROOT / "tools")!r})
import check_nvrtc as c
folder = pathlib.Path({folder!r})
nvrtc = c.Nvrtc(c.find_library(folder))
(source, names, kernels), = c.merged_programs(("resident",), ("uint16",))
bad = source + '''
template <typename T> __device__ T twice(T v) {{ return v.no_such_member * 2; }}
extern "C" __global__ void probe(float* p) {{ p[0] = twice(p[1]); }}
'''
for program in ((source, names, kernels), (bad, names, kernels)):
    print(len(c.front_end_failures(nvrtc, "?", folder, ["90"], [], [program])))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert proc.returncode == 0 and proc.stdout.split() == ["0", "1"], proc.stdout + proc.stderr
