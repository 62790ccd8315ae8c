"""cutopk's torch operators: importing this module registers them (``import cutopk`` does not).

``torch.ops.cutopk.top_k``, ``torch.ops.cutopk.segmented_top_k`` and
``torch.ops.cutopk.merge_top_k`` are what :func:`cutopk.top_k` and the irregular entry points
call on torch tensors (the first such call registers them too); import this module to call the
operators directly, or to have them registered before a graph that uses them is loaded
(``torch.export``, a saved FX graph).

>>> import torch, cutopk.torch_ops
>>> torch.ops.cutopk.top_k(torch.tensor([3.0, 1.0, 4.0]), 2)
(tensor([4., 3.]), tensor([2, 0]))
"""

from __future__ import annotations

from ._core.torch_op import top_k
from .irregular.torch_op import merge_top_k, segmented_top_k

__all__ = ["merge_top_k", "segmented_top_k", "top_k"]
