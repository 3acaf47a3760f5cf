/* Private to runtime/ (and its tests): the library side of the NCCL
 * collectives (comm_nccl.c, nccl_load.c). */
#ifndef CTRAINER_COMM_NCCL_H
#define CTRAINER_COMM_NCCL_H

#include "nccl_module.h"
#include "runtime_internal.h"

/* NCCL's data type / reduction op (RT_NCCL_*) for ours; false for a dtype
 * or op NCCL cannot carry. Every dtype maps (bool as uint8); MEAN is
 * NCCL's average. Pure. */
bool rt_nccl_datatype(CtDType dt, int *out);
bool rt_nccl_op(RuntimeReduceOp op, int *out);

/* The NCCL module, loaded on the first call; NULL with an error naming the
 * rank and why it could not be loaded (nccl_load.c). */
const CtNcclModule *rt_nccl_module(int rank);

#endif
