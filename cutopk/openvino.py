"""OpenVINO TopK-1 on top of :func:`cutopk.top_k`.

OpenVINO leaves the order of equal values open; cutopk always breaks ties by lower index (which is
what OpenVINO TopK-11 ``stable=true`` promises). NaN ranks above +inf (``nan="largest"``).
"""

from __future__ import annotations

import numbers

import numpy as np

from . import TopK, _frontend
from . import top_k as _top_k

MODES = {"max": "largest", "min": "smallest"}
SORTS = {"value": True, "index": "index", "none": False}
INDEX_TYPES = {"i32": np.int32, "i64": np.int64}


def _check_k(k) -> int:
    """k is a scalar: an int or a 0-d / 1-element integer array."""
    if isinstance(k, (numbers.Integral, np.integer)) and not isinstance(k, (bool, np.bool_)):
        return int(k)
    shape = getattr(k, "shape", None)
    dtype = getattr(k, "dtype", None)
    if shape is None or dtype is None or np.dtype(dtype).kind not in "iu" or int(np.prod(shape)) != 1:
        raise TypeError(f"k: expected an integer scalar, got {type(k).__name__} {k!r}")
    return int(k.tolist() if not shape else k.ravel().tolist()[0])


def top_k(data, k, axis: int, mode: str, sort: str, index_element_type: str = "i32") -> TopK:
    """OpenVINO ``TopK-1``.

    Parameters
    ----------
    data : array
        Input tensor (NumPy or CuPy).
    k : int
        Number of elements to select.
    axis : int
        Required; negative counts from the end.
    mode : {"max", "min"}
    sort : {"value", "index", "none"}
    index_element_type : {"i32", "i64"}

    Examples
    --------
    >>> import numpy as np
    >>> from cutopk import openvino
    >>> openvino.top_k(np.array([5, 1, 5, 7]), 3, axis=0, mode="max", sort="index").indices
    array([0, 2, 3], dtype=int32)
    """
    kk = _check_k(k)
    return _top_k(
        data,
        kk,
        axis=axis,
        mode=_frontend.check_string("mode", mode, MODES),
        sorted=_frontend.check_string("sort", sort, SORTS),
        nan="largest",
        index_dtype=_frontend.check_string("index_element_type", index_element_type, INDEX_TYPES),
    )
