"""``cutopk.plan`` is what runs, for every kernel family: the launches (kernel, grid, block,
shared memory, count) and the scratch bytes it reports are those the launcher makes on the
simulator (launches recorded, not run). Both sides compute them from the family's module
(cutopk/cuda/families) and run by one runner (cutopk/cuda/runner.py), so they cannot disagree."""

from __future__ import annotations

import numpy as np
import pytest
from support.launches import recording_launches

import cutopk
from cutopk.cuda import workspace as _workspace

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
    ((4, 8000), 2000, {"algorithm": "resident"}),  # the row and the K winners in shared memory
    ((2, 20_000), 1000, {"algorithm": "cluster"}),  # 8 blocks a row, one launch
    ((2, 20_000), 1000, {"algorithm": "split"}),  # blocks a row, candidates and tickets, one launch
    ((2, 5000), 40, {"algorithm": "multiblock"}),  # no sampled threshold
    ((2, 5000), 40, {"algorithm": "multiblock", "index_dtype": np.int32}),
    ((1, 100_000), 2048, {"algorithm": "multiblock"}),  # the family's largest K (48 KB)
    ((1, 1 << 20), 100, {"algorithm": "multiblock"}),  # the sampled threshold's staging
    ((3, 200), 7, {"algorithm": "sort"}),
    ((3, 200), 7, {"algorithm": "sort", "sorted": "index", "index_dtype": np.int32}),
    ((3, 200), 200, {"algorithm": "sort"}),
    ((2, 40_000), 10, {"algorithm": "sort"}),  # rows longer than a tile: order_merge passes
    ((2, 40_000), 10, {"algorithm": "sort", "sorted": "index", "index_dtype": np.uint64}),
    ((40, 30), 5, {"algorithm": "sort", "axis": 0}),  # transposed in, outputs moved back
    ((5000, 2), 40, {"algorithm": "multiblock", "index_dtype": np.uint64, "axis": 0}),
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
    rows = x.size // shape[axis]
    outputs = [rows * k * x.itemsize, rows * k * np.dtype(kw.get("index_dtype", np.int64)).itemsize]
    with recording_launches() as rec:
        plan = cutopk.plan(x, k, backend="sim", **kw)
        cutopk.top_k(x, k, backend="sim", **kw)  # the first call also makes the placeholders
        cutopk.release_workspace()
        launched, allocated = len(rec.shapes), len(rec.allocated)
        cutopk.top_k(x, k, backend="sim", **kw)  # a cold workspace: one scratch buffer
        shapes, cold = rec.shapes[launched:], rec.allocated[allocated:]
        allocated = len(rec.allocated)
        cutopk.top_k(x, k, backend="sim", **kw)
        warm = rec.allocated[allocated:]
    if "algorithm" in kw:
        assert plan.algorithm == kw["algorithm"]
    assert _planned(plan) == shapes
    # The outputs, and the call's whole scratch in one allocation of the bytes plan() reports
    # (split's arrival tickets apart: the stream's zeroed array, made once).
    tickets = [_workspace.MIN_TICKETS * 4] if plan.algorithm == "split" else []
    assert sorted(cold) == sorted(outputs + tickets + ([plan.scratch_bytes] if plan.scratch_bytes else []))
    assert warm == outputs  # a warm call allocates its outputs only


def test_the_sort_path_lists_its_ordering_copies_and_gather():
    x = np.zeros((3, 200), np.float32)
    plan = cutopk.plan(x, 7, backend="sim", algorithm="sort", sorted="index", index_dtype=np.int32)
    names = [launch.kernel.split("<")[0] for launch in plan.launches]
    assert names == [
        "compute_keys", "order_tiles", "library: copy of the first K keys",
        "library: copy of the first K indices", "order_tiles", "gather_values",
        "library: the K indices copied out",
    ]  # fmt: skip


def test_the_runner_names_no_family():
    # Every family reaches the runner as one Part (families.registry.part): a family of several
    # launches needs no branch of its own there. A family's name in the runner's code (outside
    # its docstrings) would be such a branch.
    import ast
    import pathlib

    from cutopk.cuda import runner
    from cutopk.cuda.families import registry

    tree = ast.parse(pathlib.Path(runner.__file__).read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    names = {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }
    assert names & set(registry.FAMILIES) == set()
