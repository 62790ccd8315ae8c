"""``cupy.cuda.runtime`` of the stand-in."""

from __future__ import annotations

from .._state import CAPTURING, DEVICES, THREAD, CUDARuntimeError, check_device, host_waits

__all__ = [
    "CUDARuntimeError",
    "deviceSynchronize",
    "driverGetVersion",
    "getDevice",
    "getDeviceCount",
    "getDeviceProperties",
    "memGetInfo",
    "runtimeGetVersion",
    "setDevice",
    "streamIsCapturing",
    "streamSynchronize",
]


def getDeviceCount() -> int:
    return len(DEVICES)


def getDevice() -> int:
    return THREAD.device


def setDevice(device: int) -> None:
    THREAD.device = check_device(device)


def streamIsCapturing(stream: int) -> bool:
    return int(stream) in CAPTURING


def getDeviceProperties(device: int) -> dict:
    facts = DEVICES[check_device(device)]
    major, minor = facts["compute_capability"]
    return {
        "name": facts["name"].encode(),
        "multiProcessorCount": facts["MultiProcessorCount"],
        "sharedMemPerBlock": facts["MaxSharedMemoryPerBlock"],
        "sharedMemPerBlockOptin": facts["MaxSharedMemoryPerBlockOptin"],
        "major": int(major),
        "minor": int(minor),
        "totalGlobalMem": 80 << 30,
    }


def memGetInfo() -> tuple[int, int]:
    return 64 << 30, 80 << 30


def driverGetVersion() -> int:
    return 13000


def runtimeGetVersion() -> int:
    return 13000


def deviceSynchronize() -> None:
    host_waits("sync", "cudaDeviceSynchronize")


def streamSynchronize(stream: int) -> None:
    host_waits("sync", "cudaStreamSynchronize")
