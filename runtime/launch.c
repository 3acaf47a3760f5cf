/* Launching ranks with mpirun: probing the machine, building the command
 * (a pure function), running it, and the in-program launcher. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "settings_internal.h"

/* ---------------------------------------------------------------- probing */

static int count_gpus(void)
{
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static int count_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* An executable named `name` in a directory of PATH, into buf. */
static bool find_on_path(const char *name, char *buf, size_t size)
{
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t len = strcspn(path, ":");
        if (len > 0 &&
            (size_t)snprintf(buf, size, "%.*s/%s", (int)len, path, name) < size &&
            access(buf, X_OK) == 0)
            return true;
        path += len + (path[len] == ':');
    }
    return false;
}

extern char **environ;

/* Whether the variable `name=...` of environ is one every rank gets. */
static bool forwarded(const char *var)
{
    static const char *const prefixes[] = {"CTRAINER_", "NCCL_", "CUDA_VISIBLE_DEVICES="};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (!strncmp(var, prefixes[i], strlen(prefixes[i]))) return true;
    return false;
}

static void probe_env(RuntimeHost *h)
{
    int n = 0;
    for (char **e = environ; *e && n < RUNTIME_MAX_FORWARD_ENV; e++) {
        size_t len = strcspn(*e, "=");
        if (forwarded(*e) && len < RUNTIME_ENV_NAME_MAX)
            snprintf(h->forward_env[n++], RUNTIME_ENV_NAME_MAX, "%.*s", (int)len, *e);
    }
}

CtStatus runtime_host_probe(RuntimeHost *h)
{
    if (!h) return ct_error(CT_ERR_NULL, "runtime_host_probe: NULL host");
    *h = (RuntimeHost){.cpu_count = count_cpus(),
                       .gpu_count = count_gpus(),
                       .is_root = geteuid() == 0,
                       .stdout_tty = isatty(STDOUT_FILENO) == 1};
    probe_env(h);
    if (find_on_path("mpirun", h->mpirun, sizeof h->mpirun)) return CT_OK;
#ifdef CTRAINER_MPIEXEC
    if (access(CTRAINER_MPIEXEC, X_OK) == 0) {
        snprintf(h->mpirun, sizeof h->mpirun, "%s", CTRAINER_MPIEXEC);
        return CT_OK;
    }
#endif
    h->mpirun[0] = '\0';
    return ct_error(CT_ERR_UNSUPPORTED,
                    "mpirun was not found on PATH; install Open MPI "
                    "(scripts/install-deps.sh) or add its bin directory to PATH");
}

/* ---------------------------------------------------------------- command */

/* argv under construction; a failed append leaves `oom` set. */
typedef struct Argv {
    char **v;
    int n, cap;
    bool oom;
} Argv;

static void argv_add(Argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void argv_add(Argv *a, const char *fmt, ...)
{
    if (a->oom) return;
    if (a->n + 2 > a->cap) {
        int cap = a->cap ? 2 * a->cap : 32;
        char **v = realloc(a->v, (size_t)cap * sizeof *v);
        if (!v) {
            a->oom = true;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = malloc((size_t)len + 1);
    if (!s) {
        a->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);
    a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

/* The GPUs gpu_ids lists (comma-separated); 0 for "all". */
static int gpu_ids_count(const char *ids)
{
    if (!strcmp(ids, "all")) return 0;
    int n = 1;
    for (const char *c = ids; *c; c++) n += *c == ',';
    return n;
}

/* The combinations mpirun cannot start, or that cannot work on h. */
static CtStatus check_launch(const RuntimeSettings *s, const RuntimeHost *h,
                             bool use_gpus, int per_machine)
{
    if (s->num_machines > 1 && !s->hostfile[0])
        return ct_error(
            CT_ERR_INVALID,
            "launch: num_machines is %d but no hostfile is given; mpirun starts "
            "every machine's ranks from this one, so list the machines in a "
            "hostfile (one 'HOST slots=N' line each) and pass --hostfile",
            s->num_machines);
    if (s->num_machines > 1 && s->machine_rank != 0)
        return ct_error(
            CT_ERR_INVALID,
            "launch: machine_rank is %d; with mpirun the whole job is started "
            "from machine 0 (it reaches the others through the hostfile), so run "
            "the launch there only",
            s->machine_rank);
    if (s->distributed_type == RUNTIME_DISTRIBUTED_MULTI_GPU && !use_gpus)
        return ct_error(CT_ERR_INVALID, "launch: distributed_type is MULTI_GPU but %s",
                        s->use_cpu ? "use_cpu is true" : "this machine has no GPU");
    if (use_gpus && per_machine > h->gpu_count)
        return ct_error(
            CT_ERR_INVALID,
            "launch: %d ranks per machine need one GPU each but this machine has "
            "%d (use --cpu to train on CPUs)",
            per_machine, h->gpu_count);
    int listed = gpu_ids_count(s->gpu_ids);
    if (use_gpus && listed > 0 && per_machine > listed)
        return ct_error(CT_ERR_INVALID,
                        "launch: %d ranks per machine need one GPU each but gpu_ids "
                        "lists %d (%s)",
                        per_machine, listed, s->gpu_ids);
    return CT_OK;
}

/* Whether a already holds an entry NAME=VALUE. */
static bool argv_sets(const Argv *a, const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; i < a->n; i++)
        if (!strncmp(a->v[i], name, len) && a->v[i][len] == '=') return true;
    return false;
}

static void add_worker_env(Argv *a, const RuntimeSettings *s, const RuntimeHost *h,
                           bool use_gpus, int per_machine)
{
    int threads = h->cpu_count / per_machine;
    argv_add(a, "-x");
    argv_add(a, "OMP_NUM_THREADS=%d", threads > 1 ? threads : 1);
    static const RuntimeOption passed[] = {RUNTIME_OPT_MIXED_PRECISION,
                                           RUNTIME_OPT_GRADIENT_ACCUMULATION_STEPS,
                                           RUNTIME_OPT_SEED};
    char name[64], value[RUNTIME_SETTING_MAX + 1];
    for (size_t i = 0; i < sizeof passed / sizeof *passed; i++) {
        argv_add(a, "-x");
        argv_add(a, "%s=%s", runtime_option_env_name(passed[i], name),
                 runtime_settings_format(s, passed[i], value, sizeof value));
    }
    argv_add(a, "-x");
    argv_add(a, "CTRAINER_USE_CPU=%s", use_gpus ? "false" : "true");
    argv_add(a, "-x");
    argv_add(a, "CTRAINER_STDOUT_TTY=%d", h->stdout_tty ? 1 : 0);
    argv_add(a, "-x");
    argv_add(a, "MASTER_ADDR=%s",
             s->main_process_ip[0] ? s->main_process_ip : "127.0.0.1");
    argv_add(a, "-x");
    argv_add(a, "MASTER_PORT=%d", s->main_process_port);
    if (use_gpus && strcmp(s->gpu_ids, "all") != 0) {
        argv_add(a, "-x");
        argv_add(a, "CUDA_VISIBLE_DEVICES=%s", s->gpu_ids);
    }
    /* the caller's own, as they are, unless set above */
    for (int i = 0; i < RUNTIME_MAX_FORWARD_ENV && h->forward_env[i][0]; i++) {
        if (argv_sets(a, h->forward_env[i])) continue;
        argv_add(a, "-x");
        argv_add(a, "%s", h->forward_env[i]);
    }
}

CtStatus runtime_launch_command(const RuntimeSettings *s, const RuntimeHost *h,
                                char *const *prog, int nprog, RuntimeCommand *out)
{
    if (!s || !h || !out)
        return ct_error(CT_ERR_NULL, "runtime_launch_command: NULL argument");
    *out = (RuntimeCommand){0};
    if (!prog || nprog < 1 || !prog[0] || !prog[0][0])
        return ct_error(CT_ERR_INVALID, "launch: no program to run");
    if (!h->mpirun[0]) return ct_error(CT_ERR_INVALID, "launch: no mpirun path");
    int per_machine = s->num_processes / s->num_machines;
    /* MULTI_CPU means CPU ranks, as accelerate's use_cpu for it */
    bool use_gpus = !s->use_cpu && s->distributed_type != RUNTIME_DISTRIBUTED_MULTI_CPU &&
                    h->gpu_count > 0;
    CtStatus st = check_launch(s, h, use_gpus, per_machine);
    if (st != CT_OK) return st;
    Argv a = {0};
    argv_add(&a, "%s", h->mpirun);
    if (h->is_root) argv_add(&a, "--allow-run-as-root");
    if (s->num_machines == 1 && s->num_processes > h->cpu_count)
        argv_add(&a, "--oversubscribe");
    argv_add(&a, "-np");
    argv_add(&a, "%d", s->num_processes);
    if (s->hostfile[0]) {
        argv_add(&a, "--hostfile");
        argv_add(&a, "%s", s->hostfile);
        argv_add(&a, "--npernode");
        argv_add(&a, "%d", per_machine);
    }
    argv_add(&a, "--bind-to");
    argv_add(&a, "none");
    add_worker_env(&a, s, h, use_gpus, per_machine);
    for (int i = 0; i < nprog; i++) argv_add(&a, "%s", prog[i]);
    *out = (RuntimeCommand){.argc = a.n, .argv = a.v, .use_gpus = use_gpus};
    if (!a.oom) return CT_OK;
    runtime_command_free(out);
    return ct_error(CT_ERR_OOM, "launch: out of memory");
}

void runtime_command_free(RuntimeCommand *cmd)
{
    if (!cmd) return;
    for (int i = 0; i < cmd->argc; i++) free(cmd->argv[i]);
    free(cmd->argv);
    *cmd = (RuntimeCommand){0};
}

const char *runtime_launch_line(int num_processes, bool use_gpus, char *buf, size_t size)
{
    snprintf(buf, size, "Launching training on %d %s%s.", num_processes,
             use_gpus ? "GPU" : "CPU", num_processes == 1 ? "" : "s");
    return buf;
}

CtStatus runtime_command_run(const RuntimeCommand *cmd, int *exit_code)
{
    if (!cmd || !cmd->argv || !exit_code)
        return ct_error(CT_ERR_NULL, "runtime_command_run: NULL argument");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return ct_error(CT_ERR_IO, "starting %s: %s", cmd->argv[0], strerror(errno));
    if (pid == 0) {
        execv(cmd->argv[0], cmd->argv);
        fprintf(stderr, "ctrainer: cannot run %s: %s\n", cmd->argv[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return ct_error(CT_ERR_IO, "waiting for %s: %s", cmd->argv[0],
                            strerror(errno));
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return CT_OK;
}

/* ------------------------------------------------------- runtime_launch */

bool runtime_is_launched_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return true;
    }
    return false;
}

/* The arguments of this process (/proc/self/cmdline), argv[0] replaced by
 * the resolved path of the executable. */
static CtStatus self_command(Argv *a)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return ct_error(CT_ERR_IO, "runtime_launch: /proc/self/exe: %s", strerror(errno));
    exe[n] = '\0';
    argv_add(a, "%s", exe);
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f)
        return ct_error(CT_ERR_IO, "runtime_launch: /proc/self/cmdline: %s",
                        strerror(errno));
    char arg[4096];
    size_t len = 0;
    int index = 0;
    for (int c; (c = fgetc(f)) != EOF;) {
        if (len < sizeof arg - 1) arg[len++] = (char)c;
        if (c != '\0') continue;
        arg[len - 1] = '\0';
        if (index++ > 0) argv_add(a, "%s", arg);
        len = 0;
    }
    fclose(f);
    return a->oom ? ct_error(CT_ERR_OOM, "runtime_launch: out of memory") : CT_OK;
}

static CtStatus run_here(int (*fn)(void *), void *user)
{
    int r = fn(user);
    if (r == 0) return CT_OK;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = getenv("RANK");
    return ct_error(CT_ERR_STATE,
                    "runtime_launch: the training function returned %d on rank %s", r,
                    rank ? rank : "0");
}

static CtStatus launch_ranks(const RuntimeSettings *s)
{
    RuntimeHost h;
    CtStatus st = runtime_host_probe(&h);
    if (st != CT_OK) return st;
    Argv prog = {0};
    st = self_command(&prog);
    RuntimeCommand cmd = {0};
    if (st == CT_OK) st = runtime_launch_command(s, &h, prog.v, prog.n, &cmd);
    for (int i = 0; i < prog.n; i++) free(prog.v[i]);
    free(prog.v);
    if (st != CT_OK) return st;
    char line[64];
    printf("%s\n",
           runtime_launch_line(s->num_processes, cmd.use_gpus, line, sizeof line));
    int code = 0;
    st = runtime_command_run(&cmd, &code);
    runtime_command_free(&cmd);
    if (st == CT_OK && code != 0)
        st = ct_error(CT_ERR_STATE, "runtime_launch: mpirun exited with status %d", code);
    return st;
}

CtStatus runtime_launch(int (*fn)(void *user), void *user, int num_processes)
{
    if (!fn) return ct_error(CT_ERR_NULL, "runtime_launch: NULL function");
    if (num_processes < 1)
        return ct_error(CT_ERR_INVALID, "runtime_launch: num_processes %d < 1",
                        num_processes);
    if (runtime_is_launched_rank()) return run_here(fn, user);
    if (ct_cuda_initialized())
        return ct_error(CT_ERR_STATE,
                        "runtime_launch: this process already used a CUDA device; "
                        "create runtimes and tensors inside the launched function only");
    RuntimeSettings api, s;
    runtime_settings_default(&api);
    api.num_processes = num_processes;
    api.set = 1u << RUNTIME_OPT_NUM_PROCESSES;
    CtStatus st =
        runtime_settings_resolve(&api, NULL, (const char *const *)environ, NULL, &s);
    if (st != CT_OK) return st;
    if (num_processes == 1) {
        char line[64];
        bool gpu = !s.use_cpu && s.source[RUNTIME_OPT_USE_CPU] != RUNTIME_SOURCE_DEFAULT;
        printf("%s\n",
               runtime_launch_line(1, gpu && count_gpus() > 0, line, sizeof line));
        return run_here(fn, user);
    }
    return launch_ranks(&s);
}
