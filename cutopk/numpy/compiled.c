/* Exact top-K of the rows of a strided 2-D array: the NumPy backend's compiled route
 * (cutopk/numpy/compiled.py builds this file with the machine's C compiler and calls it through
 * ctypes, the GIL released). A call's rows are shared between the calling thread and a pool of
 * worker threads kept between calls (see "Threads" at the end); each row runs on one thread.
 *
 * Algorithm, per row: each element's preference key (the twin of cutopk/_request/keys.py and
 * kernels/key_traits.cuh: an unsigned integer of the element's width whose order is the
 * preference order, -0.0 tied with +0.0, NaN at one end by the NaN rule) is compared with a
 * running threshold `t`, the key of the K-th best element kept so far. Only keys strictly above
 * `t` can still win: an element whose key equals `t` comes after every kept element of key `t`
 * (the row is read in index order), and the lower index wins a tie. The few that pass go into a
 * buffer of composites (key in the high half, the inverted column in the low half: composites
 * are distinct, and a larger one is the preferred element, ties to the lower index included).
 * When the buffer fills, a quickselect keeps its K best and raises `t`. At the end the K best
 * composites are sorted for the order asked for.
 *
 * The first `t`: on rows of at least SAMPLE_MIN_N with K at most a SAMPLE_MIN_SHARE-th of them,
 * the key that about 2K + 32 elements of the row reach, read from a sample of SAMPLE evenly
 * spaced keys, and the scan keeps keys at or above it; should fewer than K reach it, the row is
 * read again the plain way, so the answer never depends on the sample. Other rows of at least
 * 2K: the least of the K maxima down the row's slices of K (column j of every slice), a key that
 * K distinct elements reach, so the scan keeps the keys at or above it (1024x4096 k=64: 20-40%
 * less time than the plain way, on AVX2). Otherwise (the plain way) the first K elements enter
 * unconditionally and the least of them is the first `t`.
 *
 * The keys of a chunk of CHUNK elements are made and compared with `t` in plain loops that the
 * compiler vectorises; a chunk holding keys above `t` gives them as a bit mask where the
 * machine compares vectors into masks (AVX-512BW), else its 16-key parts are stepped through.
 *
 * Work: O(N) per row whatever the data (a rising row refills the buffer every `capacity - K`
 * elements, each refill O(capacity)), plus O(K log K) for the order. Memory: two buffers of
 * `capacity` composites per call (the second for the partitions), freed before return. Elements
 * of 1, 2, 4 or 8 bytes, unsigned, signed or IEEE binary floating point (float16, bfloat16,
 * float32, float64), read with any strides (negative and zero too) and any alignment, in
 * native byte order. Rows of fewer than 2**32 elements use 64-bit composites (32-bit halves), longer
 * ones and 64-bit keys 128-bit composites.
 *
 * Other methods (the request's `method`; issue 42), each exact on every input it takes, chosen
 * by the caller for speed (cutopk/numpy/compiled.py's choose_method):
 * - METHOD_INSERT (short rows, small K): the K best so far kept sorted, an element entering
 *   only above the K-th; rows of at most CHUNK have the keys of several rows made at once.
 * - METHOD_COUNT (8- and 16-bit elements): a 256-bin count per row gives the K-th key (16 bits:
 *   the high byte's, then the low byte's in the K-th key's bin), a last pass writes the winners,
 *   in value order by a counting sort (16 bits, K above 16: two stable byte passes).
 * - METHOD_COLUMNS (rows side by side: an outer axis, or short rows): CHUNK rows at once, each
 *   step reading the next element of every one of them where it lies into sorted lists kept in
 *   vector lanes, one lane a row, without branches.
 * Every method can also copy its winners' values (the request's `values`), bit for bit.
 */
#define _GNU_SOURCE /* sched_getcpu, pthread_setaffinity_np: the workers' placement (Linux) */
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
/* How the rows are selected (see "Other methods" above); each is exact on every input it takes. */
enum method { METHOD_THRESHOLD = 0, METHOD_INSERT = 1, METHOD_COUNT = 2, METHOD_COLUMNS = 3, METHOD_RANK = 4 };
/* METHOD_RANK's candidates at most (more: the row goes to METHOD_INSERT). */
#define RANK_ROOM(k) (4 * (k) + 32)

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

/* Elements per chunk: the keys of a chunk are made and tested in vectorised loops. */
#define CHUNK 64
/* Rows at least this long, with K at most this share of them, get a sample of SAMPLE keys first
 * (see select_row). SAMPLE fits the buffer, whose room is at least MIN_SLACK + CHUNK. */
#define SAMPLE_MIN_N 8192
#define SAMPLE_MIN_SHARE 64
#define SAMPLE 256
/* Buffer room beyond K: a refill keeps K and makes room for at least this many more. */
#define MIN_SLACK 256

typedef unsigned __int128 u128;

/* The key transform's loop invariants (per call). */
struct key_rule {
  int kind;
  uint64_t flip;     /* all ones for smallest (the key inverted), else 0 */
  uint64_t nan_key;  /* the key every NaN gets: all ones where NaN comes first, else 0 */
  uint64_t inf_bits; /* +inf's bits */
};

/* Functions written once for every key width take `bytes` (1, 2, 4 or 8), and those written once
 * for both composite types `wide` (u128 over uint64_t): always inlined, and called with constants
 * only, so that the compiler makes one copy per width whose loops run on the width's own type
 * (the vectoriser then fills a vector with as many keys as fit). Keys travel between them as
 * uint64_t; key arrays are read and written through key_at/key_put. */
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The key transform, one function per width: the arithmetic on the width's own type is what the
 * vectoriser needs (the same steps on uint64_t, truncated, run 5-8x slower for 16 and 32 bits).
 * Negative floats bit-inverted, positive ones with the sign bit set: unsigned order is numeric
 * order; -0.0 (key sign - 1) moves up to +0.0's key (sign); a NaN (above +inf's bits, sign
 * cleared) gets nan_key; flip inverts the key for smallest. */
static inline uint8_t key_8(uint8_t b, int kind, uint8_t flip, uint8_t inf, uint8_t nan_key) {
  /* No 8-bit float: unsigned and signed only (the request refuses KIND_FLOAT here). */
  (void)inf, (void)nan_key;
  return (uint8_t)(kind == KIND_SIGNED ? b ^ 0x80u ^ flip : b ^ flip);
}
static inline uint16_t key_16(uint16_t b, int kind, uint16_t flip, uint16_t inf, uint16_t nan_key) {
  const uint16_t sign = 0x8000u;
  if (kind == KIND_UNSIGNED) return (uint16_t)(b ^ flip);
  if (kind == KIND_SIGNED) return (uint16_t)(b ^ sign ^ flip);
  uint16_t key = (uint16_t)(b ^ ((uint16_t)((int16_t)b >> 15) | sign));
  key = (uint16_t)((key + (key == sign - 1)) ^ flip);
  uint16_t is_nan = (uint16_t)(0 - ((uint16_t)(b & ~sign) > inf));
  return (uint16_t)((key & ~is_nan) | (nan_key & is_nan));
}
static inline uint32_t key_32(uint32_t b, int kind, uint32_t flip, uint32_t inf, uint32_t nan_key) {
  const uint32_t sign = 0x80000000u;
  if (kind == KIND_UNSIGNED) return b ^ flip;
  if (kind == KIND_SIGNED) return b ^ sign ^ flip;
  uint32_t key = b ^ ((uint32_t)((int32_t)b >> 31) | sign);
  key = (key + (key == sign - 1)) ^ flip;
  uint32_t is_nan = 0 - (uint32_t)((b & ~sign) > inf);
  return (key & ~is_nan) | (nan_key & is_nan);
}
static inline uint64_t key_64(uint64_t b, int kind, uint64_t flip, uint64_t inf, uint64_t nan_key) {
  const uint64_t sign = 0x8000000000000000u;
  if (kind == KIND_UNSIGNED) return b ^ flip;
  if (kind == KIND_SIGNED) return b ^ sign ^ flip;
  uint64_t key = b ^ ((uint64_t)((int64_t)b >> 63) | sign);
  key = (key + (key == sign - 1)) ^ flip;
  uint64_t is_nan = 0 - (uint64_t)((b & ~sign) > inf);
  return (key & ~is_nan) | (nan_key & is_nan);
}

/* The key of element bits `b` of `bytes` bytes. */
static ALWAYS_INLINE uint64_t key_of(uint64_t b, int bytes, int kind, uint64_t flip, uint64_t inf, uint64_t nan_key) {
  switch (bytes) {
    case 1:
      return key_8((uint8_t)b, kind, (uint8_t)flip, (uint8_t)inf, (uint8_t)nan_key);
    case 2:
      return key_16((uint16_t)b, kind, (uint16_t)flip, (uint16_t)inf, (uint16_t)nan_key);
    case 4:
      return key_32((uint32_t)b, kind, (uint32_t)flip, (uint32_t)inf, (uint32_t)nan_key);
    default:
      return key_64(b, kind, flip, inf, nan_key);
  }
}

/* The bits of the element at `p` (any alignment). */
static ALWAYS_INLINE uint64_t load_bits(const char* p, int bytes) {
  uint8_t b8;
  uint16_t b16;
  uint32_t b32;
  uint64_t b64;
  switch (bytes) {
    case 1:
      memcpy(&b8, p, 1);
      return b8;
    case 2:
      memcpy(&b16, p, 2);
      return b16;
    case 4:
      memcpy(&b32, p, 4);
      return b32;
    default:
      memcpy(&b64, p, 8);
      return b64;
  }
}

/* keys[i] of an array of keys of `bytes` bytes, and its store. */
static ALWAYS_INLINE uint64_t key_at(const void* keys, int64_t i, int bytes) {
  switch (bytes) {
    case 1:
      return ((const uint8_t*)keys)[i];
    case 2:
      return ((const uint16_t*)keys)[i];
    case 4:
      return ((const uint32_t*)keys)[i];
    default:
      return ((const uint64_t*)keys)[i];
  }
}
static ALWAYS_INLINE void key_put(void* keys, int64_t i, uint64_t key, int bytes) {
  switch (bytes) {
    case 1:
      ((uint8_t*)keys)[i] = (uint8_t)key;
      break;
    case 2:
      ((uint16_t*)keys)[i] = (uint16_t)key;
      break;
    case 4:
      ((uint32_t*)keys)[i] = (uint32_t)key;
      break;
    default:
      ((uint64_t*)keys)[i] = key;
  }
}

/* a > b on the width's own type: in a vectorised loop the compare's lanes then have the keys'
 * width (on uint64_t, a loop of 8-bit keys would compare 8 of them per vector, not 32). */
static ALWAYS_INLINE uint8_t key_above(uint64_t a, uint64_t b, int bytes) {
  switch (bytes) {
    case 1:
      return (uint8_t)a > (uint8_t)b;
    case 2:
      return (uint16_t)a > (uint16_t)b;
    case 4:
      return (uint32_t)a > (uint32_t)b;
    default:
      return a > b;
  }
}

/* Whether some a > b, across the keys of a loop: one accumulator of each width, of which the
 * width's own is used (the others stay 0 and fold away). A reduction in the keys' own type keeps
 * it in the keys' vectors; one of any other type makes the vectoriser convert every compare
 * (float32 keys with a byte-wide flag: 1.46x the time of 1x2**21 k=64, AVX2). */
struct hits {
  uint8_t h8;
  uint16_t h16;
  uint32_t h32;
  uint64_t h64;
};
static ALWAYS_INLINE void note_above(struct hits* h, uint64_t a, uint64_t b, int bytes) {
  switch (bytes) {
    case 1:
      h->h8 |= (uint8_t)((uint8_t)a > (uint8_t)b);
      break;
    case 2:
      h->h16 |= (uint16_t)((uint16_t)a > (uint16_t)b);
      break;
    case 4:
      h->h32 |= (uint32_t)((uint32_t)a > (uint32_t)b);
      break;
    default:
      h->h64 |= (uint64_t)(a > b);
  }
}
static ALWAYS_INLINE int any_hit(const struct hits* h) {
  return (h->h8 | h->h16 | h->h32 | h->h64) != 0;
}

/* The greater and the lesser key, chosen on the width's own type (as key_above: a choice
 * between uint64_t values made after a narrow compare left the loop of maxima over 16-bit keys
 * unvectorised, METHOD_RANK 1.5x slower). */
static ALWAYS_INLINE uint64_t key_max(uint64_t a, uint64_t b, int bytes) {
  switch (bytes) {
    case 1:
      return (uint8_t)a > (uint8_t)b ? (uint8_t)a : (uint8_t)b;
    case 2:
      return (uint16_t)a > (uint16_t)b ? (uint16_t)a : (uint16_t)b;
    case 4:
      return (uint32_t)a > (uint32_t)b ? (uint32_t)a : (uint32_t)b;
    default:
      return a > b ? a : b;
  }
}
static ALWAYS_INLINE uint64_t key_min(uint64_t a, uint64_t b, int bytes) {
  switch (bytes) {
    case 1:
      return (uint8_t)a < (uint8_t)b ? (uint8_t)a : (uint8_t)b;
    case 2:
      return (uint16_t)a < (uint16_t)b ? (uint16_t)a : (uint16_t)b;
    case 4:
      return (uint32_t)a < (uint32_t)b ? (uint32_t)a : (uint32_t)b;
    default:
      return a < b ? a : b;
  }
}

/* keys_of's loop for one element kind, a constant here so that the compiler makes one loop per
 * kind and stride: over keys[0..count) from `src` (`stride` bytes apart), each key also
 * compared with `threshold`; returns whether any is above it. */
static ALWAYS_INLINE int key_loop(void* keys, const char* src, int64_t count, int64_t stride,
                                  const struct key_rule* rule, uint64_t threshold, int bytes, int kind) {
  const uint64_t flip = rule->flip, inf = rule->inf_bits, nan_key = rule->nan_key;
  struct hits any = {0, 0, 0, 0};
  if (stride == bytes)
    for (int64_t i = 0; i < count; i++) {
      uint64_t key = key_of(load_bits(src + i * bytes, bytes), bytes, kind, flip, inf, nan_key);
      key_put(keys, i, key, bytes);
      note_above(&any, key, threshold, bytes);
    }
  else
    for (int64_t i = 0; i < count; i++) {
      uint64_t key = key_of(load_bits(src + i * stride, bytes), bytes, kind, flip, inf, nan_key);
      key_put(keys, i, key, bytes);
      note_above(&any, key, threshold, bytes);
    }
  return any_hit(&any);
}

/* The keys of `count` elements from `src` (`stride` bytes apart) into keys[]; returns whether
 * any key is above `threshold`. One loop per element kind and stride, each vectorised. */
static ALWAYS_INLINE int keys_of(void* keys, const char* src, int64_t count, int64_t stride,
                                 const struct key_rule* rule, uint64_t threshold, int bytes) {
  switch (rule->kind) {
    case KIND_UNSIGNED:
      return key_loop(keys, src, count, stride, rule, threshold, bytes, KIND_UNSIGNED);
    case KIND_SIGNED:
      return key_loop(keys, src, count, stride, rule, threshold, bytes, KIND_SIGNED);
    default:
      return key_loop(keys, src, count, stride, rule, threshold, bytes, KIND_FLOAT);
  }
}

/* Two copies, each vectorised once per width: full chunks (a constant count, no remainder loop)
 * and the rest; inlined into every caller, they made the build 5x slower. */
static __attribute__((noinline)) int make_chunk_keys(void* keys, const char* src, int64_t stride,
                                                     const struct key_rule* rule, uint64_t threshold, int bytes) {
  switch (bytes) {
    case 1:
      return keys_of(keys, src, CHUNK, stride, rule, threshold, 1);
    case 2:
      return keys_of(keys, src, CHUNK, stride, rule, threshold, 2);
    case 4:
      return keys_of(keys, src, CHUNK, stride, rule, threshold, 4);
    default:
      return keys_of(keys, src, CHUNK, stride, rule, threshold, 8);
  }
}
static __attribute__((noinline)) int make_part_keys(void* keys, const char* src, int64_t count, int64_t stride,
                                                    const struct key_rule* rule, uint64_t threshold, int bytes) {
  switch (bytes) {
    case 1:
      return keys_of(keys, src, count, stride, rule, threshold, 1);
    case 2:
      return keys_of(keys, src, count, stride, rule, threshold, 2);
    case 4:
      return keys_of(keys, src, count, stride, rule, threshold, 4);
    default:
      return keys_of(keys, src, count, stride, rule, threshold, 8);
  }
}

/* The keys of `count` elements from `src` (`stride` bytes apart) into keys[], by the full chunk's
 * copy where count is CHUNK; returns whether any key is above `threshold`. */
static ALWAYS_INLINE int make_keys(void* keys, const char* src, int64_t count, int64_t stride,
                                   const struct key_rule* rule, uint64_t threshold, int bytes) {
  return count == CHUNK ? make_chunk_keys(keys, src, stride, rule, threshold, bytes)
                        : make_part_keys(keys, src, count, stride, rule, threshold, bytes);
}

/* Which keys of a full chunk are above the threshold, as a bit mask (bit i: keys[i]), where the
 * machine compares unsigned vectors into mask registers (AVX-512BW): a chunk holding keys above
 * the threshold then costs one step per such key. Elsewhere the portable path below steps
 * through each 16-key part that holds one. */
#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#define HAVE_ABOVE_MASK 1
static inline uint64_t above_mask_8(const uint8_t* keys, uint8_t t) {
  return _mm512_cmpgt_epu8_mask(_mm512_loadu_si512(keys), _mm512_set1_epi8((char)t));
}
static inline uint64_t above_mask_16(const uint16_t* keys, uint16_t t) {
  __m512i tv = _mm512_set1_epi16((short)t);
  return (uint64_t)_mm512_cmpgt_epu16_mask(_mm512_loadu_si512(keys), tv) |
         (uint64_t)_mm512_cmpgt_epu16_mask(_mm512_loadu_si512(keys + 32), tv) << 32;
}
static inline uint64_t above_mask_32(const uint32_t* keys, uint32_t t) {
  __m512i tv = _mm512_set1_epi32((int)t);
  uint64_t m = 0;
  for (int j = 0; j < 4; j++) m |= (uint64_t)_mm512_cmpgt_epu32_mask(_mm512_loadu_si512(keys + 16 * j), tv) << (16 * j);
  return m;
}
static inline uint64_t above_mask_64(const uint64_t* keys, uint64_t t) {
  __m512i tv = _mm512_set1_epi64((long long)t);
  uint64_t m = 0;
  for (int j = 0; j < 8; j++) m |= (uint64_t)_mm512_cmpgt_epu64_mask(_mm512_loadu_si512(keys + 8 * j), tv) << (8 * j);
  return m;
}
#elif defined(__AVX2__)
/* AVX2 compares signed lanes only: both sides with the sign bit flipped compare as unsigned.
 * A compare's lanes become bits through movemask (bytes: one bit each; wider lanes through the
 * float movemasks, or, for 16 bits, two compares packed into bytes). */
#include <immintrin.h>
#define HAVE_ABOVE_MASK 1
static inline __m256i above_8x32(const void* keys, __m256i t, __m256i sign, int bits) {
  __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)keys), sign);
  switch (bits) {
    case 8:
      return _mm256_cmpgt_epi8(v, t);
    case 16:
      return _mm256_cmpgt_epi16(v, t);
    case 32:
      return _mm256_cmpgt_epi32(v, t);
    default:
      return _mm256_cmpgt_epi64(v, t);
  }
}
static inline uint64_t above_mask_8(const uint8_t* keys, uint8_t t) {
  __m256i sign = _mm256_set1_epi8((char)0x80), tv = _mm256_set1_epi8((char)(t ^ 0x80));
  return (uint64_t)(uint32_t)_mm256_movemask_epi8(above_8x32(keys, tv, sign, 8)) |
         (uint64_t)(uint32_t)_mm256_movemask_epi8(above_8x32(keys + 32, tv, sign, 8)) << 32;
}
static inline uint64_t above_mask_16(const uint16_t* keys, uint16_t t) {
  __m256i sign = _mm256_set1_epi16((short)0x8000), tv = _mm256_set1_epi16((short)(t ^ 0x8000));
  uint64_t m = 0;
  for (int j = 0; j < 2; j++) {
    /* Two vectors of 16 lanes packed into 32 bytes (quads: keys 0-7, 16-23, 8-15, 24-31),
     * the quads put in key order. */
    __m256i a = above_8x32(keys + 32 * j, tv, sign, 16), b = above_8x32(keys + 32 * j + 16, tv, sign, 16);
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi16(a, b), 0xD8);
    m |= (uint64_t)(uint32_t)_mm256_movemask_epi8(packed) << (32 * j);
  }
  return m;
}
static inline uint64_t above_mask_32(const uint32_t* keys, uint32_t t) {
  __m256i sign = _mm256_set1_epi32((int)0x80000000u), tv = _mm256_set1_epi32((int)(t ^ 0x80000000u));
  uint64_t m = 0;
  for (int j = 0; j < 8; j++)
    m |= (uint64_t)_mm256_movemask_ps(_mm256_castsi256_ps(above_8x32(keys + 8 * j, tv, sign, 32))) << (8 * j);
  return m;
}
static inline uint64_t above_mask_64(const uint64_t* keys, uint64_t t) {
  __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull),
          tv = _mm256_set1_epi64x((long long)(t ^ 0x8000000000000000ull));
  uint64_t m = 0;
  for (int j = 0; j < 16; j++)
    m |= (uint64_t)_mm256_movemask_pd(_mm256_castsi256_pd(above_8x32(keys + 4 * j, tv, sign, 64))) << (4 * j);
  return m;
}
#else
#define HAVE_ABOVE_MASK 0 /* the stubs below are never called */
static inline uint64_t above_mask_8(const uint8_t* keys, uint8_t t) {
  return (void)keys, (void)t, 0;
}
static inline uint64_t above_mask_16(const uint16_t* keys, uint16_t t) {
  return (void)keys, (void)t, 0;
}
static inline uint64_t above_mask_32(const uint32_t* keys, uint32_t t) {
  return (void)keys, (void)t, 0;
}
static inline uint64_t above_mask_64(const uint64_t* keys, uint64_t t) {
  return (void)keys, (void)t, 0;
}
#endif

/* above_mask_W for the width `bytes`. */
static ALWAYS_INLINE uint64_t above_mask(const void* keys, uint64_t t, int bytes) {
  switch (bytes) {
    case 1:
      return above_mask_8(keys, (uint8_t)t);
    case 2:
      return above_mask_16(keys, (uint16_t)t);
    case 4:
      return above_mask_32(keys, (uint32_t)t);
    default:
      return above_mask_64(keys, t);
  }
}

/* Whether any of keys[from..to) is above t (no branch inside: vectorised). */
static ALWAYS_INLINE int any_above(const void* keys, int64_t from, int64_t to, uint64_t t, int bytes) {
  struct hits hit = {0, 0, 0, 0};
  for (int64_t i = from; i < to; i++) note_above(&hit, key_at(keys, i, bytes), t, bytes);
  return any_hit(&hit);
}

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

/* METHOD_INSERT and METHOD_COLUMNS: each row's K best so far, kept sorted (keys descending,
 * ties in index order) in a key array `tk` and a column array `tc`. The row is read in index
 * order, so an element enters below every kept key at least its own: the lower index wins a
 * tie. Once K are kept, only a key above the K-th's enters, and the K-th drops out. */
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

/* METHOD_COLUMNS: up to LANES rows side by side ("lanes"), each step reading element i of every
 * one of them where it lies (for an outer axis of a C array, one contiguous run; for short rows,
 * one element per row) and putting it into each lane's sorted list at once, without a branch per
 * lane: slot p of every lane takes the element above it, the new one, or stays, by two
 * comparisons (replace_kept's rule, one vector of lanes at a time). A branch per lane and entry
 * costs a misprediction on shuffled data, some 60-70 ns a row of 8-16 elements on AVX2 where the
 * lanes take a few (65536x8 k=2: 1.2 ms where the sorted list of one row at a time took 4.2). The
 * lists are slot-major (lk[p * LANES + j]: lane j's p-th best), so a step runs on whole vectors; a
 * vector of lanes none of whose keys is above its K-th is passed over. Keys of up to 32 bits
 * travel as uint32_t with int32_t columns, 64-bit keys (and rows of 2**31 or more) as uint64_t
 * with int64_t columns: both sides of every vector of the same width. */
#define LANES CHUNK

/* A group of lanes as one vector of the compiler's vector extension (GCC and Clang), as wide as
 * the machine's own (a wider one is split into scalars for comparisons): the selects below are
 * bitwise, never a branch, whatever the vectoriser would make of a loop. Element-aligned, read
 * and written where the lists and keys lie. A comparison gives a signed mask of the same width. */
#if defined(__AVX512BW__)
#define VECTOR_BYTES 64
#elif defined(__AVX2__)
#define VECTOR_BYTES 32
#else
#define VECTOR_BYTES 16 /* SSE2, NEON, or scalars */
#endif
typedef uint32_t lanes_u32 __attribute__((vector_size(VECTOR_BYTES), aligned(4)));
typedef int32_t lanes_i32 __attribute__((vector_size(VECTOR_BYTES), aligned(4)));
typedef uint64_t lanes_u64 __attribute__((vector_size(VECTOR_BYTES), aligned(8)));
typedef int64_t lanes_i64 __attribute__((vector_size(VECTOR_BYTES), aligned(8)));
typedef uint8_t lanes_u8 __attribute__((vector_size(VECTOR_BYTES), aligned(1)));
typedef uint16_t lanes_u16 __attribute__((vector_size(VECTOR_BYTES), aligned(2)));

/* One step of a group of lanes for the element of column `col` (keys `x`): lists holding `held`
 * entries (held < k: slot `held` is empty and the element takes it or a higher one), slot p of
 * the group at lk + p * LANES. VK/VC: the group's key and column vector types. */
#define DEFINE_LANE_STEP(NAME, KT, VK, VC)                                                            \
  static ALWAYS_INLINE void NAME(KT* lk, VC* lc, VK x, VC col, int64_t held, int64_t k) {             \
    int64_t p = held < k ? held : k - 1;                                                              \
    VK* here = (VK*)(lk + p * LANES);                                                                 \
    if (held < k && p > 0) { /* the empty slot: the element enters it, or the one above moves down */ \
      VK above = *(VK*)(lk + (p - 1) * LANES);                                                        \
      VC moves = (VC)(x > above);                                                                     \
      *here = (VK)(((VC)above & moves) | ((VC)x & ~moves));                                           \
      VC* here_c = (VC*)((char*)lc + p * LANES * sizeof(KT));                                         \
      VC above_c = *(VC*)((char*)lc + (p - 1) * LANES * sizeof(KT));                                  \
      *here_c = (above_c & moves) | (col & ~moves);                                                   \
      p--;                                                                                            \
    }                                                                                                 \
    for (; p > 0; p--) {                                                                              \
      VK* at = (VK*)(lk + p * LANES);                                                                 \
      VK above = *(VK*)(lk + (p - 1) * LANES), old = *at;                                             \
      VC* at_c = (VC*)((char*)lc + p * LANES * sizeof(KT));                                           \
      VC above_c = *(VC*)((char*)lc + (p - 1) * LANES * sizeof(KT)), old_c = *at_c;                   \
      VC moves = (VC)(x > above), enters = (VC)(x > old) & ~moves, stays = ~(moves | enters);         \
      *at = (VK)(((VC)above & moves) | ((VC)x & enters) | ((VC)old & stays));                         \
      *at_c = (above_c & moves) | (col & enters) | (old_c & stays);                                   \
    }                                                                                                 \
    VK top = *(VK*)lk;                                                                                \
    VC tops = held == 0 ? (VC)(x == x) : (VC)(x > top);                                               \
    *(VK*)lk = (VK)(((VC)x & tops) | ((VC)top & ~tops));                                              \
    *lc = (col & tops) | (*lc & ~tops);                                                               \
  }
DEFINE_LANE_STEP(lane_step_32, uint32_t, lanes_u32, lanes_i32)
DEFINE_LANE_STEP(lane_step_64, uint64_t, lanes_u64, lanes_i64)

/* How many lanes of a mask vector are set (each all ones: LANE_BITS bits). */
#define DEFINE_LANE_HITS(NAME, VC, LANE_BITS)                                          \
  static ALWAYS_INLINE int NAME(VC mask) {                                             \
    uint64_t words[VECTOR_BYTES / 8];                                                  \
    int bits = 0;                                                                      \
    memcpy(words, &mask, sizeof words);                                                \
    for (int i = 0; i < VECTOR_BYTES / 8; i++) bits += __builtin_popcountll(words[i]); \
    return bits / LANE_BITS;                                                           \
  }
DEFINE_LANE_HITS(lane_hits_32, lanes_i32, 32)
DEFINE_LANE_HITS(lane_hits_64, lanes_i64, 64)

/* One lane's entry alone (lane j of a full list takes `key`, above its K-th), for a vector of
 * lanes where few enter: on long rows most steps have one or two entries, and a vector step costs
 * K slots for every lane. */
#define DEFINE_LANE_INSERT(NAME, KT, CT)                                                 \
  static ALWAYS_INLINE void NAME(KT* lk, CT* lc, int64_t j, KT key, CT col, int64_t k) { \
    int64_t p = k - 1;                                                                   \
    for (; p > 0 && key > lk[(p - 1) * LANES + j]; p--) {                                \
      lk[p * LANES + j] = lk[(p - 1) * LANES + j];                                       \
      lc[p * LANES + j] = lc[(p - 1) * LANES + j];                                       \
    }                                                                                    \
    lk[p * LANES + j] = key;                                                             \
    lc[p * LANES + j] = col;                                                             \
  }
DEFINE_LANE_INSERT(lane_insert_32, uint32_t, int32_t)
DEFINE_LANE_INSERT(lane_insert_64, uint64_t, int64_t)

/* A vector of lanes with at most 3/8 of them entering takes lane_insert from this K on (below it,
 * the vector step costs less than the branches: C alone, AVX2, float32, 512 rows of 4096 side by
 * side, K=64: 14.9 ms against 27.9 by vector steps alone and 17.0 by the branch-per-lane lists
 * before; K=16 and short rows: 1.0-1.2x slower by lane_insert, at any share). */
#define LANE_ALONE_MIN_K 32
#define LANE_ALONE(hits, lanes) ((hits) * 8 <= (lanes) * 3)

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
    for (int64_t g = 0; g < cols; g += VECTOR_BYTES / (wide ? 8 : 4)) {
      if (wide) {
        uint64_t* keys = (uint64_t*)lk + g;
        lanes_u64 x = *(const lanes_u64*)(lane_keys + g);
        if (held == k) {
          lanes_i64 enter = (lanes_i64)(x > *(const lanes_u64*)(keys + (k - 1) * LANES));
          int hits = lane_hits_64(enter);
          if (hits == 0) continue;
          if (k >= LANE_ALONE_MIN_K && LANE_ALONE(hits, VECTOR_BYTES / 8)) {
            for (int j = 0; j < VECTOR_BYTES / 8; j++)
              if (enter[j]) lane_insert_64(keys, (int64_t*)lc + g, j, x[j], i, k);
            continue;
          }
        }
        lane_step_64(keys, (lanes_i64*)((int64_t*)lc + g), x, (lanes_i64){0} + i, held, k);
      } else {
        uint32_t* keys = (uint32_t*)lk + g;
        lanes_u32 x = *(const lanes_u32*)(key32 + g);
        if (held == k) {
          lanes_i32 enter = (lanes_i32)(x > *(const lanes_u32*)(keys + (k - 1) * LANES));
          int hits = lane_hits_32(enter);
          if (hits == 0) continue;
          if (k >= LANE_ALONE_MIN_K && LANE_ALONE(hits, VECTOR_BYTES / 4)) {
            for (int j = 0; j < VECTOR_BYTES / 4; j++)
              if (enter[j]) lane_insert_32(keys, (int32_t*)lc + g, j, x[j], (int32_t)i, k);
            continue;
          }
        }
        lane_step_32(keys, (lanes_i32*)((int32_t*)lc + g), x, (lanes_i32){0} + (int32_t)i, held, k);
      }
    }
  }
  for (int64_t j = 0; j < cols; j++) {
    int64_t* row_out = out + j * k;
    for (int64_t p = 0; p < k; p++)
      row_out[p] = wide ? ((const int64_t*)lc)[p * LANES + j] : ((const int32_t*)lc)[p * LANES + j];
    if (r->order == ORDER_INDEX) sort_columns(row_out, k);
  }
}

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
#define DEFINE_SLICE_MAXIMA(NAME, T, V)                                          \
  static ALWAYS_INLINE void NAME(const T* keys, T* most, int64_t n, int64_t k) { \
    enum { L = VECTOR_BYTES / sizeof(T) };                                       \
    for (int64_t j0 = 0; j0 < k; j0 += L) {                                      \
      V acc, x;                                                                  \
      memcpy(&acc, keys + j0, sizeof acc);                                       \
      for (int64_t s = k; s + k <= n; s += k) {                                  \
        memcpy(&x, keys + s + j0, sizeof x);                                     \
        V above = (V)(x > acc);                                                  \
        acc = (x & above) | (acc & ~above);                                      \
      }                                                                          \
      T lanes[L];                                                                \
      memcpy(lanes, &acc, sizeof lanes);                                         \
      for (int64_t t = 0; t < L && j0 + t < k; t++) most[j0 + t] = lanes[t];     \
    }                                                                            \
  }
DEFINE_SLICE_MAXIMA(slice_maxima_8, uint8_t, lanes_u8)
DEFINE_SLICE_MAXIMA(slice_maxima_16, uint16_t, lanes_u16)
DEFINE_SLICE_MAXIMA(slice_maxima_32, uint32_t, lanes_u32)

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
  if (bytes == 1)
    slice_maxima_8(keys, most, n, k);
  else if (bytes == 2)
    slice_maxima_16(keys, most, n, k);
  else
    slice_maxima_32(keys, most, n, k);
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

/* Each method's row function for the request's width: one function holding a copy per width
 * (each with constant `bytes`), so that the copies are compiled once and shared by callers. */
static __attribute__((noinline)) void insert_row_any(const struct cutopk_rows* r, const struct key_rule* rule,
                                                     const char* row, void* tk, int64_t* tc, int64_t* out) {
  switch (r->width) {
    case 1:
      insert_row(r, rule, row, tk, tc, out, 1);
      break;
    case 2:
      insert_row(r, rule, row, tk, tc, out, 2);
      break;
    case 4:
      insert_row(r, rule, row, tk, tc, out, 4);
      break;
    default:
      insert_row(r, rule, row, tk, tc, out, 8);
  }
}
static __attribute__((noinline)) void insert_short_rows_any(const struct cutopk_rows* r, const struct key_rule* rule,
                                                            void* tk, int64_t* tc) {
  switch (r->width) {
    case 1:
      insert_short_rows(r, rule, tk, tc, 1);
      break;
    case 2:
      insert_short_rows(r, rule, tk, tc, 2);
      break;
    case 4:
      insert_short_rows(r, rule, tk, tc, 4);
      break;
    default:
      insert_short_rows(r, rule, tk, tc, 8);
  }
}
static __attribute__((noinline)) void select_lanes_any(const struct cutopk_rows* r, const struct key_rule* rule,
                                                       const char* first, int64_t cols, void* lk, void* lc, void* block,
                                                       int64_t* out, int wide) {
  switch (r->width * 2 + wide) {
    case 2:
      select_lanes(r, rule, first, cols, lk, lc, block, out, 1, 0);
      break;
    case 4:
      select_lanes(r, rule, first, cols, lk, lc, block, out, 2, 0);
      break;
    case 8:
      select_lanes(r, rule, first, cols, lk, lc, block, out, 4, 0);
      break;
    case 3:
      select_lanes(r, rule, first, cols, lk, lc, block, out, 1, 1);
      break;
    case 5:
      select_lanes(r, rule, first, cols, lk, lc, block, out, 2, 1);
      break;
    case 9:
      select_lanes(r, rule, first, cols, lk, lc, block, out, 4, 1);
      break;
    default:
      select_lanes(r, rule, first, cols, lk, lc, block, out, 8, 1);
  }
}
/* Widths 1, 2 and 4 only (the request checks). */
static __attribute__((noinline)) int rank_row_any(const struct cutopk_rows* r, const struct key_rule* rule,
                                                  const char* row, void* keys, void* most, uint64_t* cand, int64_t room,
                                                  int64_t* out) {
  switch (r->width) {
    case 1:
      return rank_row(r, rule, row, keys, most, cand, room, out, 1);
    case 2:
      return rank_row(r, rule, row, keys, most, cand, room, out, 2);
    default:
      return rank_row(r, rule, row, keys, most, cand, room, out, 4);
  }
}
/* 32-bit halves hold a column while n fits in 32 bits; 64-bit keys need the wide composite. */
static __attribute__((noinline)) void select_row_any(const struct cutopk_rows* r, const struct key_rule* rule,
                                                     const char* row, void* buf, void* tmp, int64_t capacity,
                                                     int64_t* out, int wide) {
  switch (r->width * 2 + wide) {
    case 2:
      select_row(r, rule, row, buf, tmp, capacity, out, 1, 0);
      break;
    case 4:
      select_row(r, rule, row, buf, tmp, capacity, out, 2, 0);
      break;
    case 8:
      select_row(r, rule, row, buf, tmp, capacity, out, 4, 0);
      break;
    case 3:
      select_row(r, rule, row, buf, tmp, capacity, out, 1, 1);
      break;
    case 5:
      select_row(r, rule, row, buf, tmp, capacity, out, 2, 1);
      break;
    case 9:
      select_row(r, rule, row, buf, tmp, capacity, out, 4, 1);
      break;
    default:
      select_row(r, rule, row, buf, tmp, capacity, out, 8, 1);
  }
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
  for (int64_t i = 0; i < r->rows; i++) {
    const char* row = r->data + i * r->row_stride;
    int64_t* out = r->out + i * k;
    if (rank_row_any(r, rule, row, keys, most, cand, room, won))
      for (int64_t p = 0; p < k; p++) out[p] = won[p]; /* K is small: no call */
    else
      insert_row_any(r, rule, row, tk, tc, out);
  }
  free(buf);
  return STATUS_OK;
}

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
 * (int16, CPU time beyond index order's, loaded 2-core EPYC: 16384x128 K = 8, 0.3 us a row on
 * the passes, 0.07 us sorted; 2048x1024 K = 32 and 64, 0.5 and 0.8 us on the passes, 0.5 and
 * 1.2 us sorted). */
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

EXPORT int64_t cutopk_compiled_abi(void) {
  return ((int64_t)CUTOPK_COMPILED_ABI << 32) | sizeof(struct cutopk_rows);
}

/* The buffer's length for rows of n and a given k: K kept, room for at least max(K, MIN_SLACK)
 * more before a refill, and for one chunk written whole (its last slot may be written, not kept). */
static int64_t capacity_for(int64_t n, int64_t k) {
  int64_t slack = k > MIN_SLACK ? k : MIN_SLACK;
  return (n < k + slack ? n : k + slack) + CHUNK;
}

/* METHOD_INSERT (one row at a time) and METHOD_COLUMNS (LANES rows side by side). */
static int select_kept(const struct cutopk_rows* r, const struct key_rule* rule) {
  const int64_t k = r->k;
  if (r->method == METHOD_COLUMNS) {
    if (k > (INT64_MAX / 16) / LANES) return STATUS_NO_MEMORY;
    /* The lanes' lists: k x LANES keys and as many columns, of up to 8 bytes each. */
    const int wide = r->width == 8 || r->n > INT32_MAX;
    /* ... and a block's keys (select_lanes). */
    char* buf = malloc((size_t)(LANES * k * 16 + LANES * LANES_PACKED_N * 4));
    if (buf == NULL) return STATUS_NO_MEMORY;
    void* lk = buf;
    void* lc = buf + LANES * k * 8;
    void* block = buf + LANES * k * 16;
    for (int64_t i = 0; i < r->rows; i += LANES) {
      int64_t cols = r->rows - i < LANES ? r->rows - i : LANES;
      select_lanes_any(r, rule, r->data + i * r->row_stride, cols, lk, lc, block, r->out + i * k, wide);
    }
    free(buf);
    return STATUS_OK;
  }
  if (k > INT64_MAX / 16) return STATUS_NO_MEMORY;
  /* tk: k keys of up to 8 bytes; tc: k columns. */
  char* buf = malloc((size_t)(k * 16));
  if (buf == NULL) return STATUS_NO_MEMORY;
  int64_t* tc = (int64_t*)buf;
  void* tk = buf + k * 8;
  if (r->n <= CHUNK)
    insert_short_rows_any(r, rule, tk, tc);
  else
    for (int64_t i = 0; i < r->rows; i++) insert_row_any(r, rule, r->data + i * r->row_stride, tk, tc, r->out + i * k);
  free(buf);
  return STATUS_OK;
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
static int select_indices(const struct cutopk_rows* r);
static ALWAYS_INLINE void copy_values(const struct cutopk_rows* r, int bytes) {
  const int64_t k = r->k;
  for (int64_t i = 0; i < r->rows; i++) {
    const char* row = r->data + i * r->row_stride;
    const int64_t* cols = r->out + i * k;
    char* to = r->values + i * k * bytes;
    for (int64_t p = 0; p < k; p++) memcpy(to + p * bytes, row + cols[p] * r->col_stride, (size_t)bytes);
  }
}
static __attribute__((noinline)) void copy_values_any(const struct cutopk_rows* r) {
  switch (r->width) {
    case 1:
      copy_values(r, 1);
      break;
    case 2:
      copy_values(r, 2);
      break;
    case 4:
      copy_values(r, 4);
      break;
    default:
      copy_values(r, 8);
  }
}

/* The top K of every row of r, on the calling thread: r->out gets each row's K columns in the order
 * asked for, r->values (where given) their values (r->threads is not read: the pool below splits
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
    copy_values_any(&sub);
  }
  return STATUS_OK;
}

/* select_block's selection: r->out alone (each method's call). */
static int select_indices(const struct cutopk_rows* r) {
  struct key_rule rule = {r->kind, r->largest ? 0 : ~(uint64_t)0, r->nan_first ? ~(uint64_t)0 : 0, r->inf_bits};
  if (r->method == METHOD_COUNT) return select_counted(r, &rule);
  if (r->method == METHOD_RANK) return select_ranked(r, &rule);
  if (r->method != METHOD_THRESHOLD) return select_kept(r, &rule);
  /* 32-bit halves hold a column while n fits in 32 bits; 64-bit keys need the wide composite. */
  int wide = r->width == 8 || r->n > (int64_t)UINT32_MAX;
  int64_t capacity = capacity_for(r->n, r->k);
  /* The composites, and as many again for the partitions' out-of-place pass. */
  size_t bytes = (size_t)capacity * (wide ? sizeof(u128) : sizeof(uint64_t));
  char* buf = malloc(2 * bytes);
  if (buf == NULL) return STATUS_NO_MEMORY;
  void* composites = buf;
  void* tmp = buf + bytes;
  for (int64_t i = 0; i < r->rows; i++) {
    const char* row = r->data + i * r->row_stride;
    int64_t* out = r->out + i * r->k;
    select_row_any(r, &rule, row, composites, tmp, capacity, out, wide);
  }
  free(buf);
  return STATUS_OK;
}

/* ---- Threads (issue 42) ----------------------------------------------------------------------
 * One call splits its rows between r->threads threads itself: the calling thread and workers of a
 * pool kept alive between calls, as OpenMP runtimes do. A Python pool handed each block over in
 * some 150-200 us (a queue, a GIL turn, an event) and blocks of a few hundred us could not pay
 * for that; here a job is published by one atomic store, and a worker that finished its last
 * job less than spin_ns ago sees it within a few hundred ns (it spins on the job word, then
 * sleeps on a condition variable, where waking it costs a futex call and the scheduler's delay).
 *
 * A job: the request cut into `total` pieces of contiguous rows (CHUNK-row groups for
 * METHOD_COLUMNS), PIECES_PER_THREAD per thread, claimed one at a time by whichever thread is
 * free (ties and NaNs make rows cost unequal time, and a worker the scheduler wakes late finds
 * the caller has taken its pieces instead of being waited for). Every piece is select_block on
 * its rows: its own scratch, its own rows of out; the answer is the same for every thread count.
 * The job word `claim` holds the job's generation (high 32 bits), its piece count and the next
 * piece (16 bits each); a claim is a compare-and-swap on it, so a worker that wakes for a job
 * already over can claim nothing of the next one by mistake: its generation differs.
 *
 * Safety. One caller at a time uses the pool (`call`, taken with trylock): a second thread that
 * calls meanwhile runs its rows alone, never waits. A child forked while the pool exists has no
 * workers (only the forking thread survives a fork): pool_after_fork resets the pool there and
 * the child's first split starts workers of its own. Workers block every signal (the process's
 * handlers run on its own threads). The library's destructor (process exit, dlclose) stops and
 * joins the workers, which hold no lock while they wait. A worker that cannot be started leaves
 * its share to the others: the caller alone takes every piece there is.
 *
 * Placement (Linux): a worker that takes part in a job keeps off the CPU its caller ran on when
 * it published the job (its own affinity: the process's CPUs but that one; set again only when
 * the caller's CPU changes). On a virtual machine whose idle cores sleep, the scheduler may wake
 * a worker on the caller's own core, where the two take turns instead of running side by side
 * (the backend's Python pool met it too: threads.py's _keep_off). */
#define POOL_MAX 255
#define PIECES_PER_THREAD 4
#define PIECES_MAX 0xffff

struct pool {
  pthread_mutex_t lock; /* guards sleepers, caller_waits, stopping, and the waits below */
  pthread_cond_t wake;  /* workers sleep here until a new job (or stopping) */
  pthread_cond_t done;  /* the caller sleeps here until the last piece is done */
  pthread_mutex_t call; /* held by the one caller that uses the pool */
  _Atomic uint64_t claim;
  _Atomic int64_t finished; /* pieces of the current job done */
  _Atomic int threads;      /* the current job's threads: workers 1 .. threads - 1 take part */
  _Atomic int status;       /* the first piece's failure (STATUS_*), else STATUS_OK */
  _Atomic int stopping;
  _Atomic int caller_cpu; /* the CPU the current job's caller ran on, or -1 */
  int sleepers, caller_waits, workers;
  pid_t pid; /* the process that started the workers */
  struct cutopk_rows job;
  int64_t unit, per; /* rows per unit (CHUNK for columns), units per piece */
  pthread_t ids[POOL_MAX];
};

static struct pool pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                           .wake = PTHREAD_COND_INITIALIZER,
                           .done = PTHREAD_COND_INITIALIZER,
                           .call = PTHREAD_MUTEX_INITIALIZER};
/* How long a worker (and the waiting caller) spins before sleeping: a worker idle for longer
 * sleeps and costs a wake-up (tens of us on a virtual machine) at the next job. */
static _Atomic int64_t spin_ns = 200000;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* The child of a fork: the workers did not survive it, and the forking parent's locks may have
 * been held by them or by a caller. A fresh pool, its workers started by the first split. */
static void pool_after_fork(void) {
  pthread_mutex_t fresh_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
  pool.lock = fresh_lock;
  pool.call = fresh_lock;
  pool.wake = fresh_cond;
  pool.done = fresh_cond;
  pool.sleepers = pool.caller_waits = pool.workers = 0;
  atomic_store(&pool.stopping, 0);
}

static void register_fork_handler(void) {
  pthread_atfork(NULL, NULL, pool_after_fork);
}

/* Piece `piece` of the current job: select_block on its rows. */
static void run_piece(int64_t piece) {
  struct cutopk_rows sub = pool.job;
  const int64_t first = piece * pool.per * pool.unit;
  const int64_t rows = pool.job.rows - first < pool.per * pool.unit ? pool.job.rows - first : pool.per * pool.unit;
  sub.data += first * sub.row_stride;
  sub.out += first * sub.k;
  if (sub.values != NULL) sub.values += first * sub.k * sub.width;
  sub.rows = rows;
  int status = select_block(&sub);
  int ok = STATUS_OK;
  if (status != STATUS_OK) atomic_compare_exchange_strong(&pool.status, &ok, status);
}

/* Claim and run pieces of job `gen` until none is left (or the job is another). */
static void take_pieces(uint32_t gen) {
  uint64_t c = atomic_load_explicit(&pool.claim, memory_order_acquire);
  for (;;) {
    const uint64_t next = c & 0xffff, total = (c >> 16) & 0xffff;
    if ((uint32_t)(c >> 32) != gen || next >= total) return;
    if (!atomic_compare_exchange_weak_explicit(&pool.claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire))
      continue; /* c holds the word as it is now */
    run_piece((int64_t)next);
    if (atomic_fetch_add_explicit(&pool.finished, 1, memory_order_acq_rel) + 1 == (int64_t)total) {
      pthread_mutex_lock(&pool.lock); /* the last piece: wake the caller if it sleeps */
      if (pool.caller_waits) pthread_cond_signal(&pool.done);
      pthread_mutex_unlock(&pool.lock);
    }
    c = atomic_load_explicit(&pool.claim, memory_order_acquire);
  }
}

/* A worker's wait for a job after `seen`: spin on the job word for spin_ns, then sleep. Returns
 * the new job's generation; stopping: returns `seen`. */
static uint32_t wait_for_job(uint32_t seen) {
  const int64_t spin = atomic_load_explicit(&spin_ns, memory_order_relaxed);
  int64_t deadline = 0;
  for (uint32_t i = 0;; i++) {
    uint32_t gen = (uint32_t)(atomic_load_explicit(&pool.claim, memory_order_acquire) >> 32);
    if (gen != seen) return gen;
    if (atomic_load_explicit(&pool.stopping, memory_order_relaxed)) return seen;
    if ((i & 63) == 0) { /* the clock read every 64 turns: some 20 ns each */
      int64_t t = now_ns();
      if (deadline == 0) deadline = t + spin;
      if (t >= deadline) break;
    }
    cpu_relax();
  }
  pthread_mutex_lock(&pool.lock);
  uint32_t gen;
  while ((gen = (uint32_t)(atomic_load(&pool.claim) >> 32)) == seen && !atomic_load(&pool.stopping)) {
    pool.sleepers++;
    pthread_cond_wait(&pool.wake, &pool.lock);
    pool.sleepers--;
  }
  pthread_mutex_unlock(&pool.lock);
  return gen;
}

#ifdef __linux__
static cpu_set_t process_cpus; /* the CPUs the first splitting caller could run on */
static int process_cpu_count;

/* This worker kept off `cpu` (see "Placement"); `off`: the CPU it keeps off now. */
static void keep_off(int cpu, int* off) {
  if (cpu == *off || cpu < 0 || cpu >= CPU_SETSIZE || process_cpu_count < 2 || !CPU_ISSET(cpu, &process_cpus)) return;
  cpu_set_t others = process_cpus;
  CPU_CLR(cpu, &others);
  if (pthread_setaffinity_np(pthread_self(), sizeof others, &others) == 0) *off = cpu;
}
#endif

static void* worker(void* arg) {
  const int id = (int)(intptr_t)arg & 0xff; /* 1 .. POOL_MAX */
  uint32_t seen = (uint32_t)((uintptr_t)arg >> 8);
  int off = -1;
  for (;;) {
    uint32_t gen = wait_for_job(seen);
    if (gen == seen) return NULL; /* stopping */
    seen = gen;
    if (id >= atomic_load_explicit(&pool.threads, memory_order_relaxed)) continue;
#ifdef __linux__
    keep_off(atomic_load_explicit(&pool.caller_cpu, memory_order_relaxed), &off);
#else
    (void)off;
#endif
    take_pieces(gen);
  }
}

/* Workers up to `want` (the caller holds `call`): those that cannot be started are done without. */
static void pool_grow(int want, uint32_t gen) {
  if (want > POOL_MAX) want = POOL_MAX;
  if (pool.workers >= want) return;
  pthread_once(&fork_handler_once, register_fork_handler);
#ifdef __linux__
  if (process_cpu_count == 0 && sched_getaffinity(0, sizeof process_cpus, &process_cpus) == 0)
    process_cpu_count = CPU_COUNT(&process_cpus);
#endif
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before); /* the workers inherit the mask */
  while (pool.workers < want) {
    uintptr_t arg = (uintptr_t)gen << 8 | (uintptr_t)(pool.workers + 1);
    if (pthread_create(&pool.ids[pool.workers], NULL, worker, (void*)arg) != 0) break;
    pool.workers++;
  }
  pthread_sigmask(SIG_SETMASK, &before, NULL);
  pool.pid = getpid();
}

/* The caller's wait for the last piece (its own share done): spin, then sleep. */
static void wait_finished(int64_t total) {
  const int64_t spin = atomic_load_explicit(&spin_ns, memory_order_relaxed);
  int64_t deadline = 0;
  for (uint32_t i = 0; atomic_load_explicit(&pool.finished, memory_order_acquire) != total; i++) {
    if ((i & 63) == 0) {
      int64_t t = now_ns();
      if (deadline == 0) deadline = t + spin;
      if (t >= deadline) break;
    }
    cpu_relax();
  }
  pthread_mutex_lock(&pool.lock);
  while (atomic_load_explicit(&pool.finished, memory_order_acquire) != total) {
    pool.caller_waits = 1;
    pthread_cond_wait(&pool.done, &pool.lock);
  }
  pool.caller_waits = 0;
  pthread_mutex_unlock(&pool.lock);
}

/* The rows of r on r->threads threads (the caller holds `call`). */
static int select_split(const struct cutopk_rows* r, int threads, int64_t unit, int64_t units) {
  int64_t total = (int64_t)threads * PIECES_PER_THREAD;
  if (total > units) total = units;
  if (total > PIECES_MAX) total = PIECES_MAX;
  const int64_t per = (units + total - 1) / total;
  total = (units + per - 1) / per;
  uint32_t gen = (uint32_t)(atomic_load(&pool.claim) >> 32) + 1;
  pool_grow(threads - 1, gen - 1);
  pool.job = *r;
  pool.unit = unit;
  pool.per = per;
  atomic_store_explicit(&pool.threads, threads, memory_order_relaxed);
#ifdef __linux__
  atomic_store_explicit(&pool.caller_cpu, sched_getcpu(), memory_order_relaxed);
#endif
  atomic_store_explicit(&pool.finished, 0, memory_order_relaxed);
  atomic_store_explicit(&pool.status, STATUS_OK, memory_order_relaxed);
  pthread_mutex_lock(&pool.lock); /* published under the lock: a worker about to sleep sees it */
  atomic_store_explicit(&pool.claim, (uint64_t)gen << 32 | (uint64_t)total << 16, memory_order_release);
  if (pool.sleepers) pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);
  take_pieces(gen);
  wait_finished(total);
  return atomic_load(&pool.status);
}

/* The top K of every row: r->out gets each row's K columns in the order asked for (r->values, where
 * given, their values); the rows are shared between r->threads threads (see "Threads" above). */
EXPORT int cutopk_compiled_select(const struct cutopk_rows* r) {
  if (!request_ok(r)) return STATUS_BAD_REQUEST;
  const int64_t unit = r->method == METHOD_COLUMNS ? CHUNK : 1, units = (r->rows + unit - 1) / unit;
  int threads = r->threads < POOL_MAX + 1 ? r->threads : POOL_MAX + 1;
  if (threads > units) threads = (int)units;
  if (threads <= 1 || pthread_mutex_trylock(&pool.call) != 0) return select_block(r);
  int status = select_split(r, threads, unit, units);
  pthread_mutex_unlock(&pool.call);
  return status;
}

/* Tests: the spin before sleeping, in ns (0: sleep at once; the sleeping paths run every time). */
EXPORT void cutopk_compiled_set_spin(int64_t ns) {
  atomic_store(&spin_ns, ns < 0 ? 0 : ns);
}

/* Tests: the pool's workers in this process. */
EXPORT int cutopk_compiled_workers(void) {
  return pool.pid == getpid() ? pool.workers : 0;
}

/* Process exit or dlclose: the workers stopped and joined (their code is about to go). */
__attribute__((destructor)) static void pool_stop(void) {
  if (pool.workers == 0 || pool.pid != getpid()) return;
  pthread_mutex_lock(&pool.lock);
  atomic_store(&pool.stopping, 1);
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);
  for (int i = 0; i < pool.workers; i++) pthread_join(pool.ids[i], NULL);
  pool.workers = 0;
}
