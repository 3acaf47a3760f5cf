/* ctrainer — modules, layers, losses, initialisation, freezing, state dicts.
 *
 * A Module is a struct with a const vtable, registered parameters, buffers
 * and child modules. Your own module embeds Module as its FIRST member, is
 * allocated on the heap, and registers what it owns:
 *
 *     typedef struct Block { Module base; Module *conv1, *bn1; } Block;
 *     static Tensor *block_forward(Module *m, Tensor *x) {
 *         Block *b = (Block *)m;
 *         return tensor_add(x, nn_forward_relu(b->bn1, nn_forward(b->conv1, x)));
 *     }
 *     static const ModuleVtable block_vt = {.type = "Block", .forward = block_forward};
 *     Block *b = calloc(1, sizeof *b);
 *     nn_module_init(&b->base, &block_vt);
 *     b->conv1 = nn_module_register_child(&b->base, "conv1", nn_conv2d(...));
 *
 * Backward comes from autograd. Names follow PyTorch: a parameter "weight"
 * of child "conv1" of child "layer1.0" is "layer1.0.conv1.weight", so state
 * dicts load in PyTorch and back.
 *
 * Ownership: registering hands the caller's reference to the module;
 * nn_module_free releases the module, its children, parameters and buffers.
 * Errors follow status.h: NULL/CtStatus plus ct_last_error(); nn_forward on
 * NULL input returns NULL and keeps the first error.
 */
#ifndef CTRAINER_NN_H
#define CTRAINER_NN_H

#include <stdio.h>

#include "ctrainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- modules */

typedef struct Module Module;

typedef struct ModuleVtable {
    const char *type; /* "Linear": shown in summaries and errors */
    /* y = forward(x); NULL for modules not called directly. */
    Tensor *(*forward)(Module *m, Tensor *x);
    /* Releases what the subtype owns besides registered parameters, buffers
     * and children (nn_module_free releases those). NULL: nothing. */
    void (*free)(Module *m);
    /* Configuration for the summary, e.g. "in_features=784, out_features=128,
     * bias=True". NULL: none. */
    void (*extra_repr)(const Module *m, char *buf, size_t n);
    /* relu(forward(x)) in one op, where the module can apply the ReLU as it
     * writes its output (Conv2d, Linear, BatchNorm): the same values and
     * gradients, one pass and one tensor fewer. NULL: nn_forward_relu
     * calls forward and then tensor_relu. */
    Tensor *(*forward_relu)(Module *m, Tensor *x);
    /* tensor_gelu(forward(x), approx) in one op, where the module can apply
     * GELU to its output (Linear; on CUDA tanh-GELU in cuBLASLt's
     * epilogue): the same values and gradients, one node fewer. NULL:
     * nn_forward_gelu calls forward and then tensor_gelu. */
    Tensor *(*forward_gelu)(Module *m, Tensor *x, CtGeluApprox approx);
} ModuleVtable;

typedef struct NnRegistry NnRegistry; /* private to nn/ */

struct Module {
    const ModuleVtable *vt;
    bool training;   /* read it; change it with nn_module_train/eval */
    NnRegistry *reg; /* parameters, buffers, children, packed blocks */
};

/* Initialises m (training mode, nothing registered). */
CtStatus nn_module_init(Module *m, const ModuleVtable *vt);
/* Frees children, parameters, buffers, calls vt->free, then free(m). NULL is
 * a no-op. */
void nn_module_free(Module *m);

/* Registration: the module takes over the caller's reference and returns the
 * registered object (NULL on error, with the argument released). Parameters
 * are set to require grad. Names are unique per module (across parameters,
 * buffers and children) and contain no '.'. Registered tensors must be
 * persistent (created with no scope open, or retained). A module has one
 * parent: registering m as its own child, or a child twice in one module, is
 * an error that leaves the argument alone (it is already owned). A NULL
 * argument returns NULL and keeps the first error (sticky), so
 * register_child(m, "fc", nn_linear(...)) needs no check in between. */
Tensor *nn_module_register_parameter(Module *m, const char *name, Tensor *p);
Tensor *nn_module_register_buffer(Module *m, const char *name, Tensor *b);
Module *nn_module_register_child(Module *m, const char *name, Module *child);

/* m->vt->forward(m, x). NULL x returns NULL keeping the first error; a
 * module without forward is CT_ERR_UNSUPPORTED. */
Tensor *nn_forward(Module *m, Tensor *x);
/* tensor_relu(nn_forward(m, x)), fused into m's op when m->vt->forward_relu
 * is set. Sequential calls it for a child followed by a ReLU module, so
 * nn_sequential(conv, relu, ...) fuses without the caller asking. */
Tensor *nn_forward_relu(Module *m, Tensor *x);
/* tensor_gelu(nn_forward(m, x), approx), fused into m's op when
 * m->vt->forward_gelu is set. Sequential calls it for a child followed by
 * a GELU module. */
Tensor *nn_forward_gelu(Module *m, Tensor *x, CtGeluApprox approx);

/* Training / evaluation mode, set recursively (dropout, batch norm). */
void nn_module_train(Module *m);
void nn_module_eval(Module *m);

/* Children in registration order. */
int nn_module_num_children(const Module *m);
Module *nn_module_child_at(const Module *m, int i);
const char *nn_module_child_name(const Module *m, int i);
/* Child by dotted path ("layer1.0"; "" is m), or NULL (no error recorded). */
Module *nn_module_find(const Module *m, const char *path);

/* Named tensors with dotted names, in PyTorch's order (a module's own
 * entries in registration order, then each child's; state_dict lists a
 * module's parameters, then its buffers, then its children's entries). A
 * tensor registered twice appears once in parameters/buffers and under
 * every name in state_dict, as in PyTorch. The dict holds references to the
 * live tensors; free it with ct_state_dict_free. */
CtStateDict *nn_module_parameters(const Module *m);
CtStateDict *nn_module_buffers(const Module *m);
CtStateDict *nn_module_state_dict(const Module *m); /* parameters and buffers */
/* Parameter or buffer by dotted name, or NULL. */
Tensor *nn_module_get(const Module *m, const char *name);

/* Number of parameter elements (a tensor registered twice counts once);
 * trainable_only counts those requiring grad. -1 on error. */
int64_t nn_module_num_parameters(const Module *m, bool trainable_only);
/* PyTorch-style nested repr, then total and trainable parameter counts. */
void nn_module_print(const Module *m, FILE *out);

/* ------------------------------------------------- packed parameters */

/* Moves all parameters into one contiguous block and their gradients into
 * another (per module tree; parameters must share dtype and device), so
 * zero-grad is one fill, and all-reduce, clipping and optimizers can work on
 * one flat buffer. Parameters keep their identity (tensor_rebind), values
 * and existing gradients; every parameter has a gradient (a view of the
 * gradient block, zero where there was none) from then on. Only the module
 * packed holds blocks: packing drops its descendants' blocks, and a module
 * registered as a child drops its own. Called by nn_module_to; idempotent
 * (a layout changed since, e.g. by a new parameter, is packed again). */
CtStatus nn_module_pack(Module *m);
/* The 1-d blocks, owned by m. NULL before packing, and once they no longer
 * hold exactly m's parameters and gradients (a parameter or child added or
 * replaced since, a gradient replaced: nn_module_pack again). */
Tensor *nn_module_param_block(const Module *m);
Tensor *nn_module_grad_block(const Module *m);
/* Moves parameters, gradients and buffers to dev, packed (parameters must
 * share a dtype; their devices may differ). Tensors keep their identity. */
CtStatus nn_module_to(Module *m, CtDevice dev);
/* Zeroes every parameter gradient (one fill when packed; gradient by
 * gradient when not, or when the packing no longer matches). */
CtStatus nn_module_zero_grad(Module *m);

/* -------------------------------------------------------------- freezing */

/* Sets requires_grad on every parameter whose dotted name matches the glob
 * `pattern` (fnmatch without flags: '*' also matches '.'; NULL matches
 * all). Returns the number of parameters matched (set to `on`, whether or
 * not they already were), or -1 on error. */
int64_t nn_module_set_requires_grad(Module *m, const char *pattern, bool on);
/* Layer groups are the top-level children in order. Freezes every group but
 * the last n_trainable (n_trainable <= 0 freezes all) and makes those last
 * n_trainable trainable; BatchNorm layers (types "BatchNorm1d"/"BatchNorm2d"
 * and "SyncBatchNorm") in frozen groups stay trainable when bn_trainable.
 * Parameters registered on m itself belong to no group and are left as they
 * are. Like
 * pytorch-accelerated's ModelFreezer (bn_trainable = !freeze_batch_norms).
 * Error: m has no children. */
CtStatus nn_module_freeze_groups(Module *m, int n_trainable, bool bn_trainable);
/* Unfreezes everything. */
CtStatus nn_module_unfreeze(Module *m);
/* The classifier head: the last top-level child. */
Module *nn_module_classifier(const Module *m);

/* ---------------------------------------------------------------- layers */
/* Weights are initialised like PyTorch's defaults from generator g (Linear
 * and Conv2d: kaiming_uniform(a=sqrt(5)) weight, U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) bias; g must not be NULL). Parameters and buffers are f32
 * on the CPU (nn_module_to moves them) and persistent even when a scope is
 * open. Parameter and buffer names and the printed configuration match
 * PyTorch's. A layer given a mis-shaped input names itself in the error. */

Module *nn_linear(int64_t in_features, int64_t out_features, bool bias, CtGenerator *g);
/* Square kernel; args as for tensor_conv2d (NULL: stride 1, no padding),
 * without relu (fuse a following ReLU with nn_forward_relu or Sequential). */
Module *nn_conv2d(int64_t in_channels, int64_t out_channels, int kernel_size,
                  const CtConv2dArgs *args, bool bias, CtGenerator *g);
/* PyTorch's string paddings of Conv2d. */
typedef enum NnConvPadding {
    NN_CONV_PADDING_EXPLICIT = 0, /* args->padding, zeros on both sides */
    NN_CONV_PADDING_VALID,        /* padding="valid": none (args->padding 0) */
    /* padding="same": the output has the input's size (stride 1 only); a
     * dim whose dilation * (kernel - 1) is odd gets the extra zero row or
     * column at the end, as in PyTorch */
    NN_CONV_PADDING_SAME,
} NnConvPadding;
/* Conv2d with a kernel_h x kernel_w kernel, weight (out, in/groups,
 * kernel_h, kernel_w), and PyTorch's padding="valid" / "same" (args->padding
 * must then be 0); otherwise as nn_conv2d. The repr is PyTorch's
 * ("kernel_size=(3, 1)", "padding=same"). Errors (CT_ERR_INVALID): "same"
 * with a stride other than 1, or with args->padding set. */
Module *nn_conv2d_ex(int64_t in_channels, int64_t out_channels, int kernel_h,
                     int kernel_w, const CtConv2dArgs *args, NnConvPadding padding,
                     bool bias, CtGenerator *g);
/* Affine, tracking running stats: weight, bias, running_mean, running_var,
 * num_batches_tracked (i64). eps 1e-5, momentum 0.1 in PyTorch. */
Module *nn_batch_norm1d(int64_t num_features, double eps, double momentum);
Module *nn_batch_norm2d(int64_t num_features, double eps, double momentum);
/* PyTorch's BatchNorm1d/2d(num_features, eps, momentum, affine,
 * track_running_stats), arguments in its order. !affine: no weight or bias
 * (y = (x - mean) / sqrt(var + eps)). !track_running_stats: no
 * running_mean, running_var or num_batches_tracked buffers, and batch
 * statistics in eval mode too (momentum is then unused, but printed). The
 * state dict holds what exists, in the order above; the repr shows both
 * flags, as PyTorch's. */
Module *nn_batch_norm1d_ex(int64_t num_features, double eps, double momentum, bool affine,
                           bool track_running_stats);
Module *nn_batch_norm2d_ex(int64_t num_features, double eps, double momentum, bool affine,
                           bool track_running_stats);
/* SyncBatchNorm (PyTorch's torch.nn.SyncBatchNorm): batch norm whose
 * training statistics are taken over the samples of every process of a
 * group, so data-parallel training normalises as one process holding the
 * whole global batch would.
 *
 * The group's all-reduce, as SyncBatchNorm calls it: the element-wise sum
 * of t (1-d, contiguous) over every process, a new tensor of t's shape,
 * dtype and device owned like an op's result, or NULL with an error
 * recorded. Every process makes the same calls in the same order. The
 * runtime supplies one (runtime_convert_sync_batch_norm); nn never calls
 * the runtime itself. */
typedef Tensor *(*NnAllReduceFn)(void *ctx, Tensor *t);
/* The function behind SyncBatchNorm, with tensor_batch_norm's arguments
 * and the group's all-reduce: with !training or all_reduce NULL it is
 * tensor_batch_norm itself; else the statistics are those of the samples
 * of every process, as described below. x: (N, C, *) float; weight, bias,
 * running_mean, running_var: (C) or NULL (both running statistics or
 * neither), computed in weight's (else running_mean's, else x's) dtype,
 * the result in x's. Errors: tensor_batch_norm's, and fewer than 2 values
 * per channel over all processes (on every process alike). */
Tensor *nn_sync_batch_norm(Tensor *x, Tensor *running_mean, Tensor *running_var,
                           Tensor *weight, Tensor *bias, bool training, double momentum,
                           double eps, NnAllReduceFn all_reduce, void *ctx);
/* PyTorch's SyncBatchNorm.convert_sync_batchnorm, in place: every
 * BatchNorm1d/2d of m's tree (m included) becomes a SyncBatchNorm reducing
 * with all_reduce(ctx, .) (ctx borrowed: it must outlive the modules). The
 * modules keep their identity, configuration, parameters, buffers and
 * names, so the state dict and an optimizer holding the parameters are
 * unchanged; the type and repr become "SyncBatchNorm(...)". Converting a
 * SyncBatchNorm again sets its all-reduce. Returns the number of modules
 * converted, or -1 (NULL m).
 *
 * Forward in training mode with all_reduce set: per channel, the mean
 * and biased variance over all processes normalise; running_mean and
 * running_var take the global mean and unbiased variance (the global count
 * less one); backward all-reduces the per-channel gradient sums (only when
 * the input requires grad), so each process's input gradient equals that
 * of one process holding the whole batch, while weight and bias gradients
 * stay this process's share (the data-parallel gradient all-reduce
 * combines them, as with PyTorch's DDP). Processes may hold different
 * numbers of samples, 0 included; fewer than 2 samples per channel over all
 * processes is CT_ERR_SHAPE on every process. Two all-reduces of C+1 and C
 * values in forward, two of C in backward, and a host read of the global
 * count (a device synchronisation on a GPU); built from ordinary tensor
 * ops, so it runs wherever they do. Every process must run forward and
 * backward through the same SyncBatchNorm modules in the same order.
 * In eval mode, or with all_reduce NULL (one process), it is exactly
 * BatchNorm: the same op, values and gradients. Any input of at least 2
 * dims (N, C, *) is accepted, as PyTorch's. */
int64_t nn_convert_sync_batch_norm(Module *m, NnAllReduceFn all_reduce, void *ctx);
/* True for a SyncBatchNorm (converted by nn_convert_sync_batch_norm). */
bool nn_is_sync_batch_norm(const Module *m);
/* Normalises over the trailing dims `shape` (nnorm of them); affine. */
Module *nn_layer_norm(int nnorm, const int64_t *shape, double eps);
/* PyTorch's LayerNorm(normalized_shape, eps, elementwise_affine): without
 * elementwise_affine there are no weight or bias parameters (an empty state
 * dict), and the output is the plain normalisation. */
Module *nn_layer_norm_ex(int nnorm, const int64_t *shape, double eps,
                         bool elementwise_affine);
/* PyTorch's GroupNorm(num_groups, num_channels, eps, affine) (eps 1e-5 and
 * affine true in PyTorch): each sample's channels are split into num_groups
 * consecutive groups, each normalised over its channels and positions with
 * the biased variance, then scaled by weight (ones) and shifted by bias
 * (zeros), both (num_channels), when affine. Input (N, num_channels, *),
 * f32 (the parameters' dtype; f64 too without affine). Errors
 * (CT_ERR_INVALID): num_channels not divisible by num_groups, non-positive
 * sizes or eps; in forward, an input not (N, num_channels, *) is
 * CT_ERR_SHAPE. */
Module *nn_group_norm(int64_t num_groups, int64_t num_channels, double eps, bool affine);
/* weight ~ N(0, 1) as in PyTorch. */
Module *nn_embedding(int64_t num_embeddings, int64_t embedding_dim, CtGenerator *g);

typedef struct NnEmbeddingArgs {
    /* With use_padding_idx, row padding_idx (negative counts from the end:
     * -1 is the last row; in [-num_embeddings, num_embeddings)) starts at
     * zero and gets no gradient: lookups of it return the row's current
     * values, but backward adds nothing to it, so optimizers leave it alone
     * (weight decay aside, as in PyTorch). Default: no padding row. */
    int64_t padding_idx;
    bool use_padding_idx;
} NnEmbeddingArgs;
/* PyTorch's Embedding(num_embeddings, embedding_dim, padding_idx=...). args
 * NULL: as nn_embedding. The weight is drawn as nn_embedding's (the same
 * numbers from the same g), then the padding row is zeroed. The repr shows
 * "padding_idx=p" with p counted from the start, as PyTorch's. Errors: a
 * padding_idx out of range (CT_ERR_INVALID). */
Module *nn_embedding_ex(int64_t num_embeddings, int64_t embedding_dim,
                        const NnEmbeddingArgs *args, CtGenerator *g);
/* g is borrowed (it must outlive the module) and advanced by each draw; it
 * may be NULL only when p == 0. */
Module *nn_dropout(double p, CtGenerator *g);
/* PyTorch's Dropout2d(p): in training mode each channel of an (N, C, *)
 * input (2 dims at least; PyTorch 1.13 takes any such input, a 3-d one as
 * (N, C, L)) is zeroed with probability p, the others scaled by 1/(1-p);
 * identity in eval mode. The mask, (N, C, 1, ...) in x's dtype and device,
 * is one tensor_bernoulli draw from g (borrowed, as nn_dropout's, and
 * returned by nn_module_generator), which it advances. */
Module *nn_dropout2d(double p, CtGenerator *g);
/* The generator m draws from in forward (a Dropout's or Dropout2d's), or
 * NULL for modules that draw nothing. Training-state checkpoints save and
 * restore it. */
CtGenerator *nn_module_generator(const Module *m);
Module *nn_relu(void);
Module *nn_gelu(CtGeluApprox approx);
Module *nn_silu(void);
Module *nn_sigmoid(void);
Module *nn_tanh(void);
/* LeakyReLU(negative_slope) (0.01 in PyTorch) and ELU(alpha) (1.0). */
Module *nn_leaky_relu(double negative_slope);
Module *nn_elu(double alpha);
/* Hardsigmoid: relu6(x + 3) / 6; Hardswish: x * relu6(x + 3) / 6. Values
 * and gradients as PyTorch's, at the kinks too. */
Module *nn_hardsigmoid(void);
Module *nn_hardswish(void);
/* Softmax(dim) and LogSoftmax(dim) (tensor_softmax, tensor_log_softmax).
 * dim is required: PyTorch's dim=None guess is not offered. */
Module *nn_softmax(int dim);
Module *nn_log_softmax(int dim);
Module *nn_identity(void);                      /* returns tensor_contiguous(x) */
Module *nn_flatten(int start_dim, int end_dim); /* PyTorch's default: 1, -1 */
Module *nn_max_pool2d(const CtPool2dArgs *args);
Module *nn_avg_pool2d(const CtPool2dArgs *args);
Module *nn_adaptive_avg_pool2d(int out_h, int out_w);
/* Children named "0", "1", ...; takes ownership of mods (NULL entries are an
 * error, and every module passed is released on failure). */
Module *nn_sequential(int n, Module *const *mods);
/* Appends a child named by its index. */
CtStatus nn_sequential_append(Module *seq, Module *m);

/* ---------------------------------------------------------------- losses */

/* PyTorch's SmoothL1Loss: 0.5 d²/beta where |d| < beta, else |d| - 0.5 beta;
 * beta == 0 is the L1 loss (as in PyTorch). input and target: same shape and
 * float dtype. Errors: beta < 0, unknown reduction. */
Tensor *nn_smooth_l1_loss(Tensor *input, Tensor *target, CtReduction r, double beta);

/* Loss objects, for code that takes "a loss" (the Trainer). nn_loss gives
 * the same result as the wrapped function. A class-weight tensor in
 * CtCrossEntropyArgs is retained by the loss (the caller may free its own
 * reference). nn_loss_name is PyTorch's class name ("CrossEntropyLoss"). */
typedef struct NnLoss NnLoss;
NnLoss *nn_loss_cross_entropy(const CtCrossEntropyArgs *args); /* NULL: defaults */
NnLoss *nn_loss_nll(const CtCrossEntropyArgs *args);
NnLoss *nn_loss_mse(CtReduction r);
NnLoss *nn_loss_l1(CtReduction r);
NnLoss *nn_loss_smooth_l1(CtReduction r, double beta);
/* pos_weight may be NULL; the loss takes a reference. */
NnLoss *nn_loss_bce_with_logits(Tensor *pos_weight, CtReduction r);
Tensor *nn_loss(const NnLoss *l, Tensor *input, Tensor *target);
const char *nn_loss_name(const NnLoss *l);
void nn_loss_free(NnLoss *l);

/* ---------------------------------------------------------- initialisation */
/* In place, never recorded by autograd. Fan-in/out as PyTorch computes them
 * (dim 1 × receptive field, dim 0 × receptive field; tensors of fewer than 2
 * dims are an error, -1 from the fan functions). Float tensors of any dtype,
 * device and layout: values are drawn in f32 (f64 for f64 tensors) and
 * copied in. kaiming: std = gain/sqrt(fan), uniform bound sqrt(3)·std;
 * xavier: std = gain·sqrt(2/(fan_in + fan_out)). Tensors with a zero-size
 * dim are left alone by kaiming, as in PyTorch. nn_init_gain returns NAN
 * for an unknown nonlinearity. */

typedef enum NnFanMode { NN_FAN_IN = 0, NN_FAN_OUT = 1 } NnFanMode;
typedef enum NnNonlinearity {
    NN_NONLIN_LEAKY_RELU = 0, /* gain sqrt(2/(1+a²)) */
    NN_NONLIN_RELU,           /* sqrt(2) */
    NN_NONLIN_LINEAR,         /* 1 (also conv, sigmoid) */
    NN_NONLIN_TANH,           /* 5/3 */
} NnNonlinearity;

int64_t nn_init_fan_in(const Tensor *t);
int64_t nn_init_fan_out(const Tensor *t);
double nn_init_gain(NnNonlinearity nl, double a);
CtStatus nn_init_uniform_(Tensor *t, double lo, double hi, CtGenerator *g);
CtStatus nn_init_normal_(Tensor *t, double mean, double std, CtGenerator *g);
CtStatus nn_init_constant_(Tensor *t, double value);
CtStatus nn_init_kaiming_uniform_(Tensor *t, double a, NnFanMode mode, NnNonlinearity nl,
                                  CtGenerator *g);
CtStatus nn_init_kaiming_normal_(Tensor *t, double a, NnFanMode mode, NnNonlinearity nl,
                                 CtGenerator *g);
CtStatus nn_init_xavier_uniform_(Tensor *t, double gain, CtGenerator *g);
CtStatus nn_init_xavier_normal_(Tensor *t, double gain, CtGenerator *g);
/* N(mean, std²) truncated to [a, b] (PyTorch's defaults: 0, 1, -2, 2), by
 * torch.nn.init.trunc_normal_'s method: u uniform in (2Φ(α) - 1, 2Φ(β) - 1)
 * for α = (a - mean)/std, β = (b - mean)/std, then mean + std·√2·erfinv(u)
 * clamped to [a, b]. The same distribution as PyTorch's (not the same
 * numbers); computed in f64 whatever t's dtype, so it stays accurate where
 * PyTorch's f32 arithmetic warns ("mean is more than 2 std from [a, b]").
 * Errors (CT_ERR_INVALID): std <= 0, a non-finite mean or std, a >= b
 * (PyTorch does not check these); a and b may be infinite. */
CtStatus nn_init_trunc_normal_(Tensor *t, double mean, double std, double a, double b,
                               CtGenerator *g);

/* ------------------------------------------------------------ safetensors */

/* Writes d as a safetensors file (8-byte little-endian header length, JSON
 * header with dtype/shape/data_offsets, raw little-endian data; tensors
 * copied to the host as needed). metadata: n string pairs for
 * "__metadata__" (may be 0/NULL). Atomic: temp file, fsync, rename; nothing
 * is left behind on failure. */
CtStatus nn_safetensors_save(const char *path, const CtStateDict *d, int n_meta,
                             const char *const *meta_keys,
                             const char *const *meta_values);
/* Reads a safetensors file into new tensors on dev, in the header's order.
 * Malformed files (bad header length, headers over 100 MB, invalid JSON,
 * unknown dtype, bad shapes, offsets outside the data or overlapping or not
 * matching the shape, truncated data) are rejected, before any data is
 * read, with a message naming the path, the tensor and the problem
 * (CT_ERR_FORMAT; CT_ERR_IO for unreadable files). Gaps between tensors
 * and trailing bytes are accepted; "__metadata__" is checked (string
 * values) but not returned. The caller frees the dict. */
CtStateDict *nn_safetensors_load(const char *path, CtDevice dev);

typedef struct NnLoadReport {
    int n_missing, n_unexpected, n_mismatched; /* counts */
    char message[1024]; /* the first few names of each kind, for printing */
} NnLoadReport;

/* Copies matching entries of d into m's parameters and buffers (values are
 * converted to each tensor's dtype and device, as PyTorch's copy_ does;
 * packed blocks stay valid). strict: any missing, unexpected or mis-shaped
 * key is an error (CT_ERR_SHAPE when shapes are the only problem, else
 * CT_ERR_INVALID) and nothing is changed. Non-strict: loads what matches.
 * A BatchNorm's num_batches_tracked may be absent from d (old torchvision
 * checkpoints have none): it is set to 0 and not counted as missing, as
 * PyTorch does for a dict without version metadata, e.g. a safetensors
 * file.
 * Either way *report (may be NULL) gets the counts and, in message, up to
 * three names of each kind ("1 missing key: fc.bias; 1 mis-shaped key:
 * fc.weight (checkpoint [10, 64], model [5, 64])"). */
CtStatus nn_module_load_state_dict(Module *m, const CtStateDict *d, bool strict,
                                   NnLoadReport *report);
/* nn_safetensors_save of nn_module_state_dict (metadata {"format": "pt"}, as
 * transformers writes) / nn_safetensors_load to the host +
 * nn_module_load_state_dict; errors from the latter are prefixed with the
 * path. */
CtStatus nn_module_save(const Module *m, const char *path);
CtStatus nn_module_load(Module *m, const char *path, bool strict, NnLoadReport *report);

/* ------------------------------------------------------------ model zoo */

/* MLP: in -> hidden[0] -> ... -> out with ReLU between (children "0", "1",
 * ... as nn.Sequential). The MNIST MLP is hidden {128, 64}, in 784, out 10. */
Module *nn_model_mlp(int64_t in, int n_hidden, const int64_t *hidden, int64_t out,
                     CtGenerator *g);
/* PyTorch's MNIST example net: conv1 1->32 3x3, relu, conv2 32->64 3x3,
 * relu, max-pool 2, dropout1 0.25, flatten, fc1 9216->128, relu, dropout2
 * 0.5, fc2 128->10, log_softmax. Input (N, 1, 28, 28); the output is
 * log-probabilities (N, 10). g also drives the dropouts (borrowed: it must
 * outlive the model). */
Module *nn_model_basicnet(CtGenerator *g);

typedef struct NnResNetArgs {
    int64_t num_classes; /* 0 -> 1000 */
    int64_t in_channels; /* 0 -> 3 */
    /* true: everything after the stem's convolution runs channels last
     * (tensor_channels_last), which on CUDA runs batch norm, pooling and
     * the convolutions on NHWC kernels without transposes; the same values
     * either way (the CPU computes on contiguous copies). The stem's
     * convolution stays NCHW, where a bf16 RGB input gets its channels
     * padded for the tensor cores. Default false. */
    bool channels_last;
} NnResNetArgs;
/* torchvision's ResNets (names conv1, bn1, layer1.0.conv1, ...,
 * layer2.0.downsample.0, fc; ResNet-50 is v1.5, stride on the 3x3 conv) and
 * timm's ResNet-50-D (deep stem conv1.0/1/3/4/6, average-pool downsample
 * downsample.1/2). args NULL: defaults; negative values are an error.
 * Initialisation as torchvision: convs kaiming_normal_(fan_out, relu), batch
 * norms weight 1 bias 0, fc Linear's default; resnet50d also zeroes each
 * block's bn3.weight, as timm does (zero_init_last=True). Forward takes
 * (N, in_channels, H, W) and gives logits (N, num_classes); the classifier
 * head is fc. */
Module *nn_model_resnet18(const NnResNetArgs *args, CtGenerator *g);
Module *nn_model_resnet34(const NnResNetArgs *args, CtGenerator *g);
Module *nn_model_resnet50(const NnResNetArgs *args, CtGenerator *g);
Module *nn_model_resnet50d(const NnResNetArgs *args, CtGenerator *g);
/* The ResNet a torchvision or timm state dict (safetensors, path) holds,
 * with that file loaded: the architecture is read from the names and
 * shapes (conv1.0.weight: timm's deep stem; layer1.0.conv3.weight:
 * Bottlenecks; blocks per stage from layer<s>.<j>), and must be one of
 * the four above; in_channels comes from the stem. args (may be NULL):
 * in_channels 0 or the file's; num_classes 0 keeps the file's head, a
 * positive value gives a new fc of that size (even the file's size: the
 * fine-tuning case), initialised as nn.Linear; the file's fc is then not
 * loaded; channels_last as for the constructors (the weights are the same
 * either way). Everything else must match exactly, batch
 * norms' running statistics and num_batches_tracked included (a file
 * without num_batches_tracked loads with them at 0, as in PyTorch). *arch (may
 * be NULL) gets "resnet18", "resnet34", "resnet50" or "resnet50d" (static
 * strings). g draws the initial values before loading. Errors (NULL, the
 * path in the message): unreadable or malformed files, an architecture
 * that is none of the four, missing, unexpected or mis-shaped keys. */
Module *nn_model_resnet_load(const char *path, const NnResNetArgs *args, CtGenerator *g,
                             const char **arch);

#ifdef __cplusplus
}
#endif
#endif
