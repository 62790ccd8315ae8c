/* The keys (shared by every method of compiled.c): each element's preference key, the twin of
 * cutopk/_request/keys.py and kernels/key_traits.cuh (an unsigned integer of the element's width
 * whose order is the preference order, -0.0 tied with +0.0, NaN at one end by the NaN rule), the
 * accessors of key arrays of any width, the vectorised loops that make a chunk's keys and tell
 * whether any is above a threshold, and the mask of those above it (AVX-512BW, AVX2). */
#ifndef CUTOPK_COMPILED_KEYS_H
#define CUTOPK_COMPILED_KEYS_H

/* Elements per chunk: the keys of a chunk are made and tested in vectorised loops. */
#define CHUNK 64

/* The key transform's loop invariants (per call). */
struct key_rule {
  int kind;
  uint64_t flip;     /* all ones for smallest (the key inverted), else 0 */
  uint64_t nan_key;  /* the key every NaN gets: all ones where NaN comes first, else 0 */
  uint64_t inf_bits; /* +inf's bits */
};

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

/* keys_of in the copy for `bytes`. */
static ALWAYS_INLINE int keys_by_width(void* keys, const char* src, int64_t count, int64_t stride,
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

/* Two copies, each vectorised once per width: full chunks (a constant count, no remainder loop)
 * and the rest; inlined into every caller, they made the build 5x slower. */
static __attribute__((noinline)) int make_chunk_keys(void* keys, const char* src, int64_t stride,
                                                     const struct key_rule* rule, uint64_t threshold, int bytes) {
  return keys_by_width(keys, src, CHUNK, stride, rule, threshold, bytes);
}
static __attribute__((noinline)) int make_part_keys(void* keys, const char* src, int64_t count, int64_t stride,
                                                    const struct key_rule* rule, uint64_t threshold, int bytes) {
  return keys_by_width(keys, src, count, stride, rule, threshold, bytes);
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

#endif /* CUTOPK_COMPILED_KEYS_H */
