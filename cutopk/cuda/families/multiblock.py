"""multiblock: several blocks per row, one launch per 11-bit digit, the last block of each row
finishing each pass (kernels/multiblock.cu; :func:`part` gives its launches, scratch and scalars
to cutopk/cuda/runner.py).

Launches: ``sample_threshold`` then ``digit_pass`` once per digit, ``ceil(key bits / 11) + 1`` in
all (2, 3, 4, 7 for 8-, 16-, 32-, 64-bit keys), whatever the data, lengths or order, with no
host synchronisation: a pass serves the rows on the input and those on the candidate buffer in
one launch, and passes after a row is finished return at once, so the whole call can be
captured in a CUDA graph. K beyond what the finishing block sorts (:func:`sorts_in_block`) adds
:func:`ordering_steps`: order.cu's tiles and at most 2 merge passes over the K pairs, the last
one writing the outputs (2 or 3 launches more, whatever n); while one merge takes every run
(:data:`PICKED_MAX_RUNS`), ``order_winner_tiles`` and ``order_output`` alone, the tiles picking
the winners above the last bucket from the candidates (DIRECT rows: the last pass writes no
winners). Scratch: the table of :func:`scratch`, within the bytes of ``n / 8`` (key, int64
index) pairs ``+ 16 * K`` per row for rows of at least :data:`MIN_N` elements (:func:`caps`
sizes the buffers to that budget), plus 2 x K pairs to order a large K (picked: the slots of
``order.picked_runs``, a power of two of tiles covering the candidates and one tile more).

Rows: regular, with lengths, or CSR segments (kernels/row_extent.cuh): every kernel that reads
the input takes each row's start and length from ``extents``, so a batch of rows of their own
lengths is the same launch sequence. More than :data:`MAX_ROWS` rows (or more scratch than
:data:`SCRATCH_LIMIT`) run the sequence per chunk of ``params["rows_per_chunk"]`` rows.
"""

from __future__ import annotations

import math

import numpy as np

from ..kernel_constants import (
    MULTIBLOCK_DIGIT_BITS,
    MULTIBLOCK_SAMPLES,
    MULTIBLOCK_STAGE,
    MULTIBLOCK_STATE_BYTES,
    MULTIBLOCK_THREADS,
)
from . import order
from .common import Geometry, Part, Planned, Scratch, Step, copy_step, pow2_at_least

# The kernels' C parameters, in order (kernels/multiblock.cu; passed by name by the runner), and
# the C types of the scalars that differ from the other families' (common.SCALAR_TYPES).
_INPUT = ("in", "n", "row_stride", "col_stride", "extents", "rows_kind", "largest", "nan_first")
ARGUMENTS = {
    "sample_threshold": (*_INPUT, "rank", "k", "state", "hist", "bins"),
    "digit_pass": (
        *_INPUT,
        *("slice", "cand_slice", "cap", "cand_key", "cand_idx", "bucket_cap", "bucket_key", "bucket_idx"),
        *("k", "by_index", "sort_here", "direct", "picks", "state", "hist", "bins", "tie_counts"),
        *("win_key", "win_idx", "out_vals", "out_idx"),
    ),
}
SCALAR_TYPES = {
    "slice": np.int64, "cand_slice": np.int64, "cap": np.int64, "bucket_cap": np.int64,
    "rank": np.int32, "bins": np.int32, "sort_here": np.int32, "direct": np.int64,
}  # fmt: skip
KERNELS = tuple(ARGUMENTS)  # the kernels of kernels/multiblock.cu
MAX_ROWS = 65535  # rows are gridDim.y: more rows are launched in chunks of rows
# Scratch one chunk of rows may take: more rows than fit are launched in successive chunks. At
# least one row per chunk, whatever its scratch.
SCRATCH_LIMIT = 1 << 30
# Blocks of digit_pass resident per SM at least (its __launch_bounds__(MULTIBLOCK_THREADS, 2)): a
# wave is this many blocks per SM.
BLOCKS_PER_SM = 2
MAX_WAVES = 16  # the grid of a chunk of rows: at least 2 waves, at most this many
MIN_SLICE = 2048  # elements per block: below this the per-block overheads dominate
# Rows this long or longer take the sampled threshold (pass 1 stages the keys reaching it, and
# the later passes read those instead of the input). Shorter rows (forced onto the family) read
# the input once per digit.
SAMPLE_MIN_N = 1 << 14
# The candidate and bucket buffers share n / ROOM_DIVISOR (key, int64 index) pairs per row
# (:func:`caps`): 1.5 bytes per element for 32-bit keys, 1.25 for 16-bit ones.
ROOM_DIVISOR = 8
# The rows the scratch bound is stated for (the dispatcher sends rows of 2^16 and more here).
MIN_N = 1 << 16
MAX_N = 1 << 32  # 32-bit counts: a block's shared counts, the rows' histograms
# Bytes of a position in the candidate, bucket and winners' buffers (kernels/multiblock.cu, Pos):
# every position is below MAX_N, and the winners' padding takes its slot number (below K). The
# scratch budget of caps() is still counted in (key, int64 index) pairs: the buffers take less than
# it.
POS_BYTES = 4
# digit_pass's static shared memory, next to its dynamic part: scalars and block scans' sums
# (1120 bytes from ptxas, rounded up), and the streaming filter's stage of candidate offsets, 4
# bytes each per warp.
STATIC_SHARED = 2048 + 4 * MULTIBLOCK_STAGE * (MULTIBLOCK_THREADS // 32)
# The finishing block sorts the K winners in shared memory while pow2(K) is at most this many pairs
# and fits the device (48 KB for 32-bit keys: every digit_pass block carries that shared memory, 4
# blocks per SM on an H100 still). Larger K (K = 65536, whose rows the sort family sorted whole) is
# ordered after the last pass by kernels/order.cu over the K pairs alone, in tiles of at most
# ORDER_TILE pairs and ORDER_TILE_SHARED bytes, and 2 merge passes at most, the last one
# (order_output) writing the outputs: 2 or 3 launches more, whatever n. Tiles of 8192 pairs (96 KB
# for 32-bit keys, one block per SM) order K = 65536 in 8 runs, merged in one pass: each merge pass
# moves the K pairs twice, a larger tile only costs the tile sort's own stages (13 x 14 / 2 instead
# of 12 x 13 / 2). Traffic from plan() and the simulator; not measured on a GPU.
BLOCK_SORT_MAX = 4096
ORDER_TILE = 8192
ORDER_TILE_SHARED = 96 * 1024  # and at most this much shared memory per tile
# The K pairs picked where the selection left them (order.py's picked_steps): when the candidates
# hold every winner, the last digit's pass writes no winners above the K-th key's bucket and
# order_winner_tiles reads them in the candidate buffer, so the K pairs are not written and read
# back (plan()'s bytes count the saving). Only while one merge of all the runs does: at most this
# many slots of a tile (the candidates' tiles, the bucket's), each pair of order_output making a
# binary search in every other run; more candidates keep the winners' buffer and its merges.
PICKED_MAX_RUNS = 32


def digit_widths(key_bits: int) -> list[int]:
    """The digits of a key from the top, as kernels/multiblock.cu's ``digit_width``: ceil(bits /
    DIGIT_BITS) of them, the first ``bits % digits`` one bit wider."""
    digits = -(-key_bits // MULTIBLOCK_DIGIT_BITS)
    base, extra = divmod(key_bits, digits)
    return [base + (p < extra) for p in range(digits)]


def bins(key_bytes: int) -> int:
    """Counts per row in the histogram: the widest digit's."""
    return 1 << max(digit_widths(8 * key_bytes))


def shared_bytes(k: int, key_bytes: int, sort_here: bool = True) -> int:
    """digit_pass's dynamic shared memory: the digit's counts, or (``sort_here``) the finishing
    block's pow2(K) (key, int64 index) pairs, whichever is larger (the index select's 256 counts
    fit either)."""
    pairs = pow2_at_least(k) * (8 + key_bytes) if sort_here else 0
    return max(4 * bins(key_bytes), pairs, 1024)


def sorts_in_block(k: int, key_bytes: int, device) -> bool:
    """Whether the finishing block sorts the K winners in shared memory (else order.cu does)."""
    return (
        pow2_at_least(k) <= BLOCK_SORT_MAX
        and shared_bytes(k, key_bytes) + STATIC_SHARED <= device.shared_bytes
    )


def order_tile(k: int, key_bytes: int, device) -> int:
    """Pairs per tile of the ordering of K winners too many for the finishing block: the largest
    power of two of pairs within ORDER_TILE, ORDER_TILE_SHARED and the device's shared memory."""
    room = min(device.shared_bytes, ORDER_TILE_SHARED) // (8 + key_bytes)
    return max(2, min(ORDER_TILE, 1 << (room.bit_length() - 1), pow2_at_least(k)))


def why_not(n: int, k: int, key_bytes: int, device) -> str | None:
    if n >= MAX_N:
        return f"rows of 2^32 elements or more (n={n}): its counts are 32-bit"
    need = shared_bytes(k, key_bytes, False) + STATIC_SHARED
    if need > device.shared_bytes:
        return (
            f"'multiblock' needs {need} bytes of shared memory for a digit's counts of "
            f"{key_bytes}-byte keys; this device gives a block {device.shared_bytes} bytes"
        )
    return None


def sample_rank(n: int, k: int) -> tuple[int, int]:
    """``(rank, expected)``: the rank of sample_threshold's threshold in its sample of MULTIBLOCK_SAMPLES
    keys, and the keys of a row of spread values expected to reach it.

    Fewer than K keys reach the threshold only when more than ``rank`` samples fall among the
    row's top K - 1, a binomial count of mean ``m = K * SAMPLES / n``; ``m + 4 sqrt(m) + 8`` makes
    it rare (the row then reads the input once per digit, still exact). About ``(rank + 1) * n /
    SAMPLES`` keys reach it.
    """
    s = MULTIBLOCK_SAMPLES
    m = -(-k * s // max(1, n))
    rank = min(s - 1, m + 4 * math.isqrt(m) + 8)
    return rank, (rank + 1) * -(-n // s)


def sample_positions(length: int, key_bytes: int, skew: int = 0):
    """The positions sample_threshold reads in a contiguous row of ``length`` elements that starts
    ``skew`` elements past a 32-byte boundary (kernels/multiblock.cu): evenly spaced runs of one
    sector's keys, each starting on a boundary (tests plant keys there)."""
    group = 32 // key_bytes
    j = np.arange(MULTIBLOCK_SAMPLES)
    groups = MULTIBLOCK_SAMPLES // group
    first = ((j // group) * length // groups + skew) // group * group - skew
    first = np.where(first < 0, first + group, first)
    return np.minimum(length - 1, first + j % group)


def caps(n: int, k: int, key_bytes: int, blocks_per_row: int) -> tuple[int, int, int | None]:
    """``(cap, bucket_cap, rank)`` per row: the candidate buffer (the keys reaching the sampled
    threshold), the last digit's bucket buffer, and the threshold's rank (None: no threshold).

    The buffers share what the scratch budget leaves per row: ``n / ROOM_DIVISOR`` (key, int64
    index) pairs, less the state, the histogram and the slices' counts of the threshold's ties
    (the K winners come on top). The budget is in elements, not input bytes: the keys reaching
    the threshold are a share of the row's elements whatever their width, and a budget of
    ``input bytes / 4`` gave 16-bit rows (16 x 65536, k=2048) no threshold at all. The
    candidates get :func:`candidate_room` (the expected count and a margin); without that much
    room, or for rows shorter than SAMPLE_MIN_N, there is no threshold. The bucket
    buffer gets what is left, up to the candidate buffer's size or n / 64 (a larger bucket is
    gathered from the candidates).
    """
    entry = key_bytes + 8
    ties = 4 * blocks_per_row
    room = max(0, (n // ROOM_DIVISOR * entry - MULTIBLOCK_STATE_BYTES - 4 * bins(key_bytes) - ties) // entry)
    cap, rank = 0, None
    if n >= SAMPLE_MIN_N:
        r, expected = sample_rank(n, k)
        want = min(n, candidate_room(r, expected))
        if want <= room and expected < n:
            cap, rank = want, r
    bucket_cap = min(room - cap, max(cap, n // 64, 4096)) if len(digit_widths(8 * key_bytes)) > 1 else 0
    return cap, bucket_cap, rank


def candidate_room(rank: int, expected: int) -> int:
    """Candidates a row's buffer holds for a threshold of sample rank ``rank`` that ``expected``
    keys of a row of spread keys reach: the keys reaching it are ``n`` times a Beta(rank + 1,
    SAMPLES - rank) share, of relative deviation about ``1 / sqrt(rank + 1)``; the buffer takes
    8 deviations above the mean (runs of one sector are sampled, so neighbouring keys that
    move together count as fewer samples), at most 3 x the mean (the margin for small ranks),
    plus 256. An overflow is never wrong: the row then reads the input once per digit."""
    margin = expected + -(-8 * expected // max(1, math.isqrt(rank + 1)))
    return min(3 * expected, margin) + 256


def slices(rows: int, n: int, device) -> tuple[int, int]:
    """``(blocks_per_row, slice)`` for a chunk of ``rows`` rows.

    Slices are whole multiples of the block size and no shorter than MIN_SLICE. Among the grids
    of 2 to MAX_WAVES waves (a wave: BLOCKS_PER_SM blocks on every SM), the one whose last wave is
    fullest, the fewest waves on a tie.
    """
    wave = BLOCKS_PER_SM * device.sm_count
    most = max(1, -(-n // MIN_SLICE))
    best: tuple[float, int, int] | None = None
    for waves in range(2, MAX_WAVES + 1):
        per_row = max(1, min(most, waves * wave // max(1, rows)))
        slice_ = -(-n // per_row)
        slice_ = -(-slice_ // MULTIBLOCK_THREADS) * MULTIBLOCK_THREADS
        per_row = -(-n // slice_)
        total = rows * per_row
        fill = total / (-(-total // wave) * wave)
        if best is None or fill > best[0] + 1e-9:
            best = (fill, per_row, slice_)
    assert best is not None  # MAX_WAVES >= 2: the loop ran
    return best[1], best[2]


def geometry(rows: int, n: int, k: int, key_bytes: int, device) -> Geometry:
    """The blocks of one chunk of rows; ``params["rows_per_chunk"]`` rows at a time, each chunk
    with the scratch of :func:`scratch`."""
    per_row, slice_ = slices(max(1, min(rows, MAX_ROWS)), n, device)  # rows=0: planned, never run
    cap, bucket_cap, rank = caps(n, k, key_bytes, per_row)
    here = sorts_in_block(k, key_bytes, device)
    tile = order_tile(k, key_bytes, device)
    shared = shared_bytes(k, key_bytes, here)
    params = {
        "blocks_per_row": per_row,
        "slice": slice_,
        "cap": cap,
        "cand_slice": max(1, -(-cap // per_row)),
        "bucket_cap": bucket_cap,
        "bins": bins(key_bytes),
        "passes": len(digit_widths(8 * key_bytes)),
        "rows_per_chunk": 0,
        "sample_rank": rank,
        # digit_pass's dynamic shared memory (with sort_here, the finishing block sorts the K
        # winners there; else order.cu orders them in tiles of order_tile pairs, merging
        # order_ways runs a pass).
        "order_shared": shared,
        "sort_here": here,
        "order_tile": tile,
        "order_ways": order.merge_ways(k, tile),
        # Picked (order.py picked_steps): the largest last bucket whose winners the finishing
        # block writes (a tile's worth, within the bucket buffer), 0: the winners' buffer.
        "order_direct": direct_bucket(cap, bucket_cap, k, key_bytes, here, tile),
    }
    # Ordered by order_winner_tiles and one merge (order_output) while the runs allow it, with or
    # without the candidates; else by order_tiles and up to 2 merges.
    params["order_picked"] = not here and picked_runs(params, k) <= PICKED_MAX_RUNS
    row_bytes = sum(e.nbytes(key_bytes) for e in scratch(1, n, k, params))
    chunk = max(1, min(rows, MAX_ROWS, SCRATCH_LIMIT // row_bytes))
    params["rows_per_chunk"] = chunk
    return Geometry("digit_pass", per_row * chunk, MULTIBLOCK_THREADS, shared, params)


def direct_bucket(cap: int, bucket_cap: int, k: int, key_bytes: int, sort_here: bool, tile: int) -> int:
    """The largest bucket of the last digit whose row leaves its winners above the bucket in the
    candidates (kernels/multiblock.cu, DIRECT): 0 (never) when the finishing block sorts, with no
    threshold or one digit, or when the candidates' tiles are too many to merge at once."""
    if sort_here or cap == 0 or len(digit_widths(8 * key_bytes)) < 2:
        return 0
    if order.picked_runs(cap, k, tile) > PICKED_MAX_RUNS:
        return 0
    return min(tile, bucket_cap)


def counts_ties(params: dict) -> bool:
    """Whether pass 1 counts the sampled threshold's ties per slice (kernels/multiblock.cu): a
    threshold, and keys of more than one digit (with one, the candidates hold the ties)."""
    return params["sample_rank"] is not None and params["passes"] > 1


def scratch(rows: int, n: int, k: int, params: dict) -> tuple:
    """The arrays the runner carves for a chunk of ``rows`` rows (cutopk/cuda/runner.py), by their
    kernel parameter names: the state, the histogram, the candidate and bucket buffers, the K
    winners, and pass 1's count of the threshold's ties per slice (one-element placeholders for a
    buffer a plan never uses)."""
    cap, bucket_cap = params["cap"], params["bucket_cap"]
    return (
        Scratch("state", "uint8", rows * MULTIBLOCK_STATE_BYTES),
        Scratch("hist", "uint32", rows * params["bins"]),
        Scratch("cand_key", "key", max(1, rows * cap)),
        Scratch("cand_idx", "uint32", max(1, rows * cap)),
        Scratch("bucket_key", "key", max(1, rows * bucket_cap)),
        Scratch("bucket_idx", "uint32", max(1, rows * bucket_cap)),
        Scratch("win_key", "key", rows * k),
        Scratch("win_idx", "uint32", rows * k),
        Scratch("tie_counts", "uint32", rows * params["blocks_per_row"] if counts_ties(params) else 1),
        *ordering_scratch(rows, k, params),
    )


def ordering_scratch(rows: int, k: int, params: dict) -> list:
    """The buffers of :func:`ordering_steps` and the rows' ``picks`` (where the tiles find each
    row's K pairs; written whenever the finishing block leaves the ordering to order.cu)."""
    if params.get("sort_here", True):
        return [Scratch("picks", "int64", 1)]
    picks = Scratch("picks", "int64", rows * 4)
    if params.get("order_picked", False):
        return [picks, *order.picked_scratch(rows, picked_runs(params, k), params["order_tile"])]
    return [picks, *order.scratch("order", rows, k, POS_BYTES)]


def picked_runs(params: dict, k: int) -> int:
    """Slots a row of order_winner_tiles: the candidates' tiles and the bucket's with
    ``order_direct``, else the K winners' tiles."""
    return order.picked_runs(params["cap"] if params["order_direct"] else 0, k, params["order_tile"])


def part(planned: Planned) -> Part:
    """The sequence over ``planned.rows`` rows (a chunk's, or the call's): its launches with their
    global bytes, its scratch, its scalars. The finishing blocks write int64 indices: for another
    index type they go to an ``idx64`` array of the call, converted once every chunk is done."""
    f, p = planned, planned.params
    seq = steps(f.rows, f.key_bytes, p, f.block)
    moved = global_bytes(seq, f.rows, f.n, f.k, f.key_bytes, f.index_dtype.itemsize, p)
    rank = p["sample_rank"]
    scalars = {
        "slice": p["slice"], "cand_slice": p["cand_slice"], "cap": p["cap"],
        "bucket_cap": p["bucket_cap"], "bins": p["bins"], "rank": -1 if rank is None else rank,
        "by_index": f.order != "value", "sort_here": int(p.get("sort_here", True)),
        "direct": p.get("order_direct", 0),
    }  # fmt: skip
    launches = [s._replace(global_bytes=b) for s, b in zip(seq, moved, strict=True)]
    if not p.get("sort_here", True):
        launches += ordering_steps(f.rows, f.n, f.k, f.key_bytes, p, f.order != "value")
    table = scratch(f.rows, f.n, f.k, p)
    if f.index_dtype == np.int64:
        return Part(launches, table, scalars)
    to_index = copy_step(
        f"int64 indices to {f.index_dtype}",
        "final:out_idx",
        "idx64",
        (f.rows, f.k, f.k),
        f.index_dtype.itemsize,
        8,
    )
    return Part(
        launches, table, scalars, outputs={"out_idx": "idx64"},
        call_scratch=(Scratch("idx64", "int64", f.rows * f.k),), shapes={"idx64": (f.rows, f.k)}, after=[to_index],
    )  # fmt: skip


def steps(rows: int, key_bytes: int, params: dict, block: int) -> list:
    """The launches over ``rows`` rows, in order, as the launcher runs them and plan() lists them:
    the initial states (and thresholds), then one pass per digit."""
    grid = (params["blocks_per_row"], rows)
    first = Step("sample_threshold", True, (rows,), block)
    return [first] + [Step("digit_pass", True, grid, block, params["order_shared"])] * params["passes"]


def ordering_steps(rows: int, n: int, k: int, key_bytes: int, params: dict, by_index: bool) -> list:
    """The launches after the last pass when the finishing block does not sort (``sort_here``
    false): order.cu's tiles and merges over each row's K (key, 4-byte position) pairs, the last
    merge writing the outputs (order_output: the values rebuilt from the keys, padding past a
    row's length). With ``order_direct``, the pairs are picked where the selection left them
    (order.py's picked_steps)."""
    if params.get("order_picked", False):
        cap = params["cap"] if params["order_direct"] else 0
        expected = expected_candidates(n, params)
        return order.picked_steps(rows, k, cap, params["order_tile"], key_bytes, by_index, expected)
    seq, _ = order.steps(
        "order", rows, k, params["order_tile"], key_bytes, ("win_key", "win_idx"), True, by_index,
        ways=params["order_ways"], pos=POS_BYTES, output=True,
    )  # fmt: skip
    return seq


_SECTOR = 32  # bytes: the unit of global-memory traffic


def _sectors(nbytes: int) -> int:
    return -(-nbytes // _SECTOR) * _SECTOR


def expected_candidates(n: int, params: dict) -> int:
    """Keys per row a row of spread values stages in pass 1: about ``(rank + 1) * n / SAMPLES``
    reach the sample's key of rank ``rank`` (0 without a threshold)."""
    rank = params["sample_rank"]
    return 0 if rank is None else min(params["cap"], (rank + 1) * -(-n // MULTIBLOCK_SAMPLES))


def global_bytes(
    steps_: list, rows: int, n: int, k: int, key_bytes: int, index_bytes: int, params: dict
) -> list:
    """Global bytes of each launch of :func:`steps` (plan()'s ``Launch.global_bytes``): each
    32-byte sector a launch touches, once, for keys spread over their range.

    sample_threshold: the states, the zeroed histograms, the sampled runs (a sector each). Pass 1: the
    input, the states, the digit's counts, the staged candidates (keys and indices), each slice's
    count of the threshold's ties. With a threshold and keys of more than one digit pass 1 is the
    streaming filter (kernels/multiblock.cu, filter_slice): the same sectors (its flushes re-read
    the candidates' keys in sectors the pass has just read), fewer instructions, its digit counted
    over the candidates alone; a row whose threshold fails starts over on the input (one read per
    pass, not modelled: spread keys never do). Each later
    pass: the candidates' keys (the input again for rows without a threshold) and the digit's
    counts, until the bucket of the K-th key is expected to hold one key (taken whole: spread
    keys stop early); the pass after it collects the winners (their pairs, their indices in the
    candidates and the values re-read at the winning indices unless it reads the input, the
    outputs) and the later passes only read the states. Without an early stop the last pass also
    counts its digit and stages its bucket (and, DIRECT, writes the bucket's winners alone).
    """
    widths = digit_widths(8 * key_bytes)
    pair = key_bytes + POS_BYTES
    state = _sectors(rows * MULTIBLOCK_STATE_BYTES)
    source = _sectors(rows * n * key_bytes)
    staged = expected_candidates(n, params)
    count = staged or n  # the keys the passes after the first read, per row
    later = _sectors(rows * staged * key_bytes) if staged else source
    winners = _sectors(rows * k * pair)
    outputs = _sectors(rows * k * key_bytes) + _sectors(rows * k * index_bytes)
    indices = min(rows * k * _SECTOR, _sectors(rows * staged * POS_BYTES))
    # The finishing block's winners and outputs (the values rebuilt from the keys: the input is
    # re-read only at NaN and zero keys, none among spread keys); a pass over the candidates
    # also reads the winners' indices there.
    finish = winners + outputs + (indices if staged else 0)
    if not params.get("sort_here", True):  # the K pairs stay in the winners' buffer (ordering_steps)
        finish = winners + (indices if staged else 0)  # their indices read in the candidates

    def counts(p: int) -> int:  # the digit of pass p (1-based): its counts, added and re-zeroed
        return _sectors(rows * (1 << widths[p - 1]) * 4)

    # The pass after which the bucket holds one key, expected: the candidates lie above the
    # threshold, in about one top digit, so pass 1 does not split them; the input's digits do.
    stop = len(widths)
    for p in range(1, len(widths)):
        resolved = sum(widths[1:p]) if staged else sum(widths[:p])
        if (staged and p == 1) or count >> resolved > 1:
            continue
        stop = p
        break
    out = []
    passes = 0
    for s in steps_:
        if s.kernel == "sample_threshold":
            sampled = (
                0 if params["sample_rank"] is None else min(rows * MULTIBLOCK_SAMPLES * key_bytes, source)
            )
            out.append(state + _sectors(rows * params["bins"] * 4) + sampled)
            continue
        if s.kernel != "digit_pass":
            raise ValueError(f"steps_: no traffic formula for the kernel {s.kernel!r}")
        passes += 1
        if passes == 1:
            b = state + counts(1) + source + _sectors(rows * staged * pair)
            b += winners + outputs if len(widths) == 1 else 0
            if counts_ties(params):
                b += _sectors(rows * params["blocks_per_row"] * 4)
        elif passes <= stop:
            b = state + counts(passes) + later
            if passes == len(widths):  # the last digit: its bucket staged, the winners gathered
                resolved = sum(widths[1:-1]) if staged else sum(widths[:-1])
                bucket = min(params["bucket_cap"], count >> resolved)
                # DIRECT: only the bucket's winners written; order_winner_tiles reads the rest
                # in the candidates (the picks: one sector a row).
                direct = staged and bucket <= params.get("order_direct", 0)
                b += _sectors(rows * bucket * pair) + (_sectors(rows * 32) if direct else finish)
        elif passes == stop + 1:
            b = state + later + finish  # the bucket taken whole, collected
        else:
            b = state  # finished rows return at once
        out.append(b)
    return out
