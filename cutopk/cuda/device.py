"""The device a launch runs on, for both launcher targets: ``"cuda"`` (CuPy's current device)
and ``"sim"`` (the CPU simulator, NumPy arrays). The launcher modules (``launcher``, ``rows``,
``multiblock``) all read device facts here, so none of them imports another for it.
"""

from __future__ import annotations

import functools

from . import dispatch as _dispatch
from . import tables as _tables


def device_id(target: str) -> int:
    """CuPy's current device, or -1 for the simulator."""
    if target != "cuda":
        return -1
    import cupy

    return cupy.cuda.Device().id


@functools.cache
def device_facts(target: str, device: int) -> _dispatch.Device:
    """What the dispatcher needs to know of a device: SMs and dynamic shared memory per block
    (the opt-in maximum where the device has one), and its measured dispatch table
    (:mod:`cutopk.cuda.tables`: read once per device, here). The simulator plans by the hand
    rules."""
    if target != "cuda":
        return _dispatch.Device(clusters=True)  # the simulator runs thread-block clusters
    import cupy

    handle = cupy.cuda.Device(device)
    attrs = handle.attributes
    shared = _dispatch.shared_limit(
        attrs["MaxSharedMemoryPerBlock"], attrs.get("MaxSharedMemoryPerBlockOptin", 0)
    )
    # CuPy's attribute dictionary has no compute capability: its `compute_capability` ("90") does.
    # Reading the dictionary made every real GPU look cluster-less.
    capability = str(handle.compute_capability)
    clusters = int(capability) >= 90
    try:
        key: dict[str, str] | None = table_key(device, capability)
    except Exception:  # noqa: BLE001 - a CuPy that cannot say: no user table, the package's still
        key = None
    table = _tables.load(capability, key)
    return _dispatch.Device(
        sm_count=attrs["MultiProcessorCount"], shared_bytes=shared, clusters=clusters, table=table
    )


def table_key(device: int, capability: str) -> dict[str, str]:
    """The key of a user's dispatch table for ``device`` (:func:`cutopk.cuda.tables.device_key`)."""
    import cupy

    runtime = cupy.cuda.runtime
    name = runtime.getDeviceProperties(device)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return _tables.device_key(name, capability, runtime.runtimeGetVersion(), runtime.driverGetVersion())
