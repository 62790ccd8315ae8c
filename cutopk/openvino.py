"""OpenVINO TopK-1 on top of :func:`cutopk.top_k`.

OpenVINO leaves the order of equal values open; cutopk always breaks ties by lower index (which is
what OpenVINO TopK-11 ``stable=true`` promises). NaN ranks above +inf (``nan="largest"``).
"""

from __future__ import annotations

import math

import numpy as np

from . import _frontend
from ._core.entry import top_k as _top_k
from ._core.result import Array, Integer, TopK
from ._request import checks as _checks
from ._request import dtypes as _dtypes

# Every element type cutopk has (OpenVINO TopK-1 takes any numeric type).
OPENVINO_DTYPES = tuple(info.name for info in _dtypes.SUPPORTED.values())

MODES = {"max": "largest", "min": "smallest"}
SORTS = {"value": True, "index": "index", "none": False}
INDEX_TYPES = {"i32": np.int32, "i64": np.int64}


def _check_k(k: Array) -> int:  # an integer or a tensor (Array: Any)
    """k is a scalar: an int, a 0-d integer array or a 1-element integer tensor (NumPy, CuPy, torch)."""
    shape = getattr(k, "shape", None)
    if shape is not None and tuple(shape) != () and math.prod(shape) == 1:
        k = k.reshape(())
    try:
        return _checks.as_index(k, "k")
    except TypeError:
        raise TypeError(f"k: expected an integer scalar, got {type(k).__name__} {k!r}") from None


def top_k(
    data: Array, k: Integer | Array, axis: int, mode: str, sort: str, index_element_type: str = "i32"
) -> TopK:
    """OpenVINO ``TopK-1``.

    Parameters
    ----------
    data : array
        Input tensor (NumPy, CuPy or torch).
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
    _frontend.check_tensor("OpenVINO TopK", "data", data, OPENVINO_DTYPES)
    kk = _check_k(k)
    mode = _frontend.check_string("mode", mode, MODES)
    order = _frontend.check_string("sort", sort, SORTS)
    index_type = _frontend.check_string("index_element_type", index_element_type, INDEX_TYPES)
    _frontend.check_axis_and_k("data", data, axis, kk, "k", index_type, "index_element_type")
    return _top_k(data, kk, axis=axis, mode=mode, sorted=order, nan="largest", index_dtype=index_type)
