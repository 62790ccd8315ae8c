// merge_top_k: the top K of the union of up to CUTOPK_MERGE_PARTS partial results per row, read
// where they lie (each part a C-contiguous (rows, width) pair of values and indices), in one
// launch: a block per row.
//
// Steps: (1) stage the row's candidates in shared memory as (key, index) with the candidate's
// number c in the launch (part after part, each in its own order); (2) find which parts are
// sorted, best first (top_k's sorted=True output is); (3) rank each candidate: the number of
// candidates that beat it, by a binary search in each sorted part and by counting in any other;
// a candidate ranked below k wins, and lands at its rank (or, for the index order, at its rank
// by index among the winners); (4) the places no real candidate fills get padding.
//
// "a beats b": a larger key (KeyTraits: mode, NaN policy, -0.0 == +0.0), then a lower index,
// then a lower candidate number. That is docs/SPEC.md's order: ties go to the lower index, and
// a repeated index (never in disjoint parts) to the earlier part. A padding entry (a negative
// index, with a signed index type) is staged as (key 0, index ~0): it never beats a real
// candidate and is never ranked.
//
// More parts than CUTOPK_MERGE_PARTS are merged by further launches, each taking the previous
// launch's result as its part 0 (its candidates' positions from `pos0`, in rank order, which
// keeps equal (key, index) pairs in position order) and CUTOPK_MERGE_PARTS - 1 new parts.
// Dtypes: all (KeyTraits; values copied bit for bit). Indices: 4 or 8 bytes, signed or not.
// Threads per block: CUTOPK_MERGE_THREADS. Shared memory: 8 + sizeof(Key) + 4 bytes per
// candidate of a row (cutopk/cuda/families/merge.py sizes it and bounds the candidates).
#include "constants.cuh"
#include "key_traits.cuh"
#include "entry.cuh"

namespace cutopk::merge {

constexpr unsigned long long PADDING = ~0ULL;

template <class Key>
struct Staged {
  const unsigned long long* index;  // per candidate: its index, PADDING for a padding entry
  const Key* key;
  int* rank;  // per candidate: its rank (k or more: not a winner)
};

template <class Key>
__device__ __forceinline__ bool beats(const Staged<Key>& s, int a, int b) {
  if (s.key[a] != s.key[b]) return s.key[a] > s.key[b];
  if (s.index[a] != s.index[b]) return s.index[a] < s.index[b];
  return a < b;
}

__device__ __forceinline__ unsigned long long load_index(const void* idx, long long at, int index_bytes,
                                                         int index_signed) {
  if (index_bytes == 4) {
    const unsigned v = static_cast<const unsigned*>(idx)[at];
    return index_signed && (v >> 31) ? PADDING : v;
  }
  const unsigned long long v = static_cast<const unsigned long long*>(idx)[at];
  return index_signed && (v >> 63) ? PADDING : v;
}

// Candidates of part p in [first[p], first[p + 1]); sorted[p] says whether each beats the next.
template <class T>
struct Parts {
  const T* values[CUTOPK_MERGE_PARTS];
  const void* indices[CUTOPK_MERGE_PARTS];
  long long width[CUTOPK_MERGE_PARTS];
  long long offset[CUTOPK_MERGE_PARTS];
  int first[CUTOPK_MERGE_PARTS + 1];
  int sorted[CUTOPK_MERGE_PARTS];
  int count;
};

template <class T>
__device__ __forceinline__ void set_slot(Parts<T>& parts, int q, const T* values, const void* indices, long long width,
                                         long long offset) {
  parts.values[q] = values;
  parts.indices[q] = indices;
  parts.width[q] = width;
  parts.offset[q] = offset;
}

// Step 1: every candidate's key and index in shared memory; the number of real ones in *real.
template <class T>
__device__ __forceinline__ void stage(const Parts<T>& parts, long long row, int largest, int nan_first, int index_bytes,
                                      int index_signed, unsigned long long* index, typename KeyTraits<T>::Key* key,
                                      int* real) {
  typedef typename KeyTraits<T>::Key Key;
  int mine = 0;
  for (int p = 0; p < parts.count; ++p) {
    const long long at = row * parts.width[p];
    for (int j = threadIdx.x; j < parts.width[p]; j += blockDim.x) {
      const int c = parts.first[p] + j;
      const unsigned long long i = load_index(parts.indices[p], at + j, index_bytes, index_signed);
      index[c] = i;
      key[c] = i == PADDING ? Key(0) : KeyTraits<T>::to_key(parts.values[p][at + j], largest, nan_first);
      mine += i != PADDING;
    }
  }
  atomicAdd(real, mine);
}

// Step 2: a part is sorted when each of its candidates beats the next (padding last).
template <class T, class Key>
__device__ __forceinline__ void find_sorted(Parts<T>& parts, const Staged<Key>& s) {
  for (int p = 0; p < parts.count; ++p) {
    for (int c = parts.first[p] + 1 + threadIdx.x; c < parts.first[p + 1]; c += blockDim.x) {
      if (!beats(s, c - 1, c)) parts.sorted[p] = 0;  // a benign race: every writer writes 0
    }
  }
}

// How many candidates of part p beat candidate c.
template <class T, class Key>
__device__ __forceinline__ int beaten_by(const Parts<T>& parts, const Staged<Key>& s, int p, int c) {
  int lo = parts.first[p], hi = parts.first[p + 1];
  if (parts.sorted[p]) {  // those that beat c are a prefix: the first that does not ends it
    const int start = lo;
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (beats(s, mid, c))
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo - start;
  }
  int count = 0;
  for (int d = lo; d < hi; ++d) count += beats(s, d, c);
  return count;
}

// Step 3, first half: each real candidate's rank; a padding entry is never ranked.
template <class T, class Key>
__device__ __forceinline__ void rank_candidates(const Parts<T>& parts, const Staged<Key>& s, int total) {
  for (int c = threadIdx.x; c < total; c += blockDim.x) {
    int rank = 0x7fffffff;
    if (s.index[c] != PADDING) {
      rank = 0;
      for (int p = 0; p < parts.count; ++p) rank += beaten_by(parts, s, p, c);
    }
    s.rank[c] = rank;
  }
}

// Step 3, second half: each winner written at its place (its rank, or by index its rank by
// (index, candidate number) among the winners), with its value, index and position.
template <class T, class Key>
__device__ __forceinline__ void write_winners(const Parts<T>& parts, const Staged<Key>& s, int total, long long row,
                                              int k, int by_index, const long long* __restrict__ pos0,
                                              T* __restrict__ out_vals, void* __restrict__ out_idx, int index_bytes,
                                              long long* __restrict__ out_pos) {
  for (int c = threadIdx.x; c < total; c += blockDim.x) {
    if (s.rank[c] >= k) continue;
    int place = s.rank[c];
    if (by_index) {
      place = 0;
      for (int d = 0; d < total; ++d)
        place += s.rank[d] < k && (s.index[d] < s.index[c] || (s.index[d] == s.index[c] && d < c));
    }
    int p = 0;
    while (c >= parts.first[p + 1]) ++p;
    const long long j = c - parts.first[p], at = row * k + place;
    // The bits as they are (a NaN's payload too), moved as the key-width integer.
    reinterpret_cast<Key*>(out_vals)[at] = reinterpret_cast<const Key*>(parts.values[p])[row * parts.width[p] + j];
    store_index(out_idx, at, s.index[c], index_bytes);
    if (out_pos) out_pos[at] = p == 0 && pos0 ? pos0[row * parts.width[0] + j] : parts.offset[p] + j;
  }
}

// Step 4: the places past the row's real candidates.
template <class T>
__device__ __forceinline__ void write_padding_places(long long row, int k, int real, T* __restrict__ out_vals,
                                                     void* __restrict__ out_idx, int index_bytes,
                                                     long long* __restrict__ out_pos) {
  typedef typename KeyTraits<T>::Key Key;
  for (int place = real + threadIdx.x; place < k; place += blockDim.x) {
    const long long at = row * k + place;
    store_index(out_idx, at, ~0ULL, index_bytes);  // -1 in either width
    reinterpret_cast<Key*>(out_vals)[at] = Key(0);
    if (out_pos) out_pos[at] = 0;  // a padding winner passes no gradient
  }
}

template <class T>
CUTOPK_KERNEL(CUTOPK_MERGE_THREADS)
merge_parts(const T* __restrict__ v0, const void* __restrict__ i0, long long w0, long long o0, const T* __restrict__ v1,
            const void* __restrict__ i1, long long w1, long long o1, const T* __restrict__ v2,
            const void* __restrict__ i2, long long w2, long long o2, const T* __restrict__ v3,
            const void* __restrict__ i3, long long w3, long long o3, const T* __restrict__ v4,
            const void* __restrict__ i4, long long w4, long long o4, const T* __restrict__ v5,
            const void* __restrict__ i5, long long w5, long long o5, const T* __restrict__ v6,
            const void* __restrict__ i6, long long w6, long long o6, const T* __restrict__ v7,
            const void* __restrict__ i7, long long w7, long long o7, const long long* __restrict__ pos0, int parts,
            long long rows, int k, int largest, int nan_first, int by_index, int index_bytes, int index_signed,
            T* __restrict__ out_vals, void* __restrict__ out_idx, long long* __restrict__ out_pos) {
  typedef typename KeyTraits<T>::Key Key;
  static_assert(CUTOPK_MERGE_PARTS == 8, "merge_parts takes eight parts");
  __shared__ Parts<T> p;
  __shared__ int real;
  extern __shared__ unsigned long long merge_shared[];
  const long long row = blockIdx.x;
  if (row >= rows) return;  // the whole block leaves together
  if (threadIdx.x == 0) {   // slot by slot: no local array (no stack frame)
    set_slot(p, 0, v0, i0, w0, o0);
    set_slot(p, 1, v1, i1, w1, o1);
    set_slot(p, 2, v2, i2, w2, o2);
    set_slot(p, 3, v3, i3, w3, o3);
    set_slot(p, 4, v4, i4, w4, o4);
    set_slot(p, 5, v5, i5, w5, o5);
    set_slot(p, 6, v6, i6, w6, o6);
    set_slot(p, 7, v7, i7, w7, o7);
    p.count = parts;
    p.first[0] = 0;
    for (int q = 0; q < parts; ++q) {
      p.first[q + 1] = p.first[q] + (int)p.width[q];
      p.sorted[q] = 1;
    }
    real = 0;
  }
  __syncthreads();
  const int total = p.first[parts];
  // Shared memory: the indices (8-byte aligned first), the keys, the ranks (4-byte aligned: the
  // keys take a multiple of 8 bytes once total is rounded up to 8).
  const int padded = (total + 7) & ~7;
  unsigned long long* index = merge_shared;
  Key* key = reinterpret_cast<Key*>(index + padded);
  int* rank = reinterpret_cast<int*>(key + padded);
  const Staged<Key> s = {index, key, rank};
  stage(p, row, largest, nan_first, index_bytes, index_signed, index, key, &real);
  __syncthreads();
  find_sorted(p, s);
  __syncthreads();
  rank_candidates(p, s, total);
  __syncthreads();
  write_winners(p, s, total, row, k, by_index, pos0, out_vals, out_idx, index_bytes, out_pos);
  write_padding_places(row, k, real, out_vals, out_idx, index_bytes, out_pos);
}

}  // namespace cutopk::merge
