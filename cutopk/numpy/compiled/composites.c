/* Composites (a part of compiled.c): a key and a column in one unsigned integer, the key in the
 * high half and the inverted column in the low one, so that composites are distinct and a larger
 * one is the preferred element, ties to the lower index included; their sort and quickselect,
 * both descending, for 64-bit composites (32-bit halves) and 128-bit ones. */
typedef unsigned __int128 u128;

/* The ordering of composites, written once for both composite types: `wide` (a constant at every
 * call, so that each always-inlined body is compiled once per type) picks u128 over uint64_t.
 * The values are read and written through comp_at/comp_put, whose u128 arithmetic folds to
 * 64 bits where `wide` is 0 (both sides of every comparison are widened 64-bit values). */
static ALWAYS_INLINE u128 comp_at(const void* a, int64_t i, int wide) {
  return wide ? ((const u128*)a)[i] : ((const uint64_t*)a)[i];
}
static ALWAYS_INLINE void comp_put(void* a, int64_t i, u128 v, int wide) {
  if (wide)
    ((u128*)a)[i] = v;
  else
    ((uint64_t*)a)[i] = (uint64_t)v;
}
/* a + i composites. */
static ALWAYS_INLINE void* comp_skip(void* a, int64_t i, int wide) {
  return (char*)a + i * (wide ? (int64_t)sizeof(u128) : (int64_t)sizeof(uint64_t));
}

static ALWAYS_INLINE void insertion_desc(void* a, int64_t m, int wide) {
  for (int64_t i = 1; i < m; i++) {
    u128 v = comp_at(a, i, wide);
    int64_t j = i;
    while (j > 0 && comp_at(a, j - 1, wide) < v) {
      comp_put(a, j, comp_at(a, j - 1, wide), wide);
      j--;
    }
    comp_put(a, j, v, wide);
  }
}

/* A min-heap sift: heapsort into descending order, quicksort's guard against bad pivots. */
static ALWAYS_INLINE void sift(void* a, int64_t root, int64_t m, int wide) {
  u128 v = comp_at(a, root, wide);
  for (;;) {
    int64_t child = 2 * root + 1;
    if (child >= m) break;
    if (child + 1 < m && comp_at(a, child + 1, wide) < comp_at(a, child, wide)) child++;
    if (!(comp_at(a, child, wide) < v)) break;
    comp_put(a, root, comp_at(a, child, wide), wide);
    root = child;
  }
  comp_put(a, root, v, wide);
}

static ALWAYS_INLINE void heapsort_desc(void* a, int64_t m, int wide) {
  for (int64_t i = m / 2 - 1; i >= 0; i--) sift(a, i, m, wide);
  for (int64_t end = m - 1; end > 0; end--) {
    u128 t = comp_at(a, 0, wide);
    comp_put(a, 0, comp_at(a, end, wide), wide);
    comp_put(a, end, t, wide);
    sift(a, 0, end, wide);
  }
}

/* Partition a[0..m) (m > 2, values distinct) around a median of three, through tmp[0..m):
 * returns p with a[0..p) > a[p] > a[p+1..m). Out of place and branch-free: every element is
 * written to both ends of tmp and one end moves on (in place, each step would wait for the
 * store of the step before). */
static ALWAYS_INLINE int64_t partition_desc(void* a, int64_t m, void* tmp, int wide) {
  int64_t mid = m / 2, last = m - 1, median;
  u128 first = comp_at(a, 0, wide), middle = comp_at(a, mid, wide), end = comp_at(a, last, wide);
  if (first > middle)
    median = middle > end ? mid : (first > end ? last : 0);
  else
    median = first > end ? 0 : (middle > end ? last : mid);
  u128 pivot = comp_at(a, median, wide);
  comp_put(a, median, end, wide);
  int64_t lo = 0, hi = last;
  for (int64_t i = 0; i < last; i++) {
    u128 v = comp_at(a, i, wide);
    int above = v > pivot;
    comp_put(tmp, lo, v, wide);
    comp_put(tmp, hi, v, wide);
    lo += above;
    hi -= !above;
  }
  comp_put(tmp, lo, pivot, wide); /* lo == hi */
  memcpy(a, tmp, (size_t)m * (wide ? sizeof(u128) : sizeof(uint64_t)));
  return lo;
}

static void sort_desc_u64(uint64_t* a, int64_t m, uint64_t* tmp, int depth);
static void sort_desc_u128(u128* a, int64_t m, u128* tmp, int depth);

static ALWAYS_INLINE void sort_desc(void* a, int64_t m, void* tmp, int depth, int wide) {
  while (m > 24) {
    if (depth-- == 0) {
      heapsort_desc(a, m, wide);
      return;
    }
    int64_t p = partition_desc(a, m, tmp, wide);
    /* Recurse into the smaller side, loop on the larger: O(log m) stack. */
    void* small = a;
    int64_t small_m = p;
    if (p < m - p - 1) {
      a = comp_skip(a, p + 1, wide);
      m -= p + 1;
    } else {
      small = comp_skip(a, p + 1, wide);
      small_m = m - p - 1;
      m = p;
    }
    if (wide)
      sort_desc_u128(small, small_m, tmp, depth);
    else
      sort_desc_u64(small, small_m, tmp, depth);
  }
  insertion_desc(a, m, wide);
}

/* Move the k largest of a[0..m) (distinct) to a[0..k), the k-th largest to a[k-1]. */
static ALWAYS_INLINE void select_desc(void* a, int64_t m, int64_t k, void* tmp, int wide) {
  int depth = 64;
  while (m > 24) {
    if (depth-- == 0) {
      heapsort_desc(a, m, wide); /* O(m log m) at worst */
      return;
    }
    int64_t p = partition_desc(a, m, tmp, wide);
    if (p == k - 1) return;
    if (p > k - 1) {
      m = p;
    } else {
      a = comp_skip(a, p + 1, wide);
      m -= p + 1;
      k -= p + 1;
    }
  }
  insertion_desc(a, m, wide);
}

/* The two instances of each, which the rest of the file calls. */
static void sort_desc_u64(uint64_t* a, int64_t m, uint64_t* tmp, int depth) {
  sort_desc(a, m, tmp, depth, 0);
}
static void sort_desc_u128(u128* a, int64_t m, u128* tmp, int depth) {
  sort_desc(a, m, tmp, depth, 1);
}
static void select_desc_u64(uint64_t* a, int64_t m, int64_t k, uint64_t* tmp) {
  select_desc(a, m, k, tmp, 0);
}
static void select_desc_u128(u128* a, int64_t m, int64_t k, u128* tmp) {
  select_desc(a, m, k, tmp, 1);
}

static int sort_depth(int64_t m) {
  int depth = 0;
  while (m > 1) {
    m >>= 1;
    depth += 2;
  }
  return depth;
}

/* A composite of `key` and column `col` (key in the high half, the inverted column in the low
 * one), as a u128 that holds a uint64_t where not `wide`; its key, and its column. */
static ALWAYS_INLINE u128 compose(uint64_t key, int64_t col, int wide) {
  if (wide) return (u128)key << 64 | (uint64_t)~(uint64_t)col;
  return (uint64_t)key << 32 | (uint32_t)~(uint32_t)col;
}
static ALWAYS_INLINE uint64_t comp_key(u128 c, int wide) {
  return wide ? (uint64_t)(c >> 64) : (uint64_t)c >> 32;
}
static ALWAYS_INLINE int64_t comp_col(u128 c, int wide) {
  return wide ? (int64_t)(uint64_t)~(uint64_t)c : (int64_t)(uint32_t)~(uint32_t)c;
}

static ALWAYS_INLINE void select_comps(void* a, int64_t m, int64_t k, void* tmp, int wide) {
  if (wide)
    select_desc_u128(a, m, k, tmp);
  else
    select_desc_u64(a, m, k, tmp);
}
