/* Sharded data: the distributed sampler against PyTorch's DistributedSampler
 * (tests/fixtures/distributed_sampler.py), our (seed, epoch) shuffle across
 * ranks, and the sharded loader (workers, skip, drop_last, padding counts). */
#include <stdlib.h>

#include "ctrainer/data.h"
#include "tests/fixtures/distributed_sampler.h"
#include "testutil.h"

/* A sampler returning a fixed order every epoch: PyTorch's permutation. */
typedef struct FixedSampler {
    Sampler base;
    int64_t n;
    const int64_t *order;
} FixedSampler;

static int64_t fixed_len(const Sampler *s)
{
    return ((const FixedSampler *)s)->n;
}

static CtStatus fixed_fill(const Sampler *s, int64_t epoch, int64_t *out)
{
    (void)epoch;
    const FixedSampler *f = (const FixedSampler *)s;
    memcpy(out, f->order, (size_t)f->n * sizeof *out);
    return CT_OK;
}

static void fixed_free(Sampler *s)
{
    free(s);
}

static const SamplerVtable fixed_vt = {
    .type = "fixed", .len = fixed_len, .fill = fixed_fill, .free = fixed_free};

static Sampler *fixed_create(int64_t n, const int64_t *order)
{
    FixedSampler *f = malloc(sizeof *f);
    ck_assert_ptr_nonnull(f);
    *f = (FixedSampler){{&fixed_vt}, n, order};
    return &f->base;
}

/* Positions rank, rank + W, ... below n: the real samples of a shard. */
static int64_t expected_real(int64_t n, int rank, int world, int64_t len)
{
    int64_t real = 0;
    for (int64_t j = 0; j < len; j++) real += rank + j * world < n;
    return real;
}

START_TEST(test_pytorch_fixtures)
{
    int nf = (int)(sizeof dist_fixtures / sizeof dist_fixtures[0]);
    for (int i = 0; i < nf; i++) {
        const DistFixture *f = &dist_fixtures[i];
        for (int r = 0; r < f->world; r++) {
            Sampler *base = f->shuffle ? fixed_create(f->n, f->order)
                                       : data_sampler_sequential_create(f->n);
            Sampler *s = data_sampler_distributed_create(base, r, f->world, f->drop_last);
            ck_assert_ptr_nonnull(s);
            ck_assert_int_eq(data_sampler_len(s), f->num_samples);
            ck_assert_int_eq(data_sampler_num_real(s),
                             f->drop_last
                                 ? f->num_samples
                                 : expected_real(f->n, r, f->world, f->num_samples));
            int64_t got[16] = {0};
            ck_assert_int_le(f->num_samples, 16);
            ck_assert_int_eq(data_sampler_fill(s, f->epoch, got), CT_OK);
            for (int64_t j = 0; j < f->num_samples; j++)
                ck_assert_msg(got[j] == f->shards[r * f->num_samples + j],
                              "fixture %d (world %d, n %lld, shuffle %d, drop_last %d) "
                              "rank %d position %lld: %lld, torch %lld",
                              i, f->world, (long long)f->n, f->shuffle, f->drop_last, r,
                              (long long)j, (long long)got[j],
                              (long long)f->shards[r * f->num_samples + j]);
            data_sampler_free(s);
        }
    }
}
END_TEST

/* Every rank's shard of our own shuffle, for one epoch: out[r * len + j]. */
static int64_t shards_of(int64_t n, int world, uint64_t seed, int64_t epoch, int64_t *out,
                         int64_t *real)
{
    int64_t len = -1;
    for (int r = 0; r < world; r++) {
        Sampler *s = data_sampler_distributed_create(data_sampler_random_create(n, seed),
                                                     r, world, false);
        ck_assert_ptr_nonnull(s);
        if (len < 0) len = data_sampler_len(s);
        ck_assert_int_eq(data_sampler_len(s), len); /* the same on every rank */
        real[r] = data_sampler_num_real(s);
        ck_assert_int_eq(data_sampler_fill(s, epoch, out + r * len), CT_OK);
        data_sampler_free(s);
    }
    return len;
}

START_TEST(test_own_shuffle_across_ranks)
{
    enum { N = 11, W = 3 };
    int64_t a[W * 4], b[W * 4], c[W * 4], real[W];
    int64_t len = shards_of(N, W, 7, 2, a, real);
    ck_assert_int_eq(len, 4);
    /* the real samples of all ranks cover the dataset exactly once */
    int seen[N] = {0};
    int64_t total_real = 0;
    for (int r = 0; r < W; r++) {
        total_real += real[r];
        for (int64_t j = 0; j < real[r]; j++) seen[a[r * len + j]]++;
    }
    ck_assert_int_eq(total_real, N);
    for (int i = 0; i < N; i++) ck_assert_int_eq(seen[i], 1);
    /* the one duplicate (12 - 11) is the start of the epoch's order, which
     * rank 0's first sample is */
    ck_assert_int_eq(real[2], 3);
    ck_assert_int_eq(a[2 * len + 3], a[0]);
    /* same (seed, epoch): the same shards, rank by rank */
    shards_of(N, W, 7, 2, b, real);
    ck_assert_mem_eq(a, b, sizeof a);
    /* another epoch: another order */
    shards_of(N, W, 7, 3, c, real);
    ck_assert(memcmp(a, c, sizeof a) != 0);
}
END_TEST

START_TEST(test_sampler_errors)
{
    TU_MEM_BEGIN;
    ck_assert_ptr_null(
        data_sampler_distributed_create(data_sampler_sequential_create(4), 0, 0, false));
    tu_assert_error(CT_ERR_INVALID, "world_size must be >= 1, got 0");
    ck_assert_ptr_null(
        data_sampler_distributed_create(data_sampler_sequential_create(4), -1, 2, false));
    tu_assert_error(CT_ERR_INVALID, "rank -1 outside [0, 2)");
    ck_assert_ptr_null(
        data_sampler_distributed_create(data_sampler_sequential_create(4), 2, 2, false));
    tu_assert_error(CT_ERR_INVALID, "rank 2 outside [0, 2)");
    ck_assert_ptr_null(data_sampler_distributed_create(NULL, 0, 2, false));
    tu_assert_error(CT_ERR_NULL, "NULL base sampler");
    /* a failed base keeps its own error */
    ck_assert_ptr_null(
        data_sampler_distributed_create(data_sampler_sequential_create(-1), 0, 2, false));
    tu_assert_error(CT_ERR_INVALID, "negative length -1");
    ck_assert_int_eq(data_sampler_num_real(NULL), -1);
    tu_assert_error(CT_ERR_NULL, "data_sampler_num_real: NULL sampler");
    Sampler *seq = data_sampler_sequential_create(5);
    ck_assert_int_eq(data_sampler_num_real(seq), 5);
    data_sampler_free(seq);
    TU_MEM_END;
}
END_TEST

/* ---------------------------------------------------------------- loader */

/* A dataset whose sample i is the i64 0-d tensor i. */
static Dataset *index_dataset(int64_t n)
{
    Tensor *x = tensor_arange(0, (double)n, 1, CT_I64, ct_cpu());
    Dataset *d = data_tensor_dataset_create(1, &x);
    tensor_free(x);
    ck_assert_ptr_nonnull(d);
    return d;
}

/* One epoch: indices into idx, per-batch sizes and padding counts into
 * sizes/pad (nb batches). Returns the sample count. */
static int64_t run_epoch(DataLoader *dl, int64_t *idx, int64_t *sizes, int64_t *pad,
                         int64_t *nb)
{
    DataBatch b;
    int64_t n = 0, k = 0;
    ck_assert_int_eq(data_loader_batch_padding(dl), 0);
    while (data_loader_next(dl, &b)) {
        sizes[k] = b.size;
        pad[k++] = data_loader_batch_padding(dl);
        tensor_copy_to_host(b.t[0], idx + n, CT_I64);
        n += b.size;
    }
    ck_assert_int_eq(data_loader_status(dl), CT_OK);
    ck_assert_int_eq(data_loader_batch_padding(dl), 0);
    *nb = k;
    return n;
}

START_TEST(test_loader_shards)
{
    TU_MEM_BEGIN;
    /* n = 10, world 3, batch 2: shards of 4 (12 positions, 2 duplicates);
     * rank 1 holds 1 4 7 | 0(dup), rank 2 holds 2 5 8 | 1(dup) */
    Dataset *ds = index_dataset(10);
    const int64_t want[3][4] = {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
    const int64_t want_pad[3] = {0, 1, 1};
    for (int r = 0; r < 3; r++) {
        DataLoader *dl = data_loader_create(
            ds,
            &(DataLoaderArgs){.batch_size = 3, .shard_rank = r, .shard_world_size = 3});
        ck_assert_ptr_nonnull(dl);
        ck_assert_int_eq(data_loader_len(dl), 2);
        int64_t idx[8], sizes[4], pad[4], nb;
        ck_assert_int_eq(run_epoch(dl, idx, sizes, pad, &nb), 4);
        ck_assert_int_eq(nb, 2);
        ck_assert_int_eq(sizes[0], 3);
        ck_assert_int_eq(sizes[1], 1);
        ck_assert_int_eq(pad[0], 0);
        ck_assert_int_eq(pad[1], want_pad[r]);
        for (int j = 0; j < 4; j++) ck_assert_int_eq(idx[j], want[r][j]);
        data_loader_free(dl);
    }
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

/* Rank 1 of 3 over n = 19 shuffled, batch 3: shards of 7, the last sample a
 * duplicate (21 positions), the last batch of one sample. */
static DataLoader *fake_shard(const Dataset *ds, int nw, bool drop_last)
{
    DataLoader *dl = data_loader_create(ds, &(DataLoaderArgs){.batch_size = 3,
                                                              .shuffle = true,
                                                              .seed = 5,
                                                              .drop_last = drop_last,
                                                              .num_workers = nw,
                                                              .shard_rank = 1,
                                                              .shard_world_size = 3});
    ck_assert_ptr_nonnull(dl);
    return dl;
}

START_TEST(test_loader_shard_workers_skip)
{
    TU_MEM_BEGIN;
    Dataset *ds = index_dataset(19);
    int64_t ref[8], sizes[4], pad[4], nb;
    DataLoader *dl = fake_shard(ds, 0, false);
    ck_assert_int_eq(data_loader_len(dl), 3);
    ck_assert_int_eq(data_loader_set_epoch(dl, 4), CT_OK);
    ck_assert_int_eq(run_epoch(dl, ref, sizes, pad, &nb), 7);
    ck_assert_int_eq(nb, 3);
    ck_assert_int_eq(sizes[2], 1);
    ck_assert_int_eq(pad[0] + pad[1], 0);
    ck_assert_int_eq(pad[2], 1);
    /* the same shard as the distributed sampler over the random one */
    Sampler *s =
        data_sampler_distributed_create(data_sampler_random_create(19, 5), 1, 3, false);
    int64_t order[7];
    ck_assert_int_eq(data_sampler_fill(s, 4, order), CT_OK);
    data_sampler_free(s);
    ck_assert_mem_eq(ref, order, sizeof order);
    data_loader_free(dl);

    for (int nw = 1; nw <= 2; nw++) {
        int64_t idx[8];
        dl = fake_shard(ds, nw, false);
        ck_assert_int_eq(data_loader_set_epoch(dl, 4), CT_OK);
        ck_assert_int_eq(run_epoch(dl, idx, sizes, pad, &nb), 7);
        ck_assert_mem_eq(idx, ref, 7 * sizeof *idx);
        ck_assert_int_eq(pad[2], 1);
        /* resume at the last batch: its padding is counted again */
        ck_assert_int_eq(data_loader_set_epoch(dl, 4), CT_OK);
        ck_assert_int_eq(data_loader_skip(dl, 2), CT_OK);
        ck_assert_int_eq(data_loader_batch_padding(dl), 0);
        ck_assert_int_eq(run_epoch(dl, idx, sizes, pad, &nb), 1);
        ck_assert_int_eq(nb, 1);
        ck_assert_int_eq(idx[0], ref[6]);
        ck_assert_int_eq(pad[0], 1);
        data_loader_free(dl);
    }

    /* drop_last drops the last batch of the shard, the duplicate with it */
    dl = fake_shard(ds, 2, true);
    ck_assert_int_eq(data_loader_len(dl), 2);
    ck_assert_int_eq(data_loader_set_epoch(dl, 4), CT_OK);
    int64_t idx[8];
    ck_assert_int_eq(run_epoch(dl, idx, sizes, pad, &nb), 6);
    ck_assert_mem_eq(idx, ref, 6 * sizeof *idx);
    ck_assert_int_eq(pad[0] + pad[1], 0);
    data_loader_free(dl);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

START_TEST(test_loader_padding_counts)
{
    TU_MEM_BEGIN;
    /* per (n, world, batch): the padding rows of every rank's last batch sum
     * to ceil(n / W) * W - n, and the real rows of all ranks to n */
    const int64_t cases[][3] = {{10, 2, 4}, {11, 3, 2}, {7, 3, 5}, {2, 3, 1}, {12, 3, 4}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t n = cases[c][0], w = cases[c][1], bs = cases[c][2];
        Dataset *ds = index_dataset(n);
        int64_t real = 0, padded = 0, batches = -1;
        for (int r = 0; r < w; r++) {
            DataLoader *dl = data_loader_create(
                ds, &(DataLoaderArgs){
                        .batch_size = bs, .shard_rank = r, .shard_world_size = (int)w});
            int64_t idx[16], sizes[16], pad[16], nb;
            int64_t got = run_epoch(dl, idx, sizes, pad, &nb);
            if (batches < 0) batches = nb;
            ck_assert_int_eq(nb, batches); /* every rank: the same batch count */
            for (int64_t k = 0; k < nb; k++) {
                padded += pad[k];
                real += sizes[k] - pad[k];
                if (k < nb - 1) ck_assert_int_eq(pad[k], 0);
            }
            ck_assert_int_eq(got, (n + w - 1) / w);
            data_loader_free(dl);
        }
        ck_assert_int_eq(real, n);
        ck_assert_int_eq(padded, (n + w - 1) / w * w - n);
        data_dataset_free(ds);
    }
    TU_MEM_END;
}
END_TEST

START_TEST(test_loader_user_sampler_sharded)
{
    TU_MEM_BEGIN;
    Dataset *ds = index_dataset(5);
    static const int64_t order[5] = {4, 2, 0, 3, 1};
    Sampler *user = fixed_create(5, order);
    DataLoader *dl = data_loader_create(ds, &(DataLoaderArgs){.batch_size = 4,
                                                              .sampler = user,
                                                              .shard_rank = 1,
                                                              .shard_world_size = 2});
    ck_assert_ptr_nonnull(dl);
    int64_t idx[4], sizes[2], pad[2], nb;
    ck_assert_int_eq(run_epoch(dl, idx, sizes, pad, &nb), 3);
    ck_assert_int_eq(idx[0], 2);
    ck_assert_int_eq(idx[1], 3);
    ck_assert_int_eq(idx[2], 4); /* position 5 wraps to position 0 */
    ck_assert_int_eq(pad[0], 1);
    data_loader_free(dl); /* the user's sampler is borrowed: still ours */
    ck_assert_int_eq(data_sampler_len(user), 5);
    data_sampler_free(user);

    /* torch's drop_last=True through a sampler: 5 over 3 ranks keeps 3
     * positions, one per rank; with 2 over 3 every shard is empty */
    Sampler *dist =
        data_sampler_distributed_create(data_sampler_sequential_create(5), 2, 3, true);
    dl = data_loader_create(ds, &(DataLoaderArgs){.batch_size = 2, .sampler = dist});
    ck_assert_int_eq(data_loader_len(dl), 1);
    ck_assert_int_eq(run_epoch(dl, idx, sizes, pad, &nb), 1);
    ck_assert_int_eq(idx[0], 2);
    ck_assert_int_eq(pad[0], 0);
    data_loader_free(dl);
    data_sampler_free(dist);
    dist = data_sampler_distributed_create(data_sampler_sequential_create(2), 0, 3, true);
    dl = data_loader_create(ds, &(DataLoaderArgs){.batch_size = 2, .sampler = dist});
    ck_assert_int_eq(data_loader_len(dl), 0);
    ck_assert_int_eq(run_epoch(dl, idx, sizes, pad, &nb), 0);
    ck_assert_int_eq(nb, 0);
    data_loader_free(dl);
    data_sampler_free(dist);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

START_TEST(test_loader_shard_errors)
{
    TU_MEM_BEGIN;
    Dataset *ds = index_dataset(4);
    ck_assert_ptr_null(data_loader_create(
        ds, &(DataLoaderArgs){.batch_size = 2, .shard_rank = 3, .shard_world_size = 3}));
    tu_assert_error(CT_ERR_INVALID, "shard_rank 3 outside [0, 3)");
    ck_assert_ptr_null(data_loader_create(
        ds, &(DataLoaderArgs){.batch_size = 2, .shard_rank = -1, .shard_world_size = 2}));
    tu_assert_error(CT_ERR_INVALID, "shard_rank -1 outside [0, 2)");
    ck_assert_ptr_null(
        data_loader_create(ds, &(DataLoaderArgs){.batch_size = 2, .shard_rank = 1}));
    tu_assert_error(CT_ERR_INVALID, "shard_rank 1 outside [0, 1) (shard_world_size 0)");
    ck_assert_ptr_null(data_loader_create(
        ds, &(DataLoaderArgs){.batch_size = 2, .shard_world_size = -2}));
    tu_assert_error(CT_ERR_INVALID, "negative shard_world_size -2");
    ck_assert_int_eq(data_loader_batch_padding(NULL), -1);
    tu_assert_error(CT_ERR_NULL, "data_loader_batch_padding: NULL loader");
    /* world 1: no sharding */
    DataLoader *dl =
        data_loader_create(ds, &(DataLoaderArgs){.batch_size = 3, .shard_world_size = 1});
    ck_assert_int_eq(data_loader_len(dl), 2);
    data_loader_free(dl);
    data_dataset_free(ds);
    TU_MEM_END;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("data_sharding");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_pytorch_fixtures);
    tcase_add_test(tc, test_own_shuffle_across_ranks);
    tcase_add_test(tc, test_sampler_errors);
    tcase_add_test(tc, test_loader_shards);
    tcase_add_test(tc, test_loader_shard_workers_skip);
    tcase_add_test(tc, test_loader_padding_counts);
    tcase_add_test(tc, test_loader_user_sampler_sharded);
    tcase_add_test(tc, test_loader_shard_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
