"""The CUDA code path with its kernel launches recorded instead of run, for counting a call's
launches, grids and allocations: the runner's launch observer (``cutopk/cuda/observe.py``),
entered through the core so that no prepared call outlives it; and :func:`failing_launches`,
an observer on the same hook whose every launch raises."""

import contextlib

import numpy as np

from cutopk._core.call import CACHE
from cutopk._core.call import observe_launches as recording_launches
from cutopk.cuda import launcher as _launcher


class _FailingModule:
    def __init__(self, error: Exception):
        self.error = error

    def get_function(self, name: str):
        def launch(*args, **kwargs):
            raise self.error

        return launch

    def built(self, name: str) -> bool:
        return True


class _Failing:
    """The launcher's hook (``launcher.OBSERVERS``): every kernel's launch raises ``error``."""

    def __init__(self, error: Exception):
        self.error = error

    def module(self, target: str, cxx: str) -> _FailingModule:
        return _FailingModule(self.error)

    def array_module(self, target: str):
        return np


@contextlib.contextmanager
def failing_launches(error: Exception):
    """Every kernel launch of the calls made inside raises ``error`` (the copies of the array
    library still run); no prepared call made inside outlives it, nor one made before is used."""
    observer = _Failing(error)
    CACHE.clear()
    with _launcher.emptied_caches():
        _launcher.OBSERVERS.append(observer)
        try:
            yield
        finally:
            _launcher.OBSERVERS.remove(observer)
            CACHE.clear()


__all__ = ["failing_launches", "recording_launches"]
