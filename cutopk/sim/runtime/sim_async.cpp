// cutopk CPU simulator: asynchronous copies from global to shared memory, the model of
// cp.async.cg.shared.global / cp.async.commit_group / cp.async.wait_group that
// kernels/async_copy.cuh calls in host mode (declared in sim_runtime.h). The same for every
// kernel source: compiled once per set of flags into an object that every module links.
//
// Per thread (fiber), as the PTX ISA defines the groups:
//   async_copy16  checks the addresses, reads the 16 source bytes now (on the GPU the source is
//                 read at some time between issue and completion: reading it at issue is one of
//                 those times), fills the destination with the shared-memory poison (0xCD) and
//                 adds the copy to the thread's open group;
//   async_commit  closes the open group (an empty one too, as cp.async.commit_group does);
//   async_wait(n) lets the other threads run, then completes every committed group but the
//                 newest n, in the order issued: only then do the bytes land in the destination.
// Copies issued after the last commit belong to no committed group: cp.async.wait_group does
// not wait for them (cp.async.wait_all would, as a commit followed by wait_group 0; the kernels'
// API has no wait_all), so no wait completes them and their destination stays poisoned; a
// thread that exits with any copy pending, committed or not, faults.
// What this finds: a read of a destination before the wait that completes it (the poison), a
// read of another thread's copy without the barrier after its wait (the poison, under some
// thread order: the copies land when their own thread waits), a write to a pending destination
// (found at the wait: the poison is gone), copies never waited for, and addresses that
// cp.async refuses. Timing, and the L2-only caching of .cg, are not modelled.
//
// Bulk copies on a CopyBarrier (an mbarrier that counts one arrival per phase, per block, by its
// address): barrier_init starts it at phase 0; bulk_copy checks the addresses, reads the source
// now and poisons the destination, in the open phase; barrier_arrive checks that the phase's
// copies add up to the bytes it names and completes the phase; barrier_wait lets the other
// threads run, then polls (a spin-wait: DeadlockError past spin_budget) until the phase of the
// parity it names has completed, and lands the bytes of every completed phase that no wait had
// seen yet. A block that ends with bulk copies not landed faults.
#include "sim_runtime.h"

namespace cutopk_sim {

namespace {

constexpr unsigned char PENDING = 0xCD;  // the shared-memory poison (start_block)
constexpr size_t COPY_BYTES = 16;

// Records the fault frames: `site` (a return address into the kernel) alone, or (0) the stack.
void frames_at(uintptr_t site) {
  if (!site) {
    record_frames(nullptr);
    return;
  }
  Dl_info self{};
  dladdr(reinterpret_cast<void*>(&frames_at), &self);
  g_frames[0] = site - reinterpret_cast<uintptr_t>(self.dli_fbase) - 1;  // back into the call
  g_nframes = 1;
}

// Records an asynchronous-copy fault for the running thread and abandons the launch; the source
// line comes from the frames (Python appends "at kernel.cu line N").
[[noreturn]] __attribute__((format(printf, 2, 3))) void copy_fault(uintptr_t site, const char* fmt, ...) {
  if (g_launch.error == OK) {
    frames_at(site);
    char who[160];
    describe_thread(who, sizeof who, g_launch.current);
    int len = snprintf(g_error, sizeof g_error, "%s: ", who);
    va_list ap;
    va_start(ap, fmt);
    len += vsnprintf(g_error + len, sizeof g_error - len, fmt, ap);
    va_end(ap);
    if (len < static_cast<int>(sizeof g_error))
      snprintf(g_error + len, sizeof g_error - len, " -- asynchronous copy misuse");
    g_launch.error = E_ASYNC;
  }
  give_way();
  __builtin_unreachable();
}

// Whether the n bytes at p lie in block b's static shared memory (as laid out so far in this
// launch) or in its dynamic shared memory.
bool in_shared(const Block* b, const unsigned char* p, size_t n) {
  const Launch& L = g_launch;
  if (p >= b->arena && p + n <= b->arena + L.static_shared_used) return true;
  return b->dynamic && p >= b->dynamic && p + n <= b->dynamic + L.dynamic_bytes;
}

// Whether any byte at p..p+n touches block b's shared memory (arena or dynamic region).
bool touches_shared(const Block* b, const unsigned char* p, size_t n) {
  const Launch& L = g_launch;
  if (p < b->arena + ARENA_BYTES && p + n > b->arena) return true;
  return b->dynamic && p < b->dynamic + L.dynamic_bytes && p + n > b->dynamic;
}

// Where a shared address is, for messages: "static shared offset N" or "dynamic shared offset N".
void shared_place(char* out, size_t n, const Block* b, const unsigned char* p) {
  if (p >= b->arena && p < b->arena + ARENA_BYTES)
    snprintf(out, n, "static shared offset %zu", static_cast<size_t>(p - b->arena));
  else
    snprintf(out, n, "dynamic shared offset %zu", static_cast<size_t>(p - b->dynamic));
}

// The address checks every copy into shared memory makes, in its order: the `bytes` at `d` lie
// in the block's shared memory, `d` and `s` are 16-byte aligned, and `s` is no shared address.
// `what` names the copy in the faults; `dst_rule` and `src_rule` say why, in the copy's words.
void check_copy(uintptr_t site, const Block* b, const unsigned char* d, const unsigned char* s, unsigned bytes,
                const char* what, const char* dst_rule, const char* src_rule) {
  const void* dst = d;
  if (!in_shared(b, d, bytes)) {
    if (touches_shared(b, d, bytes))
      copy_fault(site,
                 "%s destination %p: its %u bytes run past the block's shared memory (%zu bytes static, %zu "
                 "dynamic)",
                 what, dst, bytes, g_launch.static_shared_used, g_launch.dynamic_bytes);
    copy_fault(site, "%s destination %p is not in this block's shared memory%s", what, dst, dst_rule);
  }
  if (reinterpret_cast<uintptr_t>(d) % COPY_BYTES) {
    char where[64];
    shared_place(where, sizeof where, b, d);
    copy_fault(site, "%s destination %p (%s) is not 16-byte aligned", what, dst, where);
  }
  if (reinterpret_cast<uintptr_t>(s) % COPY_BYTES)
    copy_fault(site, "%s source %p is not 16-byte aligned", what, static_cast<const void*>(s));
  if (touches_shared(b, s, bytes))
    copy_fault(site, "%s source %p is in shared memory: %s", what, static_cast<const void*>(s), src_rule);
}

}  // namespace

// Not instrumented by the counting build: the source read is counted explicitly below (the
// kernel's own loads are counted by the instrumentation; this one happens in the runtime).
__attribute__((noinline, no_sanitize_thread)) void async_copy16(void* dst, const void* src) {
  const uintptr_t site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  Fiber* f = cur();
  Block* b = f->block;
  auto d = static_cast<unsigned char*>(dst);
  auto s = static_cast<const unsigned char*>(src);
  check_copy(site, b, d, s, COPY_BYTES, "copy16_async",
             ": cp.async.cg.shared.global writes only the issuing block's shared memory",
             "cp.async.cg.shared.global reads global memory");
  PendingCopy c;
  c.dst = d;
  memcpy(c.bytes, s, COPY_BYTES);  // an instrumented read under AddressSanitizer
#ifdef CUTOPK_SIM_TRAFFIC
  count_access(s, COPY_BYTES, false);
#endif
  c.group = f->groups;
  c.site = site;
  memset(d, PENDING, COPY_BYTES);
  f->copies.push_back(c);
}

void async_commit() {
  cur()->groups++;
}

void async_wait(int pending) {
  // The copies are in flight while the thread waits: the other threads go on first, so that a
  // read of this thread's copies that no barrier orders after this wait meets the poison.
  give_way();
  Fiber* f = cur();
  const unsigned keep = pending < 0 ? 0u : static_cast<unsigned>(pending);
  if (f->groups <= keep) return;
  const unsigned complete = f->groups - keep;  // groups [0, complete) complete now
  size_t done = 0;
  for (; done < f->copies.size() && f->copies[done].group < complete; ++done) {
    PendingCopy& c = f->copies[done];
    for (size_t i = 0; i < COPY_BYTES; ++i) {
      if (c.dst[i] != PENDING) {
        char where[64];
        shared_place(where, sizeof where, f->block, c.dst);
        copy_fault(0,
                   "the destination %p (%s) of a pending copy16_async was written before the wait that completes "
                   "it (found at this wait: byte %zu is 0x%02x, not the poison 0xCD): no thread may write a "
                   "destination, nor copy to it again, while its copy is pending",
                   static_cast<void*>(c.dst), where, i, static_cast<unsigned>(c.dst[i]));
      }
    }
    memcpy(c.dst, c.bytes, COPY_BYTES);
  }
  f->copies.erase(f->copies.begin(), f->copies.begin() + static_cast<std::ptrdiff_t>(done));
}

// ---- bulk copies on a CopyBarrier ----

namespace {

constexpr size_t BARRIER_BYTES = 8;

CopyBarrierState* find_barrier(Block* b, const void* bar) {
  for (CopyBarrierState& s : b->copy_barriers)
    if (s.address == bar) return &s;
  return nullptr;
}

CopyBarrierState& barrier_of(const void* bar, uintptr_t site, const char* what) {
  CopyBarrierState* s = find_barrier(cur()->block, bar);
  if (!s)
    copy_fault(site, "%s on the copy barrier %p, which no copy_barrier_init of this block initialised", what, bar);
  return *s;
}

// Lands the copies of the phases of barrier s completed so far.
void land_completed(CopyBarrierState& s) {
  size_t done = 0;
  for (; done < s.copies.size() && s.copies[done].phase < s.completed; ++done) {
    BulkCopy& c = s.copies[done];
    for (size_t i = 0; i < c.bytes.size(); ++i) {
      if (c.dst[i] != PENDING) {
        char where[64];
        shared_place(where, sizeof where, cur()->block, c.dst + i);
        copy_fault(0,
                   "the destination %p (%s) of a pending bulk_copy_async was written before the wait that "
                   "completes it (found at this wait: the byte is 0x%02x, not the poison 0xCD): no thread may "
                   "write a destination, nor copy to it again, while its copy is pending",
                   static_cast<void*>(c.dst + i), where, static_cast<unsigned>(c.dst[i]));
      }
    }
    memcpy(c.dst, c.bytes.data(), c.bytes.size());
  }
  s.copies.erase(s.copies.begin(), s.copies.begin() + static_cast<std::ptrdiff_t>(done));
}

}  // namespace

__attribute__((noinline)) void barrier_init(void* bar) {
  const uintptr_t site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  Block* b = cur()->block;
  auto p = static_cast<unsigned char*>(bar);
  if (!in_shared(b, p, BARRIER_BYTES))
    copy_fault(site, "copy_barrier_init of %p, which is not in this block's shared memory", bar);
  if (reinterpret_cast<uintptr_t>(p) % BARRIER_BYTES)
    copy_fault(site, "copy_barrier_init of %p, which is not 8-byte aligned", bar);
  CopyBarrierState* s = find_barrier(b, bar);
  if (s && !s->copies.empty())
    copy_fault(site, "copy_barrier_init of %p while %zu bulk copies on it are pending", bar, s->copies.size());
  if (!s) {
    b->copy_barriers.emplace_back();
    s = &b->copy_barriers.back();
  }
  *s = CopyBarrierState{};
  s->address = bar;
  memset(p, 0, BARRIER_BYTES);
}

__attribute__((noinline, no_sanitize_thread)) void bulk_copy(void* dst, const void* src, unsigned bytes, void* bar) {
  const uintptr_t site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  Fiber* f = cur();
  Block* b = f->block;
  auto d = static_cast<unsigned char*>(dst);
  auto s = static_cast<const unsigned char*>(src);
  if (bytes == 0 || bytes % COPY_BYTES)
    copy_fault(site, "bulk_copy_async of %u bytes: the size must be a positive multiple of 16", bytes);
  check_copy(site, b, d, s, bytes, "bulk_copy_async", "", "the copy reads global memory");
  CopyBarrierState& state = barrier_of(bar, site, "bulk_copy_async");
  if (state.issuer >= 0 && state.issuer != static_cast<int>(f->linear))
    copy_fault(site,
               "bulk_copy_async on the copy barrier %p, whose open phase thread %d copies to: one thread issues "
               "a phase's copies and arrives (the sm_80 form tracks the arriving thread's copies only)",
               bar, state.issuer);
  BulkCopy c;
  c.dst = d;
  c.bytes.assign(s, s + bytes);  // an instrumented read under AddressSanitizer
#ifdef CUTOPK_SIM_TRAFFIC
  count_access(s, bytes, false);
#endif
  c.phase = state.completed;
  c.thread = f->linear;
  c.site = site;
  memset(d, PENDING, bytes);
  state.copies.push_back(std::move(c));
  state.issued += bytes;
  state.issuer = static_cast<int>(f->linear);
}

__attribute__((noinline)) void barrier_arrive(void* bar, unsigned bytes) {
  const uintptr_t site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  Fiber* f = cur();
  CopyBarrierState& state = barrier_of(bar, site, "copy_barrier_arrive");
  if (state.issuer >= 0 && state.issuer != static_cast<int>(f->linear))
    copy_fault(site,
               "copy_barrier_arrive on the copy barrier %p, whose open phase's copies thread %d issued: the "
               "thread that copies arrives",
               bar, state.issuer);
  if (state.issued != bytes)
    copy_fault(site,
               "copy_barrier_arrive expects %u bytes, but the open phase's bulk copies on %p total %u: the "
               "arrival comes after the phase's copies and names their bytes (on sm_90 the phase would "
               "complete early or never)",
               bytes, bar, state.issued);
  state.completed++;
  state.issued = 0;
  state.issuer = -1;
  progressed();
}

__attribute__((noinline)) void barrier_wait(void* bar, unsigned phase) {
  const uintptr_t site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  Launch& L = g_launch;
  give_way();  // the copies are in flight: the other threads go on first
  for (;;) {
    CopyBarrierState& state = barrier_of(bar, site, "copy_barrier_wait");
    if ((state.completed & 1u) != (phase & 1u)) {  // the phase of that parity is complete
      land_completed(state);
      return;
    }
    if (++L.spins > L.spin_budget) {
      frames_at(site);
      fault(E_DEADLOCK, cur()->line,
            "copy_barrier_wait for the phase of parity %u of the copy barrier %p, which never completes (no "
            "thread arrives: copy_barrier_arrive) -- deadlock",
            phase & 1u, bar);
    }
    give_way();
  }
}

int async_block_end(Block& b) {
  for (CopyBarrierState& s : b.copy_barriers) {
    if (s.copies.empty()) continue;
    const BulkCopy& c = s.copies.front();
    const bool arrived = c.phase < s.completed;
    Fiber* issuer = &g_launch.fibers[b.first_fiber + c.thread];
    char who[160];
    describe_thread(who, sizeof who, issuer);
    frames_at(c.site);
    snprintf(g_error, sizeof g_error,
             "%s: the block ended with %zu bulk copies on the copy barrier %p not landed (%s; the first issued at "
             "the line named): on the GPU they would land in the shared memory of a block that has ended -- "
             "asynchronous copy misuse",
             who, s.copies.size(), s.address,
             arrived ? "their phase completed, but no thread waited for it" : "their phase never had its arrival");
    return g_launch.error = E_ASYNC;
  }
  return OK;
}

void async_exit(Fiber* f) {
  size_t open = 0;
  for (const PendingCopy& c : f->copies) open += c.group >= f->groups;
  char where[64];
  shared_place(where, sizeof where, f->block, f->copies.front().dst);
  copy_fault(f->copies.front().site,
             "the thread exited with %zu copy16_async copies pending (%zu of them never committed; the first "
             "into %s, issued at the line named): every copy must be committed and waited for "
             "(commit_copies(), wait_copies(0)) before the thread exits (on the GPU a copy would land in the "
             "shared memory of a block that has ended)",
             f->copies.size(), open, where);
}

}  // namespace cutopk_sim
