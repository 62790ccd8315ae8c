"""M0 of the lease (cutopk/_bench/lease.py): the facts the other steps are read against.

    python3 benchmarks/gpu/facts.py [--dry-run]

nvidia-smi's queries (read only: clocks, power limit, memory, driver), the device's SM count,
shared memory per block (default and opt-in) and per SM, L2, and for each of the cluster family's
launch shapes the clusters that fit at once (``cudaOccupancyMaxActiveClusters`` through
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
# The cluster family's launches (kernels/cluster.cu): 512 threads a block, 2 to 8 blocks a cluster
# (the row's slices), each with up to the opt-in shared memory.
CLUSTER_SIZES = (2, 4, 8)


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


def clusters(shared: int) -> None:
    """cudaOccupancyMaxActiveClusters for cluster_topk's shapes at the opt-in shared memory."""
    try:
        import cupy
        from cuda.bindings import runtime as rt
    except ImportError as exc:
        print(f"clusters that fit: not asked ({exc})")
        return
    import cutopk
    from cutopk.cuda import launcher

    try:
        cutopk.top_k(cupy.arange(65536, dtype=cupy.float32), 50, algorithm="cluster")  # builds the module
        fn = launcher.kernel_function("cuda", "float", "cluster_topk_float32")
    except Exception as exc:  # noqa: BLE001 - a fact not read is said, the lease goes on
        print(
            f"clusters that fit: not read, the cluster kernel did not build or run ({type(exc).__name__}: {exc})"
        )
        return
    for size in CLUSTER_SIZES:
        try:
            (err,) = rt.cudaFuncSetAttribute(
                fn.ptr, rt.cudaFuncAttribute.cudaFuncAttributeMaxDynamicSharedMemorySize, shared
            )
            cfg = rt.cudaLaunchConfig_t()
            cfg.gridDim = rt.dim3()
            cfg.gridDim.x, cfg.gridDim.y, cfg.gridDim.z = size * 132, 1, 1
            cfg.blockDim = rt.dim3()
            cfg.blockDim.x, cfg.blockDim.y, cfg.blockDim.z = 512, 1, 1
            cfg.dynamicSmemBytes = shared
            attr = rt.cudaLaunchAttribute()
            attr.id = rt.cudaLaunchAttributeID.cudaLaunchAttributeClusterDimension
            attr.val.clusterDim.x, attr.val.clusterDim.y, attr.val.clusterDim.z = size, 1, 1
            cfg.attrs, cfg.numAttrs = [attr], 1
            err, count = rt.cudaOccupancyMaxActiveClusters(fn.ptr, cfg)
            print(
                f"clusters of {size} x 512 threads, {shared} B shared each, that fit at once: {count} ({err})"
            )
        except Exception as exc:  # noqa: BLE001 - a fact not read is said, the lease goes on
            print(f"clusters of {size}: not read ({type(exc).__name__}: {exc})")


def main(argv=None) -> int:
    dry = "--dry-run" in (argv if argv is not None else sys.argv[1:])
    if dry:
        print(
            f"would run: nvidia-smi --query-gpu={SMI} --format=csv; CuPy's device attributes; "
            f"cudaOccupancyMaxActiveClusters for clusters of {CLUSTER_SIZES}"
        )
        return 0
    smi()
    device()
    return 0


if __name__ == "__main__":
    sys.exit(main())
