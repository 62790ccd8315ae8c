/* The thread pool (a part of compiled.c) and the library's entry points. */

/* ---- Threads ---------------------------------------------------------------------------------
 * One call splits its rows between r->threads threads itself: the calling thread and workers of a
 * pool kept alive between calls, as OpenMP runtimes do. A Python pool handed each block over in
 * some 150-200 us (a queue, a GIL turn, an event) and blocks of a few hundred us could not pay
 * for that; here a job is published by one atomic store, and a worker that finished its last
 * job less than spin_ns ago sees it within a few hundred ns (it spins on the job word, then
 * sleeps on a condition variable, where waking it costs a futex call and the scheduler's delay).
 *
 * A job: the request cut into `total` pieces of contiguous rows (CHUNK-row groups for
 * METHOD_COLUMNS), PIECES_PER_THREAD per thread, claimed one at a time by whichever thread is
 * free (ties and NaNs make rows cost unequal time, and a worker the scheduler wakes late finds
 * the caller has taken its pieces instead of being waited for). Every piece is select_block on
 * its rows: its own scratch, its own rows of out; the answer is the same for every thread count.
 * The job word `claim` holds the job's generation (high 32 bits), its piece count and the next
 * piece (16 bits each); a claim is a compare-and-swap on it, so a worker that wakes for a job
 * already over can claim nothing of the next one by mistake: its generation differs.
 *
 * Safety. One caller at a time uses the pool (`call`, taken with trylock): a second thread that
 * calls meanwhile runs its rows alone, never waits. A child forked while the pool exists has no
 * workers (only the forking thread survives a fork): pool_after_fork resets the pool there and
 * the child's first split starts workers of its own. Workers block every signal (the process's
 * handlers run on its own threads). The library's destructor (process exit, dlclose) stops and
 * joins the workers, which hold no lock while they wait. A worker that cannot be started leaves
 * its share to the others: the caller alone takes every piece there is.
 *
 * Placement (Linux): a worker that takes part in a job keeps off the CPU its caller ran on when
 * it published the job (its own affinity: the process's CPUs but that one; set again only when
 * the caller's CPU changes). On a virtual machine whose idle cores sleep, the scheduler may wake
 * a worker on the caller's own core, where the two take turns instead of running side by side
 * (the backend's Python pool met it too: threads.py's _keep_off). */
#define POOL_MAX 255
#define PIECES_PER_THREAD 4
#define PIECES_MAX 0xffff

struct pool {
  pthread_mutex_t lock; /* guards sleepers, caller_waits, stopping, and the waits below */
  pthread_cond_t wake;  /* workers sleep here until a new job (or stopping) */
  pthread_cond_t done;  /* the caller sleeps here until the last piece is done */
  pthread_mutex_t call; /* held by the one caller that uses the pool */
  _Atomic uint64_t claim;
  _Atomic int64_t finished; /* pieces of the current job done */
  _Atomic int threads;      /* the current job's threads: workers 1 .. threads - 1 take part */
  _Atomic int status;       /* the first piece's failure (STATUS_*), else STATUS_OK */
  _Atomic int stopping;
  _Atomic int caller_cpu; /* the CPU the current job's caller ran on, or -1 */
  int sleepers, caller_waits, workers;
  pid_t pid; /* the process that started the workers */
  struct cutopk_rows job;
  int64_t unit, per; /* rows per unit (CHUNK for columns), units per piece */
  pthread_t ids[POOL_MAX];
};

static struct pool pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                           .wake = PTHREAD_COND_INITIALIZER,
                           .done = PTHREAD_COND_INITIALIZER,
                           .call = PTHREAD_MUTEX_INITIALIZER};
/* How long a worker (and the waiting caller) spins before sleeping: a worker idle for longer
 * sleeps and costs a wake-up (tens of us on a virtual machine) at the next job. */
static _Atomic int64_t spin_ns = 200000;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* The child of a fork: the workers did not survive it, and the forking parent's locks may have
 * been held by them or by a caller. A fresh pool, its workers started by the first split. */
static void pool_after_fork(void) {
  pthread_mutex_t fresh_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
  pool.lock = fresh_lock;
  pool.call = fresh_lock;
  pool.wake = fresh_cond;
  pool.done = fresh_cond;
  pool.sleepers = pool.caller_waits = pool.workers = 0;
  atomic_store(&pool.stopping, 0);
}

static void register_fork_handler(void) {
  pthread_atfork(NULL, NULL, pool_after_fork);
}

/* Piece `piece` of the current job: select_block on its rows. */
static void run_piece(int64_t piece) {
  struct cutopk_rows sub = pool.job;
  const int64_t first = piece * pool.per * pool.unit;
  const int64_t rows = pool.job.rows - first < pool.per * pool.unit ? pool.job.rows - first : pool.per * pool.unit;
  sub.data += first * sub.row_stride;
  sub.out += first * sub.k;
  if (sub.values != NULL) sub.values += first * sub.k * sub.width;
  sub.rows = rows;
  int status = select_block(&sub);
  int ok = STATUS_OK;
  if (status != STATUS_OK) atomic_compare_exchange_strong(&pool.status, &ok, status);
}

/* Claim and run pieces of job `gen` until none is left (or the job is another). */
static void take_pieces(uint32_t gen) {
  uint64_t c = atomic_load_explicit(&pool.claim, memory_order_acquire);
  for (;;) {
    const uint64_t next = c & 0xffff, total = (c >> 16) & 0xffff;
    if ((uint32_t)(c >> 32) != gen || next >= total) return;
    if (!atomic_compare_exchange_weak_explicit(&pool.claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire))
      continue; /* c holds the word as it is now */
    run_piece((int64_t)next);
    if (atomic_fetch_add_explicit(&pool.finished, 1, memory_order_acq_rel) + 1 == (int64_t)total) {
      pthread_mutex_lock(&pool.lock); /* the last piece: wake the caller if it sleeps */
      if (pool.caller_waits) pthread_cond_signal(&pool.done);
      pthread_mutex_unlock(&pool.lock);
    }
    c = atomic_load_explicit(&pool.claim, memory_order_acquire);
  }
}

/* A worker's wait for a job after `seen`: spin on the job word for spin_ns, then sleep. Returns
 * the new job's generation; stopping: returns `seen`. */
static uint32_t wait_for_job(uint32_t seen) {
  const int64_t spin = atomic_load_explicit(&spin_ns, memory_order_relaxed);
  int64_t deadline = 0;
  for (uint32_t i = 0;; i++) {
    uint32_t gen = (uint32_t)(atomic_load_explicit(&pool.claim, memory_order_acquire) >> 32);
    if (gen != seen) return gen;
    if (atomic_load_explicit(&pool.stopping, memory_order_relaxed)) return seen;
    if ((i & 63) == 0) { /* the clock read every 64 turns: some 20 ns each */
      int64_t t = now_ns();
      if (deadline == 0) deadline = t + spin;
      if (t >= deadline) break;
    }
    cpu_relax();
  }
  pthread_mutex_lock(&pool.lock);
  uint32_t gen;
  while ((gen = (uint32_t)(atomic_load(&pool.claim) >> 32)) == seen && !atomic_load(&pool.stopping)) {
    pool.sleepers++;
    pthread_cond_wait(&pool.wake, &pool.lock);
    pool.sleepers--;
  }
  pthread_mutex_unlock(&pool.lock);
  return gen;
}

#ifdef __linux__
static cpu_set_t process_cpus; /* the CPUs the first splitting caller could run on */
static int process_cpu_count;

/* This worker kept off `cpu` (see "Placement"); `off`: the CPU it keeps off now. */
static void keep_off(int cpu, int* off) {
  if (cpu == *off || cpu < 0 || cpu >= CPU_SETSIZE || process_cpu_count < 2 || !CPU_ISSET(cpu, &process_cpus)) return;
  cpu_set_t others = process_cpus;
  CPU_CLR(cpu, &others);
  if (pthread_setaffinity_np(pthread_self(), sizeof others, &others) == 0) *off = cpu;
}
#endif

static void* worker(void* arg) {
  const int id = (int)(intptr_t)arg & 0xff; /* 1 .. POOL_MAX */
  uint32_t seen = (uint32_t)((uintptr_t)arg >> 8);
  int off = -1;
  for (;;) {
    uint32_t gen = wait_for_job(seen);
    if (gen == seen) return NULL; /* stopping */
    seen = gen;
    if (id >= atomic_load_explicit(&pool.threads, memory_order_relaxed)) continue;
#ifdef __linux__
    keep_off(atomic_load_explicit(&pool.caller_cpu, memory_order_relaxed), &off);
#else
    (void)off;
#endif
    take_pieces(gen);
  }
}

/* Workers up to `want` (the caller holds `call`): those that cannot be started are done without. */
static void pool_grow(int want, uint32_t gen) {
  if (want > POOL_MAX) want = POOL_MAX;
  if (pool.workers >= want) return;
  pthread_once(&fork_handler_once, register_fork_handler);
#ifdef __linux__
  if (process_cpu_count == 0 && sched_getaffinity(0, sizeof process_cpus, &process_cpus) == 0)
    process_cpu_count = CPU_COUNT(&process_cpus);
#endif
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before); /* the workers inherit the mask */
  while (pool.workers < want) {
    uintptr_t arg = (uintptr_t)gen << 8 | (uintptr_t)(pool.workers + 1);
    if (pthread_create(&pool.ids[pool.workers], NULL, worker, (void*)arg) != 0) break;
    pool.workers++;
  }
  pthread_sigmask(SIG_SETMASK, &before, NULL);
  pool.pid = getpid();
}

/* The caller's wait for the last piece (its own share done): spin, then sleep. */
static void wait_finished(int64_t total) {
  const int64_t spin = atomic_load_explicit(&spin_ns, memory_order_relaxed);
  int64_t deadline = 0;
  for (uint32_t i = 0; atomic_load_explicit(&pool.finished, memory_order_acquire) != total; i++) {
    if ((i & 63) == 0) {
      int64_t t = now_ns();
      if (deadline == 0) deadline = t + spin;
      if (t >= deadline) break;
    }
    cpu_relax();
  }
  pthread_mutex_lock(&pool.lock);
  while (atomic_load_explicit(&pool.finished, memory_order_acquire) != total) {
    pool.caller_waits = 1;
    pthread_cond_wait(&pool.done, &pool.lock);
  }
  pool.caller_waits = 0;
  pthread_mutex_unlock(&pool.lock);
}

/* The rows of r on r->threads threads (the caller holds `call`). */
static int select_split(const struct cutopk_rows* r, int threads, int64_t unit, int64_t units) {
  int64_t total = (int64_t)threads * PIECES_PER_THREAD;
  if (total > units) total = units;
  if (total > PIECES_MAX) total = PIECES_MAX;
  const int64_t per = (units + total - 1) / total;
  total = (units + per - 1) / per;
  uint32_t gen = (uint32_t)(atomic_load(&pool.claim) >> 32) + 1;
  pool_grow(threads - 1, gen - 1);
  pool.job = *r;
  pool.unit = unit;
  pool.per = per;
  atomic_store_explicit(&pool.threads, threads, memory_order_relaxed);
#ifdef __linux__
  atomic_store_explicit(&pool.caller_cpu, sched_getcpu(), memory_order_relaxed);
#endif
  atomic_store_explicit(&pool.finished, 0, memory_order_relaxed);
  atomic_store_explicit(&pool.status, STATUS_OK, memory_order_relaxed);
  pthread_mutex_lock(&pool.lock); /* published under the lock: a worker about to sleep sees it */
  atomic_store_explicit(&pool.claim, (uint64_t)gen << 32 | (uint64_t)total << 16, memory_order_release);
  if (pool.sleepers) pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);
  take_pieces(gen);
  wait_finished(total);
  return atomic_load(&pool.status);
}

/* The top K of every row: r->out gets each row's K columns in the order asked for (r->values, where
 * given, their values); the rows are shared between r->threads threads (see "Threads" above). */
EXPORT int cutopk_compiled_select(const struct cutopk_rows* r) {
  if (!request_ok(r)) return STATUS_BAD_REQUEST;
  const int64_t unit = r->method == METHOD_COLUMNS ? CHUNK : 1, units = (r->rows + unit - 1) / unit;
  int threads = r->threads < POOL_MAX + 1 ? r->threads : POOL_MAX + 1;
  if (threads > units) threads = (int)units;
  if (threads <= 1 || pthread_mutex_trylock(&pool.call) != 0) return select_block(r);
  int status = select_split(r, threads, unit, units);
  pthread_mutex_unlock(&pool.call);
  return status;
}

/* Tests: the spin before sleeping, in ns (0: sleep at once; the sleeping paths run every time). */
EXPORT void cutopk_compiled_set_spin(int64_t ns) {
  atomic_store(&spin_ns, ns < 0 ? 0 : ns);
}

/* Tests: the pool's workers in this process. */
EXPORT int cutopk_compiled_workers(void) {
  return pool.pid == getpid() ? pool.workers : 0;
}

/* Process exit or dlclose: the workers stopped and joined (their code is about to go). */
__attribute__((destructor)) static void pool_stop(void) {
  if (pool.workers == 0 || pool.pid != getpid()) return;
  pthread_mutex_lock(&pool.lock);
  atomic_store(&pool.stopping, 1);
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);
  for (int i = 0; i < pool.workers; i++) pthread_join(pool.ids[i], NULL);
  pool.workers = 0;
}
