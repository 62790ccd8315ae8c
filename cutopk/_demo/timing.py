"""Timing: CUDA events with the L2 cache flushed before every repetition on a GPU,
``time.perf_counter`` on the CPU; median and spread; the device's copy bandwidth.

Both timers adapt the number of repetitions to a time budget per measurement (at least
``min_repeat``, at most ``repeat``), so that a full sort of 2**28 elements does not take the
quick run's whole minute while a 20-microsecond kernel still gets ``repeat`` samples.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np


def summarize(times: list[float]) -> dict:
    """Median, min, max and the quartiles (seconds) of the repetitions."""
    q = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
    return {"median": statistics.median(times), "min": min(times), "max": max(times),
            "q1": q[0], "q3": q[2], "repeat": len(times)}  # fmt: skip


def _repeats(first: float, repeat: int, min_repeat: int, budget: float) -> int:
    return max(min_repeat, min(repeat, int(budget / max(first, 1e-9))))


class CpuTimer:
    """Wall-clock time of a callable with ``time.perf_counter``."""

    def __init__(self, repeat: int = 7, warmup: int = 0, min_repeat: int = 3, budget: float = 0.5):
        # warmup 0: the loop's answer check is already a first, untimed call of every route.
        self.repeat, self.warmup, self.min_repeat, self.budget = repeat, warmup, min_repeat, budget

    def __call__(self, fn: Callable, own_stream: bool = False, capture: str = "cupy") -> dict:
        for _ in range(self.warmup):
            fn()
        times: list[float] = []
        while len(times) < (_repeats(times[0], self.repeat, self.min_repeat, self.budget) if times else 1):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return summarize(times)


# A one-thread kernel that spins on the global nanosecond timer: launched after the L2 flush and
# before the start event, it keeps the stream busy while the host launches the timed call, so
# Python-side overhead (argument checks, dispatch) is not counted: the events time the device.
_SPIN_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(1) cutopk_bench_spin(long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < (unsigned long long)ns);
}
"""


class GpuTimer:
    """Device time of a callable between two CUDA events on CuPy's current stream.

    Before every repetition a buffer twice the size of the L2 cache is written, so that each
    repetition reads its input from DRAM as it would in an application; then a spin kernel of
    ``spin_ms`` keeps the stream busy while the callable's launches are queued behind it. The events
    are recorded in stream order after both, so neither the flush nor the host's launch overhead is
    timed. A route on a stream of its own (JAX) cannot be ordered after the flush by the stream, so
    the device is synchronized first and its time includes its host-side dispatch.
    """

    def __init__(
        self,
        repeat: int = 20,
        warmup: int = 2,
        min_repeat: int = 5,
        budget: float = 1.0,
        spin_ms: float = 1.0,
    ):
        import cupy

        self.cupy = cupy
        self.repeat, self.warmup, self.min_repeat, self.budget = repeat, warmup, min_repeat, budget
        self.l2_bytes = int(cupy.cuda.Device().attributes.get("L2CacheSize", 64 << 20))
        self.flush = cupy.empty(max(2 * self.l2_bytes, 1 << 20), dtype=cupy.uint8)
        self.spin_ns = int(spin_ms * 1e6)
        try:
            self.spin = cupy.RawKernel(_SPIN_SOURCE, "cutopk_bench_spin")
            self.spin((1,), (1,), (np.int64(1000),))
            cupy.cuda.Device().synchronize()
        except Exception:  # noqa: BLE001 - without the spin kernel the host overhead is timed too
            self.spin = None

    def __call__(self, fn: Callable, own_stream: bool = False, capture: str = "cupy") -> dict:
        cp = self.cupy
        for _ in range(self.warmup):
            fn()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        times: list[float] = []
        while len(times) < (_repeats(times[0], self.repeat, self.min_repeat, self.budget) if times else 1):
            self.flush.fill(len(times) & 0xFF)  # evicts the input from L2
            if own_stream:
                cp.cuda.Device().synchronize()
            elif self.spin is not None:
                self.spin((1,), (1,), (np.int64(self.spin_ns),))
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end) * 1e-3)
        return summarize(times)

    def copy_bandwidth(self, nbytes: int = 1 << 30) -> float:
        """Bytes per second (read plus written) of a device-to-device copy of ``nbytes``."""
        cp = self.cupy
        nbytes = min(nbytes, cp.cuda.runtime.memGetInfo()[0] // 4) // 4 * 4  # two buffers, room to spare
        stats = self._time_copy(nbytes)
        cp.get_default_memory_pool().free_all_blocks()  # the buffers died with _time_copy's frame
        return 2 * nbytes / stats["median"]

    def _time_copy(self, nbytes: int) -> dict:
        src = self.cupy.ones(nbytes // 4, dtype=self.cupy.float32)
        dst = self.cupy.empty_like(src)
        return self(lambda: self.cupy.copyto(dst, src))


TIMINGS = ("eager", "graph", "graph-flush")  # --timing: how a call is timed (benchmarks/README.md)


class Uncapturable(RuntimeError):
    """A route cannot be timed under graph replay (its reason is said once, under the table)."""


class GraphTimer:
    """Device time of a callable replayed from a CUDA graph, as a server calls top-K.

    The callable is called twice on the capturing stream (the warm-up: NVRTC, the workspace and
    the memory pool's blocks for that stream, so the capture allocates nothing), then ``calls``
    calls are captured once (CuPy's stream capture, or ``torch.cuda.CUDAGraph`` for a route that
    launches on torch's stream: ``capture="torch"``) and the graph is replayed between two CUDA
    events; a sample is the replay's time over ``calls``. ``flush`` (``--timing graph-flush``):
    one call per graph and the L2 written between replays, so each replay reads its input from
    DRAM; without it (``--timing graph``) ten calls back to back on one input, the steady state
    of a serving loop, whose input may stay in L2 where it fits. The eager timer's spin kernel
    (where it built) runs before each replay, so the host's submission is not counted either.
    """

    def __init__(self, base: GpuTimer, flush: bool, calls: int = 10):
        self.base, self.flush = base, flush
        self.calls = 1 if flush else calls
        self.repeat, self.warmup, self.min_repeat, self.budget = base.repeat, 2, base.min_repeat, base.budget

    def __call__(self, fn: Callable, own_stream: bool = False, capture: str = "cupy") -> dict:
        if capture not in ("cupy", "torch"):
            raise Uncapturable(capture or "cannot be captured")
        replay = self._torch_graph(fn) if capture == "torch" else self._cupy_graph(fn)
        cp = self.base.cupy
        start, end = cp.cuda.Event(), cp.cuda.Event()
        times: list[float] = []
        while len(times) < (_repeats(times[0], self.repeat, self.min_repeat, self.budget) if times else 1):
            if self.flush:
                self.base.flush.fill(len(times) & 0xFF)
            if self.base.spin is not None:  # the stream busy while the host submits the replay
                self.base.spin((1,), (1,), (np.int64(self.base.spin_ns),))
            start.record()
            replay()
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end) * 1e-3 / self.calls)
        return summarize(times)

    def _cupy_graph(self, fn: Callable) -> Callable[[], None]:
        cp = self.base.cupy
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            for _ in range(self.warmup):
                fn()
            stream.synchronize()
            stream.begin_capture()
            try:
                for _ in range(self.calls):
                    fn()
            except Exception as exc:  # noqa: BLE001 - any failure inside a capture means: not capturable
                stream.end_capture()
                raise Uncapturable(
                    f"CuPy's stream capture failed: {type(exc).__name__}: {exc}"[:200]
                ) from None
            graph = stream.end_capture()
        graph.upload()
        current = cp.cuda.get_current_stream()
        return lambda: graph.launch(current)

    def _torch_graph(self, fn: Callable) -> Callable[[], None]:
        import torch

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                for _ in range(self.calls):
                    fn()
        except Exception as exc:  # noqa: BLE001 - as in _cupy_graph
            raise Uncapturable(f"torch.cuda.graph failed: {type(exc).__name__}: {exc}"[:200]) from None
        return graph.replay
