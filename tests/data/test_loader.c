/* The data loader: batching, shuffling, samplers, workers (identical batches
 * for any count), skip/resume, and errors raised in workers. */
#include <stdio.h>
#include <stdlib.h>

#include "ctrainer/data.h"
#include "testutil.h"

/* A dataset of n samples: t[0] = (2) f32 {i, i + U(0,1) keyed by ctx},
 * t[1] = i64 i. It counts get() calls and fails on index `fail_at`. */
typedef struct Probe {
    Dataset base;
    int64_t n, fail_at;
    int calls; /* atomic */
} Probe;

static int64_t probe_len(const Dataset *d)
{
    return ((const Probe *)d)->n;
}

static CtStatus probe_get(const Dataset *d, int64_t i, const DataCtx *ctx,
                          DataSample *out)
{
    Probe *p = (Probe *)d;
    __atomic_add_fetch(&p->calls, 1, __ATOMIC_RELAXED);
    if (i == p->fail_at)
        return ct_error(CT_ERR_FORMAT, "probe: sample %lld is broken", (long long)i);
    /* the random augmentation: depends on (seed, epoch, index) only */
    CtGenerator g = data_ctx_generator(ctx, 42);
    Tensor *noise = tensor_rand(&g, 1, (const int64_t[]){1}, CT_F32, ct_cpu());
    Tensor *base = tensor_full(1, (const int64_t[]){1}, (double)i, CT_F32, ct_cpu());
    out->t[0] = tensor_cat(2, (Tensor *[]){base, tensor_add(base, noise)}, 0);
    out->t[1] = tensor_scalar((double)i, CT_I64, ct_cpu());
    out->n = 2;
    return out->t[0] && out->t[1] ? CT_OK : ct_last_status();
}

static void probe_free(Dataset *d)
{
    (void)d;
}

static const DatasetVtable probe_vt = {"probe", probe_len, probe_get, probe_free};

static Probe probe(int64_t n)
{
    return (Probe){{&probe_vt}, n, -1, 0};
}

/* Labels of every batch of one epoch into out (returns the count) and sizes. */
static int64_t epoch_labels(DataLoader *dl, int64_t *out, int64_t *sizes, int64_t *nb)
{
    DataBatch b;
    int64_t n = 0, k = 0, first = -1;
    while (data_loader_next(dl, &b)) {
        if (first < 0) first = b.index;
        ck_assert_int_eq(b.index, first + k);
        if (sizes) sizes[k] = b.size;
        k++;
        tensor_copy_to_host(b.t[1], out + n, CT_I64);
        n += b.size;
    }
    ck_assert_int_eq(data_loader_status(dl), CT_OK);
    if (nb) *nb = k;
    return n;
}

START_TEST(test_sequential_batches)
{
    TU_MEM_BEGIN;
    Probe p = probe(10);
    DataLoader *dl = data_loader_create(&p.base, &(DataLoaderArgs){.batch_size = 4});
    ck_assert_int_eq(data_loader_len(dl), 3);
    int64_t lab[16], sizes[4], nb;
    ck_assert_int_eq(epoch_labels(dl, lab, sizes, &nb), 10);
    ck_assert_int_eq(nb, 3);
    ck_assert_int_eq(sizes[0], 4);
    ck_assert_int_eq(sizes[2], 2);
    for (int i = 0; i < 10; i++) ck_assert_int_eq(lab[i], i);
    ck_assert_int_eq(data_loader_epoch(dl), 1); /* a full pass moves on */
    data_loader_free(dl);
    /* drop_last, and the stacked shapes */
    dl = data_loader_create(&p.base,
                            &(DataLoaderArgs){.batch_size = 4, .drop_last = true});
    ck_assert_int_eq(data_loader_len(dl), 2);
    DataBatch b;
    ck_assert(data_loader_next(dl, &b));
    ck_assert_int_eq(b.n, 2);
    tu_assert_shape(b.t[0], 2, 4, 2);
    tu_assert_shape(b.t[1], 1, 4);
    ck_assert_int_eq(tensor_dtype(b.t[1]), CT_I64);
    ck_assert_int_eq(epoch_labels(dl, lab, NULL, &nb), 4); /* the rest of epoch 0 */
    ck_assert_int_eq(nb, 1);
    data_loader_free(dl);
    TU_MEM_END;
}
END_TEST

/* data_loader_args: a copy of the creation arguments, defaults resolved. */
START_TEST(test_loader_args)
{
    TU_MEM_BEGIN;
    Probe p = probe(10);
    DataLoaderArgs in = {.batch_size = 3, .drop_last = true, .seed = 9, .num_workers = 1};
    DataLoader *dl = data_loader_create(&p.base, &in);
    in.batch_size = 7; /* the loader keeps its own copy */
    const DataLoaderArgs *a = data_loader_args(dl);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(a->batch_size, 3);
    ck_assert(a->drop_last);
    ck_assert(!a->shuffle);
    ck_assert_uint_eq(a->seed, 9);
    ck_assert_int_eq(a->num_workers, 1);
    ck_assert_int_eq(a->prefetch, 2); /* 0 resolved to its default */
    ck_assert(a->collate == NULL);
    data_loader_free(dl);
    dl = data_loader_create(&p.base, &(DataLoaderArgs){.batch_size = 4, .prefetch = 5});
    ck_assert_int_eq(data_loader_args(dl)->prefetch, 5);
    data_loader_free(dl);
    ck_assert_ptr_null(data_loader_args(NULL));
    tu_assert_error(CT_ERR_NULL, "data_loader_args: NULL loader");
    TU_MEM_END;
}
END_TEST

START_TEST(test_shuffle_epochs)
{
    TU_MEM_BEGIN;
    Probe p = probe(20);
    DataLoader *dl = data_loader_create(
        &p.base, &(DataLoaderArgs){.batch_size = 3, .shuffle = true, .seed = 5});
    int64_t e0[20], e1[20], again[20];
    ck_assert_int_eq(epoch_labels(dl, e0, NULL, NULL), 20);
    ck_assert_int_eq(epoch_labels(dl, e1, NULL, NULL), 20);
    int seen[20] = {0}, same = 0, moved = 0;
    for (int i = 0; i < 20; i++) {
        seen[e0[i]]++;
        same += e0[i] == e1[i];
        moved += e0[i] != i;
    }
    for (int i = 0; i < 20; i++) ck_assert_int_eq(seen[i], 1);
    ck_assert_int_lt(same, 20);
    ck_assert_int_gt(moved, 0);
    /* the order is the random sampler's, a function of (seed, epoch) */
    int64_t perm[20];
    Sampler *s = data_sampler_random_create(20, 5);
    ck_assert_int_eq(data_sampler_fill(s, 1, perm), CT_OK);
    for (int i = 0; i < 20; i++) ck_assert_int_eq(perm[i], e1[i]);
    data_sampler_free(s);
    ck_assert_int_eq(data_loader_set_epoch(dl, 0), CT_OK);
    epoch_labels(dl, again, NULL, NULL);
    for (int i = 0; i < 20; i++) ck_assert_int_eq(again[i], e0[i]);
    data_loader_free(dl);
    TU_MEM_END;
}
END_TEST

/* All values of two epochs of batches (inputs then labels), with nw workers. */
static int64_t run_epochs(int nw, double *vals)
{
    Probe p = probe(23);
    DataLoader *dl = data_loader_create(&p.base, &(DataLoaderArgs){.batch_size = 4,
                                                                   .shuffle = true,
                                                                   .seed = 11,
                                                                   .num_workers = nw,
                                                                   .prefetch = 1});
    ck_assert_ptr_nonnull(dl);
    int64_t n = 0;
    for (int e = 0; e < 2; e++) {
        ck_assert_int_eq(data_loader_set_epoch(dl, e), CT_OK);
        DataBatch b;
        while (data_loader_next(dl, &b)) {
            tensor_copy_to_host(b.t[0], vals + n, CT_F64);
            n += tensor_numel(b.t[0]);
            tensor_copy_to_host(b.t[1], vals + n, CT_F64);
            n += tensor_numel(b.t[1]);
        }
    }
    data_loader_free(dl);
    return n;
}

START_TEST(test_workers_identical)
{
    TU_MEM_BEGIN;
    double ref[256], got[256];
    int64_t n = run_epochs(0, ref);
    ck_assert_int_eq(n, 2 * 23 * 3);
    /* the augmentation is there: x[1] = x[0] + U(0, 1) */
    ck_assert(ref[1] - ref[0] > 0 && ref[1] - ref[0] < 1);
    for (int nw = 1; nw <= 3; nw++) {
        ck_assert_int_eq(run_epochs(nw, got), n);
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(got[i] == ref[i], "%d workers: value %lld is %g, expected %g",
                          nw, (long long)i, got[i], ref[i]);
    }
    TU_MEM_END;
}
END_TEST

START_TEST(test_skip_resume)
{
    TU_MEM_BEGIN;
    for (int nw = 0; nw <= 2; nw += 2) {
        Probe p = probe(10);
        DataLoader *dl = data_loader_create(
            &p.base,
            &(DataLoaderArgs){.batch_size = 3, .shuffle = true, .num_workers = nw});
        int64_t full[10], rest[10];
        ck_assert_int_eq(data_loader_set_epoch(dl, 3), CT_OK);
        epoch_labels(dl, full, NULL, NULL);
        ck_assert_int_eq(data_loader_set_epoch(dl, 3), CT_OK);
        ck_assert_int_eq(data_loader_skip(dl, 2), CT_OK);
        __atomic_store_n(&p.calls, 0, __ATOMIC_RELAXED);
        DataBatch b;
        int64_t n = 0;
        while (data_loader_next(dl, &b)) {
            ck_assert_int_eq(b.index, 2 + n / 3);
            tensor_copy_to_host(b.t[1], rest + n, CT_I64);
            n += b.size;
        }
        ck_assert_int_eq(n, 4);
        for (int i = 0; i < 4; i++) ck_assert_int_eq(rest[i], full[6 + i]);
        /* skipped batches were never loaded */
        ck_assert_int_eq(__atomic_load_n(&p.calls, __ATOMIC_RELAXED), 4);
        ck_assert_int_eq(data_loader_skip(dl, 5), CT_ERR_INVALID);
        tu_assert_error(CT_ERR_INVALID, "cannot skip 5 batches of an epoch of 4");
        data_loader_free(dl);
    }
    TU_MEM_END;
}
END_TEST

START_TEST(test_worker_error)
{
    TU_MEM_BEGIN;
    for (int nw = 0; nw <= 3; nw++) {
        Probe p = probe(12);
        p.fail_at = 7;
        DataLoader *dl = data_loader_create(
            &p.base, &(DataLoaderArgs){.batch_size = 4, .num_workers = nw});
        DataBatch b;
        ck_assert(data_loader_next(dl, &b));
        ck_assert(!data_loader_next(dl, &b));
        ck_assert_int_eq(data_loader_status(dl), CT_ERR_FORMAT);
        tu_assert_error(
            CT_ERR_FORMAT,
            "data loader: sample 7 (batch 1, epoch 0): probe: sample 7 is broken");
        ck_assert_ptr_null(b.t[0]);
        /* the error persists until the epoch is restarted */
        ck_assert(!data_loader_next(dl, &b));
        tu_assert_error(CT_ERR_FORMAT, "sample 7");
        ck_assert_int_eq(data_loader_set_epoch(dl, 0), CT_OK);
        ck_assert(data_loader_next(dl, &b));
        ck_assert_int_eq(data_loader_status(dl), CT_OK);
        data_loader_free(dl);
    }
    TU_MEM_END;
}
END_TEST

START_TEST(test_free_while_running)
{
    TU_MEM_BEGIN;
    Probe p = probe(1000);
    for (int k = 0; k < 5; k++) {
        DataLoader *dl = data_loader_create(
            &p.base, &(DataLoaderArgs){.batch_size = 8, .num_workers = 3, .prefetch = 4});
        DataBatch b;
        for (int i = 0; i < k; i++) ck_assert(data_loader_next(dl, &b));
        data_loader_free(dl); /* workers are mid-epoch */
    }
    data_loader_free(NULL);
    TU_MEM_END;
}
END_TEST

/* A user sampler: the even indices, in reverse, every epoch. */
typedef struct EvenSampler {
    Sampler base;
    int64_t n;
} EvenSampler;
static int64_t even_len(const Sampler *s)
{
    return (((const EvenSampler *)s)->n + 1) / 2;
}
static CtStatus even_fill(const Sampler *s, int64_t epoch, int64_t *out)
{
    int64_t m = even_len(s);
    for (int64_t i = 0; i < m; i++) out[i] = 2 * (m - 1 - i);
    return CT_OK;
}
static const SamplerVtable even_vt = {"even", even_len, even_fill, NULL, NULL};

START_TEST(test_user_sampler_and_errors)
{
    TU_MEM_BEGIN;
    Probe p = probe(9);
    EvenSampler es = {{&even_vt}, 9};
    DataLoader *dl = data_loader_create(
        &p.base,
        &(DataLoaderArgs){.batch_size = 2, .sampler = &es.base, .num_workers = 1});
    int64_t lab[8];
    ck_assert_int_eq(epoch_labels(dl, lab, NULL, NULL), 5);
    int64_t want[5] = {8, 6, 4, 2, 0};
    for (int i = 0; i < 5; i++) ck_assert_int_eq(lab[i], want[i]);
    data_loader_free(dl);

    ck_assert_ptr_null(data_loader_create(&p.base, &(DataLoaderArgs){.batch_size = 0}));
    tu_assert_error(CT_ERR_INVALID, "batch_size must be positive, got 0");
    ck_assert_ptr_null(data_loader_create(
        &p.base,
        &(DataLoaderArgs){.batch_size = 1, .sampler = &es.base, .shuffle = true}));
    tu_assert_error(CT_ERR_INVALID, "a sampler and shuffle are mutually exclusive");
    ck_assert_ptr_null(data_loader_create(
        &p.base, &(DataLoaderArgs){.batch_size = 1, .num_workers = -1}));
    tu_assert_error(CT_ERR_INVALID, "num_workers -1 outside");
    Probe empty = probe(0);
    ck_assert_ptr_null(
        data_loader_create(&empty.base, &(DataLoaderArgs){.batch_size = 1}));
    tu_assert_error(CT_ERR_INVALID, "the probe dataset is empty");
    ck_assert_ptr_null(data_loader_create(NULL, &(DataLoaderArgs){.batch_size = 1}));
    tu_assert_error(CT_ERR_NULL, "NULL dataset");
    DataBatch b;
    ck_assert(!data_loader_next(NULL, &b));
    tu_assert_error(CT_ERR_NULL, "NULL loader");
    TU_MEM_END;
}
END_TEST

static int64_t minus_one(const Sampler *s)
{
    return -1;
}
static const SamplerVtable broken_vt = {"broken", minus_one, even_fill, NULL, NULL};

START_TEST(test_negative_sampler_length_refused)
{
    /* with or without workers and sharding: an error naming the length */
    TU_MEM_BEGIN;
    Probe p = probe(4);
    Sampler bad = {&broken_vt};
    for (int nw = 0; nw <= 2; nw += 2) {
        for (int world = 0; world <= 2; world += 2) {
            DataLoaderArgs a = {.batch_size = 2,
                                .sampler = &bad,
                                .num_workers = nw,
                                .shard_world_size = world};
            ck_assert_ptr_null(data_loader_create(&p.base, &a));
            tu_assert_error(CT_ERR_INVALID, "the broken sampler has length -1");
        }
    }
    ck_assert_int_eq(p.calls, 0);
    TU_MEM_END;
}
END_TEST

START_TEST(test_queue_of_workers_times_prefetch_bounded)
{
    TU_MEM_BEGIN;
    Probe p = probe(4);
    /* 256 * 2^24 batches is 0 in 32 bits */
    DataLoaderArgs a = {.batch_size = 2, .num_workers = 256, .prefetch = 1 << 24};
    ck_assert_ptr_null(data_loader_create(&p.base, &a));
    tu_assert_error(CT_ERR_INVALID, "data loader: num_workers 256 x prefetch 16777216 = "
                                    "4294967296 queued batches, over the limit of 65536");
    a = (DataLoaderArgs){.batch_size = 2, .num_workers = 2, .prefetch = 0x7fffffff};
    ck_assert_ptr_null(data_loader_create(&p.base, &a));
    tu_assert_error(CT_ERR_INVALID, "over the limit of 65536");
    a.prefetch = 3;
    DataLoader *dl = data_loader_create(&p.base, &a);
    ck_assert_ptr_nonnull(dl);
    int64_t lab[4];
    ck_assert_int_eq(epoch_labels(dl, lab, NULL, NULL), 4);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(lab[i], i);
    data_loader_free(dl);
    TU_MEM_END;
}
END_TEST

/* Samples of different shapes: the default collate names the culprit. */
static CtStatus ragged_get(const Dataset *d, int64_t i, const DataCtx *ctx,
                           DataSample *out)
{
    out->t[0] = tensor_zeros(1, (const int64_t[]){1 + (i == 2)}, CT_F32, ct_cpu());
    out->n = 1;
    return CT_OK;
}
static int64_t four(const Dataset *d)
{
    return 4;
}
static const DatasetVtable ragged_vt = {"ragged", four, ragged_get, NULL};

static CtStatus sum_collate(const DataSample *s, int64_t n, DataBatch *out, void *user)
{
    (*(int *)user)++;
    Tensor *acc = s[0].t[0];
    for (int64_t i = 1; i < n; i++) acc = tensor_add(acc, s[i].t[0]);
    out->t[0] = acc;
    out->n = 1;
    return acc ? CT_OK : ct_last_status();
}

START_TEST(test_collate)
{
    TU_MEM_BEGIN;
    Dataset rag = {&ragged_vt};
    DataLoader *dl = data_loader_create(&rag, &(DataLoaderArgs){.batch_size = 4});
    DataBatch b;
    ck_assert(!data_loader_next(dl, &b));
    tu_assert_error(CT_ERR_SHAPE,
                    "data loader: batch 0 (samples 0..3): collate: field 0:");
    data_loader_free(dl);
    /* a custom collate: sums the batch */
    Probe p = probe(4);
    int calls = 0;
    dl = data_loader_create(&p.base, &(DataLoaderArgs){.batch_size = 4,
                                                       .collate = sum_collate,
                                                       .collate_user = &calls,
                                                       .num_workers = 2});
    ck_assert(data_loader_next(dl, &b));
    ck_assert_int_eq(b.n, 1);
    ck_assert_int_eq(b.size, 4);
    tu_assert_shape(b.t[0], 1, 2);
    double sums[2];
    tensor_copy_to_host(b.t[0], sums, CT_F64);
    ck_assert(sums[0] == 6 && sums[1] > 6 && sums[1] < 10);
    ck_assert_int_eq(calls, 1);
    /* a batch kept past the next call with tensor_retain */
    Tensor *kept = tensor_retain(b.t[0]);
    ck_assert(!data_loader_next(dl, &b));
    tu_assert_values(kept, sums, 2, 0, 0);
    tensor_free(kept);
    data_loader_free(dl);
    TU_MEM_END;
}
END_TEST

/* The default collate copies contiguous rows directly and stacks anything
 * else: both give tensor_stack's result, and errors keep its wording. */
START_TEST(test_collate_paths)
{
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t shape[2] = {2, 3};
    DataSample smp[3];
    for (int i = 0; i < 3; i++) {
        Tensor *m = tensor_arange(10.0 * i, 10.0 * i + 6, 1, CT_F32, ct_cpu());
        smp[i].n = 3;
        smp[i].t[0] = tensor_view(m, 2, shape);                         /* rows */
        smp[i].t[1] = tensor_transpose(tensor_view(m, 2, shape), 0, 1); /* strided */
        smp[i].t[2] = tensor_scalar(i, CT_I64, ct_cpu());               /* 0-d */
    }
    DataBatch b = {0};
    ck_assert_int_eq(data_collate_default(smp, 3, &b, NULL), CT_OK);
    ck_assert_int_eq(b.n, 3);
    for (int f = 0; f < 3; f++) {
        Tensor *ts[3] = {smp[0].t[f], smp[1].t[f], smp[2].t[f]};
        Tensor *ref = tensor_stack(3, ts, 0);
        ck_assert_int_eq(tensor_dtype(b.t[f]), tensor_dtype(ref));
        ck_assert_int_eq(tensor_ndim(b.t[f]), tensor_ndim(ref));
        double v[18];
        ck_assert_int_eq(tensor_copy_to_host(ref, v, CT_F64), CT_OK);
        tu_assert_values(b.t[f], v, tensor_numel(ref), 0, 0);
    }
    tu_assert_shape(b.t[0], 3, 3, 2, 3);
    tu_assert_shape(b.t[2], 1, 3);
    ck_assert(!tensor_shares_storage(b.t[0], smp[0].t[0]));
    /* samples that require grad keep their graph */
    Tensor *w = tensor_ones(1, (const int64_t[]){2}, CT_F32, ct_cpu());
    ck_assert_int_eq(tensor_set_requires_grad(w, true), CT_OK);
    DataSample g[2] = {{1, {w}}, {1, {tensor_mul_scalar(w, 2)}}};
    ck_assert_int_eq(data_collate_default(g, 2, &b, NULL), CT_OK);
    ck_assert(tensor_requires_grad(b.t[0]));
    ck_assert_int_eq(tensor_backward(tensor_sum_all(b.t[0]), NULL), CT_OK);
    tu_assert_values(tensor_grad(w), ((double[]){3, 3}), 2, 0, 0);
    /* a dtype mismatch is named by its position */
    smp[1].t[2] = tensor_scalar(1, CT_I32, ct_cpu());
    ck_assert_int_eq(data_collate_default(smp, 3, &b, NULL), CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE, "collate: field 2: stack: tensor 1 is i32");
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

START_TEST(test_collate_refuses_samples_of_max_dims)
{
    /* a batch of CT_MAX_DIMS-d samples would need one dim more; contiguous
     * (copied by rows) and strided (stacked) samples alike */
    TU_MEM_BEGIN;
    CtScope *s = ct_scope_open();
    const int64_t shape[CT_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 2, 3};
    for (int strided = 0; strided < 2; strided++) {
        DataSample smp[2];
        for (int i = 0; i < 2; i++) {
            Tensor *t = tensor_zeros(CT_MAX_DIMS, shape, CT_F32, ct_cpu());
            smp[i].n = 1;
            smp[i].t[0] = strided ? tensor_transpose(t, 6, 7) : t;
        }
        DataBatch b = {0};
        ck_assert_int_eq(data_collate_default(smp, 2, &b, NULL), CT_ERR_UNSUPPORTED);
        tu_assert_error(CT_ERR_UNSUPPORTED, "collate: field 0: samples of 8 dims make a "
                                            "batch of 9, over the limit of 8 dims");
        ck_assert_int_eq(b.n, 0);
    }
    ct_scope_close(s);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("data_loader");
    TCase *tc = tcase_create("loader");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_sequential_batches);
    tcase_add_test(tc, test_loader_args);
    tcase_add_test(tc, test_shuffle_epochs);
    tcase_add_test(tc, test_workers_identical);
    tcase_add_test(tc, test_skip_resume);
    tcase_add_test(tc, test_worker_error);
    tcase_add_test(tc, test_free_while_running);
    tcase_add_test(tc, test_user_sampler_and_errors);
    tcase_add_test(tc, test_collate);
    tcase_add_test(tc, test_collate_paths);
    tcase_add_test(tc, test_negative_sampler_length_refused);
    tcase_add_test(tc, test_queue_of_workers_times_prefetch_bounded);
    tcase_add_test(tc, test_collate_refuses_samples_of_max_dims);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
