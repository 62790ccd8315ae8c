"""M0 of the lease (benchmarks/cutopk_bench/lease.py): the facts the other steps are read against.

    python3 benchmarks/gpu/facts.py [--dry-run]

nvidia-smi's queries (read only: clocks, power limit, memory, driver), the device's SM count,
shared memory per block (default and opt-in) and per SM, L2, and for each of the cluster family's
launch shapes the clusters that fit at once (``cuOccupancyMaxActiveClusters`` through
cuda-bindings), with CuPy's, torch's and the CUDA runtime's versions. Prints to stdout (the
lease's log); nothing is changed on the device.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

SMI = (
    "name,compute_cap,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,"
    "power.limit,persistence_mode,compute_mode,mig.mode.current,temperature.gpu"
)
# Rows of the cluster family's launches whose shared memory the occupancy query is asked for.
ROW_LENGTHS = (65536, 131072, 262144)


def smi() -> None:
    cmd = ["nvidia-smi", f"--query-gpu={SMI}", "--format=csv"]
    try:
        print(subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False).stdout.strip())
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"nvidia-smi: {exc}")


def device() -> None:
    import cupy

    dev = cupy.cuda.Device()
    a = dev.attributes
    print(
        f"cupy {cupy.__version__}, CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}, "
        f"driver {cupy.cuda.runtime.driverGetVersion()}, compute capability {dev.compute_capability}"
    )
    for key in (
        "MultiProcessorCount",
        "MaxSharedMemoryPerBlock",
        "MaxSharedMemoryPerBlockOptin",
        "MaxSharedMemoryPerMultiprocessor",
        "L2CacheSize",
        "ClockRate",
        "MaxThreadsPerMultiProcessor",
        "MaxBlocksPerMultiprocessor",
    ):
        print(f"{key}: {a.get(key)}")
    try:
        import torch

        print(f"torch {torch.__version__} CUDA {torch.version.cuda}")
    except ImportError as exc:
        print(f"torch: {exc}")
    clusters(a.get("MaxSharedMemoryPerBlockOptin", 0))


def _shapes(optin: int) -> list[tuple[int, str, int]]:
    """(cluster size, what, shared bytes) of the occupancy queries: each size at the shared memory
    of the cluster family's rows of ROW_LENGTHS (K = 50, float32) on a device of ``optin`` bytes
    opt-in, and at the opt-in maximum."""
    from cutopk.cuda import dispatch
    from cutopk.cuda.families import cluster

    device = dispatch.Device(shared_bytes=dispatch.shared_limit(48 * 1024, optin), clusters=True)
    out = []
    for blocks in cluster.SIZES:
        for n in ROW_LENGTHS:
            shared = cluster.shared_bytes(n, 50, 4, blocks, device)
            if shared is not None:
                out.append((blocks, f"1x{n} k=50", shared))
        out.append((blocks, "opt-in maximum", optin))
    return out


def clusters(optin: int) -> None:
    """cuOccupancyMaxActiveClusters for each of cluster_topk's entry points (its cluster shape is
    compiled in: one entry point per size of cluster.SIZES) at the shared memory of the cluster
    family's rows of ROW_LENGTHS and at the opt-in maximum, through cuda-bindings' driver API on
    CuPy's function handle: the counts ``Device.active_clusters`` would hold."""
    try:
        import cupy
        from cuda.bindings import driver as drv
    except ImportError as exc:
        print(f"clusters that fit: not asked ({exc})")
        return
    import cutopk
    from cutopk.cuda import launcher

    try:
        cutopk.top_k(cupy.arange(65536, dtype=cupy.float32), 50, algorithm="cluster")  # builds the module
    except Exception as exc:  # noqa: BLE001 - a fact not read is said, the lease goes on
        print(
            f"clusters that fit: not read, the cluster kernel did not build or run ({type(exc).__name__}: {exc})"
        )
        return
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    for blocks, what, shared in _shapes(optin):
        try:
            name = f"cluster_topk_float32_blocks{blocks}"
            fn = drv.CUfunction(launcher.kernel_module("cuda", "float").get_function(name).ptr)
            (err,) = drv.cuFuncSetAttribute(
                fn, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin
            )
            cfg = drv.CUlaunchConfig()
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = blocks * sms, 1, 1
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 1024, 1, 1
            cfg.sharedMemBytes = shared
            err, count = drv.cuOccupancyMaxActiveClusters(fn, cfg)
            print(
                f"clusters of {blocks} blocks, {shared} B shared each ({what}): {count} fit at once ({err})"
            )
        except Exception as exc:  # noqa: BLE001 - a fact not read is said, the lease goes on
            print(f"clusters of {blocks} ({what}): not read ({type(exc).__name__}: {exc})")


def main(argv=None) -> int:
    dry = "--dry-run" in (argv if argv is not None else sys.argv[1:])
    if dry:
        shapes = ", ".join(f"{b} blocks at {what}: {shared} B" for b, what, shared in _shapes(227 * 1024))
        print(
            f"would run: nvidia-smi --query-gpu={SMI} --format=csv; CuPy's device attributes; "
            f"cuOccupancyMaxActiveClusters for cluster_topk ({shapes}; an H100's opt-in shown)"
        )
        return 0
    smi()
    device()
    return 0


if __name__ == "__main__":
    sys.exit(main())
