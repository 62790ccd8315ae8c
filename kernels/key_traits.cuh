// Order-preserving keys: the one place where element types meet the kernels.
//
// KeyTraits<T>::to_key(v, largest, nan_first) maps an element to an unsigned integer of the same
// width whose integer order is the preference order: a larger key is selected earlier, and equal
// keys are ties (broken by lower index everywhere else). Kernels compare keys only, never raw
// floats (NVRTC flushes denormals with -ftz, and NaN compares false). from_bits(bits, ...) does the
// same from the element's bits as loaded (an integer of the key's width), so that a streaming
// loop can issue its loads as raw words and transform them afterwards.
//   * floats: positives get the sign bit set, negatives are bit-inverted (IEEE order becomes
//     unsigned order); -0.0 gets +0.0's key; every NaN (any sign, any payload) becomes 0 (never
//     preferred) or all-ones (nan_first: nan="largest" with mode "largest"); no number maps to
//     either extreme, so NaN never ties with a number;
//   * signed integers: the sign bit flipped; unsigned integers: themselves;
//   * mode "smallest": the key bit-inverted (NaN handled after, so it stays last).
// The NumPy twin of this file is cutopk/_request/keys.py; the two must agree bit for bit.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace cutopk {

// A key's width in bits (Key: an unsigned key type, KeyTraits<T>::Key).
template <class Key>
constexpr int KEY_BITS = 8 * (int)sizeof(Key);

template <class U, class T>
__device__ __forceinline__ U bits_of(const T& v) {
  return *reinterpret_cast<const U*>(&v);
}

// The top bit of a key (a float's sign bit), and mode "smallest"'s inversion of a key (its own
// inverse: the transform applies it, the inverse below undoes it).
template <class Key>
__device__ __forceinline__ Key top_bit() {
  return static_cast<Key>(Key(1) << (KEY_BITS<Key> - 1));
}

template <class Key>
__device__ __forceinline__ Key as_largest(Key key, bool largest) {
  return largest ? key : static_cast<Key>(~key);
}

template <class Key, Key NAN_ABOVE>
__device__ __forceinline__ Key float_key(Key bits, bool largest, bool nan_first) {
  const Key sign = top_bit<Key>();
  if (static_cast<Key>(bits & static_cast<Key>(~sign)) > NAN_ABOVE)
    return nan_first ? static_cast<Key>(~Key(0)) : Key(0);
  Key key = (bits & sign) ? static_cast<Key>(~bits) : static_cast<Key>(bits | sign);
  if (key == static_cast<Key>(~sign)) key = sign;  // -0.0 ties with +0.0
  return as_largest(key, largest);
}

template <class Key>
__device__ __forceinline__ Key int_key(Key bits, bool is_signed, bool largest) {
  const Key sign = top_bit<Key>();
  Key key = is_signed ? static_cast<Key>(bits ^ sign) : bits;
  return as_largest(key, largest);
}

// The inverse of the key transform: the element's bits from its key, exact where the key holds
// them (key_holds_bits); not for the keys that canonicalised an element (a float's NaN keys, any
// sign and payload, and the zero key, +0.0 or -0.0), whose bits must be read from the element.
template <class Key>
__device__ __forceinline__ bool float_key_holds_bits(Key key, bool largest) {
  const Key sign = top_bit<Key>();
  const Key k = as_largest(key, largest);
  // NaN keys are the extremes (no number maps there), the zero key is +0.0's and -0.0's.
  return key != Key(0) && key != static_cast<Key>(~Key(0)) && k != sign;
}

template <class Key>
__device__ __forceinline__ Key float_bits_of_key(Key key, bool largest) {
  const Key sign = top_bit<Key>();
  const Key k = as_largest(key, largest);
  return (k & sign) ? static_cast<Key>(k & static_cast<Key>(~sign)) : static_cast<Key>(~k);
}

template <class Key>
__device__ __forceinline__ Key int_bits_of_key(Key key, bool is_signed, bool largest) {
  const Key sign = top_bit<Key>();
  const Key k = as_largest(key, largest);
  return is_signed ? static_cast<Key>(k ^ sign) : k;
}

template <class T>
struct KeyTraits;

// The traits of an integer element type T whose keys are K (SIGNED: the sign bit flipped).
template <class T, class K, bool SIGNED>
struct IntKeyTraits {
  typedef K Key;
  static __device__ __forceinline__ Key from_bits(Key bits, bool largest, bool) {
    return int_key<K>(bits, SIGNED, largest);
  }
  static __device__ __forceinline__ Key to_key(T v, bool largest, bool n) {
    return from_bits(bits_of<K>(v), largest, n);
  }
  static __device__ __forceinline__ bool key_holds_bits(Key, bool) { return true; }
  static __device__ __forceinline__ Key bits_of_key(Key key, bool largest) {
    return int_bits_of_key<K>(key, SIGNED, largest);
  }
};

// The traits of a floating-point element type T whose keys are K (NAN_ABOVE: +inf's bits, above
// which every pattern with the sign cleared is a NaN).
template <class T, class K, K NAN_ABOVE>
struct FloatKeyTraits {
  typedef K Key;
  static __device__ __forceinline__ Key from_bits(Key bits, bool largest, bool nan_first) {
    return float_key<K, NAN_ABOVE>(bits, largest, nan_first);
  }
  static __device__ __forceinline__ Key to_key(T v, bool largest, bool nan_first) {
    return from_bits(bits_of<K>(v), largest, nan_first);
  }
  static __device__ __forceinline__ bool key_holds_bits(Key key, bool largest) {
    return float_key_holds_bits<K>(key, largest);
  }
  static __device__ __forceinline__ Key bits_of_key(Key key, bool largest) {
    return float_bits_of_key<K>(key, largest);
  }
};

template <>
struct KeyTraits<signed char> : IntKeyTraits<signed char, unsigned char, true> {};
template <>
struct KeyTraits<short> : IntKeyTraits<short, unsigned short, true> {};
template <>
struct KeyTraits<int> : IntKeyTraits<int, unsigned int, true> {};
template <>
struct KeyTraits<long long> : IntKeyTraits<long long, unsigned long long, true> {};
template <>
struct KeyTraits<unsigned char> : IntKeyTraits<unsigned char, unsigned char, false> {};
template <>
struct KeyTraits<unsigned short> : IntKeyTraits<unsigned short, unsigned short, false> {};
template <>
struct KeyTraits<unsigned int> : IntKeyTraits<unsigned int, unsigned int, false> {};
template <>
struct KeyTraits<unsigned long long> : IntKeyTraits<unsigned long long, unsigned long long, false> {};
template <>
struct KeyTraits<__half> : FloatKeyTraits<__half, unsigned short, 0x7C00u> {};
template <>
struct KeyTraits<__nv_bfloat16> : FloatKeyTraits<__nv_bfloat16, unsigned short, 0x7F80u> {};
template <>
struct KeyTraits<float> : FloatKeyTraits<float, unsigned int, 0x7F800000u> {};
template <>
struct KeyTraits<double> : FloatKeyTraits<double, unsigned long long, 0x7FF0000000000000ull> {};

// Selection order of two (key, index) pairs: larger key first, then lower index. With indices
// unique this is a total order, so every sort below is deterministic.
template <class Key, class Index>
__device__ __forceinline__ bool before(Key ka, Index ia, Key kb, Index ib) {
  return ka > kb || (ka == kb && ia < ib);
}

// Writes index `i` into element `at` of an output of 4-byte (int32/uint32) or 8-byte
// (int64/uint64) indices, so no separate cast runs after the kernel. The front end has checked
// that every index fits the type, so the low 32 bits are the int32 and the uint32 value alike.
// `index_bytes` is the same for the whole launch: the branch never diverges.
__device__ __forceinline__ void store_index(void* out, long long at, unsigned long long i, int index_bytes) {
  if (index_bytes == 4)
    static_cast<unsigned*>(out)[at] = static_cast<unsigned>(i);
  else
    static_cast<unsigned long long*>(out)[at] = i;
}

}  // namespace cutopk
