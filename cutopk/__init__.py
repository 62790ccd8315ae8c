"""cutopk: exact top-K for GPU (CuPy) and CPU (NumPy) arrays.

>>> import numpy as np, cutopk
>>> cutopk.top_k(np.array([3, 1, 4, 1, 5]), 2)
TopK(values=array([5, 4]), indices=array([4, 2]))
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from . import _api, _call, _out
from ._numpy_threads import get_num_threads, num_threads, set_num_threads
from ._plan import Launch, Plan

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
    "segmented_top_k",
    "set_num_threads",
    "top_k",
]
__version__ = "0.1.0"


class TopK(NamedTuple):
    """The result of :func:`top_k`: the selected values and their indices along the axis."""

    values: Any
    indices: Any


def top_k(
    a,
    k,
    /,
    *,
    axis: int = -1,
    mode: str = "largest",
    sorted: bool | str = True,
    nan: str = "last",
    index_dtype=np.int64,
    backend: str = "auto",
    algorithm: str = "auto",
    lengths=None,
    out=None,
) -> TopK:
    """Return the K largest (or smallest) elements of ``a`` along ``axis`` and their indices.

    The contract is ``docs/SPEC.md``.

    Parameters
    ----------
    a : array
        NumPy array (CPU) or CuPy / CUDA array (GPU; a torch tensor too), rank >= 1, any strides.
    k : int
        How many elements to select, ``0 <= k <= a.shape[axis]``: any integer ``operator.index``
        accepts (0-d integer arrays and tensors too), not a bool.
    axis : int
        The axis to select along; negative counts from the end.
    mode : {"largest", "smallest"}
        Which end of the order to select.
    sorted : {True, "value", "index", False}
        Output order: by value (ties by ascending index), by ascending index, or unspecified
        (the selected set is the same in every case).
    nan : {"last", "largest"}
        ``"last"``: a NaN is never preferred over a number. ``"largest"``: NaN ranks above +inf
        (ONNX, torch). NaNs tie with each other.
    index_dtype : dtype
        int64 (default), int32, uint32 or uint64 (NumPy's or torch's).
    backend : {"auto", "numpy", "cuda", "sim"}
        ``"auto"`` picks by array type; ``"sim"`` runs the CUDA kernels on the CPU simulator.
    algorithm : str
        ``"auto"`` or one of :func:`algorithms` for the backend.
    lengths : integer array, optional
        Of the shape of ``a`` without ``axis`` (NumPy, or the input's own array kind): row r takes
        part with its first ``lengths[r]`` elements only; a row shorter than ``k`` ends in padding
        (index -1, value 0). Needs a signed ``index_dtype``.
    out : (values, indices), optional
        A tuple or a list of the two: preallocated C-contiguous outputs of the result's shape, dtypes, array type and device, not
        overlapping the input: the results are written there and the same objects returned.

    Returns
    -------
    TopK
        ``(values, indices)``, C-contiguous, shape of ``a`` with ``axis`` replaced by ``k``. For a
        torch tensor that requires grad, ``values`` carries the gradient (to the selected elements).

    Examples
    --------
    >>> import numpy as np, cutopk
    >>> x = np.array([[1.0, 3.0, 3.0, np.nan], [0.0, -0.0, 2.0, 1.0]], dtype=np.float32)
    >>> cutopk.top_k(x, 2)
    TopK(values=array([[3., 3.],
           [2., 1.]], dtype=float32), indices=array([[1, 2],
           [2, 3]]))
    >>> cutopk.top_k(x, 1, mode="smallest", nan="largest").indices.ravel().tolist()
    [0, 0]
    """
    if _requires_grad(a):
        from . import _autograd

        if _autograd.records(a):
            if out is not None:
                raise ValueError(
                    "out: cannot be used with an input that requires grad (values carry its gradient)"
                )
            return TopK(
                *_autograd.top_k(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm, lengths)
            )
    arr, back, scope, call, _ = _call.prepare(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm)
    if lengths is not None:
        return _run_with_lengths(arr, back, scope, call, lengths, out)
    if scope is None:
        return _run(arr, back, call, out)
    with scope:
        return _run(arr, back, call, out)


def _run_with_lengths(arr, back, scope, call, lengths, out) -> TopK:
    """``lengths`` read by the kernels (CUDA and simulator backends), else the generic route of
    the NumPy backend (see :mod:`cutopk._lengths`): masked rows, one top_k, padding."""
    import contextlib

    from . import _lengths

    with scope if scope is not None else contextlib.nullcontext():
        lens, longest = _lengths.check(lengths, arr, call.req)
        dst = _out.check(out, call, arr) if out is not None else None
        arr, call = _lengths.narrowed(arr, call, longest)
        req = call.req
        kernel_call = _lengths.kernel_call(call)
        if kernel_call is not None:
            values, indices = kernel_call.run(arr, dst, extents=lens)
            if dst is not None:
                return TopK(*out)  # the caller's own arrays (torch tensors stay tensors)
            if back is not None:
                return TopK(back(values), back(indices))
            return TopK(values, indices)
        masked = _lengths.masked_rows(arr, lens, req)
        inner = top_k(
            masked, req.k, axis=-1, mode="largest" if req.largest else "smallest",
            sorted="index" if req.order != "value" else True, nan="largest" if req.nan_largest else "last",
            index_dtype=req.index_dtype, backend=req.backend, algorithm=req.algorithm,
        )  # fmt: skip
        values, indices = _lengths.pad(*inner, lens, req, arr.dtype, dst)
    if dst is not None:
        return TopK(*out)
    if back is None:
        return TopK(values, indices)
    return TopK(back(values), back(indices))


def _run(arr, back, call, out) -> TopK:
    if out is not None:
        call.run(arr, _out.check(out, call, arr))
        return TopK(*out)
    values, indices = call.run(arr)
    if back is None:
        return TopK(values, indices)
    return TopK(back(values), back(indices))


def algorithms(backend: str = "cuda") -> tuple[str, ...]:
    """Names accepted by ``top_k(..., algorithm=...)`` on ``backend``.

    >>> import cutopk
    >>> cutopk.algorithms("numpy")
    ('select',)
    """
    _api.check_choice("backend", backend, _api.BACKENDS[1:])
    if backend == "numpy":
        from . import _numpy

        return _numpy.ALGORITHMS
    from . import _gpu

    return _gpu.ALGORITHMS


def plan(
    a,
    k,
    /,
    *,
    axis: int = -1,
    mode: str = "largest",
    sorted: bool | str = True,
    nan: str = "last",
    index_dtype=np.int64,
    backend: str = "auto",
    algorithm: str = "auto",
    lengths=None,
) -> Plan:
    """Report what :func:`top_k` does with these arguments, without running anything.

    The same checks as :func:`top_k` (the same errors), and the same plan: the algorithm, every
    launch, the scratch memory, every copy, and whether the signature was already planned (a
    cached signature skips the checks and the planning). ``print(plan)`` lays it out.

    >>> import numpy as np, cutopk
    >>> p = cutopk.plan(np.zeros((4, 100), np.float32), 3, backend="sim")
    >>> p.algorithm, p.launch_count, p.copies
    ('warp_row', 1, ())
    """
    arr, _, scope, call, cached = _call.prepare(
        a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm
    )
    if lengths is None:
        return _call.describe(call, cached, arr)
    import contextlib

    from . import _lengths

    # The variant that reads the lengths is planned on the array's device too: its kernels are
    # loaded, and opted in to shared memory, on the device current while it is built.
    with scope if scope is not None else contextlib.nullcontext():
        _, longest = _lengths.check(lengths, arr, call.req)
        arr, call = _lengths.narrowed(arr, call, longest)
        kernel_call = _lengths.kernel_call(call)
    if kernel_call is not None:
        return _lengths.describe_in_kernel(_call.describe(kernel_call, cached, arr), arr.shape[call.req.axis])
    return _lengths.describe(_call.describe(call, cached, arr), arr)


def merge_top_k(parts, k, /, *, mode: str = "largest", sorted: bool | str = True, nan: str = "last") -> TopK:
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
        part's values (to the winners).

    Examples
    --------
    >>> import numpy as np, cutopk
    >>> x = np.array([4, 9, 1, 9, 7, 4, 9, 0])
    >>> left, right = cutopk.top_k(x[:4], 2), cutopk.top_k(x[4:], 2)
    >>> right = (right.values, right.indices + 4)   # into the whole array's index space
    >>> cutopk.merge_top_k([left, right], 3)
    TopK(values=array([9, 9, 9]), indices=array([1, 3, 6]))
    """
    from . import _merge

    values = (
        [p[0] for p in parts if type(p) in (tuple, list, TopK) and len(p) == 2]
        if type(parts) in (list, tuple)
        else []
    )
    if _requires_grad(*values):
        from . import _autograd

        if any(_autograd.records(v) for v in values):
            return TopK(*_autograd.merge_top_k(parts, k, mode, sorted, nan))
    return _merge.merge_top_k(parts, k, mode, sorted, nan)


def segmented_top_k(
    data,
    offsets,
    k,
    /,
    *,
    mode: str = "largest",
    sorted: bool | str = True,
    nan: str = "last",
    index_dtype=np.int64,
    backend: str = "auto",
    algorithm: str = "auto",
) -> TopK:
    """Top K of each segment ``data[offsets[s]:offsets[s+1]]`` of a 1-D array (CSR layout).

    Parameters
    ----------
    data : array
        1-D NumPy, CuPy or torch array.
    offsets : array of int
        S + 1 non-decreasing positions, ``offsets[0] >= 0``, ``offsets[-1] <= len(data)`` (a CSR
        ``indptr``); a NumPy array, a list, or an array of ``data``'s kind (read on the host).
    k : int
        ``k >= 0``; segments shorter than ``k`` are padded.
    mode, sorted, nan, backend, algorithm
        As in :func:`top_k`.
    index_dtype : dtype
        int64 (default) or int32: padding needs a signed type.

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
    from . import _segmented

    if _requires_grad(data):
        from . import _autograd

        if _autograd.records(data):
            return TopK(
                *_autograd.segmented_top_k(
                    data, offsets, k, mode, sorted, nan, index_dtype, backend, algorithm
                )
            )
    return _segmented.segmented_top_k(data, offsets, k, mode, sorted, nan, index_dtype, backend, algorithm)


def _requires_grad(*arrays) -> bool:
    """Whether one of ``arrays`` may be a tensor autograd records (torch is not imported here:
    :mod:`cutopk._autograd` makes the exact check)."""
    return any(type(a) is not np.ndarray and getattr(a, "requires_grad", False) for a in arrays)


_SUBMODULES = ("onnx", "openvino", "directml", "dask")


def __getattr__(name: str):
    # The front ends and the Dask integration load on first use: importing cutopk stays cheap
    # and needs no Dask.
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
