"""What ``cutopk.plan`` reports: one ``Plan`` type that prints its launches, scratch and copies,
a copy flag true to the layout, no launch when there is nothing to do, and every kernel of a
multi-block call."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import sim_unavailable_reason, usable

import cutopk

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
    assert names[0] == "mb_init" and "mb_collect<float>" in names and names[-1] == "mb_order<float>"
    assert p.launch_count == 12  # init, 4 x (histogram, select), move, collect, order
    assert "mb_select" in str(p)
