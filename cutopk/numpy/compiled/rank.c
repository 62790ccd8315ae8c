/* METHOD_RANK (a part of compiled.c; rows below 2**32, keys of up to 32 bits, small K): a bound
 * from the maxima down the row's slices of K, the keys at or above it as candidates, and each
 * candidate's rank among them (see rank_row). */

/* METHOD_RANK's candidates at most (more: the row goes to METHOD_INSERT). */
#define RANK_ROOM(k) (4 * (k) + 32)

/* METHOD_RANK's last step: each of the c candidates' rank (the number of candidates above it);
 * those of rank below K are the winners, written in value order (out[rank]) or index order (the
 * order the candidates came in). The ranks of a vector of candidates at a time, kept in
 * registers while every candidate is compared with them (RANK_VECTORS vectors at most: the
 * counts are constants in each copy, so the loops unroll), without a branch per candidate: a
 * loser is written to out[k], a slot of the caller's. A count per candidate across the others,
 * with a horizontal sum and a branch each, took half of 16384x128 k=8. */
#define RANK_VECTORS 16
#define RANK_LANES (VECTOR_BYTES / 8)

/* The ranks one candidate at a time (a count across the others, a branch each): few candidates, or
 * more than RANK_VECTORS vectors of them. */
static ALWAYS_INLINE void rank_by_counts(const uint64_t* cand, int64_t c, int64_t k, int order, int64_t* out) {
  for (int64_t i = 0, written = 0; i < c; i++) {
    int64_t rank = 0;
    for (int64_t j = 0; j < c; j++) rank += cand[j] > cand[i];
    if (rank < k) out[order == ORDER_VALUE ? rank : written++] = (int64_t)(uint32_t)~(uint32_t)cand[i];
  }
}
static ALWAYS_INLINE void rank_by_vectors(const uint64_t* cand, int64_t c, int64_t k, int order, int64_t* out,
                                          int vectors) {
  lanes_u64 mine[RANK_VECTORS];
  lanes_i64 rank[RANK_VECTORS];
  for (int v = 0; v < vectors; v++) {
    memcpy(&mine[v], cand + v * RANK_LANES, sizeof mine[v]);
    rank[v] = (lanes_i64){0};
  }
  for (int64_t j = 0; j < c; j++) {
    lanes_u64 other = (lanes_u64){0} + cand[j];
    for (int v = 0; v < vectors; v++) rank[v] += (lanes_i64)(other > mine[v]); /* -1 where above */
  }
  int64_t ranks[RANK_VECTORS * RANK_LANES], written = 0;
  memcpy(ranks, rank, sizeof rank[0] * (size_t)vectors);
  for (int64_t i = 0; i < c; i++) {
    int64_t place = -ranks[i], wins = place < k;
    out[wins ? (order == ORDER_VALUE ? place : written) : k] = (int64_t)(uint32_t)~(uint32_t)cand[i];
    written += wins;
  }
}

/* rank_by_vectors where the candidates fill 2 to RANK_VECTORS vectors (cand holds room for the
 * last one's lanes beyond c: their ranks are not read), else a count per candidate. out: k + 1
 * slots. */
static __attribute__((noinline)) void rank_candidates(uint64_t* cand, int64_t c, int64_t k, int order, int64_t* out) {
  const int64_t vectors = (c + RANK_LANES - 1) / RANK_LANES;
  switch (vectors) {
    case 2:
      return rank_by_vectors(cand, c, k, order, out, 2);
    case 3:
      return rank_by_vectors(cand, c, k, order, out, 3);
    case 4:
      return rank_by_vectors(cand, c, k, order, out, 4);
    case 5:
      return rank_by_vectors(cand, c, k, order, out, 5);
    case 6:
      return rank_by_vectors(cand, c, k, order, out, 6);
    case 7:
      return rank_by_vectors(cand, c, k, order, out, 7);
    case 8:
      return rank_by_vectors(cand, c, k, order, out, 8);
    case 9:
      return rank_by_vectors(cand, c, k, order, out, 9);
    case 10:
      return rank_by_vectors(cand, c, k, order, out, 10);
    case 11:
      return rank_by_vectors(cand, c, k, order, out, 11);
    case 12:
      return rank_by_vectors(cand, c, k, order, out, 12);
    case 13:
      return rank_by_vectors(cand, c, k, order, out, 13);
    case 14:
      return rank_by_vectors(cand, c, k, order, out, 14);
    case 15:
      return rank_by_vectors(cand, c, k, order, out, 15);
    case 16:
      return rank_by_vectors(cand, c, k, order, out, 16);
    default:
      rank_by_counts(cand, c, k, order, out);
  }
}

/* most[0..k) = the maxima down the row's whole slices of K (keys[j], keys[K + j], ...), a vector
 * of columns j at a time held in a register: the loop over j inside the loop over slices kept
 * `most` in memory and, for K of a vector or less, ran one iteration behind its alias checks per
 * slice (16384x128 k=8: a third of METHOD_RANK's time). Reads up to VECTOR_BYTES past keys[n - 1]
 * (the caller's padding); lanes beyond K are not kept. */
static ALWAYS_INLINE void slice_maxima(const void* keys, void* most, int64_t n, int64_t k, int bytes) {
  const int lanes = VECTOR_BYTES / bytes;
  for (int64_t j0 = 0; j0 < k; j0 += lanes) {
    lanes_bits acc, x;
    memcpy(&acc, (const char*)keys + j0 * bytes, sizeof acc);
    for (int64_t s = k; s + k <= n; s += k) {
      memcpy(&x, (const char*)keys + (s + j0) * bytes, sizeof x);
      lanes_bits above = lanes_above(x, acc, bytes);
      acc = lanes_pick(above, x, acc, bytes);
    }
    for (int64_t t = 0; t < lanes && j0 + t < k; t++) key_put(most, j0 + t, key_at(&acc, t, bytes), bytes);
  }
}

/* METHOD_RANK (rows below 2**32, keys of up to 32 bits, small K): the row's keys are made whole,
 * then a bound: cut the row into slices of K, the least of the K maxima down the slices (column
 * j of every slice) is a key that K distinct elements reach, so the K-th key is at least that.
 * The keys at or above it are the candidates (about 2K-3K on shuffled data), as composites
 * (key, inverted column): distinct, a larger one preferred, ties to the lower index included.
 * Each candidate's rank is the number of candidates above it (a vectorised count, no branches),
 * and the first K ranks are the answer in value order (out: K + 1 slots, see rank_candidates). A
 * row with more than `room` candidates (ties at the bound, a rising row) goes to METHOD_INSERT
 * instead: returns 0. */
static ALWAYS_INLINE int rank_row(const struct cutopk_rows* r, const struct key_rule* rule, const char* row, void* keys,
                                  void* most, uint64_t* cand, int64_t room, int64_t* out, int bytes) {
  const int64_t n = r->n, k = r->k, stride = r->col_stride;
  for (int64_t col = 0; col < n; col += CHUNK)
    make_keys((char*)keys + col * bytes, row + col * stride, n - col < CHUNK ? n - col : CHUNK, stride, rule, 0, bytes);
  slice_maxima(keys, most, n, k, bytes);
  uint64_t bound = key_at(most, 0, bytes);
  for (int64_t j = 1; j < k; j++) bound = key_min(bound, key_at(most, j, bytes), bytes);
  int64_t c = 0, i = 0;
  if (HAVE_ABOVE_MASK && bound > 0) /* keys above bound - 1, a chunk at a time: one step each */
    for (; i + CHUNK <= n; i += CHUNK) {
      uint64_t above = above_mask((const char*)keys + i * bytes, bound - 1, bytes);
      if (__builtin_popcountll(above) > room - c) return 0;
      for (; above; above &= above - 1) {
        int64_t a = i + __builtin_ctzll(above);
        cand[c++] = key_at(keys, a, bytes) << 32 | (uint32_t)~(uint32_t)a;
      }
    }
  for (; i < n; i++) {
    uint64_t key = key_at(keys, i, bytes);
    cand[c] = key << 32 | (uint32_t)~(uint32_t)i;
    c += !key_above(bound, key, bytes);
    if (c == room) return 0;
  }
  if (c > RANK_LANES) {
    rank_candidates(cand, c, k, r->order, out);
    return 1;
  }
  rank_by_counts(cand, c, k, r->order, out); /* a vector's worth or fewer (K = 1 mostly): inline */
  return 1;
}

/* METHOD_RANK's call: its buffers, and METHOD_INSERT's for the rows it hands over. */
static int select_ranked(const struct cutopk_rows* r, const struct key_rule* rule) {
  const int64_t n = r->n, k = r->k, room = RANK_ROOM(k);
  /* cand: room composites and a vector's lanes read past them (rank_candidates); won: a row's
   * K winners and the losers' slot; tc/tk: METHOD_INSERT's; keys: n of up to 4 bytes and
   * VECTOR_BYTES read past them (slice_maxima); most: K keys. */
  const int64_t cand_bytes = (room + RANK_LANES) * 8, keys_bytes = n * 4 + VECTOR_BYTES;
  char* buf = malloc((size_t)(cand_bytes + (k + 1) * 8 + k * 16 + keys_bytes + k * 4));
  if (buf == NULL) return STATUS_NO_MEMORY;
  uint64_t* cand = (uint64_t*)buf;
  int64_t* won = (int64_t*)(buf + cand_bytes);
  int64_t* tc = won + k + 1;
  void* tk = tc + k;
  void* keys = (char*)tk + k * 8;
  void* most = (char*)keys + keys_bytes;
  struct width_call ranked = {.step = STEP_RANK_ROW, .r = r, .rule = rule, .out = won};
  ranked.a.rank.keys = keys;
  ranked.a.rank.most = most;
  ranked.a.rank.cand = cand;
  ranked.a.rank.room = room;
  struct width_call inserted = {.step = STEP_INSERT_ROW, .r = r, .rule = rule};
  inserted.a.insert.tk = tk;
  inserted.a.insert.tc = tc;
  for (int64_t i = 0; i < r->rows; i++) {
    int64_t* out = r->out + i * k;
    ranked.row = inserted.row = r->data + i * r->row_stride;
    if (by_width(&ranked)) {
      for (int64_t p = 0; p < k; p++) out[p] = won[p]; /* K is small: no call */
    } else {
      inserted.out = out;
      by_width(&inserted);
    }
  }
  free(buf);
  return STATUS_OK;
}
