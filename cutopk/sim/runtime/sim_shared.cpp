// cutopk CPU simulator, a block's shared memory: static shared memory in whole pages, dynamic
// shared memory between guard pages with canaries, and an exited cluster block's memory made
// inaccessible until its cluster is done.
#include "sim_runtime.h"
#include "sim_launch.h"
#include "sim_launch_parts.h"

namespace cutopk_sim {

// ---- shared memory ----

// Static shared memory: whole pages of their own (mapped, not malloc'ed), so that an exited
// block's arena can be made inaccessible while the rest of its cluster runs (sim_cluster.h).
unsigned char* arena(size_t i) {
  while (g_arenas.size() <= i) {
    void* p = mmap(nullptr, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_arenas.push_back(p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p));
  }
  return g_arenas[i];
}

// Dynamic shared memory of `bytes`, between two PROT_NONE pages: [guard][usable][guard], the
// region at the end of `usable`. An access that reaches a guard page faults at once; the few
// bytes between the region and the guards (the end is rounded to CUDA's 16-byte alignment) are
// canaries checked when the block ends.
unsigned char* dynamic_region(size_t i, size_t bytes) {
  long page = sysconf(_SC_PAGESIZE);
  size_t usable = (bytes + page - 1) / page * page;
  while (g_dynamic_maps.size() <= i) g_dynamic_maps.push_back({nullptr, 0});
  auto& m = g_dynamic_maps[i];
  if (m.second != usable + 2 * page) {
    if (m.first) munmap(m.first, m.second);
    void* p = mmap(nullptr, usable + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    m = {static_cast<unsigned char*>(p), usable + 2 * page};
    mprotect(m.first, page, PROT_NONE);
    mprotect(m.first + page + usable, page, PROT_NONE);
  }
  unsigned char* guard = m.first + (m.second - page);
  return reinterpret_cast<unsigned char*>(reinterpret_cast<uintptr_t>(guard - bytes) & ~static_cast<uintptr_t>(15));
}

constexpr unsigned char CANARY = 0xFD;
constexpr size_t CANARY_BEFORE = 64;

// The canary bytes around block b's dynamic region: [lo0, hi0) before it, [lo1, hi1) after.
void canary_ranges(const Block& b, unsigned char** r) {
  long page = sysconf(_SC_PAGESIZE);
  unsigned char* region = b.dynamic;
  unsigned char* page_start = region - reinterpret_cast<uintptr_t>(region) % page;  // a guard page or more region lies below
  r[0] = region - CANARY_BEFORE < page_start ? page_start : region - CANARY_BEFORE;
  r[1] = region;
  r[2] = region + g_launch.dynamic_bytes;
  r[3] = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(r[2]) + page - 1) / page * page);
}

void set_canaries(const Block& b) {
  unsigned char* r[4];
  canary_ranges(b, r);
  memset(r[0], CANARY, r[1] - r[0]);
  memset(r[2], CANARY, r[3] - r[2]);
}

// Where a canary was overwritten, as a byte offset from the region's start (0 if none).
long damaged_canary(const Block& b) {
  unsigned char* r[4];
  canary_ranges(b, r);
  for (unsigned char* p = r[0]; p < r[1]; ++p)
    if (*p != CANARY) return p - b.dynamic;
  for (unsigned char* p = r[2]; p < r[3]; ++p)
    if (*p != CANARY) return p - b.dynamic;
  return 0;
}

// An exited block of a cluster whose other blocks still run: its shared memory (the arena and the
// dynamic region's pages) is made inaccessible (`gone`), so that any later access faults, and
// made usable again when the whole cluster is done.
void set_shared_gone(Block& b, bool gone) {
  const int prot = gone ? PROT_NONE : PROT_READ | PROT_WRITE;
  mprotect(b.arena, ARENA_BYTES, prot);
  if (b.dynamic) {
    long page = sysconf(_SC_PAGESIZE);
    auto& m = g_dynamic_maps[b.slot];
    mprotect(m.first + page, m.second - 2 * page, prot);
  }
}

// The exited block whose shared memory holds `addr`, or nullptr.
Block* exited_owner(const void* addr) {
  Launch& L = g_launch;
  if (L.cluster_size < 2) return nullptr;
  long page = sysconf(_SC_PAGESIZE);
  auto a = static_cast<const unsigned char*>(addr);
  for (Block& b : L.blocks) {
    if (!b.finished) continue;
    if (a >= b.arena && a < b.arena + ARENA_BYTES) return &b;
    if (b.dynamic) {
      auto& m = g_dynamic_maps[b.slot];
      if (a >= m.first + page && a < m.first + m.second - page) return &b;
    }
  }
  return nullptr;
}

bool in_dynamic_guard(const void* addr) {
  long page = sysconf(_SC_PAGESIZE);
  auto a = static_cast<const unsigned char*>(addr);
  for (auto& m : g_dynamic_maps) {
    if (!m.first) continue;
    const unsigned char* back = m.first + (m.second - page);
    if ((a >= back && a < back + page) || (a >= m.first && a < m.first + page)) return true;
  }
  return false;
}

// Clears the protections an abandoned launch (a fault) left on exited blocks' shared memory.
void restore_shared() {
  for (Block& b : g_launch.blocks)
    if (b.finished && g_launch.cluster_size > 1) {
      set_shared_gone(b, false);
      b.finished = false;
    }
}

}  // namespace cutopk_sim
