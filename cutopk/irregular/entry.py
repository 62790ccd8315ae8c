"""The public entry points of irregular inputs: :func:`merge_top_k`, :func:`segmented_top_k`,
and :func:`plan`, the core's plan that also plans segments (the package root re-exports them),
built on the core like any caller of ``top_k``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core import entry as _entry
from .._core.result import Array, DType, Integer, TopK
from .._interop import is_torch_tensor, requires_grad
from .._request.plan import Plan
from . import merge, segmented


def merge_top_k(
    parts: Sequence[TopK | Sequence[Array]],
    k: Integer,
    /,
    *,
    mode: str = "largest",
    sorted: bool | str = True,
    nan: str = "last",
) -> TopK:
    """The exact top K of the union of partial top-K results, as :func:`top_k` on the whole.

    Parameters
    ----------
    parts : sequence of TopK or (values, indices) pairs
        Selections made from disjoint sets of candidates, with indices in one common index space
        (a shard's local indices plus its offset, say). All NumPy (or CPU torch) or all CuPy (or
        CUDA) arrays; the same shape except the last axis, which holds the candidates; one values
        dtype and one index dtype. A negative index (``top_k``'s padding, -1) is padding and
        never wins.
    k : int
        ``0 <= k <=`` the total length of the parts' last axes.
    mode, sorted, nan
        As in :func:`top_k`. Ties (equal values, ``-0.0 == +0.0``, any two NaNs) go to the
        lower index, whichever part holds it.

    Returns
    -------
    TopK
        ``(values, indices)`` of shape ``(*batch, k)``, C-contiguous, the parts' dtypes and array
        type. A row with fewer than ``k`` real candidates ends in padding: index -1, value 0.
        For torch parts whose values require grad, ``values`` carries the gradient to every
        part's values (to the winners), and is a tensor even where parts[0] is NumPy: a NumPy
        part beside them joins as a constant.

    Examples
    --------
    >>> import numpy as np, cutopk
    >>> x = np.array([4, 9, 1, 9, 7, 4, 9, 0])
    >>> left, right = cutopk.top_k(x[:4], 2), cutopk.top_k(x[4:], 2)
    >>> right = (right.values, right.indices + 4)   # into the whole array's index space
    >>> cutopk.merge_top_k([left, right], 3)
    TopK(values=array([9, 9, 9]), indices=array([1, 3, 6]))
    """
    if is_torch_tensor(_first_values(parts)):
        # The registered operator (one opaque node to torch.compile, its own autograd formula).
        from . import torch_op

        result = torch_op.call_merge(parts, k, mode, sorted, nan)
        if result is not None:
            return TopK(*result)
    values = (
        [p[0] for p in parts if type(p) in (tuple, list, TopK) and len(p) == 2]
        if type(parts) in (list, tuple)
        else []
    )
    if requires_grad(*values):
        from .._core import autograd

        if any(autograd.records(v) for v in values):
            return TopK(*autograd.merge_top_k(*merge.differentiable(parts, k, mode, sorted, nan)))
    return merge.merge_top_k(parts, k, mode, sorted, nan)


def segmented_top_k(
    data: Array,
    offsets: Array,
    k: Integer,
    /,
    *,
    mode: str = "largest",
    sorted: bool | str = True,
    nan: str = "last",
    index_dtype: DType = np.int64,
    backend: str = "auto",
    algorithm: str = "auto",
    max_length: int | None = None,
) -> TopK:
    """Top K of each segment ``data[offsets[s]:offsets[s+1]]`` of a 1-D array (CSR layout).

    Parameters
    ----------
    data : array
        1-D NumPy, CuPy or torch array.
    offsets : array of int
        S + 1 non-decreasing positions, ``offsets[0] >= 0``, ``offsets[-1] <= len(data)`` (a CSR
        ``indptr``); a NumPy array or a list (checked on the host: ValueError), or an array of
        ``data``'s kind and device (never read back: the kernels check each segment, and a
        segment out of order or out of range comes back as padding only).
    k : int
        ``k >= 0``; segments shorter than ``k`` are padded.
    mode, sorted, nan, backend, algorithm
        As in :func:`top_k`.
    index_dtype : dtype
        int64 (default) or int32: padding needs a signed type.
    max_length : int, optional
        A bound, known on the host, on every segment's length. With offsets on the device the
        kernels are planned on rows of ``max(max_length, k)`` elements rather than ``len(data)``
        (a cheaper plan for short segments), and a segment longer than that comes back as
        padding only; with offsets on the host a segment longer than ``max_length`` is a
        ValueError.

    Returns
    -------
    TopK
        ``(values, indices)`` of shape ``(S, k)``; indices are positions inside the segment (add
        ``offsets[:-1, None]`` for positions in ``data``). A segment of length ``L < k`` gives its
        ``L`` elements first, then padding: index -1, value 0. For a torch tensor that requires
        grad, ``values`` carries the gradient (to the selected elements of ``data``).

    Examples
    --------
    >>> import numpy as np, cutopk
    >>> data = np.array([5.0, 1.0, 7.0, 3.0, 3.0, 9.0])
    >>> cutopk.segmented_top_k(data, np.array([0, 3, 3, 6]), 2)
    TopK(values=array([[7., 5.],
           [0., 0.],
           [9., 3.]]), indices=array([[ 2,  0],
           [-1, -1],
           [ 2,  0]]))
    """
    if is_torch_tensor(data):
        from . import torch_op

        result = torch_op.call_segmented(
            data, offsets, k, mode, sorted, nan, index_dtype, backend, algorithm, max_length
        )
        if result is not None:
            return TopK(*result)
    if requires_grad(data):
        from .._core import autograd

        if autograd.records(data):
            return TopK(
                *autograd.segmented_top_k(
                    data,
                    *segmented.differentiable(
                        data, offsets, k, mode, sorted, nan, index_dtype, backend, algorithm, max_length
                    ),
                )
            )
    return segmented.segmented_top_k(
        data, offsets, k, mode, sorted, nan, index_dtype, backend, algorithm, max_length
    )


def plan(
    a: Array,
    k: Integer,
    /,
    *,
    axis: int = -1,
    mode: str = "largest",
    sorted: bool | str = True,
    nan: str = "last",
    index_dtype: DType = np.int64,
    backend: str = "auto",
    algorithm: str = "auto",
    lengths: Array | None = None,
    offsets: Array | None = None,
    max_length: int | None = None,
) -> Plan:
    """Report what :func:`top_k` does with these arguments, without running anything; with
    ``offsets``, what :func:`segmented_top_k` ``(a, offsets, k, ...)`` does; with a list or
    tuple of parts as ``a``, what :func:`merge_top_k` ``(a, k, ...)`` does (``backend="sim"``:
    NumPy parts merged by the kernels on the simulator, as CuPy parts are on a GPU).

    The same checks as the call (the same errors), and the same plan: the algorithm, every
    launch, the scratch memory, every copy, and whether the signature was already planned (a
    cached signature skips the checks and the planning). ``print(plan)`` lays it out. For
    segments, ``Plan.n`` is the length the rows are planned on (``max(max_length, k)`` with
    ``max_length`` and offsets on the device, which a plan never reads), and ``Plan.batch`` says
    why; ``axis`` and ``lengths`` do not apply. For a merge, ``Plan.n`` is the candidates per row
    of all parts together, ``Plan.params`` says the route (``"kernels"`` or ``"library"``, with
    ``why_not``), and only ``mode``, ``sorted``, ``nan`` and ``backend`` apply.

    >>> import numpy as np, cutopk
    >>> p = cutopk.plan(np.zeros((4, 100), np.float32), 3, backend="sim")
    >>> p.algorithm, p.launch_count, p.copies
    ('warp_row', 1, ())
    >>> data, offsets = np.zeros(100_000, np.float32), np.array([0, 40, 100])
    >>> cutopk.plan(data, 5, offsets=offsets, backend="sim").n   # rows of the longest segment
    60
    >>> left = cutopk.top_k(np.arange(8.0).reshape(2, 4), 2)
    >>> p = cutopk.plan([left, (left.values, left.indices + 4)], 3, backend="sim")
    >>> p.algorithm, p.launch_count, p.params["route"]
    ('merge', 1, 'kernels')
    """
    if type(a) in (list, tuple):  # parts: never an array (top_k takes none of these)
        if offsets is not None or lengths is not None or axis != -1 or max_length is not None:
            raise TypeError("a: a merge of parts takes neither axis, lengths, offsets nor max_length")
        if index_dtype is not np.int64 or algorithm != "auto":
            raise TypeError("a: a merge of parts takes neither index_dtype nor algorithm (the parts' own)")
        return merge.plan(a, k, mode, sorted, nan, backend)
    if offsets is None:
        if max_length is not None:
            raise TypeError("max_length: applies to segments only (plan(..., offsets=...)), got no offsets")
        return _entry.plan(
            a, k, axis=axis, mode=mode, sorted=sorted, nan=nan, index_dtype=index_dtype, backend=backend,
            algorithm=algorithm, lengths=lengths,
        )  # fmt: skip
    if lengths is not None or axis != -1:
        raise TypeError("offsets: segments take neither axis nor lengths (a segment is its own row)")
    return segmented.plan(a, offsets, k, mode, sorted, nan, index_dtype, backend, algorithm, max_length)


def _first_values(parts: Any) -> Array | None:  # Any: anything is looked at, then checked
    """The first part's values when ``parts`` looks like a sequence of pairs, else None."""
    if (
        type(parts) in (list, tuple)
        and parts
        and type(parts[0]) in (tuple, list, TopK)
        and len(parts[0]) == 2
    ):
        return parts[0][0]
    return None
