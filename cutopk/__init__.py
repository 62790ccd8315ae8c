"""cutopk: exact top-K for GPU (CuPy) and CPU (NumPy) arrays.

>>> import numpy as np, cutopk
>>> cutopk.top_k(np.array([3, 1, 4, 1, 5]), 2)
TopK(values=array([5, 4]), indices=array([4, 2]))
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple

import numpy as np

from . import _api

__all__ = ["TopK", "__version__", "algorithms", "merge_top_k", "plan", "segmented_top_k", "top_k"]
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
) -> TopK:
    """Return the K largest (or smallest) elements of ``a`` along ``axis`` and their indices.

    Parameters
    ----------
    a : array
        NumPy array (CPU) or CuPy / CUDA array (GPU), rank >= 1, any strides.
    k : int
        How many elements to select, ``0 <= k <= a.shape[axis]``.
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
        int64 (default), int32, uint32 or uint64.
    backend : {"auto", "numpy", "cuda", "sim"}
        ``"auto"`` picks by array type; ``"sim"`` runs the CUDA kernels on the CPU simulator.
    algorithm : str
        ``"auto"`` or one of :func:`algorithms` for the backend.

    Returns
    -------
    TopK
        ``(values, indices)``, C-contiguous, shape of ``a`` with ``axis`` replaced by ``k``.

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
    a, back, scope = _prepare(a, backend)
    req = _api.normalize(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm)
    # The scope makes the input's device and the caller's stream current, for the launches and for
    # handing the results back as the caller's array type.
    with scope:
        if req.backend == "numpy":
            from . import _numpy

            values, indices = _numpy.top_k(a, req)
        else:
            from . import _gpu

            values, indices = _gpu.top_k(a, req)
        return TopK(back(values), back(indices))


def _prepare(a, backend):
    """The array as the backend takes it (NumPy, or CuPy without a copy), a function returning
    results to the caller's array type, and the device/stream scope to launch in."""
    kind = _api.array_kind(a)
    _api.resolve_backend(backend, kind)  # a backend/array mismatch is reported before anything else
    from . import _interop

    if kind == "numpy":
        return (*_interop.as_host(a), contextlib.nullcontext())

    return _interop.as_cupy(a)


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
):
    """Report what :func:`top_k` would do with these arguments, without running anything.

    For the ``"cuda"`` and ``"sim"`` backends this is the dispatcher's plan: the algorithm,
    launch configuration, scratch memory and whether the input is copied.
    """
    a, _, scope = _prepare(a, backend)
    req = _api.normalize(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm)
    if req.backend == "numpy":
        return {"backend": "numpy", "algorithm": "select", "copy": req.axis != a.ndim - 1}
    from . import _gpu

    with scope:
        return _gpu.plan(a, req)


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
        ``L`` elements first, then padding: index -1, value 0.

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

    return _segmented.segmented_top_k(data, offsets, k, mode, sorted, nan, index_dtype, backend, algorithm)
