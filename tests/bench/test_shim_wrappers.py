"""The ctypes wrappers of the CUB and FlashInfer shims (benchmarks/cutopk_bench/cub.py, flashinfer.py) against
stand-in libraries built here with the C compiler: the same entry points and signatures, answering
as the real shims do on a GPU (a size query writes the scratch size, a refused call returns a CUDA
error code). What runs on a GPU behind them is left to a lent GPU; this holds the Python side: the
sizes and 64-bit arguments that cross, the codes turned into names and errors."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from cutopk_bench import cub
from cutopk_bench import flashinfer as fi

# The stand-ins: a size query (null scratch) writes a size that needs 64 bits, made of the
# arguments, so a truncated argument or size shows; K above the row is cudaErrorInvalidValue (1).
CUB_STANDIN = r"""
#include <stddef.h>
#include <stdint.h>
int cutopk_cub_version(void) { return 300500; }
int64_t cutopk_cub_batched_max_n(void) { return 4096; }
const char* cutopk_cub_error_string(int e) { return e == 1 ? "invalid argument" : "unknown error"; }
static int entry(int batched, int dtype, int largest, void* temp, size_t* temp_bytes, void* keys_in,
                 void* keys_out, void* idx_out, int64_t rows, int64_t n, int64_t k, void* stream) {
  if (k > n || dtype > 2) return 1;
  if (!temp) *temp_bytes = (size_t)(rows * n) * 4 + (size_t)(batched * 2 + largest);
  return 0;
}
int cutopk_cub_topk_rows(int d, int l, void* t, size_t* b, void* i, void* o, void* x, int64_t r,
                         int64_t n, int64_t k, void* s) { return entry(0, d, l, t, b, i, o, x, r, n, k, s); }
int cutopk_cub_batched_topk(int d, int l, void* t, size_t* b, void* i, void* o, void* x, int64_t r,
                            int64_t n, int64_t k, void* s) { return entry(1, d, l, t, b, i, o, x, r, n, k, s); }
"""

FLASHINFER_STANDIN = r"""
#include <stddef.h>
#include <stdint.h>
const char* cutopk_fi_version(void) { return "0.7.2.post1"; }
int cutopk_fi_has_cub(void) { return 1; }
int64_t cutopk_fi_row_states_bytes(void) { return 1 << 20; }
const char* cutopk_fi_error_string(int e) { return e == 1 ? "invalid argument" : "unknown error"; }
int cutopk_fi_can_filtered(void) { return 1; }
int cutopk_fi_native_algorithm(int dtype, int64_t rows, int64_t n, int64_t k, int tie) {
  if (dtype > 2) return -1;
  return n > 100000 ? 1 : k == 0 ? 7 : 0;
}
int cutopk_fi_native_topk(int dtype, void* keys, void* idx, void* vals, void* states, int64_t rows,
                          int64_t n, int64_t k, int tie, void* stream) {
  return (!keys || !states || k > n) ? 1 : 0;
}
int cutopk_fi_cub_topk(int dtype, void* keys, void* vals, void* idx, void* temp, size_t* temp_bytes,
                       int64_t rows, int64_t n, int64_t k, void* stream) {
  if (k > n) return 1;
  if (!temp) *temp_bytes = (size_t)(rows * n) * 8 + (size_t)dtype;
  return 0;
}
"""


def _build(tmp_path_factory, name: str, source: str):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a stand-in library")
    folder = tmp_path_factory.mktemp(name)
    src, lib = folder / f"{name}.c", folder / f"lib{name}.so"
    src.write_text(source)
    subprocess.run([cc, "-shared", "-fPIC", "-O0", str(src), "-o", str(lib)], check=True)
    return lib


@pytest.fixture(scope="module")
def cub_lib(tmp_path_factory):
    return cub.CubLibrary(_build(tmp_path_factory, "cub_standin", CUB_STANDIN))


@pytest.fixture(scope="module")
def fi_lib(tmp_path_factory):
    return fi.load(_build(tmp_path_factory, "fi_standin", FLASHINFER_STANDIN))


# --- CUB ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batched", [False, True])
def test_cub_size_query_returns_the_size_the_library_wrote_in_64_bits(cub_lib, batched):
    rows, n = 3, (1 << 32) + 5  # rows * n * 4 needs more than 32 bits, as n itself does
    size = cub_lib.call(batched, "bfloat16", True, 0, 0, 0, 0, 0, rows, n, 8, 0)
    assert size == rows * n * 4 + 2 * batched + 1


def test_cub_run_returns_the_scratch_size_it_was_given(cub_lib):
    assert cub_lib.call(False, "float16", False, 0x1000, 777, 0x2000, 0x3000, 0x4000, 2, 64, 8, 0) == 777


def test_cub_error_codes_become_runtime_errors_naming_the_call(cub_lib):
    with pytest.raises(
        RuntimeError, match=r"^cub::DeviceBatchedTopK failed: invalid argument \(cudaError 1\)$"
    ):
        cub_lib.call(True, "float32", True, 0, 0, 0, 0, 0, 1, 10, 11, 0)
    with pytest.raises(RuntimeError, match=r"^cub::DeviceTopK failed: invalid argument \(cudaError 1\)$"):
        cub_lib.call(False, "float32", True, 0, 0, 0, 0, 0, 1, 10, 11, 0)
    assert (cub_lib.version, cub_lib.batched_max_n) == (300500, 4096)


# --- FlashInfer ----------------------------------------------------------------------------------


def test_flashinfer_facts_are_read_from_the_library(fi_lib):
    assert fi_lib.version == "0.7.2.post1" and fi_lib.has_cub is True


def test_flashinfer_native_algorithm_codes_have_names(fi_lib):
    assert fi_lib.native_algorithm("float32", 4, 8192, 64) == "FilteredTopK"
    assert fi_lib.native_algorithm("bfloat16", 1, 1 << 24, 64) == "RadixTopKMultiCTA"
    assert fi_lib.native_algorithm("float16", 1, 8192, 0) == "? (7)"  # a code this module does not know


def test_flashinfer_native_call_passes_and_refuses_as_the_library_says(fi_lib):
    assert fi_lib.native("float32", 0x1000, 0x2000, 0x3000, 0x4000, 2, 64, 8, 0) is None
    with pytest.raises(
        RuntimeError, match=r"^FlashInfer TopKDispatch failed: invalid argument \(cudaError 1\)$"
    ):
        fi_lib.native("float32", 0x1000, 0x2000, 0x3000, 0, 2, 64, 8, 0)  # no row states


def test_flashinfer_cub_size_query_and_run(fi_lib):
    rows, n = 2, (1 << 31) + 3
    assert fi_lib.cub("bfloat16", 0, 0, 0, 0, 0, rows, n, 16, 0) == rows * n * 8 + 2
    assert fi_lib.cub("float32", 0x1000, 0x2000, 0x3000, 0x4000, 4096, 2, 64, 8, 0) == 4096
    with pytest.raises(RuntimeError, match=r"^FlashInfer cub_topk failed: invalid argument \(cudaError 1\)$"):
        fi_lib.cub("float32", 0, 0, 0, 0, 0, 1, 8, 9, 0)


def test_flashinfer_refuses_rows_beyond_32_bit_indices():
    assert fi.refusal("largest", "float32", "rows", 1 << 32, 64) == (
        "flashinfer's kernels index rows with 32-bit integers"
    )
    assert fi.refusal("largest", "float32", "rows", (1 << 32) - 1, 64) is None
