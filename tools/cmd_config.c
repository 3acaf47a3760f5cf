/* ctrainer config: write a config file, from answers to questions or from
 * what this machine has (--default). Never overwrites without --force. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ctrainer config [--default] [--config_file F] [--force]\n"
            "\n"
            "Asks how runs should be launched and writes the answers to a config file\n"
            "(default: $CTRAINER_CONFIG_FILE or ~/.cache/ctrainer/default_config.yaml).\n"
            "\n"
            "  --default        write the defaults for this machine without asking\n"
            "                   (2+ GPUs: MULTI_GPU on all of them; else one process,\n"
            "                   on the CPU when there is no GPU)\n"
            "  --config_file F  the file to write\n"
            "  --force          overwrite an existing file\n");
}

/* What accelerate's `config default` writes for this machine. */
static void machine_defaults(RuntimeSettings *s, int gpus)
{
    runtime_settings_default(s);
    if (gpus >= 2) {
        s->distributed_type = RUNTIME_DISTRIBUTED_MULTI_GPU;
        s->num_processes = gpus;
    }
    s->use_cpu = gpus == 0;
}

/* Asks one question until the answer is valid; an empty answer (or the end
 * of input) keeps the current value. */
static void ask(RuntimeSettings *s, RuntimeOption opt, const char *question)
{
    for (;;) {
        char cur[RUNTIME_SETTING_MAX + 1], line[RUNTIME_SETTING_MAX + 2];
        runtime_settings_format(s, opt, cur, sizeof cur);
        printf("%s [%s]: ", question, cur[0] ? cur : "none");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) {
            printf("\n");
            return;
        }
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || runtime_settings_set(s, opt, line) == CT_OK) return;
        printf("  %s\n", ct_last_error());
        ct_clear_error();
    }
}

static void ask_all(RuntimeSettings *s)
{
    ask(s, RUNTIME_OPT_DISTRIBUTED_TYPE, "Which kind of run (NO, MULTI_CPU, MULTI_GPU)?");
    if (s->distributed_type != RUNTIME_DISTRIBUTED_NO) {
        ask(s, RUNTIME_OPT_NUM_MACHINES, "How many machines?");
        if (s->num_machines > 1) {
            ask(s, RUNTIME_OPT_HOSTFILE, "mpirun hostfile listing the machines?");
            ask(s, RUNTIME_OPT_MAIN_PROCESS_IP, "Address of the main machine?");
            ask(s, RUNTIME_OPT_MAIN_PROCESS_PORT, "Port on the main machine?");
        }
        ask(s, RUNTIME_OPT_NUM_PROCESSES, "How many processes in total (all machines)?");
    }
    /* MULTI_GPU runs on GPUs, also when written on a machine without any
     * (its default use_cpu is true), and MULTI_CPU on CPUs, also on a
     * machine with GPUs, as accelerate's questionnaire does */
    if (s->distributed_type == RUNTIME_DISTRIBUTED_MULTI_GPU)
        s->use_cpu = false;
    else if (s->distributed_type == RUNTIME_DISTRIBUTED_MULTI_CPU)
        s->use_cpu = true;
    else
        ask(s, RUNTIME_OPT_USE_CPU, "Train on the CPU only (true/false)?");
    if (!s->use_cpu)
        ask(s, RUNTIME_OPT_GPU_IDS, "Which GPUs (all, or a list such as 0,1)?");
    ask(s, RUNTIME_OPT_MIXED_PRECISION, "Mixed precision (no, bf16, fp16)?");
    ask(s, RUNTIME_OPT_GRADIENT_ACCUMULATION_STEPS, "Gradient accumulation steps?");
    ask(s, RUNTIME_OPT_SEED, "Seed?");
}

/* mkdir -p of the directory part of path. */
static bool make_parent_dirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        bool ok = mkdir(path, 0755) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok) {
            fprintf(stderr, "ctrainer config: error: cannot create %.*s: %s\n",
                    (int)(p - path), path, strerror(errno));
            return false;
        }
    }
    return true;
}

int cli_config(int argc, char **argv)
{
    bool dflt = false, force = false;
    const char *given = NULL;
    for (int i = 1; i < argc; i++) {
        bool flag = cli_is(argv[i], "help") || cli_is(argv[i], "default") ||
                    cli_is(argv[i], "force");
        if (flag && cli_flag_has_value("config", argv[i])) return 2;
        if (cli_is(argv[i], "help") || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (cli_is(argv[i], "default")) {
            dflt = true;
        } else if (cli_is(argv[i], "force")) {
            force = true;
        } else if (cli_is(argv[i], "config_file")) {
            if (!(given = cli_value(argc, argv, &i))) return 2;
        } else {
            fprintf(stderr, "ctrainer config: unknown argument %s (see --help)\n",
                    argv[i]);
            return 2;
        }
    }
    char path[RUNTIME_SETTING_MAX + 1];
    bool exists = false;
    if (given) {
        snprintf(path, sizeof path, "%s", given);
        exists = access(path, F_OK) == 0;
    } else if (!cli_config_path(NULL, path, sizeof path, &exists)) {
        return 1;
    }
    if (exists && !force) {
        fprintf(stderr,
                "ctrainer config: %s already exists; pass --force to overwrite it\n",
                path);
        return 1;
    }
    RuntimeHost host;
    (void)runtime_host_probe(&host); /* only the device counts are used */
    ct_clear_error();
    RuntimeSettings s;
    machine_defaults(&s, host.gpu_count);
    if (!dflt) ask_all(&s);
    s.set = (1u << RUNTIME_OPT_COUNT) - 1;
    RuntimeSettings checked;
    if (runtime_settings_resolve(NULL, &s, NULL, NULL, &checked) != CT_OK)
        return cli_fail();
    if (!make_parent_dirs(path)) return 1;
    if (runtime_config_write(path, &s) != CT_OK) return cli_fail();
    printf("ctrainer config saved at %s\n", path);
    return 0;
}
