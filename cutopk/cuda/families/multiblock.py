"""multiblock: several blocks per row, a fixed sequence of radix passes with candidate buffers in
global memory (kernels/multiblock.cu; the launches are cutopk/cuda/multiblock.py's)."""

from __future__ import annotations

from typing import NamedTuple

from ..kernel_constants import MULTIBLOCK_SAMPLES, MULTIBLOCK_STATE_BYTES, MULTIBLOCK_THREADS
from .common import SECTOR, Geometry, Scratch, gathered, order_tile, pow2_at_least, sectors

MAX_ROWS = 65535  # rows are gridDim.y: more rows are launched in chunks of rows
# Scratch one chunk of rows may take (candidate buffers, winners): more rows than fit are
# launched in successive chunks, each chunk's scratch going back to the pool for the next.
# At least one row per chunk, whatever its scratch.
SCRATCH_LIMIT = 1 << 30
# Blocks of the streaming multiblock kernels resident per SM at least (their
# __launch_bounds__(MULTIBLOCK_THREADS, 2)): a wave is this many blocks per SM.
BLOCKS_PER_SM = 2
MAX_WAVES = 16  # the grid of a chunk of rows: at least 2 waves, at most this many
MIN_SLICE = 2048  # elements per block: below this the per-block overheads dominate
# The sampled threshold (mb_sample): MULTIBLOCK_SAMPLES keys per row in the kernel. A row whose
# keys above the threshold hold the K winners is read once instead of twice. mb_sample is one
# block per row, all rows at once: 16 spread loads per thread, all in flight (one round trip), then
# 1 to 8 digit passes over the sample in shared memory, ~5-10 us (estimate) whatever the number
# of rows; with the decision and the squeeze, three more launches. The saved read is the input's
# size over the bandwidth, so the sample is used from SAMPLE_MIN_ELEMENTS * 4 bytes per call on
# (64 MB: ~20 us at 3.35 TB/s, 2-4x the sample's cost; counted in bytes, so 8-bit inputs need
# 2^26 elements, not 2^24). Provisional: an estimate, no benchmark yet.
SAMPLE_MIN_ELEMENTS = 1 << 24  # float32-sized elements (bytes / 4)


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    return None  # any row, any K


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
    if rows * n * key_bytes < SAMPLE_MIN_ELEMENTS * 4:
        return None, 0, 0
    s = MULTIBLOCK_SAMPLES
    rank = min(s - 1, 2 * -(-k * s // n) + 8)
    expected = (rank + 1) * -(-n // s)
    if expected * 16 > n or expected > cap:
        return None, 0, 0  # too many keys reach the threshold for the staging to pay
    # Split evenly between a block's 8 warps: twice a warp's share plus 64.
    seg = -(-(2 * expected // per_row + 512) // 256) * 256
    return rank, seg, per_row * seg + 3 * expected


def slices(rows: int, n: int, device) -> tuple[int, int]:
    """``(blocks_per_row, slice)`` of the multi-block select for a chunk of ``rows`` rows.

    Slices are whole multiples of the block size and no shorter than MIN_SLICE (nor
    longer than 2**31: a block's shared counts are 32-bit). Among the grids of 2 to
    MAX_WAVES waves (a wave: BLOCKS_PER_SM blocks on every SM), the one
    whose last wave is fullest, the fewest waves on a tie: ``rows * blocks_per_row`` a whole
    number of waves, or close, so no SM idles through a partial last wave.
    """
    wave = BLOCKS_PER_SM * device.sm_count
    most = max(1, -(-n // MIN_SLICE))
    least = max(1, -(-n // 2**31))
    best = None
    for waves in range(2, MAX_WAVES + 1):
        per_row = max(least, min(most, waves * wave // max(1, rows)))
        slice_ = -(-n // per_row)
        slice_ = -(-slice_ // MULTIBLOCK_THREADS) * MULTIBLOCK_THREADS
        per_row = -(-n // slice_)
        total = rows * per_row
        fill = total / (-(-total // wave) * wave)
        if best is None or fill > best[0] + 1e-9:
            best = (fill, per_row, slice_)
    return best[1], best[2]


def _cap(rows: int, n: int) -> int:
    # Candidate buffer per row: the top digit's bucket is about n / 256 keys for spread data;
    # n / 32 leaves room for skew (a larger bucket stays on the input, only slower). The
    # floor of 2^16 keys shrinks beyond 64 rows (now that up to 2 rows per SM come here), so
    # that the buffers of many rows of ~2^16 stay below the input's size.
    return max(1, min(n, max(n // 32, min(1 << 16, (1 << 22) // max(1, rows)))))


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    """The blocks of one chunk of rows; ``params["rows_per_chunk"]`` rows at a time, each chunk
    with the scratch of :func:`scratch`."""
    per_row, slice_ = slices(max(1, min(rows, MAX_ROWS)), n, device)  # rows=0: planned, never run
    cap = _cap(rows, n)
    rank, seg, stage_total = sample_threshold(rows, n, k, per_row, cap, key_bytes)
    order_bytes = pow2_at_least(k) * (8 + key_bytes)
    params = {
        "blocks_per_row": per_row,
        "slice": slice_,
        "cap": cap,
        "rows_per_chunk": 0,
        "sample_rank": rank,
        "seg": seg,
        "stage_total": stage_total,
        # mb_order sorts the K winners in shared memory when their pairs fit (else CuPy does).
        "order_shared": order_bytes if order_bytes <= device.shared_bytes else 0,
        # Else order_tiles sorts tiles of this many pairs and order_merge merges them.
        "order_tile": order_tile(k, key_bytes, device),
    }
    row_bytes = sum(e.nbytes(key_bytes) for e in scratch(1, n, k, params))
    chunk = max(1, min(rows, MAX_ROWS, SCRATCH_LIMIT // row_bytes))
    params["rows_per_chunk"] = chunk
    return Geometry("mb_histogram", per_row * chunk, MULTIBLOCK_THREADS, 0, params)


def scratch(rows: int, n: int, k: int, params: dict) -> tuple:
    """The arrays :func:`cutopk.cuda.multiblock.run` allocates for a chunk of ``rows`` rows, by
    their kernel parameter names (the ordering's two buffers of K pairs when they do not fit
    shared memory). Without a sampled threshold the staging arrays are one-element placeholders."""
    per_row, cap, stage_total = params["blocks_per_row"], params["cap"], params["stage_total"]
    staged = params["sample_rank"] is not None
    parts = per_row * (MULTIBLOCK_THREADS // 32) if staged else 0
    table = [
        Scratch("state", "uint8", rows * MULTIBLOCK_STATE_BYTES),
        Scratch("hist", "uint64", rows * 256),
        Scratch("slice_offset", "int64", rows * per_row),
        Scratch("slice_hist", "uint32", rows * per_row * 256),
        Scratch("win_key", "key", rows * k),
        Scratch("win_idx", "int64", rows * k),
        Scratch("cand_key", "key", rows * cap),
        Scratch("cand_idx", "int64", rows * cap),
        Scratch("stage_start", "int64", rows * (parts + 1) if staged else 1),
        Scratch("stage_key", "key", max(1, rows * stage_total)),
        Scratch("stage_off", "uint32", max(1, rows * stage_total)),
        Scratch("stage_count", "int64", max(1, rows * parts)),
    ]
    if not params["order_shared"]:  # order_pairs' two buffers of (key, int64 index) pairs
        table += [
            Scratch("order_key", "key", rows * k),
            Scratch("order_idx", "int64", rows * k),
            Scratch("order_key2", "key", rows * k),
            Scratch("order_idx2", "int64", rows * k),
        ]
    return tuple(table)


class Step(NamedTuple):
    """One launch of the sequence: the kernel (``templated``: instantiated for the element type),
    its grid, block and dynamic shared memory. Its arguments are the kernel's parameters by name
    (the launcher's descriptor of that kernel)."""

    kernel: str
    templated: bool
    grid: tuple
    block: int
    shared_bytes: int = 0


def steps(rows: int, key_bytes: int, params: dict, block: int) -> list:
    """The launches of the sequence over ``rows`` rows, in order, as the launcher runs them and
    plan() lists them; without ``order_shared`` the ordering by tiles and merges follows
    (cutopk/cuda/rows.py)."""
    per_row = params["blocks_per_row"]
    staged = params["sample_rank"] is not None
    grid2 = (per_row, rows)
    histogram, select = Step("mb_histogram", True, grid2, block), Step("mb_select", False, (rows,), block)
    # The initial states and zeroed histograms (mb_sample sets them too, and stages the keys).
    first = (
        Step("mb_sample", True, (rows,), block)
        if staged
        else Step("mb_init", False, (-(-rows * 256 // block),), block)
    )
    # The top digit over the input; rows whose bucket fits move to the candidate buffer; the other
    # digits (every digit for the rows that restarted on their staged keys); the final bucket.
    seq = [first, histogram, select, Step("mb_move", True, grid2, block)]
    seq += [histogram, select] * (key_bytes - (0 if staged else 1))
    seq.append(Step("mb_collect", True, grid2, block))
    if params["order_shared"]:
        seq.append(Step("mb_order", True, (rows,), block, params["order_shared"]))
    return seq


def global_bytes(
    steps_: list, rows: int, n: int, k: int, key_bytes: int, index_bytes: int, params: dict
) -> list:
    """Global bytes of each launch of :func:`steps` (plan()'s ``Launch.global_bytes``), for
    today's kernels: each 32-byte sector a launch touches counted once; the candidate buffer at
    its expected size for keys spread over their range (n / 256 keys per row after the top digit,
    a 256th of that after each further digit). One function, so that a new sequence of kernels
    replaces it whole."""
    per_row, cap = params["blocks_per_row"], params["cap"]
    pair = key_bytes + 8  # a (key, int64 index) pair
    state = sectors(rows * MULTIBLOCK_STATE_BYTES)
    hist = sectors(rows * 256 * 8)
    slice_hist = sectors(rows * per_row * 256 * 4)
    slice_offset = sectors(rows * per_row * 8)
    source = sectors(rows * n * key_bytes)  # the input
    winners = sectors(rows * k * pair)
    rank = params["sample_rank"]
    parts = per_row * (MULTIBLOCK_THREADS // 32)  # warp parts of a row, each its staging segment
    if rank is None:
        # Moved to the candidate buffer: the top digit's bucket (n / 256 keys), whose remaining
        # digits follow; keys above it become winners on the way.
        moved, first_digit, staging = min(cap, -(-n // 256)), 2, 0
    else:
        # Restarted on the staged keys (about (rank + 1) * n / SAMPLES reach the threshold): all
        # the digits over them, the input read once. The segment starts and counts per warp part,
        # and the keys and offsets staged in each part's segment (a sector each, at least).
        moved, first_digit = min(cap, (rank + 1) * -(-n // MULTIBLOCK_SAMPLES)), 1
        staging = (
            sectors(rows * (parts + 1) * 8)
            + sectors(rows * parts * 8)
            + 2 * SECTOR * rows * min(parts, moved)
        )

    def live(d: int) -> bool:
        """Whether digit d still has work: its bucket's keys (moved / 256 per digit) reach one."""
        return d == first_digit or moved / 256 ** (d - first_digit) >= 1

    out = []
    histograms = selects = 0
    after_move = False
    for s in steps_:
        if s.kernel == "mb_init":
            b = state + hist
        elif s.kernel == "mb_sample":
            b = (
                state
                + hist
                + gathered(rows * MULTIBLOCK_SAMPLES, rows * n * key_bytes)
                + sectors(rows * (parts + 1) * 8)
            )
        elif s.kernel == "mb_histogram":
            histograms += 1
            if not after_move:  # the top digit over the input (staging the keys that reach the threshold)
                b = state + hist + slice_hist + source + staging
            else:  # every slice's 256 counts are written whole, and the candidates read
                d = histograms - 2 + first_digit
                b = state + hist + slice_hist + sectors(rows * moved * key_bytes) if live(d) else state
        elif s.kernel == "mb_select":
            selects += 1
            d = selects - 2 + first_digit
            # The row's histogram, and each slice's count in the chosen bin (a sector each).
            b = state + hist + slice_offset + rows * per_row * SECTOR if selects == 1 or live(d) else state
            if selects == 1 and rank is not None:
                b += sectors(rows * parts * 8)  # the staged counts
        elif s.kernel == "mb_move":
            after_move = True
            if rank is None:
                b = source + state + slice_offset + sectors(rows * moved * pair) + winners
            else:  # the staged keys and offsets squeezed into the candidate buffer
                b = staging + state + slice_offset + sectors(rows * moved * pair)
        elif s.kernel == "mb_collect":
            # The final bucket's candidates, a few sectors per slice; the winners among them.
            b = state + slice_offset + rows * per_row * 4 * SECTOR
        elif s.kernel == "mb_order":
            # The winners' pairs, their values read where they lie, the outputs.
            b = winners + gathered(rows * k, rows * n * key_bytes)
            b += sectors(rows * k * key_bytes) + sectors(rows * k * index_bytes)
        else:
            raise ValueError(f"steps_: no traffic formula for the kernel {s.kernel!r}")
        out.append(b)
    return out
