/* Settings: value parsing, the CTRAINER_* environment, the precedence rule
 * (every option through every combination of sources) and runtime_create. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/ctrainer.h"
#include "testutil.h"

START_TEST(set_and_format_values)
{
    RuntimeSettings s;
    runtime_settings_default(&s);
    char buf[64];
    ck_assert_str_eq(runtime_settings_format(&s, RUNTIME_OPT_DISTRIBUTED_TYPE, buf, 64),
                     "NO");
    ck_assert_str_eq(runtime_settings_format(&s, RUNTIME_OPT_USE_CPU, buf, 64), "false");
    ck_assert_str_eq(runtime_settings_format(&s, RUNTIME_OPT_SEED, buf, 64), "42");
    ck_assert_str_eq(runtime_settings_format(&s, RUNTIME_OPT_MAIN_PROCESS_PORT, buf, 64),
                     "29500");
    ck_assert_int_eq(runtime_settings_set(&s, RUNTIME_OPT_USE_CPU, "ON"), CT_OK);
    ck_assert(s.use_cpu);
    ck_assert_int_eq(runtime_settings_set(&s, RUNTIME_OPT_NUM_PROCESSES, "1x"),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID,
                    "num_processes: '1x' is not valid (expected an integer >= 1)");
    ck_assert_int_eq(s.num_processes, 1);
    ck_assert_uint_eq(s.set, 1u << RUNTIME_OPT_USE_CPU);
    ck_assert_int_eq(runtime_settings_set(&s, RUNTIME_OPT_COUNT, "1"), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "no option 12");
    RuntimeOption o;
    ck_assert_int_eq(runtime_option_find("gpu_ids", &o), CT_OK);
    ck_assert_int_eq(o, RUNTIME_OPT_GPU_IDS);
    ck_assert_str_eq(runtime_option_key(RUNTIME_OPT_SEED), "seed");
    ck_assert_ptr_null(runtime_option_key(RUNTIME_OPT_COUNT));
    ck_assert_int_eq(runtime_option_find("gpus", &o), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "unknown option 'gpus'");
}
END_TEST

/* Four distinct valid values per option: api, cli, env, file. Options with
 * fewer names repeat some; the source tells them apart. */
static const char *const layer_values[RUNTIME_OPT_COUNT][4] = {
    [RUNTIME_OPT_DISTRIBUTED_TYPE] = {"MULTI_GPU", "MULTI_CPU", "NO", "MULTI_CPU"},
    [RUNTIME_OPT_NUM_PROCESSES] = {"2", "3", "4", "5"},
    [RUNTIME_OPT_NUM_MACHINES] = {"1", "1", "1", "1"},
    [RUNTIME_OPT_MACHINE_RANK] = {"0", "0", "0", "0"},
    [RUNTIME_OPT_MAIN_PROCESS_IP] = {"h1", "h2", "h3", "h4"},
    [RUNTIME_OPT_MAIN_PROCESS_PORT] = {"1001", "1002", "1003", "1004"},
    [RUNTIME_OPT_HOSTFILE] = {"/a", "/b", "/c", "/d"},
    [RUNTIME_OPT_MIXED_PRECISION] = {"bf16", "fp16", "no", "bf16"},
    [RUNTIME_OPT_GRADIENT_ACCUMULATION_STEPS] = {"2", "3", "4", "5"},
    [RUNTIME_OPT_USE_CPU] = {"true", "false", "true", "false"},
    [RUNTIME_OPT_GPU_IDS] = {"0", "1", "0,1", "2"},
    [RUNTIME_OPT_SEED] = {"11", "12", "13", "14"},
};

/* For every option and every subset of {api, cli, env, file} giving it,
 * the resolved value and source are those of the first layer given. */
START_TEST(precedence_every_option_every_subset)
{
    static const RuntimeSource sources[4] = {
        RUNTIME_SOURCE_API, RUNTIME_SOURCE_COMMAND_LINE, RUNTIME_SOURCE_ENVIRONMENT,
        RUNTIME_SOURCE_CONFIG_FILE};
    for (int opt = 0; opt < RUNTIME_OPT_COUNT; opt++) {
        for (int mask = 0; mask < 16; mask++) {
            RuntimeSettings api, cli, file, out, dflt;
            runtime_settings_default(&api);
            runtime_settings_default(&cli);
            runtime_settings_default(&file);
            runtime_settings_default(&dflt);
            char envvar[96];
            const char *env[2] = {NULL, NULL};
            RuntimeSettings *layers[4] = {&api, &cli, NULL, &file};
            for (int l = 0; l < 4; l++) {
                if (!(mask & (1 << l))) continue;
                if (l == 2) {
                    char name[64];
                    snprintf(name, sizeof name, "CTRAINER_%s",
                             runtime_option_key((RuntimeOption)opt));
                    for (char *c = name; *c; c++)
                        if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 'a' + 'A');
                    snprintf(envvar, sizeof envvar, "%s=%s", name, layer_values[opt][l]);
                    env[0] = envvar;
                } else {
                    ck_assert_int_eq(runtime_settings_set(layers[l], (RuntimeOption)opt,
                                                          layer_values[opt][l]),
                                     CT_OK);
                }
            }
            ck_assert_int_eq(runtime_settings_resolve(&api, &cli, env, &file, &out),
                             CT_OK);
            int first = mask ? __builtin_ctz((unsigned)mask) : -1;
            char got[64], want[64];
            runtime_settings_format(&out, (RuntimeOption)opt, got, sizeof got);
            if (first < 0) {
                runtime_settings_format(&dflt, (RuntimeOption)opt, want, sizeof want);
                ck_assert_int_eq(out.source[opt], RUNTIME_SOURCE_DEFAULT);
                ck_assert_uint_eq(out.set, 0);
            } else {
                snprintf(want, sizeof want, "%s", layer_values[opt][first]);
                ck_assert_int_eq(out.source[opt], sources[first]);
                ck_assert_uint_eq(out.set, 1u << opt);
            }
            ck_assert_msg(strcmp(got, want) == 0, "option %s mask %d: got %s want %s",
                          runtime_option_key((RuntimeOption)opt), mask, got, want);
        }
    }
}
END_TEST

START_TEST(precedence_mixes_options_and_null_layers)
{
    RuntimeSettings cli, file, out;
    runtime_settings_default(&cli);
    runtime_settings_default(&file);
    runtime_settings_set(&cli, RUNTIME_OPT_NUM_PROCESSES, "4");
    runtime_settings_set(&file, RUNTIME_OPT_NUM_PROCESSES, "8");
    runtime_settings_set(&file, RUNTIME_OPT_SEED, "5");
    const char *env[] = {"PATH=/bin", "CTRAINER_SEED=6", "CTRAINER_GPU_IDS=", NULL};
    ck_assert_int_eq(runtime_settings_resolve(NULL, &cli, env, &file, &out), CT_OK);
    ck_assert_int_eq(out.num_processes, 4);
    ck_assert(out.seed == 6);
    ck_assert_str_eq(out.gpu_ids, "all"); /* empty variables are unset */
    ck_assert_str_eq(runtime_source_name(out.source[RUNTIME_OPT_SEED]), "environment");
    ck_assert_str_eq(runtime_source_name(out.source[RUNTIME_OPT_NUM_PROCESSES]),
                     "command line");
    ck_assert_str_eq(runtime_source_name(out.source[RUNTIME_OPT_GPU_IDS]), "default");
    ck_assert_int_eq(runtime_settings_resolve(NULL, NULL, NULL, NULL, &out), CT_OK);
    ck_assert_uint_eq(out.set, 0);
}
END_TEST

START_TEST(environment_and_combination_errors)
{
    RuntimeSettings s, cli, file;
    const char *bad[] = {"CTRAINER_NUM_PROCESSES=two", NULL};
    ck_assert_int_eq(runtime_settings_from_env(bad, &s), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID,
                    "environment variable CTRAINER_NUM_PROCESSES='two' is not "
                    "valid (expected an integer >= 1)");
    ck_assert_int_eq(runtime_settings_resolve(NULL, NULL, bad, NULL, &s), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "CTRAINER_NUM_PROCESSES='two'");
    runtime_settings_default(&cli);
    runtime_settings_default(&file);
    runtime_settings_set(&file, RUNTIME_OPT_NUM_MACHINES, "2");
    runtime_settings_set(&cli, RUNTIME_OPT_MACHINE_RANK, "2");
    ck_assert_int_eq(runtime_settings_resolve(NULL, &cli, NULL, &file, &s),
                     CT_ERR_INVALID);
    tu_assert_error(
        CT_ERR_INVALID,
        "machine_rank 2 (command line) is not below num_machines 2 (config file)");
    runtime_settings_set(&cli, RUNTIME_OPT_MACHINE_RANK, "1");
    runtime_settings_set(&cli, RUNTIME_OPT_NUM_PROCESSES, "3");
    ck_assert_int_eq(runtime_settings_resolve(NULL, &cli, NULL, &file, &s),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID,
                    "num_processes 3 (command line) is the total over all "
                    "machines and must be a multiple of num_machines 2");
    const char *fp16[] = {"CTRAINER_MIXED_PRECISION=fp16", "CTRAINER_USE_CPU=1", NULL};
    ck_assert_int_eq(runtime_settings_resolve(NULL, NULL, fp16, NULL, &s),
                     CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "mixed_precision fp16 (environment) needs a GPU but "
                                    "use_cpu is true (environment)");
}
END_TEST

START_TEST(runtime_create_reads_settings)
{
    setenv("CTRAINER_SEED", "7", 1);
    setenv("CTRAINER_MIXED_PRECISION", "bf16", 1);
    setenv("CTRAINER_GRADIENT_ACCUMULATION_STEPS", "4", 1);
    Runtime *rt = runtime_create(NULL);
    ck_assert_ptr_nonnull(rt);
    ck_assert(runtime_base_seed(rt) == 7);
    ck_assert_str_eq(runtime_mixed_precision(rt), "bf16");
    ck_assert_int_eq(runtime_gradient_accumulation_steps(rt), 4);
    ck_assert_int_eq(runtime_device(rt).type, CT_DEVICE_CPU);
    runtime_free(rt);
    /* arguments beat the environment */
    rt = runtime_create(&(RuntimeArgs){
        .seed = 9, .mixed_precision = "no", .gradient_accumulation_steps = 2});
    ck_assert(runtime_base_seed(rt) == 9);
    ck_assert_str_eq(runtime_mixed_precision(rt), "no");
    ck_assert_int_eq(runtime_gradient_accumulation_steps(rt), 2);
    runtime_free(rt);
    /* errors */
    ck_assert_ptr_null(runtime_create(&(RuntimeArgs){.mixed_precision = "fp8"}));
    tu_assert_error(CT_ERR_INVALID,
                    "runtime_create: mixed_precision 'fp8' is not one of");
    ck_assert_ptr_null(runtime_create(&(RuntimeArgs){.use_cpu = true, .use_cuda = true}));
    tu_assert_error(CT_ERR_INVALID, "use_cuda and use_cpu are both set");
    ck_assert_ptr_null(runtime_create(&(RuntimeArgs){.gradient_accumulation_steps = -1}));
    tu_assert_error(CT_ERR_INVALID, "gradient_accumulation_steps -1 < 0");
    ck_assert_ptr_null(runtime_create(&(RuntimeArgs){.mixed_precision = "fp16"}));
    tu_assert_error(CT_ERR_UNSUPPORTED, "mixed_precision fp16 (argument) needs CUDA");
    setenv("CTRAINER_SEED", "-3", 1);
    ck_assert_ptr_null(runtime_create(NULL));
    tu_assert_error(CT_ERR_INVALID, "CTRAINER_SEED='-3'");
    /* CTRAINER_USE_CPU=false asks for CUDA; use_cpu beats it */
    unsetenv("CTRAINER_SEED");
    unsetenv("CTRAINER_MIXED_PRECISION");
    setenv("CTRAINER_USE_CPU", "false", 1);
    if (ct_cuda_device_count() == 0) {
        ck_assert_ptr_null(runtime_create(NULL));
        tu_assert_error(CT_ERR_DEVICE, "CUDA device(s) are usable");
    }
    rt = runtime_create(&(RuntimeArgs){.use_cpu = true});
    ck_assert_int_eq(runtime_device(rt).type, CT_DEVICE_CPU);
    runtime_free(rt);
    unsetenv("CTRAINER_USE_CPU");
    unsetenv("CTRAINER_GRADIENT_ACCUMULATION_STEPS");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("settings");
    TCase *tc = tcase_create("settings");
    tcase_add_test(tc, set_and_format_values);
    tcase_add_test(tc, precedence_every_option_every_subset);
    tcase_add_test(tc, precedence_mixes_options_and_null_layers);
    tcase_add_test(tc, environment_and_combination_errors);
    tcase_add_test(tc, runtime_create_reads_settings);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
