/* The lanes (shared by METHOD_COLUMNS, lanes.c, and METHOD_RANK, rank.c): a group of keys, or of
 * columns, as one vector of the compiler's vector extension, and the width-generic operations on
 * it. */
#ifndef CUTOPK_COMPILED_LANES_H
#define CUTOPK_COMPILED_LANES_H

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
/* Lanes of any width as one vector of bits (element-aligned: any key or list address): the
 * selects are bitwise, the same for every lane width; only a comparison needs the width
 * (lanes_above), and gives a mask of all ones in each lane where it holds. */
typedef int64_t lanes_bits __attribute__((vector_size(VECTOR_BYTES), aligned(1)));

/* x > y, lane by lane, for unsigned lanes of `bytes` bytes. */
static ALWAYS_INLINE lanes_bits lanes_above(lanes_bits x, lanes_bits y, int bytes) {
  switch (bytes) {
    case 1:
      return (lanes_bits)((lanes_u8)x > (lanes_u8)y);
    case 2:
      return (lanes_bits)((lanes_u16)x > (lanes_u16)y);
    case 4:
      return (lanes_bits)((lanes_u32)x > (lanes_u32)y);
    default:
      return (lanes_bits)((lanes_u64)x > (lanes_u64)y);
  }
}

/* m ? a : b, lane by lane (m: a mask of lanes_above of the same `bytes`), computed on the lanes'
 * own type: the compiler then sees a comparison and a select of one width, a masked blend (the
 * same bits on 64-bit lanes cost a mask vector and two more operations per select). */
static ALWAYS_INLINE lanes_bits lanes_pick(lanes_bits m, lanes_bits a, lanes_bits b, int bytes) {
  switch (bytes) {
    case 1:
      return (lanes_bits)(((lanes_u8)a & (lanes_u8)m) | ((lanes_u8)b & ~(lanes_u8)m));
    case 2:
      return (lanes_bits)(((lanes_u16)a & (lanes_u16)m) | ((lanes_u16)b & ~(lanes_u16)m));
    case 4:
      return (lanes_bits)(((lanes_u32)a & (lanes_u32)m) | ((lanes_u32)b & ~(lanes_u32)m));
    default:
      return (lanes_bits)(((lanes_u64)a & (lanes_u64)m) | ((lanes_u64)b & ~(lanes_u64)m));
  }
}

/* Lane j of v, lanes of 4 or 8 bytes (a subscript of the lanes' own type: the vector stays in
 * registers where its address, taken, would keep it in memory). */
static ALWAYS_INLINE uint64_t lane_at(lanes_bits v, int j, int bytes) {
  return bytes == 8 ? (uint64_t)((lanes_u64)v)[j] : ((lanes_u32)v)[j];
}

/* Every lane of `bytes` bytes holding `v`. */
static ALWAYS_INLINE lanes_bits lanes_all(int64_t v, int bytes) {
  return bytes == 8 ? (lanes_bits)((lanes_i64){0} + v) : (lanes_bits)((lanes_i32){0} + (int32_t)v);
}

/* How many lanes of a mask (each all ones or zero: 8 * bytes bits) are set. */
static ALWAYS_INLINE int lane_hits(lanes_bits mask, int bytes) {
  uint64_t words[VECTOR_BYTES / 8];
  int bits = 0;
  memcpy(words, &mask, sizeof words);
  for (int i = 0; i < VECTOR_BYTES / 8; i++) bits += __builtin_popcountll(words[i]);
  return bits / (8 * bytes);
}

#endif /* CUTOPK_COMPILED_LANES_H */
