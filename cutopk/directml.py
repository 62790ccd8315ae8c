"""DirectML TOP_K1 (and TOP_K, its decreasing case) on top of :func:`cutopk.top_k`.

DirectML's rules: 1 to 8 dimensions, a non-negative axis below the dimension count, 0 < K < the
axis length (both DirectML documents: K "must be greater than 0, but less than the number of
elements ... along Axis"), the
data types of its tensor-support table, UINT32 or UINT64 indices. Values are sorted (descending
for "decreasing"), ties by ascending index. NaN ranks above +inf (``nan="largest"``).
"""

from __future__ import annotations

import numpy as np

from . import _frontend
from ._core.entry import top_k as _top_k
from ._core.result import Array, TopK
from ._request import checks as _checks

DIRECTIONS = {"decreasing": "largest", "increasing": "smallest"}
INDEX_TYPES = {"uint32": np.uint32, "uint64": np.uint64}
DML_DTYPES = ("float16", "float32", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _check_uint(name: str, value: object) -> int:
    try:
        value = _checks.as_index(value, name)
    except TypeError:
        raise TypeError(
            f"{name}: expected a non-negative integer (UINT), got {type(value).__name__} {value!r}"
        ) from None
    if value < 0:
        raise ValueError(f"{name}: expected a non-negative integer (UINT), got {value}")
    return value


def top_k(
    input: Array, axis: int, k: int, axis_direction: str = "decreasing", index_dtype: str = "uint32"
) -> TopK:
    """DirectML ``DML_TOP_K1_OPERATOR_DESC``.

    Errors name DirectML's own fields (``input``, ``axis``, ``K``) and quote its rules.

    Examples
    --------
    >>> import numpy as np
    >>> from cutopk import directml
    >>> x = np.array([[[[1, 2, 2, 3], [3, 4, 5, 5], [6, 6, 6, 6]]]], dtype=np.float32)
    >>> directml.top_k(x, axis=3, k=3).indices[0, 0].tolist()
    [[3, 1, 2], [2, 3, 1], [0, 1, 2]]
    """
    _frontend.check_tensor("DirectML TOP_K1", "input", input, DML_DTYPES)
    ndim = len(input.shape)
    if not 1 <= ndim <= 8:
        raise ValueError(f"input: DirectML supports 1 to 8 dimensions, got {ndim}")
    ax = _check_uint("axis", axis)
    if ax >= ndim:
        raise ValueError(f"axis: expected an axis below the dimension count {ndim}, got {ax}")
    kk = _check_uint("K", k)
    n = int(input.shape[ax])
    if not 0 < kk < n:
        raise ValueError(
            f'K: DirectML requires that K "must be greater than 0, but less than the number of elements '
            f'in the InputTensor along the dimension specified by Axis" ({n} along axis {ax}), got K={kk}'
        )
    mode = _frontend.check_string("axis_direction", axis_direction, DIRECTIONS)
    index_type = _frontend.check_string("index_dtype", index_dtype, INDEX_TYPES)
    _frontend.check_axis_and_k("input", input, ax, kk, "K", index_type, "index_dtype")
    return _top_k(input, kk, axis=ax, mode=mode, sorted=True, nan="largest", index_dtype=index_type)
