// Cluster select: top-K of a row too long for one block's shared memory, in one launch, a
// thread-block cluster of BLOCKS (2, 4 or 8) blocks per row (sm_90), the row read from global
// memory once. block_row's steps (block_steps.cuh) over the cluster's blocks, block r holding
// slice r of the row (`slice` elements, a multiple of 32) in its shared memory (HeldRow: floats
// as their loaded bits, other types as keys).
//
// Steps, each a function below:
// 1. load and count, block_row's steps (enter_row, count_row): every 16-byte vector of the slice
//    copied at entry (cp.async, in chunks) and counted by the first digit as its chunk lands, a
//    plain shared atomic per key; strided or unaligned rows by the streaming loader. Floats are
//    counted from their bits (RawDigit: a float16-style view), which stay in shared memory: their
//    keys are made by split_row for what it stores into block 0, or in place (keys_in_place)
//    before the paths that scan the slice as keys (the exact select across the cluster, a row no
//    longer than K). Other types become keys as they land, counted by the key's top 12 bits: one
//    digit for the whole cluster, so no per-slice range (count_row's RANGED false).
// 2. the cluster's histogram, reduced by owner in place (cluster_exchange.cuh: block r sums its
//    share of the bins from every block, one round trip of DSMEM loads, and stores the sums into
//    every block), and every block chooses the same bin t of the K-th key.
// 3. candidates, when bin t fits block 0's candidate arrays (`cap`): every block splits its slice
//    (split_row), its keys of higher bins stored as winners and bin t's as (key, row index)
//    candidates straight into block 0's shared memory (DSMEM stores, one remote atomic per warp
//    step and kind for the slots); the blocks other than 0 then arrive at the cluster barrier
//    and leave (no block reads their memory any more). Block 0 runs the exact select on the
//    candidates alone (resolve_bucket). Ties at the K-th place (a key shared across it): every
//    such key is a candidate, so block 0 takes the candidates above it and the ties of lowest
//    index itself (take_ties: a select over the ties' inverted indices), without the others.
//    When bin t overflows the candidates (a row of one value, say), the exact select runs over
//    the whole cluster from the key's top bit (resolve_across: each block refines its slice,
//    the counts reduced by owner each digit), and the winners are placed in index order into
//    block 0 (place_across: each block's count pushed to the later blocks for their bases).
// 4. order: block 0 alone, winners::finish_winners (order_winners.cuh; its scratch over its
//    dead histogram, candidates and keys), the values rebuilt from the winners' keys.
// Cluster barriers: two per digit counted (reduce_bins), one after the candidates or the
// placement (split into arrive and wait: the other blocks arrive and leave; block 0 waits), one
// between the counts pushed and the placement (block 0, needing none, places its winners before
// its wait).
// Ties: equal keys go to the lower index (slices of lower rank hold lower indices; candidates
// carry their row index). NaN, -0.0: by the keys (key_traits.cuh). Rows: regular, with lengths,
// or CSR segments (row_extent.cuh; slices past a row's length are empty); a row no longer than K
// has all its elements win. Dtypes: all. Limits: K <= 2048, rows whose slices fit the layout
// below (cutopk/cuda/families/cluster.py), n < 2^31. Threads per block: 1024; 8-bit keys 512
// (16 keys to a 16-byte vector, as block_row's), one block per SM. Built for sm_90 and later only
// (the entry points' __cluster_dims__): on earlier GPUs the kernel traps and the dispatcher never
// picks it.
// Dynamic shared memory, every block alike (DSMEM maps an address to the same offset in another
// block): the winners (pow2(K) keys and 32-bit indices), the histogram (2^12 32-bit counters),
// the candidates (cap keys and indices), the slice's keys, each part a multiple of 16 bytes.
#include <cooperative_groups.h>

#include "constants.cuh"
#include "key_traits.cuh"
#include "row_extent.cuh"
#include "row_loads.cuh"
#include "async_copy.cuh"
#include "first_digit.cuh"
#include "onchip_select.cuh"
#include "order_winners.cuh"
#include "block_steps.cuh"
#include "cluster_exchange.cuh"
#include "phase_clock.cuh"
#include "entry.cuh"

namespace cutopk::cluster {

#if CUTOPK_CLUSTER_SUPPORTED
using cluster_exchange::Cluster;

// Where each part of the dynamic shared memory lies (the header's layout).
template <class Key>
struct Layout {
  Key* win_key;
  unsigned* win_idx;
  unsigned* hist;  // this block's counts, then the cluster's (reduce_bins)
  Key* cand_key;
  unsigned* cand_idx;
  Key* keys;
};

template <class Key>
__device__ __forceinline__ Layout<Key> layout(unsigned char* smem, int kp, int cap) {
  Layout<Key> l;
  int at = 0;
  l.win_key = reinterpret_cast<Key*>(smem);
  at += onchip::round16(kp * (int)sizeof(Key));
  l.win_idx = reinterpret_cast<unsigned*>(smem + at);
  at += onchip::round16(kp * 4);
  l.hist = reinterpret_cast<unsigned*>(smem + at);
  at += onchip::BINS * 4;
  l.cand_key = reinterpret_cast<Key*>(smem + at);
  at += onchip::round16(cap * (int)sizeof(Key));
  l.cand_idx = reinterpret_cast<unsigned*>(smem + at);
  at += onchip::round16(cap * 4);
  l.keys = reinterpret_cast<Key*>(smem + at);
  return l;
}

// The shared scalars of a block.
template <int BLOCKS>
struct Block {
  onchip::Bucket* bucket;
  int* scan;                   // choose_bin's block scans (33)
  unsigned long long* scan2;   // count_winners' (33)
  int* taken;                  // block 0's: winners placed
  int* cands;                  // block 0's: candidates placed
  int* ties;                   // block 0's: ties gathered (take_ties)
  unsigned long long* before;  // the earlier blocks' winner counts, pushed (BLOCKS)
};

// Ties at the K-th place after the candidates, block 0: the K-th key `kth` exact (every bit
// resolved), every key equal to it among the `count` candidates. The candidates above it join
// the winners (after the split's), and of the ties those of the `needed` lowest indices: their
// indices inverted (a larger key is a lower index) in `ties` (the dead slice's keys, at least
// cap 32-bit words), selected by resolve_bucket over their 32 bits, distinct so it ends with
// exactly `needed`. Both passes read 16-byte vectors; a lane's two counts go through one warp scan
// (above in the high 16 bits) and a warp step takes its slots with one atomic per kind, as
// split_row. Every thread of block 0 calls it after a barrier.
template <class Key, int BLOCKS>
__device__ __forceinline__ void take_ties(const Layout<Key>& l, int count, Key kth, int needed,
                                          const Block<BLOCKS>& s) {
  constexpr int E = onchip::KEYS_PER_VEC<Key>;
  unsigned* ties = reinterpret_cast<unsigned*>(l.keys);
  for (int v0 = 0; v0 < count; v0 += E * (int)blockDim.x) {
    const int i = v0 + E * (int)threadIdx.x;
    const onchip::Held<Key> h = onchip::held_keys(l.cand_key, i, count);
    int mine = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) mine += i + e < count && h.k[e] > kth ? 1 << 16 : i + e < count && h.k[e] == kth;
    int total;
    const int before = warp_scan(mine, &total);
    if (total == 0) continue;  // the same in the whole warp
    int up = 0, at = 0;
    if ((threadIdx.x & 31) == 0 && (total >> 16) > 0) up = atomicAdd(s.taken, total >> 16);
    if ((threadIdx.x & 31) == 0 && (total & 0xffff) > 0) at = atomicAdd(s.ties, total & 0xffff);
    up = __shfl_sync(onchip::FULL, up, 0) + (before >> 16);
    at = __shfl_sync(onchip::FULL, at, 0) + (before & 0xffff);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if (i + e < count && h.k[e] > kth) {
        l.win_key[up] = h.k[e];
        l.win_idx[up++] = l.cand_idx[i + e];
      } else if (i + e < count && h.k[e] == kth) {
        ties[at++] = ~l.cand_idx[i + e];
      }
    }
  }
  __syncthreads();
  const int m = *s.ties;
  resolve_bucket(ties, m, onchip::Bucket{0ull, needed, m, 32}, l.hist, s.bucket, s.scan);
  const onchip::Bucket b = *s.bucket;
  for (int v0 = 0; v0 < m; v0 += 4 * (int)blockDim.x) {
    const int i = v0 + 4 * (int)threadIdx.x;
    const onchip::Held<unsigned> h = onchip::held_keys(ties, i, m);
    int mine = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) mine += i + e < m && onchip::high_bits(h.k[e], b.shift) >= b.prefix;
    int total;
    const int before = warp_scan(mine, &total);
    if (total == 0) continue;
    int at = 0;
    if ((threadIdx.x & 31) == 0) at = atomicAdd(s.taken, total);
    at = __shfl_sync(onchip::FULL, at, 0) + before;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (i + e < m && onchip::high_bits(h.k[e], b.shift) >= b.prefix) {
        l.win_key[at] = kth;
        l.win_idx[at++] = ~h.k[e];
      }
    }
  }
}

// 3. Bin t (`first`, the cluster's) fits the candidates: each block's split into block 0, then
// block 0's exact select on them. Returns whether this block goes on (block 0); the others have
// arrived at the cluster barrier and leave. Every thread of the cluster calls it.
template <class T, int BLOCKS>
__device__ __forceinline__ bool select_candidates(const Cluster& cluster, const Layout<typename KeyTraits<T>::Key>& l,
                                                  int mine, unsigned first_index, onchip::Bucket first,
                                                  const HeldRow<T>& held, const Block<BLOCKS>& s) {
  typedef typename KeyTraits<T>::Key Key;
  split_row<T>(l.keys, mine, held, (unsigned)first.prefix,
               Split<Key>{cluster.map_shared_rank(l.win_key, 0), cluster.map_shared_rank(l.win_idx, 0),
                          cluster.map_shared_rank(s.taken, 0), cluster.map_shared_rank(l.cand_key, 0),
                          cluster.map_shared_rank(l.cand_idx, 0), cluster.map_shared_rank(s.cands, 0), first_index});
  cluster.barrier_arrive();  // this block's winners and candidates are in block 0
  if (cluster.block_rank() != 0) return false;
  cluster.barrier_wait();  // every block's are; every thread has read *s.bucket
  const Common shared = held.digit.common((unsigned)first.prefix);
  resolve_bucket(l.cand_key, first.count, onchip::Bucket{shared.prefix, first.needed, first.count, shared.shift},
                 l.hist, s.bucket, s.scan);
  const onchip::Bucket c = *s.bucket;
  if (c.count == c.needed)
    onchip::gather_winners(l.cand_key, first.count, c, s.taken, l.win_key, l.win_idx, l.cand_idx);
  else
    take_ties(l, first.count, (Key)c.prefix, c.needed, s);
  return true;
}

// 3''. The exact select over the whole cluster from bucket `start`: each block refines its slice
// by the key's 12-bit prefix digits, the counts reduced by owner, every block choosing the same
// bin, until the bucket holds just the winners still needed or every bit is resolved. Every
// thread of the cluster calls it; every thread has read *s.bucket before.
template <int BLOCKS, class Key>
__device__ __forceinline__ void resolve_across(const Cluster& cluster, const Layout<Key>& l, int mine,
                                               onchip::Bucket start, const Block<BLOCKS>& s) {
  __syncthreads();
  if (threadIdx.x == 0) *s.bucket = start;
  __syncthreads();
  while (true) {
    const onchip::Bucket b = *s.bucket;  // the same in every block
    if (b.count == b.needed || b.shift == 0) return;
    const int bits = b.shift < onchip::DIGIT_BITS ? b.shift : onchip::DIGIT_BITS;
    onchip::refine(l.keys, mine, b, bits, l.hist);  // its first barrier: every thread has read *s
    cluster_exchange::reduce_bins<BLOCKS>(cluster, l.hist, bits);
    onchip::choose_bin(l.hist, bits, s.bucket, s.scan);
  }
}

// 4'. The winners of the cluster's bucket b, in index order, into block 0: each block's (above,
// members) counts pushed to the later blocks (its bases there), then its keys above b and its
// members of rank < b.needed placed. Returns whether this block goes on (block 0, once every
// block's winners are in); the others leave after their arrival. Every thread of the cluster
// calls it, after a cluster barrier (every block has started) and a block barrier.
template <int BLOCKS, class Key>
__device__ __forceinline__ bool place_across(const Cluster& cluster, const Layout<Key>& l, int mine,
                                             long long first_index, onchip::Bucket b, int k_row,
                                             const Block<BLOCKS>& s) {
  const onchip::Counts c = onchip::count_winners(l.keys, mine, b, s.scan2);
  cluster_exchange::push_counts<BLOCKS>(cluster, s.before, c.block);
  const int above = k_row - b.needed;
  if (cluster.block_rank() == 0) {  // no earlier block: its bases are 0, its winners go in first
    cluster.barrier_arrive();
    onchip::place_winners(l.keys, mine, first_index, b, c, 0, 0, above, l.win_key, l.win_idx);
    cluster.barrier_wait();
    cluster.sync();  // every block's winners are in
    return true;
  }
  cluster.sync();  // every earlier block's counts are here
  const unsigned long long before = cluster_exchange::sum_before(s.before, cluster.block_rank());
  onchip::place_winners(l.keys, mine, first_index, b, c, (int)(before >> 32), (int)(before & 0xffffffffu), above,
                        cluster.map_shared_rank(l.win_key, 0), cluster.map_shared_rank(l.win_idx, 0));
  cluster.barrier_arrive();  // and leaves: no block reads its memory any more
  return false;
}

// 2-4. From the slices' first-digit counts to block 0's k_row winners. Returns whether this block
// goes on to order them (block 0). Every thread of the cluster calls it, with len > k > 0.
template <class T, int BLOCKS>
__device__ __forceinline__ bool select_winners(const Cluster& cluster, const Layout<typename KeyTraits<T>::Key>& l,
                                               int mine, long long first_index, int len, int k_row, int cap,
                                               const HeldRow<T>& held, const Block<BLOCKS>& s) {
  typedef typename KeyTraits<T>::Key Key;
  cluster_exchange::reduce_bins<BLOCKS>(cluster, l.hist, FirstDigit<T>::BITS);
  onchip::choose_bin(l.hist, FirstDigit<T>::BITS, s.bucket, s.scan);
  CUTOPK_PHASE(2, bucket);
  const onchip::Bucket first = *s.bucket;  // bin t: the same in every block
  if (first.count <= cap) return select_candidates<T, BLOCKS>(cluster, l, mine, (unsigned)first_index, first, held, s);
  keys_in_place(held, l.keys, mine);  // the exact select scans the whole slice as keys
  resolve_across<BLOCKS>(cluster, l, mine, onchip::Bucket{0ull, k_row, len, KEY_BITS<Key>}, s);
  return place_across<BLOCKS>(cluster, l, mine, first_index, *s.bucket, k_row, s);
}
#endif

template <class T, int BLOCKS>
CUTOPK_KERNEL(sizeof(T) == 1 ? CUTOPK_BLOCK_ROW_8BIT_THREADS : CUTOPK_BLOCK_ROW_THREADS, 1)
cluster_topk(const T* __restrict__ in, long long rows, long long n, long long row_stride, long long col_stride,
             const long long* __restrict__ extents, int rows_kind, int k, int largest, int nan_first, int by_index,
             int slice, int cap, T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes) {
  static_assert(BLOCKS <= CUTOPK_CLUSTER_BLOCKS, "the family's sizes are at most the portable cluster size");
#if CUTOPK_CLUSTER_SUPPORTED
  CUTOPK_PHASE(0, entry);
  typedef typename KeyTraits<T>::Key Key;
  const Cluster cluster = cooperative_groups::this_cluster();
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ onchip::Bucket s_bucket;
  __shared__ int s_scan[33];
  __shared__ unsigned long long s_scan2[33];
  __shared__ int s_taken;
  __shared__ int s_cands;
  __shared__ int s_ties;
  __shared__ unsigned long long s_before[BLOCKS];
  const int kp = pow2_at_least(k);
  const Layout<Key> l = layout<Key>(smem, kp, cap);
  const Block<BLOCKS> s{&s_bucket, s_scan, s_scan2, &s_taken, &s_cands, &s_ties, s_before};

  const long long row = blockIdx.x / BLOCKS;
  const RowExtent extent = row_extent(row, n, row_stride, col_stride, extents, rows_kind);
  const T* base = in + extent.start;
  const int len = (int)extent.length;
  const int k_row = k < len ? k : len;
  const long long first = (long long)cluster.block_rank() * slice;  // this block's slice of the row
  const int mine = (int)max(0ll, min((long long)slice, extent.length - first));
  const T* slice_base = base + first * col_stride;
  const bool copied = col_stride == 1 && (reinterpret_cast<unsigned long long>(slice_base) & 15) == 0;
  const Entry<Key> entry = enter_row(row_bits(slice_base), mine, copied, l.keys, l.hist, 1 << FirstDigit<T>::BITS);
  if (threadIdx.x == 0) {
    s_bucket = onchip::Bucket{0ull, k_row, len, KEY_BITS<Key>};  // every key, k_row winners to take
    s_taken = 0;
    s_cands = 0;
    s_ties = 0;
  }
  // The slice's bits held (floats), their keys made where needed; no range digit (one digit for
  // the whole cluster).
  HeldRow<T> held = held_row<T>(largest != 0, nan_first != 0);
  count_row<T, false>(entry, copied, slice_base, col_stride, mine, &held, l.keys, l.hist, nullptr);
  CUTOPK_PHASE(1, load);
  bool orders = cluster.block_rank() == 0;
  if (len > k && k > 0) {  // the same in the whole cluster: every block meets the same barriers
    orders = select_winners<T, BLOCKS>(cluster, l, mine, first, len, k_row, cap, held, s);
  } else if (k > 0) {  // a row of at most K keeps every element
    keys_in_place(held, l.keys, mine);
    cluster.sync();  // every block has started: its shared memory may be mapped
    orders = place_across<BLOCKS>(cluster, l, mine, first, s_bucket, k_row, s);
  }
  if (!orders) return;
  CUTOPK_PHASE(3, collect);  // block 0 alone from here
  // The histogram, the candidates and the slice's keys are dead once the winners are placed: the
  // ordering's scratch goes over them (shared_bytes in cutopk/cuda/families/cluster.py makes room).
  const winners::Placed<Key> placed{l.win_key, l.win_idx, k_row, kp};
  const winners::Request<T> req{k, by_index != 0, largest != 0, true, out_vals, out_idx, index_bytes};
  winners::finish_winners(placed, reinterpret_cast<unsigned char*>(l.hist), len,
                          winners::Source<T>{base, col_stride, row}, req);
  CUTOPK_PHASE(4, order);
#else
  __trap();  // not built for this GPU: the dispatcher gives the family to sm_90 and later only
#endif
}

}  // namespace cutopk::cluster
