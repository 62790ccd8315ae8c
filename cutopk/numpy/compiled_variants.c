/* The compiled route's entry points, each served by the variant of compiled.c built for the
 * widest instruction set this processor runs.
 *
 * setup.py builds compiled.c once per variant into the same library, each build with its
 * instruction-set flags and its four entry points renamed `<name>_<variant>` (no other symbol of
 * compiled.c is global: its helpers and its thread pool are static, so each variant keeps a pool
 * of its own, and only the chosen one ever starts workers). This file exports the plain names,
 * which forward to the variant chosen when the library is loaded (a constructor: before any call,
 * before any thread), and `cutopk_compiled_variant()`, the chosen variant's name. On x86-64
 * (CUTOPK_VARIANT_AVX512 and CUTOPK_VARIANT_AVX2, defined by setup.py for those it built: a
 * compiler without their flags builds the others):
 * - "avx512": AVX-512 F/BW/DQ/VL (x86-64-v4's vector set) with the "avx2" set: compiled.c's mask
 *   compares (__AVX512BW__);
 * - "avx2": AVX2, FMA, BMI1/2, POPCNT (most of x86-64-v3): its 256-bit steps (__AVX2__);
 * - "baseline": the compiler's default target (SSE2), for every other x86-64 processor.
 * Elsewhere the one build is "baseline". __builtin_cpu_supports (GCC and Clang) also checks that
 * the operating system saves the vector registers (XCR0), so a variant is never picked where its
 * instructions would fault. The variants give identical answers (tests/numpy/test_numpy_compiled.py
 * runs each one this processor can).
 */
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

struct cutopk_rows;

int64_t cutopk_compiled_abi_baseline(void);
int cutopk_compiled_select_baseline(const struct cutopk_rows* r);
void cutopk_compiled_set_spin_baseline(int64_t ns);
int cutopk_compiled_workers_baseline(void);
#ifdef CUTOPK_VARIANT_AVX2
int64_t cutopk_compiled_abi_avx2(void);
int cutopk_compiled_select_avx2(const struct cutopk_rows* r);
void cutopk_compiled_set_spin_avx2(int64_t ns);
int cutopk_compiled_workers_avx2(void);
#endif
#ifdef CUTOPK_VARIANT_AVX512
int64_t cutopk_compiled_abi_avx512(void);
int cutopk_compiled_select_avx512(const struct cutopk_rows* r);
void cutopk_compiled_set_spin_avx512(int64_t ns);
int cutopk_compiled_workers_avx512(void);
#endif

struct variant {
  const char* name;
  int64_t (*abi)(void);
  int (*select)(const struct cutopk_rows* r);
  void (*set_spin)(int64_t ns);
  int (*workers)(void);
};

static const struct variant baseline = {"baseline", cutopk_compiled_abi_baseline, cutopk_compiled_select_baseline,
                                        cutopk_compiled_set_spin_baseline, cutopk_compiled_workers_baseline};
#ifdef CUTOPK_VARIANT_AVX2
static const struct variant avx2 = {"avx2", cutopk_compiled_abi_avx2, cutopk_compiled_select_avx2,
                                    cutopk_compiled_set_spin_avx2, cutopk_compiled_workers_avx2};
#endif
#ifdef CUTOPK_VARIANT_AVX512
static const struct variant avx512 = {"avx512", cutopk_compiled_abi_avx512, cutopk_compiled_select_avx512,
                                      cutopk_compiled_set_spin_avx512, cutopk_compiled_workers_avx512};
#endif

/* Set once, by the constructor below, before the library's first call. */
static const struct variant* chosen = &baseline;

#if defined(CUTOPK_VARIANT_AVX2) || defined(CUTOPK_VARIANT_AVX512)
static int runs_avx2(void) {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
         __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
}
#endif

#ifdef CUTOPK_VARIANT_AVX512
static int runs_avx512(void) {
  return runs_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
#endif

/* The widest variant built that this processor runs. */
__attribute__((constructor)) static void choose_variant(void) {
#if defined(CUTOPK_VARIANT_AVX2) || defined(CUTOPK_VARIANT_AVX512)
  __builtin_cpu_init(); /* a constructor may run before the compiler runtime's own */
#endif
#ifdef CUTOPK_VARIANT_AVX2
  if (runs_avx2()) chosen = &avx2;
#endif
#ifdef CUTOPK_VARIANT_AVX512
  if (runs_avx512()) chosen = &avx512;
#endif
}

EXPORT const char* cutopk_compiled_variant(void) {
  return chosen->name;
}
EXPORT int64_t cutopk_compiled_abi(void) {
  return chosen->abi();
}
EXPORT int cutopk_compiled_select(const struct cutopk_rows* r) {
  return chosen->select(r);
}
EXPORT void cutopk_compiled_set_spin(int64_t ns) {
  chosen->set_spin(ns);
}
EXPORT int cutopk_compiled_workers(void) {
  return chosen->workers();
}
