// A C entry point to NVIDIA's own top-K, cub::DeviceTopK and cub::DeviceBatchedTopK (CCCL >= 3.3,
// the AIR top-K algorithm), for the benchmark's `cub` peer. Not part of cutopk: CUB's device-wide
// algorithms dispatch on the host, so they cannot go through cupy.RawModule; this file is compiled
// by nvcc into a shared library and loaded with ctypes (benchmarks/cutopk_bench/cub.py builds and loads it).
//
// What CUB offers in this release, and so what the peer measures:
// - Output order and ties: only `determinism::not_guaranteed` + `output_ordering::unsorted` compile
//   (both APIs static_assert on anything else). The K results of a row come in no particular order,
//   and when values tie at the K-th place, which of the tied elements are returned may change from
//   run to run. The benchmark compares the selected values as multisets and checks that each index
//   points at its value; its `cub-sorted` peer sorts the K afterwards (CuPy, timed with the call).
// - Rows: cub::DeviceBatchedTopK runs one block per row and takes rows up to BATCHED_MAX_N elements
//   (the bound is a template argument: bounds 256, 1024 and 4096, CUB's tile sizes, are instantiated
//   and the smallest that covers n is used). Longer rows go through
//   cub::DeviceTopK one row after another on the same stream (cutopk_cub_topk_rows).
// - Dtypes: float32, float16 and bfloat16 keys (DTYPE_*); indices are int64, row-local (0..n-1).
// - NaN and -0.0: CUB selects by the keys' radix bits, so a positive NaN should rank above +inf
//   (torch's rule, cutopk's nan="largest", which the benchmark checks it against) and -0.0 below
//   +0.0. Not yet confirmed on a GPU: a difference shows as a mismatch there, not as a time.
// - Device: the CUDA runtime linked into this library starts on device 0 (the lent machines have one).
//
// Every entry point follows CUB's two-call protocol: with temp == nullptr it writes the scratch size
// to *temp_bytes and does nothing else; the caller (Python) allocates that many bytes from CuPy's
// pool and calls again. Inputs are contiguous rows (rows x n, row-major), outputs rows x k. Returns a
// cudaError_t (0: success); cutopk_cub_error_string names it.
#include <cub/device/device_batched_topk.cuh>
#include <cub/device/device_topk.cuh>
#include <cub/version.cuh>

#include <cuda/iterator>
#include <cuda/std/cstdint>
#include <cuda/stream_ref>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#if CUB_VERSION < 300300
#error "cub::DeviceTopK needs CCCL 3.3 or newer: pass -I to the nvidia-cuda-cccl wheel's include/cccl"
#endif

namespace {

// Must match DTYPES in benchmarks/cutopk_bench/cub.py.
enum DtypeCode : int { DTYPE_FLOAT32 = 0, DTYPE_FLOAT16 = 1, DTYPE_BFLOAT16 = 2 };

// The longest row DeviceBatchedTopK takes here: its one-block-per-row agent must fit its tile of
// (key, int64 index) pairs in 48 KB of shared memory. A bound of 4096 (tile 256 x 16) compiles for
// every dtype with CCCL 3.5; 16384 (256 x 64) does not for float32 (a bound too large is a
// compile-time error inside CUB).
constexpr std::int64_t BATCHED_MAX_N = 4096;

// The only environment this CUB release accepts: no determinism, unsorted output, on `stream`.
inline auto unsorted_env(cudaStream_t stream) {
  return cuda::std::execution::env{cuda::stream_ref{stream},
                                   cuda::execution::require(cuda::execution::determinism::not_guaranteed,
                                                            cuda::execution::output_ordering::unsorted)};
}

// DeviceBatchedTopK also wants the tie-break rule named, together with the determinism.
inline auto batched_env(cudaStream_t stream) {
  return cuda::std::execution::env{
      cuda::stream_ref{stream},
      cuda::execution::require(cuda::execution::determinism::not_guaranteed, cuda::execution::tie_break::unspecified,
                               cuda::execution::output_ordering::unsorted)};
}

// Row r of a rows x width row-major array: DeviceBatchedTopK reads its segments through an iterator
// of iterators.
template <class T>
struct RowStart {
  T* base;
  std::int64_t width;
  __host__ __device__ T* operator()(std::int64_t row) const { return base + row * width; }
};

// Every row's values are its element indices 0..n-1.
struct RowIndices {
  __host__ __device__ cuda::counting_iterator<std::int64_t> operator()(std::int64_t) const {
    return cuda::counting_iterator<std::int64_t>{0};
  }
};

template <class T>
cudaError_t topk_one_row(bool largest, void* temp, std::size_t& temp_bytes, const T* keys_in, T* keys_out,
                         std::int64_t* idx_out, std::int64_t n, std::int64_t k, cudaStream_t stream) {
  const cuda::counting_iterator<std::int64_t> idx_in{0};
  const auto env = unsorted_env(stream);
  return largest ? cub::DeviceTopK::MaxPairs(temp, temp_bytes, keys_in, keys_out, idx_in, idx_out, n, k, env)
                 : cub::DeviceTopK::MinPairs(temp, temp_bytes, keys_in, keys_out, idx_in, idx_out, n, k, env);
}

// One call per row on one stream; the scratch is the same for every row (same n and k).
template <class T>
cudaError_t topk_rows(bool largest, void* temp, std::size_t& temp_bytes, const T* keys_in, T* keys_out,
                      std::int64_t* idx_out, std::int64_t rows, std::int64_t n, std::int64_t k, cudaStream_t stream) {
  if (temp == nullptr) return topk_one_row<T>(largest, nullptr, temp_bytes, keys_in, keys_out, idx_out, n, k, stream);
  for (std::int64_t r = 0; r < rows; ++r) {
    const cudaError_t err =
        topk_one_row<T>(largest, temp, temp_bytes, keys_in + r * n, keys_out + r * k, idx_out + r * k, n, k, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

template <class T, std::int64_t MaxN>
cudaError_t batched_bounded(bool largest, void* temp, std::size_t& temp_bytes, const T* keys_in, T* keys_out,
                            std::int64_t* idx_out, std::int64_t rows, std::int64_t n, std::int64_t k,
                            cudaStream_t stream) {
  const cuda::counting_iterator<std::int64_t> row0{0};
  const auto in_rows = cuda::make_transform_iterator(row0, RowStart<const T>{keys_in, n});
  const auto out_rows = cuda::make_transform_iterator(row0, RowStart<T>{keys_out, k});
  const auto idx_in_rows = cuda::make_transform_iterator(row0, RowIndices{});
  const auto idx_out_rows = cuda::make_transform_iterator(row0, RowStart<std::int64_t>{idx_out, k});
  const auto sizes = cuda::args::immediate{n, cuda::args::bounds<std::int64_t{1}, MaxN>()};
  const auto ks = cuda::args::immediate{k, cuda::args::bounds<std::int64_t{1}, MaxN>()};
  const auto env = batched_env(stream);
  return largest ? cub::DeviceBatchedTopK::MaxPairs(temp, temp_bytes, in_rows, out_rows, idx_in_rows, idx_out_rows,
                                                    sizes, ks, rows, env)
                 : cub::DeviceBatchedTopK::MinPairs(temp, temp_bytes, in_rows, out_rows, idx_in_rows, idx_out_rows,
                                                    sizes, ks, rows, env);
}

// The tightest instantiated bound that covers n (CUB sizes its scratch and picks its tile from it).
template <class T>
cudaError_t batched(bool largest, void* temp, std::size_t& temp_bytes, const T* keys_in, T* keys_out,
                    std::int64_t* idx_out, std::int64_t rows, std::int64_t n, std::int64_t k, cudaStream_t stream) {
  if (n <= 256)
    return batched_bounded<T, 256>(largest, temp, temp_bytes, keys_in, keys_out, idx_out, rows, n, k, stream);
  if (n <= 1024)
    return batched_bounded<T, 1024>(largest, temp, temp_bytes, keys_in, keys_out, idx_out, rows, n, k, stream);
  return batched_bounded<T, BATCHED_MAX_N>(largest, temp, temp_bytes, keys_in, keys_out, idx_out, rows, n, k, stream);
}

// Calls `f.template operator()<T>()` with T the C++ type of `dtype`.
template <class F>
cudaError_t with_dtype(int dtype, F&& f) {
  switch (dtype) {
    case DTYPE_FLOAT32:
      return f(static_cast<float*>(nullptr));
    case DTYPE_FLOAT16:
      return f(static_cast<__half*>(nullptr));
    case DTYPE_BFLOAT16:
      return f(static_cast<__nv_bfloat16*>(nullptr));
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

extern "C" {

// CUB_VERSION of the headers this library was compiled with (e.g. 300500 for 3.5.0).
int cutopk_cub_version() {
  return CUB_VERSION;
}

// The longest row cutopk_cub_batched_topk takes.
std::int64_t cutopk_cub_batched_max_n() {
  return BATCHED_MAX_N;
}

const char* cutopk_cub_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}

// Top-K of each of `rows` contiguous rows of n elements, one cub::DeviceTopK call per row.
int cutopk_cub_topk_rows(int dtype, int largest, void* temp, std::size_t* temp_bytes, const void* keys_in,
                         void* keys_out, std::int64_t* idx_out, std::int64_t rows, std::int64_t n, std::int64_t k,
                         void* stream) {
  if (temp_bytes == nullptr || rows < 0 || n < 1 || k < 1 || k > n) return cudaErrorInvalidValue;
  return with_dtype(dtype, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return topk_rows<T>(largest != 0, temp, *temp_bytes, static_cast<const T*>(keys_in), static_cast<T*>(keys_out),
                        idx_out, rows, n, k, static_cast<cudaStream_t>(stream));
  });
}

// Top-K of each of `rows` contiguous rows of n <= cutopk_cub_batched_max_n() elements, in one
// cub::DeviceBatchedTopK call.
int cutopk_cub_batched_topk(int dtype, int largest, void* temp, std::size_t* temp_bytes, const void* keys_in,
                            void* keys_out, std::int64_t* idx_out, std::int64_t rows, std::int64_t n, std::int64_t k,
                            void* stream) {
  if (temp_bytes == nullptr || rows < 0 || n < 1 || k < 1 || k > n || n > BATCHED_MAX_N) return cudaErrorInvalidValue;
  return with_dtype(dtype, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return batched<T>(largest != 0, temp, *temp_bytes, static_cast<const T*>(keys_in), static_cast<T*>(keys_out),
                      idx_out, rows, n, k, static_cast<cudaStream_t>(stream));
  });
}

}  // extern "C"
