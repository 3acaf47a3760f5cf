/* Parameter-free elementwise layers: ReLU, GELU, SiLU, Sigmoid, Tanh,
 * Identity. They accept any floating dtype their tensor op accepts. */
#include "nn_internal.h"

static Tensor *relu_forward(Module *m, Tensor *x)
{
    return tensor_relu(x);
}

static Tensor *silu_forward(Module *m, Tensor *x)
{
    return tensor_silu(x);
}

static Tensor *sigmoid_forward(Module *m, Tensor *x)
{
    return tensor_sigmoid(x);
}

static Tensor *tanh_forward(Module *m, Tensor *x)
{
    return tensor_tanh(x);
}

/* x itself when contiguous (a new reference in the scope, like every op's
 * result), else a contiguous copy; gradients pass through unchanged. */
static Tensor *identity_forward(Module *m, Tensor *x)
{
    return tensor_contiguous(x);
}

static const ModuleVtable relu_vt = {.type = "ReLU", .forward = relu_forward};
static const ModuleVtable silu_vt = {.type = "SiLU", .forward = silu_forward};
static const ModuleVtable sigmoid_vt = {.type = "Sigmoid", .forward = sigmoid_forward};
static const ModuleVtable tanh_vt = {.type = "Tanh", .forward = tanh_forward};
static const ModuleVtable identity_vt = {.type = "Identity", .forward = identity_forward};

bool nn_is_relu(const Module *m)
{
    return m && m->vt == &relu_vt;
}

Module *nn_relu(void)
{
    return nn_module_alloc(sizeof(Module), &relu_vt);
}

Module *nn_silu(void)
{
    return nn_module_alloc(sizeof(Module), &silu_vt);
}

Module *nn_sigmoid(void)
{
    return nn_module_alloc(sizeof(Module), &sigmoid_vt);
}

Module *nn_tanh(void)
{
    return nn_module_alloc(sizeof(Module), &tanh_vt);
}

Module *nn_identity(void)
{
    return nn_module_alloc(sizeof(Module), &identity_vt);
}

typedef struct Gelu {
    Module base;
    CtGeluApprox approx;
} Gelu;

static Tensor *gelu_forward(Module *m, Tensor *x)
{
    return tensor_gelu(x, ((Gelu *)m)->approx);
}

static void gelu_extra_repr(const Module *m, char *buf, size_t n)
{
    snprintf(buf, n, "approximate='%s'",
             ((const Gelu *)m)->approx == CT_GELU_TANH ? "tanh" : "none");
}

static const ModuleVtable gelu_vt = {
    .type = "GELU", .forward = gelu_forward, .extra_repr = gelu_extra_repr};

bool nn_is_gelu(const Module *m, CtGeluApprox *approx)
{
    if (!m || m->vt != &gelu_vt) return false;
    *approx = ((const Gelu *)m)->approx;
    return true;
}

Module *nn_gelu(CtGeluApprox approx)
{
    if (approx != CT_GELU_ERF && approx != CT_GELU_TANH) {
        ct_error(CT_ERR_INVALID, "GELU: unknown approximation %d", (int)approx);
        return NULL;
    }
    Gelu *g = (Gelu *)nn_module_alloc(sizeof(Gelu), &gelu_vt);
    if (!g) return NULL;
    g->approx = approx;
    return &g->base;
}
