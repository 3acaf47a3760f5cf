/* The data loader: batches in order, built inline or by worker threads that
 * prefetch into a bounded ring of slots.
 *
 * Batch k of an epoch is a pure function of (order, k, epoch, seed), so which
 * thread builds it does not matter. Workers claim batch numbers in order and
 * may run ahead of the consumer by at most `q` batches; batch k goes to slot
 * k % q, which is free because batch k - q has been taken. A generation
 * number invalidates batches being built when an epoch is abandoned. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

#define MAX_WORKERS 256
#define MAX_QUEUED  (1 << 16) /* num_workers * prefetch: batches held at once */
#define MSG_LEN     1024

typedef struct Slot {
    bool ready;
    CtStatus st;
    DataBatch b; /* one reference per tensor, released with batch_release */
    char msg[MSG_LEN];
} Slot;

struct DataLoader {
    const Dataset *ds;
    DataLoaderArgs a;
    Sampler *own_sampler; /* the default or distributed sampler */
    const Sampler *sampler;
    int64_t n_samples, n_batches;
    int64_t n_real; /* positions of the order below it are real samples */
    int64_t *order; /* this epoch's indices; written only while no worker runs */

    /* the caller's side */
    int64_t epoch, start, next;
    bool started;
    CtStatus status;
    char errmsg[MSG_LEN];
    DataBatch cur;       /* handed out by the last data_loader_next */
    int64_t cur_padding; /* its wrap-around duplicates */

    /* workers; everything below is guarded by mu */
    int nw, q;
    pthread_t *threads;
    Slot *slots;
    pthread_mutex_t mu;
    pthread_cond_t work, ready, idle;
    bool shutdown, active;
    uint64_t gen;
    int64_t claim, consumed, end;
    int in_flight;
};

static void batch_release(DataBatch *b)
{
    for (int f = 0; f < b->n; f++) tensor_free(b->t[f]);
    memset(b, 0, sizeof *b);
}

/* A batch field's copy on the loader's device: pinned (the default collate
 * already put it there; a user's collate output is copied once), then queued
 * on the device's stream without waiting. The pinned block may be freed as
 * soon as the copy is queued (tensor/async.c keeps it until the copy has
 * read it), so the batch's scope closes right away. */
static Tensor *to_device(Tensor *t, CtDevice dev)
{
    if (tensor_device(t).type == CT_DEVICE_CPU && !tensor_is_pinned(t))
        t = tensor_pin_memory(t);
    return tensor_to_device_async(t, dev);
}

/* Loads the samples of batch k, collates them and moves them to the device.
 * On success out holds one reference per tensor; on failure msg says which
 * sample failed and why. */
static CtStatus build_batch(const DataLoader *dl, int64_t k, int64_t epoch,
                            DataBatch *out, char *msg)
{
    memset(out, 0, sizeof *out);
    int64_t lo = k * dl->a.batch_size, hi = lo + dl->a.batch_size;
    if (hi > dl->n_samples) hi = dl->n_samples;
    int64_t n = hi - lo;
    DataSample *smp = calloc((size_t)n, sizeof *smp);
    CtScope *s = ct_scope_open();
    CtStatus st = CT_OK;
    if (!smp || !s)
        st = ct_error(CT_ERR_OOM, "data loader: batch %lld: out of memory", (long long)k);
    for (int64_t i = 0; i < n && st == CT_OK; i++) {
        int64_t idx = dl->order[lo + i];
        DataCtx ctx = {dl->a.seed, epoch, idx};
        st = data_dataset_get(dl->ds, idx, &ctx, &smp[i]);
        if (st != CT_OK)
            ct_error_wrap(st, "data loader: sample %lld (batch %lld, epoch %lld)",
                          (long long)idx, (long long)k, (long long)epoch);
    }
    bool gpu = dl->a.device.type != CT_DEVICE_CPU;
    if (st == CT_OK) {
        st = dl->a.collate ? dl->a.collate(smp, n, out, dl->a.collate_user)
                           : data_collate_into(smp, n, out, gpu);
        if (st == CT_OK && (out->n < 1 || out->n > DATA_MAX_FIELDS))
            st = ct_error(CT_ERR_INVALID, "collate returned %d fields", out->n);
        for (int f = 0; st == CT_OK && f < out->n; f++) {
            if (!out->t[f])
                st = ct_error(CT_ERR_NULL, "collate returned NULL for field %d", f);
            else if (gpu && !(out->t[f] = to_device(out->t[f], dl->a.device)))
                st = ct_error_wrap(CT_OK, "moving field %d to the device", f);
        }
        if (st != CT_OK)
            ct_error_wrap(st, "data loader: batch %lld (samples %lld..%lld)",
                          (long long)k, (long long)lo, (long long)hi - 1);
    }
    if (st != CT_OK) snprintf(msg, MSG_LEN, "%s", ct_last_error());
    if (st == CT_OK)
        for (int f = 0; f < out->n; f++) tensor_retain(out->t[f]);
    else
        memset(out, 0, sizeof *out); /* the scope frees what was made */
    if (s) ct_scope_close(s);
    free(smp);
    out->size = n;
    out->index = k;
    return st;
}

static void *worker_main(void *arg)
{
    DataLoader *dl = arg;
    pthread_mutex_lock(&dl->mu);
    for (;;) {
        while (!dl->shutdown &&
               !(dl->active && dl->claim < dl->end && dl->claim < dl->consumed + dl->q))
            pthread_cond_wait(&dl->work, &dl->mu);
        if (dl->shutdown) break;
        int64_t k = dl->claim++, epoch = dl->epoch;
        uint64_t gen = dl->gen;
        dl->in_flight++;
        pthread_mutex_unlock(&dl->mu);

        Slot res = {0};
        res.st = build_batch(dl, k, epoch, &res.b, res.msg);

        pthread_mutex_lock(&dl->mu);
        dl->in_flight--;
        if (gen == dl->gen) {
            res.ready = true;
            dl->slots[k % dl->q] = res;
            pthread_cond_broadcast(&dl->ready);
        } else {
            batch_release(&res.b);
        }
        if (dl->in_flight == 0) pthread_cond_broadcast(&dl->idle);
    }
    pthread_mutex_unlock(&dl->mu);
    return NULL;
}

/* Abandons the epoch: waits for batches being built and drops them and the
 * prefetched ones. Afterwards no worker touches `order`. */
static void stop_epoch(DataLoader *dl)
{
    dl->started = false;
    if (!dl->nw) return;
    pthread_mutex_lock(&dl->mu);
    dl->active = false;
    dl->gen++;
    while (dl->in_flight) pthread_cond_wait(&dl->idle, &dl->mu);
    for (int i = 0; i < dl->q; i++) {
        if (dl->slots[i].ready) batch_release(&dl->slots[i].b);
        dl->slots[i].ready = false;
    }
    pthread_mutex_unlock(&dl->mu);
}

static CtStatus start_epoch(DataLoader *dl)
{
    int64_t n = data_sampler_len(dl->sampler);
    if (n != dl->n_samples)
        return ct_error(CT_ERR_STATE,
                        "data loader: the %s sampler's length changed from %lld to %lld",
                        dl->sampler->vt->type, (long long)dl->n_samples, (long long)n);
    CtStatus st = data_sampler_fill(dl->sampler, dl->epoch, dl->order);
    if (st != CT_OK) return st;
    dl->next = dl->start;
    dl->started = true;
    if (dl->nw) {
        pthread_mutex_lock(&dl->mu);
        dl->claim = dl->consumed = dl->start;
        dl->end = dl->n_batches;
        dl->active = true;
        pthread_cond_broadcast(&dl->work);
        pthread_mutex_unlock(&dl->mu);
    }
    return CT_OK;
}

/* Records an error that ends data_loader_next until set_epoch or skip. */
static bool fail(DataLoader *dl, CtStatus st, const char *msg)
{
    dl->status = st;
    snprintf(dl->errmsg, sizeof dl->errmsg, "%s", msg);
    ct_error(st, "%s", dl->errmsg);
    stop_epoch(dl);
    return false;
}

/* The next batch from the workers' ring. */
static Slot take(DataLoader *dl)
{
    pthread_mutex_lock(&dl->mu);
    Slot *s = &dl->slots[dl->next % dl->q];
    while (!s->ready) pthread_cond_wait(&dl->ready, &dl->mu);
    Slot res = *s;
    s->ready = false;
    dl->consumed = dl->next + 1;
    pthread_cond_broadcast(&dl->work);
    pthread_mutex_unlock(&dl->mu);
    return res;
}

/* Positions [k * batch_size, + size) of the order at or past n_real. */
static int64_t batch_padding(const DataLoader *dl, int64_t k, int64_t size)
{
    int64_t lo = k * dl->a.batch_size, hi = lo + size;
    if (lo < dl->n_real) lo = dl->n_real;
    return hi > lo ? hi - lo : 0;
}

bool data_loader_next(DataLoader *dl, DataBatch *out)
{
    if (out) memset(out, 0, sizeof *out);
    if (!dl || !out) {
        ct_error(CT_ERR_NULL, "data_loader_next: NULL %s", dl ? "batch" : "loader");
        return false;
    }
    batch_release(&dl->cur);
    dl->cur_padding = 0;
    if (dl->status != CT_OK) {
        ct_error(dl->status, "%s", dl->errmsg);
        return false;
    }
    if (!dl->started) {
        CtStatus st = start_epoch(dl);
        if (st != CT_OK) {
            char msg[MSG_LEN];
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            return fail(dl, st, msg);
        }
    }
    if (dl->next >= dl->n_batches) {
        stop_epoch(dl);
        dl->epoch++;
        dl->start = 0;
        return false;
    }
    Slot res;
    if (dl->nw) {
        res = take(dl);
    } else {
        res.st = build_batch(dl, dl->next, dl->epoch, &res.b, res.msg);
    }
    dl->next++;
    if (res.st != CT_OK) return fail(dl, res.st, res.msg);
    dl->cur = res.b;
    dl->cur_padding = batch_padding(dl, res.b.index, res.b.size);
    *out = res.b;
    return true;
}

CtStatus data_loader_status(const DataLoader *dl)
{
    return dl ? dl->status : CT_ERR_NULL;
}

const DataLoaderArgs *data_loader_args(const DataLoader *dl)
{
    if (!dl) {
        ct_error(CT_ERR_NULL, "data_loader_args: NULL loader");
        return NULL;
    }
    return &dl->a;
}

int64_t data_loader_len(const DataLoader *dl)
{
    if (!dl) {
        ct_error(CT_ERR_NULL, "data_loader_len: NULL loader");
        return -1;
    }
    return dl->n_batches;
}

int64_t data_loader_batch_padding(const DataLoader *dl)
{
    if (!dl) {
        ct_error(CT_ERR_NULL, "data_loader_batch_padding: NULL loader");
        return -1;
    }
    return dl->cur_padding;
}

int64_t data_loader_epoch(const DataLoader *dl)
{
    return dl ? dl->epoch : -1;
}

/* Drops the current position and the handed-out batch. */
static void restart(DataLoader *dl)
{
    stop_epoch(dl);
    batch_release(&dl->cur);
    dl->cur_padding = 0;
    dl->status = CT_OK;
    dl->errmsg[0] = 0;
}

CtStatus data_loader_set_epoch(DataLoader *dl, int64_t epoch)
{
    if (!dl) return ct_error(CT_ERR_NULL, "data_loader_set_epoch: NULL loader");
    if (epoch < 0)
        return ct_error(CT_ERR_INVALID, "data loader: negative epoch %lld",
                        (long long)epoch);
    restart(dl);
    dl->epoch = epoch;
    dl->start = 0;
    return CT_OK;
}

CtStatus data_loader_skip(DataLoader *dl, int64_t n)
{
    if (!dl) return ct_error(CT_ERR_NULL, "data_loader_skip: NULL loader");
    if (n < 0 || n > dl->n_batches)
        return ct_error(CT_ERR_INVALID,
                        "data loader: cannot skip %lld batches of an epoch of %lld",
                        (long long)n, (long long)dl->n_batches);
    restart(dl);
    dl->start = n;
    return CT_OK;
}

/* ---------------------------------------------------------- create, free */

static CtStatus check_args(const Dataset *ds, const DataLoaderArgs *a)
{
    if (!ds || !a)
        return ct_error(CT_ERR_NULL, "data loader: NULL %s", ds ? "args" : "dataset");
    if (a->batch_size <= 0)
        return ct_error(CT_ERR_INVALID,
                        "data loader: batch_size must be positive, got %lld",
                        (long long)a->batch_size);
    if (a->num_workers < 0 || a->num_workers > MAX_WORKERS)
        return ct_error(CT_ERR_INVALID, "data loader: num_workers %d outside [0, %d]",
                        a->num_workers, MAX_WORKERS);
    if (a->prefetch < 0)
        return ct_error(CT_ERR_INVALID, "data loader: negative prefetch %d", a->prefetch);
    int64_t queued = (int64_t)a->num_workers * (a->prefetch ? a->prefetch : 2);
    if (queued > MAX_QUEUED)
        return ct_error(
            CT_ERR_INVALID,
            "data loader: num_workers %d x prefetch %d = %lld queued batches, "
            "over the limit of %d",
            a->num_workers, a->prefetch, (long long)queued, MAX_QUEUED);
    if (a->sampler && a->shuffle)
        return ct_error(CT_ERR_INVALID,
                        "data loader: a sampler and shuffle are mutually exclusive");
    if (a->shard_world_size < 0)
        return ct_error(CT_ERR_INVALID, "data loader: negative shard_world_size %d",
                        a->shard_world_size);
    int world = a->shard_world_size > 1 ? a->shard_world_size : 1;
    if (a->shard_rank < 0 || a->shard_rank >= world)
        return ct_error(
            CT_ERR_INVALID,
            "data loader: shard_rank %d outside [0, %d) (shard_world_size %d)",
            a->shard_rank, world, a->shard_world_size);
    int64_t n = data_dataset_len(ds);
    if (n < 0) return ct_last_status();
    if (n == 0)
        return ct_error(CT_ERR_INVALID, "data loader: the %s dataset is empty",
                        ds->vt->type);
    return CT_OK;
}

/* Starts n workers; dl->nw counts the ones running, which data_loader_free
 * joins, whether or not all of them started. */
static CtStatus start_workers(DataLoader *dl, int n)
{
    dl->q = n * dl->a.prefetch; /* check_args bounds it */
    dl->slots = calloc((size_t)dl->q, sizeof *dl->slots);
    dl->threads = calloc((size_t)n, sizeof *dl->threads);
    if (!dl->slots || !dl->threads)
        return ct_error(CT_ERR_OOM, "data loader: out of memory");
    for (; dl->nw < n; dl->nw++)
        if (pthread_create(&dl->threads[dl->nw], NULL, worker_main, dl))
            return ct_error(CT_ERR_STATE, "data loader: cannot start worker thread %d",
                            dl->nw);
    return CT_OK;
}

/* The epoch's order: args->sampler, or a sequential or random one, wrapped
 * in this process's shard when sharded. */
static CtStatus make_sampler(DataLoader *dl, const Dataset *ds, const DataLoaderArgs *a)
{
    Sampler *s = a->sampler;
    if (!s) {
        int64_t n = data_dataset_len(ds);
        s = dl->own_sampler = a->shuffle ? data_sampler_random_create(n, a->seed)
                                         : data_sampler_sequential_create(n);
        if (!s) return ct_last_status();
    }
    if (a->shard_world_size > 1) {
        s = dl->own_sampler = data_sampler_distributed_wrap(
            s, s != a->sampler, a->shard_rank, a->shard_world_size, false);
        if (!s) return ct_last_status();
    }
    dl->sampler = s;
    return CT_OK;
}

/* The epoch's length in samples and batches, and the order's buffer. */
static CtStatus size_epoch(DataLoader *dl)
{
    dl->n_samples = data_sampler_len(dl->sampler);
    if (dl->n_samples < 0)
        return ct_error(CT_ERR_INVALID, "data loader: the %s sampler has length %lld",
                        dl->sampler->vt->type, (long long)dl->n_samples);
    dl->n_real = data_sampler_num_real(dl->sampler);
    int64_t n = dl->n_samples, bs = dl->a.batch_size;
    dl->n_batches = n / bs + (!dl->a.drop_last && n % bs);
    if ((uint64_t)n <= SIZE_MAX / sizeof *dl->order)
        dl->order = malloc((size_t)(n ? n : 1) * sizeof *dl->order);
    if (!dl->order)
        return ct_error(CT_ERR_OOM,
                        "data loader: out of memory for an order of %lld samples",
                        (long long)n);
    return CT_OK;
}

DataLoader *data_loader_create(const Dataset *ds, const DataLoaderArgs *args)
{
    if (check_args(ds, args) != CT_OK) return NULL;
    DataLoader *dl = calloc(1, sizeof *dl);
    if (!dl) {
        ct_error(CT_ERR_OOM, "data loader: out of memory");
        return NULL;
    }
    dl->ds = ds;
    dl->a = *args;
    pthread_mutex_init(&dl->mu, NULL);
    pthread_cond_init(&dl->work, NULL);
    pthread_cond_init(&dl->ready, NULL);
    pthread_cond_init(&dl->idle, NULL);
    if (!dl->a.prefetch) dl->a.prefetch = 2;
    CtStatus st = make_sampler(dl, ds, args);
    if (st == CT_OK) st = size_epoch(dl);
    if (st == CT_OK && args->num_workers) st = start_workers(dl, args->num_workers);
    if (st != CT_OK) {
        char msg[MSG_LEN];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        data_loader_free(dl);
        ct_error(st, "%s", msg);
        return NULL;
    }
    return dl;
}

void data_loader_free(DataLoader *dl)
{
    if (!dl) return;
    pthread_mutex_lock(&dl->mu);
    dl->shutdown = true;
    dl->gen++;
    pthread_cond_broadcast(&dl->work);
    pthread_mutex_unlock(&dl->mu);
    for (int i = 0; i < dl->nw; i++) pthread_join(dl->threads[i], NULL);
    for (int i = 0; dl->slots && i < dl->q; i++)
        if (dl->slots[i].ready) batch_release(&dl->slots[i].b);
    batch_release(&dl->cur);
    pthread_cond_destroy(&dl->work);
    pthread_cond_destroy(&dl->ready);
    pthread_cond_destroy(&dl->idle);
    pthread_mutex_destroy(&dl->mu);
    data_sampler_free(dl->own_sampler);
    free(dl->slots);
    free(dl->threads);
    free(dl->order);
    free(dl);
}
