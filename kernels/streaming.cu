// Streaming select: top-K of many long rows in one launch, one block per row, the row read from
// global memory once (rows of 65536-262144 keys, 128-256 of them: a wave of two blocks per SM).
//
// Steps, each a function below (the kernel body is their sequence):
// 1. start the ring: a contiguous row's first CUTOPK_STREAMING_STAGES tiles of 16-byte vectors are
//    copied into shared memory asynchronously (async_copy.cuh), one group per tile, before anything
//    else, so the sample's round trip overlaps them.
// 2. threshold: the key of rank `rank` among CUTOPK_MULTIBLOCK_SAMPLES keys read in evenly spaced
//    32-byte runs (multiblock's sample and rank rule: rank m + 4 sqrt(m) + 8 with m = K x samples /
//    n, so that fewer than K keys reach it only rarely), by a radix select of the sample on chip.
// 3. filter: each tile, once it has landed, is compared with the threshold; the keys that reach it
//    are appended in index order to the candidates (a warp scan of the threads' counts and one
//    barrier per tile: no atomic at all), and the stage before it is refilled with the tile STAGES
//    ahead of that. Strided rows read
//    through the streaming loader instead (row_loads.cuh), with the same filter per call.
// 4. select: when at least K and at most `cap` keys reached the threshold, the candidates hold
//    every winner: onchip_select.cuh's radix steps on them (the candidates' positions are index
//    order, so ties by index are exact), the positions mapped back to row indices.
// 5. otherwise (the threshold failed: too few keys reach it, or too many for the candidates) and
//    for short rows: an exact radix select over the row in global memory by the block alone
//    (12-bit digits, one read of the row per digit, then one read collecting the winners in index
//    order): the same launch, exact, slow only on such rows.
// 6. order: the K (key, index) pairs are ordered as asked and written (winners::finish_winners_sorted).
// Ties: equal keys go to the lower index. NaN, -0.0: by the keys (key_traits.cuh). Rows: regular,
// with lengths, or CSR segments (row_extent.cuh). Dtypes: all. Limits: K <= 2048, rows of fewer
// than 2^31 elements (32-bit candidate indices and counts). Threads: CUTOPK_STREAMING_THREADS
// (512); (512, 2) launch bounds, two blocks per SM where their shared memory fits ((512, 1) for
// 8-bit keys).
// Shared memory (dynamic): the ring (STAGES x 16 KB), then the candidates (`cap` >= samples keys
// and 32-bit indices); the sample and its histogram overlay the candidates before the filter, the
// selection's histogram and the K winners overlay the ring after it.
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "row_loads.cuh"
#include "radix_digit.cuh"
#include "onchip_select.cuh"
#include "order_winners.cuh"
#include "async_copy.cuh"
#include "row_sample.cuh"
#include "entry.cuh"

namespace cutopk::streaming {

using onchip::Bucket;
constexpr int THREADS = CUTOPK_STREAMING_THREADS;
constexpr int STAGES = CUTOPK_STREAMING_STAGES;
constexpr int VECS = CUTOPK_STREAMING_THREAD_VECS;  // 16-byte vectors per thread and tile
constexpr int TILE_VECS = THREADS * VECS;
constexpr int STAGE_BYTES = TILE_VECS * 16;
constexpr int SAMPLES = CUTOPK_MULTIBLOCK_SAMPLES;
static_assert(STAGES * STAGE_BYTES >= onchip::BINS * 4, "the selection's histogram overlays the ring");

// What every step of a block shares: the row, the request and the block's shared arrays.
template <class T>
struct Row {
  typedef typename KeyTraits<T>::Key Key;
  const T* base;
  long long col_stride;
  int len;    // elements taking part (< 2^31)
  int k_row;  // min(k, len)
  bool largest, nan_first;
  unsigned char* smem;  // the dynamic shared memory: ring, then candidates
  Key* cand_key;
  unsigned* cand_idx;
  int cap;
  Bucket* bucket;             // s_bucket
  int* scan;                  // block_scan's scratch (33 ints)
  int* warps;                 // the filter's warp totals (two slots of 32)
  unsigned long long* scan2;  // count_winners' (33 packed counts)
};

// The contiguous row's layout in 16-byte vectors: `head` elements before the first 16-byte
// boundary, then `vecs` whole vectors, then the tail.
struct Vectors {
  int head;
  long long vecs;
  int tiles;
};

template <class T>
__device__ __forceinline__ Vectors vectors_of(const Row<T>& r) {
  constexpr int E = 16 / (int)sizeof(T);
  Vectors v;
  const int skew = (int)((reinterpret_cast<unsigned long long>(r.base) & 15) / sizeof(T));
  v.head = min(r.len, skew == 0 ? 0 : E - skew);
  v.vecs = (r.len - v.head) / E;
  v.tiles = (int)((v.vecs + TILE_VECS - 1) / TILE_VECS);
  return v;
}

// 1. Tile `tile`'s vectors into its stage (tile % STAGES), this thread's VECS of them, as one
// group (committed even when empty, so that every thread's groups count alike).
template <class T>
__device__ __forceinline__ void copy_tile(const Row<T>& r, const Vectors& v, int tile) {
  const Vec16* src = reinterpret_cast<const Vec16*>(r.base + v.head);
  Vec16* stage = reinterpret_cast<Vec16*>(r.smem + (tile % STAGES) * STAGE_BYTES);
#pragma unroll
  for (int u = 0; u < VECS; ++u) {
    const int at = VECS * (int)threadIdx.x + u;
    const long long vec = (long long)tile * TILE_VECS + at;
    if (tile < v.tiles && vec < v.vecs) copy16_async(stage + at, src + vec);
  }
  commit_copies();
}

// The smallest key of the bucket b (every key whose bits at and above b.shift are b.prefix).
template <class Key>
__device__ __forceinline__ Key bucket_floor(const Bucket& b) {
  return b.shift >= KEY_BITS<Key> ? Key(0) : static_cast<Key>(b.prefix << b.shift);
}

// The bucket of the `needed`-th key (from the top) of keys[0, len) in shared memory, by the
// on-chip radix steps, `hist` their 4096 counters. Every thread calls it; it ends with a barrier.
template <class Key>
__device__ __forceinline__ Bucket bucket_of(const Key* keys, int len, int needed, unsigned* hist, Bucket* s,
                                            int* scan) {
  const Bucket all{0ull, needed, len, KEY_BITS<Key>};
  if (threadIdx.x == 0) *s = all;
  onchip::refine(keys, len, all, onchip::FIRST_BITS<Key>, hist);  // the top digit of every key
  onchip::find_bucket(keys, len, onchip::FIRST_BITS<Key>, hist, s, scan, [&](int) { return hist; });
  const Bucket b = *s;
  __syncthreads();  // every thread has read *s
  return b;
}

// The threshold: the floor of the bucket of the sample's key of rank `rank`, so that at least
// rank + 1 sampled keys reach it. The sample and its histogram overlay the candidates.
template <class T>
__device__ __forceinline__ typename KeyTraits<T>::Key sampled_threshold(const Row<T>& r, int rank) {
  typedef typename KeyTraits<T>::Key Key;
  Key* sample = r.cand_key;
  unsigned* hist = reinterpret_cast<unsigned*>(reinterpret_cast<unsigned char*>(r.cand_key) +
                                               onchip::round16(SAMPLES * (int)sizeof(Key)));
  load_sample<T, THREADS>(r.base, r.col_stride, r.len, r.largest, r.nan_first, sample);  // 2. (row_sample.cuh)
  __syncthreads();
  const Bucket b = bucket_of(sample, SAMPLES, rank + 1, hist, r.bucket, r.scan);
  return bucket_floor<Key>(b);
}

// 3. One step of the filter: this thread's `count` consecutive keys from row position `first`,
// key e being key_at(e) (every thread calls it in the same step, their runs in index order), those
// reaching the threshold appended at `taken` + their rank; returns the step's count (the same in
// every thread: candidates past `cap` are counted, not kept). The keys are read twice (to count,
// then to append) rather than held: holding 16 or 32 8- and 16-bit keys a thread made ptxas spill
// at the 64 registers of two blocks per SM.
// The ranks take one barrier: a warp scan, each warp's total published in `warps` (a slot of 32 of
// the two that consecutive steps alternate: a step rewrites the slot two steps back only after
// every thread passed the barrier of the step between, so after every read of it), then each
// warp adds up the totals of the warps before it with shuffles.
template <class Key, int E, class KeyAt>
__device__ __forceinline__ int sift(KeyAt&& key_at, int count, long long first, Key threshold, Key* cand_key,
                                    unsigned* cand_idx, int cap, int taken, int* warps) {
  const unsigned FULL = 0xffffffffu;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int mine = 0;
#pragma unroll
  for (int e = 0; e < E; ++e) mine += e < count && key_at(e) >= threshold;
  int inclusive = mine;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int other = __shfl_up_sync(FULL, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) warps[warp] = inclusive;
  __syncthreads();
  // Lane l holds warp l's total: the block's total in the high half, the warps' before this one in
  // the low (at most 512 x 32 keys a step: each half fits 16 bits).
  const int total_l = lane < (int)(blockDim.x >> 5) ? warps[lane] : 0;
  int packed = (total_l << 16) | (lane < warp ? total_l : 0);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) packed += __shfl_xor_sync(FULL, packed, offset);
  int slot = taken + (packed & 0xffff) + inclusive - mine;
  if (mine != 0) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if (e < count) {  // past `count` key_at may lie outside the row
        const Key key = key_at(e);
        if (key >= threshold) {
          if (slot < cap) {
            cand_key[slot] = key;
            cand_idx[slot] = (unsigned)(first + e);
          }
          ++slot;
        }
      }
    }
  }
  return (int)((unsigned)packed >> 16);
}

// The slot of `warps` (two of 32 counts) that step `step` of the filter publishes in.
__device__ __forceinline__ int* warp_slot(int* warps, int step) {
  return warps + 32 * (step & 1);
}

// The head or the tail of a contiguous row (fewer than 16 bytes), thread 0's step alone.
template <class T>
__device__ __forceinline__ int sift_edge(const Row<T>& r, int from, int count, typename KeyTraits<T>::Key threshold,
                                         int taken, int step) {
  typedef typename KeyTraits<T>::Key Key;
  constexpr int E = 16 / (int)sizeof(T);
  const int mine = threadIdx.x == 0 ? count : 0;
  const Key* bits = row_bits(r.base);
  auto key_at = [&](int e) { return KeyTraits<T>::from_bits(bits[from + e], r.largest, r.nan_first); };
  return sift<Key, E>(key_at, mine, from, threshold, r.cand_key, r.cand_idx, r.cap, taken, warp_slot(r.warps, step));
}

// The filter over a contiguous row through the ring, the first STAGES tiles already in flight.
// Tile i waits for its group, then (every thread being done with tile i - 1) refills tile i - 1's
// stage with tile i - 1 + STAGES, and is filtered: while it is, the next STAGES - 1 tiles are in
// flight. One group is committed per refill (empty past the last tile), so before tile i's wait
// STAGES + i - 1 groups are committed (STAGES before tile 0's): STAGES - 2 may stay in flight.
template <class T>
__device__ __forceinline__ int filter_ring(const Row<T>& r, const Vectors& v, typename KeyTraits<T>::Key threshold) {
  typedef typename KeyTraits<T>::Key Key;
  constexpr int E = 16 / (int)sizeof(T);
  static_assert(STAGES >= 2, "a stage is refilled while the next one is filtered");
  int taken = sift_edge(r, 0, v.head, threshold, 0, 0);
  for (int tile = 0; tile < v.tiles; ++tile) {
    wait_copies(STAGES - 2);
    __syncthreads();  // every thread's copies of this tile have landed; every thread is past tile - 1
    if (tile > 0) copy_tile(r, v, tile - 1 + STAGES);
    const Vec16* stage = reinterpret_cast<const Vec16*>(r.smem + (tile % STAGES) * STAGE_BYTES);
    const long long at = (long long)tile * TILE_VECS + VECS * (int)threadIdx.x;  // this thread's first vector
    const int count = (int)max(0ll, min((long long)VECS * E, (v.vecs - at) * E));
    const Vec16* mine = stage + VECS * threadIdx.x;
    auto key_at = [&](int e) {
      return KeyTraits<T>::from_bits(vec_element<Key>(mine[e / E], e % E), r.largest, r.nan_first);
    };
    taken += sift<Key, VECS * E>(key_at, count, v.head + at * E, threshold, r.cand_key, r.cand_idx, r.cap, taken,
                                 warp_slot(r.warps, tile + 1));
  }
  wait_copies(0);  // only empty groups are left
  const int tail_from = v.head + (int)(v.vecs * E);
  return taken + sift_edge(r, tail_from, r.len - tail_from, threshold, taken, v.tiles + 1);
}

// The filter over a strided row: the streaming loader's runs, in index order per call.
template <class T>
__device__ __forceinline__ int filter_strided(const Row<T>& r, typename KeyTraits<T>::Key threshold) {
  typedef typename KeyTraits<T>::Key Key;
  int taken = 0, step = 0;
  stream_row(row_bits(r.base), r.col_stride, 0, r.len, threadIdx.x, blockDim.x, [&](const auto& run) {
    constexpr int E = CUTOPK_RUN_SIZE(run);
    auto key_at = [&](int e) { return KeyTraits<T>::from_bits(run.bits[e], r.largest, r.nan_first); };
    taken += sift<Key, E>(key_at, run.count, run.first, threshold, r.cand_key, r.cand_idx, r.cap, taken,
                          warp_slot(r.warps, step++));
  });
  return taken;
}

// 4. The winners among `count` candidates (every winner among them): their bucket by the on-chip
// steps, then the keys above it and the bucket's members (all, or the lowest positions where it
// ends in ties), placed with their candidate positions, which then become row indices.
template <class T>
__device__ __forceinline__ void select_candidates(const Row<T>& r, int count, typename KeyTraits<T>::Key* win_key,
                                                  unsigned* win_idx, int* taken) {
  unsigned* hist = reinterpret_cast<unsigned*>(r.smem);  // over the dead ring
  const Bucket b = bucket_of(r.cand_key, count, r.k_row, hist, r.bucket, r.scan);
  if (b.count == b.needed) {
    onchip::gather_winners(r.cand_key, count, b, taken, win_key, win_idx);
  } else {
    const onchip::Counts c = onchip::count_winners(r.cand_key, count, b, r.scan2);
    onchip::place_winners(r.cand_key, count, 0, b, c, 0, 0, r.k_row - b.needed, win_key, win_idx);
  }
  __syncthreads();
  for (int j = threadIdx.x; j < r.k_row; j += blockDim.x) win_idx[j] = r.cand_idx[win_idx[j]];
  __syncthreads();
}

// 5. The exact path over the row in global memory: the bucket of the K-th key, one read of the
// row per 12-bit digit (a plain shared atomic per key in the race), then one read placing the
// winners in index order. `hist` (4096 counters) and the winners overlay the ring. The path of
// rows whose threshold failed, so lean rather than fast: EXACT_RUN consecutive elements a thread
// and step, scalar loads of any stride (the streaming loader's 16-byte loads in flight made ptxas
// spill at the 64 registers of two blocks per SM, next to the filter).
constexpr int EXACT_RUN = 4;

template <class T>
__device__ __forceinline__ typename KeyTraits<T>::Key exact_key(const Row<T>& r, int i) {
  return KeyTraits<T>::from_bits(row_bits(r.base)[(long long)i * r.col_stride], r.largest, r.nan_first);
}

template <class T>
__device__ __forceinline__ Bucket bucket_in_row(const Row<T>& r, unsigned* hist) {
  typedef typename KeyTraits<T>::Key Key;
  Bucket b{0ull, r.k_row, r.len, KEY_BITS<Key>};
  while (b.count != b.needed && b.shift > 0) {  // the same in every thread
    const int bits = b.shift < onchip::DIGIT_BITS ? b.shift : onchip::DIGIT_BITS;
    const int shift = b.shift - bits;
    const unsigned mask = (1u << bits) - 1;
    onchip::zero_bins(hist, 1 << bits);
    if (threadIdx.x == 0) *r.bucket = b;
    __syncthreads();
    for (int i = threadIdx.x; i < r.len; i += blockDim.x) {
      const Key key = exact_key(r, i);
      count_key(hist, (unsigned)(key >> shift) & mask, onchip::high_bits(key, b.shift) == b.prefix, false);
    }
    __syncthreads();
    onchip::choose_bin(hist, bits, r.bucket, r.scan);
    b = *r.bucket;
    __syncthreads();  // every thread has read the bucket before the next digit rewrites it
  }
  return b;
}

template <class T>
__device__ __forceinline__ void select_in_row(const Row<T>& r, typename KeyTraits<T>::Key* win_key, unsigned* win_idx) {
  typedef typename KeyTraits<T>::Key Key;
  const Bucket b = bucket_in_row(r, reinterpret_cast<unsigned*>(r.smem));
  const int above = r.k_row - b.needed;  // the keys above the bucket, all winners
  int up_rank = 0, rank = 0;             // the same in every thread
  // A step: thread t holds elements i0 + EXACT_RUN t .. + EXACT_RUN - 1, so index order is thread
  // order; the threads' counts (above in the high 16 bits, members in the low) through one block
  // scan give each its ranks.
  for (int i0 = 0; i0 < r.len; i0 += EXACT_RUN * (int)blockDim.x) {
    const int first = i0 + EXACT_RUN * (int)threadIdx.x;
    int count = 0;
#pragma unroll
    for (int e = 0; e < EXACT_RUN; ++e) {
      if (first + e < r.len) {
        const unsigned long long high = onchip::high_bits(exact_key(r, first + e), b.shift);
        count += high > b.prefix ? 1 << 16 : high == b.prefix ? 1 : 0;
      }
    }
    int total;
    const int before = block_scan(count, r.scan, &total);
    int up_slot = up_rank + (before >> 16), m = rank + (before & 0xffff);
    if (count != 0) {
#pragma unroll
      for (int e = 0; e < EXACT_RUN; ++e) {
        if (first + e < r.len) {
          const Key key = exact_key(r, first + e);
          const unsigned long long high = onchip::high_bits(key, b.shift);
          if (high > b.prefix) {
            win_key[up_slot] = key;
            win_idx[up_slot++] = (unsigned)(first + e);
          } else if (high == b.prefix) {
            if (m < b.needed) {
              win_key[above + m] = key;
              win_idx[above + m] = (unsigned)(first + e);
            }
            ++m;
          }
        }
      }
    }
    up_rank += total >> 16;
    rank += total & 0xffff;
  }
  __syncthreads();
}

// Two blocks per SM (64 registers); 8-bit keys come 16 to a vector, and spilled there: one.
template <class T>
CUTOPK_KERNEL(CUTOPK_STREAMING_THREADS, sizeof(T) == 1 ? 1 : 2)
streaming_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
               const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
               int cap, T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  typedef typename KeyTraits<T>::Key Key;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Bucket s_bucket;
  __shared__ int s_scan[33];
  __shared__ int s_warps[64];
  __shared__ unsigned long long s_scan2[33];
  __shared__ int s_taken;
  const long long row = blockIdx.x;
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  Row<T> r;
  r.base = in + extent.start;
  r.col_stride = col_stride;
  r.len = (int)extent.length;
  r.k_row = k < r.len ? k : r.len;
  r.largest = largest;
  r.nan_first = nan_first;
  r.smem = smem;
  r.cand_key = reinterpret_cast<Key*>(smem + STAGES * STAGE_BYTES);
  r.cand_idx = reinterpret_cast<unsigned*>(smem + STAGES * STAGE_BYTES + onchip::round16(cap * (int)sizeof(Key)));
  r.cap = cap;
  r.bucket = &s_bucket;
  r.scan = s_scan;
  r.warps = s_warps;
  r.scan2 = s_scan2;
  const int kp = pow2_at_least(k);
  Key* win_key = reinterpret_cast<Key*>(smem);  // over the ring, once it is dead
  unsigned* win_idx = reinterpret_cast<unsigned*>(smem + onchip::winner_keys_bytes<Key>(kp));
  if (threadIdx.x == 0) s_taken = 0;
  // Rows the sample cannot speak for (short, or no longer than K) go the exact way at once.
  bool filtered = r.len >= 2 * SAMPLES && r.len > k && k > 0;  // the same in the whole block
  if (filtered) {
    const Vectors v = vectors_of(r);
    const bool ring = col_stride == 1;
    if (ring)
      for (int tile = 0; tile < STAGES; ++tile) copy_tile(r, v, tile);
    const Key threshold = sampled_threshold(r, sample_rank(k, r.len));
    const int taken = ring ? filter_ring(r, v, threshold) : filter_strided(r, threshold);
    filtered = taken >= r.k_row && taken <= cap;
    __syncthreads();  // the ring and the candidates are complete
    if (filtered) select_candidates(r, taken, win_key, win_idx, &s_taken);
  }
  if (!filtered) select_in_row(r, win_key, win_idx);
  const winners::Request<T> req{k, by_index != 0, largest != 0, false, out_vals, out_idx, index_bytes};
  winners::finish_winners_sorted(winners::Placed<Key>{win_key, win_idx, r.k_row, kp},
                                 winners::Source<T>{r.base, col_stride, row}, req);
}

}  // namespace cutopk::streaming
