/* PyTorch's MNIST example network (examples/mnist/main.py, class Net), with
 * its child names, so its state dicts load in PyTorch and back. */
#include <stdlib.h>

#include "zoo_internal.h"

typedef struct BasicNet {
    Module base;
    Module *conv1, *conv2, *dropout1, *dropout2, *fc1, *fc2; /* borrowed children */
} BasicNet;

/* x: (N, 1, 28, 28) -> log-probabilities (N, 10). */
static Tensor *basicnet_forward(Module *m, Tensor *x)
{
    BasicNet *net = (BasicNet *)m;
    if (zoo_check_input("BasicNet", x, 1, 28, 28) != CT_OK) return NULL;
    const CtPool2dArgs pool = {.kernel = {2, 2}};
    Tensor *h = nn_forward_relu(net->conv1, x);
    h = nn_forward_relu(net->conv2, h);
    h = nn_forward(net->dropout1, tensor_max_pool2d(h, &pool));
    h = nn_forward_relu(net->fc1, tensor_flatten(h, 1, -1));
    h = nn_forward(net->fc2, nn_forward(net->dropout2, h));
    return tensor_log_softmax(h, 1);
}

static const ModuleVtable basicnet_vt = {.type = "BasicNet", .forward = basicnet_forward};

Module *nn_model_basicnet(CtGenerator *g)
{
    if (zoo_check_generator("basicnet", g) != CT_OK) return NULL;
    BasicNet *net = calloc(1, sizeof *net);
    if (!net) {
        ct_error(CT_ERR_OOM, "basicnet: out of memory");
        return NULL;
    }
    if (nn_module_init(&net->base, &basicnet_vt) != CT_OK) {
        free(net);
        return NULL;
    }
    Module *m = &net->base;
    bool ok = (net->conv1 = zoo_child(m, "conv1", nn_conv2d(1, 32, 3, NULL, true, g))) &&
              (net->conv2 = zoo_child(m, "conv2", nn_conv2d(32, 64, 3, NULL, true, g))) &&
              (net->dropout1 = zoo_child(m, "dropout1", nn_dropout(0.25, g))) &&
              (net->dropout2 = zoo_child(m, "dropout2", nn_dropout(0.5, g))) &&
              (net->fc1 = zoo_child(m, "fc1", nn_linear(9216, 128, true, g))) &&
              (net->fc2 = zoo_child(m, "fc2", nn_linear(128, 10, true, g)));
    if (!ok) {
        nn_module_free(m);
        return NULL;
    }
    return m;
}
