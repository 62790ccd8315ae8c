"""Timing: CUDA events with the L2 cache flushed between repetitions on a GPU, perf_counter on the
CPU; the device's copy bandwidth measured in the same run."""

from __future__ import annotations

import statistics
import time


class GpuTimer:
    """Times a callable on the current CuPy stream, L2 flushed before every repetition."""

    def __init__(self, repeat: int = 20, warmup: int = 3):
        import cupy

        self.cupy = cupy
        self.repeat, self.warmup = repeat, warmup
        l2 = cupy.cuda.Device().attributes.get("L2CacheSize", 64 << 20)
        self.flush = cupy.empty(max(2 * l2, 1 << 20), dtype=cupy.uint8)

    def __call__(self, fn) -> dict:
        cp = self.cupy
        for _ in range(self.warmup):
            fn()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for i in range(self.repeat):
            self.flush.fill(i & 0xFF)  # evicts the input from L2: every repetition reads DRAM
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end) * 1e-3)
        return summarize(times)

    def copy_bandwidth(self, nbytes: int = 1 << 30) -> float:
        """Bytes per second of a device-to-device copy (read + write counted)."""
        cp = self.cupy
        src = cp.ones(nbytes // 4, dtype=cp.float32)
        dst = cp.empty_like(src)
        stats = self(lambda: cp.copyto(dst, src))
        return 2 * nbytes / stats["median"]


class CpuTimer:
    def __init__(self, repeat: int = 5, warmup: int = 1):
        self.repeat, self.warmup = repeat, warmup

    def __call__(self, fn) -> dict:
        for _ in range(self.warmup):
            fn()
        times = []
        for _ in range(self.repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return summarize(times)


def summarize(times: list[float]) -> dict:
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}
