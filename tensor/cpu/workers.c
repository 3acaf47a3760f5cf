/* The GEMM and conv engines' compute pool (workers.h). */
#include "workers.h"

#include <immintrin.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#define MAX_WORKERS 256

/* One job at a time: a caller holds `busy` for the whole call. gen is a
 * sequence lock on the job's fields: odd while a caller rewrites them
 * (after every pool thread has left the previous job), even once published.
 * A pool thread joins a job by incrementing `active` and then checking that
 * gen is still the even value it saw; a late one that finds it changed
 * leaves without touching the job. */
typedef struct Pool {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_bool busy;
    atomic_uint_fast64_t gen; /* bumped per job */
    int nthreads;             /* pool threads started */
    int sleeping;             /* pool threads in cond_wait (under mu) */
    /* the current job */
    CtWorkFn fn;
    void *ctx;
    int64_t n;
    int nt;
    atomic_int_fast64_t next, done;
    atomic_int active; /* pool threads inside the job */
} Pool;

static Pool pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};
static pthread_once_t started = PTHREAD_ONCE_INIT;
static _Thread_local bool in_item;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)t.tv_sec + 1e-3 * (double)t.tv_nsec;
}

/* Claims and runs items of the current job until none is left; returns
 * how many it ran. */
static int64_t drain(int slot)
{
    int64_t i, ran = 0;
    while ((i = atomic_fetch_add(&pool.next, 1)) < pool.n) {
        pool.fn(pool.ctx, i, slot);
        atomic_fetch_add(&pool.done, 1);
        ran++;
    }
    return ran;
}

/* Whether the pool threads get a core (workers.h, "Busy machines"). */
static atomic_int misses, skip;

static void note_job(bool miss)
{
    if (!miss) {
        atomic_store(&misses, 0);
    } else if (atomic_fetch_add(&misses, 1) + 1 >= CT_WORKERS_MISSES_OFF) {
        atomic_store(&misses, 0);
        atomic_store(&skip, CT_WORKERS_SKIP_JOBS);
    }
}

int ct_workers_skipping(void)
{
    return atomic_load(&skip);
}

/* Whether this job runs inline because the pool was missing its cores. */
static bool skipping(void)
{
    int k = atomic_load(&skip);
    while (k > 0 && !atomic_compare_exchange_weak(&skip, &k, k - 1)) {
    }
    return k > 0;
}

static bool new_job(uint64_t g, uint64_t seen)
{
    return g != seen && !(g & 1);
}

/* Spins up to CT_WORKERS_SPIN_US for a published job other than seen, then
 * sleeps. The spin yields the core now and then: where threads outnumber
 * free cores, a spinning pool thread would otherwise take a share of the
 * core that the caller (who then does the items itself) needs. */
static uint64_t wait_job(uint64_t seen)
{
    double t0 = now_us();
    for (int k = 0;; k++) {
        uint64_t g = atomic_load(&pool.gen);
        if (new_job(g, seen)) return g;
        _mm_pause();
        if ((k & 255) == 255) {
            if (now_us() - t0 > CT_WORKERS_SPIN_US) break;
            sched_yield();
        }
    }
    pthread_mutex_lock(&pool.mu);
    pool.sleeping++;
    uint64_t g;
    while (!new_job(g = atomic_load(&pool.gen), seen))
        pthread_cond_wait(&pool.wake, &pool.mu);
    pool.sleeping--;
    pthread_mutex_unlock(&pool.mu);
    return g;
}

static void *worker_main(void *arg)
{
    const int slot = (int)(intptr_t)arg;
    in_item = true; /* nested calls from items run inline */
    uint64_t seen = 0;
    for (;;) {
        seen = wait_job(seen);
        atomic_fetch_add(&pool.active, 1);
        /* a caller may have started rewriting the job since gen was read */
        if (atomic_load(&pool.gen) == seen && slot < pool.nt) drain(slot);
        atomic_fetch_sub(&pool.active, 1);
    }
    return NULL;
}

static void start_pool(void)
{
    int n = omp_get_max_threads() - 1;
    n = n < MAX_WORKERS ? n : MAX_WORKERS;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < n; i++) {
        pthread_t th;
        if (pthread_create(&th, &attr, worker_main, (void *)(intptr_t)(i + 1)) != 0)
            break; /* fewer threads: the caller does their share */
        pool.nthreads++;
    }
    pthread_attr_destroy(&attr);
}

int ct_workers_max(void)
{
    return in_item || omp_in_parallel() ? 1 : omp_get_max_threads();
}

static void run_inline(int64_t n, CtWorkFn fn, void *ctx)
{
    bool outer = in_item;
    in_item = true;
    for (int64_t i = 0; i < n; i++) fn(ctx, i, 0);
    in_item = outer;
}

void ct_workers_run(int64_t n, int nt, CtWorkFn fn, void *ctx)
{
    if (n <= 0) return;
    if (nt > 1) pthread_once(&started, start_pool);
    bool idle = false;
    if (nt <= 1 || n == 1 || in_item || pool.nthreads == 0 || skipping() ||
        !atomic_compare_exchange_strong(&pool.busy, &idle, true)) {
        run_inline(n, fn, ctx);
        return;
    }
    atomic_fetch_add(&pool.gen, 1); /* odd: rewriting */
    for (int k = 0; atomic_load(&pool.active); k++)
        if ((k & 1023) == 1023) sched_yield();
    pthread_mutex_lock(&pool.mu);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.nt = nt;
    atomic_store(&pool.next, 0);
    atomic_store(&pool.done, 0);
    atomic_fetch_add(&pool.gen, 1); /* even: published */
    if (pool.sleeping) pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);

    in_item = true;
    const double t0 = now_us();
    const int64_t ran = drain(0);
    in_item = false;
    /* items claimed by pool threads may still run: wait for them (pool
     * threads that claim nothing more never touch fn or ctx) */
    const double t1 = now_us();
    for (int k = 0; atomic_load(&pool.done) < n; k++) {
        _mm_pause();
        if ((k & 1023) == 1023) sched_yield();
    }
    note_job(ran == n || now_us() - t1 > (t1 - t0) + CT_WORKERS_LATE_US);
    atomic_store(&pool.busy, false);
}
