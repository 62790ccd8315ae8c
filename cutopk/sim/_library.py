"""The shared objects of simulator modules: built once per (source, flags, build kind) and
loaded with their entry points typed (:func:`load`), and the modules' fiber stacks kept warm for
the few launched last only (:func:`keep_warm`)."""

from __future__ import annotations

import ctypes
import os
import pathlib
import threading

from . import _toolchain

# The modules launched most recently (least recent first) keep their fiber stacks and shared
# memory between launches; older ones are trimmed (cutopk_sim_trim): a process can map only
# vm.max_map_count regions, and a module's stacks for a block of 1024 threads take 2048. Besides
# the count, the warm modules' fibers together stay within WARM_FIBERS (a launch of clusters keeps
# a whole cluster resident: 8 blocks of 512 threads are 4096 fibers, 8192 maps, in one module).
KEEP_WARM = 8
WARM_FIBERS = 12288
_WARM: dict[int, tuple[ctypes.CDLL, int]] = {}
_MODULE_CACHE: dict[tuple, tuple[ctypes.CDLL, pathlib.Path]] = {}
_MODULE_CACHE_LOCK = threading.Lock()
# The most parameters a kernel's description holds (cutopk_sim_describe).
MAX_PARAMS = 64


class ParamInfo(ctypes.Structure):
    """``cutopk_sim::ParamInfo`` in cutopk/sim/runtime/sim_launch.h."""

    _fields_ = [
        ("kind", ctypes.c_char),
        ("pointee", ctypes.c_char),
        ("size", ctypes.c_ulonglong),
        ("pointee_size", ctypes.c_ulonglong),
        ("pointee_align", ctypes.c_ulonglong),
        ("type", ctypes.c_char_p),
    ]


def keep_warm(lib: ctypes.CDLL, fibers: int = 0) -> None:
    """Mark ``lib`` launched last (its launch keeping ``fibers`` threads' stacks); trim the modules
    launched least recently past KEEP_WARM modules or WARM_FIBERS fibers (never ``lib``)."""
    _, before = _WARM.pop(id(lib), (lib, 0))
    _WARM[id(lib)] = (lib, max(before, fibers))
    while len(_WARM) > 1 and (len(_WARM) > KEEP_WARM or sum(f for _, f in _WARM.values()) > WARM_FIBERS):
        _WARM.pop(next(iter(_WARM)))[0].cutopk_sim_trim()


def load(
    source: str, flags: tuple[str, ...], asan: bool, traffic: bool = False
) -> tuple[ctypes.CDLL, pathlib.Path]:
    key = (source, flags, asan, traffic)
    with _MODULE_CACHE_LOCK:
        entry = _MODULE_CACHE.get(key)
        if entry is None:
            path = _toolchain.build(source, flags, asan, traffic)
            lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL | os.RTLD_NOW)
            lib.cutopk_sim_launch.restype = ctypes.c_int
            lib.cutopk_sim_launch.argtypes = [
                ctypes.c_int,
                *[ctypes.c_uint] * 6,
                ctypes.c_ulonglong,
                ctypes.POINTER(ctypes.c_void_p),
                ctypes.c_int,
                ctypes.c_ulonglong,
                ctypes.c_ulonglong,
                ctypes.c_int,
                ctypes.c_ulonglong,
                ctypes.c_double,
            ]
            lib.cutopk_sim_describe.restype = ctypes.c_int
            lib.cutopk_sim_describe.argtypes = [ctypes.c_int, ctypes.POINTER(ParamInfo), ctypes.c_int]
            lib.cutopk_sim_error.restype = ctypes.c_char_p
            lib.cutopk_sim_fault_frames.restype = ctypes.c_int
            lib.cutopk_sim_trim.restype = None
            lib.cutopk_sim_set_cluster.restype = None
            lib.cutopk_sim_set_cluster.argtypes = [ctypes.c_uint] * 3
            if traffic:
                lib.cutopk_sim_traffic_begin.restype = ctypes.c_int
                lib.cutopk_sim_traffic_begin.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_int]
                lib.cutopk_sim_traffic_end.restype = None
                lib.cutopk_sim_traffic_end.argtypes = [ctypes.POINTER(ctypes.c_ulonglong)]
            entry = _MODULE_CACHE[key] = (lib, path)
    return entry
