"""The backend seam (issue 40, item 1): one ``Call`` protocol in the core, one call object per
backend in its own package, every call made by the core and kept under a key of its one key
function (regular rows, ``lengths=``, CSR segments), and the GPU call describing itself."""

from __future__ import annotations

import ast
import inspect
import pathlib

import numpy as np
import pytest
from support.backends import require

import cutopk
from cutopk._core import call as _call
from cutopk.cuda import launcher as _launcher
from cutopk.numpy import call as _numpy_call

# What the core asks of a prepared call (cutopk._core.call.Call), whatever its backend.
MEMBERS = ("req", "dtype", "result_shape", "device", "plain", "run", "describe")


@pytest.fixture(autouse=True)
def _clean_cache():
    _call.CACHE.clear()
    yield
    _call.CACHE.clear()


def test_the_protocol_names_what_the_core_asks_of_a_call():
    declared = set(_call.Call.__annotations__) | {
        name
        for name, member in vars(_call.Call).items()
        if inspect.isfunction(member) and not name.startswith("__")
    }
    assert declared == set(MEMBERS)


@pytest.mark.parametrize("backend", ["numpy", "sim"])
def test_each_backends_call_lives_in_its_package_and_has_every_member(backend):
    require(backend)
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    _, _, _, call, _ = _call.prepare(x, 2, -1, "largest", True, "last", np.int64, backend, "auto")
    owner = {"numpy": _numpy_call.NumpyCall, "sim": _launcher.GpuCall}[backend]
    assert type(call) is owner
    missing = [name for name in MEMBERS if not hasattr(call, name)]
    assert not missing, f"{owner.__name__} lacks {missing} of the Call protocol"
    assert call.plain(x)[1].tolist() == [[5, 4]] * 4
    assert call.describe(True, x) == cutopk.plan(x, 2, backend=backend)  # plan(): the call described


def call_classes(source: str) -> list[str]:
    """The classes of a module's source with a ``run`` method, the protocol ``Call`` apart."""
    return [
        node.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef)
        and node.name != "Call"
        and any(isinstance(f, ast.FunctionDef) and f.name == "run" for f in node.body)
    ]


def test_no_backend_call_object_is_defined_in_the_core():
    # Read from the sources, not imported: the core's autograd module needs torch, which the
    # README's environment does not install.
    sources = sorted(pathlib.Path(_call.__file__).parent.glob("*.py"))
    assert len(sources) >= 6
    assert {p.name: call_classes(p.read_text()) for p in sources if call_classes(p.read_text())} == {}
    assert not hasattr(_call, "NumpyCall") and not hasattr(_call, "describe_gpu_call")


def test_the_core_check_finds_a_call_class():
    source = "class Call:\n    def run(self): ...\nclass NumpyCall:\n    def run(self): ...\n"
    assert call_classes(source) == ["NumpyCall"]


def test_segments_are_kept_under_the_cores_one_key():
    require("sim")
    data = np.array([3.0, 1.0, 2.0, 9.0, 8.0], np.float32)
    r = cutopk.segmented_top_k(data, np.array([0, 3, 5]), 2, backend="sim")
    assert r.indices.tolist() == [[0, 2], [0, 1]]
    width, bound = 3, 1 << 62  # the longest segment; offsets checked on the host
    key = _call.cache_key(np.ndarray, (2, width), (0, 4), np.dtype(np.float32), 2, 1, "largest", "value", "last",
                          np.dtype(np.int64), "sim", "auto", (-1, _call.SEGMENTS, bound))  # fmt: skip
    assert _call.CACHE.hit(key) is not None
    assert _call.CACHE.info()["size"] == 1


def test_a_call_with_lengths_is_keyed_apart_from_regular_rows():
    require("sim")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    lengths = np.array([6, 6])  # the longest is the row: no narrowed view, one signature
    want = cutopk.top_k(x, 2, backend="sim")
    got = cutopk.top_k(x, 2, backend="sim", lengths=lengths)
    assert got.indices.tolist() == want.indices.tolist()
    regular = _call.cache_key(np.ndarray, x.shape, x.strides, x.dtype, 2, -1, "largest", True, "last", np.int64,
                               "sim", "auto", -1)  # fmt: skip
    lengths_key = _call.cache_key(np.ndarray, x.shape, x.strides, x.dtype, 2, 1, "largest", True, "last",
                                  np.dtype(np.int64), "sim", "auto", (-1, _call.LENGTHS))  # fmt: skip
    assert set(_call.CACHE._entries) == {regular, lengths_key}


@pytest.mark.parametrize(
    ("dtype", "axis", "steps"),
    [
        (">f4", -1, ["library: byte swap of the input"]),
        ("<f4", 0, ["library: outputs moved to axis 0"]),
        (">f4", 0, ["library: byte swap of the input", "library: outputs moved to axis 0"]),
    ],
)
def test_the_library_steps_are_both_a_launch_and_a_copy_of_the_plan(dtype, axis, steps):
    require("sim")
    x = np.zeros((40, 30), dtype)
    p = cutopk.plan(x, 3, axis=axis, backend="sim")
    library = [launch.kernel for launch in p.launches if not launch.grid]
    assert [kernel for kernel in library if kernel in steps] == steps
    rows, n, item = (30, 40, 4) if axis == 0 else (40, 30, 4)
    sizes = {
        "library: byte swap of the input": ("input: byte-swapped to native order", rows * n * item),
        "library: outputs moved to axis 0": ("outputs: moved to axis 0", rows * 3 * (item + 8)),
    }
    for step in steps:
        line, size = sizes[step]
        assert f"{line} ({size} bytes)" in p.copies
    if dtype == ">f4":  # the simulator's swapped copy is scratch besides the outputs
        assert p.scratch_bytes >= rows * n * item
