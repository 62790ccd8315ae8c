"""The public entry points of the core: :func:`top_k`, :func:`plan`, :func:`algorithms` (the
package root re-exports them). A call whose input autograd records goes through
:mod:`cutopk._core.autograd`; every other call is :func:`cutopk._core.select.select`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import numpy as np

from .._interop import is_torch_tensor, requires_grad
from .._request import checks as _checks
from .._request.plan import Plan
from . import call as _call
from . import lengths as lengths_
from .result import Array, DType, Integer, TopK
from .select import select

_new_tuple = tuple.__new__  # what a NamedTuple's __new__ calls


def top_k(
    a: Array,
    k: Integer,
    /,
    *,
    axis: int = -1,
    mode: str = "largest",
    sorted: bool | str = True,
    nan: str = "last",
    index_dtype: DType = np.int64,
    backend: str = "auto",
    algorithm: str = "auto",
    lengths: Array | None = None,
    out: Sequence[Array] | None = None,
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
    lengths : integer array or sequence, optional
        Of the shape of ``a`` without ``axis`` (NumPy, the input's own array kind, or a list or
        tuple of ints, nested for several batch axes): row r takes
        part with its first ``lengths[r]`` elements only; a row shorter than ``k`` ends in padding
        (index -1, value 0). Needs a signed ``index_dtype``.
    out : (values, indices), optional
        A tuple or a list of the two: preallocated C-contiguous outputs of the result's shape, dtypes, array type and device, not
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
    if lengths is None and out is None:  # a repeated call, in few steps
        if type(a) is np.ndarray:
            call = _call.cached_ndarray(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm)
            if call is not None:
                return TopK(*call.plain(a))
        else:
            call = _call.cached_cupy(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm)
            if call is not None:  # the pair made a TopK as its __new__ does, without that frame
                return _new_tuple(TopK, call.plain(a))
    if out is None and is_torch_tensor(a):
        # The registered operator (one opaque node to torch.compile, its own autograd formula).
        from . import torch_op

        result = torch_op.call(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm, lengths)
        if result is not None:
            return TopK(*result)
    if requires_grad(a):
        from . import autograd

        if autograd.records(a):
            if out is not None:
                raise ValueError(
                    "out: cannot be used with an input that requires grad (values carry its gradient)"
                )
            return TopK(
                *autograd.top_k(
                    a, axis, _forward(k, mode, sorted, nan, index_dtype, backend, algorithm, lengths)
                )
            )
    return select(a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm, lengths, out)


def algorithms(backend: str = "cuda") -> tuple[str, ...]:
    """Names accepted by ``top_k(..., algorithm=...)`` on ``backend``.

    >>> import cutopk
    >>> cutopk.algorithms("numpy")
    ('select',)
    """
    _checks.check_choice("backend", backend, _checks.BACKENDS[1:])
    return _call.algorithm_names(backend)


def plan(
    a: Array,
    k: Integer,
    /,
    *,
    axis: int = -1,
    mode: str = "largest",
    sorted: bool | str = True,
    nan: str = "last",
    index_dtype: DType = np.int64,
    backend: str = "auto",
    algorithm: str = "auto",
    lengths: Array | None = None,
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
    arr, _, scope, call, cached = _call.prepare(
        a, k, axis, mode, sorted, nan, index_dtype, backend, algorithm
    )
    if lengths is None:
        return call.describe(cached, arr)
    # The variant that reads the lengths is planned on the array's device too (its facts: the
    # shared memory a block may take); its kernels are built by its first call, not here.
    with scope if scope is not None else contextlib.nullcontext():
        _, longest = lengths_.check(lengths, arr, call.req)
        arr, call = lengths_.narrowed(arr, call, longest)
        kernel_call = _call.lengths_call(arr, call)
    if kernel_call is not None:
        planned = kernel_call.describe(cached, arr)
        return lengths_.describe_in_kernel(planned, arr.shape[call.req.axis], longest is not None)
    return lengths_.describe(call.describe(cached, arr), arr)


def _forward(
    k: Integer,
    mode: str,
    sorted: bool | str,
    nan: str,
    index_dtype: DType,
    backend: str,
    algorithm: str,
    lengths: Array | None,
) -> Callable[[Array, int], TopK]:
    """The selection autograd runs on the detached input: the axis comes checked."""

    def run(detached: Array, axis: int) -> TopK:
        return select(detached, k, axis, mode, sorted, nan, index_dtype, backend, algorithm, lengths)

    return run


# The check of a forced algorithm's name, for the front ends that reach the core here (cutopk.dask).
check_algorithm_name = _call.check_algorithm_name
