/* Collectives on tensors. With one process every collective is local:
 * gathers and reduces return a detached copy, the barrier returns at once.
 * With several, each collective first agrees on the layout (every rank
 * gathers every rank's dtype and shape, so a mismatch is the same error on
 * all ranks rather than a hang or garbage), then moves the bytes through
 * the process group: MPI for host tensors, NCCL for CUDA tensors. The
 * argument checks are the same either way, so code that is wrong for N
 * processes fails on one too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"

/* Collective results are detached: their tensor ops run with autograd off
 * (tensor_detach would leave an extra view to free when no scope is open). */
static Tensor *detached_copy(Tensor *t)
{
    bool grad = ct_set_grad_enabled(false);
    Tensor *r = tensor_clone(t);
    ct_set_grad_enabled(grad);
    return r;
}

CtStatus runtime_barrier(Runtime *rt)
{
    if (!rt) return ct_error(CT_ERR_NULL, "runtime_barrier: NULL runtime");
    return rt->world_size > 1 ? rt_comm_barrier(rt) : CT_OK;
}

CtStatus runtime_main_process_first_begin(Runtime *rt)
{
    if (!rt)
        return ct_error(CT_ERR_NULL, "runtime_main_process_first_begin: NULL runtime");
    return runtime_is_main_process(rt) ? CT_OK : runtime_barrier(rt);
}

CtStatus runtime_main_process_first_end(Runtime *rt)
{
    if (!rt) return ct_error(CT_ERR_NULL, "runtime_main_process_first_end: NULL runtime");
    return runtime_is_main_process(rt) ? runtime_barrier(rt) : CT_OK;
}

/* ------------------------------------------------------ layout agreement */

/* One rank's layout: dtype, device type, ndim, dims. */
enum { LAYOUT_LEN = 3 + CT_MAX_DIMS };

static void fmt_layout(const int64_t *h, char *buf, size_t n)
{
    int len = snprintf(buf, n, "%s%s (", ct_dtype_name((CtDType)h[0]),
                       h[1] == CT_DEVICE_CUDA ? " cuda" : "");
    for (int64_t d = 0; d < h[2] && len > 0 && (size_t)len < n; d++)
        len += snprintf(buf + len, n - (size_t)len, d ? ", %lld" : "%lld",
                        (long long)h[3 + d]);
    if (len > 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, ")");
}

static bool same_layout(const int64_t *a, const int64_t *b, bool any_dim0)
{
    if (a[0] != b[0] || a[1] != b[1] || a[2] != b[2]) return false;
    for (int64_t d = any_dim0 ? 1 : 0; d < a[2]; d++)
        if (a[3 + d] != b[3 + d]) return false;
    return true;
}

/* Checks every rank's layout of t matches (except dim 0 when dim0 is given,
 * which then receives each rank's size of dim 0). Every rank sees the same
 * table of layouts, so every rank reaches the same verdict. */
static CtStatus agree_layout(Runtime *rt, const char *fn, Tensor *t, int64_t *dim0)
{
    int w = rt->world_size;
    int64_t mine[LAYOUT_LEN] = {tensor_dtype(t), tensor_device(t).type, tensor_ndim(t)};
    for (int d = 0; d < tensor_ndim(t); d++) mine[3 + d] = tensor_size(t, d);
    int64_t *all = malloc(sizeof(int64_t) * (size_t)w * (LAYOUT_LEN + 1));
    if (!all) return ct_error(CT_ERR_OOM, "%s: out of memory", fn);
    int64_t *counts = all + (size_t)w * LAYOUT_LEN;
    for (int r = 0; r < w; r++) counts[r] = sizeof mine;
    CtStatus st = rt_comm_allgatherv(rt, mine, all, counts);
    for (int r = 0; st == CT_OK && r < w; r++) {
        const int64_t *h = all + r * LAYOUT_LEN;
        if (dim0) dim0[r] = h[3];
        if (same_layout(all, h, dim0 != NULL)) continue;
        char a[160], b[160];
        fmt_layout(all, a, sizeof a);
        fmt_layout(h, b, sizeof b);
        st = ct_error(CT_ERR_SHAPE,
                      "%s: rank 0 passed %s, rank %d passed %s: every rank must pass "
                      "the same dtype and shape%s",
                      fn, a, r, b, dim0 ? " (except dim 0)" : "");
    }
    free(all);
    return st;
}

static bool on_cuda(const Tensor *t)
{
    return tensor_device(t).type == CT_DEVICE_CUDA;
}

/* A CUDA tensor on another GPU than the process's own (rt->device): NCCL's
 * communicator is bound to that one. Checked on any world size, so that
 * code wrong for N processes fails on one too. */
static CtStatus check_device(const char *fn, const Runtime *rt, const Tensor *t)
{
    CtDevice d = tensor_device(t);
    if (!on_cuda(t) || rt->device.type != CT_DEVICE_CUDA || d.index == rt->device.index)
        return CT_OK;
    return ct_error(CT_ERR_DEVICE,
                    "%s: the tensor is on cuda:%d but this process trains on cuda:%d "
                    "(runtime_device)",
                    fn, d.index, rt->device.index);
}

/* Hands `own`, a reference the caller holds outside any scope, over as op
 * results are owned: to the open scope, or to the caller when none is open
 * (tensor_contiguous of a contiguous tensor is a new reference there). */
static Tensor *as_result(Tensor *own)
{
    Tensor *r = tensor_contiguous(own);
    tensor_free(own);
    return r;
}

/* ---------------------------------------------------------------- gather */

static bool check_gather(const char *fn, Runtime *rt, Tensor *t)
{
    if (!rt) {
        ct_error(CT_ERR_NULL, "%s: NULL runtime", fn);
        return false;
    }
    if (!t) return false; /* sticky: keep the first error */
    if (check_device(fn, rt, t) != CT_OK) return false;
    if (tensor_ndim(t) < 1) {
        ct_error(CT_ERR_SHAPE,
                 "%s: a 0-d tensor has no dim 0 to concatenate along "
                 "(unsqueeze it first)",
                 fn);
        return false;
    }
    return true;
}

/* Every rank's rows, in rank order: an all-gather of variable sizes. With
 * equal_dim0 the sizes must match (runtime_gather's contract). */
static Tensor *gather_rows(Runtime *rt, const char *fn, Tensor *t, bool equal_dim0)
{
    int w = rt->world_size;
    int64_t *bytes = malloc(sizeof(int64_t) * (size_t)w);
    if (!bytes) {
        ct_error(CT_ERR_OOM, "%s: out of memory", fn);
        return NULL;
    }
    Tensor *out = NULL;
    CtScope *scope = NULL; /* the temporaries, released however this ends */
    if (agree_layout(rt, fn, t, bytes) != CT_OK) goto done;
    int64_t rows = 0, row_bytes = (int64_t)ct_dtype_size(tensor_dtype(t));
    for (int d = 1; d < tensor_ndim(t); d++) row_bytes *= tensor_size(t, d);
    const int64_t rows0 = bytes[0]; /* bytes[] holds row counts until scaled */
    bool equal = true;
    for (int r = 0; r < w; r++) {
        equal = equal && bytes[r] == rows0;
        if (equal_dim0 && bytes[r] != rows0) {
            ct_error(CT_ERR_SHAPE,
                     "%s: rank 0 has %lld rows, rank %d has %lld: dim 0 must be equal "
                     "on every rank (use runtime_gather_padded)",
                     fn, (long long)rows0, r, (long long)bytes[r]);
            goto done;
        }
        rows += bytes[r];
        bytes[r] *= row_bytes;
    }
    scope = ct_scope_open();
    if (!scope) {
        ct_error(CT_ERR_OOM, "%s: out of memory", fn);
        goto done;
    }
    /* CUDA tensors of equal sizes go through NCCL; differing sizes through
     * the host (NCCL has no variable-size gather) */
    bool nccl = on_cuda(t) && equal;
    bool grad = ct_set_grad_enabled(false);
    Tensor *src =
        nccl || !on_cuda(t) ? tensor_contiguous(t) : tensor_to_device(t, ct_cpu());
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, tensor_shape(t), sizeof(int64_t) * (size_t)tensor_ndim(t));
    shape[0] = rows;
    Tensor *all =
        src ? tensor_empty(tensor_ndim(t), shape, tensor_dtype(t), tensor_device(src))
            : NULL;
    CtStatus st =
        !all   ? CT_ERR_OOM
        : nccl ? rt_nccl_allgather(rt, tensor_data(src), tensor_data(all), bytes[0])
               : rt_comm_allgatherv(rt, tensor_data(src), tensor_data(all), bytes);
    if (st == CT_OK && on_cuda(t) && !nccl) all = tensor_to_device(all, tensor_device(t));
    ct_set_grad_enabled(grad);
    if (st == CT_OK && all) out = tensor_retain(all);
done:
    if (scope) ct_scope_close(scope);
    free(bytes);
    return out ? as_result(out) : NULL;
}

Tensor *runtime_gather(Runtime *rt, Tensor *t)
{
    if (!check_gather("runtime_gather", rt, t)) return NULL;
    if (rt->world_size == 1) return detached_copy(t);
    return gather_rows(rt, "runtime_gather", t, true);
}

/* Gathering with each rank's true size (a variable-size all-gather) gives
 * exactly what padding to the largest size, gathering and removing the
 * padding by position gives, without moving the padding: pad_value never
 * reaches the result. */
Tensor *runtime_gather_padded(Runtime *rt, Tensor *t, double pad_value)
{
    if (!check_gather("runtime_gather_padded", rt, t)) return NULL;
    (void)pad_value;
    if (rt->world_size == 1) return detached_copy(t);
    return gather_rows(rt, "runtime_gather_padded", t, false);
}

/* ---------------------------------------------------------------- reduce */

/* In place over a contiguous tensor: NCCL for CUDA tensors, MPI for host
 * ones (f32/f64/i64/i32/u8; MEAN scales after the sum, where NCCL's
 * average scales each rank's values before it: the same within
 * rounding, as the two sum in different orders anyway). */
static CtStatus reduce_in_place(Runtime *rt, Tensor *r, RuntimeReduceOp op)
{
    int64_t n = tensor_numel(r);
    if (on_cuda(r)) return rt_nccl_allreduce(rt, tensor_data(r), n, tensor_dtype(r), op);
    CtStatus st = rt_comm_allreduce(rt, tensor_data(r), n, tensor_dtype(r), op);
    if (st != CT_OK || op != RUNTIME_REDUCE_MEAN) return st;
    double inv = 1.0 / rt->world_size;
    if (tensor_dtype(r) == CT_F64)
        for (double *p = tensor_data(r); n--; p++) *p *= inv;
    else
        for (float *p = tensor_data(r); n--; p++) *p *= (float)inv;
    return CT_OK;
}

static Tensor *reduce_tensor(Runtime *rt, Tensor *t, RuntimeReduceOp op)
{
    if (agree_layout(rt, "runtime_reduce", t, NULL) != CT_OK) return NULL;
    CtScope *scope = ct_scope_open(); /* the temporaries */
    if (!scope) {
        ct_error(CT_ERR_OOM, "runtime_reduce: out of memory");
        return NULL;
    }
    /* bf16 / f16 are reduced in f32 (MPI has no arithmetic for them, and
     * NCCL's would round at every hop), then rounded once */
    CtDType dt = tensor_dtype(t);
    bool half = dt == CT_BF16 || dt == CT_F16;
    bool grad = ct_set_grad_enabled(false);
    Tensor *r = half ? tensor_cast(t, CT_F32) : tensor_clone(t);
    if (r && reduce_in_place(rt, r, op) != CT_OK) r = NULL;
    if (r && half) r = tensor_cast(r, dt);
    ct_set_grad_enabled(grad);
    Tensor *out = r ? tensor_retain(r) : NULL;
    ct_scope_close(scope);
    return out ? as_result(out) : NULL;
}

static CtStatus check_op(const char *fn, RuntimeReduceOp op)
{
    if (op >= RUNTIME_REDUCE_SUM && op <= RUNTIME_REDUCE_MIN) return CT_OK;
    return ct_error(CT_ERR_INVALID, "%s: unknown reduce op %d", fn, (int)op);
}

Tensor *runtime_reduce(Runtime *rt, Tensor *t, RuntimeReduceOp op)
{
    if (!rt) {
        ct_error(CT_ERR_NULL, "runtime_reduce: NULL runtime");
        return NULL;
    }
    if (!t) return NULL;
    if (check_op("runtime_reduce", op) != CT_OK ||
        check_device("runtime_reduce", rt, t) != CT_OK)
        return NULL;
    if (op == RUNTIME_REDUCE_MEAN && !ct_dtype_is_float(tensor_dtype(t))) {
        ct_error(CT_ERR_DTYPE, "runtime_reduce: MEAN needs a float tensor, got %s",
                 ct_dtype_name(tensor_dtype(t)));
        return NULL;
    }
    if (tensor_dtype(t) == CT_BOOL) {
        ct_error(CT_ERR_DTYPE, "runtime_reduce: bool tensors cannot be reduced "
                               "(cast to an integer dtype)");
        return NULL;
    }
    if (rt->world_size == 1) return detached_copy(t);
    return reduce_tensor(rt, t, op);
}

CtStatus runtime_reduce_f64(Runtime *rt, double *values, int n, RuntimeReduceOp op)
{
    if (!rt) return ct_error(CT_ERR_NULL, "runtime_reduce_f64: NULL runtime");
    if (n < 0 || (n > 0 && !values))
        return ct_error(CT_ERR_INVALID, "runtime_reduce_f64: %d values at %p", n,
                        (void *)values);
    CtStatus st = check_op("runtime_reduce_f64", op);
    if (st != CT_OK || rt->world_size == 1) return st;
    st = rt_comm_allreduce(rt, values, n, CT_F64, op);
    if (st == CT_OK && op == RUNTIME_REDUCE_MEAN)
        for (int i = 0; i < n; i++) values[i] /= rt->world_size;
    return st;
}

CtStatus runtime_reduce_gradients(Runtime *rt, Module *m)
{
    if (!rt || !m)
        return ct_error(CT_ERR_NULL, "runtime_reduce_gradients: NULL %s",
                        rt ? "module" : "runtime");
    if (rt->world_size == 1) return CT_OK;
    Tensor *g = nn_module_grad_block(m);
    if (!g)
        return ct_error(CT_ERR_STATE,
                        "runtime_reduce_gradients: the model has no packed "
                        "gradient block holding its gradients (call "
                        "runtime_prepare_model first, and nn_module_pack again after "
                        "changing the model)");
    if (tensor_dtype(g) != CT_F32 && tensor_dtype(g) != CT_F64)
        return ct_error(CT_ERR_DTYPE,
                        "runtime_reduce_gradients: %s gradients (f32 or f64 "
                        "expected)",
                        ct_dtype_name(tensor_dtype(g)));
    /* the layout is the same on every rank by construction (same model,
     * broadcast at prepare): one all-reduce, no agreement round */
    return reduce_in_place(rt, g, RUNTIME_REDUCE_MEAN);
}

/* ------------------------------------------------------------- broadcast */

CtStatus runtime_broadcast(Runtime *rt, Tensor *t, int root)
{
    if (!rt) return ct_error(CT_ERR_NULL, "runtime_broadcast: NULL runtime");
    if (!t) return ct_last_status() != CT_OK ? ct_last_status() : CT_ERR_NULL;
    if (root < 0 || root >= rt->world_size)
        return ct_error(CT_ERR_INVALID,
                        "runtime_broadcast: root %d is not a rank (world "
                        "size %d)",
                        root, rt->world_size);
    if (!tensor_is_contiguous(t))
        return ct_error(CT_ERR_INVALID, "runtime_broadcast: the tensor is not contiguous "
                                        "(it is overwritten in place)");
    CtStatus dst = check_device("runtime_broadcast", rt, t);
    if (dst != CT_OK) return dst;
    if (rt->world_size == 1) return CT_OK;
    CtStatus st = agree_layout(rt, "runtime_broadcast", t, NULL);
    if (st != CT_OK) return st;
    int64_t bytes = tensor_numel(t) * (int64_t)ct_dtype_size(tensor_dtype(t));
    return on_cuda(t) ? rt_nccl_bcast(rt, tensor_data(t), bytes, root)
                      : rt_comm_bcast(rt, tensor_data(t), bytes, root);
}
