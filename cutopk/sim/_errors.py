"""The faults the simulator reports, one exception class per kind."""

from __future__ import annotations


class SimError(RuntimeError):
    """A kernel fault found by the CPU simulator (the message names kernel, block, thread, line)."""


class BarrierDivergenceError(SimError):
    """A ``__syncthreads`` not reached by every thread of the block."""


class WarpMaskError(SimError):
    """A warp-synchronous operation whose mask disagrees with the lanes that arrive."""


class DeadlockError(SimError):
    """No thread can make progress (including spin-waits that can never end)."""


class SharedMemoryOverrunError(SimError):
    """An access past the dynamic shared memory given at launch, or too much static shared memory."""


class KernelCrashError(SimError):
    """The kernel crashed (invalid address, assert, abort, arithmetic fault); the process survives."""


class KernelAssertionError(KernelCrashError):
    """An ``assert`` in the kernel failed (the message gives the expression)."""


class KernelHangError(DeadlockError):
    """A thread ran for ``watchdog_s`` seconds without reaching any synchronising call (an endless
    loop, or a spin on a volatile flag that no running thread will set)."""


class ClusterError(SimError):
    """Thread-block cluster misuse: a rank outside the cluster, a map of memory that is not shared,
    an access to the shared memory of a block that has exited."""


class AsyncCopyError(SimError):
    """Asynchronous copies (``kernels/async_copy.cuh``) misused: a thread that exits with copies
    pending (a block that ends with bulk copies not landed), a destination written while its copy
    is pending, a destination outside the block's shared memory, an address that is not 16-byte
    aligned, a source in shared memory, a bulk copy's size or arrival that breaks the protocol of
    its barrier."""


class LaunchArgumentError(SimError, TypeError):
    """A launch argument whose type or size does not match the kernel parameter."""


class ElementTypeError(LaunchArgumentError):
    """An array argument whose element type is not what the kernel's pointer parameter points to
    (a float64 array for ``const float*``, an int64 array for ``unsigned*``)."""


class SimUnavailableError(SimError):
    """The simulator cannot run on this machine (no C++ compiler or CUDA headers)."""


BY_CODE = {
    1: BarrierDivergenceError,
    2: WarpMaskError,
    3: DeadlockError,
    4: SharedMemoryOverrunError,
    5: KernelCrashError,
    6: SharedMemoryOverrunError,
    7: KernelAssertionError,
    8: KernelHangError,
    9: SimError,
    10: ClusterError,
    11: AsyncCopyError,
}
