"""Helpers shared by the operator-spec front ends (onnx, openvino, directml)."""

from __future__ import annotations

import numbers

import numpy as np

from . import _dtypes


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


def check_dtypes(spec: str, dtype, allowed: tuple[str, ...]) -> None:
    """Refuse element types the spec does not list (before the core's own dtype check)."""
    info = _dtypes.check_dtype(dtype)
    if info.name not in allowed:
        raise TypeError(
            f"X: {spec} does not support dtype {info.name} (expected one of {', '.join(allowed)})"
        )
