"""DLPack capsules read and written with ctypes (the unversioned ``dltensor`` form)."""

from __future__ import annotations

import ctypes

import numpy as np

KDL_CPU, KDL_CUDA = 1, 2
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT, KDL_BOOL = 0, 1, 2, 4, 6


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def managed(capsule) -> DLManagedTensor:
    if not _is_valid(capsule, b"dltensor"):
        raise BufferError("expected an unconsumed, unversioned 'dltensor' DLPack capsule")
    return DLManagedTensor.from_address(_get_pointer(capsule, b"dltensor"))


def read(capsule) -> dict:
    """The fields of a capsule's tensor: data pointer (with the byte offset), device, dtype code
    and bits, shape, strides in elements (None: C-contiguous)."""
    t = managed(capsule).dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    return {
        "ptr": (t.data or 0) + t.byte_offset,
        "device": (t.device.device_type, t.device.device_id),
        "code": t.dtype.code,
        "bits": t.dtype.bits,
        "lanes": t.dtype.lanes,
        "shape": shape,
        "strides": strides,
    }


def export(host: np.ndarray, device_id: int):
    """A capsule of ``host``'s memory (NumPy's own export) that says it is on CUDA device
    ``device_id``: a consumer that reads the device refuses it as host memory (NumPy does)."""
    bfloat16 = host.dtype.name == "bfloat16"  # NumPy exports no bfloat16: its bits, retyped
    capsule = host.view(np.int16).__dlpack__() if bfloat16 else host.__dlpack__()
    tensor = managed(capsule).dl_tensor
    tensor.device = DLDevice(KDL_CUDA, device_id)
    if bfloat16:
        tensor.dtype = DLDataType(KDL_BFLOAT, 16, 1)
    return capsule
