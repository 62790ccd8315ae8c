"""Which backends can run here, and why not: shared by the tests that cover every backend."""

from __future__ import annotations

import functools

import numpy as np
import pytest


@functools.cache
def sim_unavailable_reason() -> str | None:
    """None when the CPU simulator and the CUDA launcher can run here, else why not."""
    try:
        from cutopk import sim
        from cutopk.cuda import launcher  # noqa: F401
    except ImportError as exc:
        return f"the CUDA launcher or simulator is not importable: {exc}"
    if not sim.is_available():
        return f"the CPU simulator cannot run here: {sim.unavailable_reason()}"
    return None


def cuda_is_standin() -> bool:
    """Whether ``cupy`` is the CPU stand-in of tests/standin (kernels on the simulator)."""
    import sys

    return getattr(sys.modules.get("cupy"), "__name__", "") == "standin.cupy"


def hardware_only(reason: str) -> None:
    """Skip the calling test on the CuPy stand-in: what it checks only real hardware shows
    (docs/hardware-only.md lists these)."""
    if cuda_is_standin():
        pytest.skip(f"needs a real GPU ({reason}); the CuPy stand-in cannot show it")


@functools.cache
def cuda_unavailable_reason() -> str | None:
    """None when CuPy and a CUDA GPU (or the CuPy stand-in, with the CPU simulator behind it)
    are usable, else why not."""
    if cuda_is_standin():
        return sim_unavailable_reason()
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "no CUDA GPU found"
    except Exception as exc:  # noqa: BLE001 - any CUDA runtime failure means no usable GPU
        return f"no usable CUDA GPU: {exc}"
    return None


def to_backend(x: np.ndarray, backend: str):
    """The array as ``backend`` takes it (CuPy for "cuda")."""
    if backend == "cuda":
        import cupy

        return cupy.asarray(x)
    return x


def to_host(x):
    """A result array back on the host as NumPy."""
    get = getattr(x, "get", None)
    return get() if get is not None else np.asarray(x)


def require(backend: str) -> None:
    """Skip the calling test, with the reason, when ``backend`` cannot run here."""
    reason = {"numpy": None, "sim": sim_unavailable_reason, "cuda": cuda_unavailable_reason}[backend]
    reason = reason() if callable(reason) else reason
    if reason:
        pytest.skip(f"backend {backend!r} unavailable: {reason}")


def require_clusters(backend: str) -> None:
    """Skip the calling test, with the reason, where ``backend``'s device has no thread-block
    clusters (the cluster family: the simulator has them, a GPU from sm_90)."""
    require(backend)
    if backend == "cuda":
        from cutopk.cuda import launcher as _launcher

        if not _launcher._device_facts("cuda", _launcher._device_id("cuda")).clusters:
            pytest.skip("this GPU has no thread-block clusters (sm_90 or later)")


def usable(backend: str) -> str:
    """``backend``, once the calling test is skipped (with the reason) where it cannot run here."""
    require(backend)
    return backend


BACKEND_PARAMS = [
    pytest.param("numpy", id="numpy"),
    pytest.param("sim", id="sim"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.gpu),
]
