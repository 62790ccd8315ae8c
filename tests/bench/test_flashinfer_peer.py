"""The FlashInfer peers' plumbing without a GPU (benchmarks/flashinfer, benchmarks/cutopk_bench/flashinfer*.py):
the ctypes declarations against the C source, what FlashInfer refuses and which backend its top_k
picks, the build script's arguments, the wheel's extraction and the CUB core cut from its source,
and (when the library is built here) its symbols and sm_90 code. Nothing here runs FlashInfer:
that needs a GPU (tools/gpu_session.sh scoreboard)."""

from __future__ import annotations

import ctypes
import importlib.util
import pathlib
import re
import shutil
import subprocess
import sys
import types
import zipfile

import ml_dtypes
import numpy as np
import pytest
from cutopk_bench import flashinfer as fi
from cutopk_bench import flashinfer_build as fb
from cutopk_bench import shims

import cutopk
from cutopk._demo import baselines, check, grid, inputs

HAS_TORCH = baselines.missing("torch") is None

C_TYPES = {
    "int": ctypes.c_int,
    "std::int64_t": ctypes.c_int64,
    "const char*": ctypes.c_char_p,
    "std::size_t*": ctypes.POINTER(ctypes.c_size_t),
    "void*": ctypes.c_void_p,
    "const void*": ctypes.c_void_p,
}


def c_functions() -> dict[str, tuple[str, list[str]]]:
    """Every function of the shim's ``extern "C"`` block: name -> (return type, parameter types)."""
    text = fi.SOURCE.read_text()
    block = text[text.index('extern "C" {') :]
    out = {}
    pattern = r"^(const char\*|[\w:]+)\s+(cutopk_fi_\w+)\(([^)]*)\)"
    for ret, name, params in re.findall(pattern, block, re.M):
        kinds = [" ".join(p.split()[:-1]).replace(" *", "*") for p in params.split(",") if p.strip()]
        out[name] = (ret, kinds)
    return out


def test_ctypes_signatures_match_the_c_source():
    functions = c_functions()
    assert set(functions) == set(fi.SIGNATURES)
    for name, (ret, params) in functions.items():
        restype, argtypes = fi.SIGNATURES[name]
        assert C_TYPES[ret] is restype, name
        assert [C_TYPES[p] for p in params] == argtypes, name


def test_dtype_codes_match_the_c_enum():
    enum = dict(re.findall(r"DTYPE_(\w+) = (\d+)", fi.SOURCE.read_text()))
    assert {name.lower(): int(code) for name, code in enum.items()} == fi.DTYPES


# --- what FlashInfer refuses, and which backend its top_k picks ------------------------------------


@pytest.mark.parametrize(
    ("case", "why"),
    [
        (grid.Case("knn", 100, 10000, 10, "smallest"), "flashinfer.top_k selects the largest only"),
        (
            grid.Case("indexer", 4, 4096, 64, dtype="int8"),
            "flashinfer.top_k takes float32, float16, bfloat16, not int8",
        ),
        (grid.Case("layout", 64, 4096, 8, layout="axis0"), "contiguous (batch, d) rows only"),
        (grid.Case("huge", 1, 16, 64), "K=64 is larger than the row (16)"),
    ],
)
def test_refused_cases_say_why(case, why):
    assert why in fi.refusal(case.mode, case.dtype, case.layout, case.n, case.k)


def test_every_llm_and_indexer_case_is_taken():
    for case in grid.regime_cases("llm") + grid.regime_cases("indexer"):
        assert fi.refusal(case.mode, case.dtype, case.layout, case.n, case.k) is None, case


@pytest.mark.parametrize(
    ("rows", "n", "k", "dtype", "major", "backend"),
    [
        (64, 131072, 2048, "float32", 9, "cub"),  # fewer than 128 rows
        (256, 8192, 2048, "float32", 9, "cub"),  # rows of at most 8192
        (256, 131072, 50, "float32", 9, "native"),
        (256, 131072, 50, "bfloat16", 9, "cub"),  # 16-bit rows of 131072 or more
        (256, 65536, 4096, "float32", 9, "cub"),  # float32 K >= 4096 on long rows
        (256, 65536, 1024, "float32", 9, "native"),
        (1, 1 << 24, 64, "float32", 9, "native"),  # longer than DeviceBatchedTopK's 2**21
        (1, 16384, 64, "float32", 8, "native"),  # no cluster backend before sm_90
        (1, 8192, 64, "float32", 8, "cub"),
        (1, 8192, 64, "float32", 10, "native"),  # sm_100: the clusters backend, not built here
    ],
)
def test_unsorted_backend_follows_flashinfers_dispatch(rows, n, k, dtype, major, backend):
    assert fi.unsorted_backend(rows, n, k, dtype, major) == backend


def test_the_peers_are_gpu_peers_and_named_ones_only_are_set_up():
    assert {"flashinfer", "flashinfer-unsorted"} <= set(shims.GPU_PEERS)
    assert "runs only in a GPU benchmark" in shims.KIT.unavailable("flashinfer", gpu=False)
    case = grid.Case("t", 2, 50, 3)
    routes = baselines.peers(np.zeros((2, 50), np.float32), 1, case, gpu=False, only=("numpy-sort",))
    assert [r.name for r in routes] == ["numpy-sort"]


def test_flashinfer_facts_only_when_a_flashinfer_peer_may_run(monkeypatch, capsys):
    assert shims.flashinfer_facts({"compute_capability": "90"}, ("torch", "cub")) is None
    lib = types.SimpleNamespace(version="0.7.2.post1", has_cub=True, path="/x/lib.so")
    monkeypatch.setattr(fi, "available", lambda arch: (lib, None) if arch == "sm_90" else (None, "no"))
    facts = shims.flashinfer_facts({"compute_capability": "90"}, ())
    assert facts == {"available": True, "version": "0.7.2.post1", "cub_backend": True, "library": "/x/lib.so",
                     "note": fi.NOTE}  # fmt: skip
    assert (
        "FlashInfer peers: FlashInfer 0.7.2.post1 (with its CUB backend) from /x/lib.so"
        in capsys.readouterr().out
    )
    assert shims.flashinfer_facts({"compute_capability": "80"}, ("flashinfer",)) == {
        "available": False,
        "reason": "no",
    }


# --- loading --------------------------------------------------------------------------------------


def test_missing_library_says_how_to_build_and_carry_it(tmp_path):
    with pytest.raises(
        fi.FlashInferUnavailable, match=r"not built .*flashinfer/build.py --arch sm_90.*carry"
    ):
        fi.load(tmp_path / "libcutopk_flashinfer.so")


def test_a_file_that_is_not_a_library_is_refused(tmp_path):
    bad = tmp_path / "libcutopk_flashinfer.so"
    bad.write_bytes(b"not an ELF file")
    with pytest.raises(fi.FlashInferUnavailable, match="cannot load the FlashInfer shim"):
        fi.load(bad)


def test_library_path_follows_the_sources_the_version_and_the_override(monkeypatch, tmp_path):
    monkeypatch.delenv(fi.LIB_ENV, raising=False)
    path = fi.library_path("sm_80")
    assert path.parent == fi.BUILD_DIR and path.name == f"libcutopk_flashinfer-sm_80-{fi.source_hash()}.so"
    assert fi.source_hash("0.7.3") != fi.source_hash()
    monkeypatch.setenv(fi.LIB_ENV, str(tmp_path / "mine.so"))
    assert fi.library_path() == tmp_path / "mine.so"


# --- the build: flags, arguments, the wheel ---------------------------------------------------------


def test_gencode_is_flashinfers_for_sm_90_and_plain_before():
    assert fb.gencode("sm_90") == "-gencode=arch=compute_90a,code=sm_90a"
    assert fb.gencode("sm_80") == "-gencode=arch=compute_80,code=sm_80"
    for bad in ("sm_70", "90", "sm_9", "compute_90"):
        with pytest.raises(ValueError, match="arch: expected sm_75 or newer"):
            fb.gencode(bad)


def test_nvcc_command_has_the_jit_flags_the_wheels_includes_and_the_cub_switch(tmp_path):
    cmd = fb.nvcc_command(tmp_path / "x.so", "sm_90", tmp_path, with_cub=True, version="0.7.2.post1")
    assert set(fb.JIT_FLAGS) <= set(cmd) and "-gencode=arch=compute_90a,code=sm_90a" in cmd
    data = tmp_path / "flashinfer" / "data"
    assert f"-I{data / 'cccl' / 'cub'}" in cmd and cmd[cmd.index("-isystem") + 1] == str(data / "include")
    assert "-DCUTOPK_FI_WITH_CUB" in cmd and f"-I{tmp_path / 'gen'}" in cmd
    assert '-DCUTOPK_FI_VERSION="0.7.2.post1"' in cmd and cmd[-3:] == [
        str(fi.SOURCE),
        "-o",
        str(tmp_path / "x.so"),
    ]
    assert "-DCUTOPK_FI_WITH_CUB" not in fb.nvcc_command(tmp_path / "x.so", "sm_80", tmp_path, False, "v")


def run_build(*args):
    return subprocess.run(
        [sys.executable, "benchmarks/flashinfer/build.py", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--arch", "sm_70"], "arch: expected sm_75 or newer"),
        (["--wheel", "/nonexistent.whl"], "no such file: /nonexistent.whl"),
        (["--wheel", "pyproject.toml"], "expected a flashinfer_python-<version>-...whl file"),
    ],
)
def test_build_script_refuses_bad_arguments_before_any_work(args, message):
    proc = run_build(*args)
    assert proc.returncode == 2 and message in proc.stderr


def fake_wheel(tmp_path, version=fi.VERSION, cub_source=None, topk=True):
    wheel = tmp_path / fb.wheel_name(version)
    with zipfile.ZipFile(wheel, "w") as z:
        if topk:
            z.writestr("flashinfer/data/include/flashinfer/topk.cuh", "// topk\n")
        z.writestr("flashinfer/data/cccl/cub/cub/version.cuh", "#define CUB_VERSION 300600\n")
        z.writestr("flashinfer/data/csrc/other.cu", "// not needed\n")
        z.writestr("flashinfer/data/csrc/cub_topk.cu", cub_source or "")
    return wheel


CUB_SOURCE = """#define CUB_DISABLE_TOPK_UNSUPPORTED_ARCH_ASSERT
#include <cub/device/device_batched_topk.cuh>
#include "topk_transform_checks.h"
#include "tvm_ffi_utils.h"

using tvm::ffi::Optional;

namespace {
cudaError_t CUBBatchedTopK(int) { return cudaSuccess; }

// Input-side validation shared by every CUB entry and workspace-size query.
void CheckCUBTopKInput(const TensorView& input) {}
}  // namespace
"""


def test_extraction_takes_what_the_shim_needs_and_the_cub_core_drops_tvm_ffi(tmp_path):
    src = fb.extract(fake_wheel(tmp_path, cub_source=CUB_SOURCE), tmp_path / "src")
    data = src / "flashinfer" / "data"
    assert (data / "include/flashinfer/topk.cuh").is_file() and (data / "cccl/cub/cub/version.cuh").is_file()
    assert not (data / "csrc/other.cu").exists()
    core = fb.cub_core(src).read_text()
    assert "CUBBatchedTopK(int)" in core and "CheckCUBTopKInput" not in core
    assert "tvm_ffi_utils.h" not in core and "topk_transform_checks.h" not in core and "tvm::ffi" not in core
    assert core.startswith("// Generated") and '#include "tvm_ffi_standin.h"' in core
    assert core.rstrip().endswith("}  // namespace")
    assert (src / "gen" / "tvm_ffi_standin.h").read_text() == fi.STANDIN.read_text()


def test_a_wheel_without_the_kernels_or_a_changed_cub_source_is_refused(tmp_path):
    with pytest.raises(
        fi.FlashInferUnavailable, match=r"has no flashinfer/data/include/flashinfer/topk\.cuh"
    ):
        fb.extract(fake_wheel(tmp_path, topk=False), tmp_path / "a")
    src = fb.extract(fake_wheel(tmp_path, cub_source="void cub_topk();\n"), tmp_path / "b")
    with pytest.raises(fi.FlashInferUnavailable, match="changed shape"):
        fb.cub_core(src)
    broken = tmp_path / "c" / fb.wheel_name()
    broken.parent.mkdir()
    broken.write_bytes(b"not a zip")
    with pytest.raises(fi.FlashInferUnavailable, match="is not a wheel"):
        fb.extract(broken, tmp_path / "d")


def test_build_refuses_another_flashinfer_version(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: the version is checked after it")
    with pytest.raises(fi.FlashInferUnavailable, match=r"FlashInfer 0\.7\.3; .* follows 0\.7\.2\.post1"):
        fb.build(fake_wheel(tmp_path, version="0.7.3"), "sm_90", tmp_path / "x.so")


# --- the library built here ---------------------------------------------------------------------------


def built_library():
    path = fi.library_path("sm_90")
    if not path.is_file():
        pytest.skip(
            f"the FlashInfer shim is not built here ({path.name}): python benchmarks/flashinfer/build.py"
        )
    return path


def test_the_built_library_exports_every_entry_point():
    if shutil.which("nm") is None:
        pytest.skip("nm is not on PATH")
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(built_library())], capture_output=True, text=True
    ).stdout
    exported = set(re.findall(r"\bT (cutopk_fi_\w+)", out))
    assert exported == set(fi.SIGNATURES)


def cuobjdump() -> str | None:
    """cuobjdump on PATH, else the one of the nvidia-cuda-cuobjdump wheel."""
    if found := shutil.which("cuobjdump"):
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in list(spec.submodule_search_locations or []) if spec else []:
        for cu in ("cu13", "cu12"):
            if (tool := pathlib.Path(root) / cu / "bin" / "cuobjdump").is_file():
                return str(tool)
    return None


def test_the_built_library_holds_sm_90a_code_and_loads_without_a_gpu():
    path = built_library()
    if (tool := cuobjdump()) is None:
        pytest.skip("cuobjdump is not on PATH, nor is the nvidia-cuda-cuobjdump wheel installed")
    listing = subprocess.run([tool, "--list-elf", str(path)], capture_output=True, text=True).stdout
    assert "sm_90a" in listing
    lib = fi.FlashInferLibrary(path)  # the CUDA runtime is linked statically and starts only on a CUDA call
    assert lib.version == fi.VERSION and lib.has_cub
    assert lib.dll.cutopk_fi_row_states_bytes() == 1 << 20
    # Argument checks that run before any CUDA call: a null pointer or K above the row is refused.
    einval = 1  # cudaErrorInvalidValue
    assert lib.dll.cutopk_fi_native_topk(0, None, None, None, None, 1, 8, 2, 0, None) == einval
    size = ctypes.c_size_t(0)
    assert lib.dll.cutopk_fi_cub_topk(0, None, None, None, None, ctypes.byref(size), 1, 8, 9, None) == einval
    assert lib.dll.cutopk_fi_native_algorithm(7, 1, 8, 2, 0) == -1


# --- the Python side against a stand-in library (no GPU: torch on the CPU, host addresses) ----------


class DevArray(np.ndarray):
    """A NumPy array standing in for a CuPy one (the route reads ``flags``, ``ndim`` and ``view``)."""


class FakeLibrary:
    """FlashInfer's contract in NumPy: reads ``rows x n`` contiguous keys at the given address and
    writes each row's top K (torch's NaN rule) in a scrambled order, int32 indices for the native
    kernels and int64 for the CUB backend."""

    has_cub = True

    def __init__(self):
        self.calls = []

    def native_algorithm(self, dtype, rows, n, k):
        return "FilteredTopK"

    def _select(self, dtype, keys_in, vals_out, idx_out, idx_dtype, rows, n, k):
        dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)

        def at(address, count, d):
            buf = (ctypes.c_char * (count * d.itemsize)).from_address(address)
            return np.frombuffer(buf, dtype=d).reshape(rows, -1)

        r = cutopk.top_k(at(keys_in, rows * n, dt), k, nan="largest", backend="numpy")
        scramble = np.random.default_rng(k).permutation(k)
        at(vals_out, rows * k, dt)[...] = r.values[:, scramble]
        at(idx_out, rows * k, np.dtype(idx_dtype))[...] = r.indices[:, scramble]

    def native(self, dtype, keys_in, idx_out, vals_out, row_states, rows, n, k, stream):
        self.calls.append(("native", dtype, rows, n, k, row_states != 0))
        self._select(dtype, keys_in, vals_out, idx_out, np.int32, rows, n, k)

    def cub(self, dtype, keys_in, vals_out, idx_out, temp, temp_bytes, rows, n, k, stream):
        self.calls.append(("cub", dtype, rows, n, k, temp_bytes))
        if not temp:
            return 64
        self._select(dtype, keys_in, vals_out, idx_out, np.int64, rows, n, k)
        return temp_bytes

    class dll:  # stands for the ctypes handle
        @staticmethod
        def cutopk_fi_row_states_bytes():
            return 1 << 20


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(("rows", "n", "k"), [(4, 3000, 50), (130, 9000, 20)])  # cub, native when unsorted
@pytest.mark.parametrize("sort", [True, False])
def test_route_calls_the_backend_flashinfer_picks_and_returns_checked_answers(
    monkeypatch, dtype, rows, n, k, sort
):
    torch = pytest.importorskip("torch", reason="the FlashInfer route sorts the K with torch")

    cp = types.ModuleType("cupy")
    cp.uint16 = np.uint16
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda dev: types.SimpleNamespace(cuda_stream=0))
    case = grid.Case("llm", rows, n, k, dtype=dtype, dist="nan")
    x = inputs.values(case).view(DevArray)
    lib = FakeLibrary()
    route = fi.route(x, 1, case, lib, major=9, sort=sort)
    backend = "native" if sort else fi.unsorted_backend(rows, n, k, dtype, 9)
    assert route.name == ("flashinfer" if sort else "flashinfer-unsorted") and route.sorts == sort
    assert route.detail == (
        "CUB DeviceBatchedTopK (FlashInfer's cub backend)"
        if backend == "cub"
        else "native FilteredTopK" + (" +torch.sort of the K" if sort else "")
    )
    values, indices = route.call()
    assert indices.dtype == torch.int64
    expected = cutopk.top_k(np.asarray(x), k, nan="largest").values
    assert check.check(np.asarray(x), 1, expected, (values, indices), sorts=sort) is None
    assert lib.calls[-1][:5] == (backend, dtype, rows, n, k)


def test_route_skips_what_flashinfer_refuses_and_a_missing_cub_backend(monkeypatch):
    pytest.importorskip("torch", reason="the route is made on torch's stream")
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    x = np.zeros((4, 3000), np.float32).view(DevArray)
    smallest = fi.route(x, 1, grid.Case("knn", 4, 3000, 5, "smallest"), FakeLibrary(), 9, sort=True)
    assert smallest.call is None and "largest only" in smallest.reason
    no_cub = FakeLibrary()
    no_cub.has_cub = False
    route = fi.route(x, 1, grid.Case("llm", 4, 3000, 5), no_cub, 9, sort=False)
    assert route.call is None and "built without it" in route.reason
    column = fi.route(x, 0, grid.Case("layout", 3000, 4, 2, layout="axis0"), FakeLibrary(), 9, sort=True)
    assert column.call is None and "contiguous (batch, d) rows only" in column.reason


class _FakeLibrary:
    """What flashinfer.available hands over where the shim loads."""


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_flashinfer_route_says_why_the_shim_is_missing_or_hands_over_to_it(monkeypatch):
    import cupy

    cc = cupy.cuda.Device().compute_capability  # "90" on the stand-in's device 0
    x = np.zeros((4, 3000), np.float32)
    case = grid.Case("llm", 4, 3000, 5)
    monkeypatch.setattr(fi, "available", lambda arch: (None, f"no shim for {arch}"))
    route = shims.flashinfer_route(x, 1, case, sort=True)
    assert (route.name, route.call, route.reason) == ("flashinfer", None, f"no shim for sm_{cc}")
    lib, seen = _FakeLibrary(), []
    monkeypatch.setattr(fi, "available", lambda arch: (lib, None))
    monkeypatch.setattr(fi, "route", lambda *args: seen.append(args) or "the shim's route")
    assert shims.flashinfer_route(x, 1, case, sort=False) == "the shim's route"
    # the major version, and the SMs and opt-in shared bytes (a launch wider than the GPU is refused)
    assert seen == [(x, 1, case, lib, int(cc) // 10, False, (132, 227 * 1024))]


def test_a_flashinfer_peer_asked_for_says_what_it_lacks(monkeypatch):
    monkeypatch.setattr(fi, "available", lambda arch: (None, f"the FlashInfer shim for {arch} is not built"))
    import cupy

    why = shims.KIT.unavailable("flashinfer-unsorted", gpu=True)
    # torch first (FlashInfer's top_k allocates and sorts with it), then the shim.
    arch = f"sm_{cupy.cuda.Device().compute_capability}"
    assert why == (f"the FlashInfer shim for {arch} is not built" if HAS_TORCH else "torch is not installed")


def wheel_functions() -> dict:
    """``can_use_clusters_topk``, ``can_use_cub_topk`` and ``is_cub_topk_beneficial`` from the wheel's
    own flashinfer/topk.py (the wheel the build script downloaded), with stand-ins for what they call."""
    import ast

    wheel = fb.WHEEL_DIR / fb.wheel_name()
    if not wheel.is_file():
        pytest.skip(f"the FlashInfer wheel is not here ({wheel}): python benchmarks/flashinfer/build.py")
    torch = pytest.importorskip("torch", reason="the wheel's dispatch reads torch dtypes")
    source = zipfile.ZipFile(wheel).read("flashinfer/topk.py").decode()
    wanted = {"can_use_clusters_topk", "can_use_cub_topk", "is_cub_topk_beneficial"}
    tree = ast.parse(source)
    tree.body = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in wanted]
    assert {node.name for node in tree.body} == wanted
    cuda = types.SimpleNamespace(is_current_stream_capturing=lambda: False)
    space = {
        "torch": types.SimpleNamespace(
            float32=torch.float32, float16=torch.float16, bfloat16=torch.bfloat16, cuda=cuda
        ),
        "TopKTieBreak": types.SimpleNamespace(NONE=0),
        "get_compute_capability": lambda device: device,  # the stand-in tensor's device is its capability
    }
    exec(compile(tree, "flashinfer/topk.py", "exec"), space)
    return space


def test_unsorted_backend_agrees_with_the_wheels_own_dispatch():
    f = wheel_functions()
    import torch

    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    for major in (8, 9, 10):
        for case in grid.full_grid():
            if fi.refusal(case.mode, case.dtype, case.layout, case.n, case.k):
                continue
            tensor = types.SimpleNamespace(
                dtype=dtypes[case.dtype], device=(major, 0), size=lambda i, c=case: c.n
            )
            clusters = f["can_use_clusters_topk"](None, (major, 0), False, 0, False)
            cub = f["can_use_cub_topk"](None, tensor, 0, False, False) and f["is_cub_topk_beneficial"](
                None, case.rows, case.n, case.k, dtypes[case.dtype], 0, False, clusters
            )
            mine = fi.unsorted_backend(case.rows, case.n, case.k, case.dtype, major)
            assert (mine == "cub") == cub, (major, case.label())


def test_multi_cta_blocks_follow_flashinfers_chunking():
    h100 = 227 * 1024  # opt-in shared bytes per block
    assert fi.multi_cta_blocks(1 << 20, "float32", h100) == 19  # (232448 - 2080) // 4 = 57592 keys a block
    assert fi.multi_cta_blocks(1 << 24, "float32", h100) == 292
    assert fi.multi_cta_blocks(1 << 24, "bfloat16", h100) == 146
    assert fi.multi_cta_blocks(3000, "float32", h100) == 1
    assert fi.multi_cta_blocks(8192, "float32", 16 * 1024) == 2  # a chunk is never below 1024 vectors


def test_route_refuses_a_multi_cta_launch_wider_than_the_gpu(monkeypatch):
    """RadixTopKMultiCTA's blocks of a row wait for one another: more blocks than SMs never end."""
    pytest.importorskip("torch", reason="the route is made on torch's stream")
    cp = types.ModuleType("cupy")
    cp.uint16 = np.uint16
    monkeypatch.setitem(sys.modules, "cupy", cp)
    lib = FakeLibrary()
    lib.native_algorithm = lambda dtype, rows, n, k: "RadixTopKMultiCTA"
    h100 = (132, 227 * 1024)
    for n, refused in ((1 << 24, True), (1 << 20, False)):
        x = np.zeros((1, n), np.float32).view(DevArray)
        for sort in (True, False):
            route = fi.route(x, 1, grid.Case("huge", 1, n, 65536), lib, 9, sort=sort, limits=h100)
            assert (route.call is None) is refused, (n, sort)
            if refused:
                assert "292 blocks per row" in route.reason and "132 SMs" in route.reason


@pytest.mark.parametrize(("device", "blocks", "sms"), [(0, 292, 132), (1, 408, 108)])
def test_the_peer_reads_the_guards_limits_from_the_gpu_it_runs_on(monkeypatch, device, blocks, sms):
    """The multi-CTA guard of the H100 hang (benchmarks/results/2026-11-26-nvidia-h100-80gb-hbm3:
    1 x 16777216 never ended) as the benchmark calls it: shims.flashinfer_route takes the SMs
    and opt-in shared memory from the current device (the stand-in's H100: 132 SMs, 227 KB; its
    A100: 108 SMs, 163 KB: (166912 - 2080) // 4 keys a block, 408 blocks), refuses the row that
    would hang (that a row that fits runs: test_route_refuses_a_multi_cta_launch_wider_than_the_gpu)."""
    pytest.importorskip("torch", reason="the route is made on torch's stream")
    cupy = pytest.importorskip("cupy")
    if getattr(cupy, "__name__", "") != "standin.cupy":
        pytest.skip("the stand-in's two devices; on a GPU the scoreboard's dry run shows the refusals")
    from standin import torch_cuda

    torch_cuda.install(monkeypatch)  # CUDA tensors on the stand-in's devices
    lib = FakeLibrary()
    lib.native_algorithm = lambda dtype, rows, n, k: "RadixTopKMultiCTA"
    monkeypatch.setattr(fi, "available", lambda arch: (lib, None))
    with cupy.cuda.Device(device):
        x = cupy.zeros((1, 1 << 24), dtype=cupy.float32)
        for sort in (True, False):
            route = shims.flashinfer_route(x, 1, grid.Case("huge", 1, 1 << 24, 1024), sort)
            assert route.call is None and f"{blocks} blocks per row" in route.reason
            assert f"this GPU's {sms} SMs" in route.reason and "it never ends" in route.reason
