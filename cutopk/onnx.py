"""ONNX TopK (opsets 1, 10, 11) on top of :func:`cutopk.top_k`.

NaN ranks above +inf (``nan="largest"``), as in the ONNX reference implementation and onnxruntime.
"""

from __future__ import annotations

import numpy as np

from . import _frontend
from ._core.entry import top_k as _top_k
from ._core.result import Array, Integer, TopK
from ._request import checks as _checks
from ._request import dtypes as _dtypes

ONNX_DTYPES = (
    "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
)  # fmt: skip


def _check_K(K: Array) -> int:  # an integer or a tensor (Array: Any)
    """K is an int (the opset-1 attribute; any ``operator.index`` integer) or a 1-D int64 tensor of
    one element (opsets 10/11: NumPy, CuPy or torch)."""
    shape = getattr(K, "shape", None)
    if shape is None or tuple(shape) == ():
        return _checks.as_index(K, "K")
    try:
        dtype = _dtypes.as_numpy_dtype(K.dtype)
    except TypeError:
        dtype = K.dtype
    if dtype != np.int64:
        raise TypeError(f"K: expected a tensor of dtype int64, got {K.dtype}")
    if tuple(shape) != (1,):
        raise ValueError(f"K: expected a 1-D tensor of one element, got shape {tuple(shape)}")
    # One int64 of K is read on the host: the output shape depends on it.
    return int(K.tolist()[0])


def top_k(X: Array, K: Integer | Array, axis: int = -1, largest: int = 1, sorted: int = 1) -> TopK:
    """ONNX ``TopK``: ``(Values, Indices)`` with int64 indices.

    Parameters
    ----------
    X : array
        Input tensor (NumPy, CuPy or torch).
    K : int or array
        A 1-element int64 tensor (opsets 10/11) or an int (opset 1).
    axis, largest, sorted : int
        The ONNX attributes; ``sorted=0`` leaves the order unspecified.

    Examples
    --------
    >>> import numpy as np
    >>> from cutopk import onnx
    >>> onnx.top_k(np.array([[0., 1, 2, 3]]), np.array([3])).indices
    array([[3, 2, 1]])
    """
    _frontend.check_tensor("ONNX TopK", "X", X, ONNX_DTYPES)
    k = _check_K(K)
    order = True if _frontend.check_flag("sorted", sorted) else False
    mode = "largest" if _frontend.check_flag("largest", largest) else "smallest"
    _frontend.check_axis_and_k("X", X, axis, k, "K", np.int64, "Indices")
    return _top_k(X, k, axis=axis, mode=mode, sorted=order, nan="largest", index_dtype=np.int64)
