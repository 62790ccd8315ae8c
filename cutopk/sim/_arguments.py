"""A simulator launch's arguments checked against the kernel's parameters: what each parameter
is (:class:`Parameter`, read from the compiled module), which arrays and scalars it takes, and the
words the errors use. Runs at every launch, so verdicts are cached and messages built only on the
way to raising."""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

KIND_NAMES = {
    "p": "pointer",
    "i": "signed integer",
    "u": "unsigned integer",
    "f": "floating-point number",
    "h": "__half",
    "b": "__nv_bfloat16",
    "B": "bool",
    "?": "value",
}


def python_scalar(arg):
    """A Python scalar as CuPy passes it to a kernel: int (and bool, an int) as int64, float as
    float64, complex as complex128."""
    if isinstance(arg, int):
        return np.int64(arg)
    if isinstance(arg, float):
        return np.float64(arg)
    if isinstance(arg, complex):
        return np.complex128(arg)
    return arg


def scalar_kind(dtype: np.dtype) -> str:
    if dtype.name == "bfloat16":
        return "b"
    if dtype == np.float16:
        return "h"
    return {"i": "i", "u": "u", "f": "f", "b": "B"}.get(dtype.kind, "?")


def describe_given(arg, scalar) -> str:
    kind = scalar_kind(scalar.dtype)
    return f"{type(arg).__module__}.{type(arg).__name__} ({scalar.dtype.itemsize}-byte {KIND_NAMES[kind]})"


PRETTY_TYPE = re.compile(r"\[(?:with )?T = (?P<type>.*)\]\s*$")
# Pointees that take an array of any element type: void, plain char (raw memory), and what has
# no NumPy counterpart (a function, an incomplete type).
ANY_ELEMENT = frozenset("vc?")


class Parameter(NamedTuple):
    """One kernel parameter, as the compiler sees it after template substitution.

    ``type`` is the C++ spelling (``const float*``); ``name`` comes from the source ("" where it
    cannot be read); ``kind``/``size`` as in :attr:`Function.params`; for a pointer, ``pointee`` is
    the element's kind letter (or v void, c plain char, r struct/class/union, p pointer) with its
    size and alignment.
    """

    position: int
    name: str
    type: str
    kind: str
    size: int
    pointee: str = ""
    pointee_size: int = 0
    pointee_align: int = 1

    def label(self) -> str:
        """``name: type`` (or the type alone when the name is unknown)."""
        return f"{self.name}: {self.type}" if self.name else self.type


def _dtype_name(kind: str, size: int) -> str:
    """The NumPy dtype standing for a C++ element of ``kind`` and ``size`` bytes."""
    if kind in "iuf":
        return {"i": "int", "u": "uint", "f": "float"}[kind] + str(8 * size)
    return {"h": "float16", "b": "bfloat16", "B": "bool"}.get(kind, "?")


class ElementRule:
    """Which array element types a pointer parameter takes, decided once per dtype."""

    def __init__(self, param: Parameter):
        self.param = param
        self.align = max(1, param.pointee_align)
        self._verdicts: dict[np.dtype, bool] = {}
        kind, size = param.pointee, param.pointee_size
        if kind == "r":
            element = re.sub(r"\s*\*$", "", re.sub(r"\bconst\b|\bvolatile\b", "", param.type)).strip()
            self.expected = (
                f"a byte array (uint8 or int8: raw storage) or one of {size}-byte elements, "
                f"for the {size}-byte {element}"
            )
        elif kind == "p":
            self.expected = f"an array of {size}-byte integers (pointers), uint64 or int64"
        else:
            self.expected = f"an array of {_dtype_name(kind, size)}"

    def accepts(self, dtype: np.dtype) -> bool:
        verdict = self._verdicts.get(dtype)
        if verdict is None:
            verdict = self._verdicts[dtype] = self._decide(dtype)
        return verdict

    def _decide(self, dtype: np.dtype) -> bool:
        kind, size = self.param.pointee, self.param.pointee_size
        if not dtype.isnative or dtype.hasobject:
            return False  # a kernel reads neither swapped bytes nor Python objects
        if kind == "r":
            # A struct has no NumPy dtype of its own: byte storage, or elements of its exact size
            # (a structured dtype, complex64 for a float2), and the address is checked for alignment.
            return (dtype.kind in "iu" and dtype.itemsize == 1) or dtype.itemsize == size
        if kind == "p":
            return dtype.kind in "iu" and dtype.itemsize == size
        return scalar_kind(dtype) == kind and dtype.itemsize == size


def byte_bounds(arg: np.ndarray, pointer: int) -> tuple[int, int]:
    """The bytes ``[lo, hi)`` that ``arg`` (with data pointer ``pointer``) covers; what
    ``np.lib.array_utils.byte_bounds`` gives, without its second ``__array_interface__``."""
    if not arg.size:
        return pointer, pointer
    if arg.flags.c_contiguous or arg.flags.f_contiguous:
        return pointer, pointer + arg.nbytes
    lo = hi = pointer
    for extent, stride in zip(arg.shape, arg.strides, strict=True):
        if stride < 0:
            lo += (extent - 1) * stride
        else:
            hi += (extent - 1) * stride
    return lo, hi + arg.itemsize


def dim3(value, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(int(d) < 0 for d in dims):
        raise ValueError(f"{what}: expected an int or up to 3 non-negative ints, got {value!r}")
    x, y, z = (*(int(d) for d in dims), 1, 1)[:3]
    return x, y, z


def dtype_label(dtype: np.dtype) -> str:
    """A dtype with its article, as an error message names it: ``a float64``, ``an int32``."""
    name = str(dtype) if dtype.fields is None else f"structured {dtype.itemsize}-byte {dtype}"
    return f"{'an' if name[0] in 'aeio' else 'a'} {name}"
