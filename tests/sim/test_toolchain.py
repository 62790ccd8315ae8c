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
