"""Launch sequence of the multi-block radix select (kernels/multiblock.cu).

A fixed sequence of launches on the current stream, with no host synchronisation: the number
of digit passes is the key width / 8 whatever the data (one more with a sampled threshold), a
per-slice pass serves the rows on the input and those on the candidate buffer in one launch,
and passes after a row's early stop return at once, so the whole call can be captured in a CUDA
graph.

Rows: regular, with lengths, or CSR segments (``rows_of``: ``(extents, rows_kind)``, see
kernels/row_extent.cuh); every kernel that reads the input takes each row's start and length
from ``extents``, so a batch of rows of their own lengths is the same launch sequence.
"""

from __future__ import annotations

import numpy as np

from . import _dispatch, _gpu_rows


def run(
    xp, mod, info, plan: _dispatch.Plan, base, rows, req, row_stride, col_stride, values, indices, rows_of
) -> None:
    """The sequence over ``rows`` rows of ``base``: values and int64 indices written into
    ``values`` and ``indices`` ((rows, k), C-contiguous). ``rows_of``: ``(extents, rows_kind)``,
    the int64 lengths (``rows`` of them) or CSR offsets (``rows + 1``) of this batch's rows, or
    a placeholder for a regular batch (never read)."""
    extents, rows_kind = rows_of
    per_row, slice_, cap = plan.params["blocks_per_row"], plan.params["slice"], plan.params["cap"]
    cand_slice = -(-cap // per_row)
    threads = plan.block
    k, n = req.k, req.n
    key_bits = 8 * info.itemsize
    state = xp.empty(rows * _dispatch.MULTIBLOCK_STATE_BYTES, dtype=np.uint8)
    hist = xp.empty(rows * 256, dtype=np.uint64)
    slice_offset = xp.empty(rows * per_row, dtype=np.int64)
    slice_hist = xp.empty(rows * per_row * 256, dtype=np.uint32)
    win_key = xp.empty((rows, k), dtype=info.key_dtype)
    win_idx = xp.empty((rows, k), dtype=np.int64)
    cand_key = xp.empty((rows, cap), dtype=info.key_dtype)
    cand_idx = xp.empty((rows, cap), dtype=np.int64)
    # A sampled threshold (long inputs): pass 1 stages the keys that reach it, each warp part of
    # a slice into its own segment (mb_sample sizes them within stage_total entries per row).
    rank, seg, stage_total = plan.params["sample_rank"], plan.params["seg"], plan.params["stage_total"]
    staged = rank is not None
    warps = threads // 32
    parts = per_row * warps if staged else 0
    stage_start = xp.empty(rows * (parts + 1) if staged else 1, dtype=np.int64)
    stage = (
        xp.empty(max(1, rows * stage_total), dtype=info.key_dtype),
        xp.empty(max(1, rows * stage_total), dtype=np.uint32),
        xp.empty(max(1, rows * parts), dtype=np.int64),
        stage_start,
        np.int64(stage_total),
    )
    grid2, block = (per_row, rows), (threads,)
    cxx = info.cxx
    strided = (
        base,
        np.int64(n),
        np.int64(row_stride),
        np.int64(col_stride),
        extents,
        np.int32(rows_kind),
        np.int32(req.largest),
        np.int32(req.nan_first),
    )

    # The per-slice passes take both slice lengths: each block reads the input or the candidate
    # buffer, as its row's state says.
    per_slice = (*strided, np.int64(slice_), np.int64(cap), cand_key, cand_idx, np.int64(cand_slice))

    def histogram():
        args = (*per_slice, state, hist, slice_hist, *stage)
        mod.get_function(f"mb_histogram<{cxx}>")(grid2, block, args)

    def select():
        args = (state, hist, slice_hist, slice_offset, np.int32(per_row), stage[2], np.int32(warps))
        mod.get_function("mb_select")((rows,), block, (*args, np.int64(cap), np.int32(key_bits)))

    # The initial states and zeroed histograms: mb_sample sets them too.
    if staged:
        # Room per warp part: an even share of seg, plus a sample interval per nearby hit.
        room, per_hit = seg // warps, -(-n // _dispatch.MULTIBLOCK_SAMPLES)
        geometry = (np.int64(slice_), np.int32(per_row), np.int32(warps), np.int64(room), np.int64(per_hit))
        sample = (
            *strided,
            np.int32(rank),
            np.int32(k),
            state,
            hist,
            *geometry,
            stage_start,
            np.int64(stage_total),
        )
        mod.get_function(f"mb_sample<{cxx}>")((rows,), block, sample)
    else:
        init = (state, hist, np.int64(rows), np.int64(n), extents, np.int32(rows_kind), np.int32(k))
        init += (np.int32(key_bits),)
        mod.get_function("mb_init")((-(-rows * 256 // threads),), block, init)
    # The top digit, over the input (staging the keys that reach the threshold).
    histogram()
    select()
    # Rows that restarted on their staged keys, and rows whose bucket fits, move to the
    # candidate buffer.
    move = (
        *strided,
        np.int64(slice_),
        np.int64(cap),
        cand_key,
        cand_idx,
        np.int32(k),
        state,
        slice_offset,
        win_key,
        win_idx,
    )
    mod.get_function(f"mb_move<{cxx}>")(grid2, block, (*move, *stage))
    # The other digits (every digit for the rows that restarted on their staged keys).
    for _ in range(key_bits // 8 - (0 if staged else 1)):
        histogram()
        select()
    # The final bucket: winners above it, then its first keys in index order.
    collect = (*per_slice, np.int32(k), state, slice_offset, win_key, win_idx)
    mod.get_function(f"mb_collect<{cxx}>")(grid2, block, collect)
    target = "sim" if isinstance(base, np.ndarray) else "cuda"
    if plan.params["order_shared"]:
        order_args = (
            base,
            np.int64(n),
            np.int64(row_stride),
            np.int64(col_stride),
            extents,
            np.int32(rows_kind),
            np.int32(k),
            np.int32(req.order != "value"),
            win_key,
            win_idx,
            values,
            indices,
        )
        fn = mod.get_function(f"mb_order<{cxx}>")
        _gpu_rows.launch(fn, (rows,), block, order_args, plan.params["order_shared"], target)
        return
    # Too many winners for shared memory: tiles sorted in shared memory, merged in global memory.
    by_index = req.order != "value"
    tile = plan.params["order_tile"]
    indices[...] = _gpu_rows.order_pairs(mod, cxx, win_key, win_idx, by_index, tile, target)[1]
    gather = mod.get_function(f"gather_values<{cxx}>")
    total = rows * k
    gather_args = (
        base,
        np.int64(rows),
        np.int64(n),
        np.int64(row_stride),
        np.int64(col_stride),
        extents,
        np.int32(rows_kind),
        np.int32(k),
        indices,
        values,
    )
    threads = _dispatch.KEYS_THREADS
    gather((max(1, min(-(-total // threads), 4096)),), (threads,), gather_args)
