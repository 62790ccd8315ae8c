"""Helpers shared by the operator-spec front ends (onnx, openvino, directml).

A front end checks its whole call in its own spec's terms (``X``/``K`` for ONNX, ``data`` for
OpenVINO, ``input``/``K`` for DirectML) before it calls :func:`cutopk.top_k`, so every error a
user of that spec sees names the spec's arguments; ``top_k`` then has nothing left to refuse.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._request import checks as _checks
from ._request import dtypes as _dtypes


def check_flag(name: str, value) -> bool:
    """An ONNX-style 0/1 integer attribute."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name}: expected the integer 0 or 1, got {type(value).__name__} {value!r}")
    if value not in (0, 1):
        raise ValueError(f"{name}: expected 0 or 1, got {value!r}")
    return bool(value)


def check_string(name: str, value, mapping: dict):
    """A string attribute with a fixed set of values; returns the mapped value."""
    if not isinstance(value, str) or value not in mapping:
        choices = ", ".join(repr(v) for v in mapping)
        raise ValueError(f"{name}: expected one of {choices}, got {value!r}")
    return mapping[value]


def check_tensor(spec: str, name: str, x, allowed: tuple[str, ...]) -> None:
    """The input tensor: an array ``top_k`` accepts, of an element type the spec lists."""
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        raise TypeError(
            f"{name}: expected a tensor (a NumPy, CuPy or torch array), got {type(x).__module__}."
            f"{type(x).__qualname__}; wrap a list with numpy.asarray first"
        )
    _checks.array_kind(x, name)
    info = _dtypes.check_dtype(x.dtype, name)
    if info.name not in allowed:
        raise TypeError(
            f"{name}: {spec} does not support dtype {info.name} (expected one of {', '.join(allowed)})"
        )


def check_axis_and_k(name: str, x, axis: int, k: int, k_name: str, index_dtype, index_name: str) -> int:
    """The axis, K against its length, and the index type against it, named as the spec names
    them; returns the axis length."""
    ax = _checks.check_axis(axis, len(x.shape), name)
    n = int(x.shape[ax])
    _checks.check_k(k, n, ax, k_name)
    _checks.check_index_dtype(index_dtype, n, index_name)
    return n
