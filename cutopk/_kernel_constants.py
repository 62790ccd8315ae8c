"""Constants that both the Python side (dispatcher, launcher) and the CUDA kernels use, written
once here. ``kernel_source()`` prepends them to the kernel source as ``#define CUTOPK_<NAME>``
lines (:func:`cuda_defines`), and the kernels use those macros with no fallback of their own: a
kernel compiled without them fails to compile, so the two sides cannot drift apart. The
simulator and ``tools/check_kernels.py`` compile the same prepended text.
"""

from __future__ import annotations

# Threads per block of each kernel family (each kernel's __launch_bounds__).
WARP_ROW_THREADS = 256
WARP_RADIX_THREADS = 256
THREAD_ROW_THREADS = 256
BITONIC_THREADS = 512
RADIX_THREADS = 512
MULTIBLOCK_THREADS = 256
KEYS_THREADS = 256
TRANSPOSE_THREADS = 256  # 8 warps over a 32 x 32 tile (kernels/transpose_rows.cu)
ORDER_TILE_THREADS = 512  # order_tiles: at most one thread per compare-exchange pair of a tile
ORDER_MERGE_THREADS = 256

# warp_radix: one warp per row, WARP_RADIX_WARPS rows per block; WARP_RADIX_CAP shared
# (key, index) pairs per warp, at least twice WARP_RADIX_MAX_K so that a bucket of K keys or
# more can still fit next to the winners above it.
WARP_RADIX_WARPS = WARP_RADIX_THREADS // 32
WARP_RADIX_CAP = 256
WARP_RADIX_MAX_K = 128

# multiblock: bytes of a row's state (sizeof(MbState), checked by a static_assert) and the keys
# of mb_sample's evenly spaced sample of a row (a multiple of MULTIBLOCK_THREADS).
MULTIBLOCK_STATE_BYTES = 72
MULTIBLOCK_SAMPLES = 4096

# Independent loads each thread of a streaming pass issues before it transforms any
# (kernels/row_loads.cuh); 16-byte loads on the contiguous path.
STREAM_LOADS = 4

# The kinds of batch a kernel reads (kernels/row_extent.cuh): every row n long, rows with their
# own lengths (top_k(..., lengths=)), CSR segments of a 1-D input (segmented_top_k).
ROWS_REGULAR = 0
ROWS_LENGTHS = 1
ROWS_SEGMENTS = 2

_EXPORTED = (
    "WARP_ROW_THREADS",
    "WARP_RADIX_THREADS",
    "THREAD_ROW_THREADS",
    "BITONIC_THREADS",
    "RADIX_THREADS",
    "MULTIBLOCK_THREADS",
    "KEYS_THREADS",
    "TRANSPOSE_THREADS",
    "ORDER_TILE_THREADS",
    "ORDER_MERGE_THREADS",
    "WARP_RADIX_WARPS",
    "WARP_RADIX_CAP",
    "WARP_RADIX_MAX_K",
    "MULTIBLOCK_STATE_BYTES",
    "MULTIBLOCK_SAMPLES",
    "STREAM_LOADS",
    "ROWS_REGULAR",
    "ROWS_LENGTHS",
    "ROWS_SEGMENTS",
)


def cuda_defines() -> str:
    """The constants as the ``#define`` lines that open the kernel source."""
    lines = [f"#define CUTOPK_{name} {globals()[name]}" for name in _EXPORTED]
    return "// Generated from cutopk/_kernel_constants.py: edit them there.\n" + "\n".join(lines) + "\n"
