"""The CUB peer's shim (benchmarks/cub/cutopk_cub.cu + benchmarks/cutopk_bench/cub.py) without a GPU: the
ctypes declarations against the C source, the errors when it cannot be built or loaded, the
Python side's pointers, shapes and layouts against a stand-in library, and (when nvcc and CCCL
>= 3.3 headers are here) an nvcc build of the real library, whose own argument checks run
before any CUDA call. Nothing here runs CUB: that needs a GPU (tools/gpu_session.sh)."""

from __future__ import annotations

import ctypes
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import types

import numpy as np
import pytest
from cutopk_bench import cub

import cutopk
from cutopk._demo import check, grid, inputs
from cutopk._host_build import cache_home

# --- the declarations against the C source ------------------------------------------------------

C_TYPES = {
    "int": ctypes.c_int,
    "std::int64_t": ctypes.c_int64,
    "const char*": ctypes.c_char_p,
    "std::size_t*": ctypes.POINTER(ctypes.c_size_t),
    "void*": ctypes.c_void_p,
    "const void*": ctypes.c_void_p,
    "std::int64_t*": ctypes.c_void_p,  # passed as an address
}


def c_functions() -> dict[str, tuple[str, list[str]]]:
    """Every function of the shim's ``extern "C"`` block: name -> (return type, parameter types)."""
    text = cub.SOURCE.read_text()
    block = text[text.index('extern "C" {') :]
    out = {}
    for ret, name, params in re.findall(
        r"^([\w:]+(?:\s*\*)?|const char\*)\s+(cutopk_cub_\w+)\(([^)]*)\)", block, re.M
    ):
        types_ = [" ".join(p.split()[:-1]).replace(" *", "*") for p in params.split(",") if p.strip()]
        out[name] = (ret, types_)
    return out


def test_ctypes_signatures_match_the_c_source():
    functions = c_functions()
    assert set(functions) == set(cub.SIGNATURES)
    for name, (ret, params) in functions.items():
        restype, argtypes = cub.SIGNATURES[name]
        assert C_TYPES[ret] is restype, name
        assert [C_TYPES[p] for p in params] == argtypes, name


def test_dtype_codes_match_the_c_enum():
    enum = dict(re.findall(r"DTYPE_(\w+) = (\d+)", cub.SOURCE.read_text()))
    assert {name.lower(): int(code) for name, code in enum.items()} == cub.DTYPES


# --- when it cannot be built or loaded ----------------------------------------------------------


def test_missing_library_says_how_to_build_it(tmp_path):
    with pytest.raises(cub.CubUnavailable, match=r"not built .*benchmarks/cub/build.py --arch sm_90"):
        cub.load(tmp_path / "libcutopk_cub.so")


def test_a_file_that_is_not_a_library_is_refused(tmp_path):
    bad = tmp_path / "libcutopk_cub.so"
    bad.write_bytes(b"not an ELF file")
    with pytest.raises(cub.CubUnavailable, match="cannot load the CUB shim"):
        cub.load(bad)


def test_library_path_follows_the_source_and_the_override(monkeypatch, tmp_path):
    monkeypatch.delenv(cub.LIB_ENV, raising=False)
    path = cub.library_path("sm_80")
    assert path.parent == cub.BUILD_DIR and path.name == f"libcutopk_cub-sm_80-{cub.source_hash()}.so"
    monkeypatch.setenv(cub.LIB_ENV, str(tmp_path / "mine.so"))
    assert cub.library_path() == tmp_path / "mine.so"


def test_headers_without_device_topk_are_refused(monkeypatch, tmp_path):
    old = tmp_path / "old"
    (old / "cub").mkdir(parents=True)
    (old / "cub" / "version.cuh").write_text("#define CUB_VERSION 300001 // CUDA 13.0's own\n")
    monkeypatch.setenv(cub.CCCL_ENV, str(old))
    monkeypatch.setattr(cub, "HEADERS_COPY", tmp_path / "none")
    monkeypatch.setattr(cub, "_wheel_includes", lambda: [])
    with pytest.raises(
        cub.CubUnavailable, match=r"no CCCL headers with cub::DeviceTopK .*old \(CUB 300001\)"
    ):
        cub.cccl_include()


def test_build_without_nvcc_or_with_a_bad_arch(tmp_path):
    with pytest.raises(cub.CubUnavailable, match="nvcc not found"):
        cub.build(out=tmp_path / "x.so", nvcc="no-such-nvcc-here")
    with pytest.raises(ValueError, match="arch: expected a real architecture"):
        cub.build("compute_90", out=tmp_path / "x.so")


def test_nvcc_command_puts_cccl_first_and_links_the_runtime_statically(tmp_path):
    cmd = cub.nvcc_command(tmp_path / "x.so", "sm_90", tmp_path / "cccl")
    assert cmd[0] == "nvcc" and "-arch=sm_90" in cmd and "-shared" in cmd
    assert cmd[cmd.index("-I") + 1] == str(tmp_path / "cccl") and cmd[cmd.index("-cudart") + 1] == "static"


def test_unknown_dtype_is_refused_before_the_library_is_called():
    lib = object.__new__(cub.CubLibrary)  # no library behind it: the check comes first
    with pytest.raises(ValueError, match=r"dtype: the CUB shim takes .*'int32'"):
        lib.call(False, "int32", True, 0, 0, 0, 0, 0, 1, 10, 2, 0)


def test_a_broken_nvidia_namespace_means_no_wheel_headers(monkeypatch):
    def find_spec(name):
        raise ValueError("nvidia.__spec__ is None")

    monkeypatch.setattr(cub.importlib.util, "find_spec", find_spec)
    assert cub._wheel_includes() == []


def test_a_failing_nvcc_leaves_no_library_and_passes_on_its_messages(tmp_path):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'cutopk_cub.cu(12): error: identifier \"x\" is undefined' >&2\nexit 2\n")
    nvcc.chmod(0o755)
    out = tmp_path / "lib" / "libcutopk_cub.so"
    with pytest.raises(
        cub.CubUnavailable, match=r'nvcc failed \(2\): cutopk_cub.cu\(12\): error: identifier "x"'
    ):
        cub.build("sm_90", out, tmp_path, nvcc=str(nvcc))
    assert list(out.parent.iterdir()) == []


def test_copy_headers_replaces_an_old_copy_with_the_four_folders(tmp_path):
    include = tmp_path / "cccl"
    for part in ("cub", "cuda", "nv", "thrust", "unrelated"):
        (include / part).mkdir(parents=True)
        (include / part / "a.h").write_text(part)
    dest = tmp_path / "copy"
    (dest / "stale").mkdir(parents=True)
    assert cub.copy_headers(include, dest) == dest
    assert sorted(p.name for p in dest.iterdir()) == ["cub", "cuda", "nv", "thrust"]
    assert (dest / "thrust" / "a.h").read_text() == "thrust"
    fresh = tmp_path / "fresh" / "cccl"  # no earlier copy: nothing to remove first
    assert sorted(p.name for p in cub.copy_headers(include, fresh).iterdir()) == [
        "cub",
        "cuda",
        "nv",
        "thrust",
    ]


def test_a_library_without_an_entry_point_is_refused(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a stand-in library")
    src, lib = tmp_path / "partial.c", tmp_path / "libpartial.so"
    src.write_text("int cutopk_cub_version(void) { return 300500; }\n")
    __import__("subprocess").run([cc, "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    with pytest.raises(
        cub.CubUnavailable, match=r"has no cutopk_cub_\w+: built from another source\? rebuild it"
    ):
        cub.CubLibrary(lib)


def test_available_says_why_not_instead_of_raising(monkeypatch, tmp_path):
    monkeypatch.setenv(cub.LIB_ENV, str(tmp_path / "missing.so"))
    lib, why = cub.available.__wrapped__(cub.arch_of("90"))  # uncached: this environment only
    assert lib is None and "the CUB shim is not built" in why and "--arch sm_90" in why
    monkeypatch.setattr(cub, "load", lambda arch: f"library for {arch}")
    assert cub.available.__wrapped__("sm_80") == ("library for sm_80", None)


# --- the Python side against a stand-in library and CuPy ----------------------------------------


class DevArray(np.ndarray):
    """A NumPy array with CuPy's ``.data.ptr``."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)


def fake_cupy() -> types.ModuleType:
    cp = types.ModuleType("cupy")
    cp.moveaxis, cp.argsort, cp.take_along_axis = np.moveaxis, np.argsort, np.take_along_axis
    cp.ascontiguousarray = lambda a: np.ascontiguousarray(a).view(DevArray)
    cp.empty = lambda shape, dtype: np.empty(shape, dtype).view(DevArray)
    cp.int64, cp.uint8 = np.int64, np.uint8
    cp.cuda = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=0))
    return cp


class FakeLibrary:
    """CUB's contract in NumPy: reads ``rows x n`` contiguous keys at the given address, writes each
    row's top K (torch's NaN rule) in a scrambled order, as DeviceTopK may."""

    batched_max_n = 4096

    def __init__(self):
        self.calls = []

    def call(self, batched, dtype, largest, temp, temp_bytes, keys_in, keys_out, idx_out, rows, n, k, stream):
        self.calls.append(
            dict(batched=batched, dtype=dtype, rows=rows, n=n, k=k, temp=temp, temp_bytes=temp_bytes)
        )
        if not temp:
            return 96
        dt = inputs.numpy_dtype(dtype)

        def at(address, count, d):
            buf = (ctypes.c_char * (count * d.itemsize)).from_address(address)
            return np.frombuffer(buf, dtype=d).reshape(rows, -1)

        x = at(keys_in, rows * n, dt)
        r = cutopk.top_k(x, k, mode="largest" if largest else "smallest", nan="largest", backend="numpy")
        scramble = np.random.default_rng(k).permutation(k)
        at(keys_out, rows * k, dt)[...] = r.values[:, scramble]
        at(idx_out, rows * k, np.dtype(np.int64))[...] = r.indices[:, scramble]
        return temp_bytes


@pytest.mark.parametrize("layout", grid.LAYOUTS)
@pytest.mark.parametrize("shape", [(24, 300, 7), (3, 5000, 40)])  # batched; one DeviceTopK call per row
@pytest.mark.parametrize(
    ("dtype", "mode", "dist"), [("float32", "smallest", "nan"), ("bfloat16", "largest", "uniform")]
)
@pytest.mark.parametrize("sort", [False, True])
def test_route_passes_contiguous_rows_and_returns_them_along_the_axis(
    monkeypatch, layout, shape, dtype, mode, dist, sort
):
    monkeypatch.setitem(__import__("sys").modules, "cupy", fake_cupy())
    rows, n, k = shape
    case = grid.Case("t", rows, n, k, mode, dtype=dtype, dist=dist, layout=layout)
    x, axis = inputs.arrange(inputs.values(case), case)
    lib = FakeLibrary()
    route = cub.route(x.view(DevArray), axis, k, mode, dtype, lib, sort)
    assert route.name == ("cub-sorted" if sort else "cub") and route.sorts == sort and route.nan == "largest"
    assert route.detail.startswith("DeviceBatchedTopK" if n <= 4096 else f"DeviceTopK per row ({rows} calls)")
    assert ("+copy to contiguous rows" in route.detail) == (layout != "rows")
    values, indices = route.call()
    expected = cutopk.top_k(x, k, axis=axis, mode=mode, nan="largest").values
    assert check.check(x, axis, expected, (np.asarray(values), np.asarray(indices)), sorts=sort) is None
    assert values.dtype == x.dtype and indices.dtype == np.int64
    query, run = lib.calls
    assert query["temp"] == 0 and run["temp"] != 0 and run["temp_bytes"] == 96  # the queried size
    assert (run["rows"], run["n"], run["k"], run["batched"]) == (rows, n, k, n <= 4096)


def test_route_skips_what_the_shim_cannot_take(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cupy", fake_cupy())
    x = np.zeros((2, 8), np.float64).view(DevArray)
    assert "not float64" in cub.route(x, 1, 2, "largest", "float64", FakeLibrary()).reason
    assert (
        "nothing to select"
        in cub.route(x.astype(np.float32), 1, 0, "largest", "float32", FakeLibrary()).reason
    )


# --- the real library, built with nvcc (no GPU needed) ------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The shim compiled for sm_90 into a temporary folder (about a minute of one CPU core)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: the CUB shim cannot be compiled here")
    try:
        include = cub.cccl_include()
    except cub.CubUnavailable as exc:
        pytest.skip(f"no CCCL >= 3.3 headers: {exc}")
    out = tmp_path_factory.mktemp("cub") / "libcutopk_cub.so"
    shutil.copyfile(cached_build(include), out)
    return cub.CubLibrary(out), include


def cached_build(include) -> pathlib.Path:
    """The shim for sm_90, built by cub.build into the user's cache under a hash of everything
    that goes into it (the source, the nvcc command line, nvcc's version, CUB's version), as the
    simulator keeps its modules: CI runs this file in every run, and the build is about a minute
    of one CPU core (100 s in a CI run), the same minute each time the inputs are the same.
    CUTOPK_FULL_MATRIX=1 builds it afresh."""
    nvcc = shutil.which("nvcc")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    parts = (cub.SOURCE.read_text(), *cub.nvcc_command(pathlib.Path("OUT"), "sm_90", pathlib.Path("INCLUDE")))
    key = hashlib.sha256("\0".join((*parts, version, str(cub.cub_version(include)))).encode()).hexdigest()[
        :32
    ]
    cached = cache_home() / "cutopk" / "cub" / f"{key}.so"
    if os.environ.get("CUTOPK_FULL_MATRIX") == "1" or not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f"{key}-{os.getpid()}.so")
        cub.build("sm_90", tmp, include)
        tmp.replace(cached)  # atomic: a concurrent build of the same key is harmless
    return cached


def test_the_shim_compiles_with_nvcc_and_exports_its_entry_points(built):
    lib, include = built
    assert lib.path.stat().st_size > 100_000  # device code for sm_90 inside
    assert lib.version == cub.cub_version(include) >= cub.MIN_CUB_VERSION
    assert lib.batched_max_n == 4096
    assert lib.error_string(1) == "invalid argument"


@pytest.mark.parametrize(
    ("batched", "rows", "n", "k"),
    [(False, 1, 10, 11), (False, 1, 10, 0), (False, -1, 10, 2), (True, 4, 4097, 8), (True, 4, 0, 0)],
)
def test_the_shim_checks_its_arguments_before_any_cuda_call(built, batched, rows, n, k):
    lib, _ = built
    with pytest.raises(RuntimeError, match=r"failed: invalid argument \(cudaError 1\)"):
        lib.call(batched, "float32", True, 0, 0, 0, 0, 0, rows, n, k, 0)


def test_an_unknown_dtype_code_is_an_error_inside_the_shim_too(built):
    lib, _ = built
    size = ctypes.c_size_t(0)
    assert lib.entry(False)(7, 1, None, ctypes.byref(size), None, None, None, 1, 10, 2, None) == 1
