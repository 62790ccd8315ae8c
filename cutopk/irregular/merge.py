"""Exact merge of partial top-K results: the one merge in the package (``cutopk.dask`` uses it).

:func:`merge_top_k` takes the ``(values, indices)`` pairs that ``top_k`` calls made from disjoint
sets of candidates, with indices in one common index space, and returns the top K of their union
under SPEC.md's rules, exactly as ``top_k`` on the whole would.

GPU parts (CuPy, CUDA torch) are merged by cutopk's own kernel (kernels/merge.cu), through the
core's prepared call like every GPU call (``cutopk/_core/call.py`` ``merge_call``: planned once
per signature, its launches run by the CUDA backend's runner, so :func:`plan` describes them):
the parts read where they lie, one launch for up to 8 parts, two for up to 15, no host
synchronisation. Rows with more candidates than a block's shared memory holds, and NumPy parts,
take the library route below.

The library route, for a batch of rows (the last axis holds the candidates):

1. The parts are concatenated along the last axis.
2. **Padding** (a negative index: ``top_k`` writes -1 for rows shorter than K) gets the *least
   preferred* value of the request: NaN for ``nan="last"``, and for ``nan="largest"`` -inf
   (largest) or NaN (smallest); the dtype's minimum or maximum for integers.
3. The candidates of each row are put in ascending order of their index (an argsort of the
   indices viewed as unsigned, so padding, -1, goes after every real index).
4. ``top_k`` on these values selects and orders them. It breaks ties by lower *position*, and
   position order is now index order: that is the lower-index rule of SPEC.md. A padding entry
   is never preferred over a real candidate: its value is the least preferred one, and where a
   real candidate has that same value, the real one sits at a lower position.
5. The winners' indices are read back by position; winners that are padding (a row with fewer
   than K real candidates) come out as index -1 and value 0, after the real ones (they are least
   preferred and last in index order), as SPEC.md's ``lengths`` padding.

So the comparison itself (values, -0.0 == +0.0, NaN policy, integers at full range) is
``top_k``'s own, through its order-preserving keys: the NumPy backend for NumPy parts, the CUDA
kernels for CuPy parts. Nothing here compares raw values. Neither route makes a host
synchronisation (every check looks at shapes and dtypes only).

Not checked (it would cost a pass over the data, or a device synchronisation): that the parts
really are disjoint and that each holds the top ``min(k, size)`` of its own candidates; a
repeated index is merged as two candidates.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence

import numpy as np

from .. import _interop
from .._core import call as _call
from .._core.result import TopK
from .._core.select import select
from .._request import checks as _checks
from .._request import dtypes as _dtypes
from .._request.plan import Launch, Plan

# Index dtypes a part may carry: those of top_k's index_dtype.
_INDEX_DTYPES = tuple(_checks.INDEX_DTYPES)


def _as_pairs(parts) -> list:
    """The parts as a list of 2-sequences, or a TypeError naming what is wrong."""
    if isinstance(parts, TopK):
        raise TypeError(
            "parts: expected a sequence of TopK results or (values, indices) pairs, got a single "
            "TopK; pass [result, ...]"
        )
    if not isinstance(parts, Sequence) or isinstance(parts, (str, bytes)):
        raise TypeError(
            "parts: expected a sequence (list or tuple) of TopK results or (values, indices) pairs, "
            f"got {type(parts).__module__}.{type(parts).__qualname__}"
        )
    if len(parts) == 0:
        raise ValueError("parts: expected at least one (values, indices) pair, got an empty sequence")
    pairs = []
    for i, part in enumerate(parts):
        try:
            values, indices = part
        except (TypeError, ValueError):
            raise TypeError(
                f"parts[{i}]: expected a TopK result or a (values, indices) pair, "
                f"got {type(part).__module__}.{type(part).__qualname__}"
            ) from None
        pairs.append((values, indices))
    return pairs


def _convert(pairs: list):
    """Every array as the backend takes it (NumPy, or CuPy without a copy), plus the function
    handing results back as the caller's array type and the device scope to work in."""
    kind = None
    for i, (values, indices) in enumerate(pairs):
        for name, arr in (("values", values), ("indices", indices)):
            try:
                this = _checks.array_kind(arr)
            except TypeError:
                raise TypeError(
                    f"parts[{i}].{name}: expected a NumPy array, a CuPy array or a CUDA array, "
                    f"got {type(arr).__module__}.{type(arr).__qualname__}"
                ) from None
            if kind is None:
                kind = this
            elif this != kind:
                raise TypeError(
                    f"parts[{i}].{name}: expected a {'GPU' if kind == 'cupy' else 'CPU'} array like "
                    f"parts[0].values, got a {'GPU' if this == 'cupy' else 'CPU'} array"
                )
    back = None
    scope: contextlib.AbstractContextManager = contextlib.nullcontext()
    converted = []
    for i, (values, indices) in enumerate(pairs):
        pair = []
        for name, arr in (("values", values), ("indices", indices)):
            try:
                if kind == "numpy":
                    arr, conv = _interop.as_host(arr)
                else:
                    arr, conv, this_scope = _interop.as_cupy(arr)
                    if back is None:
                        scope = this_scope
            except TypeError as exc:  # a masked array, say
                raise renamed(exc, f"parts[{i}].{name}") from None
            back = conv if back is None else back
            pair.append(arr)
        converted.append(tuple(pair))
    return kind, converted, back, scope


def _native(dtype: np.dtype) -> np.dtype:
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def _check_arrays(pairs: list) -> tuple[np.dtype, np.dtype, tuple]:
    """Check dtypes and shapes; return the values dtype, the index dtype (both in native byte
    order: a dtype of either byte order is accepted, as top_k accepts it) and the batch shape."""
    values0, indices0 = pairs[0]
    vdt, idt = _native(values0.dtype), _native(indices0.dtype)
    for i, (values, indices) in enumerate(pairs):
        try:
            _dtypes.check_dtype(values.dtype)
        except TypeError as exc:
            raise TypeError(f"parts[{i}].values{str(exc)[1:]}") from None
        if _native(values.dtype) != vdt:
            raise TypeError(
                f"parts[{i}].values: expected dtype {vdt} like parts[0].values, got {values.dtype}"
            )
        if _native(indices.dtype) not in _INDEX_DTYPES:
            names = ", ".join(str(d) for d in _INDEX_DTYPES)
            raise TypeError(f"parts[{i}].indices: expected dtype {names}, got {indices.dtype}")
        if _native(indices.dtype) != idt:
            raise TypeError(
                f"parts[{i}].indices: expected dtype {idt} like parts[0].indices, got {indices.dtype}"
            )
        check_part_shape(i, tuple(values.shape), tuple(indices.shape), tuple(values0.shape))
    return vdt, idt, values0.shape[:-1]


def _as_native(pairs: list) -> list:
    """The parts with every byte-swapped NumPy array copied to native byte order (the merge
    views values as their bits and compares indices as integers: both in native order)."""
    return [tuple(a if a.dtype.isnative else a.astype(_native(a.dtype)) for a in pair) for pair in pairs]


def check_part_shape(i: int, values: tuple, indices: tuple, first: tuple) -> None:
    """Part ``i``'s values and indices shapes against each other and against part 0's values
    shape ``first`` (shared with the torch operator's fake implementation, for one message)."""
    if len(values) == 0:
        raise ValueError(f"parts[{i}].values: expected an array of rank >= 1, got a rank-0 array")
    if indices != values:
        raise ValueError(
            f"parts[{i}].indices: expected the shape of parts[{i}].values {values}, got {indices}"
        )
    if values[:-1] != first[:-1]:
        raise ValueError(
            f"parts[{i}]: expected shape {(*first[:-1], '*')} (that of parts[0] except "
            f"the last axis), got {values}"
        )


def renamed(exc: TypeError, name: str) -> TypeError:
    """A TypeError of the shared checks, whose message names top_k's ``a``, naming ``name``
    instead. Shared with :mod:`cutopk.irregular.segmented`."""
    message = str(exc)
    return TypeError(f"{name}{message[1:]}" if message.startswith("a:") else message)


def check_k(k, total: int) -> int:
    k = _checks.as_index(k, "k")
    if k < 0 or k > total:
        raise ValueError(
            f"k: expected 0 <= k <= {total} (the number of candidates in all parts together), got k={k}"
        )
    return k


def merge_top_k(
    parts,
    k,
    mode: str = "largest",
    sorted_=True,
    nan: str = "last",
    positions: bool = False,
    backend: str = "auto",
):
    """The implementation of :func:`cutopk.merge_top_k` (see its docstring). ``positions``: also
    return each winner's position along the parts' concatenated last axis (for the gradient).
    ``backend``: ``"auto"`` (the parts' kind), or ``"sim"`` for NumPy parts merged by the kernels
    on the simulator (what the public call of CuPy parts runs, for the tests)."""
    merging = _checked(parts, k, mode, sorted_, nan, backend)
    with merging.scope:
        call, _ = merging.kernel_call(positions)
        if call is not None and call.why_not is None:  # cutopk's own kernels, the parts in place
            found = call.run(merging.pairs)
        else:
            found = _merge(merging.xp, merging.pairs, merging.k, mode, merging.order, nan, *merging.dtypes)
        values, indices, where = found
        given, back = merging.given, merging.back
        values, indices = values.astype(given[0], copy=False), indices.astype(given[1], copy=False)
        result = TopK(back(values), back(indices))
        return (result, back(where)) if positions else result


def plan(parts, k, mode: str = "largest", sorted_=True, nan: str = "last", backend: str = "auto") -> Plan:
    """What :func:`merge_top_k` does with these arguments (:func:`cutopk.plan` of a sequence of
    parts): the same checks and errors, nothing run or built. In the kernels: the GPU call's own
    plan (every launch, the scratch between launches, the copies, ``built``); on the library
    route, its steps around one ``top_k`` of the concatenated rows."""
    merging = _checked(parts, k, mode, sorted_, nan, backend)
    with merging.scope:
        call, cached = merging.kernel_call(False)
    if call is not None and call.why_not is None:
        return call.describe(cached, merging.pairs, merging.swapped())
    vdt, idt, batch = merging.dtypes
    rows, total = math.prod(batch), sum(int(v.shape[-1]) for v, _ in merging.pairs)
    size = rows * total * (vdt.itemsize + idt.itemsize)
    params = {"parts": len(merging.pairs), "route": "library"}
    if call is not None:
        params["why_not"] = call.why_not
    steps = ("parts concatenated", "padding made least preferred", "argsort by index",
             "top_k of the concatenated rows (cutopk.plan of a (rows, n) array of these says how)",
             "winners gathered by position")  # fmt: skip
    work = merging.k and rows
    launches: tuple[Launch, ...] = ()
    if merging.backend == "numpy":  # no launches on the NumPy backend: its steps by name
        params["steps"] = steps
    else:
        launches = tuple(Launch(f"library: {step}") for step in steps) if work else ()
    copies = (f"parts: concatenated ({size} bytes)",) if work and len(merging.pairs) > 1 else ()
    return Plan(
        merging.backend, "merge", rows, total, merging.k, launches, copies, size if copies else 0, False, params,
        batch=f"merge of {len(merging.pairs)} parts",
    )  # fmt: skip


class _Merging:
    """A merge's checked arguments: the parts as the backend takes them (``pairs``, native byte
    order), their kind's array module, the scope to work in, the resolved backend, ``k``,
    ``order``, ``dtypes`` (values, indices, batch shape), ``given_parts`` (the parts as given,
    before their copy to native byte order) and ``back`` (the results as the caller's array
    type)."""

    def __init__(self, kind, pairs, back, scope, backend, k, order, nan_first, largest, dtypes, given_parts):
        self.kind, self.pairs, self.back, self.scope, self.backend = kind, pairs, back, scope, backend
        self.k, self.order, self.nan_first, self.largest = k, order, nan_first, largest
        self.dtypes, self.given_parts = dtypes, given_parts
        self.xp = _interop.array_module(kind)

    @property
    def given(self) -> tuple[np.dtype, np.dtype]:
        """parts[0]'s dtypes as given, byte order included: the results take them (top_k keeps its
        input's)."""
        values, indices = self.given_parts[0]
        return values.dtype, indices.dtype

    def swapped(self) -> dict:
        """The copies to and from native byte order that a merge of these parts makes (a line
        each, with its bytes): each byte-swapped part's array, and the results where parts[0]'s
        dtypes are byte-swapped."""
        copies = {}
        for p, pair in enumerate(self.given_parts):
            for name, a in zip(("values", "indices"), pair, strict=True):
                if not a.dtype.isnative:
                    copies[f"parts[{p}].{name}: copied to native byte order"] = a.nbytes
        rows = math.prod(self.dtypes[2])
        for name, dtype in zip(("values", "indices"), self.given, strict=True):
            if not dtype.isnative and self.k and rows:
                copies[f"results: {name} copied to {dtype.str} byte order"] = rows * self.k * dtype.itemsize
        return copies

    def kernel_call(self, positions: bool):
        """``(call, cached)`` of the kernels' merge, or ``(None, False)`` on the NumPy backend."""
        if self.backend == "numpy":
            return None, False
        return _call.merge_call(
            self.pairs, self.k, self.largest, self.order, self.nan_first, positions, self.backend
        )


def _checked(parts, k, mode, sorted_, nan, backend) -> _Merging:
    """Every check of :func:`merge_top_k`, in its order, before any work."""
    pairs = _as_pairs(parts)
    _checks.check_choice("mode", mode, _checks.MODES)
    order = _checks.check_order(sorted_)
    _checks.check_choice("nan", nan, _checks.NAN_POLICIES)
    kind, pairs, back, scope = _convert(pairs)
    resolved = _checks.resolve_backend(backend, kind)
    dtypes = _check_arrays(pairs)
    given_parts, pairs = pairs, _as_native(pairs)
    k = check_k(k, sum(int(v.shape[-1]) for v, _ in pairs))
    nan_first = nan == "largest" and mode == "largest"
    return _Merging(
        kind, pairs, back, scope, resolved, k, order, nan_first, mode == "largest", dtypes, given_parts
    )


def _merge(xp, pairs, k, mode, order, nan, vdt, idt, batch):
    """Steps 1-5 of the module docstring, for checked arrays of module ``xp``; also the winners'
    positions along the concatenated last axis."""
    if k == 0 or int(np.prod(batch)) == 0:
        shape = (*batch, k)
        return xp.zeros(shape, dtype=vdt), xp.zeros(shape, dtype=idt), xp.zeros(shape, dtype=np.int64)
    largest, nan_largest = mode == "largest", nan == "largest"
    # The values travel as their bits (unsigned integers of their width) and are seen as values
    # only by the selection: CuPy's bfloat16 kernels turn a NaN's payload into the canonical
    # NaN (0xffc0 comes back as 0x7fff), and the values must come back bit for bit.
    bits = np.dtype(f"u{vdt.itemsize}")
    if len(pairs) == 1:
        values, indices = pairs[0][0].view(bits), pairs[0][1]
    else:
        values = xp.concatenate([v.view(bits) for v, _ in pairs], axis=-1)
        indices = xp.concatenate([i for _, i in pairs], axis=-1)
    signed = idt.kind == "i"
    if signed:
        padding = indices < 0
        # full(), not asarray(): a fill kernel, where asarray of a host scalar is a copy from the
        # host, which a CUDA graph capture refuses.
        worst = xp.full((), _dtypes.least_preferred(vdt, largest, nan_largest).view(bits)[()], dtype=bits)
        values = xp.where(padding, worst, values)
        # As unsigned, -1 (and every negative index) sorts after every real index.
        by_index = indices.view(idt.str.replace("i", "u"))
    else:
        by_index = indices
    # Real indices are distinct (disjoint parts), so a stable sort is not needed for them;
    # NumPy's stable sort also keeps padding in a fixed order, for reproducible runs.
    sort_kw = {"kind": "stable"} if xp is np else {}
    perm = xp.argsort(by_index, axis=-1, **sort_kw)
    values = xp.take_along_axis(values, perm, axis=-1)
    indices = xp.take_along_axis(indices, perm, axis=-1)
    chosen = select(
        values.view(vdt), k, axis=-1, mode=mode, sorted="value" if order == "value" else "index", nan=nan
    )
    out_values = chosen.values.view(bits)
    out_indices = xp.take_along_axis(indices, chosen.indices, axis=-1)
    where = xp.take_along_axis(perm, chosen.indices, axis=-1).astype(np.int64, copy=False)
    if signed:
        padding = out_indices < 0
        out_values = xp.where(padding, xp.zeros((), dtype=bits), out_values)
        out_indices = xp.where(padding, xp.full((), -1, dtype=idt), out_indices).astype(idt, copy=False)
    return xp.ascontiguousarray(out_values).view(vdt), xp.ascontiguousarray(out_indices), where


def differentiable(parts, k, mode, sorted_, nan):
    """``(select, values)`` for :func:`cutopk._core.autograd.merge_top_k`: the parts' values, and
    the merge of their detached values that also gives the winners' places in their parts."""
    pairs = _as_pairs(parts)
    indices = [i for _, i in pairs]

    def run(detached):
        return merge_top_k(list(zip(detached, indices, strict=True)), k, mode, sorted_, nan, positions=True)

    return run, [v for v, _ in pairs]
