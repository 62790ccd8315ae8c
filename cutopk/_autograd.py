"""Gradients through :func:`cutopk.top_k` for torch tensors that require grad.

The values are the input's elements at the selected indices, so the gradient of the input is the
incoming gradient of the values scattered to those indices (zero elsewhere), as ``torch.topk``
does. Indices are not differentiable.
"""

from __future__ import annotations

import torch


def records(a) -> bool:
    """Whether autograd records an operation on ``a`` here."""
    return isinstance(a, torch.Tensor) and a.requires_grad and torch.is_grad_enabled()


def _valid(indices, grad_values):
    """``(where, flowing)`` for ``scatter_add_``: the indices as int64 (torch compares and
    scatters no unsigned type but uint8; every index dtype top_k takes fits), padding (index -1,
    with lengths) sent to position 0 with a zero gradient."""
    indices = indices.to(torch.int64)
    valid = indices >= 0
    where = torch.where(valid, indices, torch.zeros_like(indices))
    return where, torch.where(valid, grad_values, torch.zeros_like(grad_values))


class _TopK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, axis, select):
        values, indices = select(a.detach())
        ctx.save_for_backward(indices)
        ctx.shape, ctx.axis = a.shape, axis
        ctx.mark_non_differentiable(indices)
        return values, indices

    @staticmethod
    def backward(ctx, grad_values, _grad_indices):
        (indices,) = ctx.saved_tensors
        grad = grad_values.new_zeros(ctx.shape)
        return grad.scatter_add_(ctx.axis, *_valid(indices, grad_values)), None, None


def top_k(a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm, lengths=None):
    """``top_k`` with ``values`` differentiable with respect to ``a``."""
    from . import _api
    from . import top_k as select

    ax = _api.check_axis(axis, a.dim())

    def run(detached):
        return select(
            detached, k, axis=ax, mode=mode, sorted=sorted_, nan=nan, index_dtype=index_dtype,
            backend=backend, algorithm=algorithm, lengths=lengths,
        )  # fmt: skip

    return _TopK.apply(a, ax, run)
