/* METHOD_THRESHOLD (a part of compiled.c; see its header for the algorithm): each row scanned
 * against a running threshold, the keys above it kept as composites, a full buffer cut down to its
 * K best by a quickselect, the first threshold from a sample or from the row's slices. */

/* Rows at least this long, with K at most this share of them, get a sample of SAMPLE keys first
 * (see select_row). SAMPLE fits the buffer, whose room is at least MIN_SLACK + CHUNK. */
#define SAMPLE_MIN_N 8192
#define SAMPLE_MIN_SHARE 64
#define SAMPLE 256
/* Buffer room beyond K: a refill keeps K and makes room for at least this many more. */
#define MIN_SLACK 256

/* select_row's first threshold from a sample, for rows of at least SAMPLE_MIN_N with K at most a
 * SAMPLE_MIN_SHARE-th of them: the key that about 2K + 32 elements of the row reach, read from
 * SAMPLE evenly spaced keys, less one (the scan keeps keys above the threshold: at or above the
 * sample's key). Returns 0 where that key is 0 (no threshold below it: the plain way). */
static ALWAYS_INLINE int sample_threshold(const struct cutopk_rows* r, const struct key_rule* rule, const char* row,
                                          void* buf, void* tmp, uint64_t* threshold, int bytes, int wide) {
  const int64_t n = r->n, k = r->k, stride = r->col_stride;
  int64_t step = n / SAMPLE, rank = (2 * k + 32) * SAMPLE / n;
  rank = rank < 1 ? 1 : rank;
  for (int64_t i = 0; i < SAMPLE; i++) {
    uint64_t key =
        key_of(load_bits(row + i * step * stride, bytes), bytes, rule->kind, rule->flip, rule->inf_bits, rule->nan_key);
    comp_put(buf, i, compose(key, i * step, wide), wide);
  }
  select_comps(buf, SAMPLE, rank, tmp, wide);
  uint64_t pivot = comp_key(comp_at(buf, rank - 1, wide), wide);
  *threshold = pivot - 1;
  return pivot > 0;
}

/* select_row's first threshold on other rows of at least 2K: the least of the K maxima down the
 * row's slices of K (column j of every slice; METHOD_RANK's bound), a key that K distinct
 * elements reach, less one. tmp holds 2K keys. Returns 0 where that key is 0. */
static ALWAYS_INLINE int slice_threshold(const struct cutopk_rows* r, const struct key_rule* rule, const char* row,
                                         void* tmp, uint64_t* threshold, int bytes) {
  const int64_t n = r->n, k = r->k, stride = r->col_stride;
  void* most = tmp;
  void* slice = (char*)tmp + k * bytes;
  /* The slices' keys made CHUNK / K slices at a time (the full chunk's copy where K divides
   * CHUNK): one call per slice of 16 cost a quarter of 2048x1024 k=16. */
  const int64_t span = k < CHUNK ? CHUNK / k * k : k;
  make_keys(most, row, k, stride, rule, 0, bytes);
  int64_t s = k;
  for (; s + span <= n; s += span) {
    make_keys(slice, row + s * stride, span, stride, rule, 0, bytes);
    for (int64_t t = 0; t < span; t += k)
      for (int64_t j = 0; j < k; j++)
        key_put(most, j, key_max(key_at(slice, t + j, bytes), key_at(most, j, bytes), bytes), bytes);
  }
  for (; s + k <= n; s += k) {
    make_keys(slice, row + s * stride, k, stride, rule, 0, bytes);
    for (int64_t j = 0; j < k; j++)
      key_put(most, j, key_max(key_at(slice, j, bytes), key_at(most, j, bytes), bytes), bytes);
  }
  uint64_t bound = key_at(most, 0, bytes);
  for (int64_t j = 1; j < k; j++) bound = key_min(bound, key_at(most, j, bytes), bytes);
  *threshold = bound - 1;
  return bound > 0;
}

/* The plain way's start: the first K elements enter unconditionally, and the least of them is
 * the threshold. Returns the threshold; buf[0..k) holds them. */
static ALWAYS_INLINE uint64_t enter_first_k(const struct cutopk_rows* r, const struct key_rule* rule, const char* row,
                                            void* buf, int bytes, int wide) {
  const int64_t k = r->k, stride = r->col_stride;
  uint64_t keys[CHUNK];
  for (int64_t col = 0; col < k; col += CHUNK) {
    int64_t count = k - col < CHUNK ? k - col : CHUNK;
    make_keys(keys, row + col * stride, count, stride, rule, 0, bytes);
    for (int64_t i = 0; i < count; i++) comp_put(buf, col + i, compose(key_at(keys, i, bytes), col + i, wide), wide);
  }
  u128 least = comp_at(buf, 0, wide);
  for (int64_t i = 1; i < k; i++) least = comp_at(buf, i, wide) < least ? comp_at(buf, i, wide) : least;
  return comp_key(least, wide);
}

/* The scan of select_row from column `col` on, with `kept` composites in buf and the given
 * threshold: every key above the threshold enters buf; a full buf keeps its K best and raises
 * the threshold. Returns the number kept. */
static ALWAYS_INLINE int64_t scan_above(const struct cutopk_rows* r, const struct key_rule* rule, const char* row,
                                        int64_t col, int64_t kept, uint64_t threshold, void* buf, void* tmp,
                                        int64_t capacity, int bytes, int wide) {
  const int64_t n = r->n, k = r->k, stride = r->col_stride;
  uint64_t keys[CHUNK]; /* CHUNK keys of `bytes` bytes each */
  for (; col < n; col += CHUNK) {
    int64_t count = n - col < CHUNK ? n - col : CHUNK;
    if (!make_keys(keys, row + col * stride, count, stride, rule, threshold, bytes)) continue;
    if (kept + count > capacity) { /* keep the K best, raise the threshold */
      select_comps(buf, kept, k, tmp, wide);
      kept = k;
      threshold = comp_key(comp_at(buf, k - 1, wide), wide);
    }
    if (HAVE_ABOVE_MASK && count == CHUNK) {
      for (uint64_t above = above_mask(keys, threshold, bytes); above; above &= above - 1) {
        int i = __builtin_ctzll(above);
        comp_put(buf, kept++, compose(key_at(keys, i, bytes), col + i, wide), wide);
      }
      continue;
    }
    /* Parts of 16 with no key above the threshold are passed over; in the others, branch-free,
     * every key is written and only those above the threshold are kept. */
    for (int64_t j = 0; j < count; j += 16) {
      int64_t end = count - j < 16 ? count : j + 16;
      if (!any_above(keys, j, end, threshold, bytes)) continue;
      for (int64_t i = j; i < end; i++) {
        uint64_t key = key_at(keys, i, bytes);
        comp_put(buf, kept, compose(key, col + i, wide), wide);
        kept += key_above(key, threshold, bytes);
      }
    }
  }
  return kept;
}

/* The selection of one row (METHOD_THRESHOLD), keys of `bytes` bytes in composites of type
 * u128 where `wide`, else uint64_t: buf and tmp hold `capacity` composites each. */
static ALWAYS_INLINE void select_row(const struct cutopk_rows* r, const struct key_rule* rule, const char* row,
                                     void* buf, void* tmp, int64_t capacity, int64_t* out, int bytes, int wide) {
  const int64_t n = r->n, k = r->k;
  uint64_t threshold = 0;
  int sampled = 0;
  if (n >= SAMPLE_MIN_N && k <= n / SAMPLE_MIN_SHARE)
    sampled = sample_threshold(r, rule, row, buf, tmp, &threshold, bytes, wide);
  else if (n >= 2 * k)
    sampled = slice_threshold(r, rule, row, tmp, &threshold, bytes);
  int64_t kept = sampled ? scan_above(r, rule, row, 0, 0, threshold, buf, tmp, capacity, bytes, wide) : 0;
  /* Fewer than K at or above the first threshold (no refill ran: an unlucky sample), or none
   * set: the plain way, so that the answer never depends on the sample. */
  if (kept < k) {
    threshold = enter_first_k(r, rule, row, buf, bytes, wide);
    kept = scan_above(r, rule, row, k, k, threshold, buf, tmp, capacity, bytes, wide);
  }
  if (kept > k) select_comps(buf, kept, k, tmp, wide);
  if (r->order == ORDER_INDEX) /* the inverted columns alone, sorted descending: the columns ascending */
    for (int64_t i = 0; i < k; i++) comp_put(buf, i, compose(0, comp_col(comp_at(buf, i, wide), wide), wide), wide);
  if (wide)
    sort_desc_u128(buf, k, tmp, sort_depth(k));
  else
    sort_desc_u64(buf, k, tmp, sort_depth(k));
  for (int64_t i = 0; i < k; i++) out[i] = comp_col(comp_at(buf, i, wide), wide);
}

/* The buffer's length for rows of n and a given k: K kept, room for at least max(K, MIN_SLACK)
 * more before a refill, and for one chunk written whole (its last slot may be written, not kept). */
static int64_t capacity_for(int64_t n, int64_t k) {
  int64_t slack = k > MIN_SLACK ? k : MIN_SLACK;
  return (n < k + slack ? n : k + slack) + CHUNK;
}

/* METHOD_THRESHOLD's call: its buffers, and each row's selection. */
static int select_thresholded(const struct cutopk_rows* r, const struct key_rule* rule) {
  /* 32-bit halves hold a column while n fits in 32 bits; 64-bit keys need the wide composite. */
  int wide = r->width == 8 || r->n > (int64_t)UINT32_MAX;
  int64_t capacity = capacity_for(r->n, r->k);
  /* The composites, and as many again for the partitions' out-of-place pass. */
  size_t bytes = (size_t)capacity * (wide ? sizeof(u128) : sizeof(uint64_t));
  char* buf = malloc(2 * bytes);
  if (buf == NULL) return STATUS_NO_MEMORY;
  struct width_call c = {.step = STEP_THRESHOLD_ROW, .wide = wide, .r = r, .rule = rule};
  c.a.threshold.buf = buf;
  c.a.threshold.tmp = buf + bytes;
  c.a.threshold.capacity = capacity;
  for (int64_t i = 0; i < r->rows; i++) {
    c.row = r->data + i * r->row_stride;
    c.out = r->out + i * r->k;
    by_width(&c);
  }
  free(buf);
  return STATUS_OK;
}
