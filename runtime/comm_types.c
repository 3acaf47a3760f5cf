/* ctrainer types → MPI types (see comm_mpi.h). */
#include <stdlib.h>

#include "comm_mpi.h"

MPI_Datatype rt_mpi_datatype(CtDType dt)
{
    switch (dt) {
    case CT_F32: return MPI_FLOAT;
    case CT_F64: return MPI_DOUBLE;
    case CT_I64: return MPI_INT64_T;
    case CT_I32: return MPI_INT32_T;
    case CT_U8:
    case CT_BOOL: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op rt_mpi_op(RuntimeReduceOp op)
{
    switch (op) {
    case RUNTIME_REDUCE_SUM:
    case RUNTIME_REDUCE_MEAN: return MPI_SUM;
    case RUNTIME_REDUCE_MAX: return MPI_MAX;
    case RUNTIME_REDUCE_MIN: return MPI_MIN;
    default: return MPI_OP_NULL;
    }
}

bool rt_mpi_env_launched(const char *(*get)(const char *name))
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                       "MV2_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *s = get(vars[i]);
        if (s && atoi(s) > 1) return true;
    }
    return false;
}
