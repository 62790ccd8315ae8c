/* METHOD_INSERT (a part of compiled.c): each row's K best so far, kept sorted (keys descending,
 * ties in index order) in a key array `tk` and a column array `tc`. The row is read in index
 * order, so an element enters below every kept key at least its own: the lower index wins a
 * tie. Once K are kept, only a key above the K-th's enters, and the K-th drops out. METHOD_COLUMNS
 * (lanes.c) keeps the same lists for many rows at once, and METHOD_RANK hands this method the
 * rows it cannot take. */
static void sort_columns(int64_t* c, int64_t k) {
  for (int64_t i = 1; i < k; i++) {
    int64_t v = c[i], j = i;
    while (j > 0 && c[j - 1] > v) {
      c[j] = c[j - 1];
      j--;
    }
    c[j] = v;
  }
}

/* The row's answer from its kept columns: as kept (value order), or ascending (index order). */
static void emit_columns(const int64_t* tc, int64_t k, int order, int64_t* out) {
  memcpy(out, tc, (size_t)k * sizeof *out);
  if (order == ORDER_INDEX) sort_columns(out, k);
}

/* Put (key, col) into tk/tc[0..m], which hold m sorted entries (the slot m is free or is the
 * dropped K-th). */
static ALWAYS_INLINE void insert_kept(void* tk, int64_t* tc, int64_t m, uint64_t key, int64_t col, int bytes) {
  int64_t p = m;
  while (p > 0 && key_above(key, key_at(tk, p - 1, bytes), bytes)) {
    key_put(tk, p, key_at(tk, p - 1, bytes), bytes);
    tc[p] = tc[p - 1];
    p--;
  }
  key_put(tk, p, key, bytes);
  tc[p] = col;
}

/* insert_kept over a full list (key above the K-th's, which drops out), without branches: each
 * slot takes the one above it, the new key, or stays, by two comparisons with the old keys. */
static ALWAYS_INLINE void replace_kept(void* tk, int64_t* tc, int64_t k, uint64_t key, int64_t col, int bytes) {
  for (int64_t p = k - 1; p > 0; p--) {
    uint64_t above = key_at(tk, p - 1, bytes), here = key_at(tk, p, bytes);
    int64_t above_c = tc[p - 1], here_c = tc[p];
    int moves = key_above(key, above, bytes), enters = key_above(key, here, bytes);
    key_put(tk, p, moves ? above : enters ? key : here, bytes);
    tc[p] = moves ? above_c : enters ? col : here_c;
  }
  uint64_t top = key_at(tk, 0, bytes);
  int tops = key_above(key, top, bytes);
  key_put(tk, 0, tops ? key : top, bytes);
  tc[0] = tops ? col : tc[0];
}

/* METHOD_INSERT: one row, read a chunk of keys at a time; a chunk with no key above the K-th
 * kept is passed over whole. O(N) compares plus O(K) per entry (about K ln(N/K) entries on
 * shuffled data, N on a rising row): for small K. */
static ALWAYS_INLINE void insert_row(const struct cutopk_rows* r, const struct key_rule* rule, const char* row,
                                     void* tk, int64_t* tc, int64_t* out, int bytes) {
  const int64_t n = r->n, k = r->k, stride = r->col_stride;
  uint64_t keys[CHUNK]; /* CHUNK keys of `bytes` bytes each */
  int64_t m = 0;
  for (int64_t col = 0; col < n; col += CHUNK) {
    int64_t count = n - col < CHUNK ? n - col : CHUNK, i = 0;
    int full = m == k;
    uint64_t threshold = full ? key_at(tk, k - 1, bytes) : 0;
    int any = make_keys(keys, row + col * stride, count, stride, rule, threshold, bytes);
    if (full && !any) continue;
    if (HAVE_ABOVE_MASK && full && count == CHUNK) {
      /* Only the keys above the chunk's first threshold can enter: one step each. */
      for (uint64_t above = above_mask(keys, threshold, bytes); above; above &= above - 1) {
        int a = __builtin_ctzll(above);
        uint64_t key = key_at(keys, a, bytes);
        if (key_above(key, key_at(tk, k - 1, bytes), bytes)) replace_kept(tk, tc, k, key, col + a, bytes);
      }
      continue;
    }
    for (; m < k && i < count; i++, m++) insert_kept(tk, tc, m, key_at(keys, i, bytes), col + i, bytes);
    for (; i < count; i++) {
      uint64_t key = key_at(keys, i, bytes);
      if (key_above(key, key_at(tk, k - 1, bytes), bytes)) replace_kept(tk, tc, k, key, col + i, bytes);
    }
  }
  emit_columns(tc, k, r->order, out);
}

/* METHOD_INSERT on rows of at most CHUNK: the keys of as many whole rows as a chunk holds are
 * made in one call where the rows follow one another in memory (one per row otherwise), then
 * each row is selected from them: a call per row would cost more than a short row's work. */
static ALWAYS_INLINE void insert_short_rows(const struct cutopk_rows* r, const struct key_rule* rule, void* tk,
                                            int64_t* tc, int bytes) {
  const int64_t n = r->n, k = r->k, per = CHUNK / n;
  const int packed = r->col_stride == bytes && r->row_stride == n * bytes;
  uint64_t keys[CHUNK]; /* CHUNK keys of `bytes` bytes each */
  for (int64_t i = 0; i < r->rows; i += per) {
    int64_t count = r->rows - i < per ? r->rows - i : per;
    const char* first = r->data + i * r->row_stride;
    if (packed)
      make_keys(keys, first, count * n, bytes, rule, 0, bytes);
    else
      for (int64_t j = 0; j < count; j++)
        make_keys((char*)keys + j * n * bytes, first + j * r->row_stride, n, r->col_stride, rule, 0, bytes);
    for (int64_t j = 0; j < count; j++) {
      const char* row = (const char*)keys + j * n * bytes;
      for (int64_t c = 0; c < k; c++) insert_kept(tk, tc, c, key_at(row, c, bytes), c, bytes);
      for (int64_t c = k; c < n; c++) {
        uint64_t key = key_at(row, c, bytes);
        if (key_above(key, key_at(tk, k - 1, bytes), bytes)) replace_kept(tk, tc, k, key, c, bytes);
      }
      emit_columns(tc, k, r->order, r->out + (i + j) * k);
    }
  }
}

/* METHOD_INSERT's call: its lists, and each row's selection (rows of at most CHUNK a chunk of them
 * at a time). */
static int select_inserted(const struct cutopk_rows* r, const struct key_rule* rule) {
  const int64_t k = r->k;
  if (k > INT64_MAX / 16) return STATUS_NO_MEMORY;
  /* tk: k keys of up to 8 bytes; tc: k columns. */
  char* buf = malloc((size_t)(k * 16));
  if (buf == NULL) return STATUS_NO_MEMORY;
  struct width_call c = {.step = STEP_INSERT_ROW, .r = r, .rule = rule};
  c.a.insert.tc = (int64_t*)buf;
  c.a.insert.tk = buf + k * 8;
  if (r->n <= CHUNK) {
    c.step = STEP_INSERT_SHORT_ROWS;
    by_width(&c);
  } else {
    for (int64_t i = 0; i < r->rows; i++) {
      c.row = r->data + i * r->row_stride;
      c.out = r->out + i * k;
      by_width(&c);
    }
  }
  free(buf);
  return STATUS_OK;
}
