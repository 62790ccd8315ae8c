"""merge_top_k in cutopk's own kernels (kernels/merge.cu): the parts read where they lie, a block
per row, one launch per :data:`~cutopk.cuda.families.merge.PARTS` parts (two up to ``2 * PARTS -
1``), no concatenated copy, no library kernel but the copy of a part that is not C-contiguous,
and no host synchronisation (the call can be captured in a CUDA graph).

For the CUDA backend (CuPy arrays) and the simulator (NumPy arrays, for the tests): the same
launches. :func:`merge` returns None where the kernel cannot take the rows (more candidates per
row than a block's shared memory holds): :mod:`cutopk.irregular.merge` then takes the library
route.

It lives in the CUDA backend, beside the launcher whose compiled modules it uses: the irregular
inputs' package (cutopk/irregular/merge.py) calls :func:`merge`, and never the launcher itself.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _interop
from .._request import dtypes as _dtypes
from . import device as _device
from . import launcher as _launcher
from . import shared_memory as _shared_memory
from .families import merge as _family


def merge(target: str, pairs, k: int, largest: bool, by_index: bool, nan_first: bool, positions: bool):
    """``(values, indices, where)`` of the top ``k`` of the parts ``pairs`` (checked arrays of
    ``target``'s kind: "cuda" CuPy arrays on the current device, "sim" NumPy arrays), ``where``
    each winner's position along the parts' concatenated last axis (None unless ``positions``);
    or None when the kernel cannot take these rows."""
    xp = _launcher.array_module(target)  # the launcher's: a recording (cutopk/cuda/observe.py) patches it
    values0, indices0 = pairs[0]
    vdt, idt = values0.dtype, indices0.dtype
    batch = values0.shape[:-1]
    rows = math.prod(batch)
    info = _dtypes.check_dtype(vdt)
    widths = [int(v.shape[-1]) for v, _ in pairs]
    device = _device.device_id(target)
    limit = _device.device_facts(target, device).shared_bytes
    if _family.why_not(widths, k, info.itemsize, limit) is not None:
        return None
    native = vdt.newbyteorder("=") if not vdt.isnative else vdt  # NumPy only: CuPy is native
    flat = [(_rows_of(xp, v, rows, native), _rows_of(xp, i, rows, idt)) for v, i in pairs]
    fn = _launcher.kernel_function(target, info.cxx, f"merge_parts<{info.cxx}>", device)
    offsets = np.concatenate([[0], np.cumsum(widths)]).tolist()
    fixed = {
        "rows": np.int64(rows), "k": np.int32(k), "largest": np.int32(largest),
        "nan_first": np.int32(nan_first), "index_bytes": np.int32(idt.itemsize),
        "index_signed": np.int32(idt.kind == "i"),
    }  # fmt: skip
    spare = (_launcher.placeholder(target, native), _launcher.placeholder(target, idt))
    previous = None  # the last launch's (values, indices, positions): part 0 of the next
    groups = _family.groups(widths)
    for number, group in enumerate(groups):
        last = number == len(groups) - 1
        slots = (
            [(previous[0], previous[1], previous[0].shape[1], 0, previous[2])] if previous is not None else []
        )
        slots += [(*flat[p], widths[p], offsets[p], None) for p in group]
        # A launch before the last keeps the best min(k, candidates so far): no place of its
        # result is padding unless a part's entry was (an unsigned index has no padding).
        kk = k if last else min(k, offsets[group[-1] + 1])
        out_vals, out_idx = xp.empty((rows, kk), native), xp.empty((rows, kk), idt)
        out_pos = xp.empty((rows, kk), np.int64) if positions else None
        args = {
            **fixed,
            "k": np.int32(kk),
            "parts": np.int32(len(slots)),
            "by_index": np.int32(by_index and last),
        }
        args.update(pos0=slots[0][4] if previous is not None else None, out_vals=out_vals, out_idx=out_idx)
        args["out_pos"] = out_pos
        for s in range(_family.PARTS):
            v, i, w, o = slots[s][:4] if s < len(slots) else (*spare, 0, 0)
            args.update({f"v{s}": v, f"i{s}": i, f"w{s}": np.int64(w), f"o{s}": np.int64(o)})
        candidates = sum(int(slot[2]) for slot in slots)
        shared = _family.shared_bytes(candidates, info.itemsize)
        _shared_memory.opt_in(fn, shared, target)
        fn(
            (max(1, rows),),
            (_family.THREADS,),
            tuple(args[name] for name in _family.ARGUMENTS["merge_parts"]),
            shared_mem=shared,
        )
        previous = (out_vals, out_idx, out_pos)
    assert previous is not None  # groups() gives one group at least
    values, indices, where = previous
    shape = (*batch, k)
    if native is not vdt:
        values = values.astype(vdt)
    return values.reshape(shape), indices.reshape(shape), where.reshape(shape) if where is not None else None


def _rows_of(xp, a, rows: int, dtype):
    """``a`` as C-contiguous (rows, width) of ``dtype``: a view where it is one (a part as top_k
    gives it), else a copy."""
    if isinstance(a, np.ndarray):  # the simulator's arrays
        a = (
            a
            if a.dtype == dtype and a.flags.c_contiguous and a.flags.aligned
            else np.array(a, dtype, order="C")
        )
        return a.reshape(rows, a.shape[-1])
    if _interop.misaligned(a):  # a view some bytes into its buffer: CuPy's own copy would fault
        a = _interop.aligned_copy(a)
    if not a.flags.c_contiguous:
        a = xp.ascontiguousarray(a)
    return a.reshape(rows, a.shape[-1])
