// Resident radix select: top-K of a row that fits in shared memory, in one launch, one block per
// row, the row read from global memory once.
//
// Steps, each a function below (the kernel body is their sequence):
// 1. load: the row's keys (KeyTraits, order-preserving) into shared memory through the streaming
//    loader (row_loads.cuh: 16-byte loads, several in flight), counting the top digit on the way:
//    CUTOPK_RESIDENT_DIGIT_BITS (12) bits, so that a float32 row splits on its sign, exponent and
//    3 mantissa bits (radix.cu's 8-bit top digit is sign and 7 exponent bits: real data falls in
//    one bin). Counters are 32-bit shared, warp-aggregated with __match_any_sync.
// 2. choose the bin: the bin holding the K-th key, by one block scan over the bins (8 per thread,
//    counted from the top bin down): the thread whose bins cross K is the one that records it.
// 3. refine: the next digit (12 bits, or what is left) of the keys still in the race, counted from
//    the shared copy only; then choose again. Stops when the bin holds exactly the winners still
//    needed, or when every bit is resolved (the bin is then one key value: ties).
// 4. collect: the keys above the bin (winners, any order) and the bin's members of lowest index
//    (ranked by index: a count per warp over a contiguous segment, one block scan of the warps'
//    counts, then ballots in index order), at most K pairs, over the histogram's shared memory.
// 5. order: a block bitonic sort of only those K (key, index) pairs (by value or by index), then
//    the values re-read from the input at the winning indices (so their bits are the input's).
// Ties: equal keys go to the lower index (the bin's members are ranked by index; the sort's order
// is a total one). NaN, -0.0: by the keys (key_traits.cuh). Rows: regular, with lengths, or CSR
// segments (row_extent.cuh), the length read in the same launch; a row no longer than K has all
// its elements win, and output positions past them get padding.
// Dtypes: all (8/16/32/64-bit keys: 1/2/3/6 digits at most). Limits: K <= 2048 (the dispatcher's),
// rows of n keys with max(2^12 x 4, pow2(K) x (4 + key bytes)) + n x key bytes of dynamic shared
// memory (on an H100's 223 KB: 52K float32 keys at K <= 1024, 104K 16-bit keys), so n < 2^31 and
// 32-bit counts and indices hold. Threads per block: CUTOPK_RESIDENT_THREADS (512, whole warps);
// (512, 2) launch bounds (8-bit keys: (512, 1)).
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "block_sort.cuh"
#include "row_loads.cuh"
#include "radix_digit.cuh"
#include "entry.cuh"

namespace cutopk::resident {

constexpr int DIGIT_BITS = CUTOPK_RESIDENT_DIGIT_BITS;
constexpr int BINS = 1 << DIGIT_BITS;
constexpr int BINS_PER_THREAD = BINS / CUTOPK_RESIDENT_THREADS;  // choose_bin's share of the bins
static_assert(BINS % CUTOPK_RESIDENT_THREADS == 0, "every thread scans the same number of bins");
constexpr unsigned FULL = 0xffffffffu;

// Where the K-th key lies: the keys whose bits at and above `shift` equal `prefix` (with shift ==
// the key's width, every key). `needed` winners are still to be taken from those `count` keys.
struct Bucket {
  unsigned long long prefix;
  int needed;
  int count;
  int shift;
};

// Bytes at the start of dynamic shared memory: the histogram, later the K winners' keys and
// indices (the histogram is dead by then; keys first, each part a multiple of 16 bytes, so that
// 8-byte keys, the indices and the row's keys after them are aligned).
template <class Key>
__device__ __forceinline__ int winner_keys_bytes(int kp) {
  return (kp * (int)sizeof(Key) + 15) & ~15;
}
template <class Key>
__device__ __forceinline__ int front_bytes(int kp) {
  const int winners = winner_keys_bytes<Key>(kp) + ((kp * 4 + 15) & ~15);
  return winners > BINS * 4 ? winners : BINS * 4;
}

// The key's bits at and above `shift` (0 when shift is the key's width: the whole row's prefix).
template <class Key>
__device__ __forceinline__ unsigned long long high_bits(Key key, int shift) {
  return shift >= 8 * (int)sizeof(Key) ? 0ull : (unsigned long long)key >> shift;
}

// Adds one to bin `digit` where `counted`; lanes of the warp with the same digit add once together
// (a row of one value would otherwise serialise on one counter). Every lane of the warp calls it.
__device__ __forceinline__ void count_digit(unsigned* hist, unsigned digit, bool counted) {
  if (!__any_sync(FULL, counted)) return;
  const unsigned lane = threadIdx.x & 31;
  const unsigned peers = __match_any_sync(FULL, counted ? digit : BINS + lane);  // idle lanes: alone
  if (counted && lane == (unsigned)(__ffs(peers) - 1)) atomicAdd(&hist[digit], (unsigned)__popc(peers));
}

__device__ __forceinline__ void zero_bins(unsigned* hist, int bins) {
  for (int d = threadIdx.x; d < bins; d += blockDim.x) hist[d] = 0;
}

// 1. The row's `len` elements as keys into `keys`, the digit of `bits` bits at `shift` counted.
template <class T>
__device__ __forceinline__ void load_row(const T* base, long long col_stride, int len, bool largest, bool nan_first,
                                         int shift, int bits, typename KeyTraits<T>::Key* keys, unsigned* hist) {
  typedef typename KeyTraits<T>::Key Key;
  const unsigned mask = (1u << bits) - 1;
  stream_row(row_bits(base), col_stride, 0, len, threadIdx.x, blockDim.x, [&](const auto& run) {
#pragma unroll
    for (int e = 0; e < CUTOPK_RUN_SIZE(run); ++e) {
      const Key key = KeyTraits<T>::from_bits(run.bits[e], largest, nan_first);
      if (e < run.count) keys[run.first + e] = key;
      count_digit(hist, (unsigned)(key >> shift) & mask, e < run.count);
    }
  });
}

// 2. The bin of `bits` bits holding the `needed`-th key from the top, recorded in *s (prefix
// extended by the bin, needed less the keys above it, count the bin's, shift lowered by `bits`).
// Thread t sums bins [top - 8, top), top = 2^bits - 8t; a block scan in thread order then gives
// each thread the keys in the bins above its own, so exactly one thread's bins cross `needed`.
// Every thread calls it; it ends with a barrier, after which *s is the new bucket.
__device__ __forceinline__ void choose_bin(const unsigned* hist, int bits, Bucket* s, int* scan) {
  const Bucket b = *s;  // read by all before block_scan's first barrier; written after its last
  const int top = (1 << bits) - BINS_PER_THREAD * (int)threadIdx.x;
  int total = 0;
#pragma unroll
  for (int j = 1; j <= BINS_PER_THREAD; ++j) total += top - j >= 0 ? (int)hist[top - j] : 0;  // past bin 0: none
  int all;
  int above = block_scan(total, scan, &all);
  if (above < b.needed && above + total >= b.needed) {
    for (int j = 1; j <= BINS_PER_THREAD && top - j >= 0; ++j) {
      const int count = (int)hist[top - j];
      if (above + count >= b.needed) {
        s->prefix = (b.prefix << bits) | (unsigned long long)(top - j);
        s->needed = b.needed - above;
        s->count = count;
        s->shift = b.shift - bits;
        break;
      }
      above += count;
    }
  }
  __syncthreads();
}

// 3. Counts the next digit (`bits` bits below b.shift) of the keys in bucket b, from shared memory.
// The trip count is the same in every thread of a warp (count_digit's votes).
template <class Key>
__device__ __forceinline__ void refine(const Key* keys, int len, Bucket b, int bits, unsigned* hist) {
  const int shift = b.shift - bits;
  const unsigned mask = (1u << bits) - 1;
  zero_bins(hist, 1 << bits);
  __syncthreads();
  for (int i0 = 0; i0 < len; i0 += blockDim.x) {
    const int i = i0 + (int)threadIdx.x;
    const Key key = i < len ? keys[i] : Key(0);
    count_digit(hist, (unsigned)(key >> shift) & mask, i < len && high_bits(key, b.shift) == b.prefix);
  }
  __syncthreads();
}

// 2-3. From the top digit's counts to the bucket of the K-th key: choose, refine, choose... until
// the bucket holds just the winners still needed or no bit is left.
template <class Key>
__device__ __forceinline__ void find_bucket(const Key* keys, int len, int first_bits, unsigned* hist, Bucket* s,
                                            int* scan) {
  choose_bin(hist, first_bits, s, scan);
  while (true) {
    const Bucket b = *s;  // the same in every thread
    if (b.count == b.needed || b.shift == 0) return;
    const int bits = b.shift < DIGIT_BITS ? b.shift : DIGIT_BITS;
    refine(keys, len, b, bits, hist);  // its first barrier: every thread has read *s
    choose_bin(hist, bits, s, scan);
  }
}

// 4. The winners of bucket b into (win_key, win_idx): the keys above it at [0, above) in any order,
// the bucket's members of rank < b.needed by index at [above, above + b.needed). Each warp takes a
// contiguous segment of the row: one pass counts its members, a block scan of those counts gives
// each warp its first rank, and a second pass places them by ballot in index order.
template <class Key>
__device__ __forceinline__ void collect(const Key* keys, int len, Bucket b, int above, Key* win_key, unsigned* win_idx,
                                        int* taken, int* scan) {
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const int segment = ((len + warps - 1) / warps + 31) & ~31;
  const int lo = min(len, (int)(threadIdx.x >> 5) * segment), hi = min(len, lo + segment);
  const unsigned lower = (1u << lane) - 1;  // the lanes before this one
  int members = 0;
  for (int i = lo + lane; i - lane < hi; i += 32)
    members += __popc(__ballot_sync(FULL, i < hi && high_bits(keys[i], b.shift) == b.prefix));
  int all;
  int rank = __shfl_sync(FULL, block_scan(lane == 0 ? members : 0, scan, &all), 0);
  for (int i = lo + lane; i - lane < hi; i += 32) {
    if (rank >= b.needed) {  // the bucket's share is taken; stop once every key above it is too
      const int placed = lane == 0 ? *reinterpret_cast<volatile int*>(taken) : 0;
      if (__shfl_sync(FULL, placed, 0) >= above) break;  // the same in the whole warp
    }
    const Key key = i < hi ? keys[i] : Key(0);
    const unsigned long long high = high_bits(key, b.shift);
    const unsigned up = __ballot_sync(FULL, i < hi && high > b.prefix);
    const unsigned member = __ballot_sync(FULL, i < hi && high == b.prefix);
    int slot = 0;
    if (up && lane == 0) slot = atomicAdd(taken, __popc(up));  // any order: the sort restores it
    slot = __shfl_sync(FULL, slot, 0) + __popc(up & lower);
    if ((up >> lane) & 1) {
      win_key[slot] = key;
      win_idx[slot] = (unsigned)i;
    }
    const int r = rank + __popc(member & lower);
    if (((member >> lane) & 1) && r < b.needed) {
      win_key[above + r] = key;
      win_idx[above + r] = (unsigned)i;
    }
    rank += __popc(member);
  }
}

// 5. Sorts the `count` winners (padded to kp with pairs that sort after them) and writes output
// positions [0, k) of `row`: the winners, then padding.
template <class T, class Key>
__device__ __forceinline__ void order_and_write(Key* win_key, unsigned* win_idx, int count, int k, int kp,
                                                bool by_index, const T* base, long long col_stride,
                                                T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes,
                                                long long row) {
  for (int i = count + threadIdx.x; i < kp; i += blockDim.x) {
    win_key[i] = 0;
    win_idx[i] = 0xffffffffu;
  }
  __syncthreads();
  if (by_index)
    block_bitonic<true>(win_key, win_idx, kp);
  else
    block_bitonic<false>(win_key, win_idx, kp);
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    if (j < count)
      write_winner(base, col_stride, out_vals, out_idx, index_bytes, row * k + j, (unsigned long long)win_idx[j]);
    else
      write_padding(out_vals, out_idx, index_bytes, row * k + j);
  }
}

// Two blocks per SM (64 registers) where their shared memory fits, for batches of short rows; 8-bit
// keys come 16 to a load, and NVRTC 13.5 spilled them at 64 registers on sm_90: one block per SM.
template <class T>
CUTOPK_KERNEL(CUTOPK_RESIDENT_THREADS, sizeof(T) == 1 ? 1 : 2)
resident_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
              const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
              T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  typedef typename KeyTraits<T>::Key Key;
  const int KEY_BITS = 8 * sizeof(Key);
  const int first_bits = KEY_BITS < DIGIT_BITS ? KEY_BITS : DIGIT_BITS;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Bucket s_bucket;
  __shared__ int s_scan[33];  // block_scan's
  __shared__ int s_taken;     // winners above the bucket placed so far
  const int kp = pow2_at_least(k);
  unsigned* hist = reinterpret_cast<unsigned*>(smem);
  Key* win_key = reinterpret_cast<Key*>(smem);  // over the histogram, once it is dead
  unsigned* win_idx = reinterpret_cast<unsigned*>(smem + winner_keys_bytes<Key>(kp));
  Key* keys = reinterpret_cast<Key*>(smem + front_bytes<Key>(kp));

  const long long row = blockIdx.x;
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  const int len = (int)extent.length;  // < 2^31: the row fits in shared memory
  const int k_row = k < len ? k : len;
  zero_bins(hist, 1 << first_bits);
  if (threadIdx.x == 0) {
    s_bucket = Bucket{0ull, k_row, len, KEY_BITS};  // every key, all k_row winners to take
    s_taken = 0;
  }
  __syncthreads();
  load_row(base, col_stride, len, largest, nan_first, KEY_BITS - first_bits, first_bits, keys, hist);
  __syncthreads();
  if (len > k && k > 0) find_bucket(keys, len, first_bits, hist, &s_bucket, s_scan);
  const Bucket b = s_bucket;  // a row of at most K keeps the whole row as its bucket
  __syncthreads();            // the histogram is read no more: the winners go over it
  collect(keys, len, b, k_row - b.needed, win_key, win_idx, &s_taken, s_scan);
  order_and_write(win_key, win_idx, k_row, k, kp, by_index, base, col_stride, out_vals, out_idx, index_bytes, row);
}

}  // namespace cutopk::resident
