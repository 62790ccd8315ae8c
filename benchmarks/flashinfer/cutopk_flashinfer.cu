// A C entry point to FlashInfer's top-K kernels, for the benchmark's `flashinfer` peers. Not part of
// cutopk: FlashInfer's own Python API (flashinfer.top_k) JIT-compiles a tvm-ffi module on first use,
// which on a lent GPU machine costs minutes and needs FlashInfer's Python dependencies. This file is
// compiled here by nvcc (benchmarks/flashinfer/build.py, with the wheel's headers and flags) into a
// shared library loaded with ctypes (benchmarks/cutopk_bench/flashinfer.py), and calls the same kernels the
// wheel's bindings call:
// - native: flashinfer::sampling::TopKDispatch (include/flashinfer/topk.cuh), which picks
//   FilteredTopK (one block per row, 128 KB of shared memory) or RadixTopKMultiCTA by its own
//   heuristic (ShouldUseFilteredTopK, reported by cutopk_fi_native_algorithm). Unsorted K; the
//   Python side sorts them with torch.sort as flashinfer.top_k(sorted=True) does.
// - cub: FlashInfer's CUB backend (csrc/cub_topk.cu's CUBBatchedTopK, cub::DeviceBatchedTopK with
//   the wheel's own CCCL), which flashinfer.top_k(sorted=False) picks for some shapes on sm_90.
//   Compiled only when the build defines CUTOPK_FI_WITH_CUB (the build script then generates
//   fi_cub_core.inc from the wheel's csrc/cub_topk.cu and a stand-in for its tvm-ffi types).
//
// Inputs are contiguous rows (rows x n, row-major); outputs rows x k. Returns a cudaError_t
// (0: success); cutopk_fi_error_string names it. Every launch goes to `stream`.
// First: the CUB core defines CUB_DISABLE_TOPK_UNSUPPORTED_ARCH_ASSERT before any CUB header.
#ifdef CUTOPK_FI_WITH_CUB
#include "fi_cub_core.inc"
#endif

// topk.cuh uses math.cuh's helpers without including it (the wheel's csrc/topk.cu gets them through
// sampling.cuh, which needs cuRAND's headers).
#include <flashinfer/math.cuh>
#include <flashinfer/topk.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#ifndef CUTOPK_FI_VERSION
#define CUTOPK_FI_VERSION "unknown"
#endif

namespace {

// Must match DTYPES in benchmarks/cutopk_bench/flashinfer.py.
enum DtypeCode : int { DTYPE_FLOAT32 = 0, DTYPE_FLOAT16 = 1, DTYPE_BFLOAT16 = 2 };

namespace fs = flashinfer::sampling;

// FlashInfer's row-state scratch for the multi-CTA path takes at most this many bytes (the Python
// API caches one zeroed 1 MB buffer per device; so does the benchmark).
constexpr std::int64_t ROW_STATES_BYTES = 1 << 20;

// The native kernels index rows and lengths with 32-bit unsigned integers.
bool fits_u32(std::int64_t v) {
  return v >= 0 && v <= static_cast<std::int64_t>(UINT32_MAX);
}

template <class T>
cudaError_t native(const void* in, void* idx_out, void* vals_out, void* row_states, std::int64_t rows, std::int64_t n,
                   std::int64_t k, int deterministic, cudaStream_t stream) {
  // FlashInfer takes a mutable input pointer but only reads it.
  return fs::TopKDispatch<T, std::int32_t>(
      const_cast<T*>(static_cast<const T*>(in)), static_cast<std::int32_t*>(idx_out), static_cast<T*>(vals_out),
      static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(n),
      static_cast<fs::RadixRowState*>(row_states), /*sorted_output=*/false, deterministic != 0, fs::TopKTieBreak::None,
      stream, /*dsa_graph_safe=*/false);
}

template <class T>
bool filtered(std::int64_t rows, std::int64_t n, std::int64_t k, int deterministic) {
  return fs::ShouldUseFilteredTopK<T>(static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(k),
                                      static_cast<std::uint32_t>(n), deterministic != 0, fs::TopKTieBreak::None);
}

#ifdef CUTOPK_FI_WITH_CUB
template <class T>
cudaError_t cub_rows(const void* in, void* vals_out, void* idx_out, void* temp, std::size_t* temp_bytes,
                     std::int64_t rows, std::int64_t n, std::int64_t k, cudaStream_t stream) {
  Optional<TensorView> workspace;
  std::size_t* query = nullptr;
  if (temp == nullptr) {
    query = temp_bytes;  // size query: nothing is launched
  } else {
    workspace = TensorView{temp, static_cast<std::int64_t>(*temp_bytes)};
  }
  return CUBBatchedTopK<T>(static_cast<const T*>(in), n, static_cast<T*>(vals_out), static_cast<std::int64_t*>(idx_out),
                           workspace, rows, n, k, /*tie_break=*/0, query, stream);
}
#endif

}  // namespace

extern "C" {

const char* cutopk_fi_version() {
  return CUTOPK_FI_VERSION;
}

int cutopk_fi_has_cub() {
#ifdef CUTOPK_FI_WITH_CUB
  return 1;
#else
  return 0;
#endif
}

std::int64_t cutopk_fi_row_states_bytes() {
  return ROW_STATES_BYTES;
}

const char* cutopk_fi_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

// 1 when FlashInfer's FilteredTopK can run on the current device (128 KB of shared memory per SM).
int cutopk_fi_can_filtered() {
  return fs::CanImplementFilteredTopK() ? 1 : 0;
}

// Which native kernel TopKDispatch runs for this call on the current device: 0 FilteredTopK,
// 1 RadixTopKMultiCTA, -1 a dtype code or size it does not take.
int cutopk_fi_native_algorithm(int dtype, std::int64_t rows, std::int64_t n, std::int64_t k, int deterministic) {
  if (!fits_u32(rows) || !fits_u32(n) || !fits_u32(k)) return -1;
  switch (dtype) {
    case DTYPE_FLOAT32:
      return filtered<float>(rows, n, k, deterministic) ? 0 : 1;
    case DTYPE_FLOAT16:
      return filtered<half>(rows, n, k, deterministic) ? 0 : 1;
    case DTYPE_BFLOAT16:
      return filtered<nv_bfloat16>(rows, n, k, deterministic) ? 0 : 1;
    default:
      return -1;
  }
}

// FlashInfer's native top-K, unsorted: int32 indices and the values. row_states: a zeroed buffer of
// cutopk_fi_row_states_bytes() (FlashInfer keeps it zero between calls).
int cutopk_fi_native_topk(int dtype, const void* keys_in, void* idx_out, void* vals_out, void* row_states,
                          std::int64_t rows, std::int64_t n, std::int64_t k, int deterministic, void* stream) {
  if (keys_in == nullptr || idx_out == nullptr || vals_out == nullptr || row_states == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (rows < 1 || k < 1 || k > n || !fits_u32(rows) || !fits_u32(n)) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DTYPE_FLOAT32:
      return native<float>(keys_in, idx_out, vals_out, row_states, rows, n, k, deterministic, s);
    case DTYPE_FLOAT16:
      return native<half>(keys_in, idx_out, vals_out, row_states, rows, n, k, deterministic, s);
    case DTYPE_BFLOAT16:
      return native<nv_bfloat16>(keys_in, idx_out, vals_out, row_states, rows, n, k, deterministic, s);
    default:
      return cudaErrorInvalidValue;
  }
}

// FlashInfer's CUB backend (unsorted, int64 indices), CUB's two-call protocol: with temp == nullptr
// writes the scratch size to *temp_bytes and launches nothing. cudaErrorNotSupported when the
// library was built without it.
int cutopk_fi_cub_topk(int dtype, const void* keys_in, void* vals_out, void* idx_out, void* temp,
                       std::size_t* temp_bytes, std::int64_t rows, std::int64_t n, std::int64_t k, void* stream) {
  if (temp_bytes == nullptr) return cudaErrorInvalidValue;
  if (rows < 1 || k < 1 || k > n) return cudaErrorInvalidValue;
#ifdef CUTOPK_FI_WITH_CUB
  if (n > CUB_TOPK_MAX_LEN) return cudaErrorInvalidValue;
  if (temp != nullptr && (keys_in == nullptr || vals_out == nullptr || idx_out == nullptr)) {
    return cudaErrorInvalidValue;
  }
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DTYPE_FLOAT32:
      return cub_rows<float>(keys_in, vals_out, idx_out, temp, temp_bytes, rows, n, k, s);
    case DTYPE_FLOAT16:
      return cub_rows<half>(keys_in, vals_out, idx_out, temp, temp_bytes, rows, n, k, s);
    case DTYPE_BFLOAT16:
      return cub_rows<nv_bfloat16>(keys_in, vals_out, idx_out, temp, temp_bytes, rows, n, k, s);
    default:
      return cudaErrorInvalidValue;
  }
#else
  (void)dtype, (void)keys_in, (void)vals_out, (void)idx_out, (void)temp, (void)stream;
  return cudaErrorNotSupported;
#endif
}

}  // extern "C"
