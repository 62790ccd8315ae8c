// cutopk CPU simulator: CUDA device intrinsics that CUDA's headers do not declare in host mode
// (bit manipulation, reinterpretation, conversions with a rounding mode, integer helpers,
// atomics). Included by sim_runtime.h after the scheduler primitives it relies on.
//
// Everything here computes what the PTX instruction computes, including the corner cases
// kernels rely on (__clz(0) == 32, float->int conversions saturate and send NaN to 0).
#pragma once

#include <cfenv>
#include <cmath>
#include <limits>

// ---- bit manipulation ----
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32) |
         __brev(static_cast<unsigned>(x >> 32));
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long both = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((both >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  unsigned long long both = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>((both << (shift & 31u)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  unsigned long long both = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>(both >> (shift & 31u));
}
// The _lc/_rc forms clamp the shift to 32 instead of wrapping it.
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned shift) {
  return shift >= 32u ? lo : __funnelshift_l(lo, hi, shift);
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
  return shift >= 32u ? hi : __funnelshift_r(lo, hi, shift);
}

// ---- integer arithmetic ----
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<long long>(a) * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline long long __mul64hi(long long a, long long b) {
  return static_cast<long long>((static_cast<__int128>(a) * b) >> 64);
}
inline int __mul24(int a, int b) { return (a << 8 >> 8) * (b << 8 >> 8); }
inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
inline unsigned __uhadd(unsigned a, unsigned b) { return static_cast<unsigned>((0ull + a + b) >> 1); }
inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return (a > b ? a - b : b - a) + c; }
inline int __sad(int a, int b, unsigned c) { return static_cast<int>((a > b ? 0u + a - b : 0u + b - a) + c); }

// ---- reinterpretation ----
template <class To, class From>
inline To cutopk_sim_bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To r;
  memcpy(&r, &v, sizeof r);
  return r;
}
inline unsigned __float_as_uint(float x) { return cutopk_sim_bit_cast<unsigned>(x); }
inline int __float_as_int(float x) { return cutopk_sim_bit_cast<int>(x); }
inline float __uint_as_float(unsigned x) { return cutopk_sim_bit_cast<float>(x); }
inline float __int_as_float(int x) { return cutopk_sim_bit_cast<float>(x); }
inline long long __double_as_longlong(double x) { return cutopk_sim_bit_cast<long long>(x); }
inline double __longlong_as_double(long long x) { return cutopk_sim_bit_cast<double>(x); }
inline int __double2hiint(double x) { return static_cast<int>(cutopk_sim_bit_cast<unsigned long long>(x) >> 32); }
inline int __double2loint(double x) { return static_cast<int>(cutopk_sim_bit_cast<unsigned long long>(x)); }
inline double __hiloint2double(int hi, int lo) {
  return cutopk_sim_bit_cast<double>((static_cast<unsigned long long>(static_cast<unsigned>(hi)) << 32) |
                                     static_cast<unsigned>(lo));
}

// ---- conversions with an explicit rounding mode ----
namespace cutopk_sim {
// Rounds x as the suffix says (rn: to nearest even, rz: toward zero, rd: down, ru: up).
inline double round_as(double x, char mode) {
  switch (mode) {
    case 'z': return std::trunc(x);
    case 'd': return std::floor(x);
    case 'u': return std::ceil(x);
    default: return std::nearbyint(x);
  }
}
// Float to integer as the cvt instruction does it: NaN gives 0, out-of-range values saturate.
template <class I>
inline I to_int(double x, char mode) {
  if (std::isnan(x)) return 0;
  double r = round_as(x, mode);
  if (r <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (r >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}
// Long double holds every 64-bit integer exactly, so the 64-bit conversions do not round twice.
template <class I>
inline I to_int64(long double x, char mode) {
  if (std::isnan(x)) return 0;
  long double r = mode == 'z' ? truncl(x) : mode == 'd' ? floorl(x) : mode == 'u' ? ceill(x) : nearbyintl(x);
  if (r <= static_cast<long double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (r >= static_cast<long double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}
}  // namespace cutopk_sim

// Float to integer, each rounding mode (rn, rz, rd, ru) of each pair of types.
inline int __float2int_rn(float x) { return ::cutopk_sim::to_int<int>(x, 'n'); }
inline int __float2int_rz(float x) { return ::cutopk_sim::to_int<int>(x, 'z'); }
inline int __float2int_rd(float x) { return ::cutopk_sim::to_int<int>(x, 'd'); }
inline int __float2int_ru(float x) { return ::cutopk_sim::to_int<int>(x, 'u'); }
inline unsigned __float2uint_rn(float x) { return ::cutopk_sim::to_int<unsigned>(x, 'n'); }
inline unsigned __float2uint_rz(float x) { return ::cutopk_sim::to_int<unsigned>(x, 'z'); }
inline unsigned __float2uint_rd(float x) { return ::cutopk_sim::to_int<unsigned>(x, 'd'); }
inline unsigned __float2uint_ru(float x) { return ::cutopk_sim::to_int<unsigned>(x, 'u'); }
inline long long __float2ll_rn(float x) { return ::cutopk_sim::to_int64<long long>(x, 'n'); }
inline long long __float2ll_rz(float x) { return ::cutopk_sim::to_int64<long long>(x, 'z'); }
inline long long __float2ll_rd(float x) { return ::cutopk_sim::to_int64<long long>(x, 'd'); }
inline long long __float2ll_ru(float x) { return ::cutopk_sim::to_int64<long long>(x, 'u'); }
inline unsigned long long __float2ull_rn(float x) { return ::cutopk_sim::to_int64<unsigned long long>(x, 'n'); }
inline unsigned long long __float2ull_rz(float x) { return ::cutopk_sim::to_int64<unsigned long long>(x, 'z'); }
inline unsigned long long __float2ull_rd(float x) { return ::cutopk_sim::to_int64<unsigned long long>(x, 'd'); }
inline unsigned long long __float2ull_ru(float x) { return ::cutopk_sim::to_int64<unsigned long long>(x, 'u'); }
inline int __double2int_rn(double x) { return ::cutopk_sim::to_int<int>(x, 'n'); }
inline int __double2int_rz(double x) { return ::cutopk_sim::to_int<int>(x, 'z'); }
inline int __double2int_rd(double x) { return ::cutopk_sim::to_int<int>(x, 'd'); }
inline int __double2int_ru(double x) { return ::cutopk_sim::to_int<int>(x, 'u'); }
inline unsigned __double2uint_rn(double x) { return ::cutopk_sim::to_int<unsigned>(x, 'n'); }
inline unsigned __double2uint_rz(double x) { return ::cutopk_sim::to_int<unsigned>(x, 'z'); }
inline unsigned __double2uint_rd(double x) { return ::cutopk_sim::to_int<unsigned>(x, 'd'); }
inline unsigned __double2uint_ru(double x) { return ::cutopk_sim::to_int<unsigned>(x, 'u'); }
inline long long __double2ll_rn(double x) { return ::cutopk_sim::to_int64<long long>(x, 'n'); }
inline long long __double2ll_rz(double x) { return ::cutopk_sim::to_int64<long long>(x, 'z'); }
inline long long __double2ll_rd(double x) { return ::cutopk_sim::to_int64<long long>(x, 'd'); }
inline long long __double2ll_ru(double x) { return ::cutopk_sim::to_int64<long long>(x, 'u'); }
inline unsigned long long __double2ull_rn(double x) { return ::cutopk_sim::to_int64<unsigned long long>(x, 'n'); }
inline unsigned long long __double2ull_rz(double x) { return ::cutopk_sim::to_int64<unsigned long long>(x, 'z'); }
inline unsigned long long __double2ull_rd(double x) { return ::cutopk_sim::to_int64<unsigned long long>(x, 'd'); }
inline unsigned long long __double2ull_ru(double x) { return ::cutopk_sim::to_int64<unsigned long long>(x, 'u'); }
// Integer to float: round to nearest is the host's default mode, the only one used here.
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline float __ll2float_rn(long long x) { return static_cast<float>(x); }
inline float __ull2float_rn(unsigned long long x) { return static_cast<float>(x); }
inline double __int2double_rn(int x) { return static_cast<double>(x); }
inline double __uint2double_rn(unsigned x) { return static_cast<double>(x); }
inline double __ll2double_rn(long long x) { return static_cast<double>(x); }
inline double __ull2double_rn(unsigned long long x) { return static_cast<double>(x); }
inline float __double2float_rn(double x) { return static_cast<float>(x); }

// ---- floating point ----
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return std::isnan(x) ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __powf(float a, float b) { return std::pow(a, b); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline __half __hfma(__half a, __half b, __half c) {
  return __float2half(std::fma(__half2float(a), __half2float(b), __half2float(c)));
}
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __float2bfloat16(std::fma(__bfloat162float(a), __bfloat162float(b), __bfloat162float(c)));
}

template <class T>
inline T __ldg(const T* p) {
  return *p;
}
template <class T>
inline T __ldcs(const T* p) {
  return *p;
}
template <class T>
inline T __ldcg(const T* p) {
  return *p;
}
template <class T>
inline void __stcs(T* p, T v) {
  *p = v;
}
template <class T>
inline void __stcg(T* p, T v) {
  *p = v;
}

// Device-side min/max as CUDA provides them for mixed integer types.
template <class A, class B>
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b) : static_cast<C>(a);
}
template <class A, class B>
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
}
inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned umax(unsigned a, unsigned b) { return a < b ? b : a; }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a < b ? b : a; }
inline long long llmin(long long a, long long b) { return a < b ? a : b; }
inline long long llmax(long long a, long long b) { return a < b ? b : a; }

// ---- atomics ----
// One OS thread runs every fiber and a fiber is never interrupted in the middle of one, so each
// is atomic as written. Each is also a point where a spinning thread gives way; an atomic that
// leaves memory unchanged (a poll such as atomicAdd(p, 0) or a failed CAS) counts towards the
// deadlock budget, one that changes memory is progress.
namespace cutopk_sim {
// *address = op(old, val), the old value returned; memory changed or not decides whether the
// atomic was progress (atomic_point).
template <class T, class Op>
inline T atomic_update(T* address, T val, Op op) {
  T old = *address;
  T now = op(old, val);
  *address = now;
  atomic_point(memcmp(&old, &now, sizeof(T)) != 0);
  return old;
}
}  // namespace cutopk_sim
template <class T, class U>
inline T atomicAdd(T* address, U v) {
  return ::cutopk_sim::atomic_update(address, static_cast<T>(v), [](T old, T val) { return static_cast<T>(old + val); });
}
template <class T, class U>
inline T atomicSub(T* address, U v) {
  return ::cutopk_sim::atomic_update(address, static_cast<T>(v), [](T old, T val) { return static_cast<T>(old - val); });
}
template <class T, class U>
inline T atomicExch(T* address, U v) {
  return ::cutopk_sim::atomic_update(address, static_cast<T>(v), [](T old, T val) { return val; });
}
template <class T, class U>
inline T atomicMax(T* address, U v) {
  return ::cutopk_sim::atomic_update(address, static_cast<T>(v), [](T old, T val) { return old < val ? val : old; });
}
template <class T, class U>
inline T atomicMin(T* address, U v) {
  return ::cutopk_sim::atomic_update(address, static_cast<T>(v), [](T old, T val) { return val < old ? val : old; });
}
template <class T, class U>
inline T atomicAnd(T* address, U v) {
  return ::cutopk_sim::atomic_update(address, static_cast<T>(v), [](T old, T val) { return static_cast<T>(old & val); });
}
template <class T, class U>
inline T atomicOr(T* address, U v) {
  return ::cutopk_sim::atomic_update(address, static_cast<T>(v), [](T old, T val) { return static_cast<T>(old | val); });
}
template <class T, class U>
inline T atomicXor(T* address, U v) {
  return ::cutopk_sim::atomic_update(address, static_cast<T>(v), [](T old, T val) { return static_cast<T>(old ^ val); });
}
template <class T, class U, class V>
inline T atomicCAS(T* address, U compare, V val) {
  T old = *address;
  bool swapped = old == static_cast<T>(compare) && old != static_cast<T>(val);
  if (old == static_cast<T>(compare)) *address = static_cast<T>(val);
  ::cutopk_sim::atomic_point(swapped);
  return old;
}
inline unsigned atomicInc(unsigned* address, unsigned limit) {
  unsigned old = *address;
  *address = old >= limit ? 0u : old + 1u;
  ::cutopk_sim::atomic_point(*address != old);
  return old;
}
inline unsigned atomicDec(unsigned* address, unsigned limit) {
  unsigned old = *address;
  *address = (old == 0u || old > limit) ? limit : old - 1u;
  ::cutopk_sim::atomic_point(*address != old);
  return old;
}
// The scoped variants (_block, _system) behave alike on one CPU thread.
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicSub_block atomicSub
#define atomicExch_block atomicExch
#define atomicMax_block atomicMax
#define atomicMin_block atomicMin
#define atomicOr_block atomicOr
#define atomicAnd_block atomicAnd
#define atomicCAS_block atomicCAS
