"""Where the benchmark runs: is there a usable GPU, what the machine and libraries are, and
where results go."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import pathlib
import platform
import re
import subprocess
import tempfile

from .._version import __version__

REPO = pathlib.Path(__file__).resolve().parents[2]


def gpu_unavailable() -> str | None:
    """None when CuPy sees a GPU it can use, else why not (never raises)."""
    try:
        import cupy
    except Exception as exc:  # noqa: BLE001 - a broken install (missing CUDA libraries) is "no GPU"
        return "CuPy is not installed" if isinstance(exc, ImportError) else f"CuPy fails to import ({exc})"
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "CuPy found no GPU"
    except Exception as exc:  # noqa: BLE001 - no driver, or a driver too old for this CuPy
        return f"CuPy cannot use a GPU ({type(exc).__name__}: {exc})"
    try:  # a device is there; can CuPy compile and run a kernel on it (NVRTC, driver/runtime)?
        if int((cupy.arange(4) + 1).sum()) != 10:
            return "CuPy runs kernels on the GPU but computes wrong sums"
    except Exception as exc:  # noqa: BLE001 - e.g. NVRTC missing: a broken install means "no GPU"
        return f"CuPy cannot run a kernel on the GPU ({type(exc).__name__}: {exc})"[:300]
    return None


def prepare_jax() -> None:
    """Keep JAX from grabbing most of the GPU's memory at import (its default), which would leave
    CuPy, cutopk and torch too little; a value the user set is kept."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.35")


def version(dist: str) -> str | None:
    """The installed version of a distribution, without importing it (importing JAX or torch
    would initialise CUDA)."""
    for name in (dist, *{"cupy": ("cupy-cuda13x", "cupy-cuda12x")}.get(dist, ())):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def device_record() -> dict:
    """Name, driver and runtime versions, memory, L2 size and SM count of CuPy's current GPU."""
    import cupy

    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {
        "device": name,
        "device_id": dev.id,
        "compute_capability": dev.compute_capability,
        "sm_count": props.get("multiProcessorCount"),
        "memory_bytes": props.get("totalGlobalMem"),
        "l2_bytes": props.get("l2CacheSize"),
        "driver": cupy.cuda.runtime.driverGetVersion(),
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
    }


def metadata(gpu: bool) -> dict:
    """Everything needed to reproduce or compare a run: date, machine, library versions, commit."""
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "backend": "cuda" if gpu else "numpy",
        "cutopk": __version__,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no"))
        if _git("rev-parse") == ""
        else None,
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        **{lib: version(lib) for lib in ("numpy", "cupy", "torch", "jax", "jaxlib", "ml_dtypes")},
    }
    if gpu:
        meta.update(device_record())
    return meta


def cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str | None:
    """Output of a git command in the source checkout this module was loaded from, or None."""
    if not (REPO / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def in_checkout() -> bool:
    """True when cutopk runs from a source checkout (not from site-packages)."""
    return (REPO / "benchmarks" / "run.py").is_file()


def results_base() -> pathlib.Path:
    """Where ``--save`` writes: ``benchmarks/results/`` in a source checkout, else
    ``./cutopk-results/`` in the current directory (an installed package has no results folder)."""
    return REPO / "benchmarks" / "results" if in_checkout() else pathlib.Path.cwd() / "cutopk-results"


def default_out_dir(meta: dict) -> pathlib.Path:
    """``<results_base()>/<date>-<device>/``."""
    device = meta.get("device") or f"cpu-{meta['cpu']}"
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")[:40]
    return results_base() / f"{meta['date'][:10]}-{slug}"


def unwritable(folder: pathlib.Path) -> str | None:
    """None when files can be written into ``folder`` (created if missing), else why not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".cutopk-write-check-"):
            pass
    except OSError as exc:
        return f"cannot write into {folder}: {exc.strerror or exc}"
    return None
