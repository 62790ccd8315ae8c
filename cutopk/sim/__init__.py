"""A CPU simulator for CUDA kernels: the project's ``kernels/*.cu`` compiled with the host C++
compiler and run with every CUDA thread as a fiber, behind the interface of ``cupy.RawModule``.

``cutopk.top_k(x, k, backend="sim")`` runs the same dispatcher, launches and kernels as
``backend="cuda"``, on NumPy arrays. Faults in a kernel become exceptions (subclasses of
:class:`SimError`) naming the kernel, block, thread and source line.
"""

from ._arguments import Parameter
from ._errors import (
    AsyncCopyError,
    BarrierDivergenceError,
    ClusterError,
    DeadlockError,
    ElementTypeError,
    KernelAssertionError,
    KernelCrashError,
    KernelHangError,
    LaunchArgumentError,
    SharedMemoryOverrunError,
    SimError,
    SimUnavailableError,
    WarpMaskError,
)
from ._module import Function, RawModule
from ._toolchain import unavailable_reason
from ._traffic import LaunchTraffic, counting_traffic

__all__ = [
    "AsyncCopyError",
    "BarrierDivergenceError",
    "ClusterError",
    "DeadlockError",
    "ElementTypeError",
    "Function",
    "KernelAssertionError",
    "KernelCrashError",
    "KernelHangError",
    "LaunchArgumentError",
    "LaunchTraffic",
    "Parameter",
    "RawModule",
    "SharedMemoryOverrunError",
    "SimError",
    "SimUnavailableError",
    "WarpMaskError",
    "counting_traffic",
    "is_available",
    "unavailable_reason",
]


def is_available() -> bool:
    """Whether the simulator can run here (x86-64, a C++ compiler, CUDA's headers)."""
    return unavailable_reason() is None
