/* mpi_test.h — what the mpirun test programs share: this process's
 * runtime, rank, world size and failure count, EXPECT, and the small MLP
 * and optimizer they train. Header-only: each test is one program. */
#ifndef MPI_TEST_H
#define MPI_TEST_H

#include <stdio.h>

#include "ctrainer/ctrainer.h"

static Runtime *rt;
static int R, W, failures;

/* Creates this process's runtime and sets R and W; false (error recorded)
 * when it cannot. */
static inline bool test_begin(void)
{
    rt = runtime_create(NULL);
    if (!rt) return false;
    R = runtime_rank(rt), W = runtime_world_size(rt);
    return true;
}

/* EXPECT(cond, fmt, ...): a failed check, reported with the rank and
 * counted; the test goes on. */
#include "rank_expect.h"

/* in -> hidden -> ReLU -> out, initialised from seed. */
static inline Module *test_mlp(uint64_t seed, int64_t in, int64_t hidden, int64_t out)
{
    CtGenerator g = ct_generator(seed, 0);
    return nn_sequential(3, (Module *[]){nn_linear(in, hidden, true, &g), nn_relu(),
                                         nn_linear(hidden, out, true, &g)});
}

/* SGD, lr 0.05, momentum 0.9. */
static inline Optimizer *test_sgd(Module *m)
{
    return optim_sgd_create(m, &(SgdArgs){.lr = 0.05, .momentum = 0.9});
}

/* A dataset of the two fields x and y; releases the caller's tensors. */
static inline Dataset *test_dataset(Tensor *x, Tensor *y)
{
    Dataset *ds = data_tensor_dataset_create(2, (Tensor *[]){x, y});
    tensor_free(x);
    tensor_free(y);
    return ds;
}

/* One epoch of the single-process reference loop over dl: windows of k
 * batches (the last one shorter when the epoch's batches are not a
 * multiple of k), each batch's loss divided by its window's length, an
 * optimizer step at the end of every window. Returns the sum of batch loss
 * x batch size. */
static inline double test_reference_epoch(Module *m, Optimizer *o, NnLoss *loss,
                                          DataLoader *dl, int64_t k)
{
    double total = 0;
    int64_t n = data_loader_len(dl);
    DataBatch b;
    for (int64_t step = 0; data_loader_next(dl, &b); step++) {
        CtScope *s = ct_scope_open();
        Tensor *l = nn_loss(loss, nn_forward(m, b.t[0]), b.t[1]);
        total += tensor_item(l) * (double)b.size;
        int64_t start = step / k * k, window = start + k <= n ? k : n - start;
        tensor_backward(tensor_div_scalar(l, (double)window), NULL);
        if ((step + 1) % k == 0 || step + 1 == n) {
            optim_step(o);
            optim_zero_grad(o);
        }
        ct_scope_close(s);
    }
    return total;
}

#endif
