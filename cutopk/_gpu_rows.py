"""Launch helpers of the row kernels (bitonic, thread_row, the ordering and transposing kernels):
shared memory beyond 48 KB, the ordering of K winners too many for shared memory, and the tiled
transpose of rows along an outer axis. Shared by the CUDA and simulator targets, like ``_gpu``.
"""

from __future__ import annotations

from . import _dispatch


def launch(fn, grid, block, args, shared_bytes: int, target: str) -> None:
    """Launch ``fn`` with ``shared_bytes`` of dynamic shared memory, opting the kernel in first
    when that is more than a block gets by default (48 KB less its static shared memory).

    The kernel is opted in to the device's whole limit, not to this launch's size, so threads
    launching the same kernel with different sizes never lower each other's limit.
    """
    if shared_bytes > _dispatch.SHARED_BYTES - _dispatch.STATIC_SHARED_RESERVE:
        from . import _gpu

        limit = _gpu._device_facts(target, _gpu._device_id(target)).shared_bytes
        if shared_bytes > limit:
            raise ValueError(
                f"{fn!r}: {shared_bytes} bytes of shared memory asked, the device allows {limit}"
            )
        fn.max_dynamic_shared_size_bytes = limit
    fn(grid, block, args, shared_mem=shared_bytes)
