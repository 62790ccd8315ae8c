// Kernel bodies and their entry points.
//
// Each kernel is written once, as a template whose body is a __device__ function, in the file
// and namespace of its family (kernels/warp_row.cu, namespace cutopk::warp_row; the shared
// headers' helpers are in namespace cutopk):
//
//   template <class T, int ITEMS>
//   CUTOPK_KERNEL(CUTOPK_WARP_ROW_THREADS)
//       warp_row_topk(const T* __restrict__ in, ...) { ... }
//
// The launcher (cutopk/cuda/kernel_source.py) appends one extern "C" __global__ entry point per
// instantiation it launches, named by what it runs (warp_row_topk_float32_items4), with the
// macro's arguments as its __launch_bounds__ and the body's parameter list: the entry calls the
// body, which is inlined. extern "C" names need no NVRTC name expressions, and CuPy (13 and 14)
// keeps a module compiled without name expressions in its on-disk cache (docs/kernels.md).
#pragma once

// Entry points are instantiated for every element type, __half and __nv_bfloat16 included.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define CUTOPK_KERNEL(...) __device__ __forceinline__ void
