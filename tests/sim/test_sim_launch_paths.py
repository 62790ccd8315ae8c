"""Launch refusals of the simulator's counting build: an array region too large to count
(its sector bitmap cannot be allocated) is a SimError naming the regions, the kernel is not
run, and the module goes on counting the next launch. The module is test_traffic.py's (the same
source and options: one build, shared through the simulator's module cache)."""

from __future__ import annotations

import numpy as np
import pytest
from test_traffic import KERNELS

from cutopk import sim

if sim._module._environ.flag("CUTOPK_SIM_ASAN"):
    pytest.skip("traffic counting and AddressSanitizer builds exclude each other", allow_module_level=True)


def test_a_region_too_large_to_count_is_an_error_and_counting_goes_on():
    counting = sim.RawModule(code=KERNELS, count_traffic=True)
    x = np.arange(4, dtype=np.float32)
    # Two elements 2**60 bytes apart: a region no sector bitmap can cover (never read: the
    # launch is refused before the kernel runs).
    far = np.lib.stride_tricks.as_strided(x, shape=(2,), strides=(1 << 60,))
    out = np.full(4, -1.0, np.float32)
    before = len(counting.traffic)
    # One region or two: `out` may lie inside the 2**60 bytes after `x` (then they merge).
    with pytest.raises(
        sim.SimError, match=r"^kernel 'copy': cannot count the traffic of [12] array regions$"
    ):
        counting.get_function("copy")((1,), (4,), (far, out, np.int64(1)))
    assert len(counting.traffic) == before and (out == -1).all()  # not run, not recorded
    counting.get_function("copy")((1,), (4,), (x, out, np.int64(4)))
    assert np.array_equal(out, x) and counting.traffic[-1].bytes == 32
