"""Gradients through :func:`cutopk.top_k`, :func:`cutopk.segmented_top_k` and
:func:`cutopk.merge_top_k` for torch tensors that require grad.

The values are input elements at the selected positions, so the gradient of the input is the
incoming gradient of the values scattered to those positions (zero elsewhere), as ``torch.topk``
does: along the axis for ``top_k``, at ``offsets[s] + index`` for a segment, and at the winner's
place in its part for a merge (every part's values get their share). Padding (index -1) is a
constant and passes no gradient. Indices are not differentiable.
"""

from __future__ import annotations

import numpy as np
import torch

from .._interop import check_untransformed


def records(a) -> bool:
    """Whether autograd records an operation on ``a`` here."""
    return isinstance(a, torch.Tensor) and a.requires_grad and torch.is_grad_enabled()


def valid_where(indices, grad_values):
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
        return scatter_grad(ctx.shape, ctx.axis, indices, grad_values), None, None


def scatter_grad(shape, axis: int, indices, grad_values):
    """The input's gradient: ``grad_values`` scattered along ``axis`` to ``indices`` in zeros of
    ``shape`` (padding passes none). Out of place and in torch ops only, so that the compiler
    traces it too (the backward of ``torch.ops.cutopk.top_k``)."""
    return grad_values.new_zeros(shape).scatter_add(axis, *valid_where(indices, grad_values))


def top_k(a, axis, select):
    """``top_k`` with ``values`` differentiable with respect to ``a``: ``select(detached, axis)``
    selects from the detached input along the checked axis."""
    from .._request import checks as _checks

    check_untransformed(a, "a")
    ax = _checks.check_axis(axis, a.dim())
    return _TopK.apply(a, ax, lambda detached: select(detached, ax))


class _Segmented(torch.autograd.Function):
    @staticmethod
    def forward(ctx, data, starts_of, select):
        values, indices = select(data.detach())
        starts = starts_of(data.shape[0])
        if not isinstance(starts, torch.Tensor):  # host offsets, checked on the host
            starts = torch.as_tensor(starts, device=data.device)
        ctx.save_for_backward(indices, starts)
        ctx.n = data.shape[0]
        ctx.mark_non_differentiable(indices)
        return values, indices

    @staticmethod
    def backward(ctx, grad_values, _grad_indices):
        indices, starts = ctx.saved_tensors
        where, flowing = valid_where(indices, grad_values)
        # Positions in data; padding (where 0, zero gradient) stays at 0, inside data when n > 0.
        where = torch.where(indices.to(torch.int64) >= 0, where + starts[:, None], torch.zeros_like(where))
        grad = grad_values.new_zeros(ctx.n)
        if ctx.n:
            grad.scatter_add_(0, where.reshape(-1), flowing.reshape(-1))
        return grad, None, None


def segmented_top_k(data, select, starts_of):
    """``segmented_top_k`` with ``values`` differentiable with respect to ``data``: ``select``
    selects from the detached data, ``starts_of(n)`` gives each segment's start in it."""
    check_untransformed(data, "data")
    return _Segmented.apply(data, starts_of, select)


class _Merge(torch.autograd.Function):
    @staticmethod
    def forward(ctx, select, *values):
        (out_values, out_indices), where = select([_detached(v) for v in values])
        ctx.save_for_backward(out_indices, where)
        ctx.widths = [v.shape[-1] for v in values]
        ctx.shape = (*values[0].shape[:-1], sum(ctx.widths))
        ctx.mark_non_differentiable(out_indices)
        return out_values, out_indices

    @staticmethod
    def backward(ctx, grad_values, _grad_indices):
        out_indices, where = ctx.saved_tensors
        grad = merge_grad(ctx.shape, out_indices, where, grad_values)
        return None, *torch.split(grad, ctx.widths, dim=-1)


def merge_grad(shape, out_indices, where, grad_values):
    """The gradient of the parts' values laid end to end along the last axis (``shape``): each
    winner's ``grad_values`` scattered to its place ``where`` in zeros. Out of place and in torch
    ops only, so that the compiler traces it too (the backward of ``torch.ops.cutopk.merge_top_k``)."""
    # Padding winners (index -1) are the constant 0: no gradient reaches their part.
    valid = out_indices.to(torch.int64) >= 0
    where = torch.where(valid, where, torch.zeros_like(where))
    flowing = torch.where(valid, grad_values, torch.zeros_like(grad_values))
    grad = grad_values.new_zeros(shape)
    if grad.numel():
        grad = grad.scatter_add(-1, where, flowing)
    return grad


def merge_top_k(select, values):
    """``merge_top_k`` with ``values`` differentiable with respect to every part's values:
    ``select(detached)`` merges the detached values and gives the winners' places in their parts.
    A part's values that are no tensor (NumPy beside a CPU tensor, CuPy beside a CUDA one, as the
    call without grad takes them) join as a tensor on their memory, a constant to autograd, so
    the result is tensors whichever part comes first."""
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            check_untransformed(v, f"parts[{i}].values")
    return _Merge.apply(select, *(_as_tensor(v) for v in values))


def _as_tensor(values):
    """``values`` as a tensor sharing its memory (a read-only NumPy array copied: torch warns of
    one), or as it is where torch cannot take it (a byte-swapped array, say): the merge's checks
    then refuse it as without grad."""
    if isinstance(values, torch.Tensor):
        return values
    try:
        if not isinstance(values, np.ndarray):
            return torch.from_dlpack(values)
        if not values.flags.writeable:
            values = values.copy()
        if values.dtype.name == "bfloat16":  # ml_dtypes': torch takes its bits
            return torch.from_numpy(values.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(values)
    except (TypeError, ValueError, RuntimeError, BufferError, AttributeError):
        return values


def _detached(values):
    return values.detach() if isinstance(values, torch.Tensor) else values
