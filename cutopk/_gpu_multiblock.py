"""Launch sequence of the multi-block radix select (kernels/multiblock_radix.cu).

A fixed sequence of launches on the current stream, with no host synchronisation: the number
of digit passes is the key width / 8 whatever the data, and passes after a row's early stop
return at once, so the whole call can be captured in a CUDA graph.
"""

from __future__ import annotations

import numpy as np

from . import _dispatch
from ._gpu import stable_argsort


def run(
    xp, mod, info, plan: _dispatch.Plan, base, rows, req, row_stride, col_stride, values, indices
) -> None:
    per_row, slice_ = plan.params["blocks_per_row"], plan.params["slice"]
    threads = plan.block
    k, n = req.k, req.n
    key_bits = 8 * info.itemsize
    state = xp.empty(rows * _dispatch.MULTIBLOCK_STATE_BYTES, dtype=np.uint8)
    hist = xp.empty(rows * 256, dtype=np.uint64)
    ties = xp.empty(rows * per_row, dtype=np.int64)
    win_key = xp.empty((rows, k), dtype=info.key_dtype)
    win_idx = xp.empty((rows, k), dtype=np.int64)
    grid2 = (per_row, rows)
    strided = (
        base,
        np.int64(n),
        np.int64(row_stride),
        np.int64(col_stride),
        np.int32(req.largest),
        np.int32(req.nan_first),
    )
    cxx = info.cxx
    mod.get_function("mb_init")(
        (-(-rows * 256 // threads),),
        (threads,),
        (state, hist, np.int64(rows), np.int32(k), np.int32(key_bits)),
    )
    for _ in range(key_bits // 8):
        mod.get_function(f"mb_histogram<{cxx}>")(grid2, (threads,), (*strided, np.int64(slice_), state, hist))
        mod.get_function("mb_select")((rows,), (threads,), (state, hist))
    mod.get_function(f"mb_count_ties<{cxx}>")(grid2, (threads,), (*strided, np.int64(slice_), state, ties))
    mod.get_function("mb_scan_ties")(
        (-(-rows // threads),), (threads,), (ties, np.int64(rows), np.int32(per_row))
    )
    args = (*strided, np.int64(slice_), np.int32(k), state, ties, win_key, win_idx)
    mod.get_function(f"mb_collect<{cxx}>")(grid2, (threads,), args)
    # Order the K winners: by index, then (stably) by key, so equal keys stay in index order.
    by_index = xp.argsort(win_idx, axis=1)  # indices are distinct: any sort will do
    order = by_index
    if req.order == "value":
        keys = xp.take_along_axis(win_key, by_index, axis=1)
        order = xp.take_along_axis(by_index, stable_argsort(xp, ~keys), axis=1)
    indices[...] = xp.take_along_axis(win_idx, order, axis=1)
    gather = mod.get_function(f"gather_values<{cxx}>")
    total = rows * k
    gather_args = (
        base,
        np.int64(rows),
        np.int64(row_stride),
        np.int64(col_stride),
        np.int32(k),
        indices,
        values,
    )
    gather((max(1, min(-(-total // 256), 4096)),), (256,), gather_args)
