"""``torch.func`` transforms (``grad``, ``vjp``, ``jacrev``, ``jacfwd``, ``hessian``, ``vmap``) and
forward-mode AD through :func:`cutopk.top_k`, :func:`cutopk.segmented_top_k` and
:func:`cutopk.merge_top_k`.

The operators' autograd formulas (``register_autograd``) are torch's custom-op autograd, which
``torch.func`` refuses ("must override the setup_context staticmethod") and which has no
forward-mode formula: ``jacfwd`` and a dual tensor got a zero derivative, silently. So under a
transform, or while a forward-AD level is open, the public functions run the operator on the
detached input for the indices only, and read the values again from the input at those indices
with ``torch.gather``, which every transform and both AD modes differentiate: the values are
the input's own elements (bit for bit the operator's), their derivative is the scatter of
:mod:`cutopk._core.autograd`, and padding (index -1) is the constant 0. The operators called
directly (``torch.ops.cutopk.*``) keep torch's limits.

Imports torch: loaded with the operators only.
"""

from __future__ import annotations

import torch
from torch.autograd import forward_ad


def forward_ad_on() -> bool:
    """Whether a forward-mode AD level is open (``forward_ad.dual_level()``): a dual tensor
    looks like a plain one, so the level is what tells."""
    return getattr(forward_ad, "_current_level", -1) >= 0


def active(*tensors) -> bool:
    """Whether the values must be gathered (module docstring): a ``torch.func`` transform wraps
    one of ``tensors`` (None and other values are passed over), or forward-mode AD is on. Never
    under compilation (TorchDynamo traces the operator, as before)."""
    if torch.compiler.is_compiling():
        return False
    return forward_ad_on() or any(wraps(t) for t in tensors)


# functorch's own test of a wrapped tensor (a private name: a torch without it has no transforms
# that wrap, and every tensor is a plain one).
_is_wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)


def wraps(value) -> bool:
    """Whether ``value`` (any argument) is a tensor a ``torch.func`` transform wraps."""
    return _is_wrapped is not None and isinstance(value, torch.Tensor) and bool(_is_wrapped(value))


def _padded_gather(source, axis: int, positions, real):
    """``source`` read along ``axis`` at ``positions`` where ``real``, and 0 elsewhere."""
    axis %= source.dim()
    if source.shape[axis] == 0:  # no element to read: every position is padding
        source = torch.cat(
            [source, source.new_zeros((*source.shape[:axis], 1, *source.shape[axis + 1 :]))], axis
        )
    read = source.gather(axis, torch.where(real, positions, torch.zeros_like(positions)))
    return torch.where(real, read, torch.zeros_like(read))


def top_k_values(a, axis: int, indices):
    """The values of ``top_k`` at ``indices`` along the checked ``axis``, read from ``a``."""
    indices = indices.to(torch.int64)
    return _padded_gather(a, axis, indices, indices >= 0)


def segmented_values(data, offsets, indices):
    """The values of ``segmented_top_k``: ``data`` at each segment's start plus its index."""
    indices = indices.to(torch.int64)
    starts = offsets[:-1].to(device=data.device, dtype=torch.int64)
    positions = (indices + starts[:, None]).reshape(-1)
    real = (indices >= 0).reshape(-1)
    return _padded_gather(data, 0, positions, real).reshape(indices.shape)


def merged_values(values, out_indices, where):
    """The values of ``merge_top_k``: the parts' values, side by side along the last axis, at
    each winner's place ``where``."""
    return _padded_gather(
        torch.cat(list(values), -1), -1, where.to(torch.int64), out_indices.to(torch.int64) >= 0
    )
