"""Launches observed instead of run: the seam through which tests count a call's kernel launches,
grids and allocations, and ``benchmarks/host_overhead.py`` times the host path without a GPU.

While :func:`observe_launches` is active, the launcher's modules are recording modules (a launch
records the kernel's name and geometry and runs nothing) and the simulator target's array module
is NumPy with its allocations and copies counted: every step of a call on NumPy arrays runs for
real (checks, layout, allocations, launch arguments) up to the launch itself. The launcher asks
its one hook (``launcher.OBSERVERS``) and knows nothing of recording. Use it through
``cutopk._core.call.observe_launches``, which also empties the core's cache of prepared calls
(whose launches are resolved against the modules of their first call).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from . import launcher as _launcher
from . import workspace as _workspace


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


class _Observer:
    """The launcher's hook: a recording module for every element type, and the simulator
    target's counted NumPy (NumPy for the other target)."""

    def __init__(self, recorder: Recorder, count_allocations: bool):
        self.recorder = recorder
        self.xp = _RecordingNumpy(recorder, count_allocations)

    def module(self, target: str, cxx: str) -> _RecordingModule:
        return _RecordingModule(self.recorder)

    def array_module(self, target: str):
        return self.xp if target == "sim" else np


@contextlib.contextmanager
def observe_launches(count_allocations: bool = True) -> Iterator[Recorder]:
    """The launcher's kernels recorded instead of run, and (unless ``count_allocations`` is False,
    for timing without the counting's own cost) the simulator target's allocations counted;
    yields the :class:`Recorder`. The launcher's module cache and the workspaces start empty
    and are left as they were (the modules) or empty (the workspaces)."""
    recorder = Recorder()
    observer = _Observer(recorder, count_allocations)
    with _launcher.emptied_caches():
        _workspace.release_workspace()
        _launcher.OBSERVERS.append(observer)
        try:
            yield recorder
        finally:
            _launcher.OBSERVERS.remove(observer)
            _workspace.release_workspace()
