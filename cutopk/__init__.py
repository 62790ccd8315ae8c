"""cutopk: exact top-K for GPU (CuPy) and CPU (NumPy) arrays.

>>> import numpy as np, cutopk
>>> cutopk.top_k(np.array([3, 1, 4, 1, 5]), 2)
TopK(values=array([5, 4]), indices=array([4, 2]))

Re-exports only: the functions live in the stage of a call they belong to
(docs/architecture.md).
"""

from __future__ import annotations

from types import ModuleType

from ._core.entry import algorithms, top_k
from ._core.result import TopK
from ._request.plan import Launch, Plan
from ._version import __version__
from .cuda.workspace import release_workspace, workspace_info
from .irregular.entry import merge_top_k, plan, segmented_top_k
from .numpy.threads import get_num_threads, num_threads, set_num_threads

__all__ = [
    "Launch",
    "Plan",
    "TopK",
    "__version__",
    "algorithms",
    "get_num_threads",
    "merge_top_k",
    "num_threads",
    "plan",
    "release_workspace",
    "segmented_top_k",
    "set_num_threads",
    "top_k",
    "workspace_info",
]

_SUBMODULES = ("onnx", "openvino", "directml", "dask", "torch_ops")


def __getattr__(name: str) -> ModuleType:
    # The front ends and the Dask integration load on first use: importing cutopk stays cheap
    # and needs no Dask.
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
