"""Finding CUDA's headers, and saying why the simulator cannot run when they are missing."""

from __future__ import annotations

import pathlib

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


def test_modules_read_the_runtime_from_one_precompiled_header(monkeypatch, tmp_path):
    """A cold cache (a fresh CI machine) builds the runtime's precompiled header once, and every
    module's compile takes it (GCC's -H marks a header read from a valid .gch with "! ")."""
    if not _toolchain.is_gcc():
        pytest.skip("the precompiled header is GCC's")
    import subprocess

    import numpy as np

    from cutopk import _host_build

    monkeypatch.setenv("CUTOPK_SIM_CACHE", str(tmp_path))
    commands = []
    real_run = subprocess.run

    def run(command, *args, **kwargs):
        commands.append(list(command))
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(_host_build.subprocess, "run", run)
    for scale in (2, 3):  # two modules, one header
        mod = sim.RawModule(code=f'extern "C" __global__ void k(float* x) {{ x[threadIdx.x] *= {scale}; }}')
        x = np.ones(4, dtype=np.float32)
        mod.get_function("k")((1,), (4,), (x,))
        assert x.tolist() == [scale] * 4
    headers = [c for c in commands if "c++-header" in c]
    modules = [c for c in commands if any(a.endswith("module.cpp") for a in c)]
    assert len(headers) == 1 and len(modules) == 2
    gch = next(tmp_path.glob("pch-*/sim_runtime.h.gch"))
    # Compiled again with -H (the build folder is gone: the unit is written anew).
    unit = tmp_path / "unit.cpp"
    unit.write_text(_toolchain.RUNTIME_INCLUDE + '\nextern "C" __global__ void k(float* x) { x[0] = 1; }\n')
    flags = modules[0][: [a.endswith("module.cpp") for a in modules[0]].index(True)]
    again = [*flags, str(unit), "-H", "-fsyntax-only"]
    shown = real_run(again, capture_output=True, text=True, check=True).stderr
    assert f"! {gch}" in shown, shown[:2000]


def test_modules_link_the_runtime_objects_built_once_and_keep_their_own_state(monkeypatch, tmp_path):
    """The runtime's code that is the same for every kernel (RUNTIME_SOURCES) is compiled once per
    set of flags and linked into each module, not compiled with each; each module still has its
    own copy of the runtime's state: a fault in one leaves the other's error message empty."""
    import subprocess

    import numpy as np

    from cutopk import _host_build

    monkeypatch.setenv("CUTOPK_SIM_CACHE", str(tmp_path))
    commands = []
    real_run = subprocess.run

    def run(command, *args, **kwargs):
        commands.append(list(command))
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(_host_build.subprocess, "run", run)
    fine = sim.RawModule(code='extern "C" __global__ void k(int* x) { x[threadIdx.x] = 7; }')
    x = np.zeros(4, dtype=np.int32)
    fine.get_function("k")((1,), (4,), (x,))
    assert x.tolist() == [7] * 4
    broken = sim.RawModule(code='extern "C" __global__ void k(int* x) { if (threadIdx.x == 2) __trap(); }')
    with pytest.raises(sim.KernelCrashError, match=r"__trap\(\) called"):
        broken.get_function("k")((1,), (4,), (x,))
    assert b"__trap() called" in broken._lib.cutopk_sim_error()
    assert fine._lib.cutopk_sim_error() == b""  # not the other module's message

    objects = sorted(tmp_path.glob("runtime-*/*.o"))
    assert [o.name for o in objects] == sorted(
        f"{pathlib.Path(n).stem}.o" for n in _toolchain.RUNTIME_SOURCES
    )
    for name in _toolchain.RUNTIME_SOURCES:  # each compiled once, for both modules
        assert sum(any(a.endswith(name) for a in c) and "-c" in c for c in commands) == 1, name
    modules = [c for c in commands if any(a.endswith("module.cpp") for a in c)]
    assert len(modules) == 2 and all({str(o) for o in objects} <= set(c) for c in modules)


def test_the_runtime_objects_key_follows_the_runtime_flags_and_compiler(monkeypatch, tmp_path):
    """Objects linked into a module must come from the same runtime text, flags and compiler
    (path and version) as the module: each of these changes the objects' folder."""
    monkeypatch.setenv("CUTOPK_SIM_CACHE", str(tmp_path))
    monkeypatch.setattr(_toolchain, "build_once", lambda out, name, text, commands: out)  # keys only
    monkeypatch.setattr(_toolchain, "precompiled_header", lambda flags, includes: None)

    def folder(flags=_toolchain.BASE_FLAGS, includes=("-I/cuda",)):
        objects = _toolchain.runtime_objects(flags, list(includes))
        assert [o.name for o in objects] == [f"{pathlib.Path(n).stem}.o" for n in _toolchain.RUNTIME_SOURCES]
        assert len({o.parent for o in objects}) == 1 and objects[0].parent.parent == tmp_path
        return objects[0].parent

    first = folder()
    assert folder() == first
    seen = {
        first,
        folder(flags=(*_toolchain.BASE_FLAGS, *_toolchain.ASAN_FLAGS)),
        folder(flags=(*_toolchain.BASE_FLAGS, "-DCUTOPK_X=1")),
        folder(includes=("-I/other/cuda",)),
    }
    monkeypatch.setattr(_toolchain, "compiler_identity", lambda cxx: "g++ (upgraded in place) 99.1")
    seen.add(folder())
    monkeypatch.setattr(_toolchain, "runtime_text", lambda: "// another runtime")
    seen.add(folder())
    assert len(seen) == 6


def test_the_compiler_identity_is_its_first_version_line_or_nothing(tmp_path):
    fake = tmp_path / "fake-c++"
    fake.write_text("#!/bin/sh\necho 'fake-c++ (Test) 1.2.3'\necho 'Copyright'\n")
    fake.chmod(0o755)
    failing = tmp_path / "failing-c++"
    failing.write_text("#!/bin/sh\nexit 3\n")
    failing.chmod(0o755)
    assert _toolchain.compiler_identity.__wrapped__(str(fake)) == "fake-c++ (Test) 1.2.3"
    assert _toolchain.compiler_identity.__wrapped__(str(failing)) == ""
    assert _toolchain.compiler_identity.__wrapped__(str(tmp_path / "missing")) == ""
