"""``cutopk.plan`` is what runs, for every kernel family: the launches (kernel, grid, block,
shared memory, count) and the scratch bytes it reports are those the launcher makes on the
simulator (launches recorded, not run). Both sides compute them from the family's module
(cutopk/_gpu_families), so they cannot disagree."""

from __future__ import annotations

import numpy as np
import pytest

import cutopk
from cutopk._bench.recording import recording_launches

# (shape, k, keyword arguments): every family, with and without scratch, one chunk of rows.
CASES = [
    ((64, 100), 8, {"algorithm": "warp_row"}),
    ((64, 300), 5, {"algorithm": "thread_row"}),
    ((300, 40), 4, {"axis": 0}),  # thread_row along an outer axis, no copy
    ((8, 3000), 20, {"algorithm": "warp_radix"}),
    ((8, 2048), 100, {"algorithm": "bitonic"}),
    ((4, 4000), 100, {"algorithm": "radix"}),  # no candidate buffer
    ((4, 100_000), 100, {"algorithm": "radix"}),  # a candidate buffer in global memory
    ((600, 50), 10, {"algorithm": "radix", "axis": 0}),  # the tiled transpose first
    ((2, 5000), 40, {"algorithm": "multiblock"}),  # no sampled threshold
    ((2, 5000), 40, {"algorithm": "multiblock", "index_dtype": np.int32}),
    ((1, 100_000), 2048, {"algorithm": "multiblock"}),  # the family's largest K (48 KB)
    ((1, 1 << 20), 100, {"algorithm": "multiblock"}),  # the sampled threshold's staging
    ((3, 200), 7, {"algorithm": "sort"}),
    ((3, 200), 7, {"algorithm": "sort", "sorted": "index", "index_dtype": np.int32}),
    ((3, 200), 200, {"algorithm": "sort"}),
]


def _planned(plan) -> list:
    return [
        (x.kernel, tuple(x.grid), (x.block,), x.shared_bytes)
        for x in plan.launches
        for _ in range(x.count)
        if x.grid
    ]


@pytest.mark.parametrize(("shape", "k", "kw"), CASES, ids=lambda c: repr(c))
def test_plan_reports_the_launches_and_scratch_that_run(shape, k, kw):
    x = np.zeros(shape, np.float32)
    axis = kw.get("axis", -1)
    with recording_launches() as rec:
        plan = cutopk.plan(x, k, backend="sim", **kw)
        cutopk.top_k(x, k, backend="sim", **kw)  # the first call also makes the placeholders
        launched, allocated = len(rec.shapes), len(rec.allocated)
        cutopk.top_k(x, k, backend="sim", **kw)
        shapes, sizes = rec.shapes[launched:], rec.allocated[allocated:]
    if "algorithm" in kw:
        assert plan.algorithm == kw["algorithm"]
    assert _planned(plan) == shapes
    rows = x.size // shape[axis]
    outputs = rows * k * (x.itemsize + np.dtype(kw.get("index_dtype", np.int64)).itemsize)
    assert sum(sizes) - outputs == plan.scratch_bytes, sizes
