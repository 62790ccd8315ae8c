"""``torch.ops.cutopk.segmented_top_k`` and ``torch.ops.cutopk.merge_top_k``: the irregular entry
points as registered torch operators, for the reasons :mod:`cutopk._core.torch_op` gives (one
opaque node to ``torch.compile``, a fake implementation for shapes, an autograd formula).

Both have outputs whose shapes follow from the inputs' shapes alone, so a schema fits:

- ``segmented_top_k(data, offsets, k, ..., max_length=None)``: ``(S, k)`` with ``S =
  offsets.shape[0] - 1`` (``max_length`` last, with a default: graphs saved before it came still load).
  ``offsets`` is a tensor (a list or NumPy array is made one first); it is read on the host, so
  on CUDA a call with device offsets waits for them (no CUDA-graph capture of that call).
- ``merge_top_k(values, indices, k, ...)``: the parts as two tensor lists, ``(*batch, k)`` out,
  plus a third output the public function drops: each winner's position along the parts'
  concatenated last axis, which the backward needs to find the winner's part.

Imported on the first call with torch tensors only (``import cutopk`` imports no torch).
"""

from __future__ import annotations

import numpy as np
import torch

from .._core import torch_op as _top_k_op
from .._core import transforms
from .._core.autograd import merge_grad, valid_where
from .._request import checks as _checks
from .._request import dtypes as _dtypes
from . import merge, segmented

_ORDER_NAMES = _top_k_op.ORDER_NAMES


def _offsets_tensor(offsets):
    if isinstance(offsets, torch.Tensor):
        return offsets
    if type(offsets) is np.ndarray:  # not a masked array: from_numpy would drop its mask
        offsets = _top_k_op.host_tensor(offsets)
        return offsets if isinstance(offsets, torch.Tensor) else None
    if isinstance(offsets, (list, tuple)) and offsets and all(type(o) is int for o in offsets):
        return torch.tensor(offsets, dtype=torch.int64)
    return None  # an empty list, a mixed one, a masked array: the operator-free path reports it


def call_segmented(data, offsets, k, mode, sorted_, nan, index_dtype, backend, algorithm, max_length=None):
    """``(values, indices)`` from the operator, or None when an argument cannot cross its schema
    (the operator-free path then raises the usual error), or for an ordinary eager call
    (:func:`cutopk._core.torch_op.dispatcher_skippable`)."""
    if _top_k_op.dispatcher_skippable(data) and not transforms.wraps(offsets):
        return None
    if max_length is not None:  # an int crosses (a NumPy one made an int); a bool, a float do not
        if isinstance(max_length, (bool, np.bool_)) or not isinstance(max_length, (int, np.integer)):
            return None
        max_length = int(max_length)
    order = _checks.ORDERS.get(sorted_) if isinstance(sorted_, (bool, str)) else None
    dtype = _top_k_op._index_dtype(index_dtype)
    offsets = _offsets_tensor(offsets)
    if (
        order is None
        or dtype is None
        or offsets is None
        or not all(isinstance(s, str) for s in (mode, nan, backend, algorithm))
    ):
        return None
    k = _top_k_op._k_of(k)
    if transforms.active(data, offsets):  # the indices from the operator, the values gathered
        _, indices = segmented_top_k(
            data.detach(), offsets, k, mode, order, nan, dtype, backend, algorithm, max_length
        )
        return transforms.segmented_values(data, offsets, indices), indices
    return segmented_top_k(data, offsets, k, mode, order, nan, dtype, backend, algorithm, max_length)


@torch.library.custom_op("cutopk::segmented_top_k", mutates_args=())
def segmented_top_k(
    data: torch.Tensor,
    offsets: torch.Tensor,
    k: int,
    mode: str = "largest",
    sorted: str = "value",
    nan: str = "last",
    index_dtype: torch.dtype = torch.int64,
    backend: str = "auto",
    algorithm: str = "auto",
    max_length: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`cutopk.segmented_top_k` (``sorted`` is ``"value"``, ``"index"`` or ``"none"``).
    ``max_length`` is the schema's last argument, with a default: a graph saved before it was
    added calls the operator as ever."""
    order = _top_k_op.order_of(sorted)
    values, indices = segmented.segmented_top_k(
        data, offsets, k, mode, order, nan, index_dtype, backend, algorithm, max_length
    )
    return values, indices


@segmented_top_k.register_fake
@_top_k_op.eager_errors
def _(data, offsets, k, mode="largest", sorted="value", nan="last", index_dtype=torch.int64,
      backend="auto", algorithm="auto", max_length=None):  # fmt: skip
    _dtypes.check_dtype(data.dtype, "data")
    if data.dim() != 1:
        raise ValueError(f"data: expected a 1-D array, got shape {tuple(data.shape)}")
    if offsets.dtype.is_floating_point or offsets.dtype.is_complex or offsets.dtype == torch.bool:
        raise TypeError(f"offsets: expected an integer array, got dtype {offsets.dtype}")
    if offsets.dim() != 1:
        raise ValueError(
            f"offsets: expected a 1-D array of S + 1 positions, got shape {tuple(offsets.shape)}"
        )
    torch._check_with(
        ValueError,
        offsets.shape[0] >= 1,
        lambda: "offsets: expected S + 1 >= 1 positions, got an empty array",
    )
    for name, value, choices in (("mode", mode, _checks.MODES), ("sorted", sorted, _ORDER_NAMES),
                                 ("nan", nan, _checks.NAN_POLICIES), ("backend", backend, _checks.BACKENDS)):  # fmt: skip
        _checks.check_choice(name, value, choices)
    torch._check_with(ValueError, k >= 0, lambda: f"k: expected k >= 0, got k={k}")
    segmented.check_max_length(max_length)
    shape = (offsets.shape[0] - 1, k)
    return data.new_empty(shape), data.new_empty(shape, dtype=index_dtype)


def _segmented_setup(ctx, inputs, output):
    data, offsets = inputs[0], inputs[1]
    ctx.n = data.shape[0]
    ctx.save_for_backward(output[1], offsets)


def _segmented_backward(ctx, grad_values, _grad_indices):
    indices, offsets = ctx.saved_tensors
    where, flowing = valid_where(indices, grad_values)
    starts = offsets[:-1].to(device=grad_values.device, dtype=torch.int64)
    # Positions in data; padding (where 0, zero gradient) stays at 0, inside data when n > 0.
    where = torch.where(indices.to(torch.int64) >= 0, where + starts[:, None], torch.zeros_like(where))
    grad = grad_values.new_zeros(ctx.n)
    if ctx.n:
        grad = grad.scatter_add(0, where.reshape(-1), flowing.reshape(-1))
    # One entry per input given (the dispatcher may drop trailing arguments left at their defaults).
    return grad, *([None] * (len(ctx.needs_input_grad) - 1))


segmented_top_k.register_autograd(_segmented_backward, setup_context=_segmented_setup)


def _sample(t, dim, b: int):
    """Sample ``b`` of a tensor batched along ``dim`` by torch.vmap (None: not batched)."""
    return t if dim is None else t.select(dim, b)


@segmented_top_k.register_vmap
def _segmented_vmap(info, in_dims, data, offsets, *args, **kwargs):
    # A loop over the samples (each has its own segments of its own data): torch's fallback
    # does the same, with a warning for every call.
    rows = [
        segmented_top_k(_sample(data, in_dims[0], b), _sample(offsets, in_dims[1], b), *args, **kwargs)
        for b in range(info.batch_size)
    ]
    return (torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])), (0, 0)


def call_merge(parts, k, mode, sorted_, nan):
    """``(values, indices)`` from the operator when every part of ``parts`` (a non-empty list or
    tuple whose first part is a pair: :func:`cutopk.merge_top_k` calls this only then) is a pair
    of torch tensors, or None (the operator-free path then serves the call, or raises the usual error)."""
    pairs = [p for p in parts if isinstance(p, (tuple, list))]  # TopK is a tuple
    if len(pairs) != len(parts) or any(len(p) != 2 for p in pairs):
        return None
    if not all(isinstance(t, torch.Tensor) for p in pairs for t in p):
        return None
    if _top_k_op.dispatcher_skippable(*(t for p in pairs for t in p)):
        return None
    order = _checks.ORDERS.get(sorted_) if isinstance(sorted_, (bool, str)) else None
    if order is None or not all(isinstance(s, str) for s in (mode, nan)):
        return None
    values, indices = [v for v, _ in pairs], [i for _, i in pairs]
    if transforms.active(*values, *indices):  # the winners from the operator, the values gathered
        _, out_indices, where = merge_top_k(
            [v.detach() for v in values], indices, _top_k_op._k_of(k), mode, order, nan
        )
        return transforms.merged_values(values, out_indices, where), out_indices
    out_values, out_indices, _ = merge_top_k(values, indices, _top_k_op._k_of(k), mode, order, nan)
    return out_values, out_indices


@torch.library.custom_op("cutopk::merge_top_k", mutates_args=())
def merge_top_k(
    values: list[torch.Tensor],
    indices: list[torch.Tensor],
    k: int,
    mode: str = "largest",
    sorted: str = "value",
    nan: str = "last",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`cutopk.merge_top_k` of the parts ``zip(values, indices)``; the third output is each
    winner's position along the parts' concatenated last axis."""
    if len(values) != len(indices):
        raise ValueError(f"parts: expected as many values as indices, got {len(values)} and {len(indices)}")
    order = _top_k_op.order_of(sorted)
    (out_values, out_indices), where = merge.merge_top_k(
        list(zip(values, indices, strict=True)), k, mode, order, nan, positions=True
    )
    return out_values, out_indices, where


@merge_top_k.register_fake
@_top_k_op.eager_errors
def _(values, indices, k, mode="largest", sorted="value", nan="last"):
    if not values or len(values) != len(indices):
        raise ValueError(
            f"parts: expected one or more parts, as many values as indices, got {len(values)} and {len(indices)}"
        )
    # The shapes checked as the operator-free path checks them (cutopk/irregular/merge.py), with its
    # messages: a misfit is an error here too, never an output of the first part's batch shape.
    first = values[0]
    for p, (v, i) in enumerate(zip(values, indices, strict=True)):
        if v.dtype != first.dtype or i.dtype != indices[0].dtype:
            raise TypeError("parts: expected one values dtype and one index dtype across the parts")
        merge.check_part_shape(p, tuple(v.shape), tuple(i.shape), tuple(first.shape))
    for name, value, choices in (("mode", mode, _checks.MODES), ("sorted", sorted, _ORDER_NAMES),
                                 ("nan", nan, _checks.NAN_POLICIES)):  # fmt: skip
        _checks.check_choice(name, value, choices)
    total = sum(v.shape[-1] for v in values)
    if isinstance(k, int) and isinstance(total, int):
        merge.check_k(k, total)
    else:  # symbolic: the guards the compiled graph runs under

        def eager() -> str:  # the eager message, in the example's sizes
            hint = _top_k_op.hint
            return f"k: expected 0 <= k <= {hint(total)} (the number of candidates in all parts together), got k={hint(k)}"

        torch._check_with(ValueError, k >= 0, eager)
        torch._check_with(ValueError, k <= total, eager)
    shape = (*first.shape[:-1], k)
    return (
        first.new_empty(shape),
        first.new_empty(shape, dtype=indices[0].dtype),
        first.new_empty(shape, dtype=torch.int64),
    )


def _merge_setup(ctx, inputs, output):
    values = inputs[0]
    ctx.widths = [v.shape[-1] for v in values]
    ctx.shape = (*values[0].shape[:-1], sum(ctx.widths))
    ctx.save_for_backward(output[1], output[2])


def _merge_backward(ctx, grad_values, _grad_indices, _grad_where):
    out_indices, where = ctx.saved_tensors
    grad = merge_grad(ctx.shape, out_indices, where, grad_values)
    parts = list(torch.split(grad, ctx.widths, dim=-1))
    # One entry per input given: the dispatcher drops trailing arguments equal to their defaults,
    # and a tensor-list operator's backward must match the inputs' structure exactly.
    rest = [None] * (len(ctx.needs_input_grad) - 2)
    return (parts, [None] * len(parts), *rest)


merge_top_k.register_autograd(_merge_backward, setup_context=_merge_setup)


@merge_top_k.register_vmap
def _merge_vmap(info, in_dims, values, indices, *args, **kwargs):
    # A loop over the samples, as torch's fallback would do (without its warning).
    values_dims, indices_dims = in_dims[0], in_dims[1]
    rows = [
        merge_top_k(
            [_sample(v, d, b) for v, d in zip(values, values_dims, strict=True)],
            [_sample(i, d, b) for i, d in zip(indices, indices_dims, strict=True)],
            *args,
            **kwargs,
        )
        for b in range(info.batch_size)
    ]
    return tuple(torch.stack([r[n] for r in rows]) for n in range(3)), (0, 0, 0)
