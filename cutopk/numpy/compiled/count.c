/* METHOD_COUNT (a part of compiled.c; 8- and 16-bit elements): a counting selection, the K-th
 * key from counts of the keys' bytes, then a pass that writes the winners in the order asked for. */

/* count_row_8's second pass for one element: a winner (key above t, or one of the first `need`
 * equal to t) is written where value order or index order puts it; returns whether it was. */
static inline int take_counted(int key, int64_t col, int t, int64_t need, int64_t* taken, int64_t* start,
                               int64_t written, int order, int64_t* out) {
  if (key < t || (key == t && *taken == need)) return 0;
  *taken += key == t;
  out[order == ORDER_VALUE ? start[key]++ : written] = col;
  return 1;
}

/* METHOD_COUNT, 8-bit elements: a counting selection. One pass counts the row's bytes (four
 * tables, so that runs of one value do not wait on one counter), whose counts give each key's
 * (256 keys: the bytes' keys are a table too); the K-th key `t` and the number above it follow
 * from the top. A second pass writes the winners, read in index order: every key above `t`,
 * and the first K - above keys equal to it. For value order each key's winners start where
 * the counts of the keys above it end (a counting sort: ties in index order); the pass stops
 * at the K-th winner. O(N) whatever the ties, and no comparison sort. */
static void count_row_8(const struct cutopk_rows* r, const struct key_rule* rule, const char* row, int64_t* out) {
  const int64_t n = r->n, k = r->k, stride = r->col_stride;
  uint32_t tables[4][256];
  memset(tables, 0, sizeof tables);
  int64_t j = 0;
  if (stride == 1) {
    const uint8_t* p = (const uint8_t*)row;
    for (; j + 4 <= n; j += 4) {
      tables[0][p[j]]++;
      tables[1][p[j + 1]]++;
      tables[2][p[j + 2]]++;
      tables[3][p[j + 3]]++;
    }
  }
  for (; j < n; j++) tables[j & 3][(uint8_t)row[j * stride]]++;
  int64_t hist[256] = {0};
  for (int b = 0; b < 256; b++) {
    uint8_t key = key_8((uint8_t)b, rule->kind, (uint8_t)rule->flip, (uint8_t)rule->inf_bits, (uint8_t)rule->nan_key);
    hist[key] += (int64_t)tables[0][b] + tables[1][b] + tables[2][b] + tables[3][b];
  }
  int t = 255;
  int64_t above = 0;
  while (above + hist[t] < k) above += hist[t--]; /* some key has K at or above it: t >= 0 */
  int64_t start[256], need = k - above, taken = 0, written = 0;
  if (r->order == ORDER_VALUE) {
    int64_t at = 0;
    for (int b = 255; b > t; b--) {
      start[b] = at;
      at += hist[b];
    }
  }
  start[t] = above;
  uint8_t keys[CHUNK];
  for (int64_t col = 0; col < n && written < k; col += CHUNK) {
    int64_t count = n - col < CHUNK ? n - col : CHUNK;
    /* Keys at or above t: above t - 1 (t == 0: every key, which `any` need not tell). */
    uint8_t below = (uint8_t)(t ? t - 1 : 0);
    int any = make_keys(keys, row + col * stride, count, stride, rule, below, 1);
    if (!any && t) continue;
    if (HAVE_ABOVE_MASK && t && count == CHUNK) { /* the keys at or above t, one step each */
      for (uint64_t at_least = above_mask_8(keys, below); at_least; at_least &= at_least - 1) {
        int64_t i = __builtin_ctzll(at_least);
        written += take_counted(keys[i], col + i, t, need, &taken, start, written, r->order, out);
      }
    } else {
      for (int64_t i = 0; i < count; i++)
        written += take_counted(keys[i], col + i, t, need, &taken, start, written, r->order, out);
    }
  }
}

/* Bins of one counting level: a byte's values. */
#define BINS 256
/* Up to this K, count_row_16's winners are put in value order by a sort of K composites; above
 * it by two counting passes (byte_pass_desc), whose 2 x 256 bins cost more than sorting a few
 * (benchmarks/results/2026-12-02-cpu-compiled-choice.md). */
#define COUNT_SORT_MAX_K 16

/* One stable counting pass over k (key, column) pairs by the byte of the keys at `shift`,
 * descending (bin 255 - byte), into to_keys (NULL: not needed) and to_cols. */
static void byte_pass_desc(const uint16_t* keys, const int64_t* cols, int64_t k, int shift, uint16_t* to_keys,
                           int64_t* to_cols) {
  int64_t start[BINS] = {0};
  for (int64_t i = 0; i < k; i++) start[255 - ((keys[i] >> shift) & 255)]++;
  int64_t at = 0;
  for (int b = 0; b < BINS; b++) {
    int64_t count = start[b];
    start[b] = at;
    at += count;
  }
  for (int64_t i = 0; i < k; i++) {
    int64_t to = start[255 - ((keys[i] >> shift) & 255)]++;
    if (to_keys != NULL) to_keys[to] = keys[i];
    to_cols[to] = cols[i];
  }
}

/* Where the K-th count falls in four tables of BINS counts (bin b's count: the sum of the
 * four), counting down from the top: returns the bin, with *above the count of the bins above
 * it (< k; with its own, at least k; some bin reaches k as k <= the total). Only the bins
 * visited are summed: the usual few at the top. */
static int kth_bin(uint32_t tables[4][BINS], int64_t k, int64_t* above) {
  int b = BINS - 1;
  int64_t sum = 0;
  for (;; b--) {
    int64_t count = (int64_t)tables[0][b] + tables[1][b] + tables[2][b] + tables[3][b];
    if (sum + count >= k) break;
    sum += count;
  }
  *above = sum;
  return b;
}

/* Buffers of count_row_16, per call. */
struct count_room {
  uint16_t* keys;     /* n: the row's keys */
  uint16_t* win_keys; /* 2k: the winners' keys, and as many for the counting passes */
  int64_t* win_cols;  /* 2k: their columns, and as many; or 2k composites (K, and the sort's) */
};

/* take_winners_16's step for one key at or above t: a winner (above t, or one of the first
 * `need` equal to it) goes into the composites (value order, small K) or the pairs. */
static inline int64_t take_one_16(uint16_t key, int64_t col, uint16_t t, int64_t need, int64_t* taken, int64_t written,
                                  int composites, uint16_t* wk, int64_t* wc) {
  if (key == t && *taken == need) return 0;
  *taken += key == t;
  if (composites)
    wc[written] = (int64_t)((uint64_t)key << 32 | (uint32_t)~(uint32_t)col);
  else {
    wk[written] = key;
    wc[written] = col;
  }
  return 1;
}

/* count_row_16's last step: the winners, the row's keys read again in index order (every key
 * above t, and the first `need` equal to it: the lower index wins a tie) until K are found,
 * into out in the order asked for. */
static void take_winners_16(const struct cutopk_rows* r, const uint16_t* keys, uint16_t t, int64_t need,
                            const struct count_room* room, int64_t* out) {
  const int64_t n = r->n, k = r->k;
  /* Value order for a few: composites (key, inverted column), distinct, a larger one preferred. */
  const int composites = r->order == ORDER_VALUE && k <= COUNT_SORT_MAX_K;
  uint16_t* wk = room->win_keys;
  int64_t* wc = r->order == ORDER_VALUE ? room->win_cols : out;
  int64_t written = 0, taken = 0, i = 0;
  if (HAVE_ABOVE_MASK && t > 0) /* the keys at or above t, one step each */
    for (; i + CHUNK <= n && written < k; i += CHUNK)
      for (uint64_t at_least = above_mask_16(keys + i, (uint16_t)(t - 1)); at_least && written < k;
           at_least &= at_least - 1) {
        int64_t a = i + __builtin_ctzll(at_least);
        written += take_one_16(keys[a], a, t, need, &taken, written, composites, wk, wc);
      }
  for (; i < n && written < k; i++)
    if (keys[i] >= t) written += take_one_16(keys[i], i, t, need, &taken, written, composites, wk, wc);
  if (composites) {
    uint64_t* comp = (uint64_t*)wc;
    sort_desc_u64(comp, k, comp + k, sort_depth(k));
    for (int64_t j = 0; j < k; j++) out[j] = (uint32_t)~(uint32_t)comp[j];
  } else if (r->order == ORDER_VALUE) { /* by the low byte, then the high byte: ties keep index order */
    byte_pass_desc(wk, wc, k, 0, wk + k, wc + k);
    byte_pass_desc(wk + k, wc + k, k, 8, NULL, out);
  }
}

/* METHOD_COUNT, 16-bit elements (int16, uint16, float16, bfloat16): a counting selection in
 * two levels of 256 bins, so that a row needs no 65536-bin table (256 KB to clear per row).
 * Pass 1 makes the row's keys (vectorised) and counts their high bytes (four tables, so that
 * runs of one value do not wait on one counter): the K-th key's high byte `hi` follows from the
 * top. Pass 2 counts the low bytes of the keys of high byte `hi`: the K-th key `t` follows.
 * Where those keys and the ones above them are few, pass 2 steps through a vector mask of the
 * keys at or above `hi`'s first; else it reads every key (ties: one bin holds the row). The
 * last pass (take_winners_16) reads the keys in index order until it has the K winners.
 * O(N + K) whatever the ties. Memory per call: N keys, 2K winners' keys and columns. */
static void count_row_16(const struct cutopk_rows* r, const struct key_rule* rule, const char* row,
                         const struct count_room* room, int64_t* out) {
  const int64_t n = r->n, k = r->k, stride = r->col_stride;
  uint16_t* keys = room->keys;
  uint32_t tables[4][BINS];
  memset(tables, 0, sizeof tables);
  int64_t col = 0;
  for (; col + CHUNK <= n; col += CHUNK) {
    make_chunk_keys(keys + col, row + col * stride, stride, rule, 0, 2);
    for (int64_t i = 0; i < CHUNK; i += 4) {
      tables[0][keys[col + i] >> 8]++;
      tables[1][keys[col + i + 1] >> 8]++;
      tables[2][keys[col + i + 2] >> 8]++;
      tables[3][keys[col + i + 3] >> 8]++;
    }
  }
  if (col < n) make_part_keys(keys + col, row + col * stride, n - col, stride, rule, 0, 2);
  for (int64_t i = col; i < n; i++) tables[0][keys[i] >> 8]++;
  int64_t above_hi;
  const int hi = kth_bin(tables, k, &above_hi);
  const int64_t in_hi = (int64_t)tables[0][hi] + tables[1][hi] + tables[2][hi] + tables[3][hi];
  const uint16_t floor = (uint16_t)(hi << 8);
  int64_t i = 0;
  memset(tables, 0, sizeof tables);
  if (HAVE_ABOVE_MASK && hi > 0 && (above_hi + in_hi) * 8 <= n) /* keys above floor - 1: few */
    for (; i + CHUNK <= n; i += CHUNK)
      for (uint64_t at_least = above_mask_16(keys + i, (uint16_t)(floor - 1)); at_least; at_least &= at_least - 1) {
        int64_t a = i + __builtin_ctzll(at_least);
        tables[a & 3][keys[a] & 255] += keys[a] >> 8 == hi;
      }
  for (; i < n; i++) tables[i & 3][keys[i] & 255] += keys[i] >> 8 == hi; /* branch-free */
  int64_t above_lo;
  const uint16_t t = (uint16_t)(floor | kth_bin(tables, k - above_hi, &above_lo));
  take_winners_16(r, keys, t, k - above_hi - above_lo, room, out);
}

/* METHOD_COUNT's call: 8-bit rows need no buffers; 16-bit ones get count_room's. */
static int select_counted(const struct cutopk_rows* r, const struct key_rule* rule) {
  if (r->width == 1) {
    for (int64_t i = 0; i < r->rows; i++) count_row_8(r, rule, r->data + i * r->row_stride, r->out + i * r->k);
    return STATUS_OK;
  }
  const int64_t n = r->n, k = r->k;
  char* buf = malloc((size_t)(k * 16 + k * 4 + n * 2));
  if (buf == NULL) return STATUS_NO_MEMORY;
  struct count_room room = {
      .win_cols = (int64_t*)buf,
      .win_keys = (uint16_t*)(buf + k * 16),
      .keys = (uint16_t*)(buf + k * 16 + k * 4),
  };
  for (int64_t i = 0; i < r->rows; i++) count_row_16(r, rule, r->data + i * r->row_stride, &room, r->out + i * r->k);
  free(buf);
  return STATUS_OK;
}
