"""The one table of supported element types.

Every backend looks dtypes up here: which are accepted, whether they are floating point, the
width of their order-preserving unsigned key, and the C++ type name the kernels are instantiated
with. bfloat16 is a NumPy dtype only through the optional ``ml_dtypes`` package.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class DtypeInfo:
    """Facts about one supported element type.

    Attributes
    ----------
    name : str
        NumPy's name for the dtype.
    cxx : str
        The C++ type the kernels are instantiated with.
    is_float : bool
        Floating point (has NaN, -0.0).
    is_signed : bool
        Signed (floats are signed).
    key_dtype : numpy.dtype
        Unsigned integer type of the same width: the order-preserving key.
    """

    name: str
    cxx: str
    is_float: bool
    is_signed: bool
    key_dtype: np.dtype

    @property
    def itemsize(self) -> int:
        return self.key_dtype.itemsize


def _bfloat16_dtype():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


_CXX = {
    "float16": "__half",
    "float32": "float",
    "float64": "double",
    "int8": "signed char",
    "int16": "short",
    "int32": "int",
    "int64": "long long",
    "uint8": "unsigned char",
    "uint16": "unsigned short",
    "uint32": "unsigned int",
    "uint64": "unsigned long long",
    "bfloat16": "__nv_bfloat16",
}


def _entry(name: str, dt: np.dtype) -> DtypeInfo:
    is_float = name.startswith(("float", "bfloat"))
    return DtypeInfo(
        name=name,
        cxx=_CXX[name],
        is_float=is_float,
        is_signed=is_float or name.startswith("int"),
        key_dtype=np.dtype(f"uint{dt.itemsize * 8}"),
    )


class _Table(dict):
    """The supported dtypes, ``{dtype: DtypeInfo}``, in ``_CXX``'s order. bfloat16 joins when it
    is first needed, never at import (``import ml_dtypes`` takes 0.6-1.3 s, ten times NumPy's
    own import): where a bfloat16 dtype is looked up (its array exists, so ml_dtypes is imported
    already) or the table is listed. A lookup that finds its dtype is a plain dict lookup."""

    _complete = False

    def _add_bfloat16(self) -> None:
        if not self._complete:
            dt = _bfloat16_dtype()
            if dt is not None:
                dict.__setitem__(self, dt, _entry("bfloat16", dt))
            self._complete = True

    def _needs(self, dtype) -> bool:
        """Whether ``dtype``, not in the table yet, is bfloat16 (which joins it now)."""
        if self._complete or getattr(dtype, "name", None) != "bfloat16":
            return False
        self._add_bfloat16()
        return dict.__contains__(self, dtype)

    def __missing__(self, dtype):
        if self._needs(dtype):
            return dict.__getitem__(self, dtype)
        raise KeyError(dtype)

    def __contains__(self, dtype) -> bool:
        return dict.__contains__(self, dtype) or self._needs(dtype)

    def __iter__(self):
        self._add_bfloat16()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._add_bfloat16()
        return dict.__len__(self)

    def keys(self):  # the same views, the table completed first
        self._add_bfloat16()
        return dict.keys(self)

    def values(self):
        self._add_bfloat16()
        return dict.values(self)

    def items(self):
        self._add_bfloat16()
        return dict.items(self)


def _base_table() -> _Table:
    """A table of every supported dtype but bfloat16, which joins it when needed."""
    return _Table({np.dtype(name): _entry(name, np.dtype(name)) for name in _CXX if name != "bfloat16"})


SUPPORTED = _base_table()


def info(dtype) -> DtypeInfo:
    """Return the :class:`DtypeInfo` of a supported dtype (native byte order assumed)."""
    return SUPPORTED[np.dtype(dtype).newbyteorder("=")]


def as_numpy_dtype(dtype) -> np.dtype:
    """The NumPy dtype of a NumPy/CuPy dtype, a torch dtype (``torch.float32``, ``torch.bfloat16``)
    or anything ``numpy.dtype`` accepts; raises TypeError when there is none."""
    if isinstance(dtype, np.dtype):
        return dtype
    if type(dtype).__module__ == "torch":  # torch.dtype: its name is NumPy's, bfloat16 aside
        name = str(dtype).removeprefix("torch.")
        if name == "bfloat16":
            dt = _bfloat16_dtype()
            if dt is None:
                raise TypeError("bfloat16 needs the ml_dtypes package (pip install ml_dtypes)")
            return dt
        try:
            return np.dtype(name)
        except TypeError:
            raise TypeError(f"{dtype} has no NumPy equivalent") from None
    return np.dtype(dtype)


def check_dtype(dtype, name: str = "a") -> DtypeInfo:
    """Return the dtype's info, or raise TypeError naming the argument and the unsupported dtype."""
    try:
        dt = as_numpy_dtype(dtype)
    except TypeError:
        dt = None
    native = None if dt is None else dt.newbyteorder("=") if dt.byteorder not in ("=", "|") else dt
    if native not in SUPPORTED:
        names = ", ".join(i.name for i in SUPPORTED.values())
        raise TypeError(f"{name}: unsupported dtype {dtype if dt is None else dt} (expected one of {names})")
    return SUPPORTED[native]


def least_preferred(dtype, largest: bool, nan_largest: bool) -> np.ndarray:
    """A 0-d NumPy array of ``dtype`` holding the value that no element is preferred to under
    ``mode``/``nan``; it may tie with real elements (that is then settled by position)."""
    if info(dtype).is_float:
        value = -np.inf if largest and nan_largest else np.nan
    else:
        limits = np.iinfo(dtype)
        value = limits.min if largest else limits.max
    return np.array(value, dtype=dtype)
