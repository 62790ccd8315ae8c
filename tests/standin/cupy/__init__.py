"""A strict CPU stand-in for the part of CuPy that cutopk uses (installed as ``cupy`` by
tests/conftest.py when no real CuPy with a GPU is there).

Strict: it fails where CuPy fails. An :class:`ndarray` is not a NumPy array (``np.asarray`` on
it raises TypeError, ``.get()`` copies to the host), lives on one of two devices and refuses to
take part in work on the other; device memory comes from the allocator in use (``using_allocator``
or the pool, which refuses cudaMalloc while a stream captures); kernels run on the CPU simulator
(:mod:`cutopk.sim`) with their arguments packed as CuPy packs them, on the current stream, and
are recorded rather than run while that stream captures (``Graph.launch`` replays them). CuPy's
own element kernels fault on a misaligned array and write bfloat16 NaNs as the canonical NaN, as
an H200 did (docs/hardware-only.md). Only the
functions below exist: any other attribute is an AttributeError, as a misspelt CuPy name is.

``set_version(13)`` models CuPy 13 (no bfloat16); the default is 14.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from . import _dlpack, _state, cuda
from .cuda import memory as _memory

__version__ = "14.0.0"

bool_ = np.bool_
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float16, float32, float64 = np.float16, np.float32, np.float64
complex64, complex128 = np.complex64, np.complex128
nan, inf = np.nan, np.inf


def set_version(major: int) -> None:
    """Model CuPy ``major`` (13: no bfloat16 dtype; 14: bfloat16 through ml_dtypes)."""
    global __version__
    if major not in (13, 14):
        raise ValueError(f"major: expected 13 or 14, got {major!r}")
    _state.VERSION["major"] = major
    __version__ = f"{major}.0.0"


def _check_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.name == "bfloat16" and _state.VERSION["major"] < 14:
        # CuPy 13 has no bfloat16: its kernels and DLPack import refuse it.
        raise NotImplementedError("CuPy does not support bfloat16 yet")
    if dt.name == "bfloat16":
        return dt
    if dt.hasobject or dt.kind in "SUVMm" or not dt.isnative:
        raise ValueError(f"Unsupported dtype {dt}")
    return dt


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (operator.index(shape),)
    return tuple(operator.index(s) for s in shape)


def _c_strides(shape, itemsize) -> tuple[int, ...]:
    strides, step = [], itemsize
    for s in reversed(shape):
        strides.append(step)
        step *= max(s, 1)
    return tuple(reversed(strides))


class _Flags:
    def __init__(self, a):
        host = a._host()
        self.c_contiguous = bool(host.flags.c_contiguous)
        self.f_contiguous = bool(host.flags.f_contiguous)
        self.owndata = a._base is None

    def __getitem__(self, name):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous}[name]


def _current() -> int:
    return _state.THREAD.device


def _stream():
    return cuda.get_current_stream()


def _kernel(run) -> None:
    """A device operation of CuPy's own: on the current stream (recorded while it captures),
    logged in ``_state.LAUNCHES``."""
    _state.LAUNCHES.append(("library", ""))
    _stream().enqueue(run)


def _on_current_device(*arrays) -> None:
    """CuPy's rule for its own kernels: every array on the current device."""
    current = _current()
    for a in arrays:
        if isinstance(a, ndarray) and a._device != current:
            raise ValueError(
                f"The device where the array resides ({a._device}) is different from the current "
                f"device ({current}). Peer access is unavailable between these devices."
            )


def _element_kernel(*arrays) -> None:
    """CuPy's rules for its own element-wise kernels (copies, casts, fills, comparisons): every
    array on the current device, and every element of every array at an address that is a
    multiple of its size. A real GPU faults on a misaligned element (cudaErrorMisalignedAddress,
    seen on an H200 copying a float32 view 2 bytes into its buffer); only a byte-wise view of such
    an array can be read or written."""
    _on_current_device(*arrays)
    for a in arrays:
        if not isinstance(a, ndarray) or a.size == 0:
            continue
        size = a.itemsize
        if a.data.ptr % size or any(st % size for st in a.strides):
            raise _state.CUDARuntimeError(
                716,
                "cudaErrorMisalignedAddress",
                f"misaligned address (a {a.dtype} element read or written at "
                f"{a.data.ptr % size} bytes past a multiple of {size}, strides {a.strides})",
            )


def _sync_copy(what: str) -> None:
    """A synchronous copy between host and device: refused while the current stream captures."""
    if _stream().is_capturing():
        raise RuntimeError(
            f"the current stream is capturing, so {what} transfers are disallowed (CUDA graph capture)"
        )
    _state.refuse_during_capture(f"a synchronous {what} copy")


class ndarray:
    """A device array: ``shape``, ``dtype``, ``strides`` (bytes) and ``data`` (a
    :class:`cupy.cuda.MemoryPointer`) on ``device``; views share the memory."""

    __array_priority__ = 100
    __array_ufunc__ = None  # NumPy functions do not take it either

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        shape = _shape(shape)
        dtype = _check_dtype(dtype)
        if order not in ("C", "F"):
            raise ValueError(f"order not understood: {order!r}")
        nbytes = math.prod(shape) * dtype.itemsize
        if memptr is None:
            memptr = _memory.alloc(nbytes)
        if strides is None:
            strides = _c_strides(shape, dtype.itemsize)
            if order == "F":
                strides = tuple(reversed(_c_strides(tuple(reversed(shape)), dtype.itemsize)))
        self._shape, self._dtype, self._strides = shape, dtype, tuple(int(s) for s in strides)
        self._memptr = memptr
        self._device = memptr.device_id
        self._base = None

    # ---- what CuPy has and NumPy uses: never a silent conversion

    def __array__(self, *args, **kwargs):
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
            "NumPy array explicitly."
        )

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._shape[0]))

    # ---- attributes

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    strides = property(lambda self: self._strides)
    ndim = property(lambda self: len(self._shape))
    size = property(lambda self: math.prod(self._shape))
    itemsize = property(lambda self: self._dtype.itemsize)
    nbytes = property(lambda self: self.size * self._dtype.itemsize)
    data = property(lambda self: self._memptr)
    base = property(lambda self: self._base)
    device = property(lambda self: cuda.Device(self._device))
    flags = property(lambda self: _Flags(self))
    T = property(lambda self: self.transpose())

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of unsized object")
        return self._shape[0]

    def __repr__(self):
        return f"stand-in cupy.ndarray({self._host_copy()!r}, device={self._device})"

    def _host(self) -> np.ndarray:
        """The NumPy view of this array's memory (device memory is host memory here)."""
        if self.size == 0:
            return np.lib.stride_tricks.as_strided(np.zeros(1, self._dtype), self._shape, self._strides)
        mem = self._memptr.mem
        return np.ndarray(
            self._shape,
            self._dtype,
            buffer=mem._host(),
            offset=self._memptr.ptr - mem.ptr,
            strides=self._strides,
        )

    def _host_copy(self) -> np.ndarray:
        return np.array(self._host(), copy=True)

    def _view(self, host: np.ndarray) -> ndarray:
        """A view of this array's memory, described by ``host`` (a NumPy view of it)."""
        out = ndarray.__new__(ndarray)
        out._shape, out._dtype, out._strides = host.shape, _check_dtype(host.dtype), host.strides
        if host.size == 0:
            out._memptr = self._memptr
        else:
            offset = host.__array_interface__["data"][0] - self._memptr.ptr
            out._memptr = cuda.MemoryPointer(self._memptr.mem, self._memptr.offset + offset)
        out._device, out._base = self._device, self._base if self._base is not None else self
        return out

    # ---- views (no kernel, no device check: CuPy makes them on any device)

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        host = self._host()
        reshaped = host.reshape(shape, order=order)
        if self.size == 0 or np.shares_memory(reshaped, host):
            return self._view(reshaped)
        return ascontiguousarray(self).reshape(shape)

    def view(self, dtype=None):
        if dtype is None:
            return self._view(self._host())
        return self._view(self._host().view(_check_dtype(dtype)))

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = axes[0]
        return self._view(self._host().transpose(*axes) if axes else self._host().T)

    def swapaxes(self, a, b):
        return self._view(self._host().swapaxes(a, b))

    def ravel(self):
        return self.reshape(-1)

    def squeeze(self, axis=None):
        return self._view(self._host().squeeze(axis))

    def __getitem__(self, key):
        key = _key(key)
        host = self._host()
        if _is_basic(key):
            return self._view(host[(*key, Ellipsis)] if Ellipsis not in key else host[key])
        return _computed(lambda: host[_host_key(key)], self, *_key_arrays(key))

    def __setitem__(self, key, value):
        key = _key(key)
        if isinstance(value, np.ndarray):  # a host array: an H2D copy first
            value = asarray(value)
        _element_kernel(self, value, *_key_arrays(key))
        host = self._host()

        def run():
            host[_host_key(key)] = value._host() if isinstance(value, ndarray) else value

        _kernel(run)

    # ---- copies and kernels

    def get(self, stream=None, order="C", out=None):
        """The array copied to the host (a device-to-host copy: refused while capturing, counted
        in ``_state.HOST_WAITS``). A contiguous array is one memcpy; any other is first made
        contiguous by a CuPy kernel. ``item``, ``tolist``, ``asnumpy`` and a scalar conversion
        (``bool``, ``int``, ``float``, ``operator.index``) come here: one read each."""
        _sync_copy("D2H")
        _state.host_waits("read", f"a D2H copy of a {self._dtype} array of shape {self._shape}")
        if not self.flags.c_contiguous:
            _element_kernel(self)
        return self._host_copy()

    def copy(self, order="C"):
        return _computed(lambda: self._host().copy(), self)

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        dtype = _check_dtype(dtype)
        if not copy and dtype == self._dtype:
            return self
        return _computed(lambda: self._host().astype(dtype), self)

    def fill(self, value):
        host = self._host()
        _element_kernel(self)
        _kernel(lambda: host.fill(value))

    def item(self):
        return self.get().item()

    def tolist(self):
        return self.get().tolist()

    def _scalar(self):
        if self.size != 1:
            raise TypeError("only size-1 arrays can be converted to Python scalars")
        return self.get().reshape(())[()]

    def __bool__(self):
        return bool(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def __float__(self):
        return float(self._scalar())

    def __index__(self):
        if self.ndim != 0 or self._dtype.kind not in "iu":
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(self._scalar())

    def __complex__(self):
        return complex(self._scalar())

    # reductions (a 0-d array on the device, as CuPy)
    def min(self, axis=None, keepdims=False):
        return _computed(lambda: np.asarray(self._host().min(axis=axis, keepdims=keepdims)), self)

    def max(self, axis=None, keepdims=False):
        return _computed(lambda: np.asarray(self._host().max(axis=axis, keepdims=keepdims)), self)

    def sum(self, axis=None, dtype=None, keepdims=False):
        return _computed(
            lambda: np.asarray(self._host().sum(axis=axis, dtype=dtype, keepdims=keepdims)), self
        )

    def any(self, axis=None, keepdims=False):
        return _computed(lambda: np.asarray(self._host().any(axis=axis, keepdims=keepdims)), self)

    def all(self, axis=None, keepdims=False):
        return _computed(lambda: np.asarray(self._host().all(axis=axis, keepdims=keepdims)), self)

    # ---- interchange

    @property
    def __cuda_array_interface__(self):
        stream = _stream().ptr
        return {
            "shape": self._shape,
            "typestr": self._dtype.str,
            "descr": self._dtype.descr,
            "data": (self._memptr.ptr if self.size else 0, False),
            "strides": None if self.flags.c_contiguous else self._strides,
            "version": 3,
            "stream": stream if stream else 1,  # the legacy default stream is 1 in CAI
        }

    def __dlpack_device__(self):
        return (_dlpack.KDL_CUDA, self._device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"the array is on CUDA device {self._device}, not {dl_device}")
        return _dlpack.export(self._host(), self._device)


def _binary(fn, reflected=False):
    def method(self, other):
        if isinstance(other, np.ndarray):
            raise TypeError(f"Unsupported type {type(other)}")
        if not isinstance(other, (ndarray, int, float, complex, bool, np.generic)):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        return _computed(lambda: np.asarray(fn(_h(a), _h(b))), a, b)

    return method


for _name, _fn in {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "and": operator.and_, "or": operator.or_,
    "xor": operator.xor, "pow": operator.pow,
}.items():  # fmt: skip
    setattr(ndarray, f"__{_name}__", _binary(_fn))
    setattr(ndarray, f"__r{_name}__", _binary(_fn, reflected=True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(ndarray, f"__{_name}__", _binary(getattr(operator, _name)))
ndarray.__neg__ = lambda self: _computed(lambda: -self._host(), self)
ndarray.__invert__ = lambda self: _computed(lambda: ~self._host(), self)
ndarray.__abs__ = lambda self: _computed(lambda: abs(self._host()), self)
ndarray.__hash__ = None
ndarray.__module__ = "cupy"


def _h(x):
    """A kernel operand as the simulated device reads it."""
    return x._host() if isinstance(x, ndarray) else x


def _key(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _is_basic(key: tuple) -> bool:
    return all(
        k is None or k is Ellipsis or (isinstance(k, (slice, int, np.integer)) and not isinstance(k, bool))
        for k in key
    )


def _key_arrays(key: tuple) -> list:
    return [k for k in key if isinstance(k, ndarray)]


def _host_key(key: tuple) -> tuple:
    for k in key:
        if isinstance(k, np.ndarray) and k.size > 1:
            raise TypeError(f"Unsupported index type {type(k)}")
    return tuple(_h(k) for k in key)


def _computed(compute, *operands, meta=None) -> ndarray:
    """The result of a kernel that writes a new array: ``compute()`` (NumPy, on the operands'
    memory) gives its shape and dtype now, and its values when the kernel runs (at once, or at
    a graph's launch while the current stream captures). ``meta``: ``(shape, dtype)`` where the
    values decide whether ``compute()`` can run at all (a gather's indices, which a capture has
    not computed yet: their memory holds anything until the replay)."""
    _element_kernel(*operands)
    capturing = _stream().is_capturing()
    if meta is not None and capturing:
        out = empty(*meta)
        host = out._host()
        _kernel(lambda: np.copyto(host, _as_gpu_writes(np.asarray(compute()))))
        return out
    result = _as_gpu_writes(np.asarray(compute()))
    out = empty(result.shape, result.dtype)
    host = out._host()
    if capturing:
        _kernel(lambda: np.copyto(host, _as_gpu_writes(np.asarray(compute()))))
    else:
        _kernel(lambda: np.copyto(host, result))
    return out


def _as_gpu_writes(result: np.ndarray) -> np.ndarray:
    """A kernel's result as CuPy's kernels write it on a GPU: a bfloat16 NaN comes out as the
    canonical NaN (0x7fff), whatever its payload (CuPy's bfloat16 kernels go through float32: an
    H200 turned 0xffc0 into 0x7fff in a `where`), where NumPy and ml_dtypes keep the bits."""
    if result.dtype.name != "bfloat16" or not result.size:
        return result
    nan = np.isnan(result.astype(np.float32))
    if not nan.any():
        return result
    bits = result.view(np.uint16).copy()
    bits[nan] = 0x7FFF
    return bits.view(result.dtype)


# ---- creation


def empty(shape, dtype=float, order="C") -> ndarray:
    return ndarray(shape, dtype, order=order)


def zeros(shape, dtype=float, order="C") -> ndarray:
    out = empty(shape, dtype, order)
    out.fill(0)
    return out


def ones(shape, dtype=float) -> ndarray:
    out = empty(shape, dtype)
    out.fill(1)
    return out


def full(shape, fill_value, dtype=None) -> ndarray:
    out = empty(shape, np.asarray(fill_value).dtype if dtype is None else dtype)
    out.fill(fill_value)
    return out


def empty_like(a, dtype=None, order="K", shape=None) -> ndarray:
    return empty(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def zeros_like(a, dtype=None) -> ndarray:
    return zeros(a.shape, a.dtype if dtype is None else dtype)


def arange(*args, dtype=None) -> ndarray:
    return _from_host(np.arange(*args, dtype=dtype))


def _from_host(host: np.ndarray) -> ndarray:
    """A host-to-device copy into a new array on the current device."""
    if not host.dtype.isnative:  # CuPy keeps native byte order only
        host = host.astype(host.dtype.newbyteorder("="))
    _check_dtype(host.dtype)
    _sync_copy("H2D")
    out = empty(host.shape, host.dtype)
    out._host()[...] = host
    return out


def asarray(a, dtype=None, order=None, *, blocking=False) -> ndarray:
    """CuPy's ``asarray``: a CuPy array as it is (any device), a ``__cuda_array_interface__``
    producer without a copy, anything else copied from the host."""
    if isinstance(a, ndarray):
        return a if dtype is None else a.astype(dtype, copy=False)
    if hasattr(a, "__cuda_array_interface__"):
        arr = _from_cai(a, a.__cuda_array_interface__)
        return arr if dtype is None else arr.astype(dtype, copy=False)
    host = np.asarray(a, dtype=dtype)
    if host.dtype.kind == "O":
        raise ValueError(f"Unsupported dtype {host.dtype}")
    return _from_host(host)


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False) -> ndarray:
    """CuPy's ``array``; a copy (or an ``order="C"`` array that is not C-contiguous) is made
    C-contiguous: the stand-in's kernels write new arrays in C order only."""
    if order not in ("K", "A", "C", None) or subok or ndmin:
        raise NotImplementedError(f"the CuPy stand-in's array() models order K/A/C only, got {order=}")
    arr = asarray(obj, dtype)
    if (copy and arr is obj) or (order == "C" and not arr.flags.c_contiguous):
        return arr.copy()
    return arr


def ascontiguousarray(a, dtype=None) -> ndarray:
    if not isinstance(a, ndarray):
        a = asarray(a)
    dtype = a.dtype if dtype is None else _check_dtype(dtype)
    if a.flags.c_contiguous and dtype == a.dtype:
        return a
    return _computed(lambda: np.ascontiguousarray(a._host(), dtype=dtype), a)


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    if isinstance(a, ndarray):
        return a.get()
    return np.asarray(a)


def _extent(shape, strides, itemsize) -> tuple[int, int]:
    """Bytes before and after the first element that the array covers."""
    if math.prod(shape) == 0:
        return 0, 0
    low = sum((s - 1) * st for s, st in zip(shape, strides, strict=True) if st < 0)
    high = sum((s - 1) * st for s, st in zip(shape, strides, strict=True) if st > 0)
    return -low, high + itemsize


def _wrap_external(ptr, shape, dtype, strides, owner, device_id) -> ndarray:
    dtype = _check_dtype(dtype)
    strides = _c_strides(shape, dtype.itemsize) if strides is None else tuple(strides)
    before, after = _extent(shape, strides, dtype.itemsize)
    if math.prod(shape) == 0:
        mem = _memory.UnownedMemory(ptr, 0, owner, _current() if device_id < 0 else device_id)
        return ndarray(shape, dtype, cuda.MemoryPointer(mem, 0), strides)
    mem = _memory.UnownedMemory(ptr - before, before + after, owner, device_id)
    return ndarray(shape, dtype, cuda.MemoryPointer(mem, before), strides)


def _from_cai(obj, cai: dict) -> ndarray:
    ptr = cai["data"][0]
    shape = tuple(cai["shape"])
    dtype = np.dtype(cai["typestr"])
    return _wrap_external(ptr, shape, dtype, cai.get("strides"), obj, -1)


_DLPACK_DTYPES = {_dlpack.KDL_INT: "int", _dlpack.KDL_UINT: "uint", _dlpack.KDL_FLOAT: "float"}


def from_dlpack(x, *, device=None, copy=None) -> ndarray:
    """A DLPack producer's CUDA memory without a copy, exported for CuPy's current stream."""
    if isinstance(x, ndarray):
        return x._view(x._host())
    if not hasattr(x, "__dlpack__"):
        raise AttributeError(f"'{type(x).__name__}' object has no attribute '__dlpack__'")
    dev_type, dev_id = x.__dlpack_device__()
    if dev_type != _dlpack.KDL_CUDA:
        raise RuntimeError(
            "CuPy is built against CUDA, different from the backend that backs the incoming DLPack tensor"
        )
    stream = _stream().ptr
    capsule = x.__dlpack__(stream=stream if stream else 1)
    info = _dlpack.read(capsule)
    if info["lanes"] != 1:
        raise ValueError(f"vector dtypes (lanes={info['lanes']}) is not supported")
    code, bits = info["code"], info["bits"]
    if code == _dlpack.KDL_BFLOAT:
        if _state.VERSION["major"] < 14:
            raise NotImplementedError("CuPy does not support bfloat16 yet")
        import ml_dtypes

        dtype = np.dtype(ml_dtypes.bfloat16)
    elif code == _dlpack.KDL_BOOL:
        dtype = np.dtype(np.bool_)
    elif code in _DLPACK_DTYPES:
        dtype = np.dtype(f"{_DLPACK_DTYPES[code]}{bits}")
    else:
        raise TypeError(f"Unsupported dtype. dtype code: {code}")
    shape = info["shape"]
    strides = None if info["strides"] is None else tuple(s * dtype.itemsize for s in info["strides"])
    return _wrap_external(info["ptr"], shape, dtype, strides, (capsule, x), dev_id)


# ---- functions (each a kernel on the current device)


def moveaxis(a, source, destination) -> ndarray:
    return a._view(np.moveaxis(a._host(), source, destination))


def broadcast_to(a, shape) -> ndarray:
    return a._view(np.broadcast_to(a._host(), shape))


def concatenate(tup, axis=0, out=None, dtype=None) -> ndarray:
    arrays = list(tup)
    for a in arrays:
        if not isinstance(a, ndarray):
            raise TypeError(f"Only cupy arrays can be concatenated, got {type(a)}")
    return _computed(lambda: np.concatenate([a._host() for a in arrays], axis=axis, dtype=dtype), *arrays)


def where(condition, x=None, y=None) -> ndarray:
    if x is None or y is None:
        raise NotImplementedError("the stand-in implements only the 3-argument where")
    for v in (condition, x, y):
        if isinstance(v, np.ndarray):
            raise TypeError(f"Unsupported type {type(v)}")
    return _computed(lambda: np.where(_h(condition), _h(x), _h(y)), condition, x, y)


def argsort(a, axis=-1, kind=None) -> ndarray:
    if kind not in (None, "stable"):
        raise ValueError(f"kind: only None or 'stable' are supported, got {kind!r}")
    return _computed(lambda: np.argsort(a._host(), axis=axis, kind="stable"), a)


def sort(a, axis=-1, kind=None) -> ndarray:
    return _computed(lambda: np.sort(a._host(), axis=axis, kind="stable"), a)


def take_along_axis(a, indices, axis) -> ndarray:
    if not isinstance(indices, ndarray):
        raise TypeError(f"indices: expected a cupy.ndarray, got {type(indices)}")
    return _computed(
        lambda: np.take_along_axis(a._host(), indices._host(), axis=axis),
        a,
        indices,
        meta=(indices.shape, a.dtype),
    )


def copyto(dst, src, casting="same_kind") -> None:
    if isinstance(src, np.ndarray):
        raise TypeError(f"Unsupported type {type(src)}")
    _element_kernel(dst, src)
    host = dst._host()
    _kernel(lambda: np.copyto(host, _h(src), casting=casting))


def may_share_memory(a, b, max_work=None) -> bool:
    if a._memptr.mem is not b._memptr.mem and a._device != b._device:
        return False
    a0, a1 = _bounds(a)
    b0, b1 = _bounds(b)
    return a0 < b1 and b0 < a1 and a.size > 0 and b.size > 0


def _bounds(a) -> tuple[int, int]:
    before, after = _extent(a.shape, a.strides, a.itemsize)
    return a.data.ptr - before, a.data.ptr + after


def take(a, indices, axis=None) -> ndarray:
    return _computed(lambda: np.take(a._host(), _h(indices), axis=axis), a, indices)


def tensordot(a, b, axes=2) -> ndarray:  # registered by Dask's CuPy backend, never called here
    raise NotImplementedError("the stand-in has no tensordot")


def einsum(*operands, **kwargs) -> ndarray:  # as tensordot
    raise NotImplementedError("the stand-in has no einsum")


def isnan(a) -> ndarray:
    return _computed(lambda: np.isnan(a._host()), a)


def get_default_memory_pool():
    return _memory.get_default_memory_pool()


class _Random:
    """``cupy.random``: host generator, values copied to the device."""

    def random(self, size=None, dtype=float):
        return _from_host(np.random.default_rng().random(size, dtype=dtype))

    def rand(self, *shape):
        return self.random(shape)

    def randn(self, *shape):
        return _from_host(np.random.default_rng().standard_normal(shape))


random = _Random()


from . import lib  # noqa: E402
from ._module import RawModule  # noqa: E402

__all__ = [
    "RawModule",
    "arange",
    "argsort",
    "array",
    "asarray",
    "ascontiguousarray",
    "asnumpy",
    "broadcast_to",
    "concatenate",
    "copyto",
    "cuda",
    "einsum",
    "empty",
    "empty_like",
    "from_dlpack",
    "full",
    "get_default_memory_pool",
    "isnan",
    "lib",
    "may_share_memory",
    "moveaxis",
    "ndarray",
    "ones",
    "random",
    "set_version",
    "sort",
    "take",
    "take_along_axis",
    "tensordot",
    "where",
    "zeros",
    "zeros_like",
]
