/* The runtime in one process: launch detection, the environment it reads,
 * argument errors of the collectives, threads per rank, and (MPI builds)
 * the type mapping onto MPI. The multi-process behaviour is tested under
 * mpirun in tests/runtime/mpi/. */
#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctrainer/ctrainer.h"
#include "runtime/comm_mpi.h"
#include "runtime/comm_nccl.h"
#include "runtime/runtime_internal.h"
#include "testutil.h"

START_TEST(world_size_without_launcher_is_refused)
{
    setenv("WORLD_SIZE", "2", 1);
    setenv("RANK", "0", 1);
    ck_assert_ptr_null(runtime_create(NULL));
#ifdef CTRAINER_HAVE_MPI
    tu_assert_error(CT_ERR_UNSUPPORTED,
                    "WORLD_SIZE=2 but the process was not started by an MPI launcher");
#else
    tu_assert_error(CT_ERR_UNSUPPORTED,
                    "WORLD_SIZE=2 but this build of ctrainer is single-process");
#endif
    unsetenv("WORLD_SIZE");
    unsetenv("RANK");
    /* a local rank past the local world */
    setenv("LOCAL_RANK", "3", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    ck_assert_ptr_null(runtime_create(NULL));
    tu_assert_error(CT_ERR_INVALID, "LOCAL_RANK=3 is not below LOCAL_WORLD_SIZE=2");
    unsetenv("LOCAL_RANK");
    unsetenv("LOCAL_WORLD_SIZE");
}
END_TEST

START_TEST(bad_collective_timeout_is_refused)
{
    const char *bad[] = {"abc", "0", "-3", "5s"};
    for (int i = 0; i < 4; i++) {
        setenv("CTRAINER_COLLECTIVE_TIMEOUT", bad[i], 1);
        ck_assert_ptr_null(runtime_create(NULL));
        tu_assert_error(CT_ERR_INVALID, "CTRAINER_COLLECTIVE_TIMEOUT=");
    }
    setenv("CTRAINER_COLLECTIVE_TIMEOUT", "2.5", 1);
    Runtime *rt = runtime_create(NULL);
    ck_assert_ptr_nonnull(rt);
    ck_assert_double_eq(rt->timeout_s, 2.5);
    runtime_free(rt);
    unsetenv("CTRAINER_COLLECTIVE_TIMEOUT");
    rt = runtime_create(NULL);
    ck_assert_double_eq(rt->timeout_s, RT_DEFAULT_TIMEOUT_S);
    runtime_free(rt);
}
END_TEST

START_TEST(single_process_collectives)
{
    Runtime *rt = runtime_create(NULL);
    ck_assert(!runtime_is_distributed(rt));
    Tensor *t = tu_tensor(CT_F32, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    ck_assert_int_eq(runtime_broadcast(rt, t, 0), CT_OK);
    tu_assert_values(t, ((double[]){1, 2, 3, 4}), 4, 0, 0);
    ck_assert_int_eq(runtime_broadcast(rt, t, 1), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "root 1 is not a rank (world size 1)");
    Tensor *tt = tensor_transpose(t, 0, 1);
    ck_assert_int_eq(runtime_broadcast(rt, tt, 0), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "not contiguous");
    ck_assert_int_eq(runtime_broadcast(NULL, t, 0), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "runtime_broadcast: NULL runtime");
    ck_assert_int_eq(runtime_main_process_first_begin(rt), CT_OK);
    ck_assert_int_eq(runtime_main_process_first_end(rt), CT_OK);
    ck_assert_int_eq(runtime_main_process_first_begin(NULL), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "NULL runtime");
    RuntimeCommStats s = runtime_comm_stats(rt);
    ck_assert_int_eq(s.calls, 0);
    ck_assert_int_eq(s.bytes, 0);
    tensor_free(tt);
    tensor_free(t);
    runtime_free(rt);
}
END_TEST

START_TEST(reduce_gradients_one_process_and_errors)
{
    Runtime *rt = runtime_create(NULL);
    CtGenerator g = ct_generator(3, 0);
    Module *m = nn_linear(2, 1, true, &g);
    ck_assert_int_eq(runtime_prepare_model(rt, m), CT_OK);
    float *gd = tensor_data(nn_module_grad_block(m));
    gd[0] = 1.5f;
    ck_assert_int_eq(runtime_reduce_gradients(rt, m), CT_OK); /* a no-op */
    ck_assert_float_eq(gd[0], 1.5f);
    ck_assert_int_eq(runtime_reduce_gradients(rt, NULL), CT_ERR_NULL);
    tu_assert_error(CT_ERR_NULL, "runtime_reduce_gradients: NULL module");
    nn_module_free(m);
    runtime_free(rt);
}
END_TEST

START_TEST(abort_in_one_process_returns)
{
    Runtime *rt = runtime_create(NULL);
    ct_error(CT_ERR_IO, "disk full");
    ck_assert_int_eq(runtime_abort(rt, CT_ERR_IO), 1);
    ck_assert_int_eq(runtime_abort(NULL, CT_ERR_IO), 1);
    ct_clear_error();
    runtime_free(rt);
}
END_TEST

START_TEST(threads_per_rank)
{
    /* free to run anywhere: the machine's cores split evenly */
    ck_assert_int_eq(rt_rank_threads(16, 16, 4, 4), 4);
    ck_assert_int_eq(rt_rank_threads(16, 16, 64, 64), 1); /* more ranks than cores */
    /* bound to cores of their own: all of them */
    ck_assert_int_eq(rt_rank_threads(4, 16, 4, 1), 4);
    /* confined together (a cgroup's cpuset): the shared cores split */
    ck_assert_int_eq(rt_rank_threads(2, 16, 2, 2), 1);
    ck_assert_int_eq(rt_rank_threads(8, 16, 4, 2), 4); /* two ranks per socket */
    ck_assert_int_eq(rt_rank_threads(1, 16, 3, 3), 1);

    unsetenv("OMP_NUM_THREADS");
    int before = omp_get_max_threads();
    int allowed = omp_get_num_procs();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    rt_set_rank_threads(2, 2);
    ck_assert_int_eq(omp_get_max_threads(), rt_rank_threads(allowed, online, 2, 2));
    setenv("OMP_NUM_THREADS", "3", 1); /* the user's setting wins */
    omp_set_num_threads(before);
    rt_set_rank_threads(2, 2);
    ck_assert_int_eq(omp_get_max_threads(), before);
}
END_TEST

#ifdef CTRAINER_HAVE_MPI
/* A rank's GPU: its local rank among all the machine's GPUs, the one GPU a
 * launcher bound it to, or none when it sees too few. */
START_TEST(cuda_index_of_a_rank)
{
    ck_assert_int_eq(runtime_cuda_index(8, 3), 3);
    ck_assert_int_eq(runtime_cuda_index(2, 0), 0);
    ck_assert_int_eq(runtime_cuda_index(1, 0), 0);
    ck_assert_int_eq(runtime_cuda_index(1, 5), 0); /* bound: CUDA_VISIBLE_DEVICES=5 */
    ck_assert_int_eq(runtime_cuda_index(2, 2), -1);
    ck_assert_int_eq(runtime_cuda_index(0, 0), -1);
}
END_TEST

START_TEST(mpi_type_mapping)
{
    ck_assert(rt_mpi_datatype(CT_F32) == MPI_FLOAT);
    ck_assert(rt_mpi_datatype(CT_F64) == MPI_DOUBLE);
    ck_assert(rt_mpi_datatype(CT_I64) == MPI_INT64_T);
    ck_assert(rt_mpi_datatype(CT_I32) == MPI_INT32_T);
    ck_assert(rt_mpi_datatype(CT_U8) == MPI_UINT8_T);
    ck_assert(rt_mpi_datatype(CT_BOOL) == MPI_UINT8_T);
    ck_assert(rt_mpi_datatype(CT_BF16) == MPI_DATATYPE_NULL);
    ck_assert(rt_mpi_datatype(CT_F16) == MPI_DATATYPE_NULL);
    ck_assert(rt_mpi_op(RUNTIME_REDUCE_SUM) == MPI_SUM);
    ck_assert(rt_mpi_op(RUNTIME_REDUCE_MEAN) == MPI_SUM);
    ck_assert(rt_mpi_op(RUNTIME_REDUCE_MAX) == MPI_MAX);
    ck_assert(rt_mpi_op(RUNTIME_REDUCE_MIN) == MPI_MIN);
    ck_assert(rt_mpi_op((RuntimeReduceOp)17) == MPI_OP_NULL);
}
END_TEST

static const char *fake_env_value;
static const char *fake_env_name;
static const char *fake_getenv(const char *name)
{
    return strcmp(name, fake_env_name) == 0 ? fake_env_value : NULL;
}

START_TEST(mpi_launch_detection)
{
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"};
    for (int i = 0; i < 3; i++) {
        fake_env_name = names[i];
        fake_env_value = "4";
        ck_assert(rt_mpi_env_launched(fake_getenv));
        fake_env_value = "1"; /* mpirun -np 1: one process, no MPI */
        ck_assert(!rt_mpi_env_launched(fake_getenv));
        fake_env_value = NULL;
        ck_assert(!rt_mpi_env_launched(fake_getenv));
    }
    fake_env_name = "WORLD_SIZE"; /* other launchers' variables do not start MPI */
    fake_env_value = "2";
    ck_assert(!rt_mpi_env_launched(fake_getenv));
}
END_TEST
#endif

/* NCCL's enum values (nccl.h; the module asserts them at compile time) */
START_TEST(nccl_type_mapping)
{
    const CtDType dts[] = {CT_F32, CT_F64, CT_BF16, CT_F16,
                           CT_I64, CT_I32, CT_U8,   CT_BOOL};
    const int want[] = {7, 8, 9, 6, 4, 2, 1, 1};
    for (int i = 0; i < 8; i++) {
        int got = -1;
        ck_assert(rt_nccl_datatype(dts[i], &got));
        ck_assert_int_eq(got, want[i]);
    }
    int none;
    ck_assert(!rt_nccl_datatype(CT_DTYPE_COUNT, &none));
    const RuntimeReduceOp ops[] = {RUNTIME_REDUCE_SUM, RUNTIME_REDUCE_MEAN,
                                   RUNTIME_REDUCE_MAX, RUNTIME_REDUCE_MIN};
    const int nops[] = {0, 4, 2, 3}; /* ncclSum, ncclAvg, ncclMax, ncclMin */
    for (int i = 0; i < 4; i++) {
        int got = -1;
        ck_assert(rt_nccl_op(ops[i], &got));
        ck_assert_int_eq(got, nops[i]);
    }
    int bad;
    ck_assert(!rt_nccl_op((RuntimeReduceOp)9, &bad));
}
END_TEST

/* A missing module is an error of the first NCCL use, naming the file; the
 * reason is kept for later uses. */
START_TEST(nccl_module_missing)
{
    setenv("CTRAINER_NCCL_MODULE", "/nonexistent/libctrainer_nccl.so", 1);
    for (int i = 0; i < 2; i++) {
        ck_assert_ptr_null(rt_nccl_module(3));
        tu_assert_error(ct_last_status(),
                        "rank 3: NCCL collectives of CUDA tensors: the "
                        "NCCL module could not be loaded: "
                        "/nonexistent/libctrainer_nccl.so: no such file");
    }
    unsetenv("CTRAINER_NCCL_MODULE");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runtime_process");
    TCase *tc = tcase_create("process");
    tcase_add_test(tc, world_size_without_launcher_is_refused);
    tcase_add_test(tc, bad_collective_timeout_is_refused);
    tcase_add_test(tc, single_process_collectives);
    tcase_add_test(tc, reduce_gradients_one_process_and_errors);
    tcase_add_test(tc, abort_in_one_process_returns);
    tcase_add_test(tc, threads_per_rank);
#ifdef CTRAINER_HAVE_MPI
    tcase_add_test(tc, cuda_index_of_a_rank);
    tcase_add_test(tc, mpi_type_mapping);
    tcase_add_test(tc, mpi_launch_detection);
#endif
    tcase_add_test(tc, nccl_type_mapping);
    tcase_add_test(tc, nccl_module_missing);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
