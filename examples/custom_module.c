/* custom_module — writing your own Module: a ResNet basic block.
 *
 *   custom_module [--cuda]
 *
 * Builds the block out of library layers, runs one forward and backward
 * pass on random input, prints the model summary, the state-dict names, the
 * loss and the norm of the weight gradient. The forward is plain tensor
 * code; the backward comes from autograd.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctrainer/nn.h"
#include "example_cuda.h"

/* The subtype embeds Module first; the child pointers are borrowed from
 * the registry, which owns (and frees) them. */
typedef struct BasicBlock {
    Module base;
    Module *conv1, *bn1, *conv2, *bn2;
} BasicBlock;

/* x: (N, C, H, W) -> relu(bn2(conv2(relu(bn1(conv1(x))))) + x) */
static Tensor *block_forward(Module *m, Tensor *x)
{
    BasicBlock *b = (BasicBlock *)m;
    Tensor *h = nn_forward_relu(b->bn1, nn_forward(b->conv1, x)); /* bn + relu: one op */
    h = nn_forward(b->bn2, nn_forward(b->conv2, h));
    return tensor_add_relu(h, x); /* relu(h + x); NULL anywhere stays NULL */
}

static void block_extra_repr(const Module *m, char *buf, size_t n)
{
    snprintf(buf, n, "residual=True");
}

static const ModuleVtable block_vt = {
    .type = "BasicBlock", .forward = block_forward, .extra_repr = block_extra_repr};

/* Registration returns NULL (and keeps the first error) when a constructor
 * failed, so the calls need no checks in between. */
static Module *basic_block(int64_t channels, CtGenerator *g)
{
    BasicBlock *b = calloc(1, sizeof *b);
    if (!b || nn_module_init(&b->base, &block_vt) != CT_OK) {
        free(b);
        return NULL;
    }
    CtConv2dArgs same = {.padding = {1, 1}};
    b->conv1 = nn_module_register_child(
        &b->base, "conv1", nn_conv2d(channels, channels, 3, &same, false, g));
    b->bn1 =
        nn_module_register_child(&b->base, "bn1", nn_batch_norm2d(channels, 1e-5, 0.1));
    b->conv2 = nn_module_register_child(
        &b->base, "conv2", nn_conv2d(channels, channels, 3, &same, false, g));
    b->bn2 =
        nn_module_register_child(&b->base, "bn2", nn_batch_norm2d(channels, 1e-5, 0.1));
    if (!b->conv1 || !b->bn1 || !b->conv2 || !b->bn2) {
        nn_module_free(&b->base); /* frees whatever was registered */
        return NULL;
    }
    return &b->base;
}

int main(int argc, char **argv)
{
    CtDevice dev;
    if (!example_cuda_flag(&argc, argv, &dev)) return 1;
    CtGenerator g = ct_generator(42, 0);
    Module *model = nn_sequential(3, (Module *[]){basic_block(8, &g), basic_block(8, &g),
                                                  nn_adaptive_avg_pool2d(1, 1)});
    if (!model || nn_module_to(model, dev) != CT_OK || nn_module_pack(model) != CT_OK) {
        fprintf(stderr, "custom_module: %s\n", ct_last_error());
        nn_module_free(model);
        return 1;
    }
    nn_module_print(model, stdout);

    CtStateDict *sd = nn_module_state_dict(model);
    printf("state dict: %lld entries, first %s, last %s\n",
           (long long)ct_state_dict_size(sd), ct_state_dict_name(sd, 0),
           ct_state_dict_name(sd, ct_state_dict_size(sd) - 1));
    ct_state_dict_free(sd);

    CtScope *s = ct_scope_open();
    Tensor *x = tensor_normal(&g, 4, (const int64_t[]){4, 8, 16, 16}, 0, 1, CT_F32, dev);
    Tensor *y = nn_forward(model, x); /* (4, 8, 1, 1) */
    Tensor *loss = tensor_mean_all(tensor_mul(y, y));
    if (!loss || tensor_backward(loss, NULL) != CT_OK) {
        fprintf(stderr, "custom_module: %s\n", ct_last_error());
        ct_scope_close(s);
        nn_module_free(model);
        return 1;
    }
    /* every gradient lives in the one packed block */
    Tensor *gb = nn_module_grad_block(model);
    double gnorm = sqrt(tensor_item(tensor_sum_all(tensor_mul(gb, gb))));
    printf("loss %.6f, gradient norm %.6f over %lld parameters\n", tensor_item(loss),
           gnorm, (long long)tensor_numel(gb));
    ct_scope_close(s);
    int ok = isfinite(gnorm) && gnorm > 0;
    nn_module_free(model);
    return ok ? 0 : 1;
}
