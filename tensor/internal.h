/* Private to tensor/: the tensor struct, autograd nodes, backend dispatch.
 *
 * How an op is written (see binary.c for a complete example):
 *   1. validate inputs once (ct_check_* helpers; NULL input -> return NULL
 *      without recording anything, which keeps errors sticky);
 *   2. allocate the output with ct_tensor_new (scope-owned or caller-owned);
 *   3. fill a CtOpCall and ct_dispatch it: the device's backend instance
 *      runs its kernel (tensor/backend.h);
 *   4. record the graph node with ct_node_new; if it gives one, save what
 *      backward needs. On any failure after step 2, return
 *      ct_op_discard(out): the fresh output is released, scope or not.
 * Backward functions compute input gradients with ordinary ops; the engine
 * runs them with grad mode off inside its own scope.
 */
#ifndef CTRAINER_TENSOR_INTERNAL_H
#define CTRAINER_TENSOR_INTERNAL_H

#include <string.h>

#include "ctrainer/tensor.h"
#include "mem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reference counts are updated atomically (tensors cross loader threads). */
#define ct_ref_inc(p) __atomic_add_fetch((p), 1, __ATOMIC_RELAXED)
#define ct_ref_dec(p) __atomic_sub_fetch((p), 1, __ATOMIC_ACQ_REL)

/* Bytes [lo, hi) of a storage. */
typedef struct CtByteRange {
    size_t lo, hi;
} CtByteRange;
/* Zeroed byte ranges a storage tracks: a flat gradient block whose backward
 * has written some gradients splits in a few pieces. */
#define CT_ZERO_RANGES 4

typedef struct CtStorage {
    int refcount; /* atomic: ct_ref_inc / ct_ref_dec */
    void *data;
    size_t nbytes;
    CtDevice device;
    bool external; /* wraps memory the storage does not own */
    bool pinned;   /* CPU storage in page-locked memory from ct_pinned_alloc
                      (tensor/async.c); freed with ct_pinned_free */
    /* Writes (ct_storage_written): a count of them, and the zero fills.
     * When zeroed_at == version, the byte ranges zero[0..nzero) hold zeros:
     * the last counted writes were zero fills over them (tensor_fill_),
     * and the backward engine's writes since (not counted) were cut out of
     * them. Backward reads this to write a zeroed leaf gradient in place
     * (autograd.c). version changes atomically (threads may read one
     * storage through tensor_data at once); the rest belongs to the
     * thread that writes the storage. */
    uint64_t version, zeroed_at;
    /* The writes by ops alone (version less tensor_data's), atomic too: a
     * node records it for each tensor its backward reads, and backward
     * refuses to run on values changed in place since (autograd.c). */
    uint64_t op_version;
    int nzero;
    CtByteRange zero[CT_ZERO_RANGES];
} CtStorage;

typedef struct CtNode CtNode;

struct Tensor {
    int refcount; /* atomic: ct_ref_inc / ct_ref_dec */
    CtStorage *storage;
    int64_t offset; /* in elements */
    CtDType dtype;
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    int64_t stride[CT_MAX_DIMS]; /* in elements */
    bool requires_grad;          /* leaf flag, or "has a grad_fn" */
    Tensor *grad;                /* leaves only; owned reference */
    CtNode *grad_fn;             /* owned; freed with the tensor */
    char name[32];
};

/* ------------------------------------------------------------- creation */

/* New contiguous tensor with fresh storage, registered in the current scope
 * (or caller-owned). Records an error and returns NULL on failure. */
Tensor *ct_tensor_new(int ndim, const int64_t *shape, CtDType dt, CtDevice dev);
/* Same, never registered in a scope (for leaf gradients and state that must
 * outlive the current scope). */
Tensor *ct_tensor_new_persistent(int ndim, const int64_t *shape, CtDType dt,
                                 CtDevice dev);
/* New view onto t's storage with the given geometry, registered in the scope. */
Tensor *ct_tensor_view(Tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                       int64_t offset);
/* Non-owning tensor over existing contiguous memory on `dev` (the memory
 * must outlive the tensor), registered in the scope. */
Tensor *ct_tensor_wrap(void *data, int ndim, const int64_t *shape, CtDType dt,
                       CtDevice dev);
/* A detached alias of t (same storage and geometry, no grad_fn), caller-
 * owned and never registered in a scope. */
Tensor *ct_tensor_alias(const Tensor *t);
/* A caller-owned alias of src broadcast (stride 0) to shape, or NULL:
 * nothing recorded when src does not broadcast to it, CT_ERR_OOM recorded
 * when out of memory. */
Tensor *ct_broadcast_alias(const Tensor *src, int ndim, const int64_t *shape);
/* A caller-owned reference to t when it is contiguous, else to a contiguous
 * copy; never registered in a scope, so kernels' temporary operands are
 * released by the caller whether or not a scope is open. NULL stays NULL. */
Tensor *ct_contiguous_ref(Tensor *t);
/* Hands a fresh reference (refcount already counted) to the current scope,
 * or to the caller when no scope is open. Returns t. */
Tensor *ct_scope_adopt(Tensor *t);
/* Gives up an op's fresh output on a failure path: freed now when no scope
 * is open (the caller would never see it) or when it is the current scope's
 * newest tensor, else left to the scope. Returns NULL, for
 * `return ct_op_discard(out);`. NULL is a no-op. */
Tensor *ct_op_discard(Tensor *out);

/* Channels-last layout (tensor/layout.c): 4-d (N, C, H, W) tensors with
 * strides (H*W*C, 1, W*C, C). ct_is_channels_last ignores the strides of
 * size-1 dims (so a tensor may be both contiguous and channels last);
 * ct_channels_last_only is channels last and not contiguous. */
static inline void ct_channels_last_strides(const int64_t shape[4], int64_t stride[4])
{
    stride[1] = 1;
    stride[3] = shape[1];
    stride[2] = shape[3] * shape[1];
    stride[0] = shape[2] * stride[2];
}

static inline bool ct_is_channels_last(const Tensor *t)
{
    if (!t || t->ndim != 4) return false;
    int64_t want[4];
    ct_channels_last_strides(t->shape, want);
    for (int d = 0; d < 4; d++)
        if (t->shape[d] > 1 && t->stride[d] != want[d]) return false;
    return true;
}

static inline bool ct_channels_last_only(const Tensor *t)
{
    return ct_is_channels_last(t) && !tensor_is_contiguous(t);
}
/* New tensor, never registered in a scope: channels last when cl (ndim
 * 4), else contiguous. */
Tensor *ct_tensor_new_laid_out(int ndim, const int64_t *shape, CtDType dt, CtDevice dev,
                               bool cl);
/* New tensor (in the scope) for an elementwise op's output: channels last
 * when the inputs of the output's shape (in[0..n), NULL skipped) are all
 * channels last and one is not contiguous, else contiguous. */
Tensor *ct_tensor_new_for(int ndim, const int64_t *shape, CtDType dt, CtDevice dev, int n,
                          const Tensor *const *in);
/* A caller-owned reference to t laid out as cl says (channels last, else
 * contiguous): t itself when it is, else a copy; never registered in a
 * scope. NULL stays NULL. */
Tensor *ct_layout_ref(Tensor *t, bool cl);

/* Whether v, truncated, is a value of integer dtype dt (i64, i32, u8; every
 * other dtype holds any v), as PyTorch checks scalars for overflow. */
bool ct_int_value_fits(CtDType dt, double v);

/* Pointer to element 0 of t (storage data + offset). */
static inline void *ct_ptr(const Tensor *t)
{
    return (char *)t->storage->data + (size_t)t->offset * ct_dtype_size(t->dtype);
}

/* After a kernel wrote t (every op's output): counts a write into its
 * storage, in version and op_version; while the backward engine runs
 * (ct_in_backward), cuts t's bytes out of the storage's zeroed ranges
 * instead, so that the other gradients of a zeroed block stay known zeros.
 * Raw access through tensor_data counts in version only. */
void ct_storage_written(const Tensor *t);
/* After t (contiguous) was filled with zeros: its bytes join the storage's
 * zeroed ranges when the writes since they were set were all zero fills,
 * else become the only range. */
void ct_storage_zeroed(const Tensor *t);
/* Whether t's elements (contiguous) are known to hold zeros: zero fills
 * covered them, and nothing wrote into them since. */
bool ct_known_zero(const Tensor *t);
/* The bytes of t's storage that t's elements can reach, [*lo, *hi) (empty
 * when t has no elements). */
void ct_byte_span(const Tensor *t, size_t *lo, size_t *hi);

/* bf16 <-> f32, inline for per-element kernel loops; ct_f32_to_bf16 and
 * ct_bf16_to_f32 (tensor.h) are these. Rounding is to nearest even; a NaN
 * stays a quiet NaN. */
static inline uint16_t ct_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float ct_bf16_widen(uint16_t x)
{
    uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The precision an autocast op (matmul, linear, conv2d) named `op` computes
 * x in: the autocast dtype for an f32 x inside a region, else CT_F32 (its
 * own). Records an error and returns false for f16 on a CPU tensor. */
bool ct_autocast_pick(const char *op, const Tensor *x, CtDType *dtype);
/* Whether conv2d on x keeps activations in the low dtype: inside a bf16/f16
 * region (its dtype in *low) with x on a CUDA device, conv2d casts its
 * f32 operands to *low (differentiable casts) and returns *low, and batch
 * norm, pooling, activations and adds then run on that dtype, as PyTorch's
 * CUDA autocast does. On the CPU activations stay f32 (ct_autocast_pick). */
bool ct_autocast_low_activations(const Tensor *x, CtDType *low);
/* Whether t is a bf16 or f16 tensor inside an autocast region: softmax,
 * log_softmax, layer norm and the losses widen it to f32, and linear and
 * matmul (ct_autocast_call) when the other operand is f32. */
bool ct_autocast_widens(const Tensor *t);
/* Whether ts mixes f32 with bf16/f16 and nothing else (what autocast's
 * convolutions leave on CUDA beside f32 tensors): binary ops, where, cat and
 * stack then run in f32, as PyTorch promotes. NULL entries: false. */
bool ct_promotes_to_f32(int n, Tensor *const *ts);
/* Whether any non-NULL ts[i] has dtype f32, bf16 or f16 other than dt. */
bool ct_autocast_needs_cast(int n, Tensor *const *ts, CtDType dt);
/* fn(ops, arg) with each of those operands replaced by tensor_cast(ops[i],
 * dt) (differentiable): the op run again on cast operands. Returns fn's
 * result, owned as an op's result is; NULL on failure (error recorded). */
Tensor *ct_autocast_call(int n, Tensor **ops, CtDType dt,
                         Tensor *(*fn)(Tensor **ops, const void *arg), const void *arg);

void ct_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
int64_t ct_shape_numel(int ndim, const int64_t *shape);
/* Normalises a possibly negative dim; records an error naming op if out of
 * range and returns -1. */
int ct_norm_dim(const char *op, int dim, int ndim);
/* Broadcast shape of a and b into out (ndim returned, -1 + error if
 * incompatible). */
int ct_broadcast_shape(const char *op, const Tensor *a, const Tensor *b, int64_t *out);
/* "[32, 784]" into buf. */
const char *ct_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);

/* --------------------------------------------------------------- checks */
/* Each returns true when fine; otherwise records an error naming `op` and
 * the offending tensors, and returns false. A NULL tensor returns false
 * without recording anything (sticky errors). */
bool ct_check_inputs(const char *op, int n, const Tensor *const *ts);
bool ct_check_same_dtype(const char *op, const Tensor *a, const Tensor *b);
bool ct_check_same_shape(const char *op, const Tensor *a, const Tensor *b);
bool ct_check_float(const char *op, const Tensor *t);
bool ct_check_dtype(const char *op, const Tensor *t, CtDType dt);
bool ct_check_ndim(const char *op, const Tensor *t, int lo, int hi);
/* A valid dtype and 0..CT_MAX_DIMS non-negative sizes whose bytes (and
 * contiguous strides) fit in int64; else false with a CT_ERR_DTYPE or
 * CT_ERR_SHAPE error naming op. */
bool ct_check_geometry(const char *op, int ndim, const int64_t *shape, CtDType dt);

/* Unary elementwise kinds (CT_OP_UNARY / UNARY_BWD); fused activations
 * of autograd nodes are named by them too. */
typedef enum CtUnaryKind {
    CT_UN_NEG,
    CT_UN_EXP,
    CT_UN_LOG,
    CT_UN_SQRT,
    CT_UN_ABS,
    CT_UN_CLAMP, /* a = lo, b = hi */
    CT_UN_RELU,
    CT_UN_LEAKY_RELU, /* a = negative slope */
    CT_UN_GELU_ERF,
    CT_UN_GELU_TANH,
    CT_UN_SILU,
    CT_UN_SIGMOID,
    CT_UN_TANH,
    CT_UN_ADD_SCALAR,  /* x + a */
    CT_UN_MUL_SCALAR,  /* x * a */
    CT_UN_RSUB_SCALAR, /* a - x */
    CT_UN_POW_SCALAR,  /* x ** a */
    CT_UN_RDIV_SCALAR, /* a / x */
    CT_UN_DIV_SCALAR,  /* x / a (a true division, as PyTorch's) */
} CtUnaryKind;

typedef struct CtUnaryParams {
    CtUnaryKind kind;
    double a, b;
} CtUnaryParams;

/* -------------------------------------------------------------- autograd */

#define CT_NODE_MAX_IN       4
#define CT_NODE_MAX_SAVED    4
#define CT_NODE_PARAMS_BYTES 128

/* Computes gin[i] (same shape as n->in[i]) for every i with
 * n->needs_grad[i]; leaves other entries NULL. gout has the output's shape. */
typedef CtStatus (*CtBackwardFn)(CtNode *n, Tensor *gout, Tensor **gin);

struct CtNode {
    const char *op;
    CtBackwardFn backward;
    int n_in;
    Tensor *in[CT_NODE_MAX_IN]; /* owned references */
    bool needs_grad[CT_NODE_MAX_IN];
    Tensor *saved[CT_NODE_MAX_SAVED]; /* owned references */
    /* Set by ct_node_fuse_act: the op's output is act(op result), and gout
     * is multiplied by act's derivative, read from this detached alias of
     * act_x (the output for ReLU, the pre-activation for GELU), before
     * `backward` runs. */
    Tensor *act_x;
    CtUnaryKind act;
    unsigned char params[CT_NODE_PARAMS_BYTES] __attribute__((aligned(16)));
    /* The op_version of what backward reads, when the node recorded it:
     * in[i] for each bit i of `reads` (the op sets them), saved[i], act_x.
     * Backward fails when one changed since (an in-place write). */
    unsigned reads;
    uint64_t in_version[CT_NODE_MAX_IN], saved_version[CT_NODE_MAX_SAVED], act_version;
    bool released; /* graph consumed by backward */
    /* engine scratch */
    Tensor *grad_acc;
    /* Set by the engine for the call to `backward`: input i's leaf
     * gradient, which holds zeros, for the node to write input i's gradient
     * into (ct_node_grad_buffer) instead of a new tensor; borrowed. */
    Tensor *grad_dest[CT_NODE_MAX_IN];
    int visit;
};

/* Records a node on `out` when grad mode is on and some input requires grad,
 * into *node; *node = NULL when no node is needed (nothing to save then).
 * Returns CT_OK, or CT_ERR_OOM (recorded, *node = NULL, out untouched) when
 * the node cannot be allocated: the op must fail then, never go on without
 * its node. A NULL out records nothing and returns CT_OK. Inputs may be
 * NULL. */
CtStatus ct_node_new(Tensor *out, const char *op, CtBackwardFn bw, int n_in,
                     Tensor *const *in, CtNode **node);
/* Marks input i as read by n's backward (n->reads): backward then refuses to
 * run when i's values were changed in place since the forward. Inputs
 * backward needs only the shape, dtype or device of stay unmarked. */
static inline void ct_node_reads(CtNode *n, int i)
{
    n->reads |= 1u << i;
}
/* For a product of in[0] and in[1] (mul, matmul, linear): each operand's
 * gradient reads the other operand. */
static inline void ct_node_reads_factors(CtNode *n)
{
    if (n->needs_grad[0]) ct_node_reads(n, 1);
    if (n->needs_grad[1]) ct_node_reads(n, 0);
}
/* Keeps a reference to t in n->saved[i]. For the node's own output use
 * ct_node_save_output (a detached alias, to avoid a reference cycle), which
 * can fail (CT_ERR_OOM, recorded; the op must fail then). */
void ct_node_save(CtNode *n, int i, Tensor *t);
CtStatus ct_node_save_output(CtNode *n, int i, Tensor *out);
/* Where a backward function puts input i's gradient (the shape, dtype and
 * device of `like`, n->in[i]): the leaf gradient the engine offers
 * (n->grad_dest[i]), which the node then overwrites and returns in gin[i]
 * so that no addition follows, or else a new contiguous tensor in the
 * current scope. NULL with an error recorded when out of memory. */
Tensor *ct_node_grad_buffer(CtNode *n, int i, const Tensor *like);
/* Whether the backward engine is running on this thread: its writes are
 * not counted, only cut out of the zeroed ranges (ct_storage_written). */
bool ct_in_backward(void);
/* Marks n's output as act(op result), where x is what act's gradient reads
 * (ct_unary_bwd_uses_output): the output for CT_UN_RELU, else the
 * pre-activation. Backward first multiplies gout by act'(x), as the
 * unary op's node would, then runs n->backward on the result. Can fail
 * (CT_ERR_OOM, recorded; the op must fail then). */
CtStatus ct_node_fuse_act(CtNode *n, CtUnaryKind act, Tensor *x);
/* ct_node_fuse_act(n, CT_UN_RELU, out): out already holds the ReLU. */
CtStatus ct_node_fuse_relu(CtNode *n, Tensor *out);
/* Whether ct_node_new would record a node for these inputs (grad mode on
 * and some input requiring grad). */
bool ct_node_wanted(int n_in, Tensor *const *in);
/* New tensor act'(x) * g by the UNARY_BWD kernel (the bits of the unary
 * op's backward), x as in ct_node_fuse_act. NULL on error (recorded). */
Tensor *ct_act_grad(CtUnaryKind act, const Tensor *x, Tensor *g);
/* out <- act(x) by the UNARY kernel, no autograd; out may be x (in place,
 * for an op's fresh output that nothing else has seen yet). */
CtStatus ct_act_run(CtUnaryKind act, Tensor *out, const Tensor *x);
/* Typed access to the params block. */
#define CT_NODE_PARAMS(n, T) ((T *)(void *)(n)->params)
void ct_node_free(CtNode *n);

/* ------------------------------------------------------------- dispatch */

typedef enum CtOp {
    /* core (tensor/cpu/copy.c) */
    CT_OP_FILL, /* out <- value                         CtFillParams */
    CT_OP_COPY, /* out <- cast(in[0]); same shape, any strides/dtypes */
    CT_OP_RNG,  /* out <- random draw, or in0 * a Bernoulli draw (dropout;
                 * float, contiguous, out's dtype)      CtRngParams */
    /* elementwise */
    CT_OP_BINARY,    /* out <- in0 (op) in1             CtBinaryParams */
    CT_OP_UNARY,     /* out <- f(in0)                   CtUnaryParams */
    CT_OP_UNARY_BWD, /* out <- f'(in0) * in1(=gout)     CtUnaryParams */
    CT_OP_WHERE,     /* out <- in0 ? in1 : in2 */
    /* reductions, softmax, losses */
    CT_OP_REDUCE,
    CT_OP_ARG_REDUCE,
    CT_OP_SOFTMAX,
    CT_OP_SOFTMAX_BWD,
    CT_OP_CROSS_ENTROPY,
    CT_OP_CROSS_ENTROPY_BWD,
    /* linear algebra and convolution */
    CT_OP_MATMUL, /*                                     CtMatmulParams */
    CT_OP_CONV2D,
    CT_OP_CONV2D_BWD_DATA,
    CT_OP_CONV2D_BWD_WEIGHT,
    CT_OP_POOL2D,
    CT_OP_POOL2D_BWD,
    /* normalisation */
    CT_OP_BATCH_NORM,
    CT_OP_BATCH_NORM_BWD,
    CT_OP_LAYER_NORM,
    CT_OP_LAYER_NORM_BWD,
    /* indexing */
    CT_OP_INDEX_SELECT,
    CT_OP_INDEX_ADD,
    CT_OP_GATHER,
    CT_OP_SCATTER_ADD,
    CT_OP_ONE_HOT,
    /* mixed precision (tensor/cpu/unscale.c) */
    CT_OP_UNSCALE, /* out0 *= inv_scale in place (f32); out1 (f32, 1
                      element) <- 1 when an element of out0 was inf or
                      NaN, else left as is. One pass.   CtUnscaleParams */
    /* optimizer block ops (tensor/cpu/optim.c): every operand contiguous,
     * one float dtype (f32 or f64), one numel; in place on out[]. out[4],
     * when set, is the gradient (in[0] itself): the pass zeroes it after
     * reading it (CT_OPTIM_ZERO_GRAD). */
    CT_OP_OPTIM_SGD,     /* out {param, momentum_buf|NULL}, in {grad}  CtSgdParams */
    CT_OP_OPTIM_ADAM,    /* out {param, exp_avg, exp_avg_sq,
                            max_exp_avg_sq|NULL}, in {grad}  CtAdamParams */
    CT_OP_OPTIM_RMSPROP, /* out {param, square_avg, momentum_buf|NULL,
                            grad_avg|NULL}, in {grad}  CtRmspropParams */
    CT_OP_BLOCK_NORM,    /* out0 (f64, one per CT_NORM_CHUNK of in0) <- sum of
                            squares or max |x| of that chunk  CtBlockNormParams */
    CT_OP_BLOCK_SCALE,   /* out0 *= value                   CtFillParams */
    CT_OP_BLOCK_CLAMP,   /* out0 <- clamp(out0, -value, value); NaN stays
                                                            CtFillParams */
    CT_OP_COUNT
} CtOp;

const char *ct_op_name(CtOp op);

/* The op profile (op_profile.c, ct_set_op_profile): whether it is on, a
 * monotonic clock in ns, and one op's host time added to its kind. */
bool ct_op_profile_on(void);
uint64_t ct_op_profile_clock(void);
void ct_op_profile_add(CtOp op, uint64_t elapsed_ns);

#define CT_CALL_MAX_OUT 5
#define CT_CALL_MAX_IN  6

/* A backend instance (tensor/backend.h). */
typedef struct CtBackend CtBackend;

/* One kernel invocation. All tensors are on one device; the front-end has
 * validated shapes and dtypes. Tensors may be strided unless the op's
 * params header says the kernel requires contiguous operands. */
typedef struct CtOpCall {
    CtOp op;
    Tensor *out[CT_CALL_MAX_OUT];
    const Tensor *in[CT_CALL_MAX_IN];
    const void *params;
    /* The instance running the call: set by ct_dispatch (callers leave it
     * NULL); kernels take their stream and handles from its context. */
    const CtBackend *backend;
    /* The front-end op an unsupported call's error names (tensor_add's
     * "add"); NULL names the kernel (ct_op_name). */
    const char *name;
} CtOpCall;

typedef CtStatus (*CtKernelFn)(const CtOpCall *c);
/* Whether a kernel accepts this call (dtypes, layout); NULL = all calls. */
typedef bool (*CtSupportsFn)(const CtOpCall *c);

/* Runs the call through the backend instance of the device of out[0] (or
 * in[0]). Records "<op>: not supported on <device> for <dtype>" when no
 * kernel fits. */
CtStatus ct_dispatch(const CtOpCall *c);
/* ct_dispatch, except that where the backend takes no kernel for c but
 * would with its bf16 and f16 operands in f32, c runs on f32 copies of them
 * (outputs starting from their values, then rounded back): a bf16 result
 * is the f32 op's, rounded once, as PyTorch computes reductions on
 * low-precision tensors (its index accumulations round after every add,
 * which this does not copy). For ops with no bf16/f16 kernel
 * (REDUCE, INDEX_ADD, SCATTER_ADD, LAYER_NORM): on a GPU, autocast leaves
 * convolution outputs in bf16, and these ops then meet them. */
CtStatus ct_dispatch_widening(const CtOpCall *c);
/* ct_dispatch for ops whose kernel wants out contiguous and is the same
 * under a permutation of every operand's dims (BINARY, UNARY, UNARY_BWD,
 * WHERE): a channels-last out[0] runs over the (N, H, W, C) views of every
 * operand, where it is contiguous. */
CtStatus ct_elementwise_dispatch(const CtOpCall *c);
/* Sets *nhwc, the channels-last flag in the params of `probe` (a call with
 * x as its data input), to true when x is channels last and not contiguous
 * and x's backend accepts the call so; leaves it false otherwise. */
void ct_pick_channels_last(const Tensor *x, const CtOpCall *probe, bool *nhwc);

/* Counts one host synchronisation (tensor/host_sync.c, ct_host_sync_count). */
void ct_host_sync_note(void);

/* Caching allocator (tensor/allocator.c) of the device's instance. */
void *ct_device_alloc(CtDevice dev, size_t nbytes);
void ct_device_free(CtDevice dev, void *p, size_t nbytes);
/* Frees a block of page-locked host memory (a pinned storage's data),
 * through the instance that provided it (tensor/async.c). */
void ct_pinned_free(void *p);

/* -------------------------------------------------- params of core ops */

typedef struct CtFillParams {
    double value;
} CtFillParams;

typedef enum CtRngKind { CT_RNG_UNIFORM, CT_RNG_NORMAL, CT_RNG_BERNOULLI } CtRngKind;

/* Block b is Philox-4x32-10 of counter (lo(offset+b), hi(offset+b),
 * lo(stream), hi(stream)) and key (lo(seed), hi(seed)). 32-bit draws (f32,
 * bf16, f16 uniforms; bernoulli) take element i from lane i%4 of block i/4:
 * (lane >> 8) * 2^-24. f64 uniforms and all normals take element i from lanes
 * (2j, 2j+1), j = i%2, of block i/2: f64 uniform = 53 bits (hi>>5, lo>>6);
 * normal = Box-Muller sqrt(-2 ln((l0+1)/2^32)) cos(2 pi l1/2^32), in double.
 * Out is contiguous. */
typedef struct CtRngParams {
    CtRngKind kind;
    double a, b; /* uniform [a, b); normal mean a, std b; bernoulli: b with
                  * probability a, else 0 */
    uint64_t seed, stream, offset;
} CtRngParams;

typedef enum CtBinaryKind {
    CT_BIN_ADD,
    CT_BIN_SUB,
    CT_BIN_MUL,
    CT_BIN_DIV,
    CT_BIN_POW,
    CT_BIN_MAX,
    CT_BIN_MIN,
    CT_BIN_ADD_RELU, /* relu(x + y), tensor_relu's expression */
    /* comparisons: out is CT_BOOL */
    CT_BIN_EQ,
    CT_BIN_NE,
    CT_BIN_LT,
    CT_BIN_LE,
    CT_BIN_GT,
    CT_BIN_GE,
} CtBinaryKind;

/* in0, in1 are already expanded (stride-0) views of out's shape; out may
 * alias in0 (in-place accumulate). */
typedef struct CtBinaryParams {
    CtBinaryKind kind;
} CtBinaryParams;

/* C[i] = alpha * op(A[i]) @ op(B[i]) + beta * C[i] for i < batch.
 * Each matrix is contiguous row-major: A is (m, k), or (k, m) when trans_a;
 * B is (k, n), or (n, k) when trans_b; C is (m, n). Matrix i starts at
 * i * stride_x elements (stride 0 broadcasts one matrix). in0 = A, in1 = B,
 * out0 = C; the pointers are those of the tensors (ct_ptr). */
typedef struct CtUnscaleParams {
    double inv_scale;
} CtUnscaleParams;

/* Activation fused after a matmul (CtMatmulParams.act). GELU is the tanh
 * approximation (CT_UN_GELU_TANH), the one cuBLASLt's epilogue computes. */
typedef enum CtMatmulAct {
    CT_MATMUL_ACT_NONE,
    CT_MATMUL_ACT_RELU,
    CT_MATMUL_ACT_GELU_TANH,
} CtMatmulAct;

/* With `bias` or `act` (a fused epilogue, which only the CUDA kernel takes;
 * the CPU kernel's supports rejects it): C[i] = act(alpha * op(A[i]) @
 * op(B[i]) + beta * C[i] + bias), in2 = bias (n), C's dtype, added to every
 * row of C. With `aux` (act GELU only), out1 (contiguous, C's shape and
 * dtype) also receives act's input, for the backward. */
typedef struct CtMatmulParams {
    int64_t batch, m, n, k;
    bool trans_a, trans_b;
    int64_t stride_a, stride_b, stride_c;
    double alpha, beta;
    /* CT_F32 (the zero default): compute in the operands' dtype. CT_BF16 or
     * CT_F16 (autocast): f32 operands are rounded to it, the products are
     * accumulated in f32 and C stays f32. */
    CtDType autocast;
    bool bias;       /* in2 holds the bias */
    CtMatmulAct act; /* CT_MATMUL_ACT_NONE (the zero default): none */
    bool aux;        /* out1 holds the pre-activation */
    /* out1 (m entries, contiguous, C's dtype) <- the sums of op(A)'s rows
     * over k: a linear layer's bias gradient beside its weight gradient
     * (A = gᵀ), in the GEMM's epilogue where the backend has one. Only
     * with one matrix, no autocast and none of bias, act and aux. */
    bool bias_grad;
} CtMatmulParams;

/* Optimizer steps: hyper-parameters and the terms the host computes from
 * the step count, in f64; kernels cast each to the operands' dtype once.
 * The per-element formulas are in tensor/optim_math.h. */
typedef struct CtSgdParams {
    double lr, weight_decay, momentum, one_minus_dampening;
    bool first;    /* momentum_buf was just created: it takes d as is */
    bool nesterov; /* requires a momentum_buf */
} CtSgdParams;

typedef struct CtAdamParams {
    double decay_mul; /* AdamW: 1 - lr * wd; Adam: 1 */
    double l2;        /* Adam: wd; AdamW: 0 */
    double beta1, beta2, one_minus_beta1, one_minus_beta2;
    double step_size; /* lr / (1 - beta1^t) */
    double bc2_sqrt;  /* sqrt(1 - beta2^t) */
    double eps;
} CtAdamParams;

typedef struct CtRmspropParams {
    double lr, weight_decay, momentum, alpha, one_minus_alpha, eps;
} CtRmspropParams;

/* The out[] slot of an optimizer op's gradient when the pass also zeroes it. */
#define CT_OPTIM_ZERO_GRAD 4

/* Block norms are reduced in fixed chunks, each summed in index order, so
 * the partials (and the caller's in-order sum of them) do not depend on the
 * device or the number of threads. */
#define CT_NORM_CHUNK 65536
typedef struct CtBlockNormParams {
    bool max_abs; /* false: sum of x^2 in f64; true: max |x| (NaN wins) */
} CtBlockNormParams;

#ifdef __cplusplus
}
#endif

#include "backend.h" /* instances, registry, allocator: after CtOpCall */
#endif
