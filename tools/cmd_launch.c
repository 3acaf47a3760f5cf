/* ctrainer launch: resolve the settings (flags > environment > config file >
 * defaults), print them, and run the program's ranks under mpirun. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

extern char **environ;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: ctrainer launch [options] PROGRAM [ARGS...]\n"
        "\n"
        "Runs PROGRAM on several processes with mpirun. Options come before PROGRAM;\n"
        "everything after it is PROGRAM's. Each option overrides the environment\n"
        "(CTRAINER_<OPTION>), which overrides the config file.\n"
        "\n"
        "  -n, --num_processes N          processes over all machines\n"
        "  --num_machines M               machines (needs --hostfile)\n"
        "  --machine_rank R               this machine's rank (0: mpirun starts all)\n"
        "  --main_process_ip IP           rank 0's host (MASTER_ADDR)\n"
        "  --main_process_port P          rendezvous port (MASTER_PORT)\n"
        "  --hostfile F                   mpirun hostfile listing the machines\n"
        "  --mixed_precision no|bf16|fp16\n"
        "  --gradient_accumulation_steps K\n"
        "  --cpu                          train on CPUs even when GPUs are present\n"
        "                                 (a flag; --use_cpu true|false takes a value)\n"
        "  --gpu_ids all|0,1,...          GPUs to use (CUDA_VISIBLE_DEVICES)\n"
        "  --seed S                       base seed of the run\n"
        "  --distributed_type NO|MULTI_CPU|MULTI_GPU\n"
        "  --config_file F                config file (default: $CTRAINER_CONFIG_FILE "
        "or\n"
        "                                 ~/.cache/ctrainer/default_config.yaml)\n");
}

typedef struct LaunchArgs {
    RuntimeSettings cli;
    const char *config_file;
    int program; /* index of PROGRAM in argv */
} LaunchArgs;

/* Parses the options before PROGRAM. Returns 0, or the exit status. */
static int parse(int argc, char **argv, LaunchArgs *a)
{
    runtime_settings_default(&a->cli);
    a->config_file = NULL;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (cli_is(arg, "help") || strcmp(arg, "-h") == 0) {
            if (cli_flag_has_value("launch", arg)) return 2;
            usage(stdout);
            return -1;
        }
        if (cli_is(arg, "cpu")) { /* a flag: --use_cpu takes true or false */
            if (cli_flag_has_value("launch", arg)) return 2;
            runtime_settings_set(&a->cli, RUNTIME_OPT_USE_CPU, "true");
            continue;
        }
        const char *v;
        if (cli_is(arg, "config_file")) {
            if (!(a->config_file = cli_value(argc, argv, &i))) return 2;
            continue;
        }
        RuntimeOption opt = RUNTIME_OPT_COUNT;
        if (strcmp(arg, "-n") == 0) opt = RUNTIME_OPT_NUM_PROCESSES;
        for (int o = 0; o < RUNTIME_OPT_COUNT && opt == RUNTIME_OPT_COUNT; o++)
            if (cli_is(arg, runtime_option_key((RuntimeOption)o))) opt = (RuntimeOption)o;
        if (opt == RUNTIME_OPT_COUNT) {
            fprintf(stderr, "ctrainer launch: unknown option %s (see --help)\n", arg);
            return 2;
        }
        if (!(v = cli_value(argc, argv, &i))) return 2;
        if (runtime_settings_set(&a->cli, opt, v) != CT_OK) {
            fprintf(stderr, "ctrainer launch: error: --%s\n", ct_last_error());
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "ctrainer launch: no PROGRAM given (see --help)\n");
        return 2;
    }
    a->program = i;
    return 0;
}

static void print_settings(const char *config, bool loaded, const RuntimeSettings *s)
{
    printf("ctrainer launch: config file %s%s\n", config, loaded ? "" : " (none)");
    for (int o = 0; o < RUNTIME_OPT_COUNT; o++) {
        char v[RUNTIME_SETTING_MAX + 1];
        runtime_settings_format(s, (RuntimeOption)o, v, sizeof v);
        printf("  %-28s %s (%s)\n", runtime_option_key((RuntimeOption)o), v[0] ? v : "-",
               runtime_source_name(s->source[o]));
    }
}

int cli_launch(int argc, char **argv)
{
    LaunchArgs a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    char path[RUNTIME_SETTING_MAX + 1];
    bool exists = false;
    if (!cli_config_path(a.config_file, path, sizeof path, &exists)) return 1;
    RuntimeSettings file, s;
    if (exists && runtime_config_load(path, &file) != CT_OK) return cli_fail();
    if (runtime_settings_resolve(NULL, &a.cli, (const char *const *)environ,
                                 exists ? &file : NULL, &s) != CT_OK)
        return cli_fail();
    RuntimeHost host;
    if (runtime_host_probe(&host) != CT_OK) return cli_fail();
    RuntimeCommand cmd;
    if (runtime_launch_command(&s, &host, argv + a.program, argc - a.program, &cmd) !=
        CT_OK)
        return cli_fail();
    print_settings(path, exists, &s);
    char line[64];
    printf("%s\n", runtime_launch_line(s.num_processes, cmd.use_gpus, line, sizeof line));
    int code = 1;
    CtStatus st = runtime_command_run(&cmd, &code);
    runtime_command_free(&cmd);
    return st == CT_OK ? code : cli_fail();
}
