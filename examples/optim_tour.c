/* optim_tour — optimizers, schedulers, clipping and checkpoints in one small
 * program: fit y = 3x - 1 with a 1-16-1 MLP, AdamW and OneCycleLR, clip the
 * gradient norm, then save weights and optimizer state, load them into a
 * fresh model and optimizer, and check that both continue identically.
 *
 *   optim_tour [--steps N] [--cuda]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/ctrainer.h"
#include "example_cuda.h"

static Module *make_model(uint64_t seed, CtGenerator *g, CtDevice dev)
{
    *g = ct_generator(seed, 0);
    Module *m = nn_model_mlp(1, 1, (const int64_t[]){16}, 1, g);
    if (m && nn_module_to(m, dev) != CT_OK) {
        nn_module_free(m);
        return NULL;
    }
    return m;
}

/* One update on a fixed batch; returns the loss. */
static double train_step(Module *m, Optimizer *o, Scheduler *s, Tensor *x, Tensor *y)
{
    CtScope *scope = ct_scope_open();
    Tensor *loss = tensor_mse_loss(nn_forward(m, x), y, CT_REDUCTION_MEAN);
    double v = tensor_item(loss);
    if (tensor_backward(loss, NULL) != CT_OK) v = NAN;
    CtStateDict *params = nn_module_parameters(m);
    Tensor *list[16];
    int64_t n = ct_state_dict_size(params);
    for (int64_t i = 0; i < n && i < 16; i++) list[i] = ct_state_dict_tensor(params, i);
    optim_clip_grad_norm(list, n, 1.0, 2.0);
    ct_state_dict_free(params);
    if (optim_step(o) != CT_OK || (s && scheduler_step(s) != CT_OK)) v = NAN;
    optim_zero_grad(o);
    ct_scope_close(scope);
    return v;
}

int main(int argc, char **argv)
{
    CtDevice dev;
    if (!example_cuda_flag(&argc, argv, &dev)) return 1;
    int steps = argc > 2 && !strcmp(argv[1], "--steps") ? atoi(argv[2]) : 200;
    /* data: 64 points of y = 3x - 1 */
    float xs[64], ys[64];
    for (int i = 0; i < 64; i++) {
        xs[i] = (float)i / 32.0f - 1.0f;
        ys[i] = 3.0f * xs[i] - 1.0f;
    }
    Tensor *x = tensor_from_data(xs, 2, (const int64_t[]){64, 1}, CT_F32, dev);
    Tensor *y = tensor_from_data(ys, 2, (const int64_t[]){64, 1}, CT_F32, dev);

    CtGenerator g;
    Module *model = make_model(1, &g, dev);
    AdamArgs adam = {
        .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
    Optimizer *opt = optim_adamw_create(model, &adam);
    Scheduler *sched = scheduler_one_cycle_lr(
        opt, &(OneCycleArgs){.max_lr = 0.05, .total_steps = steps + 10});
    if (!x || !y || !model || !opt || !sched) {
        fprintf(stderr, "optim_tour: %s\n", ct_last_error());
        return 1;
    }
    double loss = 0;
    for (int i = 0; i < steps; i++) {
        loss = train_step(model, opt, sched, x, y);
        if (i % 50 == 0 || i == steps - 1)
            printf("step %3d  loss %.5f  lr %.5f\n", i, loss,
                   scheduler_get_last_lr(sched, 0));
    }

    /* checkpoint: weights as safetensors, optimizer state as a state dict */
    const char *path = "optim_tour.safetensors";
    CtStateDict *state = ct_state_dict_create();
    int status =
        nn_module_save(model, path) == CT_OK && optim_state_save(opt, state) == CT_OK ? 0
                                                                                      : 1;
    CtGenerator g2;
    Module *copy = make_model(2, &g2, dev); /* different initial weights */
    Optimizer *opt2 = optim_adamw_create(copy, &adam);
    if (!status && (nn_module_load(copy, path, true, NULL) != CT_OK ||
                    optim_state_load(opt2, state) != CT_OK))
        status = 1;
    if (!status) {
        optim_set_lr(opt, 0, 1e-3);
        optim_set_lr(opt2, 0, 1e-3);
        double a = train_step(model, opt, NULL, x, y);
        double b = train_step(copy, opt2, NULL, x, y);
        printf("after reload: next loss %.7f (original) vs %.7f (reloaded)\n", a, b);
        if (a != b) status = 1;
    }
    if (status) fprintf(stderr, "optim_tour: %s\n", ct_last_error());
    remove(path);
    printf("final loss %.5f%s\n", loss, status ? "" : ", checkpoint round trip exact");
    ct_state_dict_free(state);
    scheduler_free(sched);
    optim_free(opt);
    optim_free(opt2);
    nn_module_free(model);
    nn_module_free(copy);
    tensor_free(x);
    tensor_free(y);
    return status || !(loss < 0.05);
}
