/* The YAML config file: good files, every kind of error with FILE:LINE,
 * writing and reading back, the default path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrainer/ctrainer.h"
#include "testutil.h"

static char dir[64];

static void make_dir(void)
{
    tu_make_temp_dir(dir, sizeof dir, "ct_config");
}

static void remove_dir(void)
{
    tu_remove_dir(dir);
}

/* Writes text to DIR/name and returns the path (static buffer). */
static const char *file_with(const char *name, const char *text)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static unsigned bit(RuntimeOption o)
{
    return 1u << o;
}

START_TEST(load_full_block_file)
{
    const char *p = file_with("full.yaml", "# a comment\n"
                                           "distributed_type: MULTI_CPU\n"
                                           "num_processes: 4\n"
                                           "num_machines: 2\n"
                                           "machine_rank: 1\n"
                                           "main_process_ip: 10.0.0.1\n"
                                           "main_process_port: 29600\n"
                                           "hostfile: /etc/hosts.mpi\n"
                                           "mixed_precision: bf16\n"
                                           "gradient_accumulation_steps: 3\n"
                                           "use_cpu: yes\n"
                                           "gpu_ids: 0,1\n"
                                           "seed: 18446744073709551615\n");
    RuntimeSettings s;
    ck_assert_int_eq(runtime_config_load(p, &s), CT_OK);
    ck_assert_int_eq(s.distributed_type, RUNTIME_DISTRIBUTED_MULTI_CPU);
    ck_assert_int_eq(s.num_processes, 4);
    ck_assert_int_eq(s.num_machines, 2);
    ck_assert_int_eq(s.machine_rank, 1);
    ck_assert_str_eq(s.main_process_ip, "10.0.0.1");
    ck_assert_int_eq(s.main_process_port, 29600);
    ck_assert_str_eq(s.hostfile, "/etc/hosts.mpi");
    ck_assert_str_eq(s.mixed_precision, "bf16");
    ck_assert_int_eq(s.gradient_accumulation_steps, 3);
    ck_assert(s.use_cpu);
    ck_assert_str_eq(s.gpu_ids, "0,1");
    ck_assert(s.seed == UINT64_MAX);
    ck_assert_uint_eq(s.set, (1u << RUNTIME_OPT_COUNT) - 1);
}
END_TEST

START_TEST(load_partial_flow_and_empty_files)
{
    /* JSON (what accelerate's basic writer produces), quoted 'no' */
    const char *p =
        file_with("flow.yaml", "{\"distributed_type\": \"NO\",\n"
                               " \"mixed_precision\": 'no', \"use_cpu\": true}\n");
    RuntimeSettings s;
    ck_assert_int_eq(runtime_config_load(p, &s), CT_OK);
    ck_assert_int_eq(s.distributed_type, RUNTIME_DISTRIBUTED_NO);
    ck_assert_str_eq(s.mixed_precision, "no");
    ck_assert(s.use_cpu);
    ck_assert_uint_eq(s.set, bit(RUNTIME_OPT_DISTRIBUTED_TYPE) |
                                 bit(RUNTIME_OPT_MIXED_PRECISION) |
                                 bit(RUNTIME_OPT_USE_CPU));
    /* unset options keep their defaults */
    ck_assert_int_eq(s.num_processes, 1);
    ck_assert_int_eq(s.main_process_port, RUNTIME_DEFAULT_PORT);
    ck_assert_str_eq(s.gpu_ids, "all");
    ck_assert(s.seed == RUNTIME_DEFAULT_SEED);
    /* bare no (a boolean in YAML 1.1) is the string "no" here */
    p = file_with("bare.yaml", "mixed_precision: no\nuse_cpu: off\n");
    ck_assert_int_eq(runtime_config_load(p, &s), CT_OK);
    ck_assert_str_eq(s.mixed_precision, "no");
    ck_assert(!s.use_cpu);
    ck_assert_uint_eq(s.set, bit(RUNTIME_OPT_MIXED_PRECISION) | bit(RUNTIME_OPT_USE_CPU));
    p = file_with("empty.yaml", "# nothing set\n");
    ck_assert_int_eq(runtime_config_load(p, &s), CT_OK);
    ck_assert_uint_eq(s.set, 0);
    ck_assert_int_eq(s.num_processes, 1);
}
END_TEST

/* A YAML null (null, ~, no value) is an absent key, for every key: not the
 * string "null" passed on as an address or a hostfile. */
START_TEST(load_null_values_as_absent)
{
    const char *p = file_with("null.yaml", "main_process_ip: null\n"
                                           "hostfile: ~\n"
                                           "num_processes:\n"
                                           "gpu_ids: NULL\n"
                                           "mixed_precision: Null\n"
                                           "main_process_port: ''\n"
                                           "seed: 5\n");
    RuntimeSettings s;
    ck_assert_msg(runtime_config_load(p, &s) == CT_OK, "%s", ct_last_error());
    ck_assert_uint_eq(s.set, bit(RUNTIME_OPT_SEED));
    ck_assert_str_eq(s.main_process_ip, "");
    ck_assert_str_eq(s.hostfile, "");
    ck_assert_int_eq(s.num_processes, 1);
    ck_assert_str_eq(s.gpu_ids, "all");
    ck_assert_str_eq(s.mixed_precision, "no");
    ck_assert_int_eq(s.main_process_port, RUNTIME_DEFAULT_PORT);
    ck_assert(s.seed == 5);
    /* null does not hide a repeated key */
    p = file_with("twice.yaml", "hostfile: ~\nhostfile: /h\n");
    ck_assert_int_eq(runtime_config_load(p, &s), CT_ERR_FORMAT);
    tu_assert_error(CT_ERR_FORMAT, "twice.yaml:2: key 'hostfile' is given twice");
}
END_TEST

typedef struct BadFile {
    const char *text;
    const char *message; /* after "PATH:" */
} BadFile;

static const BadFile bad_files[] = {
    /* unknown keys */
    {"num_processes: 2\n\nnum_proceses: 3\n",
     "3: unknown key 'num_proceses' (known keys: distributed_type, num_processes"},
    {"{\"seed\": 1,\n \"compute_environment\": \"LOCAL_MACHINE\"}\n",
     "2: unknown key 'compute_environment'"},
    /* a repeated key */
    {"seed: 1\nnum_processes: 2\nnum_processes: 3\n",
     "3: key 'num_processes' is given twice (first on line 2)"},
    /* wrong types (libcyaml rejects them) */
    {"distributed_type: NO\nnum_processes: abc\n",
     "2: num_processes: 'abc' is not valid (expected an integer >= 1)"},
    {"num_machines: 1.5\n",
     "1: num_machines: '1.5' is not valid (expected an integer >= 1)"},
    {"seed: -1\n", "1: seed: '-1' is not valid (expected an unsigned 64-bit integer)"},
    {"use_cpu: true\ngpu_ids:\n  - 0\n  - 1\n",
     "3: gpu_ids: a sequence is not valid (expected all, or a comma list"},
    {"mixed_precision: {a: 1}\n", "1: mixed_precision: a mapping is not valid"},
    {"main_process_port: 99999999999\n",
     "1: main_process_port: '99999999999' is not valid"},
    /* bad values (the option table rejects them) */
    {"seed: 3\nnum_processes: 0\n",
     "2: num_processes: '0' is not valid (expected an integer >= 1)"},
    {"main_process_port: 70000\n",
     "1: main_process_port: '70000' is not valid (expected a port number in 1..65535)"},
    {"distributed_type: MULTI_TPU\n",
     "1: distributed_type: 'MULTI_TPU' is not valid (expected one of NO, MULTI_CPU, "
     "MULTI_GPU)"},
    {"distributed_type: no\n", "1: distributed_type: 'no' is not valid"},
    {"mixed_precision: fp8\n",
     "1: mixed_precision: 'fp8' is not valid (expected one of no, bf16, fp16)"},
    {"\n\nuse_cpu: maybe\n", "3: use_cpu: 'maybe' is not valid (expected true or false"},
    {"gpu_ids: 0,,1\n", "1: gpu_ids: '0,,1' is not valid"},
    {"main_process_ip: a b\n", "1: main_process_ip: 'a b' is not valid"},
    {"gradient_accumulation_steps: -2\n",
     "1: gradient_accumulation_steps: '-2' is not valid"},
    {"num_machines: 2\nmachine_rank: 2\n",
     "2: machine_rank 2 is not below num_machines 2"},
    /* not YAML, or not a mapping */
    {"num_processes: 2\n  bad indent: 3\n",
     "2: YAML syntax error: mapping values are not "
     "allowed in this context"},
    {"seed: [1\n", "2: YAML syntax error"},
    {"- num_processes\n", "1: expected a mapping of keys to values at the top level"},
    {"just a string\n", "1: expected a mapping of keys to values at the top level"},
    /* a second document would be ignored (PyYAML's safe_load refuses it too) */
    {"---\nnum_processes: 2\n---\nnum_processes: 3\n",
     "3: a second YAML document ('---'): a config file holds one"},
    {"num_processes: 2\n...\n--- {seed: 1}\n", "3: a second YAML document"},
};

START_TEST(load_errors_name_file_and_line)
{
    const BadFile *b = &bad_files[_i];
    const char *p = file_with("bad.yaml", b->text);
    char want[512];
    snprintf(want, sizeof want, "%s:%s", p, b->message);
    RuntimeSettings s;
    ck_assert_int_eq(runtime_config_load(p, &s), CT_ERR_FORMAT);
    ck_assert_msg(strstr(ct_last_error(), want), "case %d: got '%s', want '%s'", _i,
                  ct_last_error(), want);
    ct_clear_error();
}
END_TEST

START_TEST(load_missing_file)
{
    RuntimeSettings s;
    char p[128];
    snprintf(p, sizeof p, "%s/none.yaml", dir);
    ck_assert_int_eq(runtime_config_load(p, &s), CT_ERR_IO);
    tu_assert_error(CT_ERR_IO, "none.yaml: No such file or directory");
    ck_assert_int_eq(runtime_config_load(NULL, &s), CT_ERR_NULL);
    ct_clear_error();
}
END_TEST

START_TEST(write_then_load_round_trip)
{
    RuntimeSettings s, back;
    runtime_settings_default(&s);
    ck_assert_int_eq(runtime_settings_set(&s, RUNTIME_OPT_DISTRIBUTED_TYPE, "MULTI_CPU"),
                     CT_OK);
    ck_assert_int_eq(runtime_settings_set(&s, RUNTIME_OPT_NUM_PROCESSES, "6"), CT_OK);
    ck_assert_int_eq(runtime_settings_set(&s, RUNTIME_OPT_MIXED_PRECISION, "no"), CT_OK);
    ck_assert_int_eq(runtime_settings_set(&s, RUNTIME_OPT_USE_CPU, "true"), CT_OK);
    ck_assert_int_eq(runtime_settings_set(&s, RUNTIME_OPT_SEED, "7"), CT_OK);
    ck_assert_int_eq(runtime_settings_set(&s, RUNTIME_OPT_HOSTFILE, "/h/f"), CT_OK);
    char p[128];
    snprintf(p, sizeof p, "%s/written.yaml", dir);
    ck_assert_int_eq(runtime_config_write(p, &s), CT_OK);
    ck_assert_int_eq(runtime_config_load(p, &back), CT_OK);
    ck_assert_int_eq(back.distributed_type, RUNTIME_DISTRIBUTED_MULTI_CPU);
    ck_assert_int_eq(back.num_processes, 6);
    ck_assert_str_eq(back.mixed_precision, "no");
    ck_assert(back.use_cpu);
    ck_assert(back.seed == 7);
    ck_assert_str_eq(back.hostfile, "/h/f");
    ck_assert_str_eq(back.main_process_ip, "");
    /* every option but the empty ones is written */
    ck_assert_uint_eq(back.set, ((1u << RUNTIME_OPT_COUNT) - 1) &
                                    ~bit(RUNTIME_OPT_MAIN_PROCESS_IP));
    ck_assert_int_eq(access(strcat(p, ".tmp"), F_OK), -1); /* the temporary is gone */
    snprintf(p, sizeof p, "%s/no/such/dir.yaml", dir);
    ck_assert_int_eq(runtime_config_write(p, &s), CT_ERR_IO);
    tu_assert_error(CT_ERR_IO, "writing config file");
}
END_TEST

START_TEST(default_path)
{
    char buf[256];
    const char *home = getenv("HOME");
    char saved[256] = "";
    if (home) snprintf(saved, sizeof saved, "%s", home);
    setenv("CTRAINER_CONFIG_FILE", "/x/y.yaml", 1);
    ck_assert_int_eq(runtime_config_default_path(buf, sizeof buf), CT_OK);
    ck_assert_str_eq(buf, "/x/y.yaml");
    unsetenv("CTRAINER_CONFIG_FILE");
    setenv("HOME", "/home/u", 1);
    ck_assert_int_eq(runtime_config_default_path(buf, sizeof buf), CT_OK);
    ck_assert_str_eq(buf, "/home/u/.cache/ctrainer/default_config.yaml");
    ck_assert_int_eq(runtime_config_default_path(buf, 8), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "does not fit in 8 bytes");
    unsetenv("HOME");
    ck_assert_int_eq(runtime_config_default_path(buf, sizeof buf), CT_ERR_INVALID);
    tu_assert_error(CT_ERR_INVALID, "neither CTRAINER_CONFIG_FILE nor HOME is set");
    if (saved[0]) setenv("HOME", saved, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_checked_fixture(tc, make_dir, remove_dir);
    tcase_add_test(tc, load_full_block_file);
    tcase_add_test(tc, load_partial_flow_and_empty_files);
    tcase_add_test(tc, load_null_values_as_absent);
    tcase_add_loop_test(tc, load_errors_name_file_and_line, 0,
                        (int)(sizeof bad_files / sizeof *bad_files));
    tcase_add_test(tc, load_missing_file);
    tcase_add_test(tc, write_then_load_round_trip);
    tcase_add_test(tc, default_path);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
