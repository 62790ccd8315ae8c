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

from . import dispatch as _dispatch
from . import kernel_source as _kernel_source
from . import rows as _rows
from .families import common as _common
from .families import multiblock as _family

# The launches of the sequence by the kernels' C parameter names (kernels/multiblock.cu; checked
# against it by tests/gpu/test_kernel_arguments.py). MB_PARAMS and MB_STAGE_PARAMS there are _SLICE
# and _STAGE here.
SCALAR_TYPES = {
    "rows": np.int64, "n": np.int64, "row_stride": np.int64, "col_stride": np.int64,
    "slice": np.int64, "cap": np.int64, "cand_slice": np.int64, "stage_total": np.int64,
    "room": np.int64, "per_hit": np.int64, "rows_kind": np.int32, "largest": np.int32,
    "nan_first": np.int32, "k": np.int32, "rank": np.int32, "blocks_per_row": np.int32,
    "warps": np.int32, "key_bits": np.int32, "by_index": np.int32,
}  # fmt: skip
_ROW = ("in", "n", "row_stride", "col_stride", "extents", "rows_kind")
_INPUT = (*_ROW, "largest", "nan_first")
_SLICE = (*_INPUT, "slice", "cap", "cand_key", "cand_idx")
_STAGE = ("stage_key", "stage_off", "stage_count", "stage_start", "stage_total")
_WINNERS = ("state", "slice_offset", "win_key", "win_idx")
MB_INIT = _kernel_source.params(
    "mb_init", ("state", "hist", "rows", "n", "extents", "rows_kind", "k", "key_bits"), SCALAR_TYPES
)
MB_SAMPLE = _kernel_source.params(
    "mb_sample",
    (
        *_INPUT,
        *("rank", "k", "state", "hist", "slice", "blocks_per_row", "warps", "room", "per_hit"),
        *("stage_start", "stage_total"),
    ),
    SCALAR_TYPES,
)
MB_HISTOGRAM = _kernel_source.params(
    "mb_histogram", (*_SLICE, "cand_slice", "state", "hist", "slice_hist", *_STAGE), SCALAR_TYPES
)
MB_SELECT = _kernel_source.params(
    "mb_select",
    (
        "state",
        "hist",
        "slice_hist",
        "slice_offset",
        "blocks_per_row",
        "stage_count",
        "warps",
        "cap",
        "key_bits",
    ),
    SCALAR_TYPES,
)
MB_MOVE = _kernel_source.params("mb_move", (*_SLICE, "k", *_WINNERS, *_STAGE), SCALAR_TYPES)
MB_COLLECT = _kernel_source.params("mb_collect", (*_SLICE, "cand_slice", "k", *_WINNERS), SCALAR_TYPES)
MB_ORDER = _kernel_source.params(
    "mb_order", (*_ROW, "k", "by_index", "win_key", "win_idx", "out_vals", "out_idx"), SCALAR_TYPES
)

KERNELS = {d.kernel: d for d in (MB_INIT, MB_SAMPLE, MB_HISTOGRAM, MB_SELECT, MB_MOVE, MB_COLLECT, MB_ORDER)}


def values(plan: _dispatch.KernelPlan, info, req, rows: int) -> dict:
    """Every scalar of the sequence over ``rows`` rows, by its parameter name (each launch takes
    the ones it declares); the arrays are the caller's: the runner (cutopk/cuda/runner.py)
    prepares the launches with these once per call signature."""
    per_row, slice_, cap = plan.params["blocks_per_row"], plan.params["slice"], plan.params["cap"]
    warps = plan.block // 32
    v = {
        "rows": rows, "n": req.n, "largest": req.largest, "nan_first": req.nan_first, "k": req.k,
        "key_bits": 8 * info.itemsize, "slice": slice_, "cap": cap, "cand_slice": -(-cap // per_row),
        "blocks_per_row": per_row, "warps": warps, "by_index": req.order != "value",
    }  # fmt: skip
    # A sampled threshold (long inputs): pass 1 stages the keys that reach it, each warp part of
    # a slice into its own segment (mb_sample sizes them within stage_total entries per row).
    rank, seg, stage_total = plan.params["sample_rank"], plan.params["seg"], plan.params["stage_total"]
    v["stage_total"] = stage_total
    if rank is not None:
        # Room per warp part: an even share of seg, plus a sample interval per nearby hit.
        v["rank"], v["room"], v["per_hit"] = rank, seg // warps, -(-req.n // _dispatch.MULTIBLOCK_SAMPLES)
    return v


def run(
    xp,
    mod,
    info,
    plan: _dispatch.KernelPlan,
    base,
    rows,
    req,
    row_stride,
    col_stride,
    values_,
    indices,
    rows_of,
) -> None:
    """The sequence over ``rows`` rows of ``base``: values and int64 indices written into
    ``values_`` and ``indices`` ((rows, k), C-contiguous), launched one by one (the runner runs
    a prepared copy of the same steps). ``rows_of``: ``(extents, rows_kind)``, the int64 lengths
    (``rows`` of them) or CSR offsets (``rows + 1``) of this batch's rows, or a placeholder for
    a regular batch (never read)."""
    extents, rows_kind = rows_of
    k = req.k
    v = values(plan, info, req, rows)
    v.update({"in": base, "row_stride": row_stride, "col_stride": col_stride, "extents": extents})
    v["rows_kind"] = rows_kind
    # The scratch arrays, by name, from the family's table (the one plan() sums).
    table = _family.scratch(rows, req.n, k, plan.params)
    v.update(_common.allocate(xp, table, info.key_dtype))
    v["win_key"], v["win_idx"] = v["win_key"].reshape(rows, k), v["win_idx"].reshape(rows, k)
    v["out_vals"], v["out_idx"] = values_, indices
    # The launches by the family's steps (the list plan() reports), each with the arguments its
    # kernel declares; without order_shared, the ordering of the winners and the gather follow.
    target = "sim" if isinstance(base, np.ndarray) else "cuda"
    seq = _rows.multiblock_steps(rows, k, info.itemsize, plan.params, plan.block, v["by_index"])
    _rows.run_steps(xp, mod, info.cxx, seq, v, KERNELS, target)
