"""Counting a simulator launch's global-memory traffic: the :class:`LaunchTraffic` record of a
launch, :func:`counting_traffic` blocks, and the array regions a counting build watches."""

from __future__ import annotations

import contextlib
from typing import NamedTuple

from . import _staging


class LaunchTraffic(NamedTuple):
    """The global-memory traffic of one launch (``RawModule(count_traffic=True)``, or any launch
    inside :func:`counting_traffic`): bytes the kernel read and wrote in its array arguments'
    memory, and the distinct 32-byte sectors it touched there (read or written). Shared memory,
    the threads' own stacks and registers are not global memory and are not counted."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    bytes_read: int
    bytes_written: int
    sectors: int

    @property
    def bytes(self) -> int:
        """Bytes read and written."""
        return self.bytes_read + self.bytes_written


# The record lists of the counting_traffic() blocks now open: every launch is counted into each.
COUNTING: list[list[LaunchTraffic]] = []


@contextlib.contextmanager
def counting_traffic():
    """Count the global-memory traffic of every simulator launch in the block, whichever module
    makes it (the launcher's own modules included): yields the list of :class:`LaunchTraffic`
    records, one per launch, in order. Each module builds its counting variant on its first
    counted launch (a compile, cached on disk like any other).

    Examples
    --------
    >>> import numpy as np
    >>> from cutopk import sim
    >>> mod = sim.RawModule(code='extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2; }')
    >>> with sim.counting_traffic() as records:
    ...     mod.get_function("twice")((1,), (8,), (np.ones(8, np.float32),))
    >>> records[0].bytes_read, records[0].bytes_written, records[0].sectors
    (32, 32, 1)
    """
    records: list[LaunchTraffic] = []
    COUNTING.append(records)
    try:
        yield records
    finally:
        COUNTING.remove(records)


def traffic_spans(regions: list[_staging.Region]) -> list[tuple[int, int]]:
    """The regions' bytes as disjoint sorted spans, overlapping or touching ones joined."""
    spans: list[list[int]] = []
    for r in sorted((r for r in regions if r.hi > r.lo), key=lambda r: r.lo):
        if spans and r.lo <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], r.hi)
        else:
            spans.append([r.lo, r.hi])
    return [(lo, hi) for lo, hi in spans]
