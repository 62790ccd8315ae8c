"""What ``cutopk.plan`` reports: one ``Plan`` type that prints its launches, scratch and copies,
a copy flag true to the layout, no launch when there is nothing to do, and every kernel of a
multi-block call."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import sim_unavailable_reason, usable

import cutopk
from cutopk.cuda.families import multiblock as _multiblock

BACKENDS = ["numpy", "sim"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_plan_is_one_type_and_prints(backend):
    x = np.zeros((3, 50), np.float32)
    p = cutopk.plan(x, 2, backend=usable(backend))
    assert isinstance(p, cutopk.Plan)
    text = str(p)
    assert "launches" in text and "scratch" in text and "copies" in text


def test_plan_copy_flag_is_true_to_the_layout():
    a = np.zeros((64, 512), np.float32)
    # A 2-D array along axis 0 is a transposed view of rows: read in place on either backend
    # (thread_row on the simulator); only the small outputs are moved to axis 0.
    for backend in BACKENDS:
        p = cutopk.plan(a, 2, axis=0, backend=usable(backend))
        assert p.copy is False and p.copies[-1] == "outputs: moved to axis 0 (12288 bytes)"
        assert all(not c.startswith("input") for c in p.copies)
        assert cutopk.plan(a.T, 2, backend=backend).copy is False
    # Batch axes that do not collapse are copied, and the plan says so with the size.
    b = np.zeros((4, 5, 6), np.float32)[:, ::2, :]
    p = cutopk.plan(b, 2, axis=1, backend="numpy")
    assert p.copy and any("row-major" in c for c in p.copies)


@pytest.mark.parametrize("backend", BACKENDS)
def test_plan_for_nothing_to_do_has_no_launch(backend):
    assert cutopk.plan(np.zeros((3, 8)), 0, backend=usable(backend)).launches == ()
    assert cutopk.plan(np.zeros((0, 8)), 2, backend=backend).launches == ()
    assert cutopk.plan(np.zeros((0, 8)), 2, backend=backend).scratch_bytes == 0


def test_multiblock_plan_lists_every_kernel():
    if sim_unavailable_reason():
        pytest.skip(sim_unavailable_reason())
    p = cutopk.plan(np.zeros((2, 5000), np.float32), 40, backend="sim", algorithm="multiblock")
    names = [launch.kernel for launch in p.launches]
    assert names == ["sample_threshold<float>"] + ["digit_pass<float>"] * 3  # 11 + 11 + 10 bits
    assert "digit_pass" in str(p)


# Issue 28's cases: (shape, k, dtypes); every dtype of each width is planned the same.
ISSUE_CASES = [
    ((128, 151936), 256, ("float32",)),
    ((1, 1 << 24), 1024, ("float32",)),
    ((4, 1 << 20), 64, ("float32",)),
    ((1, 1 << 22), 1, ("float32",)),
    ((16, 1 << 18), 2048, ("float32",)),
    ((32, 128256), 50, ("float16",)),
    ((8, 1 << 20), 100, ("float64", "int64")),
    ((2, 1 << 22), 16, ("int8",)),
]
WIDTHS = {1: ("int8", "uint8"), 2: ("float16", "int16", "uint16"), 4: ("float32", "int32", "uint32"),
          8: ("float64", "int64", "uint64")}  # fmt: skip


def _issue_cases():
    for shape, k, dtypes in ISSUE_CASES:
        for dtype in dtypes:
            yield shape, k, dtype, True
            # The same shape in every width (K within what the finishing block sorts).
            for width, names in WIDTHS.items():
                if width != np.dtype(dtype).itemsize:
                    yield shape, k, names[0], False


@pytest.mark.parametrize(("shape", "k", "dtype", "issue_dtype"), list(_issue_cases()))
@pytest.mark.parametrize("lengths", [False, True])
def test_multiblock_launches_and_scratch_of_the_issue_cases(shape, k, dtype, issue_dtype, lengths):
    # Launches <= ceil(key bits / 11) + 1 and scratch <= n / 8 (key, int64 index) pairs + 16 * K
    # per row (a budget in elements: issue 39), from plan() on a stride-0 view (nothing is
    # read), with and without lengths, every order.
    if sim_unavailable_reason():
        pytest.skip(sim_unavailable_reason())
    x = np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape=shape, strides=(0, 0))
    rows, n = shape
    kw = {"lengths": np.full(rows, n - 1)} if lengths else {}
    for order in (True, "index", False):
        # Forced: 8-bit rows of 128256-151936 fit cluster's slices on the simulator's facts and
        # the rules send them there; the budget checked here is multiblock's.
        p = cutopk.plan(x, k, backend="sim", sorted=order, algorithm="multiblock", **kw)
        assert p.algorithm == "multiblock", p
        bits = 8 * np.dtype(dtype).itemsize
        assert p.launch_count == -(-bits // 11) + 1, p
        assert p.scratch_bytes <= rows * (n // 8) * (x.itemsize + 8) + 16 * rows * k, p
    if not issue_dtype:
        return
    # Global traffic, by the family's formula for spread keys: about one read of the input (the
    # issue's cases; with K a larger share of the row the threshold may not fit the budget, and
    # rows without it are read once per digit).
    key_bytes = np.dtype(dtype).itemsize
    steps = _multiblock.steps(rows, key_bytes, p.params, 256)
    moved = sum(_multiblock.global_bytes(steps, rows, n, k, key_bytes, 8, p.params))
    assert moved <= 1.3 * (x.size * key_bytes + rows * k * (key_bytes + 8)), p
