/* ConvertSyncBatchNorm: at training run start, with more than one process,
 * the model's batch norms become SyncBatchNorm (pytorch-accelerated's
 * ConvertSyncBatchNormCallback). */
#include "cb_internal.h"

typedef struct ConvertSyncBatchNorm {
    Callback base;
    int64_t converted;
} ConvertSyncBatchNorm;

static CtStatus csbn_run_start(Callback *cb, Trainer *t)
{
    ConvertSyncBatchNorm *c = (ConvertSyncBatchNorm *)cb;
    Runtime *rt = trainer_runtime(t);
    c->converted = 0;
    if (!rt || !runtime_is_distributed(rt)) return CT_OK;
    int64_t n = runtime_convert_sync_batch_norm(rt, trainer_model(t));
    if (n < 0) return ct_error_wrap(ct_last_status(), "ConvertSyncBatchNorm");
    c->converted = n;
    return CT_OK;
}

static const CallbackVtable convert_sync_batch_norm_vt = {
    .type = "ConvertSyncBatchNorm",
    .on_training_run_start = csbn_run_start,
};

Callback *callback_convert_sync_batch_norm_create(void)
{
    return cb_alloc(sizeof(ConvertSyncBatchNorm), &convert_sync_batch_norm_vt);
}

int64_t callback_convert_sync_batch_norm_count(const Callback *cb)
{
    return cb_is(cb, &convert_sync_batch_norm_vt)
               ? ((const ConvertSyncBatchNorm *)cb)->converted
               : 0;
}
