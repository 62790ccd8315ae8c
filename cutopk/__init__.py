"""cutopk: exact top-K for GPU (CuPy) and CPU (NumPy) arrays.

>>> import numpy as np, cutopk
>>> cutopk.top_k(np.array([3, 1, 4, 1, 5]), 2)
TopK(values=array([5, 4]), indices=array([4, 2]))
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from . import _api, _call
from ._plan import Launch, Plan

__all__ = ["Launch", "Plan", "TopK", "__version__", "algorithms", "plan", "top_k"]
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
    out : (values, indices), optional
        Preallocated C-contiguous outputs of the result's shape, dtypes, array type and device, not
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
    if type(a) is not np.ndarray and getattr(a, "requires_grad", False):
        from . import _autograd

        if _autograd.records(a):
            if out is not None:
                raise ValueError(
                    "out: cannot be used with an input that requires grad (values carry its gradient)"
                )
            return TopK(*_autograd.top_k(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm))
    arr, back, scope, call, _ = _call.prepare(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm)
    if scope is None:
        return _run(arr, back, call, out)
    with scope:
        return _run(arr, back, call, out)


def _run(arr, back, call, out) -> TopK:
    if out is not None:
        from . import _out

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
    _, _, _, call, cached = _call.prepare(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm)
    return _call.describe(call, cached)


_SUBMODULES = ("onnx", "openvino", "directml", "dask")


def __getattr__(name: str):
    # The front ends and the Dask integration load on first use: importing cutopk stays cheap
    # and needs no Dask.
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
