/* LimitBatches: caps train and eval batches per epoch (debug runs). */
#include "cb_internal.h"

typedef struct LimitBatches {
    Callback base;
    int64_t n;
} LimitBatches;

static CtStatus lb_apply(Callback *cb, Trainer *t)
{
    int64_t n = ((LimitBatches *)cb)->n;
    trainer_limit_batches(t, n, n);
    return CT_OK;
}

static const CallbackVtable limit_batches_vt = {
    .type = "LimitBatches",
    .on_init_end = lb_apply,
    .on_training_run_start = lb_apply,
    .on_evaluation_run_start = lb_apply,
};

Callback *callback_limit_batches_create(int64_t num_batches)
{
    if (num_batches <= 0) {
        ct_error(CT_ERR_INVALID, "LimitBatches: num_batches must be > 0, got %lld",
                 (long long)num_batches);
        return NULL;
    }
    LimitBatches *l = (LimitBatches *)cb_alloc(sizeof *l, &limit_batches_vt);
    if (l) l->n = num_batches;
    return &l->base;
}
