/* Private to runtime/: the interface between libctrainer and the NCCL
 * module.
 *
 * NCCL collectives of CUDA tensors are built as a separate shared object,
 * libctrainer_nccl.so, which links libnccl and the CUDA runtime;
 * libctrainer links neither. runtime/nccl_load.c opens the module with
 * dlopen on the first collective of a CUDA tensor, so a run that never
 * reduces a GPU tensor never maps NCCL or CUDA, and a missing module or
 * libnccl is an error of that collective, not of start-up.
 *
 * The module exports one symbol, CT_NCCL_MODULE_ENTRY (CtNcclModuleEntry):
 * it gets the library functions it calls (it resolves no symbol against
 * the program) and returns its table. Both carry CT_NCCL_MODULE_ABI.
 *
 * Everything MPI stays in the library: rank 0 asks the module for a unique
 * id, the library broadcasts it over MPI, every rank opens its
 * communicator from it. Waiting (deadline, abort) is the library's too:
 * the module only starts collectives and answers queries.
 */
#ifndef CTRAINER_RUNTIME_NCCL_MODULE_H
#define CTRAINER_RUNTIME_NCCL_MODULE_H

#include <stdbool.h>
#include <stddef.h>

#include "ctrainer/status.h"

#define CT_NCCL_MODULE_ABI   1
#define CT_NCCL_MODULE_ENTRY "ct_nccl_module_open"
#define CT_NCCL_MODULE_FILE  "libctrainer_nccl.so"

/* NCCL's own ncclDataType_t / ncclRedOp_t values (nccl.h, fixed since NCCL
 * 2.10); the module checks them against nccl.h when it is compiled. */
enum {
    RT_NCCL_UINT8 = 1,
    RT_NCCL_INT32 = 2,
    RT_NCCL_INT64 = 4,
    RT_NCCL_FLOAT16 = 6,
    RT_NCCL_FLOAT32 = 7,
    RT_NCCL_FLOAT64 = 8,
    RT_NCCL_BFLOAT16 = 9,
};
enum { RT_NCCL_SUM = 0, RT_NCCL_MAX = 2, RT_NCCL_MIN = 3, RT_NCCL_AVG = 4 };

/* ncclUniqueId, as bytes (NCCL_UNIQUE_ID_BYTES). */
typedef struct CtNcclId {
    char bytes[128];
} CtNcclId;

typedef struct CtNcclComm CtNcclComm; /* the module's communicator + stream */

/* Library functions the module calls. */
typedef struct CtNcclHost {
    int abi;
    CtStatus (*error)(CtStatus s, const char *fmt, ...);
} CtNcclHost;

/* The module's functions. Each records its error through host->error with
 * the failing call, file and line. The collectives are queued on the
 * communicator's stream after all work already queued on the device, and
 * return at once; query says whether the last one finished. */
typedef struct CtNcclModule {
    int abi;
    CtStatus (*unique_id)(int device, CtNcclId *id);
    /* One rank's communicator of world ranks on CUDA device `device`. */
    CtStatus (*open)(int device, int world, int rank, const CtNcclId *id,
                     CtNcclComm **out);
    CtStatus (*all_reduce)(CtNcclComm *c, void *buf, size_t n, int type, int op);
    CtStatus (*broadcast)(CtNcclComm *c, void *buf, size_t bytes, int root);
    CtStatus (*all_gather)(CtNcclComm *c, const void *send, void *recv, size_t bytes);
    /* *done: the stream is idle. An error: the stream or the communicator
     * failed (NCCL's asynchronous error included). */
    CtStatus (*query)(CtNcclComm *c, bool *done);
    /* Tear the communicator down with ncclCommAbort (after a failure or a
     * deadline: pending work is dropped) or destroy it; both free c. Neither
     * touches the process. */
    void (*comm_abort)(CtNcclComm *c);
    void (*close)(CtNcclComm *c);
} CtNcclModule;

/* The entry point: keeps `host` and returns the module's table (static
 * storage), or NULL when host->abi differs. */
typedef const CtNcclModule *(*CtNcclModuleEntry)(const CtNcclHost *host);

#endif
