"""``torch.ops.cutopk.top_k``: :func:`cutopk.top_k` as a registered torch operator.

Why an operator: TorchDynamo cannot trace into a function that calls NumPy or CuPy on a tensor's
memory, so ``torch.compile(fullgraph=True)`` would stop at every call. A custom operator is one
opaque node to the compiler: a fake implementation gives it the output shapes and dtypes (no
data is read), and a registered autograd formula gives it its backward, so a compiled graph keeps
the call, its gradient and (on CUDA) its capture.

:func:`cutopk.top_k` on a torch tensor (without ``out=``) calls the operator, so compiled and
eager code take the same path. This module imports torch, and is imported only on that path:
``import cutopk`` alone registers nothing and imports no torch. An ordinary eager call (a CPU or CUDA
tensor autograd does not record, no mode or transform active) skips torch's dispatcher and runs
the operator's kernel directly: the same answer at half the host time (:func:`dispatcher_skippable`).

The schema carries every argument of ``top_k`` but ``out``: ``k`` (a SymInt, so dynamic shapes
work), ``axis``, ``mode``, ``sorted`` (``"value"``, ``"index"`` or ``"none"``: a schema has no
bool-or-string type), ``nan``, ``index_dtype`` (a torch dtype), ``backend``, ``algorithm`` and
``lengths`` (an optional tensor). Arguments that cannot cross (a ``k`` that is a tensor under
compilation, a NumPy index dtype whose torch twin is looked up here) are translated first;
anything else not carried (``out=``, a list for ``lengths``) takes the operator-free path, which raises
the usual errors.

Gradient: as :mod:`cutopk._core.autograd` says, the values' gradient scattered to the selected
positions; padding (index -1, with ``lengths``) passes none; indices are not differentiable.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .._interop import _check_torch_dtype
from .._request import checks as _checks
from .._request import dtypes as _dtypes
from . import transforms
from .autograd import scatter_grad
from .select import select

# sorted= as the schema's string, and back: a schema has no "bool or str" type.
ORDER_NAMES: dict[str, bool | str] = {"value": True, "index": "index", "none": False}


class FakeValueError(ValueError, IndexError):
    """The ValueError of a check in a fake implementation, as it reaches the caller of a compiled
    graph. TorchDynamo turns whatever a fake implementation raises into a TorchRuntimeError, but
    lets an IndexError through (torch's own dimension checks), so the eager error (a ValueError,
    message and all) comes through ``torch.compile`` as this one. NumPy's AxisError is both
    already."""


class FakeTypeError(TypeError, IndexError):
    """The TypeError of a check in a fake implementation (see :class:`FakeValueError`)."""


def eager_errors(fake: Callable[..., Any]) -> Callable[..., Any]:
    """A fake implementation whose ValueErrors and TypeErrors come through ``torch.compile`` as
    they are raised eagerly (:class:`FakeValueError`). Its symbolic checks use
    ``torch._check_with(ValueError, ...)`` for the same reason."""

    @functools.wraps(fake)
    def checked(*args, **kwargs):
        try:
            return fake(*args, **kwargs)
        except (ValueError, TypeError) as exc:
            if isinstance(exc, IndexError):
                raise
            passing = FakeValueError if isinstance(exc, ValueError) else FakeTypeError
            raise passing(str(exc)) from None

    return checked


def hint(size):
    """A symbolic size as the value it has in the example a graph is traced on (what the eager
    message would say), where it has one; any other size as it is."""
    value = getattr(getattr(size, "node", None), "hint", None)
    return size if value is None else value


def order_of(sorted_: str) -> bool | str:
    """The operators' ``sorted`` as :func:`cutopk.top_k` takes it, or the ValueError listing what
    the schema takes (``True`` and ``False`` are no strings, so top_k's own list would mislead)."""
    _checks.check_choice("sorted", sorted_, ORDER_NAMES)
    return ORDER_NAMES[sorted_]


def _index_dtype(index_dtype) -> torch.dtype | None:
    """The torch twin of an index dtype (NumPy's or torch's), or None when there is none: the
    operator-free path then reports it. Kept out of Dynamo's sight: it folds the answer as a constant
    (NumPy dtype objects are no graph values)."""
    if isinstance(index_dtype, torch.dtype):
        return index_dtype
    return _torch_dtype_of(index_dtype)


@torch.compiler.assume_constant_result
def _torch_dtype_of(index_dtype) -> torch.dtype | None:
    try:
        dt = _dtypes.as_numpy_dtype(index_dtype)
    except TypeError:
        return None
    if dt not in _checks.INDEX_DTYPES:
        return None
    return getattr(torch, dt.name)


def _k_of(k):
    """``k`` as the schema's SymInt: ints and SymInts as they are (a bool is refused by the
    checks), anything else through ``operator.index`` with the usual TypeError."""
    if isinstance(k, torch.SymInt) or (type(k) is int):
        return k
    return _checks.as_index(k, "k")


def host_tensor(arr: np.ndarray) -> torch.Tensor | np.ndarray:
    """An integer NumPy array (``lengths``, ``offsets``) as the CPU tensor the schema takes: a
    byte-swapped or read-only one copied first (``torch.from_numpy`` refuses the first and warns
    of the second; a batch of lengths is small). Any other dtype stays NumPy: the caller's
    operator-free path refuses it with the usual error."""
    if arr.dtype.kind not in "iu":
        return arr
    if not arr.dtype.isnative or not arr.flags.writeable:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return torch.from_numpy(arr)


def dispatcher_skippable(*tensors) -> bool:
    """Whether the operator-free path serves this eager call exactly as the operator would, so that
    torch's dispatcher can be skipped (it doubled the host time of a small CPU call: 280 ->
    620 us, measured by benchmarks/host_overhead.py). Only ordinary CPU/CUDA tensors that autograd
    does not record, outside compilation, with no torch function or dispatch mode and no
    functorch transform watching: everything else (fake and meta tensors, subclasses, modes,
    tracing) must see the operator. Under TorchDynamo ``is_compiling()`` folds to True."""
    return (
        all(type(t) is torch.Tensor for t in tensors)
        and not torch.compiler.is_compiling()
        and not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))
        and all(t.device.type in ("cpu", "cuda") for t in tensors)
        and torch._C._len_torch_dispatch_stack() == 0
        and not torch._C._is_torch_function_mode_enabled()
        and not any(torch._C._functorch.is_functorch_wrapped_tensor(t) for t in tensors)
        and not transforms.forward_ad_on()
    )


def call(a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm, lengths):
    """``(values, indices)`` from the operator, or None when the operator-free path serves the
    call: a :func:`dispatcher_skippable` one, or one with an argument that cannot cross the schema
    (the operator-free path then raises the usual error for it)."""
    if dispatcher_skippable(a) and not transforms.wraps(lengths):
        return None
    order = _checks.ORDERS.get(sorted_) if isinstance(sorted_, (bool, str)) else None
    dtype = _index_dtype(index_dtype)
    if type(lengths) is np.ndarray:  # not a masked array: from_numpy would drop its mask
        lengths = host_tensor(lengths)
    if isinstance(axis, np.integer):
        axis = int(axis)
    if (
        order is None
        or dtype is None
        or type(axis) is not int
        or not all(isinstance(s, str) for s in (mode, nan, backend, algorithm))
        or not (lengths is None or isinstance(lengths, torch.Tensor))
    ):
        return None
    if transforms.active(a, lengths):  # the indices from the operator, the values gathered
        _, indices = top_k(a.detach(), _k_of(k), axis, mode, order, nan, dtype, backend, algorithm, lengths)
        return transforms.top_k_values(a, axis % a.dim(), indices), indices
    return top_k(a, _k_of(k), axis, mode, order, nan, dtype, backend, algorithm, lengths)


@torch.library.custom_op("cutopk::top_k", mutates_args=())
def top_k(
    a: torch.Tensor,
    k: int,
    axis: int = -1,
    mode: str = "largest",
    sorted: str = "value",
    nan: str = "last",
    index_dtype: torch.dtype = torch.int64,
    backend: str = "auto",
    algorithm: str = "auto",
    lengths: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`cutopk.top_k` (``sorted`` is ``"value"``, ``"index"`` or ``"none"``)."""
    order = order_of(sorted)
    values, indices = select(a, k, axis, mode, order, nan, index_dtype, backend, algorithm, lengths)
    return values, indices


@top_k.register_fake
@eager_errors
def _(a, k, axis=-1, mode="largest", sorted="value", nan="last", index_dtype=torch.int64,
      backend="auto", algorithm="auto", lengths=None):  # fmt: skip
    # The checks that need no data, with the operator-free path's errors, then the shapes.
    _check_torch_dtype(a.dtype, "a")
    _dtypes.check_dtype(a.dtype, "a")
    ax = _checks.check_axis(axis, a.dim())
    n = a.shape[ax]
    for name, value, choices in (("mode", mode, _checks.MODES), ("sorted", sorted, ORDER_NAMES),
                                 ("nan", nan, _checks.NAN_POLICIES), ("backend", backend, _checks.BACKENDS)):  # fmt: skip
        _checks.check_choice(name, value, choices)
    if isinstance(k, int) and isinstance(n, int):
        _checks.check_k(k, n, ax)
        _checks.check_index_dtype(index_dtype, n)
    else:  # symbolic: the guards the compiled graph runs under

        def eager() -> str:  # the eager message, in the example's sizes
            return f"k: expected 0 <= k <= {hint(n)} (the length of axis {ax}), got k={hint(k)}"

        torch._check_with(ValueError, k >= 0, eager)
        torch._check_with(ValueError, k <= n, eager)
        _checks.check_index_dtype(index_dtype, 1)
    if lengths is not None:
        batch = tuple(s for i, s in enumerate(a.shape) if i != ax)
        torch._check_with(
            ValueError,
            tuple(lengths.shape) == batch,
            lambda: (
                f"lengths: expected shape {tuple(map(hint, batch))} (the input's shape without axis {ax}), "
                f"got {tuple(map(hint, lengths.shape))}"
            ),
        )
    shape = (*a.shape[:ax], k, *a.shape[ax + 1 :])
    return a.new_empty(shape), a.new_empty(shape, dtype=index_dtype)


def _setup_context(ctx, inputs, output):
    a, axis = inputs[0], inputs[2]
    ctx.shape, ctx.axis = a.shape, axis % a.dim()
    ctx.save_for_backward(output[1])


def _backward(ctx, grad_values, _grad_indices):
    (indices,) = ctx.saved_tensors
    grad = scatter_grad(ctx.shape, ctx.axis, indices, grad_values)
    return grad, None, None, None, None, None, None, None, None, None


top_k.register_autograd(_backward, setup_context=_setup_context)


@top_k.register_vmap
def _vmap(info, in_dims, a, k, axis=-1, mode="largest", sorted="value", nan="last", index_dtype=torch.int64,
          backend="auto", algorithm="auto", lengths=None):  # fmt: skip
    # One call on the batch: the rows of every sample are rows of one input (the batch axis
    # first, the axis shifted past it), so torch.vmap needs no loop over the samples.
    a_dim, lengths_dim = in_dims[0], in_dims[-1]
    ax = _checks.check_axis(axis, a.dim() - (a_dim is not None))
    a = _batch_first(a, a_dim, info.batch_size)
    if lengths is not None:
        lengths = _batch_first(lengths, lengths_dim, info.batch_size)
    values, indices = top_k(a, k, ax + 1, mode, sorted, nan, index_dtype, backend, algorithm, lengths)
    return (values, indices), (0, 0)


def _batch_first(t, dim, size: int):
    """``t`` with its batch dimension ``dim`` first, or expanded to ``size`` where it has none."""
    return t.movedim(dim, 0) if dim is not None else t.expand(size, *t.shape)
