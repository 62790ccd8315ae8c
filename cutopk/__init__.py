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

__all__ = ["TopK", "__version__", "algorithms", "plan", "top_k"]
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
