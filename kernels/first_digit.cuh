// The first digit of block_row's select (kernels/block_row.cu): 12 bits of a key (8 for 8-bit
// keys) that split real data into many bins and that are monotone in the key, so that the bin
// holding the K-th key is a valid bucket: every key of a higher bin is larger than every key of
// bin t, every key of a lower bin smaller. For 32- and 64-bit floats it is NOT a prefix of the
// key (later digits are counted over the full key: block_row refines its candidates from the
// key's top bit down).
//
// Floats (32/64-bit keys): the top bit of the key, then 11 bits of a float16-style view of the
// rest. With x the key's low 31 (63) bits, E its exponent field (the 8 (11) bits below the top
// bit), m its top 6 mantissa bits and lo = 112 (1008):
//   g(x) = 0 if E < lo; 2047 if E > lo + 31; else ((E - lo) << 6) | m
//   digit = (top bit << 11) | g(x)
// SGLang's first digit (12 bits of the key rounded to float16: sign, 5 exponent, 6 mantissa
// bits), so uniform [0, 1) values spread over 64 bins per binade instead of resident's 8.
// Monotone (key1 <= key2 implies digit(key1) <= digit(key2)):
//   * different top bits: the key with the top bit set is the larger one, and its digit is
//     >= 2048 > 2047 >= the other's;
//   * the same top bit: x1 <= x2. Since E and m are x's highest bits, x1 <= x2 implies
//     (E1, m1) <= (E2, m2) lexicographically, i.e. p1 = (E1 << 6) | m1 <= p2 = (E2 << 6) | m2.
//     g is p - (lo << 6) clamped to [0, 2047]: inside, ((E - lo) << 6) | m = p - (lo << 6) since
//     0 <= E - lo <= 31; E < lo means p < lo << 6 (clamped to 0), E > lo + 31 means
//     p > ((lo + 31) << 6) | 63 (clamped to 2047 = ((lo + 31) << 6 | 63) - (lo << 6)). Clamping
//     a non-decreasing function keeps it non-decreasing.
// Symmetric in the inverted half (negative numbers in mode "largest", positives in "smallest":
// the key's low bits are the element's inverted, so E becomes 255 - E (2047 - E)): 112 + 143 =
// 255 (1008 + 1039 = 2047), so the same exponents [2^-15, 2^17) get fine bins on both sides.
// NaN keys (0 and all-ones) land in bins 0 and 4095, which they may share with extreme numbers
// (tiny magnitudes, huge ones, infinities): a bin is a bucket, the full key's refinement tells
// them apart.
//
// 16-bit keys (float16, bfloat16, int16, uint16): the key's top 12 bits; 8-bit keys: the whole
// key. These are prefixes of the key, monotone by the same argument.
// 32- and 64-bit integers (RangedDigit): a digit over the row's own range, RowDigit below:
// clamp((key - base) >> shift, 0, 4095) with base and shift from the keys of the row's first copied
// chunk (their minimum, and the shift that brings their range under 2^12). Monotone for any base
// and shift: a key below base gets 0, no more than any other key's; for keys at or above base,
// key - base, the shift and the clamp at 4095 are each non-decreasing. Where no chunk gives a
// range (strided rows, rows the streaming loader reads), base 0 and shift width - 12: the key's
// top 12 bits (resident's digit). Integer rows of a narrow range (token ids, small counts) then
// still split into 4096 bins where their top bits are all equal. The NumPy twin is
// cutopk/cuda/families/block_row.py's first_digit (tests/gpu/test_block_row.py checks it).
#pragma once

#include "key_traits.cuh"

namespace cutopk {

// The high bits that every key of one bin shares, as a bucket's (prefix, shift): the keys whose
// bits at and above `shift` equal `prefix`; shift = the key's width when nothing is shared. The
// exact select over a bin's candidates starts there (fewer refine passes).
struct Common {
  unsigned long long prefix;
  int shift;
};

template <class T>
struct FirstDigit {
  typedef typename KeyTraits<T>::Key Key;
  static constexpr int KEY_BITS = 8 * (int)sizeof(Key);
  static constexpr int BITS = KEY_BITS < 12 ? KEY_BITS : 12;  // the digit's width
  static __device__ __forceinline__ unsigned of(Key key) { return (unsigned)(key >> (KEY_BITS - BITS)); }
  // A prefix digit: bin t is the keys whose top bits are t.
  static __device__ __forceinline__ Common common(unsigned t) { return Common{t, KEY_BITS - BITS}; }
};

// The float16-style digit of a 32- or 64-bit float key (EXP_BITS 8 or 11, LO 112 or 1008), as the
// proof above computes it: p = (E << 6) | m is the key's bits below the top one, shifted, and g is
// p - (LO << 6) clamped to [0, 2047] (a subtraction and two min/max, not compares and selects on E:
// sm_90, float32: 8 instructions a key where the case analysis took 13).
template <class Key, int EXP_BITS, int LO>
__device__ __forceinline__ unsigned float16_view_digit(Key key) {
  constexpr int W = 8 * (int)sizeof(Key);
  constexpr int VIEW_SHIFT = W - 1 - EXP_BITS - 6;  // the lowest of m's bits
  const int p = (int)((key >> VIEW_SHIFT) & ((Key(1) << (EXP_BITS + 6)) - 1));
  const int g = min(max(p - (LO << 6), 0), 2047);
  return ((unsigned)(key >> (W - 1)) << 11) | (unsigned)g;
}

// Bin t of the float16 view, strictly inside its range (0 < g < 2047, where g is not clamped):
// g = ((E << 6) | m) - (LO << 6), so its keys share the top bit, E and m: their top EXP_BITS + 7
// bits are (top << (EXP_BITS + 6)) | (g + (LO << 6)). Bins 0, 2047 and their mirrors (g clamped)
// share only the top bit: nothing is claimed.
template <class Key, int EXP_BITS, int LO>
__device__ __forceinline__ Common float16_view_common(unsigned t) {
  constexpr int W = 8 * (int)sizeof(Key);
  const unsigned g = t & 2047u;
  if (g == 0 || g == 2047) return Common{0ull, W};
  return Common{((unsigned long long)(t >> 11) << (EXP_BITS + 6)) | (g + (LO << 6)), W - 1 - EXP_BITS - 6};
}

template <>
struct FirstDigit<float> {
  typedef unsigned Key;
  static constexpr int BITS = 12;
  static __device__ __forceinline__ unsigned of(Key key) { return float16_view_digit<Key, 8, 112>(key); }
  static __device__ __forceinline__ Common common(unsigned t) { return float16_view_common<Key, 8, 112>(t); }
};

template <>
struct FirstDigit<double> {
  typedef unsigned long long Key;
  static constexpr int BITS = 12;
  static __device__ __forceinline__ unsigned of(Key key) { return float16_view_digit<Key, 11, 1008>(key); }
  static __device__ __forceinline__ Common common(unsigned t) { return float16_view_common<Key, 11, 1008>(t); }
};

// Element types whose first digit is taken over the row's range: the 32- and 64-bit integers.
template <class T>
struct RangedDigit {
  static constexpr bool value = false;
};
template <>
struct RangedDigit<int> {
  static constexpr bool value = true;
};
template <>
struct RangedDigit<unsigned> {
  static constexpr bool value = true;
};
template <>
struct RangedDigit<long long> {
  static constexpr bool value = true;
};
template <>
struct RangedDigit<unsigned long long> {
  static constexpr bool value = true;
};

// A row's first digit: FirstDigit<T>, or for RangedDigit types clamp((key - base) >> shift, 0, 4095).
template <class T>
struct RowDigit {
  typedef typename KeyTraits<T>::Key Key;
  static constexpr int KEY_BITS = 8 * (int)sizeof(Key);
  Key base;
  int shift;
  // The key's top 12 bits, until a range is known.
  static __device__ __forceinline__ RowDigit prefix() { return RowDigit{Key(0), KEY_BITS - FirstDigit<T>::BITS}; }
  // The digit over [lo, hi]: base lo, and the least shift that brings hi - lo under 2^12.
  static __device__ __forceinline__ RowDigit over(Key lo, Key hi) {
    const Key range = static_cast<Key>(hi - lo);
    const int bits = KEY_BITS == 64 ? 64 - __clzll((long long)range) : 32 - __clz((int)range);
    return RowDigit{lo, bits > 12 ? bits - 12 : 0};
  }
  // The bits bin t's keys share: with the prefix digit, t itself; with shift 0, bins strictly
  // inside (0, 4095) hold the one key base + t; else nothing is claimed.
  __device__ __forceinline__ Common common(unsigned t) const {
    if constexpr (RangedDigit<T>::value) {
      if (base == Key(0) && shift == KEY_BITS - FirstDigit<T>::BITS) return Common{t, shift};
      if (shift == 0 && t > 0 && t < 4095) return Common{(unsigned long long)static_cast<Key>(base + t), 0};
      return Common{0ull, KEY_BITS};
    } else {
      return FirstDigit<T>::common(t);
    }
  }
  __device__ __forceinline__ unsigned of(Key key) const {
    if constexpr (RangedDigit<T>::value) {
      const Key d = static_cast<Key>(static_cast<Key>(key - base) >> shift);
      return key < base ? 0u : d < Key(4095) ? (unsigned)d : 4095u;
    } else {
      return FirstDigit<T>::of(key);
    }
  }
};

}  // namespace cutopk
