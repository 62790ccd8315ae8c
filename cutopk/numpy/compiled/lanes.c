/* METHOD_COLUMNS (a part of compiled.c; see lanes.h): up to LANES rows side by side, each row's
 * sorted list in a lane of vectors (lanes.h), every step putting the next element of each row into
 * its list at once, without a branch per lane. */

/* One step of a group of lanes for the element of column `col` (keys `x`, columns `col`, lanes of
 * 64 bits where `wide`, else 32): lists holding `held` entries (held < k: slot `held` is empty and
 * the element takes it or a higher one), slot p of the group at lk + p * LANES lanes, and of its
 * columns at lc + p * LANES. */
static ALWAYS_INLINE lanes_bits* lane_slot(void* list, int64_t p, int wide) {
  return (lanes_bits*)((char*)list + p * LANES * (wide ? 8 : 4));
}
static ALWAYS_INLINE void lane_step(void* lk, void* lc, lanes_bits x, lanes_bits col, int64_t held, int64_t k,
                                    int wide) {
  const int bytes = wide ? 8 : 4;
  int64_t p = held < k ? held : k - 1;
  if (held < k && p > 0) { /* the empty slot: the element enters it, or the one above moves down */
    lanes_bits above = *lane_slot(lk, p - 1, wide), moves = lanes_above(x, above, bytes);
    *lane_slot(lk, p, wide) = lanes_pick(moves, above, x, bytes);
    *lane_slot(lc, p, wide) = lanes_pick(moves, *lane_slot(lc, p - 1, wide), col, bytes);
    p--;
  }
  for (; p > 0; p--) { /* slot p takes the one above it (moves), the element (enters), or stays */
    lanes_bits above = *lane_slot(lk, p - 1, wide), old = *lane_slot(lk, p, wide);
    lanes_bits above_c = *lane_slot(lc, p - 1, wide), old_c = *lane_slot(lc, p, wide);
    lanes_bits moves = lanes_above(x, above, bytes), enters = lanes_above(x, old, bytes);
    *lane_slot(lk, p, wide) = lanes_pick(moves, above, lanes_pick(enters, x, old, bytes), bytes);
    *lane_slot(lc, p, wide) = lanes_pick(moves, above_c, lanes_pick(enters, col, old_c, bytes), bytes);
  }
  lanes_bits top = *lane_slot(lk, 0, wide);
  lanes_bits tops = held == 0 ? ~(lanes_bits){0} : lanes_above(x, top, bytes);
  *lane_slot(lk, 0, wide) = lanes_pick(tops, x, top, bytes);
  *lane_slot(lc, 0, wide) = lanes_pick(tops, col, *lane_slot(lc, 0, wide), bytes);
}

/* One lane's entry alone (lane j of a full list takes `key`, above its K-th), for a vector of
 * lanes where few enter: on long rows most steps have one or two entries, and a vector step costs
 * K slots for every lane. Keys and columns of `bytes` bytes (a column's low bits where 4). */
static ALWAYS_INLINE void lane_insert(void* lk, void* lc, int64_t j, uint64_t key, int64_t col, int64_t k, int bytes) {
  int64_t p = k - 1;
  for (; p > 0 && key_above(key, key_at(lk, (p - 1) * LANES + j, bytes), bytes); p--) {
    key_put(lk, p * LANES + j, key_at(lk, (p - 1) * LANES + j, bytes), bytes);
    key_put(lc, p * LANES + j, key_at(lc, (p - 1) * LANES + j, bytes), bytes);
  }
  key_put(lk, p * LANES + j, key, bytes);
  key_put(lc, p * LANES + j, (uint64_t)col, bytes);
}

/* A vector of lanes with at most 3/8 of them entering takes lane_insert from this K on (below it,
 * the vector step costs less than the branches: C alone, AVX2, float32, 512 rows of 4096 side by
 * side, K=64: 14.9 ms against 27.9 by vector steps alone and 17.0 by the branch-per-lane lists
 * before; K=16 and short rows: 1.0-1.2x slower by lane_insert, at any share). */
#define LANE_ALONE_MIN_K 32
static ALWAYS_INLINE int lane_alone(int hits, int lanes) {
  return hits * 8 <= lanes * 3;
}

/* The element of column `col` of the rows of one group of lanes (keys `x`, the group's lists at lk
 * and lc): passed over where no key is above its lane's K-th, entered lane by lane where few are
 * (lane_insert), else by one vector step. */
static ALWAYS_INLINE void lane_group_step(void* lk, void* lc, lanes_bits x, int64_t col, int64_t held, int64_t k,
                                          int wide) {
  const int bytes = wide ? 8 : 4, lanes = VECTOR_BYTES / bytes;
  if (held == k) {
    lanes_bits enter = lanes_above(x, *lane_slot(lk, k - 1, wide), bytes);
    int hits = lane_hits(enter, bytes);
    if (hits == 0) return;
    if (k >= LANE_ALONE_MIN_K && lane_alone(hits, lanes)) {
      for (int j = 0; j < lanes; j++)
        if (lane_at(enter, j, bytes)) lane_insert(lk, lc, j, lane_at(x, j, bytes), col, k, bytes);
      return;
    }
  }
  lane_step(lk, lc, x, lanes_all(col, bytes), held, k, wide);
}

/* The selection of `cols` (<= LANES) rows side by side from `first` (row j at first + j *
 * row_stride): lk/lc hold k * LANES keys and columns of the lanes' type (uint32_t/int32_t, or
 * uint64_t/int64_t where `wide`); block_keys, LANES * LANES_PACKED_N 32-bit keys. Lanes beyond
 * `cols` run on zero keys and are not written out. */
#define LANES_PACKED_N 64
static ALWAYS_INLINE void select_lanes(const struct cutopk_rows* r, const struct key_rule* rule, const char* first,
                                       int64_t cols, void* lk, void* lc, void* block_keys, int64_t* out, int bytes,
                                       int wide) {
  const int64_t n = r->n, k = r->k;
  uint64_t raw[CHUNK];       /* the keys of one step, `bytes` bytes each */
  uint64_t lane_keys[LANES]; /* the same, as the lanes' type (wide or not) */
  uint32_t* key32 = (uint32_t*)lane_keys;
  if (cols < LANES) memset(lane_keys, 0, sizeof lane_keys);
  /* Rows of 32-bit elements one after another: the block's keys made in one vectorised run (and
   * read down its columns from there), not a strided load per element (32768x32 k=4 3.3 -> 2.5
   * ms, C alone, AVX2). */
  uint32_t* block = (uint32_t*)block_keys;
  const int packed = !wide && bytes == 4 && r->col_stride == 4 && r->row_stride == n * 4 && n <= LANES_PACKED_N;
  if (packed) make_part_keys(block, first, cols * n, 4, rule, 0, 4);
  for (int64_t i = 0; i < n; i++) {
    const char* src = first + i * r->col_stride;
    if (wide && bytes == 8) {
      make_keys(lane_keys, src, cols, r->row_stride, rule, 0, 8);
    } else if (packed) { /* this column of the block's keys */
      for (int64_t j = 0; j < cols; j++) key32[j] = block[j * n + i];
    } else if (!wide && bytes == 4) {
      make_keys(key32, src, cols, r->row_stride, rule, 0, 4);
    } else {
      make_keys(raw, src, cols, r->row_stride, rule, 0, bytes);
      if (wide)
        for (int64_t j = 0; j < cols; j++) lane_keys[j] = key_at(raw, j, bytes);
      else
        for (int64_t j = 0; j < cols; j++) key32[j] = (uint32_t)key_at(raw, j, bytes);
    }
    const int64_t held = i < k ? i : k;
    const int lane_bytes = wide ? 8 : 4;
    for (int64_t g = 0; g < cols; g += VECTOR_BYTES / lane_bytes) {
      lanes_bits x;
      memcpy(&x, (const char*)lane_keys + g * lane_bytes, sizeof x);
      lane_group_step((char*)lk + g * lane_bytes, (char*)lc + g * lane_bytes, x, i, held, k, wide);
    }
  }
  for (int64_t j = 0; j < cols; j++) {
    int64_t* row_out = out + j * k;
    for (int64_t p = 0; p < k; p++)
      row_out[p] = wide ? ((const int64_t*)lc)[p * LANES + j] : ((const int32_t*)lc)[p * LANES + j];
    if (r->order == ORDER_INDEX) sort_columns(row_out, k);
  }
}

/* METHOD_COLUMNS's call: the lanes' lists, and the rows LANES at a time. */
static int select_columns(const struct cutopk_rows* r, const struct key_rule* rule) {
  const int64_t k = r->k;
  if (k > (INT64_MAX / 16) / LANES) return STATUS_NO_MEMORY;
  /* The lanes' lists: k x LANES keys and as many columns, of up to 8 bytes each, and a block's
   * keys (select_lanes). */
  char* buf = malloc((size_t)(LANES * k * 16 + LANES * LANES_PACKED_N * 4));
  if (buf == NULL) return STATUS_NO_MEMORY;
  struct width_call c = {.step = STEP_LANES, .wide = r->width == 8 || r->n > INT32_MAX, .r = r, .rule = rule};
  c.a.lanes.lk = buf;
  c.a.lanes.lc = buf + LANES * k * 8;
  c.a.lanes.block = buf + LANES * k * 16;
  for (int64_t i = 0; i < r->rows; i += LANES) {
    c.a.lanes.cols = r->rows - i < LANES ? r->rows - i : LANES;
    c.row = r->data + i * r->row_stride;
    c.out = r->out + i * k;
    by_width(&c);
  }
  free(buf);
  return STATUS_OK;
}
