"""Launch sequence of the multi-block radix select (kernels/multiblock.cu).

A fixed sequence of launches on the current stream, with no host synchronisation: mb_sample,
then one mb_pass per digit (ceil(key bits / 11)) whatever the data; a pass serves the rows on the
input and those on the candidate buffer in one launch, and passes after a row is finished return
at once, so the whole call can be captured in a CUDA graph.

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
# against it by tests/gpu/test_kernel_arguments.py). MB_INPUT there is _INPUT here.
SCALAR_TYPES = {
    "n": np.int64, "row_stride": np.int64, "col_stride": np.int64, "slice": np.int64,
    "cand_slice": np.int64, "cap": np.int64, "bucket_cap": np.int64, "rows_kind": np.int32,
    "largest": np.int32, "nan_first": np.int32, "k": np.int32, "rank": np.int32, "bins": np.int32,
    "by_index": np.int32,
}  # fmt: skip
_INPUT = ("in", "n", "row_stride", "col_stride", "extents", "rows_kind", "largest", "nan_first")
MB_SAMPLE = _kernel_source.params("mb_sample", (*_INPUT, "rank", "k", "state", "hist", "bins"), SCALAR_TYPES)
MB_PASS = _kernel_source.params(
    "mb_pass",
    (
        *_INPUT,
        *("slice", "cand_slice", "cap", "cand_key", "cand_idx", "bucket_cap", "bucket_key", "bucket_idx"),
        *("k", "by_index", "state", "hist", "bins", "win_key", "win_idx", "out_vals", "out_idx"),
    ),
    SCALAR_TYPES,
)

KERNELS = {d.kernel: d for d in (MB_SAMPLE, MB_PASS)}


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
    values,
    indices,
    rows_of,
) -> None:
    """The sequence over ``rows`` rows of ``base``: values and int64 indices written into
    ``values`` and ``indices`` ((rows, k), C-contiguous). ``rows_of``: ``(extents, rows_kind)``,
    the int64 lengths (``rows`` of them) or CSR offsets (``rows + 1``) of this batch's rows, or
    a placeholder for a regular batch (never read)."""
    extents, rows_kind = rows_of
    p = plan.params
    rank = p["sample_rank"]
    # Every value of the sequence by its parameter name; each launch takes the ones it declares.
    v = {
        "in": base, "n": req.n, "row_stride": row_stride, "col_stride": col_stride,
        "extents": extents, "rows_kind": rows_kind, "largest": req.largest, "nan_first": req.nan_first,
        "k": req.k, "slice": p["slice"], "cand_slice": p["cand_slice"], "cap": p["cap"],
        "bucket_cap": p["bucket_cap"], "bins": p["bins"], "rank": -1 if rank is None else rank,
        "by_index": req.order != "value", "out_vals": values, "out_idx": indices,
    }  # fmt: skip
    # The scratch arrays, by name, from the family's table (the one plan() sums).
    v.update(_common.allocate(xp, _family.scratch(rows, req.n, req.k, p), info.key_dtype))
    target = "sim" if isinstance(base, np.ndarray) else "cuda"
    # The launches by the family's steps (the list plan() reports), each with the arguments its
    # kernel declares.
    for step in _family.steps(rows, info.itemsize, p, plan.block):
        fn = mod.get_function(f"{step.kernel}<{info.cxx}>" if step.templated else step.kernel)
        _rows.launch(fn, step.grid, (step.block,), KERNELS[step.kernel].pack(v), step.shared_bytes, target)
