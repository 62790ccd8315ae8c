/* The compiled route's request and ABI: struct cutopk_rows (compiled.py's ctypes mirror, field for
 * field), its enums and status codes, and what every part of compiled.c shares: ALWAYS_INLINE and
 * the call of a method's row function in the copy made for the request's width (struct
 * width_call, run by widths.c's by_width). Included first by compiled.c, after _GNU_SOURCE. */
#ifndef CUTOPK_COMPILED_REQUEST_H
#define CUTOPK_COMPILED_REQUEST_H

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* The layout of struct cutopk_rows and the meaning of its fields; compiled.py checks both through
 * cutopk_compiled_abi() before the first call. */
#define CUTOPK_COMPILED_ABI 5

enum element_kind { KIND_UNSIGNED = 0, KIND_SIGNED = 1, KIND_FLOAT = 2 };
enum winner_order { ORDER_VALUE = 0, ORDER_INDEX = 1 };
enum status { STATUS_OK = 0, STATUS_NO_MEMORY = 1, STATUS_BAD_REQUEST = 2 };
/* How the rows are selected (see "Other methods" in compiled.c); each is exact on every input it
 * takes. */
enum method { METHOD_THRESHOLD = 0, METHOD_INSERT = 1, METHOD_COUNT = 2, METHOD_COLUMNS = 3, METHOD_RANK = 4 };

/* One call's rows and request (compiled.py's ctypes mirror, field for field). */
struct cutopk_rows {
  const char* data;   /* the first element of the first row */
  int64_t rows;       /* number of rows */
  int64_t n;          /* elements per row */
  int64_t row_stride; /* bytes from one row to the next (any sign) */
  int64_t col_stride; /* bytes from one element to the next within a row (any sign) */
  int64_t k;          /* 1 <= k <= n */
  int64_t* out;       /* rows x k column indices, C order */
  uint64_t inf_bits;  /* floats: the bits of +inf (a NaN is any pattern above them, sign cleared) */
  int32_t width;      /* bytes per element: 1, 2, 4 or 8 */
  int32_t kind;       /* enum element_kind */
  int32_t largest;    /* 1: larger values preferred */
  int32_t nan_first;  /* 1: NaN is the most preferred value (nan="largest" with largest) */
  int32_t order;      /* enum winner_order */
  int32_t method;     /* enum method */
  int32_t threads;    /* threads that share the rows, the caller's included (0 or 1: it alone) */
  int32_t reserved;   /* 0 (the struct's size stays a multiple of 8) */
  char* values;       /* rows x k elements of `width` bytes, C order: the winners' own bits; or NULL */
};

/* Functions written once for every key width take `bytes` (1, 2, 4 or 8), and those written once
 * for both composite types `wide` (u128 over uint64_t; for the lanes, 64-bit lanes over 32-bit
 * ones): always inlined, and called with constants only, so that the compiler makes one copy per
 * width whose loops run on the width's own type (the vectoriser then fills a vector with as many
 * keys as fit). Keys travel between them as uint64_t; key arrays are read and written through
 * key_at/key_put. The constants come from one place: by_width (widths.c). */
#define ALWAYS_INLINE inline __attribute__((always_inline))

struct key_rule;

/* The row functions that by_width runs, one copy per width. */
enum width_step {
  STEP_THRESHOLD_ROW,     /* select_row (threshold.c) */
  STEP_INSERT_ROW,        /* insert_row (insert.c) */
  STEP_INSERT_SHORT_ROWS, /* insert_short_rows (insert.c): every row of the call */
  STEP_LANES,             /* select_lanes (lanes.c): up to LANES rows side by side */
  STEP_RANK_ROW,          /* rank_row (rank.c) */
  STEP_COPY_VALUES,       /* copy_values (request.c): every row of the call */
};

/* One call of a row function: the step, the request, and the step's own arguments. */
struct width_call {
  enum width_step step;
  int wide; /* STEP_THRESHOLD_ROW: 128-bit composites; STEP_LANES: 64-bit lanes (else unread) */
  const struct cutopk_rows* r;
  const struct key_rule* rule;
  const char* row; /* the row; STEP_LANES: the first of its rows */
  int64_t* out;    /* the row's K columns; STEP_LANES: the first row's */
  union {
    struct {
      void* buf;
      void* tmp;
      int64_t capacity;
    } threshold;
    struct {
      void* tk;
      int64_t* tc;
    } insert;
    struct {
      int64_t cols;
      void* lk;
      void* lc;
      void* block;
    } lanes;
    struct {
      void* keys;
      void* most;
      uint64_t* cand;
      int64_t room;
    } rank;
  } a;
};

/* Runs c's step in the copy for c->r->width (and c->wide); returns what the step returns
 * (rank_row: whether it took the row), else 1. */
static int by_width(const struct width_call* c);

#endif
