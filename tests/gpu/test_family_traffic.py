"""``plan().global_bytes`` is what the kernels move: for every family (and the transpose and
ordering steps), each launch's formula (cutopk/_gpu_families) within 10% of the global-memory
sectors the simulator counts when the call runs, launch by launch and in total.

The keys are spread over their whole range (uniform int32 bits), the case the formulas assume
for their data-dependent parts (the candidate buffers). The simulator counts kernel launches
only: array-library operations (copies, casts) are left out of both sides of the total."""

from __future__ import annotations

import numpy as np
import pytest

import cutopk
from cutopk import sim
from cutopk.cuda.families import common, multiblock

if not sim.is_available():
    pytest.skip(f"CPU simulator unavailable: {sim.unavailable_reason()}", allow_module_level=True)
if sim._module._environ.flag("CUTOPK_SIM_ASAN"):
    pytest.skip("traffic counting and AddressSanitizer builds exclude each other", allow_module_level=True)

TOLERANCE = 0.10
# A launch this small (bytes) may be off by a few sectors more: a row's scattered reads fall on
# sectors shared or not as the data has it.
SMALL = 4096

# (shape, k, keyword arguments): every family, one chunk of rows.
CASES = [
    ((64, 100), 8, {"algorithm": "warp_row"}),
    ((64, 300), 5, {"algorithm": "thread_row"}),
    ((8, 3000), 20, {"algorithm": "warp_radix"}),
    ((8, 2048), 100, {"algorithm": "bitonic"}),
    ((4, 4000), 100, {"algorithm": "radix"}),  # no candidate buffer
    ((4, 100_000), 100, {"algorithm": "radix"}),  # a candidate buffer in global memory
    ((600, 50), 10, {"algorithm": "radix", "axis": 0}),  # the tiled transpose first
    ((4, 8000), 1000, {"algorithm": "resident"}),  # the row read once, the rest on chip
    ((2, 20_000), 1000, {"algorithm": "cluster"}),  # the same over a cluster's shared memory
    ((2, 20_000), 1000, {"algorithm": "split"}),  # the same, the candidates through global memory
    ((2, 20_000), 40, {"algorithm": "multiblock"}),  # winners ordered in shared memory
    ((1, 40_000), 2000, {"algorithm": "multiblock"}),  # the largest K sorted in 48 KB
    ((1, 40_000), 5000, {"algorithm": "multiblock"}),  # K ordered apart: order.cu
    pytest.param(  # K picked from the candidates (DIRECT)
        (1, 200_000),
        5000,
        {"algorithm": "multiblock"},
        marks=pytest.mark.xfail(
            strict=True,
            reason="pass 3's formula counts 34.0 KB where the aligned input moves 28.3 KB (21% over; "
            "the other launches and the total within 10%)",
        ),
    ),
    ((3, 70_000), 100, {"algorithm": "multiblock"}),  # a sampled threshold: pass 1 stages keys
    ((2, 70_000), 50, {"algorithm": "multiblock", "dtype": np.float16}),  # two digits
    ((2, 70_000), 50, {"algorithm": "multiblock", "dtype": np.int64}),  # six digits
    ((2, 70_000), 50, {"algorithm": "multiblock", "dtype": np.int8}),  # one digit
    ((3, 200), 7, {"algorithm": "sort"}),
    ((2, 10_000), 7, {"algorithm": "sort"}),  # rows ordered by tiles and merges
    ((3, 2000), 7, {"algorithm": "sort", "sorted": "index", "index_dtype": np.int32}),
]


def _spread(shape, dtype=np.int32) -> np.ndarray:
    """Keys spread over their whole range (random 32-bit words, their top bits for narrower
    types, float16 NaNs included, or as the top half of 64-bit ones), starting on a 256-byte
    boundary as CuPy's allocations do: the sectors a launch touches depend on the input's
    alignment (1x200000 K=5000 multiblock: pass 3 moves 28.2 KB aligned, 32.5 KB 16 bytes off),
    and NumPy's allocator gives one or the other by the process's history."""
    keys = _spread_anywhere(shape, dtype)
    raw = np.empty(keys.nbytes + 256, np.uint8)
    start = -raw.ctypes.data % 256
    aligned = raw[start : start + keys.nbytes].view(keys.dtype).reshape(keys.shape)
    aligned[...] = keys
    return aligned


def _spread_anywhere(shape, dtype) -> np.ndarray:
    words = np.random.default_rng(7).integers(-(2**31), 2**31, size=shape, dtype=np.int64).astype(np.int32)
    bits = words.view(np.uint32)
    if dtype == np.int64:
        return (bits.astype(np.uint64) << np.uint64(32)).view(np.int64)
    if dtype == np.float16:
        return (bits >> 16).astype(np.uint16).view(np.float16)
    if dtype == np.int8:
        return (words >> 24).astype(np.int8)
    return words


def _kernel_launches(plan) -> list:
    return [
        (x.kernel, x.grid, x.global_bytes // x.count) for x in plan.launches if x.grid for _ in range(x.count)
    ]


@pytest.mark.parametrize(("shape", "k", "kw"), CASES, ids=lambda c: repr(c))
def test_plan_global_bytes_match_the_simulators_count(shape, k, kw):
    kw = dict(kw)
    x = _spread(shape, kw.pop("dtype", np.int32))
    plan = cutopk.plan(x, k, backend="sim", **kw)
    cutopk.top_k(x, k, backend="sim", **kw)  # compiled, placeholders made: the counted call is the plain one
    with sim.counting_traffic() as records:
        cutopk.top_k(x, k, backend="sim", **kw)
    planned = _kernel_launches(plan)
    assert [tuple(g for g in r.grid if g > 1) or (1,) for r in records] == [
        tuple(g for g in grid if g > 1) or (1,) for _, grid, _ in planned
    ]
    counted = [32 * r.sectors for r in records]
    for (kernel, _, expected), got in zip(planned, counted, strict=True):
        slack = max(TOLERANCE * got, SMALL if got < 4 * SMALL else 0)
        assert abs(expected - got) <= slack, (kernel, expected, got, planned, counted)
    total = sum(b for _, _, b in planned)
    assert abs(total - sum(counted)) <= TOLERANCE * sum(counted), (total, sum(counted), planned, counted)
    assert plan.global_bytes >= total  # the library operations come on top


def test_plan_prints_each_launchs_global_bytes():
    text = str(cutopk.plan(np.zeros((64, 100), np.float32), 8, backend="sim"))
    assert "[31744 B global]" in text and "global memory: 31744 bytes moved" in text
    swapped = cutopk.plan(np.zeros((300, 40), ">f4"), 4, axis=0, backend="sim")
    text = str(swapped)
    assert "library: byte swap of the input [96000 B global]" in text  # read and written
    assert "2 x library: outputs moved to axis 0 [3840 B global]" in text
    assert swapped.global_bytes == sum(x.global_bytes for x in swapped.launches)


def test_scattered_reads_count_the_sectors_they_expect_to_hit():
    assert common.gathered(0, 1000) == 0 and common.gathered(5, 0) == 0
    assert common.gathered(1, 1000) == 32  # one element, one sector
    assert common.gathered(10**6, 1000) == common.sectors(1000)  # every sector, once


def test_the_multiblock_formula_refuses_a_step_it_does_not_know():
    plan = cutopk.plan(np.zeros((2, 5000), np.float32), 4, backend="sim", algorithm="multiblock")
    step = multiblock.Step("unknown_kernel", False, (1,), 256)
    with pytest.raises(ValueError, match="no traffic formula for the kernel 'unknown_kernel'"):
        multiblock.global_bytes([step], 2, 5000, 4, 4, 8, plan.params)


def test_the_sampled_threshold_path_moves_what_plan_says_in_total():
    # The staging path (a sampled threshold; pass 1 stages the keys that reach it): the whole
    # call within 10%.
    x = _spread((2, 200_000))
    plan = cutopk.plan(x, 100, backend="sim", algorithm="multiblock")
    assert plan.params["sample_rank"] is not None
    cutopk.top_k(x, 100, backend="sim", algorithm="multiblock")
    with sim.counting_traffic() as records:
        cutopk.top_k(x, 100, backend="sim", algorithm="multiblock")
    total = sum(b for _, _, b in _kernel_launches(plan))
    counted = 32 * sum(r.sectors for r in records)
    assert abs(total - counted) <= TOLERANCE * counted, (total, counted)


def test_heavy_ties_at_the_threshold_read_the_row_about_once():
    # A quarter of each row at its K-th key: the sampled threshold is the K-th key, and pass 2
    # gathers its lowest-index ties from the first slices only. Before, both buffers overflowed,
    # every digit pass read the input and the finishing block alone re-read the row (on an H200:
    # 19 ms for 16M floats, now 0.17 ms).
    rng = np.random.default_rng(11)
    n, k = 200_000, 100
    x = rng.random((2, n), dtype=np.float32)
    for row in x:
        row[rng.random(n) < 0.25] = np.sort(row)[-k]
    plan = cutopk.plan(x, k, backend="sim", algorithm="multiblock")
    assert plan.params["sample_rank"] is not None
    cutopk.top_k(x, k, backend="sim", algorithm="multiblock")
    with sim.counting_traffic() as records:
        got = cutopk.top_k(x, k, backend="sim", algorithm="multiblock")
    counted = 32 * sum(r.sectors for r in records)
    assert counted <= 1.3 * (x.nbytes + got.values.nbytes + got.indices.nbytes), (counted, x.nbytes)
    want = np.argsort(-x, axis=1, kind="stable")[:, :k]
    assert (got.indices == want).all()


# Issue 39 item 4: the distributions of the benchmark grid where keys repeat, against spread keys
# of the same shape (one read of the row plus the candidates): none may read much more. The K
# winners ordered apart (order.cu) are forced at this size by a 64-pair finishing sort.
TIE_DISTRIBUTIONS = ("all_equal", "narrow", "inf", "nan", "ties_at_k", "sorted")


@pytest.mark.parametrize(
    ("dtype", "k", "apart"),
    [("float32", 100, False), ("float16", 600, False), ("float32", 300, True)],
    ids=str,
)
def test_repeated_keys_move_no_more_than_spread_keys(dtype, k, apart, monkeypatch):
    from cutopk._core import call as _call
    from cutopk._demo.grid import Case
    from cutopk._demo.inputs import values

    if apart:
        monkeypatch.setattr(multiblock, "BLOCK_SORT_MAX", 64)
        monkeypatch.setattr(multiblock, "ORDER_TILE", 32)
    _call.CACHE.clear()
    counted = {}
    for dist in ("uniform", *TIE_DISTRIBUTIONS):
        x = values(Case("llm", 2, 20_000, k, dist=dist, dtype=dtype))
        plan = cutopk.plan(x, k, backend="sim", algorithm="multiblock")
        assert plan.params["sample_rank"] is not None and plan.params["sort_here"] != apart
        cutopk.top_k(x, k, backend="sim", algorithm="multiblock")
        with sim.counting_traffic() as records:
            got = cutopk.top_k(x, k, backend="sim", algorithm="multiblock")
        counted[dist] = 32 * sum(r.sectors for r in records)
        want = np.argsort(-x.astype(np.float32), axis=1, kind="stable")[:, :k]  # NaN last, ties by index
        assert (got.indices == want).all(), dist
    _call.CACHE.clear()
    worst = max(counted[d] / counted["uniform"] for d in TIE_DISTRIBUTIONS)
    assert worst <= 1.2, {d: round(b / counted["uniform"], 2) for d, b in counted.items()}
