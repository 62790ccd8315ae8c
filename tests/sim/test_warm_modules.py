"""Memory maps of many simulator modules: each keeps its fiber stacks (two maps per thread)
between launches, so only the KEEP_WARM launched last keep them. The launcher builds a module
per (element type, kernel family), over a hundred in a long test run, and a process may hold only
vm.max_map_count (65530) maps: past that, every allocation fails with MemoryError."""

from __future__ import annotations

import numpy as np

from cutopk import sim
from cutopk.sim import _library


def _maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def test_modules_launched_least_recently_give_back_their_stacks(monkeypatch):
    monkeypatch.setattr(_library, "KEEP_WARM", 2)
    monkeypatch.setattr(_library, "_WARM", {})
    mods = [
        sim.RawModule(code=f'extern "C" __global__ void fill(int* x) {{ x[threadIdx.x] = {i}; }}')
        for i in range(6)
    ]
    before = _maps()
    x = np.zeros(1024, np.int32)
    for i, mod in enumerate(mods):
        mod.get_function("fill")((1,), (1024,), (x,))
        assert (x == i).all()
    # Two warm modules' stacks (2 maps per thread), not six.
    assert _maps() - before < 3 * 2 * 1024
    assert len(_library._WARM) == 2
    mods[0].get_function("fill")((1,), (1024,), (x,))  # a trimmed module makes new stacks
    assert (x == 0).all()


def test_warm_modules_keep_at_most_warm_fibers(monkeypatch):
    # Launches of thread-block clusters keep a whole cluster resident (4 x 1024 fibers here): the
    # warm modules' fibers, not only their number, stay bounded.
    monkeypatch.setattr(_library, "KEEP_WARM", 8)
    monkeypatch.setattr(_library, "WARM_FIBERS", 8192)
    monkeypatch.setattr(_library, "_WARM", {})
    mods = [
        sim.RawModule(
            code=f'extern "C" __global__ void fill(int* x) {{ x[blockIdx.x * 1024 + threadIdx.x] = {i}; }}'
        )
        for i in range(4)
    ]
    before = _maps()
    x = np.zeros(4 * 1024, np.int32)
    for i, mod in enumerate(mods):
        mod.get_function("fill")((4,), (1024,), (x,), cluster=(4,))
        assert (x == i).all()
    assert [fibers for _, fibers in _library._WARM.values()] == [4096, 4096]
    assert _maps() - before < 3 * 2 * 4096
