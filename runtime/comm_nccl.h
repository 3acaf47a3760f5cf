/* Private to runtime/ (and its tests): how ctrainer's types map onto
 * NCCL's. Pure functions, no communication. */
#ifndef CTRAINER_COMM_NCCL_H
#define CTRAINER_COMM_NCCL_H
#ifdef CTRAINER_HAVE_NCCL

#include <nccl.h>

#include "runtime_internal.h"

/* false for a dtype / op NCCL cannot carry. Every dtype maps (bool as
 * uint8); MEAN is NCCL's average. */
bool rt_nccl_datatype(CtDType dt, ncclDataType_t *out);
bool rt_nccl_op(RuntimeReduceOp op, ncclRedOp_t *out);

#endif
#endif
