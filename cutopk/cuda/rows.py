"""Launch helpers shared by the launches: shared memory beyond 48 KB (:func:`opt_in`), the
descriptors of the ordering, transposing and sort kernels; a call's steps are prepared and run
by cutopk/cuda/runner.py.
Shared by the CUDA and simulator targets, like ``launcher``.
"""

from __future__ import annotations

import numpy as np

from . import device as _device
from . import dispatch as _dispatch
from . import kernel_source as _kernel_source
from .families import order as _order
from .families import sort as _sort
from .families import transpose as _transpose

# The launches of the ordering, transposing and sort kernels by the kernels' C parameter names
# (kernels/order.cu, transpose.cu, sort.cu; the names are the family modules' ARGUMENTS, checked
# against the kernels by tests/gpu/test_kernel_arguments.py).
SCALAR_TYPES = {
    "rows": np.int64, "len": np.int64, "width": np.int64, "n": np.int64, "row_stride": np.int64,
    "col_stride": np.int64, "with_idx": np.int32, "tile": np.int32, "by_index": np.int32,
    "k": np.int32, "rows_kind": np.int32, "largest": np.int32, "nan_first": np.int32,
}  # fmt: skip
ORDER_TILES = _kernel_source.params("order_tiles", _order.ARGUMENTS["order_tiles"], SCALAR_TYPES)
ORDER_MERGE = _kernel_source.params("order_merge", _order.ARGUMENTS["order_merge"], SCALAR_TYPES)
TRANSPOSE_ROWS = _kernel_source.params("transpose_rows", _transpose.ARGUMENTS["transpose_rows"], SCALAR_TYPES)
GATHER_VALUES = _kernel_source.params("gather_values", _sort.ARGUMENTS["gather_values"], SCALAR_TYPES)
COMPUTE_KEYS = _kernel_source.params("compute_keys", _sort.ARGUMENTS["compute_keys"], SCALAR_TYPES)


def opt_in(fn, shared_bytes: int, target: str) -> None:
    """Let ``fn`` take ``shared_bytes`` of dynamic shared memory: beyond what a block gets by
    default (48 KB less its static shared memory) the kernel must opt in first.

    The kernel is opted in to the device's whole limit, not to this launch's size, so threads
    launching the same kernel with different sizes never lower each other's limit."""
    if shared_bytes > _dispatch.SHARED_BYTES - _dispatch.STATIC_SHARED_RESERVE:
        limit = _device.device_facts(target, _device.device_id(target)).shared_bytes
        if shared_bytes > limit:
            raise ValueError(
                f"a launch asks for {shared_bytes} bytes of shared memory, the device allows {limit}"
            )
        fn.max_dynamic_shared_size_bytes = limit


# The descriptors of the kernels these steps launch besides a family's own (by kernel name).
DESCRIPTORS = {d.kernel: d for d in (ORDER_TILES, ORDER_MERGE, TRANSPOSE_ROWS, GATHER_VALUES, COMPUTE_KEYS)}
