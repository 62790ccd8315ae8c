"""Finding CUDA's headers, and saying why the simulator cannot run when they are missing."""

from __future__ import annotations

import pytest

from cutopk import sim
from cutopk.sim import _toolchain


@pytest.fixture
def fresh_lookup():
    _toolchain.cuda_include_dirs.cache_clear()
    _toolchain.unavailable_reason.cache_clear()
    yield
    _toolchain.cuda_include_dirs.cache_clear()
    _toolchain.unavailable_reason.cache_clear()


def test_missing_headers_are_named_with_the_packages_that_provide_them(tmp_path, monkeypatch, fresh_lookup):
    (tmp_path / "cuda_fp16.h").write_text("")  # an incomplete install is not taken
    monkeypatch.setattr(_toolchain, "_candidate_include_dirs", lambda: iter([tmp_path]))
    assert not sim.is_available()
    reason = sim.unavailable_reason()
    assert "crt/host_defines.h" in reason and "nvidia-cuda-crt" in reason and "nvidia-cuda-cccl" in reason
    with pytest.raises(sim.SimUnavailableError, match="CUDA's headers"):
        sim.RawModule(code='extern "C" __global__ void k() {}')


def test_cccl_folder_of_a_toolkit_is_added(tmp_path, monkeypatch, fresh_lookup):
    for name in ("cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h", "crt/host_defines.h", "cccl/nv/target"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    monkeypatch.setattr(_toolchain, "_candidate_include_dirs", lambda: iter([tmp_path]))
    assert _toolchain.cuda_include_dirs() == (tmp_path, tmp_path / "cccl")


def _complete_headers(folder, cccl: bool = True):
    for name in (
        "cuda_runtime.h",
        "cuda_fp16.h",
        "cuda_bf16.h",
        "crt/host_defines.h",
        *(["nv/target"] * cccl),
    ):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("")


def test_headers_without_cccl_are_passed_over_for_the_next_candidate(tmp_path, monkeypatch, fresh_lookup):
    no_cccl, full = tmp_path / "no_cccl", tmp_path / "full"
    _complete_headers(no_cccl, cccl=False)
    _complete_headers(full)
    monkeypatch.setattr(_toolchain, "_candidate_include_dirs", lambda: iter([no_cccl, full]))
    assert _toolchain.cuda_include_dirs() == (full,)


def test_candidates_follow_the_environment_then_nvcc_then_the_wheels(tmp_path, monkeypatch):
    monkeypatch.setenv("CUTOPK_CUDA_INCLUDE", str(tmp_path / "mine"))
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "toolkit"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setattr(_toolchain.shutil, "which", lambda name: None)  # no nvcc on PATH
    monkeypatch.setattr(_toolchain.glob, "glob", lambda pattern: [])  # no /usr/local/cuda*
    monkeypatch.setattr(_toolchain.sys, "path", [str(tmp_path / "site")])
    found = list(_toolchain._candidate_include_dirs())
    assert found[:2] == [tmp_path / "mine", tmp_path / "toolkit" / "include"]
    assert tmp_path / "site" / "nvidia" / "cu13" / "include" in found[2:]
    assert tmp_path / "site" / "nvidia" / "cuda_runtime" / "include" in found[2:]


def test_no_compiler_or_another_cpu_is_the_reason_the_simulator_cannot_run(monkeypatch, fresh_lookup):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(_toolchain.shutil, "which", lambda name: None)
    assert _toolchain.compiler() is None
    assert sim.unavailable_reason() == "no C++ compiler found (set CXX, or install g++)"
    _toolchain.unavailable_reason.cache_clear()
    monkeypatch.setattr("platform.machine", lambda: "aarch64")
    assert (
        sim.unavailable_reason()
        == "the simulator's fiber switch is written for x86-64, this machine is aarch64"
    )
