// Block-row select: top-K of a row that fits one block's shared memory, in one launch, one
// 1024-thread block per row, the row read from global memory once.
//
// Steps, each a function below (the kernel body is their sequence):
// 1. load and count: a contiguous row whose start is 16-byte aligned has every one of its 16-byte
//    vectors copied into shared memory at entry (async_copy.cuh: cp.async on sm_80+), in up to
//    CUTOPK_BLOCK_ROW_CHUNKS groups; then group by group, once it has landed (its wait and a
//    barrier), its first digit (first_digit.cuh: 12 bits, a float16-style view for floats) is
//    counted, a plain shared atomicAdd per key, while the later groups still arrive. Floats are
//    counted from their bits as loaded (RawDigit), which stay in shared memory: their keys
//    (KeyTraits) are made in step 3 for the bin's members alone, or in place (keys_in_place) on
//    the paths that scan the whole row as keys; other types become keys in place as they are
//    counted (HeldRow says which). The elements after the last whole vector are read with plain
//    loads. Other rows (strided, or starting off a 16-byte boundary), and every row before sm_80
//    (no cp.async), go through the streaming loader (row_loads.cuh: four 16-byte loads per thread
//    in flight) as resident's do.
// 2. choose the bin t of the K-th key over the first digit's 4096 bins (onchip::choose_bin). The
//    digit is monotone in the key, so bin t is a bucket: keys of higher bins win.
// 3. candidates, when bin t's keys fit the candidate arrays (at most CUTOPK_BLOCK_ROW_CAP pairs):
//    one pass over the held row puts those of higher bins among the winners (any order) and
//    bin t's as (key, index) candidates. Then the exact select runs on the candidates alone
//    (onchip::refine and choose_bin over the full key's 12-bit prefix digits, from the high bits
//    the bin's keys share: RowDigit::common, e.g. a float32 key's top 15): when the bucket
//    found holds just the winners still needed, the candidates at or above it win; when it ends
//    in ties (a key shared across the K-th place), the K-th key is then known and the winners are
//    taken over the whole held row in index order (keys above it, the ties of lowest index).
//    When bin t overflows the candidates (a row of one value, say), the same exact select runs
//    over the held row from the key's top bit (resident's path), never re-reading global memory.
// 4. order: winners::order_and_write (order_winners.cuh: no power-of-two sort; by index a bitmap
//    of the row, by value a counting scatter and warp sorts), its scratch over the candidates and
//    the row's keys, the values rebuilt from the winners' keys.
// Ties: equal keys go to the lower index (the sort's order is a total one; ties across the K-th
// place are ranked by index). NaN, -0.0: by the keys (key_traits.cuh). Rows: regular, with
// lengths, or CSR segments (row_extent.cuh); a row no longer than K has all its elements win.
// Dtypes: all. Limits: K <= 2048 (the dispatcher's), rows whose layout (below) fits the dynamic
// shared memory, so n < 2^31 and 32-bit counts and indices hold. Threads per block:
// CUTOPK_BLOCK_ROW_THREADS (1024), (1024, 1) launch bounds (at most 64 registers); 8-bit keys
// CUTOPK_BLOCK_ROW_8BIT_THREADS (512: their 16-key vectors spilled at 64 registers).
// Dynamic shared memory (cutopk/cuda/families/block_row.py's shared_bytes): the histogram (2^12
// 32-bit counters), the winners (pow2(K) keys and 32-bit indices), the candidates (cap keys and
// indices, cap = min(CUTOPK_BLOCK_ROW_CAP, n / 4) rounded up to 16), then the row's keys, each
// part a multiple of 16 bytes.
#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "row_loads.cuh"
#include "async_copy.cuh"
#include "first_digit.cuh"
#include "onchip_select.cuh"
#include "order_winners.cuh"
#include "block_steps.cuh"
#include "entry.cuh"

namespace cutopk::block_row {

// Whether contiguous rows are copied asynchronously: sm_80 and later (cp.async), and the host
// (the simulator runs async_copy.cuh's host branch). Before sm_80 a copy would be a load and a
// dependent store per vector, one load in flight: the streaming loader's four 16-byte loads per
// thread in flight, transformed and counted as they come (resident's load), serve those instead.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr bool ASYNC_COPIES = false;
#else
constexpr bool ASYNC_COPIES = true;
#endif

// The candidate arrays' capacity for rows planned n long: a quarter of the row, at most
// CUTOPK_BLOCK_ROW_CAP, rounded up to 16 (a bin of more keys than a quarter of the row is
// refined as fast over the held row itself).
__device__ __forceinline__ int candidate_cap(long long n) {
  const long long quarter = ((n + 3) / 4 + 15) & ~15ll;
  return (int)(quarter < CUTOPK_BLOCK_ROW_CAP ? quarter : CUTOPK_BLOCK_ROW_CAP);
}

// Where each part of the dynamic shared memory lies (the header's layout).
template <class Key>
struct Layout {
  unsigned* hist;
  Key* win_key;
  unsigned* win_idx;
  Key* cand_key;
  unsigned* cand_idx;
  Key* keys;
  int cap;
};

template <class Key>
__device__ __forceinline__ Layout<Key> layout(unsigned char* smem, int kp, long long n) {
  Layout<Key> l;
  l.cap = candidate_cap(n);
  int at = onchip::BINS * 4;
  l.hist = reinterpret_cast<unsigned*>(smem);
  l.win_key = reinterpret_cast<Key*>(smem + at);
  at += onchip::round16(kp * (int)sizeof(Key));
  l.win_idx = reinterpret_cast<unsigned*>(smem + at);
  at += onchip::round16(kp * 4);
  l.cand_key = reinterpret_cast<Key*>(smem + at);
  at += onchip::round16(l.cap * (int)sizeof(Key));
  l.cand_idx = reinterpret_cast<unsigned*>(smem + at);
  at += onchip::round16(l.cap * 4);
  l.keys = reinterpret_cast<Key*>(smem + at);
  return l;
}

// The shared scalars of a block: the bucket, the block scans' scratch, the slot counters.
struct Block {
  onchip::Bucket* bucket;
  int* scan;                  // choose_bin's block scans (33)
  unsigned long long* scan2;  // count_winners' (33)
  int* taken;                 // winners placed (gather_winners, split_row)
  int* cands;                 // candidates placed (split_row)
};

// 4. The winners of the held row once bucket b (over the row's keys, prefix digits) is found:
// every key at or above it when all its members win, else the keys above it and its members of
// lowest index (ranked by index over the row).
template <class Key>
__device__ __forceinline__ void collect(const Key* keys, int len, onchip::Bucket b, int k_row, const Block& s,
                                        Key* win_key, unsigned* win_idx) {
  if (b.count == b.needed) {
    onchip::gather_winners(keys, len, b, s.taken, win_key, win_idx);
  } else {
    const onchip::Counts c = onchip::count_winners(keys, len, b, s.scan2);
    onchip::place_winners(keys, len, 0, b, c, 0, 0, k_row - b.needed, win_key, win_idx);
  }
}

// 3. From bin t of the first digit (the bucket *s.bucket after choose_bin) to the row's k_row
// winners in (win_key, win_idx): through the candidates when bin t fits them, else the exact
// select over the held row. Every thread calls it.
template <class T>
__device__ __forceinline__ void select_winners(const Layout<typename KeyTraits<T>::Key>& l, int len, int k_row,
                                               const HeldRow<T>& held, const Block& s) {
  typedef typename KeyTraits<T>::Key Key;
  const onchip::Bucket first = *s.bucket;  // bin t: prefix t, needed, count
  if (first.count > l.cap) {               // the bin overflows the candidates: the exact path
    __syncthreads();                       // every thread has read *s.bucket
    keys_in_place(held, l.keys, len);
    resolve_bucket(l.keys, len, onchip::Bucket{0ull, k_row, len, KEY_BITS<Key>}, l.hist, s.bucket, s.scan);
    collect(l.keys, len, *s.bucket, k_row, s, l.win_key, l.win_idx);
    return;
  }
  split_row<T>(l.keys, len, held, (unsigned)first.prefix,
               Split<Key>{l.win_key, l.win_idx, s.taken, l.cand_key, l.cand_idx, s.cands});
  __syncthreads();  // the candidates and their count are visible; every thread has read *s.bucket
  const Common shared = held.digit.common((unsigned)first.prefix);  // the high bits all candidates share
  resolve_bucket(l.cand_key, first.count, onchip::Bucket{shared.prefix, first.needed, first.count, shared.shift},
                 l.hist, s.bucket, s.scan);
  const onchip::Bucket c = *s.bucket;
  if (c.count == c.needed) {  // every member wins: the candidates at or above the bucket
    onchip::gather_winners(l.cand_key, first.count, c, s.taken, l.win_key, l.win_idx, l.cand_idx);
    return;
  }
  // Ties at the K-th place: the K-th key is c.prefix (every bit resolved), and every key equal to
  // it is a candidate. The winners again, over the whole row in index order (over those the
  // split placed: count_winners' first barrier is after every thread's split).
  const onchip::Bucket ties{c.prefix, c.needed, c.count, 0};
  keys_in_place(held, l.keys, len);  // after the split's reads: resolve_bucket's barriers
  collect(l.keys, len, ties, k_row, s, l.win_key, l.win_idx);
}

// One block per SM at 1024 threads (64 registers); 8-bit keys at 512 (16 keys to a 16-byte vector:
// onchip::place_winners spilled at 64 registers under NVRTC 13.5).
template <class T>
CUTOPK_KERNEL(sizeof(T) == 1 ? CUTOPK_BLOCK_ROW_8BIT_THREADS : CUTOPK_BLOCK_ROW_THREADS, 1)
block_row_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
               const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
               T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  typedef typename KeyTraits<T>::Key Key;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ onchip::Bucket s_bucket;
  __shared__ int s_scan[33];
  __shared__ unsigned long long s_scan2[33];
  __shared__ int s_taken;
  __shared__ int s_cands;
  __shared__ unsigned long long s_range[64];  // block_min_max's (32/64-bit integer rows)
  const int kp = pow2_at_least(k);
  const Layout<Key> l = layout<Key>(smem, kp, n);
  const Block s{&s_bucket, s_scan, s_scan2, &s_taken, &s_cands};

  const long long row = blockIdx.x;
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  const int len = (int)extent.length;  // < 2^31: the row fits in shared memory
  const int k_row = k < len ? k : len;
  const bool copied = ASYNC_COPIES && col_stride == 1 && (reinterpret_cast<unsigned long long>(base) & 15) == 0;
  const Entry<Key> entry = enter_row(row_bits(base), len, copied, l.keys, l.hist, 1 << FirstDigit<T>::BITS);
  if (threadIdx.x == 0) {
    s_bucket = onchip::Bucket{0ull, k_row, len, KEY_BITS<Key>};  // every key, k_row winners to take
    s_taken = 0;
    s_cands = 0;
  }
  HeldRow<T> held = held_row<T>(largest != 0, nan_first != 0);
  count_row<T, RangedDigit<T>::value>(entry, copied, base, col_stride, len, &held, l.keys, l.hist, s_range);
  if (len > k && k > 0) {
    onchip::choose_bin(l.hist, FirstDigit<T>::BITS, &s_bucket, s_scan);
    select_winners<T>(l, len, k_row, held, s);
  } else if (k > 0) {  // a row of at most K keeps every element
    keys_in_place(held, l.keys, len);
    onchip::gather_winners(l.keys, len, s_bucket, &s_taken, l.win_key, l.win_idx);
  }
  // The candidates and the row's keys are dead once the winners are placed: the ordering's scratch
  // goes over them (shared_bytes in cutopk/cuda/families/block_row.py makes room for it).
  const winners::Placed<Key> placed{l.win_key, l.win_idx, k_row, kp};
  const winners::Request<T> req{k, by_index != 0, largest != 0, true, out_vals, out_idx, index_bytes};
  winners::finish_winners(placed, reinterpret_cast<unsigned char*>(l.cand_key), len,
                          winners::Source<T>{base, col_stride, row}, req);
}

}  // namespace cutopk::block_row
