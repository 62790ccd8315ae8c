"""The dispatcher: a pure function from the shape of a request to a kernel plan.

No GPU calls here, so it is unit-tested on the CPU. The choice of family asks the device's
measured table first (:attr:`Device.table`, :mod:`cutopk.cuda.dispatch_table`: the package's
per-architecture table made from committed forced-family results, or the user's own from
``python -m cutopk tune``), and the hand rules below only where no entry covers the shape: they
are the default. Each threshold below says where it comes
from: a committed GPU result (its file under benchmarks/results/ and its case, times in
microseconds, cutopk against torch.topk in the same run) or, where no GPU has measured
the choice yet, that it is a capacity limit or a design estimate. Crossovers between families
measured on the same shape live in the tables (cutopk/cuda/tables/), not in these rules.
"""

from __future__ import annotations

import dataclasses

from .dispatch_table import DispatchTable
from .families import bitonic as _bitonic
from .families import block_row as _block_row
from .families import cluster as _cluster
from .families import multiblock as _multiblock
from .families import radix as _radix
from .families import resident as _resident
from .families import split as _split
from .families import streaming as _streaming
from .families import thread_row as _thread_row
from .families import warp_row as _warp_row
from .families.common import order_tile, pow2_at_least, scratch_bytes
from .families.registry import FAMILIES
from .kernel_constants import (
    BITONIC_THREADS,
    KEYS_THREADS,
    MULTIBLOCK_SAMPLES,
    MULTIBLOCK_STATE_BYTES,
    MULTIBLOCK_THREADS,
    RADIX_THREADS,
    THREAD_ROW_THREADS,
    WARP_RADIX_MAX_K,
    WARP_RADIX_WARPS,
    WARP_ROW_THREADS,
)

ALGORITHMS = tuple(FAMILIES)  # the registry's order

# Each family's limits, geometry and scratch live in its module (cutopk/cuda/families); the
# names here are the dispatcher's (and its tests') view of them.
WARP_ROW_MAX_N = _warp_row.MAX_N
WARP_ROW_MAX_K = _warp_row.MAX_K
# Auto picks warp_row for rows up to WARP_ROW_SHORT_N with any K <= 32, and up to WARP_ROW_MAX_N
# with K <= WARP_ROW_MEDIUM_MAX_K: a round costs ITEMS compares per lane, so long rows with a large
# K are left to the block kernels. Measured inside the limits only:
# benchmarks/results/2026-11-25-nvidia-h200/full-moe-indexer.csv, moe 1024..65536 rows x 8..256, k
# 1..8: warp_row 4.3-127 us against torch 9-922 us (e.g. 65536 x 256 k=8: 127.4 against 922.3). The
# limits themselves (n 257..1024, K 9..32) are an instruction-count estimate: no GPU has measured a
# case there.
WARP_ROW_SHORT_N = 256
WARP_ROW_MEDIUM_MAX_K = 16
# warp_radix: a warp per row, radix select with its own shared histogram, no block barrier. Auto
# picks it for batches of at least WARP_RADIX_MIN_ROWS rows longer than warp_row's short rows and up
# to WARP_RADIX_MAX_N (a few passes over a row that stays in L1/L2), where the block kernels would
# synchronise a block per row at every step. Measured where it is chosen:
# benchmarks/results/2026-11-25-nvidia-h200/full-knn.csv, knn 10000 x 10000 k=10: 565.8 us against
# torch 1336.9; benchmarks/results/2026-11-25-nvidia-h200/full-huge-layout.csv, layout 4096 x 4096
# k=64 rows: 162.8 against 352.0. Both bounds are a design estimate: no GPU has timed warp_radix
# against radix or bitonic on one shape.
WARP_RADIX_MIN_ROWS = 1024
WARP_RADIX_MAX_N = 16384
THREAD_ROW_MAX_K = _thread_row.MAX_K
# One thread per row: fewer rows would leave the GPU idle. A design estimate: no committed GPU
# result has a case that auto gave thread_row (the layout cases of full-huge-layout.csv have k=64).
THREAD_ROW_MIN_ROWS = 256
# resident: a block per row holds the row in shared memory, one launch, the row read once. Auto
# picks it for up to RESIDENT_MAX_ROWS rows of at least RESIDENT_MIN_N elements that fit (K <=
# 2048): the LLM sampling and indexer rows, where the other families' launches lose:
# benchmarks/results/2026-11-25-nvidia-h200/full-moe-indexer.csv, indexer 1/16/64 x 8192 k=512
# (radix 64.5-65.5 us, torch 59.6-93.7) and k=2048 (bitonic 91.9-93.1 us, torch 64.3-95.1);
# benchmarks/results/2026-11-25-nvidia-h200/full-llm.csv, llm 1..256 x 32000 (radix 41.6-111.6 us).
# The bounds are those shapes' (256 rows: two waves of one block per SM on 132 SMs), not a
# crossover.
RESIDENT_MAX_ROWS = 256
RESIDENT_MIN_N = 8192
# Measured on resident itself (benchmarks/results/2026-11-26-nvidia-h100-80gb-hbm3/scoreboard.csv,
# against torch.topk in the same run): resident wins at 8192 (indexer 1/16/64 x 8192 k=512 and 2048:
# 30.3-47.6 us, 1.5-2.9x torch) and loses at 32000 (llm 1..32 x 32000: 77-94 us, 0.84-1.17x torch),
# where benchmarks/results/2026-11-25-nvidia-h200/full-llm.csv's radix took 42-56 us (1.4-2.2x torch
# there). So rows longer than RESIDENT_RADIX_MIN_N and shorter than multiblock's rows go to radix
# where its K fits, as before resident; the crossover between 8192 and 32000 is not measured (16384:
# the middle, in octaves).
RESIDENT_RADIX_MIN_N = 16384
# block_row: the same rows as resident where they fit its shared memory (an H100: about 42.6K
# float32 keys at K <= 1024, 90K 16-bit keys), in resident's place: a 1024-thread block, the row's
# copies all in flight at entry, a first digit that splits real data, exact refinement on the
# candidates only. It answers what made resident slow in
# benchmarks/results/2026-11-26-nvidia-h100-80gb-hbm3/scoreboard.csv (30-77 us a block, where
# FlashInfer took 14-31: warp matches, one round trip per tile, a coarse first digit). No committed
# result times block_row, so the measured table entries (resident's) keep their shapes and the rows
# between RESIDENT_RADIX_MIN_N and multiblock's stay radix's (measured) until one compares them.
# cluster: the same rows when they are too long for one block but fit the shared memory of a
# thread-block cluster of 8 (sm_90: about 390K float32 keys on an H100), one launch, the row read
# once. The LLM rows of 65536..262144 (benchmarks/results/2026-11-25-nvidia-h200/full-llm.csv: llm
# 1..256 x 128256..262144, multiblock 50.0-634.6 us, 4 launches;
# benchmarks/results/2026-11-25-nvidia-h200/full-moe-indexer.csv: indexer 1..64 x 65536/131072,
# multiblock 58.8-329.7 us). No committed result times cluster: same bounds as resident's.
# split: on devices without clusters (sm_75, sm_80), the rows resident cannot hold, where the
# earlier families would take several launches (multiblock: 4 dependent launches,
# benchmarks/results/2026-11-25-nvidia-h200/full-llm.csv llm 1..256 x 128256..262144, 50.0-634.6
# us): several blocks per row, each holding a slice, the last to arrive merging their candidates,
# one launch and the row read once. The choice rests on plan()'s counts (1 launch against 4; the
# candidates add blocks x min(K, slice) x (key + 4) bytes, aimed at a tenth of the row's: on an
# A100's facts less traffic than multiblock's on each of the 125 cases of
# benchmarks/results/2026-11-25-nvidia-h200/ it takes). No committed result times split against
# multiblock on one shape. Where the earlier choice is one launch already (radix), it stays.
# Measured on split itself (benchmarks/results/2026-11-26-nvidia-h100-80gb-hbm3/scoreboard.csv,
# whose sm_90 rows went to split by wrong device facts): 1 and 8 rows of 128256..262144 took 53-111
# us, 1.0-1.8x torch.topk; 32 rows 0.76-1.0x; 128 and 256 rows 0.65-0.87x at 6-7% of the copy
# bandwidth, where benchmarks/results/2026-11-25-nvidia-h200/full-llm.csv's multiblock had
# 1.26-1.58x torch on the same shapes. So split takes at most SPLIT_MAX_ROWS rows (the 16 between
# the measured 8 and 32 is not measured).
SPLIT_MAX_ROWS = 16
# streaming: many long rows, a block per row reading its row once through a ring of asynchronous
# copies against a sampled threshold (kernels/streaming.cu). The rows the split and cluster
# families serve worst: in benchmarks/results/2026-11-26-nvidia-h100-80gb-hbm3/scoreboard.csv split
# took 128 and 256 rows of 128256..262144 at 6-7% of the copy bandwidth (0.65-0.87x torch.topk),
# and cluster's 8 SMs a row would take 16 waves for 256 rows (read from its SASS and shared
# memory, not measured). A block per row holds
# (stages - 1) x 16 KB in flight, two blocks per SM: from 32 rows a block per row on its own SM
# streams at least as many bytes at once as a cluster of 8 blocks per row of fewer rows. The
# bounds are a design estimate: no committed result times streaming.
STREAMING_MIN_ROWS = 32
STREAMING_MIN_N = 1 << 16
RADIX_MAX_K = _radix.MAX_K
RADIX_MAX_N = _radix.MAX_N
SHARED_BYTES = 48 * 1024  # dynamic shared memory a block gets without opting in, on every GPU
# Static shared memory of the kernels that also take dynamic shared memory (radix_topk's
# histogram and scalars, about 2.3 KB), kept out of the opt-in limit: a block's static and
# dynamic shared memory together may not pass the device's opt-in maximum.
STATIC_SHARED_RESERVE = 4096
MAX_CANDIDATES = _radix.MAX_CANDIDATES
# Fewer long rows than this many per SM take several blocks per row: one block per row (radix, one
# 512-thread block per SM at its register use) would leave SMs idle for a partial wave. Measured
# where it is chosen: benchmarks/results/2026-11-25-nvidia-h200/full-llm.csv, llm 1 x 128256 k=50:
# multiblock 58.2 us against torch 81.5, and 32 x 262144 k=1024: 232.8 against 193.8 (slower). No
# GPU has timed multiblock against radix on one shape: MULTIBLOCK_FEW_ROWS_PER_SM and
# MULTIBLOCK_MIN_N are design estimates.
MULTIBLOCK_FEW_ROWS_PER_SM = 2
MULTIBLOCK_MIN_N = 1 << 16
# K beyond radix's candidates (K > RADIX_MAX_K) on rows that fit shared memory: bitonic sorts the
# whole row in one block only up to this many pairs (as many as multiblock's finishing block
# sorts); longer rows select first (multiblock) and order the K alone. Measured:
# benchmarks/results/2026-11-25-nvidia-h200/full-knn.csv: bitonic took 1.58 ms for 1000 x 10000,
# k=4096 (16384 pairs a row) against 0.32 ms for torch.topk; multiblock on that shape has not run
# on a GPU.
BITONIC_LARGE_K_MAX_N = _multiblock.BLOCK_SORT_MAX
# Re-exported for the launcher and the tests: the kernels' block sizes and the ordering's tile.
__all__ = [
    "BITONIC_THREADS", "FAMILIES", "KEYS_THREADS", "MULTIBLOCK_SAMPLES", "MULTIBLOCK_STATE_BYTES",
    "MULTIBLOCK_THREADS", "RADIX_THREADS", "THREAD_ROW_THREADS", "WARP_RADIX_WARPS",
    "WARP_ROW_THREADS", "order_tile", "pow2_at_least",
]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Device:
    """The facts about the device the plan depends on.

    ``shared_bytes``: the dynamic shared memory one block may take (:func:`shared_limit`: the
    opt-in maximum where the device has one, e.g. 223 KB on an H100, else 48 KB). The launcher
    opts a kernel in before a launch that asks for more than 48 KB. ``clusters``: whether the
    device runs thread-block clusters (sm_90 and later; the "cluster" family needs them). Off
    unless the device says so (the simulator's device has them). ``active_clusters``: pairs
    (cluster size in blocks, clusters of that size resident at once at one block per SM), as
    ``cudaOccupancyMaxActiveClusters`` reports them; a size not listed (none is, today: CuPy
    exposes no such call, benchmarks/gpu/facts.py reads it on a lease) is estimated as the SMs
    divided by the size (families/cluster.py's ``clusters_that_fit``); last, so that the fields
    before keep their places. ``table``: the measured dispatch table for this device (None: the
    hand rules alone).
    """

    sm_count: int = 132
    shared_bytes: int = SHARED_BYTES
    clusters: bool = False  # thread-block clusters (compute capability 9.0 or later)
    table: DispatchTable | None = None
    active_clusters: tuple[tuple[int, int], ...] = ()


def shared_limit(per_block: int, opt_in: int) -> int:
    """Dynamic shared memory a block may take on a device whose default per-block limit is
    ``per_block`` and whose opt-in limit (``MaxSharedMemoryPerBlockOptin``, 0 if unknown) is
    ``opt_in``: the opt-in limit less room for the kernels' static shared memory where it is
    larger than the default, else the default (at most 48 KB)."""
    default = min(per_block, SHARED_BYTES)
    return opt_in - STATIC_SHARED_RESERVE if opt_in - STATIC_SHARED_RESERVE > default else default


@dataclasses.dataclass(frozen=True)
class KernelPlan:
    """What the launcher will do: the dispatcher's choice of kernel and launch (the public
    report of a call is :class:`cutopk.Plan`, built from this one).

    Attributes
    ----------
    algorithm : str
        One of :data:`ALGORITHMS`.
    kernel : str
        The kernel template (without its type arguments), or "" for the library sort.
    grid, block : int
        Launch configuration (1-D; for "multiblock", the blocks of one chunk of rows).
    shared_bytes : int
        Dynamic shared memory per block.
    params : dict
        Kernel-specific parameters (ITEMS, KMAX, size, cap, buffer; multiblock: blocks_per_row,
        slice, cap, cand_slice, bucket_cap, bins, passes, rows_per_chunk, sample_rank, order_shared).
    copy : bool
        Whether the input is copied into a contiguous buffer first.
    transpose : bool
        Whether that copy is the tiled shared-memory transpose of rows along an outer axis
        (``transpose_rows``: coalesced reads and writes), rather than the array library's copy.
    scratch_bytes : int
        Device memory the call allocates besides its outputs: the family's scratch table (one
        chunk of rows for multiblock; every array of the sort path), the copy of the input, and
        the int64 indices of the multi-launch families when the index dtype is narrower.
    chosen_by : str
        What chose the family (:func:`choose_why`): "forced", "table <name>: <source>" or "rules".
    """

    algorithm: str
    kernel: str
    grid: int
    block: int
    shared_bytes: int
    params: dict
    copy: bool
    scratch_bytes: int = 0
    transpose: bool = False
    chosen_by: str = "rules"


bitonic_size = _bitonic.size
radix_cap = _radix.cap


def why_not(algorithm: str, n: int, k: int, key_bytes: int, device: Device, rows: int = 1) -> str | None:
    """None when ``algorithm`` can handle the request, else the reason (for the ValueError)."""
    family = FAMILIES.get(algorithm)
    if family is None:
        return f"unknown algorithm {algorithm!r}"
    return family.why_not(n, k, key_bytes, device)


def choose(
    rows: int, n: int, k: int, key_bytes: int, device: Device, algorithm: str = "auto", outer: bool = False
) -> str:
    """The algorithm for a request: the forced one, or the cheapest kernel that can take it.

    ``outer``: the rows lie along an outer axis (adjacent rows are adjacent in memory), where a
    thread per row reads coalesced and a warp per row would not.
    """
    return choose_why(rows, n, k, key_bytes, device, algorithm, outer)[0]


def choose_why(
    rows: int, n: int, k: int, key_bytes: int, device: Device, algorithm: str = "auto", outer: bool = False
) -> tuple[str, str]:
    """:func:`choose`'s algorithm and what chose it: ``"forced"``, ``"table <name>: <source>"``
    (an entry of the device's table covers the shape and its family takes it) or ``"rules"``.
    Rows along an outer axis keep the rules: the tables are measured on contiguous rows."""
    if algorithm != "auto":
        return algorithm, "forced"
    entry = device.table.lookup(rows, n, k, key_bytes) if device.table is not None and not outer else None
    if entry is not None and why_not(entry.family, n, k, key_bytes, device, rows) is None:
        assert device.table is not None
        return entry.family, f"table {device.table.name}: {entry.source}"
    return _rules(rows, n, k, key_bytes, device, outer), "rules"


def _rules(rows: int, n: int, k: int, key_bytes: int, device: Device, outer: bool) -> str:
    """The hand rules: the default where no table entry covers a shape."""
    if outer and k <= THREAD_ROW_MAX_K and rows >= THREAD_ROW_MIN_ROWS and n < 2**31:
        return "thread_row"
    if (n <= WARP_ROW_SHORT_N and k <= WARP_ROW_MAX_K) or (
        n <= WARP_ROW_MAX_N and k <= WARP_ROW_MEDIUM_MAX_K
    ):
        return "warp_row"
    if rows >= WARP_RADIX_MIN_ROWS and k <= WARP_RADIX_MAX_K and WARP_ROW_SHORT_N < n <= WARP_RADIX_MAX_N:
        return "warp_radix"
    if (
        rows >= STREAMING_MIN_ROWS
        and n >= STREAMING_MIN_N
        and _streaming.why_not(n, k, key_bytes, device) is None
    ):
        return "streaming"  # many long rows: a block each, the row read once through a ring of copies
    on_chip = rows <= RESIDENT_MAX_ROWS and n >= RESIDENT_MIN_N and not _radix_measured_faster(n, k)
    if on_chip and _block_row.why_not(n, k, key_bytes, device) is None:
        return "block_row"  # latency-bound rows that fit on chip: one launch, every load in flight
    if on_chip and _resident.why_not(n, k, key_bytes, device) is None:
        return "resident"  # rows that fit resident's shared memory but not block_row's
    if on_chip and _cluster.why_not(n, k, key_bytes, device) is None:
        return "cluster"  # longer ones on a cluster's shared memory (sm_90)
    earlier = _earlier(rows, n, k, key_bytes, device)
    if (
        earlier == "multiblock"
        and not device.clusters  # sm_90 has cluster; rows past a cluster keep multiblock (unmeasured)
        and rows <= SPLIT_MAX_ROWS
        and n >= RESIDENT_MIN_N
        and _split.why_not(n, k, key_bytes, device) is None
    ):
        return "split"  # without clusters: one launch instead of multiblock's four
    return earlier


def _radix_measured_faster(n: int, k: int) -> bool:
    """Rows between resident's measured win and multiblock's rows, with a K radix takes."""
    return RESIDENT_RADIX_MIN_N < n < MULTIBLOCK_MIN_N and k <= RADIX_MAX_K


def _earlier(rows: int, n: int, k: int, key_bytes: int, device: Device) -> str:
    """The choice for the rows that no one-launch family of :func:`choose` takes."""
    multiblock = _multiblock.why_not(n, k, key_bytes, device) is None
    if rows < MULTIBLOCK_FEW_ROWS_PER_SM * device.sm_count and n >= MULTIBLOCK_MIN_N and multiblock:
        return "multiblock"  # few long rows: spread each row over many blocks
    # bitonic for short rows, and for K beyond radix on rows up to BITONIC_LARGE_K_MAX_N: a design
    # estimate. benchmarks/results/2026-11-25-nvidia-h200/full-moe-indexer.csv, indexer 1 x 8192
    # k=2048: bitonic 91.9 us against torch 64.3 (that shape is resident's now);
    # benchmarks/results/2026-11-25-nvidia-h200/full-knn.csv, knn 1000 x 10000 k=4096: 1584.1
    # against 320.6 (multiblock's now). No GPU has timed bitonic against radix or multiblock on one
    # shape.
    if bitonic_size(n, key_bytes, device) is not None and (
        n <= 2048 or (k > RADIX_MAX_K and pow2_at_least(n) <= BITONIC_LARGE_K_MAX_N)
    ):
        return "bitonic"
    # radix for the other long rows, while its K fits: a capacity limit. Measured where it is
    # chosen: benchmarks/results/2026-11-25-nvidia-h200/full-knn.csv, knn 1000 x 100000 k=100: 639.5
    # us against torch 1251.7.
    if radix_cap(k, key_bytes, device) is not None and n < RADIX_MAX_N:
        return "radix"
    # K too large for radix: select the K winners (multiblock, about one read of the row), then
    # order only them (in its finishing block, or order.cu's tiles and merges over the K pairs);
    # the whole rows sorted only where multiblock cannot take the row (n >= 2^32).
    return "multiblock" if multiblock else "sort"


def plan(
    rows: int,
    n: int,
    k: int,
    key_bytes: int,
    device: Device,
    copy: bool,
    algorithm: str = "auto",
    outer: bool = False,
    by_index: bool = False,
    index_bytes: int = 8,
) -> KernelPlan:
    """The full plan (launch configuration, shared memory, scratch) for a request.

    ``by_index``: the winners are ordered by index (the sort path orders them once more).
    ``index_bytes``: the index dtype's width; the multi-launch families work in int64 indices
    and convert narrower ones at the end, from an int64 array that counts in the scratch.

    ``copy``: the batch axes do not collapse into one stride, so the input must be copied.
    Rows along an outer axis are also copied (to row-major) for every algorithm but
    "thread_row", by a tiled transpose (``transpose``: 32 x 32 tiles through shared memory, both
    its reads and its writes coalesced): those kernels read a row with adjacent threads, which
    along an outer axis touches one 32-byte sector per element (8x the traffic for float32),
    while the transpose reads and writes the input once each. The copy counts in
    ``scratch_bytes``.
    """
    name, chosen_by = choose_why(rows, n, k, key_bytes, device, algorithm, outer)
    transpose = not copy and outer and name != "thread_row"
    copy = copy or transpose
    p = dataclasses.replace(_plan(rows, n, k, key_bytes, device, copy, name, by_index), chosen_by=chosen_by)
    if name in ("multiblock", "sort") and index_bytes != 8:
        p = dataclasses.replace(p, scratch_bytes=p.scratch_bytes + rows * k * 8)
    if copy:
        p = dataclasses.replace(p, scratch_bytes=p.scratch_bytes + rows * n * key_bytes, transpose=transpose)
    return p


def _plan(
    rows: int, n: int, k: int, key_bytes: int, device: Device, copy: bool, name: str, by_index: bool
) -> KernelPlan:
    family = FAMILIES[name]
    g = family.geometry(rows, n, k, key_bytes, device)
    if name == "sort":
        table = family.scratch(rows, n, k, g.params, by_index)
    elif name == "multiblock":
        table = family.scratch(g.params["rows_per_chunk"], n, k, g.params)  # one chunk at a time
    else:
        table = family.scratch(rows, n, k, g.params)
    return KernelPlan(
        name, g.kernel, g.grid, g.block, g.shared_bytes, g.params, copy, scratch_bytes(table, key_bytes)
    )
