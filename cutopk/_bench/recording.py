"""The CUDA code path with its kernel launches recorded instead of run: for timing the host path
(``benchmarks/host_overhead.py``) and for counting launches and allocations in tests.

The simulator target (NumPy arrays) runs every step of a call for real (checks, the call cache,
layout, allocations, launch arguments) up to the launch itself, which only counts.
"""

from __future__ import annotations

import contextlib
from unittest import mock

import numpy as np

from .._core import call as _call
from ..cuda import launcher as _launcher
from ..cuda import workspace as _workspace


class Recorder:
    """What a call did: ``launches`` (the kernel names, in order), ``shapes`` (each launch's
    ``(kernel, grid, block, shared bytes)``), ``allocations`` (arrays the launcher allocated),
    ``allocated`` (their sizes in bytes, in order) and ``copies`` (the array library's copies)."""

    def __init__(self):
        self.launches: list[str] = []
        self.shapes: list[tuple] = []
        self.allocations = 0
        self.allocated: list[int] = []
        self.copies = 0


class _RecordingModule:
    """Stands in for a compiled module: a launch only records the kernel's name."""

    def __init__(self, recorder: Recorder):
        self.recorder = recorder

    def get_function(self, name: str):
        # As cheap as a record can be: its cost is timed as the launch's (benchmarks/host_overhead.py).
        launches, shapes = self.recorder.launches.append, self.recorder.shapes.append

        def launch(grid, block, args, shared_mem=0, **kwargs):
            launches(name)
            shapes((name, tuple(grid), tuple(block), shared_mem))

        return launch

    def built(self, name: str) -> bool:
        return True  # nothing to compile


class _RecordingNumpy:
    """NumPy as the launcher's array module: the arrays it allocates counted (unless
    ``count_allocations`` is False), and its copies (an array-library launch on a GPU) counted in
    ``Recorder.copies`` instead of run, like the kernels."""

    ALLOCATORS = ("empty", "zeros", "empty_like", "zeros_like")

    def __init__(self, recorder: Recorder, count_allocations: bool = True):
        self.recorder = recorder
        self.count_allocations = count_allocations
        if not count_allocations:  # timed: found without __getattr__, at NumPy's own cost
            self.empty, self.moveaxis, self.lib = np.empty, np.moveaxis, np.lib

    def __getattr__(self, name):
        attr = getattr(np, name)
        if name not in self.ALLOCATORS or not self.count_allocations:
            return attr

        def counted(*args, **kwargs):
            self.recorder.allocations += 1
            arr = attr(*args, **kwargs)
            self.recorder.allocated.append(arr.nbytes)
            return arr

        return counted

    def copyto(self, dst, src, casting="same_kind", where=True):
        self.recorder.copies += 1

    def ascontiguousarray(self, a):
        """A copy where one is needed (counted), left unwritten: nothing reads it, and copying
        the largest layouts on the CPU would time NumPy, not the host path."""
        if a.flags.c_contiguous:
            return np.ascontiguousarray(a)
        if self.count_allocations:
            self.recorder.allocations += 1
            self.recorder.allocated.append(a.nbytes)
        return np.empty(a.shape, a.dtype)


@contextlib.contextmanager
def recording_launches(count_allocations: bool = True):
    """The simulator target with recording kernels and (unless ``count_allocations`` is False,
    for timing without the counting's own cost) counted allocations; yields the
    :class:`Recorder`. The call cache, the module cache and the workspaces start empty and are
    left empty."""
    recorder = Recorder()
    xp = _RecordingNumpy(recorder, count_allocations)
    with (
        mock.patch.object(_launcher, "_build_module", lambda target, cxx: _RecordingModule(recorder)),
        mock.patch.object(_launcher, "array_module", lambda target: xp if target == "sim" else np),
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
