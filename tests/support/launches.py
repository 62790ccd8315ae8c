"""The CUDA code path with its kernel launches recorded instead of run, for counting a call's
launches, grids and allocations: the runner's launch observer (``cutopk/cuda/observe.py``),
entered through the core so that no prepared call outlives it."""

from cutopk._core.call import observe_launches as recording_launches

__all__ = ["recording_launches"]
