// cutopk CPU simulator, the counting build's hooks (RawModule(count_traffic=True)); empty in the
// other builds.
#include "sim_runtime.h"
#include "sim_launch.h"

// ---- global-memory traffic (a counting build: RawModule(count_traffic=True)) ----
// The counting build is compiled with GCC's thread-sanitizer instrumentation and no sanitizer
// runtime: every load and store of the module calls __tsan_{read,write}{1,2,4,8,16}(address)
// (atomics too: the runtime's atomics are plain loads and stores), defined here. They count the
// accesses that fall inside the launch's array arguments (global memory; shared memory, stacks
// and the runtime's own data lie elsewhere): bytes read, bytes written, and the distinct 32-byte
// sectors touched, one bit per sector of each argument's region. (GCC's kernel-address
// sanitizer has callbacks too, but it drops the check of a store to an address just loaded:
// `x[i] += 1` would count no write.)
#ifdef CUTOPK_SIM_TRAFFIC
namespace cutopk_sim {

struct TrafficRegion {
  uintptr_t lo, hi;
  uintptr_t first_sector;
  unsigned long long* bits;
};
constexpr int MAX_TRAFFIC_REGIONS = 64;
TrafficRegion g_traffic[MAX_TRAFFIC_REGIONS];
int g_ntraffic = 0;
uintptr_t g_traffic_lo = 1, g_traffic_hi = 0;  // the hull of the regions (empty: none)
unsigned long long g_bytes_read = 0, g_bytes_written = 0;

// Not instrumented itself (it would call itself), and it calls nothing that is.
__attribute__((no_sanitize_thread)) void count_access(const void* address, unsigned long long n, bool write) {
  uintptr_t a = reinterpret_cast<uintptr_t>(address);
  if (a >= g_traffic_hi || a + n <= g_traffic_lo || n == 0) return;
  for (int i = 0; i < g_ntraffic; ++i) {
    TrafficRegion& r = g_traffic[i];
    if (a >= r.hi || a + n <= r.lo) continue;
    uintptr_t lo = a < r.lo ? r.lo : a, hi = a + n > r.hi ? r.hi : a + n;
    (write ? g_bytes_written : g_bytes_read) += hi - lo;
    for (uintptr_t s = lo >> 5; s <= (hi - 1) >> 5; ++s) {
      uintptr_t bit = s - r.first_sector;
      r.bits[bit >> 6] |= 1ull << (bit & 63);
    }
    return;
  }
}

}  // namespace cutopk_sim

extern "C" {
#define CUTOPK_SIM_NO_TSAN __attribute__((no_sanitize_thread))
// Each access of n bytes (1, 2, 4, 8, 16) that ThreadSanitizer's instrumentation reports.
CUTOPK_SIM_NO_TSAN void __tsan_read1(void* a) { cutopk_sim::count_access(a, 1, false); }
CUTOPK_SIM_NO_TSAN void __tsan_write1(void* a) { cutopk_sim::count_access(a, 1, true); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_read1(void* a) { cutopk_sim::count_access(a, 1, false); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_write1(void* a) { cutopk_sim::count_access(a, 1, true); }
CUTOPK_SIM_NO_TSAN void __tsan_volatile_read1(void* a) { cutopk_sim::count_access(a, 1, false); }
CUTOPK_SIM_NO_TSAN void __tsan_volatile_write1(void* a) { cutopk_sim::count_access(a, 1, true); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_read1(void* a) { cutopk_sim::count_access(a, 1, false); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_write1(void* a) { cutopk_sim::count_access(a, 1, true); }
CUTOPK_SIM_NO_TSAN void __tsan_read2(void* a) { cutopk_sim::count_access(a, 2, false); }
CUTOPK_SIM_NO_TSAN void __tsan_write2(void* a) { cutopk_sim::count_access(a, 2, true); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_read2(void* a) { cutopk_sim::count_access(a, 2, false); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_write2(void* a) { cutopk_sim::count_access(a, 2, true); }
CUTOPK_SIM_NO_TSAN void __tsan_volatile_read2(void* a) { cutopk_sim::count_access(a, 2, false); }
CUTOPK_SIM_NO_TSAN void __tsan_volatile_write2(void* a) { cutopk_sim::count_access(a, 2, true); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_read2(void* a) { cutopk_sim::count_access(a, 2, false); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_write2(void* a) { cutopk_sim::count_access(a, 2, true); }
CUTOPK_SIM_NO_TSAN void __tsan_read4(void* a) { cutopk_sim::count_access(a, 4, false); }
CUTOPK_SIM_NO_TSAN void __tsan_write4(void* a) { cutopk_sim::count_access(a, 4, true); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_read4(void* a) { cutopk_sim::count_access(a, 4, false); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_write4(void* a) { cutopk_sim::count_access(a, 4, true); }
CUTOPK_SIM_NO_TSAN void __tsan_volatile_read4(void* a) { cutopk_sim::count_access(a, 4, false); }
CUTOPK_SIM_NO_TSAN void __tsan_volatile_write4(void* a) { cutopk_sim::count_access(a, 4, true); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_read4(void* a) { cutopk_sim::count_access(a, 4, false); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_write4(void* a) { cutopk_sim::count_access(a, 4, true); }
CUTOPK_SIM_NO_TSAN void __tsan_read8(void* a) { cutopk_sim::count_access(a, 8, false); }
CUTOPK_SIM_NO_TSAN void __tsan_write8(void* a) { cutopk_sim::count_access(a, 8, true); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_read8(void* a) { cutopk_sim::count_access(a, 8, false); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_write8(void* a) { cutopk_sim::count_access(a, 8, true); }
CUTOPK_SIM_NO_TSAN void __tsan_volatile_read8(void* a) { cutopk_sim::count_access(a, 8, false); }
CUTOPK_SIM_NO_TSAN void __tsan_volatile_write8(void* a) { cutopk_sim::count_access(a, 8, true); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_read8(void* a) { cutopk_sim::count_access(a, 8, false); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_write8(void* a) { cutopk_sim::count_access(a, 8, true); }
CUTOPK_SIM_NO_TSAN void __tsan_read16(void* a) { cutopk_sim::count_access(a, 16, false); }
CUTOPK_SIM_NO_TSAN void __tsan_write16(void* a) { cutopk_sim::count_access(a, 16, true); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_read16(void* a) { cutopk_sim::count_access(a, 16, false); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_write16(void* a) { cutopk_sim::count_access(a, 16, true); }
CUTOPK_SIM_NO_TSAN void __tsan_volatile_read16(void* a) { cutopk_sim::count_access(a, 16, false); }
CUTOPK_SIM_NO_TSAN void __tsan_volatile_write16(void* a) { cutopk_sim::count_access(a, 16, true); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_read16(void* a) { cutopk_sim::count_access(a, 16, false); }
CUTOPK_SIM_NO_TSAN void __tsan_unaligned_volatile_write16(void* a) { cutopk_sim::count_access(a, 16, true); }
CUTOPK_SIM_NO_TSAN void __tsan_read_range(void* a, long n) {
  cutopk_sim::count_access(a, static_cast<unsigned long long>(n), false);
}
CUTOPK_SIM_NO_TSAN void __tsan_write_range(void* a, long n) {
  cutopk_sim::count_access(a, static_cast<unsigned long long>(n), true);
}
// The module's constructor calls __tsan_init; function entry/exit is not instrumented.
CUTOPK_SIM_NO_TSAN void __tsan_init() {}
CUTOPK_SIM_NO_TSAN void __tsan_func_entry(void*) {}
CUTOPK_SIM_NO_TSAN void __tsan_func_exit(void*) {}

// Starts counting over the n regions [bounds[2i], bounds[2i+1]) (disjoint, sorted); 0 on
// success, -1 when there are too many regions or no memory for the sector bits.
__attribute__((visibility("default"), no_sanitize_thread)) int cutopk_sim_traffic_begin(
    const unsigned long long* bounds, int n) {
  using namespace cutopk_sim;
  g_ntraffic = 0;
  g_traffic_lo = 1;
  g_traffic_hi = 0;
  g_bytes_read = g_bytes_written = 0;
  if (n > MAX_TRAFFIC_REGIONS) return -1;
  for (int i = 0; i < n; ++i) {
    TrafficRegion& r = g_traffic[i];
    r.lo = bounds[2 * i];
    r.hi = bounds[2 * i + 1];
    r.first_sector = r.lo >> 5;
    size_t sectors = r.hi > r.lo ? ((r.hi - 1) >> 5) - r.first_sector + 1 : 0;
    r.bits = static_cast<unsigned long long*>(calloc((sectors + 63) / 64 + 1, 8));
    if (!r.bits) return -1;
    g_ntraffic = i + 1;
    if (g_traffic_lo > g_traffic_hi || r.lo < g_traffic_lo) g_traffic_lo = r.lo;
    if (r.hi > g_traffic_hi) g_traffic_hi = r.hi;
  }
  return 0;
}

// Stops counting: out[0] bytes read, out[1] bytes written, out[2] sectors touched.
__attribute__((visibility("default"), no_sanitize_thread)) void cutopk_sim_traffic_end(unsigned long long* out) {
  using namespace cutopk_sim;
  unsigned long long sectors = 0;
  for (int i = 0; i < g_ntraffic; ++i) {
    TrafficRegion& r = g_traffic[i];
    size_t count = r.hi > r.lo ? ((r.hi - 1) >> 5) - r.first_sector + 1 : 0;
    for (size_t w = 0; w < (count + 63) / 64; ++w) sectors += __builtin_popcountll(r.bits[w]);
    free(r.bits);
    r.bits = nullptr;
  }
  out[0] = g_bytes_read;
  out[1] = g_bytes_written;
  out[2] = sectors;
  g_ntraffic = 0;
  g_traffic_lo = 1;
  g_traffic_hi = 0;
}
}
#endif  // CUTOPK_SIM_TRAFFIC
