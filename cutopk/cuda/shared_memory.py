"""Dynamic shared memory beyond 48 KB: a kernel opts in before a launch takes it (:func:`opt_in`).
Used by the runner (cutopk/cuda/runner.py) for every launch, the merge's included, on the CUDA
and simulator targets alike.
"""

from __future__ import annotations

from . import device as _device
from . import dispatch as _dispatch


def check(shared_bytes: int, target: str) -> None:
    """ValueError where ``shared_bytes`` exceed what a block of the device may take (checked when a
    call is planned; :func:`opt_in` at its first launch)."""
    if shared_bytes > _dispatch.SHARED_BYTES - _dispatch.STATIC_SHARED_RESERVE:
        limit = _device.device_facts(target, _device.device_id(target)).shared_bytes
        if shared_bytes > limit:
            raise ValueError(
                f"a launch asks for {shared_bytes} bytes of shared memory, the device allows {limit}"
            )


def opt_in(fn, shared_bytes: int, target: str) -> None:
    """Let ``fn`` take ``shared_bytes`` of dynamic shared memory: beyond what a block gets by
    default (48 KB less its static shared memory) the kernel must opt in first.

    The kernel is opted in to the device's whole limit, not to this launch's size, so threads
    launching the same kernel with different sizes never lower each other's limit."""
    if shared_bytes > _dispatch.SHARED_BYTES - _dispatch.STATIC_SHARED_RESERVE:
        check(shared_bytes, target)
        fn.max_dynamic_shared_size_bytes = _device.device_facts(
            target, _device.device_id(target)
        ).shared_bytes
