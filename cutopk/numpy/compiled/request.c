/* The request (a part of compiled.c): its checks, each method's call, and the winners' values. */

EXPORT int64_t cutopk_compiled_abi(void) {
  return ((int64_t)CUTOPK_COMPILED_ABI << 32) | sizeof(struct cutopk_rows);
}

/* Whether the request is one this file can take (the caller's checks make a refusal unreachable). */
static int request_ok(const struct cutopk_rows* r) {
  if (r->rows < 0 || r->n < 1 || r->k < 1 || r->k > r->n) return 0;
  if (r->width != 1 && r->width != 2 && r->width != 4 && r->width != 8) return 0;
  if (r->kind == KIND_FLOAT && r->width == 1) return 0;
  if (r->method < METHOD_THRESHOLD || r->method > METHOD_RANK) return 0;
  /* Ranks: composites of keys of up to 32 bits and 32-bit columns. */
  if (r->method == METHOD_RANK && (r->width > 4 || r->n > (int64_t)UINT32_MAX)) return 0;
  /* Counting: 8- and 16-bit elements, counts and candidate columns of 32 bits. */
  if (r->method == METHOD_COUNT && (r->width > 2 || r->n > (int64_t)UINT32_MAX)) return 0;
  return r->threads >= 0;
}

/* The winners' values, their bits copied from the input, a group of rows at a time right after
 * the group's selection, while its elements lie in cache (a take in NumPy afterwards read the
 * indices and the input again, some 8 ns an element: 65536x8 k=2, a third of the call; copied
 * after the whole block, 1024x4096 k=64 missed the cache on every value, 8% of the call). */
#define VALUES_GROUP_BYTES (256 * 1024)
static ALWAYS_INLINE void copy_values(const struct cutopk_rows* r, int bytes) {
  const int64_t k = r->k;
  for (int64_t i = 0; i < r->rows; i++) {
    const char* row = r->data + i * r->row_stride;
    const int64_t* cols = r->out + i * k;
    char* to = r->values + i * k * bytes;
    for (int64_t p = 0; p < k; p++) memcpy(to + p * bytes, row + cols[p] * r->col_stride, (size_t)bytes);
  }
}
/* The selection of every row of r: r->out alone (each method's call). */
static int select_indices(const struct cutopk_rows* r) {
  struct key_rule rule = {r->kind, r->largest ? 0 : ~(uint64_t)0, r->nan_first ? ~(uint64_t)0 : 0, r->inf_bits};
  switch (r->method) {
    case METHOD_COUNT:
      return select_counted(r, &rule);
    case METHOD_RANK:
      return select_ranked(r, &rule);
    case METHOD_INSERT:
      return select_inserted(r, &rule);
    case METHOD_COLUMNS:
      return select_columns(r, &rule);
    default:
      return select_thresholded(r, &rule);
  }
}

/* The top K of every row of r, on the calling thread: r->out gets each row's K columns in the order
 * asked for, r->values (where given) their values (r->threads is not read: the pool, threads.c, splits
 * the rows first). */
static int select_block(const struct cutopk_rows* r) {
  if (r->values == NULL) return select_indices(r);
  const int64_t row_bytes = r->n * r->width;
  int64_t group = row_bytes < VALUES_GROUP_BYTES ? VALUES_GROUP_BYTES / row_bytes : 1;
  if (r->method == METHOD_COLUMNS) group = (group + LANES - 1) / LANES * LANES; /* whole blocks of lanes */
  for (int64_t i = 0; i < r->rows; i += group) {
    struct cutopk_rows sub = *r;
    sub.rows = r->rows - i < group ? r->rows - i : group;
    sub.data += i * r->row_stride;
    sub.out += i * r->k;
    sub.values += i * r->k * r->width;
    int status = select_indices(&sub);
    if (status != STATUS_OK) return status;
    struct width_call c = {.step = STEP_COPY_VALUES, .r = &sub};
    by_width(&c);
  }
  return STATUS_OK;
}
