/* example_cuda.h — the --cuda option every example takes.
 *
 * --cuda runs the example on the GPU: it sets CTRAINER_USE_CPU=false, so
 * every Runtime the program creates (the Trainer's included) puts its
 * process on CUDA device local_rank, as `ctrainer launch` does on a GPU
 * machine; programs that place tensors themselves use the device it
 * returns. Without a usable GPU it fails at once with a clear message.
 *
 * Header-only (static functions): every example is one program.
 */
#ifndef EXAMPLES_EXAMPLE_CUDA_H
#define EXAMPLES_EXAMPLE_CUDA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/tensor.h"

/* Switches the program to CUDA: *dev = cuda:0. False (message printed)
 * when no CUDA device is usable. */
static inline bool example_use_cuda(const char *prog, CtDevice *dev)
{
    if (ct_cuda_device_count() < 1) {
        fprintf(stderr,
                "%s: --cuda: no CUDA device (no GPU is visible, or ctrainer was built "
                "without the CUDA backend)\n",
                prog);
        return false;
    }
    setenv("CTRAINER_USE_CPU", "false", 1);
    *dev = ct_cuda(0);
    return true;
}

/* Takes --cuda out of argv; *dev is the device to place tensors on (the
 * CPU without --cuda). False (message printed) as example_use_cuda. */
static inline bool example_cuda_flag(int *argc, char **argv, CtDevice *dev)
{
    bool cuda = false;
    int kept = 1;
    for (int i = 1; i < *argc; i++) {
        if (!strcmp(argv[i], "--cuda"))
            cuda = true;
        else
            argv[kept++] = argv[i];
    }
    *argc = kept;
    *dev = ct_cpu();
    return !cuda || example_use_cuda(argv[0], dev);
}

#endif
