/* Private to nn/: the module registry and helpers shared by the layers. */
#ifndef CTRAINER_NN_INTERNAL_H
#define CTRAINER_NN_INTERNAL_H

#include "ctrainer/nn.h"

/* A named tensor (parameter or buffer) or child; the registry owns the name
 * and one reference to the tensor / the child module. */
typedef struct NnNamedTensor {
    char *name;
    Tensor *t;
} NnNamedTensor;

typedef struct NnNamedChild {
    char *name;
    Module *m;
} NnNamedChild;

/* Growable arrays in registration order. Names are unique across all three
 * lists of one module (as attribute names are in PyTorch). */
struct NnRegistry {
    NnNamedTensor *params;
    int n_params, cap_params;
    NnNamedTensor *buffers;
    int n_buffers, cap_buffers;
    NnNamedChild *children;
    int n_children, cap_children;
    /* Packed blocks (nn/pack.c): held only by the module nn_module_pack or
     * nn_module_to was called on; a module registered as a child drops its
     * own. One reference each, or NULL. */
    Tensor *param_block;
    Tensor *grad_block;
};

/* Drops m's packed blocks (the parameters keep the storage alive). */
void nn_pack_release(Module *m);

/* Tensors that layer constructors create must outlive any scope the caller
 * has open: create them inside a scope of our own, keep them with
 * nn_keep (a retain; NULL-safe), then close that scope. */
static inline Tensor *nn_keep(Tensor *t)
{
    return tensor_retain(t);
}

/* One tensor for a constructor to register: into *field, as a buffer or a
 * parameter. */
typedef struct NnSlot {
    const char *name;
    Tensor *t;
    Tensor **field;
    bool buffer;
} NnSlot;

/* Registers slots in order. After the first failure the remaining tensors
 * are released unregistered; returns that failure's status (CT_OK when all
 * were registered). */
CtStatus nn_register_slots(Module *m, int n, const NnSlot *slots);

/* Allocates a zeroed subtype struct of `size` bytes and initialises its
 * Module (the first member). Returns NULL (error recorded) on failure. */
Module *nn_module_alloc(size_t size, const ModuleVtable *vt);

/* True for a module made by nn_relu (Sequential fuses it into the child
 * before it). */
bool nn_is_relu(const Module *m);
/* True for a module made by nn_batch_norm1d or nn_batch_norm2d (_ex), also
 * once converted to SyncBatchNorm. */
bool nn_is_batch_norm(const Module *m);
/* True for a module made by nn_gelu, with its approximation in *approx
 * (Sequential fuses it into a Linear before it). */
bool nn_is_gelu(const Module *m, CtGeluApprox *approx);

/* Re-records the current error as "<context>: <current message>" with
 * status st; returns st. */
CtStatus nn_error_context(CtStatus st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Formats x as Python's repr(float) does ("1e-05", "0.1", "1.0"). */
const char *nn_format_float(double x, char *buf, size_t n);

/* "(a, b)" when a != b or force_tuple, else "a" (PyTorch prints what was
 * passed; our layers take pairs, shown as PyTorch shows them when built
 * from ints). */
const char *nn_format_pair(int a, int b, bool force_tuple, char *buf, size_t n);

/* Writes the one-line repr "Type(extra)" of a leaf module into buf, used in
 * error messages. */
const char *nn_module_describe(const Module *m, char *buf, size_t n);

#endif
