"""Issue 39 on the simulator (and a GPU when present): the multi-block select's buffers for
16-bit keys sized in elements (the sampled threshold holds on rows where K is a few percent of
the row), bit for bit against the reference, with ties, NaN, signed zeros and lengths=.
Shapes are small (the planned buffers scale with n and K, so a row of 8192 with K = 256 has the
ratio of the issue's 65536 with K = 2048); the issue's own shapes are planned in
tests/api/test_plan_select.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import BACKEND_PARAMS, require, to_host
from support.inputs import dtype_of, make_values
from support.multiblock_state import MB_STATE, ON_CANDIDATES, record_states
from test_kernels import run_case

import cutopk
from cutopk._core import call as _call
from cutopk.cuda.families import multiblock as _multiblock

GPU_BACKENDS = [p for p in BACKEND_PARAMS if p.values[0] != "numpy"]


@pytest.fixture
def sampled_short_rows(monkeypatch):
    """The sampled threshold and several blocks on rows of a few thousand (the planned buffers
    otherwise unchanged: their size is the family's own)."""
    monkeypatch.setattr(_multiblock, "MIN_SLICE", 512)
    monkeypatch.setattr(_multiblock, "SAMPLE_MIN_N", 0)
    _call.CACHE.clear()
    yield
    _call.CACHE.clear()


def states_of(monkeypatch, backend, x, k, **kw):
    states = record_states(monkeypatch)
    run_case(backend, x, k, algorithm="multiblock", **kw)
    return np.concatenate([to_host(a).view(MB_STATE) for a in states])


@pytest.mark.parametrize("backend", GPU_BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int16"])
def test_16_bit_rows_take_the_sampled_threshold(backend, dtype, sampled_short_rows, monkeypatch):
    require(backend)
    n, k = 8192, 256  # K / n as the 16 x 65536, k=2048
    dt = dtype_of(dtype)
    plan = cutopk.plan(np.zeros((4, n), dt), k, backend="sim", algorithm="multiblock")
    assert plan.params["sample_rank"] is not None and plan.params["cap"] > 0, plan.params
    rng = np.random.default_rng(39)
    x = make_values(rng, dt, (4, n), "uniform")
    # Row 1: a few distinct values (16-bit keys repeat); row 2: NaN and signed zeros among
    # spread keys (floats); row 3: ties at the K-th place across slices.
    x[1] = make_values(rng, dt, (n,), "few_distinct")
    if dt.kind != "i":
        x[2, ::5] = np.nan
        x[2, 1::7] = -0.0
        x[2, 2::7] = 0.0
    x[3] = x[0]
    x[3, rng.choice(n, 600, replace=False)] = x[0].max()
    state = states_of(monkeypatch, backend, x, k)
    # The spread row stages its candidates, which all fit and hold every winner.
    assert state["source"][0] == ON_CANDIDATES and 0 < state["cand_count"][0] <= plan.params["cap"]
    for mode, order, nan in (
        ("largest", True, "last"),
        ("smallest", "index", "largest"),
        ("largest", False, "last"),
    ):
        run_case(backend, x, k, algorithm="multiblock", mode=mode, sorted=order, nan=nan)
