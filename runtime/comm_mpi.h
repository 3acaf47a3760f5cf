/* Private to runtime/ (and its tests): how ctrainer's types map onto MPI's
 * (comm_mpi.c). Pure functions, no communication. */
#ifndef CTRAINER_COMM_MPI_H
#define CTRAINER_COMM_MPI_H
#ifdef CTRAINER_HAVE_MPI

#include <mpi.h>

#include "runtime_internal.h"

/* The MPI datatype of one element of dt; MPI_DATATYPE_NULL for the types
 * MPI has no arithmetic for (bf16, f16: reduced in f32 by the caller). bool
 * travels as one byte. */
MPI_Datatype rt_mpi_datatype(CtDType dt);
/* The MPI reduction of op (MEAN is a SUM; the caller divides);
 * MPI_OP_NULL for an unknown op. */
MPI_Op rt_mpi_op(RuntimeReduceOp op);
/* Is the launcher's environment that of several MPI ranks? Reads the sizes
 * Open MPI (OMPI_COMM_WORLD_SIZE), MPICH/Intel MPI (PMI_SIZE) and MVAPICH
 * (MV2_COMM_WORLD_SIZE) export; getenv is passed in so tests can fake it. */
bool rt_mpi_env_launched(const char *(*get)(const char *name));

#endif
#endif
