"""The device a launch runs on, for both launcher targets: ``"cuda"`` (CuPy's current device)
and ``"sim"`` (the CPU simulator, NumPy arrays). The launcher modules (``launcher``, ``rows``,
``multiblock``) all read device facts here, so none of them imports another for it.
"""

from __future__ import annotations

import functools

from . import dispatch as _dispatch


def device_id(target: str) -> int:
    """CuPy's current device, or -1 for the simulator."""
    if target != "cuda":
        return -1
    import cupy

    return cupy.cuda.Device().id


@functools.cache
def device_facts(target: str, device: int) -> _dispatch.Device:
    """What the dispatcher needs to know of a device: SMs and dynamic shared memory per block
    (the opt-in maximum where the device has one)."""
    if target != "cuda":
        return _dispatch.Device(clusters=True)  # the simulator runs thread-block clusters
    import cupy

    handle = cupy.cuda.Device(device)
    attrs = handle.attributes
    shared = _dispatch.shared_limit(
        attrs["MaxSharedMemoryPerBlock"], attrs.get("MaxSharedMemoryPerBlockOptin", 0)
    )
    # CuPy's attribute dictionary has no compute capability: its `compute_capability` ("90") does.
    # Reading the dictionary made every real GPU look cluster-less (H100 scoreboard, 2026-11-26).
    clusters = int(handle.compute_capability) >= 90
    return _dispatch.Device(sm_count=attrs["MultiProcessorCount"], shared_bytes=shared, clusters=clusters)
