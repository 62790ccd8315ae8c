// The first digit of block_row's select (kernels/block_row.cu): 12 bits of a key (8 for 8-bit
// keys) that split real data into many bins and that are monotone in the key, so that the bin
// holding the K-th key is a valid bucket: every key of a higher bin is larger than every key of
// bin t, every key of a lower bin smaller. For 32- and 64-bit floats it is NOT a prefix of the
// key (later digits are counted over the full key: block_row refines its candidates from the
// key's top bit down).
//
// Floats: with T the key's top bit and x its other bits, 2048 + c(x) where T is 1 and 2048 - c(~x)
// where T is 0 (FloatView below), c a non-decreasing view of the magnitude bits in [0, CAP]:
//   * 32/64-bit keys: with E the exponent field of x (the 8 (11) bits below the top bit), m its
//     top 6 mantissa bits and lo = 112 (1008): c = 0 if E < lo; 2047 if E > lo + 31; else
//     ((E - lo) << 6) | m. That is p - (lo << 6) clamped to [0, 2047] for p = (E << 6) | m, x's
//     top bits: inside, 0 <= E - lo <= 31; E < lo means p < lo << 6, E > lo + 31 means
//     p > ((lo + 31) << 6) | 63. SGLang's first digit (the key rounded to float16: sign, 5
//     exponent, 6 mantissa bits), so uniform [0, 1) values spread over 64 bins per binade instead
//     of resident's 8; the same exponents [2^-15, 2^17) get them on both sides of 2048.
//   * 16-bit keys (float16, bfloat16): c = x >> 4 (x's top 11 bits) clamped at infinity's.
// Monotone (key1 <= key2 implies digit(key1) <= digit(key2)): a top bit of 1 gives digits >= 2048,
// of 0 digits <= 2048, and the larger key has the larger top bit; with the same top bit 1,
// x1 <= x2 and c is non-decreasing; with 0, ~x1 >= ~x2, so c(~x1) >= c(~x2). Clamping a
// non-decreasing function keeps it non-decreasing. Bin 2048 holds both sides' c = 0: +0.0 and
// -0.0 (one key), and every magnitude below the view's range, both signs. Inverting a key maps
// digit d to 4096 - d (mode "smallest" mirrors "largest"). The NaN keys (0 and all-ones) land in
// bins 2048 - CAP and 2048 + CAP (1 and 4095 for 32/64-bit keys), which they may share with
// extreme numbers (infinities, huge magnitudes): a bin is a bucket, the full key's refinement
// tells them apart. Bin 0 (and for 16-bit keys bins below 2048 - CAP and above 2048 + CAP) is
// never used. So the digit can be taken from an element's bits as loaded (FloatRawDigit below),
// without its key: the key's top bit and magnitude are the element's sign and magnitude, or their
// inverses.
//
// 16-bit integer keys: the key's top 12 bits; 8-bit keys: the whole key. These are prefixes of
// the key, monotone since the key's top bits are its highest.
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

// The digit of a float key (Key: its width) from the view c of its magnitude bits: with T the
// key's top bit and x its other bits, 2048 + c(x) where T is 1 and 2048 - c(~x) where T is 0.
// c(m) = clamp((m >> VIEW_SHIFT) - LO6, 0, CAP): for 32/64-bit keys the float16-style view (LO6 =
// LO << 6, CAP 2047), for 16-bit ones m >> 4 clamped at infinity's (LO6 0, CAP = INF >> 4). INF:
// the bits of the type's +infinity (FloatRawDigit's sets).
template <class Key, int VIEW_SHIFT, int LO6, int CAP, Key INF_BITS>
struct FloatView {
  static constexpr Key INF = INF_BITS;
  static constexpr Key LOW = static_cast<Key>(~(Key(1) << (KEY_BITS<Key> - 1)));  // the bits below the top one
  // c of magnitude bits m (top bit clear): a shift and two min/max (sm_90: SHF, VIADDMNMX, VIMNMX).
  static __device__ __forceinline__ unsigned view(Key m) {
    return (unsigned)min(max((int)(m >> VIEW_SHIFT) - LO6, 0), CAP);
  }
  static __device__ __forceinline__ unsigned of(Key key) {
    return key >> (KEY_BITS<Key> - 1) ? 2048u + view(key & LOW) : 2048u - view(static_cast<Key>(~key & LOW));
  }
  // The bits that bin t's keys share, where c is strictly inside (0, CAP) (not clamped): the top
  // bit and the magnitude bits at and above VIEW_SHIFT, (1, c + LO6) above 2048 and their
  // inverse (0, ~(c + LO6)) below it. Bin 2048 (c = 0, either top bit) and the clamped bins
  // 2048 +- CAP claim nothing.
  static __device__ __forceinline__ Common common(unsigned t) {
    constexpr unsigned VIEW_ONES = (1u << (KEY_BITS<Key> - 1 - VIEW_SHIFT)) - 1;  // the magnitude's viewed bits
    if (t > 2048u && t < 2048u + CAP) return Common{(VIEW_ONES + 1) | (t - 2048u + LO6), VIEW_SHIFT};
    if (t < 2048u && t > 2048u - CAP) return Common{VIEW_ONES - (2048u - t + LO6), VIEW_SHIFT};
    return Common{0ull, KEY_BITS<Key>};
  }
};

// DigitView<T>::type: the view of a float type's first digit; void for the other types.
template <class T>
struct DigitView {
  typedef void type;
};
template <>
struct DigitView<__half> {
  typedef FloatView<unsigned short, 4, 0, (0x7C00 >> 4), 0x7C00u> type;
};
template <>
struct DigitView<__nv_bfloat16> {
  typedef FloatView<unsigned short, 4, 0, (0x7F80 >> 4), 0x7F80u> type;
};
template <>
struct DigitView<float> {
  typedef FloatView<unsigned, 32 - 1 - 8 - 6, (112 << 6), 2047, 0x7F800000u> type;
};
template <>
struct DigitView<double> {
  typedef FloatView<unsigned long long, 64 - 1 - 11 - 6, (1008 << 6), 2047, 0x7FF0000000000000ull> type;
};

// The first digit of a float element from its bits as loaded, without its key: the same digit as
// FirstDigit<T>::of(KeyTraits<T>::from_bits(bits, largest, nan_first)), for every bit pattern. With
// m the magnitude bits, a number's key has top bit 1 and magnitude m, or (negative numbers) top bit
// 0 and magnitude ~m, and mode "smallest" inverts it: the digit is 2048 + c(m) or 2048 - c(m), the
// sign of c by the element's sign and the mode; -0.0 has c = 0, +0.0's digit. A NaN's c is CAP
// (its magnitude is above infinity's), and its key's digit 2048 - CAP (key 0) or 2048 + CAP (key
// all-ones, nan_first). So the digit goes down (2048 - c) for the bits in one of two sets, each one
// unsigned compare after an xor chosen per row:
//   * bits > INF (negative numbers, either NaN): mode "largest", NaN last;
//   * (bits ^ top) <= INF (negative numbers, no NaN): mode "largest", nan_first;
// and in mode "smallest" for the complement of the other one (positive numbers, then NaN last with
// them, or not). -0.0 is in some of these sets and not others: its c is 0 either way.
template <class T, class View>
struct FloatRawDigit {
  typedef typename KeyTraits<T>::Key Key;
  static constexpr Key INF = View::INF;
  Key flip;   // top where the set is (bits ^ top) <= INF, else 0
  bool down;  // whether bits in `(bits ^ flip) <= INF` go down (else the others do)
  static __device__ __forceinline__ FloatRawDigit of_row(bool largest, bool nan_first) {
    const bool signed_set = largest == nan_first;
    return FloatRawDigit{signed_set ? top_bit<Key>() : Key(0), largest == signed_set};
  }
  // The digit less 2048, times `scale`: -scale c or scale c (the count's byte offset from bin
  // 2048: one multiply-add by a selected +-scale).
  __device__ __forceinline__ int offset(Key bits, int scale = 1) const {
    const int c = (int)View::view(static_cast<Key>(bits & View::LOW));
    return c * ((static_cast<Key>(bits ^ flip) <= INF) == down ? -scale : scale);
  }
  __device__ __forceinline__ unsigned of(Key bits) const { return (unsigned)(2048 + offset(bits)); }
};

// FirstDigit<T>: 12 bits through the float view (DigitView), or a prefix of the key (integers,
// bool): bin t is the keys whose top bits are t.
template <class T, class View = typename DigitView<T>::type>
struct FirstDigit {
  typedef typename KeyTraits<T>::Key Key;
  static constexpr int BITS = 12;
  static __device__ __forceinline__ unsigned of(Key key) { return View::of(key); }
  static __device__ __forceinline__ Common common(unsigned t) { return View::common(t); }
};
template <class T>
struct FirstDigit<T, void> {
  typedef typename KeyTraits<T>::Key Key;
  static constexpr int BITS = KEY_BITS<Key> < 12 ? KEY_BITS<Key> : 12;  // the digit's width
  static __device__ __forceinline__ unsigned of(Key key) { return (unsigned)(key >> (KEY_BITS<Key> - BITS)); }
  static __device__ __forceinline__ Common common(unsigned t) { return Common{t, KEY_BITS<Key> - BITS}; }
};

// RawDigit<T>::value: whether T's first digit is counted from the bits as loaded (the row held
// as bits, each key made where it is needed): the float types; the others count their keys' digit.
template <class T, class View = typename DigitView<T>::type>
struct RawDigit : FloatRawDigit<T, View> {
  static constexpr bool value = true;
};
template <class T>
struct RawDigit<T, void> {
  static constexpr bool value = false;
  static __device__ __forceinline__ RawDigit of_row(bool, bool) { return RawDigit{}; }
  __device__ __forceinline__ int offset(typename KeyTraits<T>::Key) const { return 0; }    // not used
  __device__ __forceinline__ unsigned of(typename KeyTraits<T>::Key) const { return 0u; }  // not used
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
  Key base;
  int shift;
  // The key's top 12 bits, until a range is known.
  static __device__ __forceinline__ RowDigit prefix() { return RowDigit{Key(0), KEY_BITS<Key> - FirstDigit<T>::BITS}; }
  // The digit over [lo, hi]: base lo, and the least shift that brings hi - lo under 2^12.
  static __device__ __forceinline__ RowDigit over(Key lo, Key hi) {
    const Key range = static_cast<Key>(hi - lo);
    const int bits = KEY_BITS<Key> == 64 ? 64 - __clzll((long long)range) : 32 - __clz((int)range);
    return RowDigit{lo, bits > 12 ? bits - 12 : 0};
  }
  // The bits bin t's keys share: with the prefix digit, t itself; with shift 0, bins strictly
  // inside (0, 4095) hold the one key base + t; else nothing is claimed.
  __device__ __forceinline__ Common common(unsigned t) const {
    if constexpr (RangedDigit<T>::value) {
      if (base == Key(0) && shift == KEY_BITS<Key> - FirstDigit<T>::BITS) return Common{t, shift};
      if (shift == 0 && t > 0 && t < 4095) return Common{(unsigned long long)static_cast<Key>(base + t), 0};
      return Common{0ull, KEY_BITS<Key>};
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
