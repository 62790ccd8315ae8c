"""The dispatcher: a pure function from the shape of a request to a kernel plan.

No GPU calls here, so it is unit-tested on the CPU. The thresholds are provisional: no GPU
benchmark of these kernels has been recorded yet (benchmarks/results/ says so); each is the
capacity limit of a kernel, not a measured crossover, until the benchmark grid has run.
"""

from __future__ import annotations

import dataclasses

from ._kernel_constants import (
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

ALGORITHMS = ("warp_row", "warp_radix", "thread_row", "bitonic", "radix", "multiblock", "sort")

WARP_ROW_MAX_N = 1024  # ITEMS = 32 keys per lane in registers (95 for float64 on sm_90, no spills)
WARP_ROW_MAX_K = 32  # lane r keeps the r-th winner
# Auto picks warp_row for rows up to WARP_ROW_SHORT_N with any K <= 32, and up to WARP_ROW_MAX_N
# with K <= WARP_ROW_MEDIUM_MAX_K: a round costs ITEMS compares per lane, so long rows with a
# large K are left to the block kernels. Provisional: an instruction-count estimate, no benchmark.
WARP_ROW_SHORT_N = 256
WARP_ROW_MEDIUM_MAX_K = 16
# warp_radix: a warp per row, radix select with its own shared histogram, no block barrier.
# Auto picks it for batches of at least WARP_RADIX_MIN_ROWS rows longer than warp_row's short
# rows and up to WARP_RADIX_MAX_N (a few passes over a row that stays in L1/L2), where the block
# kernels would synchronise a block per row at every step. Provisional: a design estimate.
WARP_RADIX_MIN_ROWS = 1024
WARP_RADIX_MAX_N = 16384
THREAD_ROW_MAX_K = 8  # winners kept in registers by one thread (16 spills on sm_90)
THREAD_ROW_MIN_ROWS = 256  # one thread per row: fewer rows would leave the GPU idle
RADIX_MAX_K = 1024
RADIX_MAX_N = 1 << 32  # a block counts a row in 32-bit shared counters
SHARED_BYTES = 48 * 1024  # dynamic shared memory a block gets without opting in, on every GPU
# Static shared memory of the kernels that also take dynamic shared memory (radix_topk's
# histogram and scalars, about 2.3 KB), kept out of the opt-in limit: a block's static and
# dynamic shared memory together may not pass the device's opt-in maximum.
STATIC_SHARED_RESERVE = 4096
MAX_CANDIDATES = 4096
# Radix candidate buffer (global scratch): up to n / RADIX_BUFFER_DIVISOR (key, uint32 index)
# pairs per row, so that the digit passes after the bucket fits it read the buffer instead of the
# row. 16 keeps the scratch at most an eighth of a float32 input (the interop test's bound is a
# quarter); writing and re-reading a bucket that large still costs less than one more read of the
# row. Provisional, like every threshold here. The total is capped at RADIX_SCRATCH_LIMIT.
RADIX_BUFFER_DIVISOR = 16
RADIX_SCRATCH_LIMIT = 256 << 20
RADIX_BUFFER_MAX_N = 1 << 32  # buffer indices are 32-bit
MULTIBLOCK_MAX_ROWS = 65535  # rows are gridDim.y: more rows are launched in chunks of rows
# Scratch one chunk of rows may take (candidate buffers, winners): more rows than fit are
# launched in successive chunks, each chunk's scratch going back to the pool for the next.
# At least one row per chunk, whatever its scratch.
MULTIBLOCK_SCRATCH_LIMIT = 1 << 30
# Fewer long rows than this many per SM take several blocks per row: one block per row (radix,
# one 512-thread block per SM at its register use) would leave SMs idle for a partial wave.
MULTIBLOCK_FEW_ROWS_PER_SM = 2
# Blocks of the streaming multiblock kernels resident per SM at least (their
# __launch_bounds__(MULTIBLOCK_THREADS, 2)): a wave is this many blocks per SM.
MULTIBLOCK_BLOCKS_PER_SM = 2
MULTIBLOCK_MAX_WAVES = 16  # the grid of a chunk of rows: at least 2 waves, at most this many
MULTIBLOCK_MIN_N = 1 << 16
MULTIBLOCK_MIN_SLICE = 2048  # elements per block: below this the per-block overheads dominate
# The sampled threshold (mb_sample): MULTIBLOCK_SAMPLES keys per row in the kernel. A row whose
# keys above the threshold hold the K winners is read once instead of twice. mb_sample is one
# block per row, all rows at once: 16 spread loads per thread, all in flight (one round trip), then
# 1 to 8 digit passes over the sample in shared memory, ~5-10 us (estimate) whatever the number
# of rows; with the decision and the squeeze, three more launches. The saved read is the input's
# size over the bandwidth, so the sample is used from MULTIBLOCK_SAMPLE_MIN_ELEMENTS * 4 bytes
# per call on (64 MB: ~20 us at 3.35 TB/s, 2-4x the sample's cost; counted in bytes, so 8-bit
# inputs need 2^26 elements, not 2^24). Provisional: an estimate, no benchmark yet.
MULTIBLOCK_SAMPLE_MIN_ELEMENTS = 1 << 24  # float32-sized elements (bytes / 4)


@dataclasses.dataclass(frozen=True)
class Device:
    """The facts about the device the plan depends on.

    ``shared_bytes``: the dynamic shared memory one block may take (:func:`shared_limit`: the
    opt-in maximum where the device has one, e.g. 223 KB on an H100, else 48 KB). The launcher
    opts a kernel in before a launch that asks for more than 48 KB.
    """

    sm_count: int = 132
    shared_bytes: int = SHARED_BYTES


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
        slice, cap, rows_per_chunk, sample_rank, seg, stage_total, order_shared).
    copy : bool
        Whether the input is copied into a contiguous buffer first.
    transpose : bool
        Whether that copy is the tiled shared-memory transpose of rows along an outer axis
        (``transpose_rows``: coalesced reads and writes), rather than the array library's copy.
    scratch_bytes : int
        Device memory the call allocates besides its outputs (at most, at any one time).
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


def pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def bitonic_size(n: int, key_bytes: int, device: Device) -> int | None:
    """The padded sort size for a row of ``n``, or None when it does not fit in shared memory."""
    size = max(32, pow2_at_least(n))
    return size if size * (4 + key_bytes) <= device.shared_bytes else None


def order_tile(length: int, key_bytes: int, device: Device) -> int:
    """Pairs per tile of the global-memory ordering (kernels/order.cu): the largest power of
    two whose (key, 64-bit index) pairs fit shared memory, at most ``length`` rounded up to one."""
    tile = 1 << ((device.shared_bytes // (8 + key_bytes)).bit_length() - 1)
    return max(2, min(tile, pow2_at_least(length)))


def radix_cap(k: int, key_bytes: int, device: Device) -> int | None:
    """How many candidates the radix kernel can hold next to its K winners, or None if K is
    too large for it."""
    if k > RADIX_MAX_K:
        return None
    entry = 8 + key_bytes
    room = device.shared_bytes // entry - pow2_at_least(k)
    if room < 32:
        return None
    return min(MAX_CANDIDATES, 1 << (room.bit_length() - 1))


def radix_buffer(rows: int, n: int, key_bytes: int, cap: int) -> int:
    """Entries per row of the radix kernel's candidate buffer (0: no buffer, the passes re-read
    the row). Only worth having when it holds more than the ``cap`` candidates of shared memory."""
    if n >= RADIX_BUFFER_MAX_N:
        return 0
    entries = n // RADIX_BUFFER_DIVISOR
    entries = min(entries, RADIX_SCRATCH_LIMIT // (max(1, rows) * (key_bytes + 4)))
    return entries if entries > cap else 0


def sample_threshold(
    rows: int, n: int, k: int, per_row: int, cap: int, key_bytes: int = 4
) -> tuple[int | None, int, int]:
    """``(rank, seg, stage_total)`` of the multi-block select's sampled threshold, or
    ``(None, 0, 0)`` without one.

    The threshold is the sample's key of rank ``rank``: about ``(rank + 1) * n / SAMPLES`` keys of
    the row reach it, and fewer than K only when more than ``rank`` of the samples fall among the
    row's top K - 1, whose expected number is ``k * SAMPLES / n``; twice that plus 8 makes it
    rare (the row then takes the two-read route, still exact). ``seg``: the even share of
    staging entries per slice (split between its warps), twice the expected share plus a margin.
    ``stage_total``: staging entries per row, the even shares plus room for three times the keys
    expected to reach the threshold, which mb_sample gives to the parts of the row where its
    sample saw them (a sorted row's winners crowd a few slices). A fuller segment also sends the
    row the two-read way.
    """
    if rows * n * key_bytes < MULTIBLOCK_SAMPLE_MIN_ELEMENTS * 4:
        return None, 0, 0
    s = MULTIBLOCK_SAMPLES
    rank = min(s - 1, 2 * -(-k * s // n) + 8)
    expected = (rank + 1) * -(-n // s)
    if expected * 16 > n or expected > cap:
        return None, 0, 0  # too many keys reach the threshold for the staging to pay
    # Split evenly between a block's 8 warps: twice a warp's share plus 64.
    seg = -(-(2 * expected // per_row + 512) // 256) * 256
    return rank, seg, per_row * seg + 3 * expected


def multiblock_slices(rows: int, n: int, device: Device) -> tuple[int, int]:
    """``(blocks_per_row, slice)`` of the multi-block select for a chunk of ``rows`` rows.

    Slices are whole multiples of the block size and no shorter than MULTIBLOCK_MIN_SLICE (nor
    longer than 2**31: a block's shared counts are 32-bit). Among the grids of 2 to
    MULTIBLOCK_MAX_WAVES waves (a wave: MULTIBLOCK_BLOCKS_PER_SM blocks on every SM), the one
    whose last wave is fullest, the fewest waves on a tie: ``rows * blocks_per_row`` a whole
    number of waves, or close, so no SM idles through a partial last wave.
    """
    wave = MULTIBLOCK_BLOCKS_PER_SM * device.sm_count
    most = max(1, -(-n // MULTIBLOCK_MIN_SLICE))
    least = max(1, -(-n // 2**31))
    best = None
    for waves in range(2, MULTIBLOCK_MAX_WAVES + 1):
        per_row = max(least, min(most, waves * wave // max(1, rows)))
        slice_ = -(-n // per_row)
        slice_ = -(-slice_ // MULTIBLOCK_THREADS) * MULTIBLOCK_THREADS
        per_row = -(-n // slice_)
        total = rows * per_row
        fill = total / (-(-total // wave) * wave)
        if best is None or fill > best[0] + 1e-9:
            best = (fill, per_row, slice_)
    return best[1], best[2]


def why_not(algorithm: str, n: int, k: int, key_bytes: int, device: Device, rows: int = 1) -> str | None:
    """None when ``algorithm`` can handle the request, else the reason (for the ValueError)."""
    if algorithm == "thread_row":
        if k > THREAD_ROW_MAX_K:
            return f"'thread_row' selects at most k={THREAD_ROW_MAX_K}, got k={k}"
        if n >= 2**31:
            return f"'thread_row' handles rows shorter than 2**31 elements, this axis has {n}"
    elif algorithm == "warp_row":
        if n > WARP_ROW_MAX_N:
            return f"'warp_row' handles rows of at most {WARP_ROW_MAX_N} elements, this axis has {n}"
        if k > WARP_ROW_MAX_K:
            return f"'warp_row' selects at most k={WARP_ROW_MAX_K}, got k={k}"
    elif algorithm == "warp_radix":
        if k > WARP_RADIX_MAX_K:
            return f"'warp_radix' selects at most k={WARP_RADIX_MAX_K}, got k={k}"
        if n >= 2**31:
            return f"'warp_radix' handles rows shorter than 2**31 elements, this axis has {n}"
    elif algorithm == "bitonic":
        if bitonic_size(n, key_bytes, device) is None:
            return (
                f"'bitonic' sorts a row in {device.shared_bytes} bytes of shared memory; a row of {n} "
                f"{key_bytes * 8}-bit keys does not fit"
            )
    elif algorithm == "radix":
        if radix_cap(k, key_bytes, device) is None:
            return f"'radix' selects at most k={RADIX_MAX_K}, got k={k}"
        if n >= RADIX_MAX_N:
            return f"'radix' handles rows shorter than 2**32 elements (32-bit counters), this axis has {n}"
    elif algorithm not in ("multiblock", "sort"):
        return f"unknown algorithm {algorithm!r}"
    return None


def choose(
    rows: int, n: int, k: int, key_bytes: int, device: Device, algorithm: str = "auto", outer: bool = False
) -> str:
    """The algorithm for a request: the forced one, or the cheapest kernel that can take it.

    ``outer``: the rows lie along an outer axis (adjacent rows are adjacent in memory), where a
    thread per row reads coalesced and a warp per row would not.
    """
    if algorithm != "auto":
        return algorithm
    if outer and k <= THREAD_ROW_MAX_K and rows >= THREAD_ROW_MIN_ROWS and n < 2**31:
        return "thread_row"
    if (n <= WARP_ROW_SHORT_N and k <= WARP_ROW_MAX_K) or (
        n <= WARP_ROW_MAX_N and k <= WARP_ROW_MEDIUM_MAX_K
    ):
        return "warp_row"
    if rows >= WARP_RADIX_MIN_ROWS and k <= WARP_RADIX_MAX_K and WARP_ROW_SHORT_N < n <= WARP_RADIX_MAX_N:
        return "warp_radix"
    if rows < MULTIBLOCK_FEW_ROWS_PER_SM * device.sm_count and n >= MULTIBLOCK_MIN_N:
        return "multiblock"  # few long rows: spread each row over many blocks
    if bitonic_size(n, key_bytes, device) is not None and (n <= 2048 or k > RADIX_MAX_K):
        return "bitonic"
    if radix_cap(k, key_bytes, device) is not None and n < RADIX_MAX_N:
        return "radix"
    return "multiblock"  # K too large for shared memory: one read plus sorting the K winners


def plan(
    rows: int,
    n: int,
    k: int,
    key_bytes: int,
    device: Device,
    copy: bool,
    algorithm: str = "auto",
    outer: bool = False,
) -> KernelPlan:
    """The full plan (launch configuration, shared memory, scratch) for a request.

    ``copy``: the batch axes do not collapse into one stride, so the input must be copied.
    Rows along an outer axis are also copied (to row-major) for every algorithm but
    "thread_row", by a tiled transpose (``transpose``: 32 x 32 tiles through shared memory, both
    its reads and its writes coalesced): those kernels read a row with adjacent threads, which
    along an outer axis touches one 32-byte sector per element (8x the traffic for float32),
    while the transpose reads and writes the input once each. The copy counts in
    ``scratch_bytes``.
    """
    name = choose(rows, n, k, key_bytes, device, algorithm, outer)
    transpose = not copy and outer and name != "thread_row"
    copy = copy or transpose
    p = _plan(rows, n, k, key_bytes, device, copy, name)
    if copy:
        p = dataclasses.replace(p, scratch_bytes=p.scratch_bytes + rows * n * key_bytes, transpose=transpose)
    return p


def _plan(rows: int, n: int, k: int, key_bytes: int, device: Device, copy: bool, name: str) -> KernelPlan:
    if name == "thread_row":
        kmax = pow2_at_least(k)
        grid = -(-rows // THREAD_ROW_THREADS)
        return KernelPlan(name, "thread_row_topk", grid, THREAD_ROW_THREADS, 0, {"KMAX": kmax}, copy)
    if name == "warp_row":
        items = max(1, pow2_at_least(-(-n // 32)))
        per_block = WARP_ROW_THREADS // 32
        return KernelPlan(
            name, "warp_row_topk", -(-rows // per_block), WARP_ROW_THREADS, 0, {"ITEMS": items}, copy
        )
    if name == "warp_radix":
        grid = -(-rows // WARP_RADIX_WARPS)
        return KernelPlan(name, "warp_radix_topk", grid, WARP_RADIX_WARPS * 32, 0, {}, copy)
    if name == "bitonic":
        size = bitonic_size(n, key_bytes, device)
        # One thread per compare-exchange pair (size / 2), at most BITONIC_THREADS: a short row
        # does not hold a block of 512 threads that mostly wait at the barriers.
        threads = min(BITONIC_THREADS, max(32, size // 2))
        return KernelPlan(name, "bitonic_topk", rows, threads, size * (4 + key_bytes), {"size": size}, copy)
    if name == "radix":
        cap = radix_cap(k, key_bytes, device)
        shared = (pow2_at_least(k) + cap) * (8 + key_bytes)
        buf = radix_buffer(rows, n, key_bytes, cap)
        params = {"cap": cap, "buffer": buf}
        return KernelPlan(
            name, "radix_topk", rows, RADIX_THREADS, shared, params, copy, rows * buf * (key_bytes + 4)
        )
    if name == "multiblock":
        per_row, slice_ = multiblock_slices(
            max(1, min(rows, MULTIBLOCK_MAX_ROWS)), n, device
        )  # rows=0: planned, never run
        # Candidate buffer per row: the top digit's bucket is about n / 256 keys for spread data;
        # n / 32 leaves room for skew (a larger bucket stays on the input, only slower). The
        # floor of 2^16 keys shrinks beyond 64 rows (now that up to 2 rows per SM come here), so
        # that the buffers of many rows of ~2^16 stay below the input's size.
        cap = max(1, min(n, max(n // 32, min(1 << 16, (1 << 22) // max(1, rows)))))
        rank, seg, stage_total = sample_threshold(rows, n, k, per_row, cap, key_bytes)
        order_bytes = pow2_at_least(k) * (8 + key_bytes)
        row_scratch = (
            MULTIBLOCK_STATE_BYTES + 256 * 8 + per_row * (8 + 256 * 4) + (k * 3 + cap) * (key_bytes + 8)
        )
        if rank is not None:  # staged keys and offsets, a count and a segment offset per warp part
            parts = per_row * (MULTIBLOCK_THREADS // 32)
            row_scratch += stage_total * (key_bytes + 4) + parts * 8 + (parts + 1) * 8
        chunk = max(1, min(rows, MULTIBLOCK_MAX_ROWS, MULTIBLOCK_SCRATCH_LIMIT // row_scratch))
        params = {
            "blocks_per_row": per_row,
            "slice": slice_,
            "cap": cap,
            "rows_per_chunk": chunk,
            "sample_rank": rank,
            "seg": seg,
            "stage_total": stage_total,
            # mb_order sorts the K winners in shared memory when their pairs fit (else CuPy does).
            "order_shared": order_bytes if order_bytes <= device.shared_bytes else 0,
            # Else order_tiles sorts tiles of this many pairs and order_merge merges them.
            "order_tile": order_tile(k, key_bytes, device),
        }
        grid = per_row * chunk
        return KernelPlan(
            name, "mb_histogram", grid, MULTIBLOCK_THREADS, 0, params, copy, chunk * row_scratch
        )
    total = rows * n
    grid = max(1, min(-(-total // KEYS_THREADS), device.sm_count * 8))
    # The keys, then the ordering's two buffers of (key, int64 index) pairs (order.cu: tiles
    # sorted in shared memory, merged in global memory; no library sort).
    scratch = total * (key_bytes + 2 * (key_bytes + 8))
    params = {"order_tile": order_tile(n, key_bytes, device)}
    return KernelPlan(name, "compute_keys", grid, KEYS_THREADS, 0, params, copy, scratch)
