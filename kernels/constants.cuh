// Constants that both the kernels and the Python side (dispatcher, launcher) use, written once
// here: cutopk/cuda/kernel_constants.py reads this file and gives each CUTOPK_<NAME> to Python as
// <NAME>. Its format is what that parser accepts: one `#define CUTOPK_<NAME> <integer>` per line
// (a comment may follow), no expressions.
#pragma once

// Threads per block of each kernel family (each kernel's __launch_bounds__).
#define CUTOPK_WARP_ROW_THREADS 256
#define CUTOPK_WARP_RADIX_THREADS 256
#define CUTOPK_THREAD_ROW_THREADS 256
#define CUTOPK_BITONIC_THREADS 512
#define CUTOPK_RADIX_THREADS 512
#define CUTOPK_MULTIBLOCK_THREADS 256
#define CUTOPK_KEYS_THREADS 256
#define CUTOPK_TRANSPOSE_THREADS 256   // 8 warps over a 32 x 32 tile (transpose.cu)
#define CUTOPK_ORDER_TILE_THREADS 512  // order_tiles: at most one thread per compare-exchange pair of a tile
#define CUTOPK_ORDER_MERGE_THREADS 256
#define CUTOPK_MERGE_THREADS 256  // merge_parts (merge.cu): a block per row

// merge_parts: the parts one launch reads (merge_top_k; more are merged by further launches).
#define CUTOPK_MERGE_PARTS 8
#define CUTOPK_RESIDENT_THREADS 512
// block_row: one 1024-thread block per row (32 warps: every load of the row in flight at entry);
// the row's 16-byte copies go out in at most BLOCK_ROW_CHUNKS groups (async_copy.cuh tells at most
// 8 apart), each counted once it has landed while the later ones still arrive; the bin of the
// K-th key goes to at most BLOCK_ROW_CAP (key, 32-bit index) candidates in shared memory.
#define CUTOPK_BLOCK_ROW_THREADS 1024
// block_row with 8-bit keys: 512 threads (16 keys to a vector: onchip::place_winners spilled at
// the 64 registers of 1024 threads under NVRTC 13.5, sm_90).
#define CUTOPK_BLOCK_ROW_8BIT_THREADS 512
#define CUTOPK_BLOCK_ROW_CHUNKS 8
#define CUTOPK_BLOCK_ROW_CAP 4096

// warp_radix: one warp per row, WARP_RADIX_WARPS rows per block (WARP_RADIX_THREADS / 32, checked
// in warp_radix.cu); WARP_RADIX_CAP shared (key, index) pairs per warp, at least twice
// WARP_RADIX_MAX_K so that a bucket of K keys or more can still fit next to the winners above it.
#define CUTOPK_WARP_RADIX_WARPS 8
#define CUTOPK_WARP_RADIX_CAP 256
#define CUTOPK_WARP_RADIX_MAX_K 128

// multiblock: bytes of a row's state (sizeof(multiblock::State), checked by a static_assert), the keys
// of sample_threshold's evenly spaced sample of a row (a multiple of MULTIBLOCK_THREADS) and the widest
// digit of a pass (2^11 bins: ceil(key bits / 11) passes, AIR top-k's choice).
#define CUTOPK_MULTIBLOCK_STATE_BYTES 96
#define CUTOPK_MULTIBLOCK_SAMPLES 4096
#define CUTOPK_MULTIBLOCK_DIGIT_BITS 11
// multiblock: offsets of candidates each warp of pass 1's streaming filter stages in shared memory
// before it flushes them (4 bytes each: 8 KB a block of static shared memory).
#define CUTOPK_MULTIBLOCK_STAGE 256

// resident: the widest digit (2^12 bins: the top digit of a float32 key is its sign, 8 exponent
// bits and 3 mantissa bits, so that values of one binade still split 8 ways).
#define CUTOPK_RESIDENT_DIGIT_BITS 12
// order_winners.cuh (sorted=True): the digit of the winners' own keys they are scattered on (2^11
// bins, 8 KB), and the longest range of one bin that a warp sorts in registers (8 pairs a lane);
// a longer one takes the block's bitonic sort of all the winners.
#define CUTOPK_ORDER_DIGIT_BITS 11
#define CUTOPK_ORDER_WARP_SORT 256
// cluster: the most blocks per row (a thread-block cluster, sm_90): 8, CUDA's portable cluster
// size; the family compiles clusters of 8, 4 and 2 and picks one by the rows.
#define CUTOPK_CLUSTER_BLOCKS 8
// streaming: threads per block, the stages of its ring of asynchronous copies, and the 16-byte
// vectors each thread copies per stage (a stage is THREADS x THREAD_VECS x 16 bytes: 16 KB).
#define CUTOPK_STREAMING_THREADS 512
#define CUTOPK_STREAMING_STAGES 3
#define CUTOPK_STREAMING_THREAD_VECS 2
// split: blocks per row at most (the merging block scans their candidate counts, one a thread).
#define CUTOPK_SPLIT_MAX_BLOCKS 256

// Independent loads each thread of a streaming pass issues before it transforms any
// (row_loads.cuh); 16-byte loads on the contiguous path.
#define CUTOPK_STREAM_LOADS 4

// The kinds of batch a kernel reads (row_extent.cuh): every row n long, rows with their own
// lengths (top_k(..., lengths=)), CSR segments of a 1-D input (segmented_top_k).
#define CUTOPK_ROWS_REGULAR 0
#define CUTOPK_ROWS_LENGTHS 1
#define CUTOPK_ROWS_SEGMENTS 2
