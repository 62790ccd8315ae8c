"""The dispatcher is a pure function: its choices, limits and plans, checked on the CPU."""

from __future__ import annotations

import math

import pytest

from cutopk.cuda import dispatch as d
from cutopk.cuda.families import multiblock as _multiblock

DEV = d.Device()


@pytest.mark.parametrize(
    ("rows", "n", "k", "key_bytes", "expected"),
    [
        (65536, 128, 8, 4, "warp_row"),  # MoE routing
        (1_000_000, 8, 1, 2, "warp_row"),
        (1000, 256, 32, 8, "warp_row"),
        (1000, 256, 33, 4, "bitonic"),  # K beyond a warp's lanes
        (1000, 257, 17, 4, "bitonic"),  # a medium row with K too large for a warp's rounds
        (1000, 1024, 16, 4, "warp_row"),  # a medium row with a small K: one warp, no barriers
        (1000, 1025, 8, 4, "bitonic"),
        (10, 2048, 100, 4, "bitonic"),
        (10, 4096, 100, 4, "radix"),  # long enough that selecting beats sorting the row
        (16384, 2048, 64, 4, "warp_radix"),  # a batch of medium rows: a warp each, no barriers
        (1024, 16384, 128, 8, "warp_radix"),
        (1023, 2048, 64, 4, "bitonic"),  # too few rows to fill the GPU a warp per row
        (16384, 16385, 64, 4, "radix"),  # longer rows: a block each
        (16384, 2048, 129, 4, "bitonic"),  # K beyond the warp's shared pairs
        (16384, 256, 64, 4, "bitonic"),  # short rows with K > 32: the block sort
        (1, 128256, 50, 4, "split"),  # LLM sampling at batch 1: few long rows, one launch
        (16, 128256, 50, 4, "split"),  # (split: 17 blocks a row; was multiblock's 4 launches)
        (17, 128256, 50, 4, "multiblock"),  # more rows: split lost to it (H100, 128 and 256 rows)
        (257, 128256, 50, 4, "multiblock"),  # past the one-launch families' 256 rows
        (263, 65536, 50, 4, "multiblock"),
        (264, 65536, 50, 4, "radix"),  # 2 rows per SM: a block per row fills the GPU
        (263, 65535, 50, 4, "radix"),  # too short to split
        (64, 131072, 1024, 8, "multiblock"),
        (264, 131072, 1024, 8, "radix"),  # enough rows to fill the GPU one block per row
        (1000, 100_000, 2048, 4, "multiblock"),  # K too large for the shared-memory kernels
        (70_000, 5000, 2048, 4, "multiblock"),  # ... on any number of rows (in chunks of rows)
        (1000, 100_000, 4096, 4, "multiblock"),  # ... beyond what its finishing block sorts (issue 39:
        (1, 1 << 20, 2048, 8, "multiblock"),  # the K winners ordered apart, never the whole row)
        (1, 1 << 20, 4096, 8, "multiblock"),
        (1, 1 << 20, 65536, 4, "multiblock"),
        (1000, 10_000, 4096, 4, "multiblock"),  # not a 16384-pair bitonic sort of each row
        (1000, 4096, 2000, 4, "bitonic"),  # a row within the finishing block's 4096 pairs: one launch
        (1, 2**32, 10, 1, "sort"),  # rows multiblock's 32-bit counts cannot take
        (4, 4096, 3000, 4, "bitonic"),  # ... unless the whole row fits in shared memory
    ],
)
def test_choice(rows, n, k, key_bytes, expected):
    assert d.choose(rows, n, k, key_bytes, DEV) == expected


def test_outer_axis_rows_get_a_thread_each():
    assert d.choose(4096, 4096, 8, 4, DEV, outer=True) == "thread_row"
    assert d.choose(4096, 4096, 9, 4, DEV, outer=True) == "warp_radix"
    assert d.choose(100, 4096, 8, 4, DEV, outer=True) == "radix"  # too few rows for a thread each
    assert d.choose(4096, 2**31, 8, 1, DEV, outer=True) != "thread_row"  # 32-bit indices in registers
    assert d.choose(4096, 4096, 8, 4, DEV, outer=False) == "warp_radix"
    p = d.plan(1000, 50, 5, 2, DEV, copy=False, outer=True)
    assert (p.algorithm, p.params["KMAX"], p.grid) == ("thread_row", 8, 4)
    assert p.copy is False and p.scratch_bytes == 0


def test_outer_axis_rows_are_copied_for_the_block_kernels():
    # A block reading an outer-axis row touches one sector per element: a transposing copy is cheaper.
    p = d.plan(4096, 4096, 9, 4, DEV, copy=False, outer=True)
    assert (p.algorithm, p.copy) == ("warp_radix", True)
    assert p.scratch_bytes >= 4096 * 4096 * 4
    p = d.plan(4096, 300, 100, 8, DEV, copy=False, outer=True, algorithm="bitonic")
    assert p.copy is True and p.scratch_bytes == 4096 * 300 * 8
    assert d.plan(4096, 300, 100, 8, DEV, copy=False, outer=False).copy is False


def test_bitonic_capacity_by_key_width():
    assert d.bitonic_size(4096, 4, DEV) == 4096
    assert d.bitonic_size(4097, 4, DEV) is None
    assert d.bitonic_size(8192, 2, DEV) == 8192
    assert d.bitonic_size(4096, 8, DEV) == 4096
    assert d.bitonic_size(1, 4, DEV) == 32  # never below one warp's worth


def test_radix_candidates_fit_shared_memory():
    for key_bytes in (1, 2, 4, 8):
        for k in (1, 33, 1000, 1024):
            cap = d.radix_cap(k, key_bytes, DEV)
            assert cap is not None and cap & (cap - 1) == 0
            assert (d.pow2_at_least(k) + cap) * (8 + key_bytes) <= DEV.shared_bytes
    assert d.radix_cap(1025, 4, DEV) is None


@pytest.mark.parametrize(
    ("algorithm", "n", "k", "fragment"),
    [
        ("warp_row", 1100, 1, "rows of at most 1024"),
        ("warp_row", 100, 40, "at most k=32"),
        ("bitonic", 10_000, 5, "does not fit"),
        ("radix", 10_000, 5000, "at most k=1024"),
        ("magic", 10, 1, "unknown algorithm"),
        ("thread_row", 100, 9, "at most k=8"),
        ("warp_radix", 1000, 129, "at most k=128"),
    ],
)
def test_why_not(algorithm, n, k, fragment):
    assert fragment in d.why_not(algorithm, n, k, 4, DEV, rows=70_000)


def test_every_algorithm_applies_somewhere():
    # cluster needs sm_90's thread-block clusters, streaming more than 48 KB of shared memory (its
    # ring and candidates): an H100's facts.
    clusters = d.Device(clusters=True, shared_bytes=d.shared_limit(48 * 1024, 227 * 1024))
    assert all(d.why_not(a, 200, 8, 4, clusters) is None for a in d.ALGORITHMS)
    assert "shared memory" in d.why_not("streaming", 200, 8, 4, DEV)
    assert "thread-block clusters" in d.why_not("cluster", 200, 8, 4, DEV)


def test_plans():
    p = d.plan(65536, 128, 8, 4, DEV, copy=False)
    assert (p.algorithm, p.block, p.grid, p.params["ITEMS"]) == ("warp_row", 256, 65536 // 8, 4)
    p = d.plan(100, 1000, 20, 4, DEV, copy=True)
    assert (p.algorithm, p.grid, p.shared_bytes, p.copy) == ("bitonic", 100, 1024 * 8, True)
    p = d.plan(5000, 3000, 100, 2, DEV, copy=False)
    assert (p.algorithm, p.grid, p.block, p.shared_bytes) == ("warp_radix", 625, 256, 0)  # static shared
    p = d.plan(300, 10_000, 64, 8, DEV, copy=False)
    assert p.algorithm == "radix" and p.shared_bytes <= DEV.shared_bytes and p.grid == 300
    p = d.plan(2, 10_000_000, 2000, 4, DEV, copy=False)
    assert p.algorithm == "multiblock" and p.scratch_bytes > 0
    per_row, slice_ = p.params["blocks_per_row"], p.params["slice"]
    assert per_row * slice_ >= 10_000_000 > (per_row - 1) * slice_ and slice_ % 256 == 0
    assert p.grid == 2 * per_row and p.grid >= 4 * DEV.sm_count  # a few waves over every SM
    p = d.plan(1, 100_000, 10, 4, DEV, copy=False)
    assert p.params["slice"] >= _multiblock.MIN_SLICE  # short rows: fewer, fuller blocks
    # Rows of 2^32 elements or more: radix and multiblock count a row in 32 bits.
    assert d.choose(300, 2**32, 10, 1, DEV) == "sort"
    assert d.choose(1, 2**32 - 1, 10, 1, DEV) == "multiblock"
    assert d.choose(1, 2**32, 10, 1, DEV) == "sort"
    assert "2^32" in d.why_not("multiblock", 2**32, 10, 1, DEV)
    assert "2**32" in d.why_not("radix", 2**32, 10, 1, DEV)
    p = d.plan(70_000, 5000, 2048, 4, DEV, copy=False, algorithm="sort")
    assert p.algorithm == "sort" and p.scratch_bytes > 0 and p.grid <= DEV.sm_count * 8
    assert d.plan(1, 100, 5, 4, DEV, copy=False, algorithm="sort").algorithm == "sort"


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 7, 13, 23, 33, 64, 65, 100, 131, 200, 249, 263])
def test_multiblock_grids_are_whole_waves(rows):
    # A wave is BLOCKS_PER_SM blocks on every SM; the last wave of the grid is at
    # least 90% full (with ceil(4 * SMs / rows) blocks per row it was 67% for 5, 10 or 23 rows).
    for sm_count in (132, 108, 80):
        dev = d.Device(sm_count=sm_count)
        p = d.plan(rows, 1 << 22, 50, 4, dev, copy=False, algorithm="multiblock")
        wave = _multiblock.BLOCKS_PER_SM * sm_count
        total = rows * p.params["blocks_per_row"]
        assert p.grid == total and 2 * wave * 0.9 <= total <= _multiblock.MAX_WAVES * wave
        assert total / (-(-total // wave) * wave) >= 0.9, (sm_count, rows, total)
        per_row, slice_ = p.params["blocks_per_row"], p.params["slice"]
        assert per_row * slice_ >= 1 << 22 > (per_row - 1) * slice_ and slice_ % d.MULTIBLOCK_THREADS == 0


def test_multiblock_buffers_of_many_rows_stay_below_the_input():
    # Up to 2 rows per SM take multiblock now: 256 rows of 2^16 float32 must not allocate
    # candidate buffers of a whole row each (3x the input, with the old floor of 2^16 keys).
    # (Auto gives them split now, one launch: multiblock is forced.)
    p = d.plan(256, 1 << 16, 8, 4, DEV, copy=False, algorithm="multiblock")
    assert p.scratch_bytes < 256 * (1 << 16) * 4
    # One row: the candidates take three times the keys expected to reach the threshold.
    assert (
        d.plan(1, 1 << 16, 8, 4, DEV, copy=False, algorithm="multiblock").params["cap"] == 3 * 14 * 16 + 256
    )


def test_few_rows_rule_follows_the_device():
    # Long rows go multiblock below MULTIBLOCK_FEW_ROWS_PER_SM rows per SM of the device in hand
    # (past the 16 rows that split, one launch, takes first).
    large = d.Device(sm_count=200)
    assert d.choose(399, 1 << 20, 10, 4, large) == "multiblock"
    assert d.choose(400, 1 << 20, 10, 4, large) == "radix"
    assert d.choose(263, 1 << 20, 10, 4, DEV) == "multiblock"
    assert d.choose(200, 1 << 20, 10, 4, DEV) == "multiblock"
    assert d.choose(16, 1 << 20, 10, 4, DEV) == "split"


def test_multiblock_chunks_of_rows():
    # The grid's y extent holds at most 65535 rows; the scratch budget may hold fewer.
    p = d.plan(200_000, 100, 50, 1, DEV, copy=False, algorithm="multiblock")
    assert p.params["rows_per_chunk"] == _multiblock.MAX_ROWS
    p = d.plan(10_000, 1_000_000, 2048, 4, DEV, copy=False)
    chunk = p.params["rows_per_chunk"]
    assert p.algorithm == "multiblock" and 1 <= chunk < 10_000
    assert p.scratch_bytes <= _multiblock.SCRATCH_LIMIT < p.scratch_bytes // chunk * (chunk + 1)
    assert p.grid == p.params["blocks_per_row"] * chunk
    # One row per chunk at least, however much scratch it takes.
    p = d.plan(3, 2**32 - 1, 2000, 8, DEV, copy=False)  # 64-bit keys: 1.3 GB of (key, position) pairs
    assert p.params["rows_per_chunk"] == 1 and p.scratch_bytes > _multiblock.SCRATCH_LIMIT
    assert d.plan(64, 2**20, 64, 4, DEV, copy=False).params["rows_per_chunk"] == 64


def test_multiblock_sampled_threshold_plan():
    # The threshold's rank: m + 4 sqrt(m) + 8 for m = ceil(K * SAMPLES / n) samples expected
    # among the top K; the keys expected to reach it plus 8 deviations (at most 3 times them),
    # plus 256, in the candidates.
    p = d.plan(1, 2**24, 1024, 4, DEV, copy=False)
    assert p.params["sample_rank"] == 13  # m = 1: 1 + 4 + 8
    expected = 14 * 2**24 // d.MULTIBLOCK_SAMPLES
    assert p.params["cap"] == 3 * expected + 256  # 8 / sqrt(14) > 2: the 3 x bound
    p = d.plan(1, 2**20, 4096, 4, DEV, copy=False, algorithm="multiblock")
    assert p.params["sample_rank"] == 40  # m = 16: 16 + 16 + 8
    expected = 41 * 2**20 // d.MULTIBLOCK_SAMPLES
    assert p.params["cap"] == expected + -(-8 * expected // 6) + 256
    assert p.params["cand_slice"] * p.params["blocks_per_row"] >= p.params["cap"]
    m = -(-2048 * d.MULTIBLOCK_SAMPLES // 2**18)
    assert d.plan(16, 2**18, 2048, 4, DEV, copy=False).params["sample_rank"] == m + 4 * math.isqrt(m) + 8
    # Rows shorter than SAMPLE_MIN_N read the input once per digit.
    short = d.plan(1, _multiblock.SAMPLE_MIN_N - 1, 16, 4, DEV, copy=False, algorithm="multiblock")
    assert short.params["sample_rank"] is None and short.params["cap"] == 0
    # So do rows where the candidates would not fit the scratch budget (K a large part of the row).
    assert d.plan(1, 2**16, 8192, 4, DEV, copy=False, algorithm="multiblock").params["sample_rank"] is None
    # The budget is in elements (n / 8 pairs), the same for every key width (issue 39: 16-bit
    # rows of 65536 with K = 2048 had no threshold when it was a quarter of the input bytes).
    for key_bytes in (1, 2, 4, 8):
        p = d.plan(16, 2**16, 2048, key_bytes, DEV, copy=False, algorithm="multiblock")
        assert p.params["sample_rank"] == 180 and p.params["cap"] <= 2**16 // _multiblock.ROOM_DIVISOR


def test_multiblock_digits_and_launches():
    # ceil(bits / 11) digits, the widths as even as possible; sample_threshold and one pass per digit.
    assert _multiblock.digit_widths(8) == [8]
    assert _multiblock.digit_widths(16) == [8, 8]
    assert _multiblock.digit_widths(32) == [11, 11, 10]
    assert _multiblock.digit_widths(64) == [11, 11, 11, 11, 10, 10]
    for key_bytes, launches in ((1, 2), (2, 3), (4, 4), (8, 7)):
        p = d.plan(3, 2**20, 100, key_bytes, DEV, copy=False, algorithm="multiblock")
        names = [s.kernel for s in _multiblock.steps(3, key_bytes, p.params, p.block)]
        assert names == ["sample_threshold"] + ["digit_pass"] * (launches - 1)


def test_multiblock_sorts_the_winners_in_shared_memory():
    # pow2(K) (key, 64-bit index) pairs and the static part in a block's shared memory: in 48 KB,
    # K <= 2048 for 32-bit keys and for 64-bit keys; larger K is ordered apart (order.cu's tiles
    # and merges over the K pairs, the last merge writing the outputs), never by sorting the rows.
    forced = {"copy": False, "algorithm": "multiblock"}  # auto gives split some of these
    assert d.plan(1, 2**20, 2048, 4, DEV, **forced).params["order_shared"] == 2048 * 12
    assert d.plan(1, 2**20, 2048, 8, DEV, **forced).params["order_shared"] == 2048 * 16
    assert d.plan(1, 2**20, 10, 4, DEV, **forced).params["order_shared"] == 2048 * 4  # the counts
    p = d.plan(1, 2**20, 2049, 4, DEV, copy=False)
    assert p.algorithm == "multiblock" and not p.params["sort_here"] and p.params["order_shared"] == 2048 * 4
    assert p.params["order_tile"] == 4096  # one tile of 48 KB: no merge
    names = [s.kernel for s in _multiblock.ordering_steps(1, 2**20, 2049, 4, p.params, False)]
    assert names == ["order_winner_tiles", "order_output"]  # a merge of one run: the outputs written
    p = d.plan(1, 2**20, 65536, 4, DEV, copy=False)  # 16 tiles: two 4-way merges
    assert (p.params["order_tile"], p.params["order_ways"]) == (4096, 4)
    merged = {**p.params, "order_picked": False}  # order_tiles over the winners' buffer
    names = [s.kernel for s in _multiblock.ordering_steps(1, 2**20, 65536, 4, merged, False)]
    assert names == ["order_tiles", "order_merge", "order_output"]
    # Picked from the candidates (31 tiles, the bucket's winners): one merge of 32 runs.
    names = [s.kernel for s in _multiblock.ordering_steps(1, 2**20, 65536, 4, p.params, False)]
    assert p.params["order_direct"] and names == ["order_winner_tiles", "order_output"]
    # 96 KB tiles where the device has the shared memory (an H100's 227 KB): 8 runs, one merge.
    big = d.Device(shared_bytes=d.shared_limit(48 * 1024, 227 * 1024))
    p = d.plan(1, 2**20, 65536, 4, big, copy=False)
    assert (p.params["order_tile"], p.params["order_ways"]) == (8192, 8)
    names = [s.kernel for s in _multiblock.ordering_steps(1, 2**20, 65536, 4, p.params, False)]
    assert names == ["order_winner_tiles", "order_output"]
    assert d.why_not("multiblock", 2**20, 2**20, 4, DEV) is None


def test_array_library_step_repeated_is_shown_with_its_count():
    from cutopk._request import plan as _plan

    assert str(_plan.Launch("argsort", count=3)) == "3 x argsort"
    assert str(_plan.Launch("argsort")) == "argsort"


def test_row_strides_of_misaligned_and_collapsible_batches():
    from cutopk._request import layout as _layout

    assert _layout.row_strides((4,), (3,), 4, 0) is None  # a stride that is not whole elements
    assert _layout.row_strides((2, 3, 4), (48, 16, 4), 4, 2) == (4, 1)  # two batch axes, one stride
    assert _layout.row_strides((2, 3, 4), (64, 16, 4), 4, 2) is None  # padded between batches


@pytest.mark.parametrize("algorithm", ["thread_row", "warp_radix"])
def test_one_thread_or_warp_per_row_kernels_refuse_rows_of_2_to_31_elements(algorithm):
    assert d.why_not(algorithm, 2**31 - 1, 4, 4, DEV) is None
    expected = f"'{algorithm}' handles rows shorter than 2**31 elements, this axis has {2**31}"
    assert d.why_not(algorithm, 2**31, 4, 4, DEV) == expected


def test_radix_on_a_device_without_shared_memory_for_k_says_so():
    # 1024 winners of 12 bytes and 32 candidates take 12,672 bytes; 12,000 leave no room.
    small = d.Device(shared_bytes=12_000)
    assert d.why_not("radix", 100_000, 1024, 4, small) == (
        "'radix' needs shared memory for k=1024 winners and 32 candidates of 12 bytes; "
        "this device gives a block 12000 bytes"
    )
    assert d.why_not("radix", 100_000, 1025, 4, DEV) == "'radix' selects at most k=1024, got k=1025"


def test_radix_rows_of_2_to_32_elements_get_no_candidate_buffer():
    from cutopk.cuda.families import radix

    assert radix.buffer(1, 2**32 - 16, 4, 64) == radix.SCRATCH_LIMIT // 8  # capped, not refused
    assert radix.buffer(1, 2**32, 4, 64) == 0  # its indices are 32-bit
