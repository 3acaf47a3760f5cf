/* Private to runtime/: the Runtime struct. */
#ifndef CTRAINER_RUNTIME_INTERNAL_H
#define CTRAINER_RUNTIME_INTERNAL_H

#include "ctrainer/runtime.h"

struct Runtime {
    int rank, world_size, local_rank, local_world_size;
    CtDevice device;
    uint64_t seed;
    bool deterministic;
};

#endif
