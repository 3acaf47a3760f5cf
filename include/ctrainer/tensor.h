/* ctrainer — tensors, scopes, autograd and ops.
 *
 * Ownership
 * ---------
 * A Tensor is a refcounted handle onto refcounted storage. Tensors created
 * while a scope is open (ct_scope_open) belong to that scope and are released
 * when it closes; the caller never frees them. Tensors created with no scope
 * open are *persistent*: the caller owns them and releases them with
 * tensor_free. tensor_retain adds a reference the caller must release with
 * tensor_free; that is how a scope-created tensor is kept past its scope.
 *
 * Errors
 * ------
 * Ops return NULL on failure and record a message (see status.h). An op given
 * a NULL input returns NULL and keeps the first message (sticky errors).
 *
 * Autograd
 * --------
 * Define-by-run. When grad mode is on and an input requires grad, an op
 * records a node. tensor_backward runs the graph in reverse and accumulates
 * (+=) into the .grad of leaf tensors that require grad; the graph is then
 * released, so nothing but leaf gradients outlives backward. Views
 * (reshape, slice, transpose, expand) are differentiable like any op.
 * A leaf gradient known to hold zeros (zeroed by tensor_fill_/tensor_zero_,
 * as zero_grad does, or by an optimizer update with zero_grad set, and not
 * written since, a backward's own writes included) is overwritten instead: the
 * op's backward writes straight into it, with the values 0 + g would have
 * (only a -0 gradient stays -0), and no addition pass (on a GPU, no
 * launch) per parameter. Writes through tensor_data count as writes.
 *
 * Shapes are given as (ndim, const int64_t *shape). Negative dims count from
 * the end, as in PyTorch.
 */
#ifndef CTRAINER_TENSOR_H
#define CTRAINER_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctrainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_MAX_DIMS 8

/* ---------------------------------------------------------------- dtypes */

typedef enum CtDType {
    CT_F32 = 0,
    CT_F64,
    CT_BF16,
    CT_F16,
    CT_I64,
    CT_I32,
    CT_U8,
    CT_BOOL,
    CT_DTYPE_COUNT
} CtDType;

/* Bytes per element. */
size_t ct_dtype_size(CtDType dt);
/* "f32", "bf16", ... */
const char *ct_dtype_name(CtDType dt);
/* True for f32, f64, bf16, f16. */
bool ct_dtype_is_float(CtDType dt);

/* Scalar conversions; float -> half types round to nearest even, NaN stays
 * NaN, overflow goes to infinity. */
uint16_t ct_f32_to_bf16(float x);
float ct_bf16_to_f32(uint16_t x);
uint16_t ct_f32_to_f16(float x);
float ct_f16_to_f32(uint16_t x);

/* --------------------------------------------------------------- devices */

typedef enum CtDeviceType { CT_DEVICE_CPU = 0, CT_DEVICE_CUDA = 1 } CtDeviceType;

typedef struct CtDevice {
    CtDeviceType type;
    int index; /* CUDA ordinal; 0 for CPU */
} CtDevice;

static inline CtDevice ct_cpu(void)
{
    CtDevice d = {CT_DEVICE_CPU, 0};
    return d;
}
static inline CtDevice ct_cuda(int index)
{
    CtDevice d = {CT_DEVICE_CUDA, index};
    return d;
}
bool ct_device_eq(CtDevice a, CtDevice b);
/* Writes "cpu" or "cuda:N" into buf (at least 16 bytes); returns buf. */
const char *ct_device_str(CtDevice d, char *buf);
/* Number of usable CUDA devices (0 when the CUDA backend is not built or no
 * GPU is present). */
int ct_cuda_device_count(void);
/* True once this process has used a CUDA device (selected one, made a
 * tensor or pinned memory there): it then holds a context and device memory.
 * Counting devices (ct_cuda_device_count) does not count. Always false
 * without the CUDA backend. Launchers that start new processes check it
 * (runtime_launch). */
bool ct_cuda_initialized(void);

/* ---------------------------------------------------------------- tensor */

typedef struct Tensor Tensor;

/* Creation. The result is owned by the open scope, or by the caller when no
 * scope is open. Contents of tensor_empty are unspecified. */
Tensor *tensor_empty(int ndim, const int64_t *shape, CtDType dt, CtDevice dev);
Tensor *tensor_zeros(int ndim, const int64_t *shape, CtDType dt, CtDevice dev);
Tensor *tensor_ones(int ndim, const int64_t *shape, CtDType dt, CtDevice dev);
Tensor *tensor_full(int ndim, const int64_t *shape, double value, CtDType dt,
                    CtDevice dev);
/* Copies `data` (host memory, numel elements of dt, row-major). */
Tensor *tensor_from_data(const void *data, int ndim, const int64_t *shape, CtDType dt,
                         CtDevice dev);
/* 0-d tensor. */
Tensor *tensor_scalar(double value, CtDType dt, CtDevice dev);
/* [start, end) by step, 1-d. */
Tensor *tensor_arange(double start, double end, double step, CtDType dt, CtDevice dev);
/* Same shape, dtype, device as `like`. */
Tensor *tensor_zeros_like(const Tensor *like);
Tensor *tensor_ones_like(const Tensor *like);
Tensor *tensor_empty_like(const Tensor *like);

/* Adds a reference; the caller releases it with tensor_free. Returns t. */
Tensor *tensor_retain(Tensor *t);
/* Releases the caller's reference (NULL is a no-op). Never call it on a
 * scope-owned tensor you did not retain. */
void tensor_free(Tensor *t);

/* Accessors. */
int tensor_ndim(const Tensor *t);
const int64_t *tensor_shape(const Tensor *t);
const int64_t *tensor_strides(const Tensor *t); /* in elements */
int64_t tensor_size(const Tensor *t, int dim);  /* negative dims allowed */
int64_t tensor_numel(const Tensor *t);
CtDType tensor_dtype(const Tensor *t);
CtDevice tensor_device(const Tensor *t);
bool tensor_is_contiguous(const Tensor *t); /* every empty tensor is, as in PyTorch */
/* Pointer to the first element. Host memory for CPU tensors, device memory
 * for CUDA tensors. Valid while the tensor lives. Counts as a write into
 * t's storage for the known zeros (see "Autograd" above), not as an
 * in-place op for backward's checks (tensor_backward). */
void *tensor_data(const Tensor *t);
/* True when both views share storage. */
bool tensor_shares_storage(const Tensor *a, const Tensor *b);
/* Value of a one-element tensor as double (copies from the device if
 * needed). Returns NAN and records an error otherwise. */
double tensor_item(const Tensor *t);
/* Copies all elements, in row-major order, into host memory `dst` as dt. */
CtStatus tensor_copy_to_host(const Tensor *t, void *dst, CtDType dt);
/* Writes a short description "f32[32, 784] cpu" into buf (>= 96 bytes). */
const char *tensor_describe(const Tensor *t, char *buf, size_t n);
/* Debug name shown in error messages (copied, truncated to 31 chars). */
void tensor_set_name(Tensor *t, const char *name);
const char *tensor_name(const Tensor *t);

/* In-place, never recorded by autograd (for optimizers, init, metrics). An
 * integer tensor refuses a value that does not fit its dtype once truncated
 * (CT_ERR_INVALID), as PyTorch does; tensor_full and tensor_masked_fill
 * too. */
CtStatus tensor_fill_(Tensor *t, double value);
CtStatus tensor_zero_(Tensor *t);
/* dst <- src (src broadcast to dst's shape; dtype and device may differ).
 * Views of one storage that overlap copy as if through a temporary
 * (x[1:] <- x[:-1] shifts x), on every backend. A dst whose elements
 * share memory (an expanded view) is refused, as in PyTorch. */
CtStatus tensor_copy_(Tensor *dst, const Tensor *src);

/* Makes t a contiguous view of block[off, off + numel(t)) after copying t's
 * values there. block is 1-d with t's dtype (any device: values are copied
 * across). t keeps its identity, requires_grad and name, so pointers held
 * elsewhere stay valid; its old storage is released. Not recorded by
 * autograd; t must not be part of a pending graph. This is how nn packs a
 * model's parameters (and gradients) into one buffer per device. */
CtStatus tensor_rebind(Tensor *t, Tensor *block, int64_t off);

/* ----------------------------------------------------------- state dicts */

/* An ordered list of named tensors: model weights, optimizer state. Holds a
 * reference to each tensor and a copy of each name. */
typedef struct CtStateDict CtStateDict;

CtStateDict *ct_state_dict_create(void);
void ct_state_dict_free(CtStateDict *d);
/* Appends (name, t); a duplicate name is an error (CT_ERR_INVALID). */
CtStatus ct_state_dict_add(CtStateDict *d, const char *name, Tensor *t);
int64_t ct_state_dict_size(const CtStateDict *d);
/* Entry i (0 <= i < size): its name, and its tensor (owned by d). */
const char *ct_state_dict_name(const CtStateDict *d, int64_t i);
Tensor *ct_state_dict_tensor(const CtStateDict *d, int64_t i);
/* The tensor named `name`, or NULL (no error recorded). */
Tensor *ct_state_dict_get(const CtStateDict *d, const char *name);
/* Removes the entry `name` (dropping d's reference; later entries keep
 * their order); false when there is none (no error recorded). */
bool ct_state_dict_remove(CtStateDict *d, const char *name);

/* ---------------------------------------------------------------- scopes */

typedef struct CtScope CtScope;

/* Opens a scope on this thread; scopes nest. Returns NULL on OOM. */
CtScope *ct_scope_open(void);
/* Releases every tensor created while `s` was the innermost scope, and closes
 * any scope opened inside it that was left open. */
void ct_scope_close(CtScope *s);
/* Number of tensors `s` holds (for tests and leak checks). */
size_t ct_scope_count(const CtScope *s);

/* ------------------------------------------------------ caching allocator */

typedef struct CtAllocStats {
    size_t in_use;   /* bytes handed out and not returned */
    size_t cached;   /* bytes held in free lists */
    size_t peak;     /* max in_use since start or last reset */
    size_t n_allocs; /* calls that reached the system allocator */
} CtAllocStats;

/* Statistics of dev's cache (each device has its own). A device not used
 * yet, or one that does not exist, reports zeros; asking records nothing. */
CtAllocStats ct_alloc_stats(CtDevice dev);
void ct_alloc_reset_peak(CtDevice dev);

/* Memory of one device as its caching allocator sees it, the same on the
 * CPU and on CUDA devices (the torch.cuda.memory_allocated /
 * memory_reserved / max_memory_allocated analogues). Bytes are the
 * allocator's size classes, so slightly more than the tensors' sizes. */
typedef struct CtMemoryStats {
    size_t allocated; /* in tensors now */
    size_t cached;    /* freed by tensors, kept for reuse (cuda: not cudaFree'd) */
    size_t peak;      /* max allocated since start or ct_alloc_reset_peak */
} CtMemoryStats;

/* The statistics of dev; zeros for a device not used yet or one that does
 * not exist. Records nothing and creates no device context. */
CtMemoryStats ct_memory_stats(CtDevice dev);
/* Returns cached blocks of `dev` to the system. */
void ct_alloc_empty_cache(CtDevice dev);

/* --------------------------------------------------------------- autograd */

/* Grad mode is per thread, on by default. Returns the previous setting. */
bool ct_set_grad_enabled(bool on);
bool ct_grad_enabled(void);

/* ------------------------------------------------------ backend settings */

/* Process-wide switches read by the GPU backend (the CPU backend is always
 * deterministic and never uses TF32). Each setter returns the previous value;
 * a call affects ops dispatched after it, on every thread.
 *
 * Deterministic algorithms (PyTorch's torch.use_deterministic_algorithms),
 * default off, or on when CTRAINER_DETERMINISTIC is set to anything but ""
 * or "0"; RuntimeArgs.deterministic turns it on. On CUDA it makes cuDNN
 * pick only algorithms it reports deterministic and cuBLAS/cuBLASLt use no
 * split-K reduction or atomics. docs/checkpoints.md lists the CUDA paths
 * that are nondeterministic without it.
 *
 * TF32 for f32 matmul and convolution on CUDA tensor cores (PyTorch's
 * allow_tf32), default off, or on when CTRAINER_ALLOW_TF32 is set to
 * anything but "" or "0". TF32 keeps f32's range with a 10-bit mantissa:
 * faster, with errors near 1e-3 relative.
 *
 * cuDNN benchmark mode (PyTorch's torch.backends.cudnn.benchmark), default
 * off, or on when CTRAINER_CUDNN_BENCHMARK is set to anything but "" or
 * "0". Off, a convolution takes the first algorithm of cuDNN's heuristics
 * that the settings above allow. On, the first call of each shape runs
 * every algorithm once (with up to 256 MiB of workspace) and keeps the
 * fastest allowed one: a slower first step, then faster convolutions when
 * shapes repeat. Either way the choice is made once per shape and CUDA
 * device instance. Ignored while deterministic algorithms are on: timings
 * could pick a different algorithm in each run. */
bool ct_set_deterministic(bool on);
bool ct_deterministic(void);
bool ct_set_allow_tf32(bool on);
bool ct_allow_tf32(void);
bool ct_set_cudnn_benchmark(bool on);
bool ct_cudnn_benchmark(void);

/* --------------------------------------------------------------- autocast */

/* Autocast (PyTorch's torch.autocast), per thread, off by default. Inside a
 * CT_BF16 (or CT_F16) region, matmul, linear and conv2d given f32 tensors
 * compute in the low precision: their operands are rounded to it (to
 * nearest even), products are accumulated in f32, and the result is f32
 * (PyTorch returns the low dtype; f32 keeps every other op, and the
 * accuracy, where PyTorch's f32 op list puts it anyway). On CUDA, conv2d
 * returns the low dtype instead (its operands cast to it), and batch norm,
 * pooling, activations and adds then run on it, as in PyTorch; linear and
 * matmul widen a low-dtype input next to f32 weights, and softmax,
 * log_softmax, layer norm and every loss widen theirs, so logits and
 * losses are f32. Every other op (batch norm, reductions, exp/log/pow,
 * elementwise) runs in its inputs' dtype (a reduction of bf16 values is
 * computed in f32 and rounded once). Their backward runs in
 * the same precision whether or not the region is still open, and the
 * gradients of f32 inputs are f32: parameters, gradients and optimizer
 * state are never converted. bf16 runs on the CPU (avx512_bf16 kernels
 * where the CPU has them, else the same rounding on the f32 path) and on
 * CUDA; f16 is CUDA only: an autocast op on a CPU tensor then fails with an
 * error suggesting bf16. See docs/mixed_precision.md.
 *
 *     CtDType prev;
 *     tensor_autocast_begin(CT_BF16, &prev);
 *     Tensor *loss = forward(model, x);
 *     tensor_autocast_end(prev);
 *     tensor_backward(loss, NULL);
 *
 * begin: dtype is CT_BF16, CT_F16, or CT_F32 (a region with autocast off);
 * stores the previous setting in *prev (may be NULL). Other dtypes are an
 * error and change nothing. end restores prev. */
CtStatus tensor_autocast_begin(CtDType dtype, CtDType *prev);
void tensor_autocast_end(CtDType prev);
/* The current autocast dtype: CT_BF16, CT_F16, or CT_F32 when off. */
CtDType tensor_autocast_dtype(void);

/* t *= inv_scale in place (t: contiguous f32, typically a flat gradient
 * block), and *found_nonfinite = whether any element of t was inf or NaN,
 * in one pass over t (the loss scaler's unscale). No autograd. */
CtStatus tensor_unscale_(Tensor *t, double inv_scale, bool *found_nonfinite);

/* Marks a leaf tensor as requiring grad. Errors on non-float dtypes and on
 * non-leaf tensors. A leaf that stops requiring grad before a backward
 * through an earlier forward gets no gradient from it. */
CtStatus tensor_set_requires_grad(Tensor *t, bool on);
bool tensor_requires_grad(const Tensor *t);
/* A view sharing storage with t, detached from the graph. */
Tensor *tensor_detach(Tensor *t);
/* The accumulated gradient of a leaf, or NULL before the first backward. The
 * gradient is owned by t. */
Tensor *tensor_grad(const Tensor *t);
/* Uses `g` (same shape and dtype as t) as t's gradient buffer: backward then
 * accumulates into it. nn uses this to point gradients into one flat block.
 * t takes a reference; NULL drops the current gradient. */
CtStatus tensor_set_grad(Tensor *t, Tensor *g);
/* Runs backward from `root`. `grad` seeds d(root); NULL means ones, which
 * requires a one-element root. `grad` is only read, and a contiguous one of
 * root's dtype is used as it is (no copy, no op): a caller that backs the
 * same loss shape every step can keep one ones tensor as its seed. Releases
 * the graph afterwards. Backward needs some tensors as the forward saw
 * them (mul's other factor, matmul's and linear's operands, exp's output,
 * a fused ReLU's output...). When one of them was changed in place between
 * the forward and the backward (by an op writing into it: an optimizer
 * step, tensor_copy_, tensor_fill_; a view's storage counts), backward
 * fails with CT_ERR_STATE naming the op and the tensor, as PyTorch does;
 * the graph is released then. This catches the GAN pitfall, weights an
 * optimizer step updated between a loss's forward and its backward: step
 * after backward, or run the forward again. Writes through tensor_data's
 * pointer are raw access, not counted. */
CtStatus tensor_backward(Tensor *root, const Tensor *grad);

/* A differentiable op defined by the caller (PyTorch's autograd.Function,
 * one input, one output), for layers that must run code of their own in
 * backward, such as a collective (nn's SyncBatchNorm all-reduces gradient
 * sums there). Each function returns a tensor of its argument's shape,
 * dtype and device, owned like an op's result, or NULL with an error
 * recorded; both run with grad mode off. */
typedef Tensor *(*CtCustomFn)(void *ctx, Tensor *t);
/* y = forward(ctx, x), recorded so that backward gives x the gradient
 * backward(ctx, dy). ctx is borrowed: it must outlive the graph. name
 * (copied, may be NULL) names the op in errors. The result is a new tensor
 * (a detached alias of forward's). Errors: NULL functions, a result of the
 * wrong shape, dtype or device, and the functions' own. */
Tensor *tensor_custom(Tensor *x, CtCustomFn forward, CtCustomFn backward, void *ctx,
                      const char *name);

/* ------------------------------------------------------------------ views */
/* Views share storage with their input. */

Tensor *tensor_reshape(Tensor *t, int ndim,
                       const int64_t *shape); /* one -1 allowed; copies if not viewable */
Tensor *tensor_view(Tensor *t, int ndim,
                    const int64_t *shape); /* errors if not viewable */
Tensor *tensor_flatten(Tensor *t, int start_dim, int end_dim);
/* Removes dim when its size is 1, else a view of t as it is. squeeze and
 * transpose take dim 0 or -1 of a 0-d tensor, as PyTorch does (a view). */
Tensor *tensor_squeeze(Tensor *t, int dim);
Tensor *tensor_unsqueeze(Tensor *t, int dim);
/* Elements start..end-1 (by step > 0) along dim, as a Python slice: a
 * negative bound counts from the end, both clamp to [0, size], and
 * start >= end gives an empty slice. */
Tensor *tensor_slice(Tensor *t, int dim, int64_t start, int64_t end, int64_t step);
/* One index along dim, removing the dim. */
Tensor *tensor_select(Tensor *t, int dim, int64_t index);
Tensor *tensor_transpose(Tensor *t, int dim0, int dim1);
Tensor *tensor_permute(Tensor *t, const int *dims); /* ndim entries */
/* Broadcast to `shape` (size-1 dims stretched, new leading dims added). */
Tensor *tensor_expand(Tensor *t, int ndim, const int64_t *shape);
/* Returns t itself (with a new reference in the scope) when contiguous,
 * otherwise a contiguous copy. */
Tensor *tensor_contiguous(Tensor *t);
/* Channels-last memory layout of a 4-d (N, C, H, W) tensor: the shape is
 * unchanged and the elements are stored in (N, H, W, C) order, strides
 * (H*W*C, 1, W*C, C), as PyTorch's torch.channels_last. Returns t itself
 * (a new reference in the scope) when it is laid out so, else a copy;
 * differentiable. On CUDA, convolution, batch norm and pooling read and
 * write this layout without transposes (cuDNN's NHWC kernels, NHWC forms
 * of the hand kernels) and elementwise ops keep it, so a network whose
 * input is channels last stays so; on the CPU these ops compute on a
 * contiguous copy and return contiguous results.
 * tensor_is_channels_last ignores the strides of size-1 dims. */
Tensor *tensor_channels_last(Tensor *t);
bool tensor_is_channels_last(const Tensor *t);

/* ---------------------------------------------------------- conversions */

/* Differentiable between float dtypes. */
Tensor *tensor_cast(Tensor *t, CtDType dt);
/* Copy to another device (differentiable). */
Tensor *tensor_to_device(Tensor *t, CtDevice dev);
Tensor *tensor_clone(Tensor *t);

/* ------------------------------------------- pinned memory, async copies
 *
 * Page-locked ("pinned") host memory lets a GPU copy from and to the host by
 * DMA, without staging and without blocking the calling thread. Without a
 * CUDA device (a CPU-only build, or no GPU visible) there is no pinned
 * memory: these functions then return ordinary CPU tensors and copy
 * synchronously, so code written for the GPU runs unchanged on the CPU. */

/* An uninitialised contiguous CPU tensor in pinned memory (an ordinary CPU
 * tensor without a CUDA device). Freed like any tensor. */
Tensor *tensor_empty_pinned(int ndim, const int64_t *shape, CtDType dt);
/* PyTorch's Tensor.pin_memory(): t itself (a new reference in the scope)
 * when it is already pinned and contiguous, else a contiguous copy in pinned
 * memory (without a CUDA device: an ordinary contiguous CPU copy, so the
 * result never aliases an unpinned t). Differentiable. Errors: t is not on
 * the CPU. */
Tensor *tensor_pin_memory(Tensor *t);
/* Whether t's memory is pinned (always false without a CUDA device). */
bool tensor_is_pinned(const Tensor *t);
/* tensor_to_device(t, dev) with PyTorch's non_blocking=True: a copy from a
 * pinned contiguous CPU tensor to a GPU, or from a GPU to the CPU (into a
 * new pinned tensor), is only queued on the GPU's stream and the call
 * returns at once. Every op on that GPU runs on the same stream, after the
 * copy, so the result can be used by GPU ops right away; t (a pinned
 * source) may be freed at once, but must not be written to, and the pinned
 * result of a device-to-host copy must not be read, before
 * ct_device_synchronize(gpu). Any other copy (unpinned source, CPU to CPU,
 * no CUDA) is tensor_to_device, synchronous. Differentiable. */
Tensor *tensor_to_device_async(Tensor *t, CtDevice dev);
/* Waits until everything queued on dev has finished (CT_OK at once for the
 * CPU). Errors: dev does not exist. */
CtStatus ct_device_synchronize(CtDevice dev);
/* How many host synchronisations this thread has made so far: every
 * tensor_copy_to_host / tensor_item (counted on every device, the CPU
 * included, so that code meant to run without per-step syncs on a GPU can
 * be checked on the CPU) and every ct_device_synchronize of a GPU. A
 * diagnostic: compare two readings around the code of interest. */
uint64_t ct_host_sync_count(void);
/* How many backend ops (kernels) this thread has run so far, on any
 * device: on a GPU, about the number of kernel launches. A diagnostic, as
 * ct_host_sync_count: the ops a training step costs are the same on the
 * CPU, so they can be counted there. */
uint64_t ct_op_count(void);
/* The op profile: while on, every backend op any thread runs adds the host
 * time of its kernel call (on the CPU, the computation; on a GPU, queueing
 * the work: launches, library calls, descriptors) to its kind's totals. It
 * does not count the front-end's work before the call (checks, autograd,
 * allocation). Off by default; CTRAINER_PROFILE_OPS=1 turns it on from the
 * start. A diagnostic for where a step's host time goes.
 * ct_set_op_profile returns the previous setting; ct_op_profile_reset
 * zeroes the totals; ct_op_profile_get gives an op kind's calls (and total
 * ns in *host_ns, when not NULL) by its name ("matmul", "optim_sgd"; 0 for
 * an unknown name); ct_op_profile_print writes one line per kind that ran,
 * largest total first: "op_profile <op> calls <n> host_us <total>
 * us_per_call <mean>". */
bool ct_set_op_profile(bool on);
void ct_op_profile_reset(void);
uint64_t ct_op_profile_get(const char *op, uint64_t *host_ns);
void ct_op_profile_print(FILE *f);

/* ------------------------------------------------------------ elementwise */
/* Binary ops broadcast as in NumPy/PyTorch; both inputs must have the same
 * dtype and device, except that an f32 input with a bf16 or f16 one (what
 * autocast's convolutions return on CUDA) promotes the other to f32, as
 * PyTorch does for two tensors with dims. Unlike PyTorch, a 0-d f32 tensor
 * promotes a bf16 or f16 one too (PyTorch keeps the low precision then:
 * cast the 0-d tensor for its result). Results are contiguous, or channels last where
 * every operand of the result's size is. */

Tensor *tensor_add(Tensor *a, Tensor *b);
Tensor *tensor_sub(Tensor *a, Tensor *b);
Tensor *tensor_mul(Tensor *a, Tensor *b);
/* Integer and bool operands divide as f32, with an f32 result (true
 * division, as torch.div: 7 / 2 = 3.5, 1 / 0 = inf). Integer add, sub,
 * mul and pow wrap around on overflow, as PyTorch's do. */
Tensor *tensor_div(Tensor *a, Tensor *b);
/* Gradients as PyTorch's: 0 w.r.t. a where b == 0; w.r.t. b, a ** b *
 * log(a), 0 where a == 0 and b >= 0. */
Tensor *tensor_pow(Tensor *a, Tensor *b);
/* Gradient to a on ties; to both where a or b is NaN (the result is NaN),
 * as PyTorch 1.13. */
Tensor *tensor_maximum(Tensor *a, Tensor *b);
Tensor *tensor_minimum(Tensor *a, Tensor *b);
/* relu(a + b) as one op: the values and gradients of
 * tensor_relu(tensor_add(a, b)) without the sum as a tensor (a residual
 * block's last step). */
Tensor *tensor_add_relu(Tensor *a, Tensor *b);
Tensor *tensor_add_scalar(Tensor *a, double s);
Tensor *tensor_sub_scalar(Tensor *a, double s);  /* a - s */
Tensor *tensor_rsub_scalar(Tensor *a, double s); /* s - a */
Tensor *tensor_mul_scalar(Tensor *a, double s);
Tensor *tensor_div_scalar(Tensor *a, double s); /* a / s */
Tensor *tensor_pow_scalar(Tensor *a, double e); /* a ** e */

/* Comparisons give CT_BOOL tensors (not differentiable). */
Tensor *tensor_eq(Tensor *a, Tensor *b);
Tensor *tensor_ne(Tensor *a, Tensor *b);
Tensor *tensor_lt(Tensor *a, Tensor *b);
Tensor *tensor_le(Tensor *a, Tensor *b);
Tensor *tensor_gt(Tensor *a, Tensor *b);
Tensor *tensor_ge(Tensor *a, Tensor *b);

Tensor *tensor_neg(Tensor *t);
Tensor *tensor_exp(Tensor *t);
Tensor *tensor_log(Tensor *t);
Tensor *tensor_sqrt(Tensor *t);
Tensor *tensor_abs(Tensor *t);
/* Clamp to [lo, hi]; pass -INFINITY/INFINITY for a one-sided clamp. Gradient
 * is 1 inside [lo, hi], 0 outside (PyTorch's convention). */
Tensor *tensor_clamp(Tensor *t, double lo, double hi);
Tensor *tensor_relu(Tensor *t);
Tensor *tensor_leaky_relu(Tensor *t, double negative_slope);
typedef enum CtGeluApprox { CT_GELU_ERF = 0, CT_GELU_TANH = 1 } CtGeluApprox;
Tensor *tensor_gelu(Tensor *t, CtGeluApprox approx);
Tensor *tensor_silu(Tensor *t);
Tensor *tensor_sigmoid(Tensor *t);
Tensor *tensor_tanh(Tensor *t);

/* cond (CT_BOOL) ? a : b, broadcasting all three. Differentiable in a, b.
 * a and b of one dtype, or f32 beside bf16/f16, promoted to f32 as binary
 * ops promote. */
Tensor *tensor_where(Tensor *cond, Tensor *a, Tensor *b);
/* t with `value` where mask (CT_BOOL, broadcast to t) is true. */
Tensor *tensor_masked_fill(Tensor *t, Tensor *mask, double value);

/* ------------------------------------------------------------ reductions */
/* `dims` lists ndims dims to reduce (any order, negatives allowed);
 * ndims == 0 reduces over all dims. keepdim keeps reduced dims as size 1.
 * Floating inputs only, accumulated in at least f32 (f64 for f64). */

Tensor *tensor_sum(Tensor *t, int ndims, const int *dims, bool keepdim);
Tensor *tensor_mean(Tensor *t, int ndims, const int *dims, bool keepdim);
/* Max/min values; gradient goes to the first extremal element. */
Tensor *tensor_max(Tensor *t, int ndims, const int *dims, bool keepdim);
Tensor *tensor_min(Tensor *t, int ndims, const int *dims, bool keepdim);
/* Variance with `correction` (1 = unbiased, PyTorch's default; 0 = biased). */
Tensor *tensor_var(Tensor *t, int ndims, const int *dims, int correction, bool keepdim);
/* Index of the first maximum along dim (CT_I64). */
Tensor *tensor_argmax(Tensor *t, int dim, bool keepdim);
/* Sum of all elements to a 0-d tensor. */
Tensor *tensor_sum_all(Tensor *t);
Tensor *tensor_mean_all(Tensor *t);
/* Sums `t` down to `shape` (the reverse of broadcasting). */
Tensor *tensor_sum_to(Tensor *t, int ndim, const int64_t *shape);

/* ------------------------------------------------------- linear algebra */

/* Matrix product with PyTorch's matmul rules: 1-d operands are promoted,
 * batch dims broadcast. (.., n, k) @ (.., k, m) -> (.., n, m). f32 and f64
 * through BLAS; bf16 through cblas_sbgemm when available, else converted. */
Tensor *tensor_matmul(Tensor *a, Tensor *b);
/* y = x · wᵀ + b. x: (*, in), w: (out, in), b: (out) or NULL. */
Tensor *tensor_linear(Tensor *x, Tensor *w, Tensor *b);
/* relu(x · wᵀ + b) as one op: the values and gradients of
 * tensor_relu(tensor_linear(x, w, b)) without the pre-activation tensor
 * (CUDA: cuBLASLt's bias + ReLU epilogue, where NaN follows cuBLASLt). */
Tensor *tensor_linear_relu(Tensor *x, Tensor *w, Tensor *b);
/* gelu(x · wᵀ + b, approx) as one op: on the CPU the bits of
 * tensor_gelu(tensor_linear(x, w, b), approx), values and gradients, with
 * one autograd node. The pre-activation is kept for the backward only when
 * a node is recorded. CUDA: CT_GELU_TANH runs in cuBLASLt's epilogue (its
 * own tanh-GELU, within rounding of tensor_gelu's; f32, bf16 and f16 without
 * autocast, output features a multiple of 8); otherwise the GELU kernel
 * follows the product. */
Tensor *tensor_linear_gelu(Tensor *x, Tensor *w, Tensor *b, CtGeluApprox approx);

/* --------------------------------------------------------- convolutions */

typedef struct CtConv2dArgs {
    int stride[2];   /* 0 -> 1 */
    int padding[2];  /* zero padding on both sides */
    int dilation[2]; /* 0 -> 1 */
    int groups;      /* 0 -> 1 */
    /* true: y = relu(conv(x, w) + b) as one op, the same values and
     * gradients as tensor_relu of the plain convolution, with the ReLU
     * applied while the output is written and no pre-activation tensor
     * (nn_forward_relu and Sequential set it). false (default): none. */
    bool relu;
} CtConv2dArgs;

/* x: (N, C, H, W), w: (O, C/groups, kh, kw), b: (O) or NULL.
 * args NULL means stride 1, no padding, dilation 1, groups 1, no ReLU. */
Tensor *tensor_conv2d(Tensor *x, Tensor *w, Tensor *b, const CtConv2dArgs *args);

typedef struct CtPool2dArgs {
    int kernel[2];
    int stride[2]; /* 0 -> kernel */
    int padding[2];
    bool ceil_mode;
    bool count_include_pad; /* avg only; PyTorch's default is true */
} CtPool2dArgs;

Tensor *tensor_max_pool2d(Tensor *x, const CtPool2dArgs *args);
Tensor *tensor_avg_pool2d(Tensor *x, const CtPool2dArgs *args);
/* PyTorch's adaptive bins: start = floor(i*H/oh), end = ceil((i+1)*H/oh). */
Tensor *tensor_adaptive_avg_pool2d(Tensor *x, int out_h, int out_w);

/* ------------------------------------------------- softmax and losses */

Tensor *tensor_softmax(Tensor *t, int dim);
Tensor *tensor_log_softmax(Tensor *t, int dim);

typedef enum CtReduction {
    CT_REDUCTION_MEAN = 0,
    CT_REDUCTION_SUM = 1,
    CT_REDUCTION_NONE = 2
} CtReduction;

typedef struct CtCrossEntropyArgs {
    CtReduction reduction;  /* default mean */
    double label_smoothing; /* in [0, 1) */
    int64_t ignore_index;   /* targets equal to it contribute nothing */
    bool use_ignore_index;  /* PyTorch's default ignore_index is -100 */
    const Tensor *weight;   /* (C) class weights or NULL */
} CtCrossEntropyArgs;

/* logits: (N, C) or (N, C, d1...), target: (N) or (N, d1...) CT_I64 class
 * indices. Fused log-softmax + NLL with PyTorch's semantics (weighted mean
 * divides by the sum of target weights). args NULL means defaults.
 * target may instead hold class probabilities (soft labels, e.g. mixup):
 * logits' shape and dtype; then loss = -sum_c weight_c t'_c log_softmax_c
 * with t' = (1 - label_smoothing) t + label_smoothing / C, the mean divides
 * by the number of samples (N d1...), an ignore_index >= 0 is an error, and
 * target gets a gradient when it requires one, all as in PyTorch. */
Tensor *tensor_cross_entropy(Tensor *logits, Tensor *target,
                             const CtCrossEntropyArgs *args);
/* logp: log-probabilities, same layout as cross_entropy's logits; label
 * smoothing is ignored. */
Tensor *tensor_nll_loss(Tensor *logp, Tensor *target, const CtCrossEntropyArgs *args);
Tensor *tensor_mse_loss(Tensor *input, Tensor *target, CtReduction r);
Tensor *tensor_l1_loss(Tensor *input, Tensor *target, CtReduction r);
/* pos_weight: broadcast to the class dim, or NULL. */
Tensor *tensor_bce_with_logits(Tensor *logits, Tensor *target, Tensor *pos_weight,
                               CtReduction r);

/* ------------------------------------------------------- normalisation */

/* x: (N, C, *). weight, bias: (C) or NULL. In training mode uses batch
 * statistics and, when running_mean/var are given, updates them in place:
 * r = (1 - momentum) r + momentum * stat, with the unbiased variance (PyTorch).
 * In eval mode uses the running statistics. Give both running stats or
 * neither; without them eval mode also uses batch statistics (PyTorch's
 * track_running_stats=False). Normalises with the biased variance:
 * y = (x - mean) / sqrt(var + eps) * weight + bias. f32 and f64, all
 * tensors of x's dtype. Differentiable in x, weight and bias (the running
 * stats are buffers). Errors: sizes other than C, differing dtypes, and a
 * single value per channel where batch statistics are needed. */
Tensor *tensor_batch_norm(Tensor *x, Tensor *running_mean, Tensor *running_var,
                          Tensor *weight, Tensor *bias, bool training, double momentum,
                          double eps);
/* relu(tensor_batch_norm(...)) as one op, with the same arguments, values
 * and gradients, the ReLU applied as the output is written and no
 * pre-activation tensor. */
Tensor *tensor_batch_norm_relu(Tensor *x, Tensor *running_mean, Tensor *running_var,
                               Tensor *weight, Tensor *bias, bool training,
                               double momentum, double eps);
/* Normalises over the last `nnorm` dims (1 <= nnorm <= ndim) with the
 * biased variance; weight and bias have those dims' shape, or are NULL.
 * f32 and f64; differentiable in x, weight and bias. */
Tensor *tensor_layer_norm(Tensor *x, int nnorm, Tensor *weight, Tensor *bias, double eps);

/* ---------------------------------------------------------------- random */

/* Philox-4x32-10 stream keyed by (seed, stream). A draw of n elements reads
 * consecutive 128-bit counter blocks starting at `offset`, element i from a
 * fixed lane of block i/4 (32-bit draws) or i/2 (f64 and normal draws), so
 * the numbers do not depend on thread count or device. Every draw advances
 * `offset` past the blocks it used. Plain struct: copy it to save state. */
typedef struct CtGenerator {
    uint64_t seed;
    uint64_t stream;
    uint64_t offset; /* in 128-bit blocks */
} CtGenerator;

CtGenerator ct_generator(uint64_t seed, uint64_t stream);
/* The raw Philox-4x32-10 block for counter (c0..c3) and key (k0, k1). */
void ct_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* Uniform in [0, 1) with 24 random bits (f32) or 53 (f64). */
Tensor *tensor_rand(CtGenerator *g, int ndim, const int64_t *shape, CtDType dt,
                    CtDevice dev);
Tensor *tensor_uniform(CtGenerator *g, int ndim, const int64_t *shape, double low,
                       double high, CtDType dt, CtDevice dev);
Tensor *tensor_normal(CtGenerator *g, int ndim, const int64_t *shape, double mean,
                      double std, CtDType dt, CtDevice dev);
/* 1 with probability p, else 0, in dtype dt. */
Tensor *tensor_bernoulli(CtGenerator *g, int ndim, const int64_t *shape, double p,
                         CtDType dt, CtDevice dev);
/* A permutation of 0..n-1 into out[n] (host memory). */
CtStatus ct_randperm(CtGenerator *g, int64_t n, int64_t *out);
/* Inverted dropout: zeroes with probability p and scales the rest by
 * 1/(1-p). Identity when !training or p == 0. The mask is a Bernoulli draw
 * from g in x's dtype (the bits of tensor_mul(x, mask)); for float x it is
 * never stored: one pass multiplies x by it, and backward draws it again
 * from the saved generator state. Advances g.offset as tensor_bernoulli of
 * x's shape would. */
Tensor *tensor_dropout(Tensor *x, double p, bool training, CtGenerator *g);

/* ------------------------------------------------- indexing and joining */

/* Index arguments are CT_I64 with entries in [0, size); an entry out of
 * range is an error naming its value, its position in the index tensor and
 * the size ("index_select: index 7 at position [2] is out of range for dim 0
 * of size 5"). Negative indices are not wrapped. Gradients flow to the
 * indexed tensor; repeated indices accumulate, in a fixed order (the result
 * does not depend on the thread count). */

/* weight: (V, D), indices: CT_I64 of any shape -> (*indices, D). */
Tensor *tensor_embedding(Tensor *weight, Tensor *indices);
/* index: 0-d or 1-d -> t with `dim` resized to numel(index). Any dtype. */
Tensor *tensor_index_select(Tensor *t, int dim, Tensor *index);
/* out[i][j] = t[index[i][j]][j] for dim 0 (PyTorch's gather). index has t's
 * ndim and is no larger than t outside `dim`; out has index's shape. */
Tensor *tensor_gather(Tensor *t, int dim, Tensor *index);
/* Joins n >= 1 tensors of one dtype and device along dim; their shapes
 * must be equal except along dim (errors name the offending tensor's
 * position in ts). A list of f32 and bf16/f16 tensors is joined in f32, as
 * binary ops promote. Differentiable. */
Tensor *tensor_cat(int n, Tensor *const *ts, int dim);
/* Joins n >= 1 tensors of equal shape along a new dim (in [-(ndim+1),
 * ndim]). Differentiable. */
Tensor *tensor_stack(int n, Tensor *const *ts, int dim);
/* indices: CT_I64 -> (*indices, num_classes) in dtype dt (any dtype).
 * num_classes must be positive (PyTorch's -1, inferring it, is not
 * supported). Not differentiable. */
Tensor *tensor_one_hot(Tensor *indices, int64_t num_classes, CtDType dt);

#ifdef __cplusplus
}
#endif
#endif
