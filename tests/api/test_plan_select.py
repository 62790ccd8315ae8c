"""Issue 39's targets from ``cutopk.plan()`` with an H100's facts (132 SMs, 227 KB of opt-in
shared memory), planned on stride-0 views (nothing allocated, nothing run): large K selected
first and ordered apart, with launches that do not grow with the row, and the global traffic of
the family's formulas (spread keys) against the issue's bounds. The kernels behind these plans
run bit for bit on the simulator in tests/gpu/test_multiblock_select.py."""

from __future__ import annotations

import numpy as np
import pytest
from support.backends import sim_unavailable_reason

import cutopk
from cutopk._core import call as _call
from cutopk.cuda import device as _device
from cutopk.cuda import dispatch as _dispatch

H100 = _dispatch.Device(
    sm_count=132, shared_bytes=_dispatch.shared_limit(48 * 1024, 227 * 1024), clusters=True
)


@pytest.fixture(autouse=True)
def h100(monkeypatch):
    if sim_unavailable_reason():
        pytest.skip(sim_unavailable_reason())
    monkeypatch.setattr(_device, "device_facts", lambda target, dev: H100)
    _call.CACHE.clear()
    yield
    _call.CACHE.clear()


def planned(shape, k, dtype="float32", **kw):
    x = np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape=shape, strides=(0, 0))
    return cutopk.plan(x, k, backend="sim", **kw)


def moved(plan) -> int:
    return sum(launch.global_bytes for launch in plan.launches)


# (rows, n) per issue 39: rows of 10000 as its 1000 x 10000 case, the long ones one row each.
LARGE_K = [
    (k, (1000 if n == 10_000 else 1, n))
    for k in (4096, 65536)
    for n in (10_000, 2**20, 2**24, 2**28)
    if k <= n
]


@pytest.mark.parametrize(("k", "shape"), LARGE_K, ids=str)
def test_large_k_is_selected_then_ordered_in_a_fixed_number_of_launches(k, shape):
    p = planned(shape, k)
    kernels = [launch.kernel.split("<")[0] for launch in p.launches]
    assert p.algorithm == "multiblock" and "compute_keys" not in kernels, p  # no row is sorted
    assert p.launch_count <= 8, kernels
    # The same launches whatever the row's length (the ordering is over the K pairs).
    assert kernels == [x.kernel.split("<")[0] for x in planned((1, 2**28), k).launches]


@pytest.mark.parametrize(("k", "shape"), LARGE_K, ids=str)
def test_large_k_traffic_within_the_issue_bound(k, shape):
    # Per row: 1.3 x the input + 4 x K (key + int64 index) pairs.
    rows, n = shape
    p = planned(shape, k)
    assert moved(p) <= rows * (1.3 * n * 4 + 4 * k * (4 + 8)), (moved(p) / (rows * n * 4), p.params)


@pytest.mark.parametrize("n", [2**20, 2**24, 2**28])
def test_large_k_ordering_moves_each_pair_three_times_and_writes_the_outputs(n):
    # After the digit passes: the tiles read the K (key, int64 index) winners and write 8-byte
    # pairs (4-byte positions), one merge reads them and writes the outputs (values rebuilt from
    # the keys: no gather re-reading the indices and the input). 40 bytes a pair of 32-bit keys;
    # before, 109 (12-byte pairs moved 6 times, then a gather of 37).
    k = 65536
    p = planned((1, n), k)
    names = [launch.kernel.split("<")[0] for launch in p.launches]
    assert names[-2:] == ["order_winner_tiles", "order_output"], names
    assert sum(launch.global_bytes for launch in p.launches[-2:]) <= k * (12 + 8 + 8 + 4 + 8)


def test_large_k_winners_are_picked_from_the_candidates():
    # 1 x 2^20, K = 65536 (6% of the row; the bound's margin is 0.3 x the input): the last digit
    # writes no winners above the K-th key's bucket (DIRECT in kernels/multiblock.cu); the tiles
    # read them in the candidate buffer. Before, the last digit's pass wrote the K pairs (0.52 MB)
    # and read their candidate indices, and the tiles read the pairs back: 8.81 MB, over the
    # bound's 8.60.
    k, n = 65536, 2**20
    p = planned((1, n), k)
    assert p.params["order_direct"] > 0 and p.params["order_picked"], p.params
    last_digit = p.launches[-3]
    assert last_digit.kernel.startswith("digit_pass") and last_digit.global_bytes < k * 8, p
    assert moved(p) <= 0.95 * (1.3 * n * 4 + 4 * k * (4 + 8)), moved(p)
    # Longer rows stage more candidates than one merge of their tiles takes: the winners'
    # buffer, ordered by the same two launches.
    assert not planned((1, 2**24), k).params["order_direct"]


SHAPES = [((16, 65536), 2048, "float32"), ((16, 65536), 2048, "float16"), ((16, 65536), 2048, "bfloat16"),
          ((64, 131072), 2048, "float32")]  # fmt: skip
# Not met (strict). Where the bytes go (plan(), H100 facts), beyond the input and the outputs:
# float32: the sample (0.26 MB) and the histograms (4 of 8 KB a row), the candidates staged in
# pass 1 (0.37 MB) and read by passes 2 and 3 (0.19 MB each, keys), the winners written by the
# last pass (0.26 MB) and their candidate indices (0.19 MB). 16-bit keys: the same sample and
# candidates against half the input bytes (the candidates' indices are 4 bytes, their keys 2),
# and the last bucket, most of the candidates, staged again (0.28 MB).
_F32 = "1.40 x (input + output): sample, histograms, candidates read twice, the winners' buffer"
_F16 = "1.50 x (input + output): sample, (2 + 4)-byte candidates, bucket restaged, winners"
OVER = {
    ((16, 65536), "float32"): _F32,
    ((16, 65536), "float16"): _F16,
    ((16, 65536), "bfloat16"): _F16,
}


@pytest.mark.parametrize(("shape", "k", "dtype"), SHAPES, ids=str)
def test_16_bit_and_budget_limited_rows_take_the_sampled_threshold(shape, k, dtype):
    # Before issue 39 these rows had no threshold (the buffers' budget was a quarter of the
    # input bytes): every digit pass read the input (2.4-3.3 x the input in all).
    p = planned(shape, k, dtype, algorithm="multiblock")  # auto gives them resident or cluster
    assert p.algorithm == "multiblock" and p.params["sample_rank"] is not None, p.params
    rows, n = shape
    assert moved(p) <= 2.6 * rows * n * (2 if dtype != "float32" else 4)


@pytest.mark.parametrize(
    ("shape", "k", "dtype"),
    [
        pytest.param(s, k, d, marks=pytest.mark.xfail(strict=True, reason=OVER[(s, d)]))
        if (s, d) in OVER
        else (s, k, d)
        for s, k, d in SHAPES
    ],
    ids=str,
)
def test_multiblock_on_the_issue_shapes_within_13_of_input_and_output(shape, k, dtype):
    # Multiblock forced: the route of these rows on a GPU without clusters too long for one block.
    rows, n = shape
    width = 2 if dtype != "float32" else 4
    p = planned(shape, k, dtype, algorithm="multiblock")
    assert moved(p) <= 1.3 * rows * (n * width + k * (width + 8)), moved(p) / (
        rows * (n * width + k * (width + 8))
    )


@pytest.mark.parametrize(("shape", "k", "dtype"), SHAPES, ids=str)
def test_issue_shapes_within_13_of_input_and_output(shape, k, dtype):
    # Auto on an H100: the one-launch families (block_row, resident, cluster, streaming) read the row once.
    rows, n = shape
    width = 2 if dtype != "float32" else 4
    p = planned(shape, k, dtype)
    assert p.algorithm in ("block_row", "resident", "cluster", "streaming") and p.launch_count == 1, p
    assert moved(p) <= 1.3 * rows * (n * width + k * (width + 8))
