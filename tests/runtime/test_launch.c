/* The mpirun command builder (flag combinations, bad combinations), the
 * launch line, rank detection and runtime_launch's argument checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/ctrainer.h"
#include "testutil.h"

static const RuntimeHost root2 = {
    .mpirun = "/usr/bin/mpirun", .cpu_count = 2, .is_root = true};

/* The command as one space-separated string. */
static const char *joined(const RuntimeCommand *c)
{
    static char buf[2048];
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->argc; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", i ? " " : "", c->argv[i]);
    ck_assert_ptr_null(c->argv[c->argc]);
    return buf;
}

static RuntimeSettings settings(const char *const *kv)
{
    RuntimeSettings s, cli;
    runtime_settings_default(&cli);
    for (; kv && kv[0]; kv += 2) {
        RuntimeOption o;
        ck_assert_int_eq(runtime_option_find(kv[0], &o), CT_OK);
        ck_assert_int_eq(runtime_settings_set(&cli, o, kv[1]), CT_OK);
    }
    ck_assert_int_eq(runtime_settings_resolve(NULL, &cli, NULL, NULL, &s), CT_OK);
    return s;
}

static char *prog[] = {"./train", "--epochs", "1"};

START_TEST(command_one_machine)
{
    RuntimeSettings s = settings((const char *[]){"num_processes", "2", NULL});
    RuntimeCommand c;
    ck_assert_int_eq(runtime_launch_command(&s, &root2, prog, 3, &c), CT_OK);
    ck_assert_str_eq(
        joined(&c),
        "/usr/bin/mpirun --allow-run-as-root -np 2 --bind-to none "
        "-x OMP_NUM_THREADS=1 -x CTRAINER_MIXED_PRECISION=no "
        "-x CTRAINER_GRADIENT_ACCUMULATION_STEPS=1 -x CTRAINER_SEED=42 "
        "-x CTRAINER_USE_CPU=true -x CTRAINER_STDOUT_TTY=0 -x MASTER_ADDR=127.0.0.1 "
        "-x MASTER_PORT=29500 ./train --epochs 1");
    ck_assert(!c.use_gpus);
    runtime_command_free(&c);
    ck_assert_int_eq(c.argc, 0);
    runtime_command_free(NULL);
}
END_TEST

START_TEST(command_oversubscribed_settings_passed)
{
    RuntimeSettings s = settings((const char *[]){
        "num_processes", "3", "mixed_precision", "bf16", "gradient_accumulation_steps",
        "4", "seed", "7", "main_process_ip", "10.1.1.1", "main_process_port", "4000",
        NULL});
    RuntimeHost h = {.mpirun = "mpirun", .cpu_count = 2, .stdout_tty = true};
    RuntimeCommand c;
    ck_assert_int_eq(runtime_launch_command(&s, &h, prog, 1, &c), CT_OK);
    ck_assert_str_eq(joined(&c),
                     "mpirun --oversubscribe -np 3 --bind-to none "
                     "-x OMP_NUM_THREADS=1 -x CTRAINER_MIXED_PRECISION=bf16 "
                     "-x CTRAINER_GRADIENT_ACCUMULATION_STEPS=4 -x CTRAINER_SEED=7 "
                     "-x CTRAINER_USE_CPU=true -x CTRAINER_STDOUT_TTY=1 "
                     "-x MASTER_ADDR=10.1.1.1 -x MASTER_PORT=4000 ./train");
    runtime_command_free(&c);
    /* one rank on 8 cores gets them all */
    s = settings(NULL);
    h.cpu_count = 8;
    ck_assert_int_eq(runtime_launch_command(&s, &h, prog, 1, &c), CT_OK);
    ck_assert(strstr(joined(&c), "-np 1 --bind-to none -x OMP_NUM_THREADS=8 "));
    runtime_command_free(&c);
}
END_TEST

START_TEST(command_several_machines)
{
    RuntimeSettings s = settings((const char *[]){
        "num_processes", "4", "num_machines", "2", "hostfile", "/etc/mpi.hosts", NULL});
    RuntimeHost h = {.mpirun = "mpirun", .cpu_count = 4};
    RuntimeCommand c;
    ck_assert_int_eq(runtime_launch_command(&s, &h, prog, 1, &c), CT_OK);
    /* 2 ranks per machine: no oversubscription, 2 threads each */
    ck_assert(strstr(joined(&c), "mpirun -np 4 --hostfile /etc/mpi.hosts --npernode 2 "
                                 "--bind-to none -x OMP_NUM_THREADS=2 "));
    runtime_command_free(&c);
}
END_TEST

START_TEST(command_gpus)
{
    RuntimeSettings s = settings((const char *[]){
        "num_processes", "2", "distributed_type", "MULTI_GPU", "gpu_ids", "2,3", NULL});
    RuntimeHost h = {.mpirun = "mpirun", .cpu_count = 16, .gpu_count = 4};
    RuntimeCommand c;
    ck_assert_int_eq(runtime_launch_command(&s, &h, prog, 1, &c), CT_OK);
    ck_assert(c.use_gpus);
    ck_assert(strstr(joined(&c), "-x OMP_NUM_THREADS=8 "));
    ck_assert(strstr(joined(&c), "-x CTRAINER_USE_CPU=false "));
    ck_assert(strstr(joined(&c), "-x CUDA_VISIBLE_DEVICES=2,3 ./train"));
    runtime_command_free(&c);
    /* --cpu on a GPU machine */
    s = settings((const char *[]){"num_processes", "2", "use_cpu", "true", NULL});
    ck_assert_int_eq(runtime_launch_command(&s, &h, prog, 1, &c), CT_OK);
    ck_assert(!c.use_gpus);
    ck_assert(strstr(joined(&c), "-x CTRAINER_USE_CPU=true "));
    ck_assert(!strstr(joined(&c), "CUDA_VISIBLE_DEVICES"));
    runtime_command_free(&c);
    /* MULTI_CPU trains on CPUs on a GPU machine too (accelerate's
     * questionnaire sets use_cpu for it): more ranks than GPUs are fine */
    s = settings((const char *[]){"num_processes", "6", "distributed_type", "MULTI_CPU",
                                  "gpu_ids", "0,1", NULL});
    ck_assert_int_eq(runtime_launch_command(&s, &h, prog, 1, &c), CT_OK);
    ck_assert(!c.use_gpus);
    ck_assert(strstr(joined(&c), "-x CTRAINER_USE_CPU=true "));
    ck_assert(!strstr(joined(&c), "CUDA_VISIBLE_DEVICES"));
    runtime_command_free(&c);
}
END_TEST

/* The caller's CTRAINER_*, NCCL_* and CUDA_VISIBLE_DEVICES reach every
 * machine's ranks (-x NAME), except those the launch sets itself. */
START_TEST(command_forwards_environment)
{
    RuntimeSettings s =
        settings((const char *[]){"num_processes", "2", "gpu_ids", "2,3", NULL});
    RuntimeHost h = {.mpirun = "mpirun",
                     .cpu_count = 16,
                     .gpu_count = 4,
                     .forward_env = {"CTRAINER_LIMIT_BATCHES", "NCCL_SOCKET_IFNAME",
                                     "CTRAINER_SEED", "CUDA_VISIBLE_DEVICES",
                                     "CTRAINER_USE_CPU"}};
    RuntimeCommand c;
    ck_assert_int_eq(runtime_launch_command(&s, &h, prog, 1, &c), CT_OK);
    const char *j = joined(&c);
    ck_assert(strstr(j, "-x CTRAINER_LIMIT_BATCHES -x NCCL_SOCKET_IFNAME ./train"));
    ck_assert(!strstr(j, "-x CTRAINER_SEED "));
    ck_assert(!strstr(j, "-x CUDA_VISIBLE_DEVICES "));
    ck_assert(!strstr(j, "-x CTRAINER_USE_CPU "));
    runtime_command_free(&c);
    /* gpu_ids all: the caller's CUDA_VISIBLE_DEVICES goes as it is */
    s = settings((const char *[]){"num_processes", "2", NULL});
    ck_assert_int_eq(runtime_launch_command(&s, &h, prog, 1, &c), CT_OK);
    ck_assert(strstr(joined(&c), "-x CUDA_VISIBLE_DEVICES "));
    runtime_command_free(&c);
    /* the probe finds them in the environment */
    ck_assert_int_eq(setenv("CTRAINER_FORWARD_PROBE", "1", 1), 0);
    RuntimeHost p;
    (void)runtime_host_probe(&p);
    ct_clear_error();
    bool found = false;
    for (int i = 0; i < RUNTIME_MAX_FORWARD_ENV && p.forward_env[i][0]; i++)
        found = found || !strcmp(p.forward_env[i], "CTRAINER_FORWARD_PROBE");
    ck_assert(found);
    unsetenv("CTRAINER_FORWARD_PROBE");
}
END_TEST

typedef struct BadLaunch {
    const char *kv[9];
    int gpus;
    const char *message;
} BadLaunch;

static const BadLaunch bad_launches[] = {
    {{"num_processes", "4", "num_machines", "2"},
     0,
     "num_machines is 2 but no hostfile is given"},
    {{"num_processes", "4", "num_machines", "2", "machine_rank", "1", "hostfile", "/h"},
     0,
     "machine_rank is 1; with mpirun the whole job is started from machine 0"},
    {{"distributed_type", "MULTI_GPU", "num_processes", "2"},
     0,
     "distributed_type is MULTI_GPU but this machine has no GPU"},
    {{"distributed_type", "MULTI_GPU", "use_cpu", "yes"},
     2,
     "distributed_type is MULTI_GPU but use_cpu is true"},
    {{"num_processes", "3"},
     2,
     "3 ranks per machine need one GPU each but this machine has 2"},
    {{"num_processes", "2", "gpu_ids", "3"},
     8,
     "2 ranks per machine need one GPU each but gpu_ids lists 1 (3)"},
};

START_TEST(command_bad_combinations)
{
    const BadLaunch *b = &bad_launches[_i];
    RuntimeSettings s = settings(b->kv);
    RuntimeHost h = {.mpirun = "mpirun", .cpu_count = 2, .gpu_count = b->gpus};
    RuntimeCommand c;
    ck_assert_int_eq(runtime_launch_command(&s, &h, prog, 1, &c), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, b->message);
    ck_assert_int_eq(c.argc, 0);
    ck_assert_ptr_null(c.argv);
}
END_TEST

START_TEST(command_bad_arguments)
{
    RuntimeSettings s = settings(NULL);
    RuntimeCommand c;
    ck_assert_int_eq(runtime_launch_command(&s, &root2, prog, 0, &c), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "launch: no program to run");
    char *empty[] = {""};
    ck_assert_int_eq(runtime_launch_command(&s, &root2, empty, 1, &c), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "no program to run");
    RuntimeHost nompi = {.cpu_count = 2};
    ck_assert_int_eq(runtime_launch_command(&s, &nompi, prog, 1, &c), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "no mpirun path");
    ck_assert_int_eq(runtime_launch_command(NULL, &root2, prog, 1, &c), CT_ERR_NULL);
    ct_clear_error();
}
END_TEST

START_TEST(launch_line_and_probe)
{
    char buf[64];
    ck_assert_str_eq(runtime_launch_line(2, false, buf, sizeof buf),
                     "Launching training on 2 CPUs.");
    ck_assert_str_eq(runtime_launch_line(8, true, buf, sizeof buf),
                     "Launching training on 8 GPUs.");
    ck_assert_str_eq(runtime_launch_line(1, false, buf, sizeof buf),
                     "Launching training on 1 CPU.");
    RuntimeHost h;
    CtStatus st = runtime_host_probe(&h);
    ck_assert(h.cpu_count >= 1);
    ck_assert(h.gpu_count >= 0);
    if (st == CT_OK)
        ck_assert(strstr(h.mpirun, "mpi") != NULL);
    else
        tu_assert_error(CT_ERR_UNSUPPORTED, "mpirun was not found");
}
END_TEST

static int calls;
static int count_call(void *user)
{
    calls++;
    return *(int *)user;
}

START_TEST(launch_in_a_rank_calls_the_function)
{
    int ret = 0;
    ck_assert_int_eq(runtime_launch(count_call, &ret, 0), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "num_processes 0 < 1");
    ck_assert_int_eq(runtime_launch(NULL, &ret, 2), CT_ERR_NULL);
    ct_clear_error();
    ck_assert(!runtime_is_launched_rank());
    /* one process: called here, no mpirun */
    ck_assert_int_eq(runtime_launch(count_call, &ret, 1), CT_OK);
    ck_assert_int_eq(calls, 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    ck_assert(runtime_is_launched_rank());
    ck_assert_int_eq(runtime_launch(count_call, &ret, 2), CT_OK);
    ck_assert_int_eq(calls, 2);
    ret = 3;
    ck_assert_int_eq(runtime_launch(count_call, &ret, 2), CT_ERR_STATE);
    tu_assert_error(CT_ERR_STATE, "the training function returned 3 on rank 1");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("launch");
    TCase *tc = tcase_create("launch");
    tcase_add_test(tc, command_one_machine);
    tcase_add_test(tc, command_oversubscribed_settings_passed);
    tcase_add_test(tc, command_several_machines);
    tcase_add_test(tc, command_gpus);
    tcase_add_test(tc, command_forwards_environment);
    tcase_add_loop_test(tc, command_bad_combinations, 0,
                        (int)(sizeof bad_launches / sizeof *bad_launches));
    tcase_add_test(tc, command_bad_arguments);
    tcase_add_test(tc, launch_line_and_probe);
    tcase_add_test(tc, launch_in_a_rank_calls_the_function);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
