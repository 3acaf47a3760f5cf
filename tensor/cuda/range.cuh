/* Private to tensor/cuda: checking an op's index tensor (range.cu,
 * range_body.h) without waiting for the device. CUDA sources only.
 *
 * A check is one kernel that records the first bad position in a device
 * slot of the context's log (a kernel of its own, or the op's kernel,
 * which reads the indices anyway), and keeps a reference to the index
 * tensor.
 * Nothing waits for it: the log is read, and the first bad index reported
 * with the op's message, by the next copy that waits for the device, the
 * next synchronisation, or the check that finds the log full (every
 * CT_RANGE_SLOTS checks). The op's kernel runs meanwhile and leaves a bad
 * index's elements alone (the thread bodies guard every index they use),
 * so a step never waits for its checks, and a bad index still ends the run
 * with a message naming the op, the position and the value. */
#ifndef CTRAINER_TENSOR_CUDA_RANGE_CUH
#define CTRAINER_TENSOR_CUDA_RANGE_CUH

#include "common.cuh"
#include "range_body.h"

#define CT_RANGE_SLOTS 64

/* The parts of a check's error, put together only when it is reported:
 * "<op>: <what> <value> at <where> <position> is out of range for <size>
 * classes" (dim < 0) or "... for dim <dim> of size <size>", e.g.
 * "cross_entropy: target 7 at index [3] is out of range for 5 classes".
 * The strings are static (op names, literals). */
typedef struct CtRangeMsg {
    const char *op, *what, *where;
    int dim;
    int64_t size;
} CtRangeMsg;

/* Queues the check of every element of `index` (contiguous CT_I64 on c's
 * device) against rc on c's stream; an earlier check's error when the log
 * was full and had one, CT_ERR_BACKEND when a CUDA call fails. */
CtStatus ct_cuda_check_range(CtCudaCtx *c, const Tensor *index, CtRangeCheck rc,
                             const CtRangeMsg *msg);
/* A check made by the op's own kernel: begin locks the log and gives the
 * slot that kernel lowers (as ct_range_thread does); the caller launches
 * it on c's stream and hands the launch's status to end, which queues the
 * check when it is CT_OK and unlocks. begin fails (log unlocked) with an
 * earlier check's error when the log was full and had one, or a CUDA
 * error. */
CtStatus ct_cuda_range_begin(CtCudaCtx *c, unsigned long long **slot);
CtStatus ct_cuda_range_end(CtCudaCtx *c, const Tensor *index, const CtRangeMsg *msg,
                           CtStatus launched);
/* Waits for the queued checks and empties the log: the first bad index's
 * error (CT_ERR_INVALID), else CT_OK. Copies and synchronisations call it
 * after they have waited. */
CtStatus ct_cuda_range_report(CtCudaCtx *c);
/* Drops the log (teardown at process exit; nothing reported). */
void ct_cuda_range_free(CtCudaCtx *c);

#endif
