/* SyncBatchNorm conversion: nn's batch norms get the runtime's all-reduce
 * (nn cannot call up into the runtime, so it takes it as a function). */
#include "runtime_internal.h"

static Tensor *all_reduce_sum(void *rt, Tensor *t)
{
    return runtime_reduce((Runtime *)rt, t, RUNTIME_REDUCE_SUM);
}

int64_t runtime_convert_sync_batch_norm(Runtime *rt, Module *m)
{
    if (!rt) {
        ct_error(CT_ERR_NULL, "runtime_convert_sync_batch_norm: NULL runtime");
        return -1;
    }
    /* one process: no all-reduce, so the layers stay exactly BatchNorm */
    NnAllReduceFn fn = runtime_world_size(rt) > 1 ? all_reduce_sum : NULL;
    return nn_convert_sync_batch_norm(m, fn, rt);
}
