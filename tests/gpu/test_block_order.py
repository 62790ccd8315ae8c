"""The multi-block select with its blocks started in shuffled orders ($CUTOPK_SIM_BLOCK_SEED): its
blocks coordinate through global memory (per-row histograms, the state each launch leaves), so
the result must not depend on which block of a row runs first or finishes last. Bit for bit
against the reference, as tests/gpu/test_kernels.py checks it in x-fastest order."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from support.multiblock_state import BEHIND, MB_STATE, NO_THRESHOLD, record_states
from support.reference import assert_same, reference_top_k

import cutopk
from cutopk import sim
from cutopk._core import call as _call
from cutopk.cuda import launcher as _gpu

if not sim.is_available():
    pytest.skip(f"CPU simulator unavailable: {sim.unavailable_reason()}", allow_module_level=True)

SEEDS = (1, 2, 3)


@pytest.fixture(params=SEEDS, ids=lambda s: f"block_seed={s}")
def block_seed(request, monkeypatch):
    """Modules built afresh under the seed (the launcher's modules read it when built), and no
    cached plan holding a module of another seed."""
    monkeypatch.setenv("CUTOPK_SIM_BLOCK_SEED", str(request.param))
    with mock.patch.dict(_gpu._MODULES, clear=True):
        _call.CACHE.clear()
        try:
            yield request.param
        finally:
            _call.CACHE.clear()


def _check(x, k, **kw):
    semantics = {name: kw[name] for name in ("mode", "sorted", "nan") if name in kw}
    expected = reference_top_k(x, k, **semantics)
    result = cutopk.top_k(x, k, backend="sim", algorithm="multiblock", **kw)
    assert_same(result, expected, index_dtype=kw.get("index_dtype", np.int64), order=kw.get("sorted", True))


def test_the_launchers_modules_take_the_block_seed(block_seed):
    cutopk.top_k(np.arange(5000, dtype=np.float32).reshape(1, -1), 3, backend="sim", algorithm="multiblock")
    (mod,) = _gpu._MODULES.values()
    assert [m.block_seed for m in mod.raw.modules.values()] == [block_seed]


def test_multiblock_ties_across_slices_in_any_block_order(block_seed):
    x = np.zeros((2, 20000), dtype=np.float32)
    x[0, 15000:] = 1.0
    x[1, ::3] = -1.0
    for k in (1, 1999, 2048):  # 2048: the family's largest K on this device
        _check(x, k, sorted="index")
        _check(x, k, mode="smallest")


def test_multiblock_candidate_buffer_and_input_rows_in_any_block_order(block_seed):
    rng = np.random.default_rng(21)
    x = rng.integers(-(2**31), 2**31 - 1, (3, 60_000), dtype=np.int32)
    x[2] = 5
    x[:2, ::997] = x[0, 11]
    for k in (1, 100, 2000):
        _check(x, k)
        _check(x, k, mode="smallest", sorted="index")


def test_multiblock_nans_and_lengths_in_any_block_order(block_seed):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 30_000)).astype(np.float16)
    x[:, ::101] = np.nan
    _check(x, 50, nan="largest")
    _check(x, 50, nan="last", mode="smallest", index_dtype=np.int32)
    lengths = np.array([30_000, 7000, 20], np.int64)
    values, indices = cutopk.top_k(x, 40, backend="sim", algorithm="multiblock", lengths=lengths)
    for row, n in enumerate(lengths):
        taken = min(40, int(n))
        expected = reference_top_k(x[row : row + 1, :n], taken)
        assert_same(
            (values[row : row + 1, :taken], indices[row : row + 1, :taken]),
            expected,
            index_dtype=np.int64,
            order=True,
        )
        assert (indices[row, taken:] == -1).all() and (values[row, taken:] == 0).all()


def test_multiblock_rows_whose_threshold_fails_in_any_block_order(block_seed, monkeypatch):
    # Pass 1's filter with a candidate buffer too small for spread rows (they start over on the
    # input and resolve their last two digits in the last launch), next to a row whose sample
    # sees only planted keys (too few reach the threshold) and a row of one value.
    from cutopk.cuda.families import multiblock as _multiblock

    original = _multiblock.caps
    monkeypatch.setattr(
        _multiblock,
        "caps",
        lambda n, k, kb, per: (60, original(n, k, kb, per)[1], _multiblock.sample_rank(n, k)[0]),
    )
    rng = np.random.default_rng(17)
    x = rng.standard_normal((3, 40_000)).astype(np.float32)
    planted = np.unique([_multiblock.sample_positions(40_000, 4, skew)[:64] for skew in range(8)])
    x[1, planted] = 9.0
    x[2] = 1.5
    recorded = record_states(monkeypatch)
    for k in (1, 100, 2048):
        _check(x, k)
        _check(x, k, mode="smallest", sorted="index")
    # k = 2048: rows 0 and 1 start over (row 1: fewer than K planted keys); row 2 ends in its ties.
    state = recorded[4].view(MB_STATE)
    assert list(state["staging"]) == [BEHIND, BEHIND, NO_THRESHOLD], state
