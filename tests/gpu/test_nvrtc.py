"""The NVRTC check (tools/check_nvrtc.py): the programs the launcher builds compile with the NVRTC
of each CUDA wheel folder in ``CUTOPK_NVRTC_DIRS`` (``os.pathsep``-separated; make one with
``python tools/check_nvrtc.py --install DIR VERSION``) with no spill and no stack frame, and each
kernel file compiles alone. Without such a folder those tests skip, with the reason; the checks
of the check itself, and of the multiblock State's layout check, need none."""

from __future__ import annotations

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


def _mb_state_block(source: str) -> str:
    # multiblock::State, its enums and its layout checks: plain C++ from multiblock.cu.
    start = source.index("// What a launch does for a row.")
    return source[start : source.index("// sample_threshold:", start)]


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
    block = _mb_state_block((_launcher.kernel_dir() / "multiblock.cu").read_text())
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
def test_launcher_programs_compile_with_nvrtc_without_spills(folder):
    # What CuPy does on a user's first call, for sm_75, sm_80 and sm_90 (about 35 s per arch).
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools/check_nvrtc.py"), folder, "--no-alone"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
