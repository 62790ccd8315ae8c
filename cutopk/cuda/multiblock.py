"""Launch sequence of the multi-block radix select (kernels/multiblock.cu).

A fixed sequence of launches on the current stream, with no host synchronisation: sample_threshold,
then one digit_pass per digit (ceil(key bits / 11)) whatever the data; a pass serves the rows on the
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

# The launches of the sequence by the kernels' C parameter names (kernels/multiblock.cu; checked
# against it by tests/gpu/test_kernel_arguments.py). MB_INPUT there is _INPUT here.
SCALAR_TYPES = {
    "n": np.int64, "row_stride": np.int64, "col_stride": np.int64, "slice": np.int64,
    "cand_slice": np.int64, "cap": np.int64, "bucket_cap": np.int64, "rows_kind": np.int32,
    "largest": np.int32, "nan_first": np.int32, "k": np.int32, "rank": np.int32, "bins": np.int32,
    "by_index": np.int32,
}  # fmt: skip
_INPUT = ("in", "n", "row_stride", "col_stride", "extents", "rows_kind", "largest", "nan_first")
MB_SAMPLE = _kernel_source.params(
    "sample_threshold", (*_INPUT, "rank", "k", "state", "hist", "bins"), SCALAR_TYPES
)
MB_PASS = _kernel_source.params(
    "digit_pass",
    (
        *_INPUT,
        *("slice", "cand_slice", "cap", "cand_key", "cand_idx", "bucket_cap", "bucket_key", "bucket_idx"),
        *("k", "by_index", "state", "hist", "bins", "win_key", "win_idx", "out_vals", "out_idx"),
    ),
    SCALAR_TYPES,
)

KERNELS = {d.kernel: d for d in (MB_SAMPLE, MB_PASS)}


def values(plan: _dispatch.KernelPlan, info, req, rows: int) -> dict:
    """Every scalar of the sequence over ``rows`` rows, by its parameter name (each launch takes
    the ones it declares); the arrays are the runner's (cutopk/cuda/runner.py prepares the
    launches with these once per call signature, from the family's steps and scratch table)."""
    p = plan.params
    rank = p["sample_rank"]
    return {
        "rows": rows, "n": req.n, "largest": req.largest, "nan_first": req.nan_first, "k": req.k,
        "slice": p["slice"], "cand_slice": p["cand_slice"], "cap": p["cap"],
        "bucket_cap": p["bucket_cap"], "bins": p["bins"], "rank": -1 if rank is None else rank,
        "by_index": req.order != "value",
    }  # fmt: skip
