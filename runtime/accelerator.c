/* The calls that let a hand-written loop use the runtime as accelerate's
 * Accelerator: a loader prepared for this process, and a backward that
 * averages the gradients over the processes. */
#include "runtime_internal.h"

DataLoader *runtime_prepare_dataloader(Runtime *rt, const Dataset *ds,
                                       const DataLoaderArgs *args)
{
    if (!rt || !args) {
        ct_error(CT_ERR_NULL, "runtime_prepare_dataloader: NULL %s",
                 rt ? "loader arguments" : "runtime");
        return NULL;
    }
    if (args->shard_world_size > 1) {
        ct_error(CT_ERR_INVALID,
                 "runtime_prepare_dataloader: the arguments already shard the data "
                 "(shard_world_size %d); the runtime shards it over its %d processes",
                 args->shard_world_size, rt->world_size);
        return NULL;
    }
    DataLoaderArgs a = *args;
    a.shard_rank = rt->rank;
    a.shard_world_size = rt->world_size;
    a.device = rt->device;
    if (a.seed == 0) a.seed = rt->seed; /* one shuffle order for every process */
    return data_loader_create(ds, &a);
}

CtStatus runtime_backward(Runtime *rt, Module *m, Tensor *loss)
{
    if (!rt || !m)
        return ct_error(CT_ERR_NULL, "runtime_backward: NULL %s",
                        rt ? "module" : "runtime");
    if (!loss) return ct_last_status() != CT_OK ? ct_last_status() : CT_ERR_NULL;
    CtStatus st = tensor_backward(loss, NULL);
    return st == CT_OK ? runtime_reduce_gradients(rt, m) : st;
}
