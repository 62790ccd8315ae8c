// Tiled transpose of rows that lie along an outer axis (adjacent rows adjacent in memory, e.g.
// axis 0 of a C-contiguous matrix) into row-major scratch, so that the row kernels read them
// contiguously: element j of row r, at in[r * row_stride + j * col_stride], goes to out[r * n + j].
//
// One block per 32 x 32 tile (blocks stride over the tiles): the 32 lanes of a warp read 32
// adjacent rows at one column (one coalesced access when row_stride is 1) and write 32 adjacent
// columns of one row (contiguous); the tile passes through shared memory, padded to 33 columns
// so that neither the column writes nor the row reads hit one bank 32 times. Each thread issues
// its four loads before its four shared-memory stores. Dtypes: all (the bits are copied).
// Threads per block: 256 (8 warps, 4 tile lines each). Shared memory: 32 x 33 elements (static).
#include "constants.cuh"
#include "entry.cuh"

namespace cutopk::transpose {

template <class T>
CUTOPK_KERNEL(CUTOPK_TRANSPOSE_THREADS)
transpose_rows(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
               T* __restrict__ out) {
  __shared__ T tile[32][33];
  const int lane = threadIdx.x & 31, line = threadIdx.x >> 5;
  const long long tiles_r = (rows + 31) >> 5, tiles = tiles_r * ((n + 31) >> 5);
  for (long long b = blockIdx.x; b < tiles; b += gridDim.x) {
    const long long r0 = (b % tiles_r) << 5, j0 = (b / tiles_r) << 5;
    const long long r = r0 + lane;
    T v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const long long j = j0 + line + 8 * u;
      if (r < rows && j < n) v[u] = in[r * row_stride + j * col_stride];
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {  // tile[column][row]; only the elements read are written out
      if (r < rows && j0 + line + 8 * u < n) tile[line + 8 * u][lane] = v[u];
    }
    __syncthreads();
    const long long j = j0 + lane;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const long long rr = r0 + line + 8 * u;
      if (rr < rows && j < n) out[rr * n + j] = tile[lane][line + 8 * u];
    }
    __syncthreads();  // the tile is written again by the next iteration
  }
}

}  // namespace cutopk::transpose
