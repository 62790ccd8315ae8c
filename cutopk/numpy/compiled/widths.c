/* The per-width copies (a part of compiled.c, after every method): each method's row function is
 * written once, with the key width `bytes` (and the composite or lane width `wide`) as parameters,
 * and always inlined; width_copy is the one place that calls them with constants, so that the
 * compiler makes one copy per width whose loops run on the width's own type. Each step's copies
 * live in one function of their own (threshold_row_copies, ...), compiled once and shared by every caller: all
 * of them in one function made the insertion loop up to 2x slower, by where the call's buffers
 * fell against that function's large stack frame. Only the copies a method takes are made:
 * METHOD_RANK's for keys of up to 32 bits, and one copy per width of the steps that have no
 * composite choice. */

/* `step` (a constant) of c, in the copy for keys of `bytes` bytes and composites or lanes of
 * `wide`; the other steps, and the copies a step never takes, fold away. */
static ALWAYS_INLINE int width_step(const struct width_call* c, enum width_step step, int bytes, int wide) {
  if (step == STEP_THRESHOLD_ROW) {
    select_row(c->r, c->rule, c->row, c->a.threshold.buf, c->a.threshold.tmp, c->a.threshold.capacity, c->out, bytes,
               wide);
    return 1;
  }
  if (step == STEP_LANES) {
    select_lanes(c->r, c->rule, c->row, c->a.lanes.cols, c->a.lanes.lk, c->a.lanes.lc, c->a.lanes.block, c->out, bytes,
                 wide);
    return 1;
  }
  if (wide != (bytes == 8)) return 0; /* width_copy passes wide = (bytes == 8) to the steps below */
  if (step == STEP_RANK_ROW) {        /* keys of up to 32 bits (the request checks) */
    if (bytes == 8) return 0;
    return rank_row(c->r, c->rule, c->row, c->a.rank.keys, c->a.rank.most, c->a.rank.cand, c->a.rank.room, c->out,
                    bytes);
  }
  if (step == STEP_INSERT_ROW)
    insert_row(c->r, c->rule, c->row, c->a.insert.tk, c->a.insert.tc, c->out, bytes);
  else if (step == STEP_INSERT_SHORT_ROWS)
    insert_short_rows(c->r, c->rule, c->a.insert.tk, c->a.insert.tc, bytes);
  else
    copy_values(c->r, bytes);
  return 1;
}

/* `step` of c in the copy for c->r->width: composites and lanes of 64 bits hold keys of up to 32
 * bits and columns below 2**32 (2**31 for the lanes), and the callers set c->wide for the others. */
static ALWAYS_INLINE int width_copy(const struct width_call* c, enum width_step step) {
  const int wide = step == STEP_THRESHOLD_ROW || step == STEP_LANES ? c->wide : c->r->width == 8;
  switch (c->r->width * 2 + wide) {
    case 2:
      return width_step(c, step, 1, 0);
    case 3:
      return width_step(c, step, 1, 1);
    case 4:
      return width_step(c, step, 2, 0);
    case 5:
      return width_step(c, step, 2, 1);
    case 8:
      return width_step(c, step, 4, 0);
    case 9:
      return width_step(c, step, 4, 1);
    default:
      return width_step(c, step, 8, 1);
  }
}

/* Each step's copies, one function per step. */
static __attribute__((noinline)) int threshold_row_copies(const struct width_call* c) {
  return width_copy(c, STEP_THRESHOLD_ROW);
}
static __attribute__((noinline)) int insert_row_copies(const struct width_call* c) {
  return width_copy(c, STEP_INSERT_ROW);
}
static __attribute__((noinline)) int insert_short_rows_copies(const struct width_call* c) {
  return width_copy(c, STEP_INSERT_SHORT_ROWS);
}
static __attribute__((noinline)) int lanes_copies(const struct width_call* c) {
  return width_copy(c, STEP_LANES);
}
static __attribute__((noinline)) int rank_row_copies(const struct width_call* c) {
  return width_copy(c, STEP_RANK_ROW);
}
static __attribute__((noinline)) int copy_values_copies(const struct width_call* c) {
  return width_copy(c, STEP_COPY_VALUES);
}

static int by_width(const struct width_call* c) {
  switch (c->step) {
    case STEP_THRESHOLD_ROW:
      return threshold_row_copies(c);
    case STEP_INSERT_ROW:
      return insert_row_copies(c);
    case STEP_INSERT_SHORT_ROWS:
      return insert_short_rows_copies(c);
    case STEP_LANES:
      return lanes_copies(c);
    case STEP_RANK_ROW:
      return rank_row_copies(c);
    default:
      return copy_values_copies(c);
  }
}
