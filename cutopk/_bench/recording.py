"""The CUDA code path with its kernel launches recorded instead of run: for timing the host path
(``benchmarks/host_overhead.py``) and for counting launches and allocations in tests.

The simulator target (NumPy arrays) runs every step of a call for real (checks, the plan cache,
layout, allocations, launch arguments) up to the launch itself, which only counts.
"""

from __future__ import annotations

import contextlib
from unittest import mock

import numpy as np

from .._core import call as _call
from ..cuda import launcher as _launcher
from ..cuda import rows as _rows
from ..cuda import workspace as _workspace


class Recorder:
    """What a call did: ``launches`` (the kernel names, in order), ``shapes`` (each launch's
    ``(kernel, grid, block, shared bytes)``), ``allocations`` (arrays the launcher allocated) and
    ``allocated`` (their sizes in bytes, in order)."""

    def __init__(self):
        self.launches: list[str] = []
        self.shapes: list[tuple] = []
        self.allocations = 0
        self.allocated: list[int] = []


class _RecordingModule:
    """Stands in for a compiled module: a launch only records the kernel's name."""

    def __init__(self, recorder: Recorder):
        self.recorder = recorder

    def get_function(self, name: str):
        def launch(grid, block, args, shared_mem=0, **kwargs):
            self.recorder.launches.append(name)
            self.recorder.shapes.append((name, tuple(grid), tuple(block), shared_mem))

        return launch


class _CountingNumpy:
    """NumPy as the launcher's array module, counting the arrays it allocates."""

    ALLOCATORS = ("empty", "zeros", "empty_like", "zeros_like")

    def __init__(self, recorder: Recorder):
        self.recorder = recorder

    def __getattr__(self, name):
        attr = getattr(np, name)
        if name not in self.ALLOCATORS:
            return attr

        def counted(*args, **kwargs):
            self.recorder.allocations += 1
            arr = attr(*args, **kwargs)
            self.recorder.allocated.append(arr.nbytes)
            return arr

        return counted

    def ascontiguousarray(self, a):
        """A copy where one is needed (counted), left unwritten: nothing reads it, and copying
        the largest layouts on the CPU would time NumPy, not the host path."""
        if a.flags.c_contiguous:
            return np.ascontiguousarray(a)
        self.recorder.allocations += 1
        self.recorder.allocated.append(a.nbytes)
        return np.empty(a.shape, a.dtype)


@contextlib.contextmanager
def recording_launches(count_allocations: bool = True):
    """The simulator target with recording kernels and (unless ``count_allocations`` is False,
    for timing without the counting's own cost) counted allocations; yields the
    :class:`Recorder`. The plan cache, the module cache and the workspaces start empty and are
    left empty."""
    recorder = Recorder()
    xp = _CountingNumpy(recorder) if count_allocations else np
    with (
        mock.patch.object(_launcher, "_build_module", lambda target, cxx: _RecordingModule(recorder)),
        mock.patch.object(_launcher, "array_module", lambda target: xp if target == "sim" else np),
        # The ordering and transposing helpers take NumPy for simulator arrays: counted too.
        mock.patch.object(_rows, "np", xp),
        mock.patch.dict(_launcher._MODULES, clear=True),
        mock.patch.dict(_launcher._PLACEHOLDERS, clear=True),
    ):
        _call.CACHE.clear()
        _workspace.release_workspace()
        try:
            yield recorder
        finally:
            _call.CACHE.clear()
            _workspace.release_workspace()
