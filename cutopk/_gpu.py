"""The CUDA launcher, for two targets: ``"cuda"`` (CuPy arrays, ``cupy.RawModule``) and ``"sim"``
(NumPy arrays, the CPU simulator's ``RawModule``). Everything but the array module and the
module class is shared, so the simulator tests the very code that runs on a GPU.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import pathlib
import re
import threading

import numpy as np

from . import _dispatch, _dtypes, _gpu_rows
from ._api import Request

ALGORITHMS = _dispatch.ALGORITHMS
# The order matters: headers first, each file once (the loader strips local #includes).
KERNEL_FILES = (
    "key_traits.cuh",
    "block_sort.cuh",
    "warp_row_topk.cu",
    "warp_radix_topk.cu",
    "thread_row_topk.cu",
    "bitonic_topk.cu",
    "radix_topk.cu",
    "multiblock_radix.cu",
    "order_topk.cu",
    "transpose_rows.cu",
    "keys.cu",
)
# Kernels that are not templates (one copy per module).
PLAIN_KERNELS = ("mb_init", "mb_select")
WARP_ROW_ITEMS = (1, 2, 4, 8, 16, 32)
THREAD_ROW_KMAX = (1, 2, 4, 8)
_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"[^"]+"\s*$', re.MULTILINE)


def kernel_dir() -> pathlib.Path:
    """Where the CUDA sources are: inside the installed package (``cutopk/kernels``), else the
    ``kernels/`` folder of the source checkout this package was imported from."""
    here = pathlib.Path(__file__).resolve().parent
    for candidate in (here / "kernels", here.parent / "kernels"):
        if (candidate / KERNEL_FILES[0]).is_file():
            return candidate
    raise RuntimeError(f"cutopk's CUDA sources were not found next to {here}: the installation is incomplete")


@functools.cache
def kernel_source() -> str:
    """All kernel files as one translation unit (so that CuPy's cache key sees every header)."""
    d = kernel_dir()
    parts = [f"// ---- {name}\n" + _LOCAL_INCLUDE.sub("", (d / name).read_text()) for name in KERNEL_FILES]
    return "\n".join(parts)


@functools.cache
def _source_hash() -> str:
    return hashlib.sha256(kernel_source().encode()).hexdigest()


def stable_argsort(xp, a):
    """Row-wise stable argsort: NumPy needs kind="stable"; CuPy's sort is always stable (thrust's
    stable sort) and accepts no other kind."""
    return xp.argsort(a, axis=1, kind="stable") if xp is np else xp.argsort(a, axis=1)


def name_expressions(cxx: str) -> list[str]:
    """Every kernel instantiation for one element type."""
    names = [f"warp_row_topk<{cxx}, {items}>" for items in WARP_ROW_ITEMS]
    names += [f"thread_row_topk<{cxx}, {kmax}>" for kmax in THREAD_ROW_KMAX]
    names += [
        f"warp_radix_topk<{cxx}>",
        f"bitonic_topk<{cxx}>",
        f"radix_topk<{cxx}>",
        f"compute_keys<{cxx}>",
        f"gather_values<{cxx}>",
        f"order_tiles<{cxx}>",
        f"order_merge<{cxx}>",
        f"transpose_rows<{cxx}>",
    ]
    names += [f"mb_{k}<{cxx}>" for k in ("histogram", "collect", "move", "sample", "order")]
    return names


_MODULES: dict[tuple, object] = {}
_MODULES_LOCK = threading.Lock()


def _module(target: str, cxx: str):
    """The compiled module for one element type, built once per (target, device, source)."""
    device = _device_id(target)
    key = (target, device, cxx, _source_hash())
    with _MODULES_LOCK:
        mod = _MODULES.get(key)
        if mod is None:
            if target == "cuda":
                import cupy

                mod = cupy.RawModule(
                    code=kernel_source(), options=("-std=c++17",), name_expressions=name_expressions(cxx)
                )
            else:
                from . import sim

                mod = sim.RawModule(code=kernel_source(), name_expressions=name_expressions(cxx))
            _MODULES[key] = mod
    return mod


def _device_id(target: str) -> int:
    if target != "cuda":
        return -1
    import cupy

    return cupy.cuda.Device().id


def _xp(target: str):
    if target == "cuda":
        import cupy

        return cupy
    return np


@functools.cache
def _device_facts(target: str, device: int) -> _dispatch.Device:
    if target != "cuda":
        return _dispatch.Device()
    import cupy

    attrs = cupy.cuda.Device(device).attributes
    shared = _dispatch.shared_limit(
        attrs["MaxSharedMemoryPerBlock"], attrs.get("MaxSharedMemoryPerBlockOptin", 0)
    )
    return _dispatch.Device(sm_count=attrs["MultiProcessorCount"], shared_bytes=shared)


def _collapse(moved):
    """Element strides ``(row_stride, col_stride)`` of ``moved`` (axis last) seen as rows, or None
    when the batch axes do not collapse into a single stride (then the input is copied)."""
    itemsize = moved.dtype.itemsize
    if any(st % itemsize for st in moved.strides):
        return None
    batch = [
        (size, st // itemsize)
        for size, st in zip(moved.shape[:-1], moved.strides[:-1], strict=True)
        if size != 1
    ]
    # Each batch axis must step by the extent of the axes inside it (C order over the others).
    for (_, outer), (inner_size, inner) in itertools.pairwise(batch):
        if outer != inner * inner_size:
            return None
    return (batch[-1][1] if batch else 0), moved.strides[-1] // itemsize


def _rows_layout(a, axis: int):
    """``(moved, strides)``: ``a`` with ``axis`` last, and its ``(row_stride, col_stride)`` when
    the other axes collapse into one stride (else None: the input must be copied)."""
    xp = np if isinstance(a, np.ndarray) else _xp("cuda")
    moved = xp.moveaxis(a, axis, -1)
    return moved, _collapse(moved)


def _check_forced(req: Request, key_bytes: int, device: _dispatch.Device, rows: int) -> None:
    if req.algorithm == "auto":
        return
    if req.algorithm not in ALGORITHMS:
        raise ValueError(
            f"algorithm: expected 'auto' or one of {ALGORITHMS} for backend {req.backend!r}, got {req.algorithm!r}"
        )
    reason = _dispatch.why_not(req.algorithm, req.n, req.k, key_bytes, device, rows)
    if reason:
        raise ValueError(f"algorithm: {reason}")


def plan(a, req: Request) -> _dispatch.Plan:
    """The dispatcher's plan for ``top_k(a, ...)`` (nothing is launched, nothing copied)."""
    info = _dtypes.check_dtype(a.dtype)
    device = _device_facts(req.backend, _device_id(req.backend))
    rows = math.prod(s for i, s in enumerate(a.shape) if i != req.axis)
    _check_forced(req, info.itemsize, device, rows)
    _, strides = _rows_layout(a, req.axis)
    outer = strides is not None and _is_outer(rows, *strides)
    return _dispatch.plan(
        rows, req.n, max(1, req.k), info.itemsize, device, strides is None, req.algorithm, outer
    )


def _is_outer(rows: int, row_stride: int, col_stride: int) -> bool:
    """Rows along an outer axis: adjacent rows are adjacent in memory, a row's elements are not."""
    return rows > 1 and row_stride == 1 and col_stride not in (0, 1)  # 0: one address per row


def top_k(a, req: Request):
    """Top-K of ``a`` (CuPy for "cuda", NumPy for "sim") by the CUDA kernels."""
    target = req.backend
    xp = _xp(target)
    if target == "sim" and not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))  # kernels read native byte order
    info = _dtypes.check_dtype(a.dtype)
    device = _device_facts(target, _device_id(target))
    other = [s for i, s in enumerate(a.shape) if i != req.axis]
    out_shape = (*other, req.k)
    rows = math.prod(other)
    _check_forced(req, info.itemsize, device, rows)
    values = xp.empty((rows, req.k), dtype=a.dtype)
    # Written in index_dtype by the kernels (no cast afterwards).
    indices = xp.empty((rows, req.k), dtype=req.index_dtype)
    if req.k > 0 and rows > 0:
        moved, strides = _rows_layout(a, req.axis)
        outer = strides is not None and _is_outer(rows, *strides)
        p = _dispatch.plan(rows, req.n, req.k, info.itemsize, device, strides is None, req.algorithm, outer)
        if p.transpose:  # rows along an outer axis: a tiled transpose to row-major
            base = _gpu_rows.transpose_rows(_module(target, info.cxx), info.cxx, moved, strides)
            row_stride, col_stride = req.n, 1
        elif p.copy:
            base, row_stride, col_stride = xp.ascontiguousarray(moved), req.n, 1
        else:
            base, (row_stride, col_stride) = moved, strides
        try:
            _launch(target, info, p, base, rows, req, row_stride, col_stride, values, indices)
        except Exception as exc:
            if type(exc).__name__ != "OutOfMemoryError":  # cupy.cuda.memory.OutOfMemoryError
                raise
            # The scratch arrays are local to _launch and already released to CuPy's pool.
            raise MemoryError(
                f"top_k: out of GPU memory running {p.algorithm!r} on {rows} rows of {req.n} "
                f"(scratch {p.scratch_bytes} bytes besides the outputs): {exc}"
            ) from None

    def finish(arr):
        return xp.ascontiguousarray(xp.moveaxis(arr.reshape(out_shape), -1, req.axis))

    return finish(values), finish(indices)


def _launch(
    target, info, p: _dispatch.Plan, base, rows, req: Request, row_stride, col_stride, values, indices
):
    mod = _module(target, info.cxx)
    common = (base, np.int64(rows), np.int64(req.n), np.int64(row_stride), np.int64(col_stride))
    flags = (np.int32(req.largest), np.int32(req.nan_first))
    by_index = np.int32(req.order == "index")
    out = (values, indices, np.int32(indices.itemsize))  # 4- or 8-byte indices
    if p.algorithm == "thread_row":
        fn = mod.get_function(f"thread_row_topk<{info.cxx}, {p.params['KMAX']}>")
        fn((p.grid,), (p.block,), (*common, np.int32(req.k), *flags, by_index, *out))
    elif p.algorithm == "warp_row":
        fn = mod.get_function(f"warp_row_topk<{info.cxx}, {p.params['ITEMS']}>")
        fn((p.grid,), (p.block,), (*common, np.int32(req.k), *flags, by_index, *out))
    elif p.algorithm == "warp_radix":
        fn = mod.get_function(f"warp_radix_topk<{info.cxx}>")
        fn((p.grid,), (p.block,), (*common, np.int32(req.k), *flags, by_index, *out))
    elif p.algorithm == "bitonic":
        fn = mod.get_function(f"bitonic_topk<{info.cxx}>")
        args = (*common, np.int32(req.k), *flags, by_index, np.int32(p.params["size"]), *out)
        _gpu_rows.launch(fn, (p.grid,), (p.block,), args, p.shared_bytes, target)
    elif p.algorithm == "radix":
        fn = mod.get_function(f"radix_topk<{info.cxx}>")
        buf = p.params["buffer"]
        xp = _xp(target)
        buf_key = xp.empty(max(1, rows * buf), dtype=info.key_dtype)
        buf_idx = xp.empty(max(1, rows * buf), dtype=np.uint32)
        cap = np.int32(p.params["cap"])
        args = (
            *common,
            np.int32(req.k),
            *flags,
            by_index,
            cap,
            np.int64(buf),
            buf_key,
            buf_idx,
            *out,
        )
        _gpu_rows.launch(fn, (p.grid,), (p.block,), args, p.shared_bytes, target)
    else:
        # These paths gather the values through 64-bit indices (gather_values); uint64 indices
        # (all below 2**63) share int64's bits, 4-byte ones are converted once at the end.
        xp = _xp(target)
        wide = indices.itemsize == 8
        idx64 = indices.view(np.int64) if wide else xp.empty((rows, req.k), np.int64)
        if p.algorithm == "multiblock":
            _multiblock_in_chunks(xp, mod, info, p, base, rows, req, row_stride, col_stride, values, idx64)
        else:
            _sort_path(
                target, info, p, mod, common, flags, rows, req, base, row_stride, col_stride, values, idx64
            )
        if not wide:
            indices[...] = idx64


def _multiblock_in_chunks(xp, mod, info, p, base, rows, req, row_stride, col_stride, values, indices):
    """The multi-block select over successive chunks of at most ``rows_per_chunk`` rows (the grid's
    y extent and the scratch budget bound a chunk), each chunk a (rows, n) view of the input."""
    from . import _gpu_multiblock

    chunk = p.params["rows_per_chunk"]
    if chunk >= rows:
        _gpu_multiblock.run(xp, mod, info, p, base, rows, req, row_stride, col_stride, values, indices)
        return
    itemsize = base.dtype.itemsize
    # The rows collapse to one stride (or the input was copied): a 2-D view of the same memory,
    # whose row slices start at the chunk's first row.
    as_rows = xp.lib.stride_tricks.as_strided(
        base, shape=(rows, req.n), strides=(row_stride * itemsize, col_stride * itemsize)
    )
    for start in range(0, rows, chunk):
        stop = min(rows, start + chunk)
        part = as_rows[start:stop]
        _gpu_multiblock.run(
            xp,
            mod,
            info,
            p,
            part,
            stop - start,
            req,
            row_stride,
            col_stride,
            values[start:stop],
            indices[start:stop],
        )


def _sort_path(target, info, p, mod, common, flags, rows, req, base, row_stride, col_stride, values, indices):
    """The reference path: the keys of whole rows by compute_keys, each row ordered by our
    tile-and-merge kernels (order_topk.cu, no library sort), its first K kept (and ordered by
    index for order "index"), values gathered from the input."""
    xp = _xp(target)
    keys = xp.empty((rows, req.n), dtype=info.key_dtype)
    mod.get_function(f"compute_keys<{info.cxx}>")((p.grid,), (p.block,), (*common, *flags, keys))
    tile = p.params["order_tile"]
    keys, order = _gpu_rows.order_pairs(mod, info.cxx, keys, None, False, tile, target)
    if req.k < req.n:
        keys, order = xp.ascontiguousarray(keys[:, : req.k]), xp.ascontiguousarray(order[:, : req.k])
    if req.order == "index":
        keys, order = _gpu_rows.order_pairs(mod, info.cxx, keys, order, True, tile, target)
    indices[...] = order
    gather = mod.get_function(f"gather_values<{info.cxx}>")
    grid = max(1, min(-(-(rows * req.k) // p.block), p.grid))
    gather(
        (grid,),
        (p.block,),
        (base, np.int64(rows), np.int64(row_stride), np.int64(col_stride), np.int32(req.k), indices, values),
    )
