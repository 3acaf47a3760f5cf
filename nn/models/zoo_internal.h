/* Private helpers shared by the model zoo (nn/models/). */
#ifndef CTRAINER_NN_ZOO_INTERNAL_H
#define CTRAINER_NN_ZOO_INTERNAL_H

#include "ctrainer/nn.h"

/* Registers child under name and returns it. A NULL child (its constructor
 * failed and recorded why) returns NULL without recording anything, so the
 * first error survives. */
Module *zoo_child(Module *m, const char *name, Module *child);

/* Frees the n modules in mods (NULL entries skipped). */
void zoo_free_all(int n, Module **mods);

/* nn_sequential(n, mods) when every entry is non-NULL; otherwise frees the
 * built ones and returns NULL, keeping the constructor's error. */
Module *zoo_sequential(int n, Module **mods);

/* Records CT_ERR_NULL naming `model` when g is NULL. */
CtStatus zoo_check_generator(const char *model, const CtGenerator *g);

/* Checks x is (N, c, h, w), with h or w < 0 meaning any size; records
 * "<model>: expected input (N, c, h, w), got <x>" otherwise. x NULL returns
 * CT_ERR_NULL without recording (sticky errors). */
CtStatus zoo_check_input(const char *model, const Tensor *x, int64_t c, int64_t h,
                         int64_t w);

/* Conv2d (no bias) with a k x k kernel, padding k / 2, stride s, weight
 * drawn as torchvision's ResNets do: kaiming_normal_(mode='fan_out',
 * nonlinearity='relu'), i.e. N(0, 2 / (out * k * k)). */
Module *zoo_conv_kaiming(int64_t in, int64_t out, int k, int s, CtGenerator *g);

#endif
