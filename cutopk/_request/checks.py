"""Argument checking and normalisation for every entry point.

Every public function funnels its arguments through :func:`normalize`, which raises the errors of
docs/SPEC.md (before any work is done) and returns a :class:`Request` that the backends consume. The
backends therefore never see an invalid argument and never have to re-check one.
"""

from __future__ import annotations

import dataclasses
import numbers
import operator

import numpy as np
from numpy.exceptions import AxisError

from . import dtypes as _dtypes

MODES = ("largest", "smallest")
ORDERS = {True: "value", "value": "value", "index": "index", False: "none"}
NAN_POLICIES = ("last", "largest")
BACKENDS = ("auto", "numpy", "cuda", "sim")
INDEX_DTYPES = {np.dtype(t): np.iinfo(t).max for t in (np.int64, np.int32, np.uint32, np.uint64)}


@dataclasses.dataclass(frozen=True)
class Request:
    """A validated top-K request, independent of the array it applies to.

    Attributes
    ----------
    k : int
        Number of elements to select, ``0 <= k <= n``.
    axis : int
        Non-negative axis along which to select.
    n : int
        Length of that axis.
    largest : bool
        True for ``mode="largest"``.
    order : str
        ``"value"`` (sorted by preference, ties by index), ``"index"`` (ascending index) or
        ``"none"`` (any order; the selected set is the same).
    nan_largest : bool
        True for ``nan="largest"`` (NaN ranks above +inf); False for ``nan="last"`` (NaN is
        never preferred over a number).
    index_dtype : numpy.dtype
        One of int64, int32, uint32, uint64, already checked to hold ``n - 1``.
    backend : str
        The resolved backend: ``"numpy"``, ``"cuda"`` or ``"sim"``.
    algorithm : str
        ``"auto"`` or an algorithm name; the backend checks that it exists and applies.
    """

    k: int
    axis: int
    n: int
    largest: bool
    order: str
    nan_largest: bool
    index_dtype: np.dtype
    backend: str
    algorithm: str

    @property
    def nan_first(self) -> bool:
        """Whether NaN is the most preferred value (rather than the least) under this request."""
        return self.nan_largest and self.largest


def _choices(values) -> str:
    return ", ".join(repr(v) for v in values)


def check_k(k, n: int, axis: int, name: str = "k") -> int:
    """Return ``k`` as an int after checking it is an integer in ``[0, n]``.

    Anything ``operator.index`` accepts is an integer (Python and NumPy integers, 0-d integer
    arrays and tensors), except booleans and arrays of any other rank (docs/SPEC.md)."""
    if type(k) is not int:
        k = as_index(k, name)
    if k < 0 or k > n:
        raise ValueError(f"{name}: expected 0 <= {name} <= {n} (the length of axis {axis}), got {name}={k}")
    return k


def as_index(value, name: str) -> int:
    """``operator.index(value)`` for a non-bool integer scalar or 0-d integer array, else TypeError."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if isinstance(value, (bool, np.bool_)) or (dtype is not None and "bool" in str(dtype)):
        raise TypeError(f"{name}: expected an integer, got bool {value!r}")
    if shape is not None and tuple(shape) != ():
        raise TypeError(f"{name}: expected an integer, got a {len(shape)}-d array {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__} {value!r}") from None


def check_axis(axis, ndim: int, array_name: str = "a") -> int:
    """Return ``axis`` normalised to ``[0, ndim)``; rank-0 input and bad axes are errors."""
    if ndim == 0:
        raise ValueError(f"{array_name}: expected an array of rank >= 1, got a rank-0 (scalar) array")
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (numbers.Integral, np.integer)):
        raise TypeError(f"axis: expected an integer, got {type(axis).__name__} {axis!r}")
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise AxisError(axis, ndim, "axis")
    return axis % ndim


def check_choice(name: str, value, choices) -> None:
    """Raise ValueError listing ``choices`` when ``value`` is not one of them."""
    try:
        ok = value in choices
    except TypeError:  # unhashable value given for a dict of choices
        ok = False
    if not ok or isinstance(value, (np.ndarray,)):
        raise ValueError(f"{name}: expected one of {_choices(choices)}, got {value!r}")


def check_order(sorted_) -> str:
    """Map the ``sorted`` argument to "value", "index" or "none"."""
    # True == 1 and False == 0 in Python, so reject ints explicitly: sorted=1 is not a valid choice.
    if isinstance(sorted_, bool) or (isinstance(sorted_, str) and sorted_ in ORDERS):
        return ORDERS[sorted_]
    if isinstance(sorted_, np.bool_):
        return ORDERS[bool(sorted_)]
    raise ValueError(f"sorted: expected one of True, 'value', 'index', False, got {sorted_!r}")


def request_arguments(req: Request) -> tuple:
    """``(mode, sorted, nan, index_dtype, backend, algorithm)``: arguments of :func:`cutopk.top_k`
    that make ``req`` again (for a call on another view of the same input)."""
    sorted_ = {"value": True, "index": "index", "none": False}[req.order]
    mode, nan = ("largest" if req.largest else "smallest"), ("largest" if req.nan_largest else "last")
    return mode, sorted_, nan, req.index_dtype, req.backend, req.algorithm


def check_index_dtype(index_dtype, n: int, name: str = "index_dtype") -> np.dtype:
    """Return the index dtype after checking it is supported and can hold ``n - 1``.

    NumPy dtypes and their torch twins (``torch.int32``) are both accepted."""
    try:
        dt = _dtypes.as_numpy_dtype(index_dtype)
    except TypeError:
        dt = None
    if dt not in INDEX_DTYPES:
        names = ", ".join(str(d) for d in INDEX_DTYPES)
        raise ValueError(f"{name}: expected one of {names}, got {index_dtype!r}")
    if n - 1 > INDEX_DTYPES[dt]:
        raise ValueError(
            f"{name}: {dt} cannot hold indices up to {n - 1} along an axis of length {n}; use int64 or uint64"
        )
    return dt


def array_kind(a, name: str = "a") -> str:
    """Classify the input: "numpy", "cupy" (CuPy or any CUDA array), or raise TypeError."""
    if isinstance(a, (np.ndarray, np.generic)):
        return "numpy"
    module = type(a).__module__.split(".")[0]
    if module == "cupy" or _has_cuda_array_interface(a):
        return "cupy"
    if hasattr(a, "__dlpack_device__"):
        try:
            device_type, _ = a.__dlpack_device__()
        except Exception:  # noqa: BLE001 - any failure means it is not a usable DLPack array
            device_type = None
        if device_type == 2:  # kDLCUDA
            return "cupy"
        if device_type == 1:  # kDLCPU
            return "numpy"
    raise TypeError(
        f"{name}: expected a NumPy array, a CuPy array or a CUDA array with __cuda_array_interface__ "
        f"or DLPack, got {type(a).__module__}.{type(a).__qualname__}"
    )


def _has_cuda_array_interface(a) -> bool:
    """Whether ``a`` exports ``__cuda_array_interface__``. An export that raises anything but
    AttributeError still says the array is on a GPU: torch raises RuntimeError for a CUDA tensor
    that requires grad (which ``hasattr`` does not catch), and such a tensor under
    ``torch.no_grad()`` is a GPU input like any other."""
    try:
        return hasattr(a, "__cuda_array_interface__")
    except Exception:  # noqa: BLE001 - the attribute is there, its export refused
        return True


def describe_array(a) -> str:
    """How an error message names the array it was given."""
    if isinstance(a, np.ndarray):
        return "a NumPy array"
    device = "a GPU array" if array_kind(a) == "cupy" else "a CPU array"
    return f"{device} ({type(a).__module__}.{type(a).__qualname__})"


def resolve_backend(backend, kind: str, a=None) -> str:
    """Pick the backend for an array of ``kind``; raise TypeError when they do not match."""
    check_choice("backend", backend, BACKENDS)
    if backend == "auto":
        return "cuda" if kind == "cupy" else "numpy"
    wanted = "cupy" if backend == "cuda" else "numpy"
    if kind != wanted:
        if a is not None:
            given = describe_array(a)
        else:  # the kind of a lazy array's chunks (Dask)
            given = "a GPU array" if kind == "cupy" else "a NumPy array"
        expected = "a CuPy/CUDA array" if backend == "cuda" else "a NumPy array"
        raise TypeError(f"backend: backend={backend!r} expects {expected}, got {given}")
    return backend


def as_host_array(a):
    """A plain NumPy view of a CPU input: ndarray subclasses are viewed as ``numpy.ndarray``, NumPy
    scalars become rank-0 arrays (refused later with a clear error) and other CPU DLPack arrays (a
    torch CPU tensor, say) are wrapped without a copy."""
    if isinstance(a, np.ma.MaskedArray):
        # Selecting among masked-out elements would be a silent wrong answer.
        raise TypeError(
            "a: expected an array without a mask, got a numpy.ma.MaskedArray; "
            "pass a.filled(value) or a.compressed() instead"
        )
    if isinstance(a, np.ndarray):
        # A subclass (np.matrix, np.memmap, a user's own) is seen as the plain ndarray it holds,
        # without a copy: every route then returns numpy.ndarray results, where NumPy calls inside
        # some routes would keep the subclass and others drop it.
        return a if type(a) is np.ndarray else a.view(np.ndarray)
    if isinstance(a, np.generic):
        return np.asarray(a)
    return np.from_dlpack(a)


def check_algorithm(algorithm, backend: str | None = None, names: tuple[str, ...] | None = None) -> None:
    """The one check of ``algorithm=``: a str, and with ``names`` (the backend's list,
    :func:`cutopk.algorithms`) ``"auto"`` or one of them. Whether a named algorithm can handle a
    given shape is the backend's question (the dispatcher's ``why_not``)."""
    if not isinstance(algorithm, str):
        raise ValueError(f"algorithm: expected 'auto' or an algorithm name (a str), got {algorithm!r}")
    if names is not None and algorithm != "auto" and algorithm not in names:
        raise ValueError(
            f"algorithm: expected 'auto' or one of {names} for backend {backend!r}, got {algorithm!r}"
        )


def normalize(a, k, axis, mode, sorted_, nan, index_dtype, backend, algorithm, kind=None) -> Request:
    """Check every argument of :func:`cutopk.top_k` and return the normalised request.

    Raises the errors listed in docs/SPEC.md; never touches the array's data. ``kind`` overrides the
    array kind (a Dask array passes that of its chunks).
    """
    given_kind = kind
    kind = array_kind(a) if kind is None else kind
    check_choice("mode", mode, MODES)
    order = check_order(sorted_)
    check_choice("nan", nan, NAN_POLICIES)
    check_algorithm(algorithm)
    resolved = resolve_backend(backend, kind, a if given_kind is None else None)
    _dtypes.check_dtype(a.dtype)
    ax = check_axis(axis, len(a.shape))
    if a.shape[ax] != a.shape[ax]:  # NaN: a lazy array whose length is not known yet
        raise ValueError(
            f"a: the length of axis {ax} is unknown (NaN chunk sizes); call a.compute_chunk_sizes() first"
        )
    n = int(a.shape[ax])
    kk = check_k(k, n, ax)
    idx = check_index_dtype(index_dtype, n)
    return Request(
        k=kk,
        axis=ax,
        n=n,
        largest=mode == "largest",
        order=order,
        nan_largest=nan == "largest",
        index_dtype=idx,
        backend=resolved,
        algorithm=algorithm,
    )
