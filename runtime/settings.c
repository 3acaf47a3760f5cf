/* Run settings: the option table, parsing and formatting of values, the
 * CTRAINER_* environment and the precedence rule. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "settings_internal.h"

static const char *const distributed_names[] = {"NO", "MULTI_CPU", "MULTI_GPU"};
static const char *const precision_names[] = {"no", "bf16", "fp16"};

const RuntimeOptionInfo runtime_options[RUNTIME_OPT_COUNT] = {
    [RUNTIME_OPT_DISTRIBUTED_TYPE] = {"distributed_type", RUNTIME_KIND_ENUM, 0, 0,
                                      "one of NO, MULTI_CPU, MULTI_GPU"},
    [RUNTIME_OPT_NUM_PROCESSES] = {"num_processes", RUNTIME_KIND_INT, 1, 1 << 20,
                                   "an integer >= 1"},
    [RUNTIME_OPT_NUM_MACHINES] = {"num_machines", RUNTIME_KIND_INT, 1, 1 << 20,
                                  "an integer >= 1"},
    [RUNTIME_OPT_MACHINE_RANK] = {"machine_rank", RUNTIME_KIND_INT, 0, 1 << 20,
                                  "an integer >= 0"},
    [RUNTIME_OPT_MAIN_PROCESS_IP] = {"main_process_ip", RUNTIME_KIND_WORD, 0, 0,
                                     "a host name or address"},
    [RUNTIME_OPT_MAIN_PROCESS_PORT] = {"main_process_port", RUNTIME_KIND_INT, 1, 65535,
                                       "a port number in 1..65535"},
    [RUNTIME_OPT_HOSTFILE] = {"hostfile", RUNTIME_KIND_WORD, 0, 0, "a file path"},
    [RUNTIME_OPT_MIXED_PRECISION] = {"mixed_precision", RUNTIME_KIND_ENUM, 0, 0,
                                     "one of no, bf16, fp16"},
    [RUNTIME_OPT_GRADIENT_ACCUMULATION_STEPS] = {"gradient_accumulation_steps",
                                                 RUNTIME_KIND_INT, 1, 1 << 20,
                                                 "an integer >= 1"},
    [RUNTIME_OPT_USE_CPU] = {"use_cpu", RUNTIME_KIND_BOOL, 0, 0,
                             "true or false (yes/no, on/off, 1/0)"},
    [RUNTIME_OPT_GPU_IDS] = {"gpu_ids", RUNTIME_KIND_GPU_IDS, 0, 0,
                             "all, or a comma list of GPU indices such as 0,1"},
    [RUNTIME_OPT_SEED] = {"seed", RUNTIME_KIND_U64, 0, 0, "an unsigned 64-bit integer"},
};

void runtime_settings_default(RuntimeSettings *s)
{
    *s = (RuntimeSettings){
        .distributed_type = RUNTIME_DISTRIBUTED_NO,
        .num_processes = 1,
        .num_machines = 1,
        .main_process_port = RUNTIME_DEFAULT_PORT,
        .mixed_precision = "no",
        .gradient_accumulation_steps = 1,
        .gpu_ids = "all",
        .seed = RUNTIME_DEFAULT_SEED,
    };
}

const char *runtime_option_key(RuntimeOption opt)
{
    return (unsigned)opt < RUNTIME_OPT_COUNT ? runtime_options[opt].key : NULL;
}

CtStatus runtime_option_find(const char *key, RuntimeOption *opt)
{
    for (int i = 0; key && i < RUNTIME_OPT_COUNT; i++)
        if (strcmp(runtime_options[i].key, key) == 0) {
            *opt = (RuntimeOption)i;
            return CT_OK;
        }
    return ct_error(CT_ERR_INVALID, "unknown option '%s'", key ? key : "(null)");
}

const char *runtime_source_name(RuntimeSource src)
{
    switch (src) {
    case RUNTIME_SOURCE_DEFAULT: return "default";
    case RUNTIME_SOURCE_CONFIG_FILE: return "config file";
    case RUNTIME_SOURCE_ENVIRONMENT: return "environment";
    case RUNTIME_SOURCE_COMMAND_LINE: return "command line";
    case RUNTIME_SOURCE_API: return "argument";
    }
    return "unknown";
}

static int find_name(const char *const *names, int n, const char *v)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], v) == 0) return i;
    return -1;
}

static bool parse_long(const char *v, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || errno || *end || x < lo || x > hi) return false;
    *out = x;
    return true;
}

static bool parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) return *out = true, true;
        if (strcasecmp(v, no[i]) == 0) return *out = false, true;
    }
    return false;
}

/* "all" or "N[,N...]" with N decimal indices. */
static bool valid_gpu_ids(const char *v)
{
    if (strcmp(v, "all") == 0) return true;
    bool digit = false;
    for (const char *p = v;; p++) {
        if (isdigit((unsigned char)*p)) {
            digit = true;
        } else if ((*p == ',' || !*p) && digit) {
            if (!*p) return true;
            digit = false;
        } else {
            return false;
        }
    }
}

static bool valid_word(const char *v)
{
    if (!*v || strlen(v) > RUNTIME_SETTING_MAX) return false;
    for (const char *p = v; *p; p++)
        if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p)) return false;
    return true;
}

static bool parse_u64(const char *v, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    if (!isdigit((unsigned char)*v)) return false;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end) return false;
    *out = (uint64_t)x;
    return true;
}

static int *int_field(RuntimeSettings *s, RuntimeOption opt)
{
    switch (opt) {
    case RUNTIME_OPT_NUM_PROCESSES: return &s->num_processes;
    case RUNTIME_OPT_NUM_MACHINES: return &s->num_machines;
    case RUNTIME_OPT_MACHINE_RANK: return &s->machine_rank;
    case RUNTIME_OPT_MAIN_PROCESS_PORT: return &s->main_process_port;
    case RUNTIME_OPT_GRADIENT_ACCUMULATION_STEPS: return &s->gradient_accumulation_steps;
    default: return NULL;
    }
}

/* The string field of opt and its size, or NULL. */
static char *str_field(RuntimeSettings *s, RuntimeOption opt, size_t *size)
{
    switch (opt) {
    case RUNTIME_OPT_MAIN_PROCESS_IP:
        *size = sizeof s->main_process_ip;
        return s->main_process_ip;
    case RUNTIME_OPT_HOSTFILE: *size = sizeof s->hostfile; return s->hostfile;
    case RUNTIME_OPT_MIXED_PRECISION:
        *size = sizeof s->mixed_precision;
        return s->mixed_precision;
    case RUNTIME_OPT_GPU_IDS: *size = sizeof s->gpu_ids; return s->gpu_ids;
    default: return NULL;
    }
}

/* Parses v into opt of s; false (s unchanged) when v is not valid. */
static bool parse_value(RuntimeSettings *s, RuntimeOption opt, const char *v)
{
    const RuntimeOptionInfo *o = &runtime_options[opt];
    long x;
    int e;
    switch (o->kind) {
    case RUNTIME_KIND_INT:
        if (!parse_long(v, o->lo, o->hi, &x)) return false;
        *int_field(s, opt) = (int)x;
        return true;
    case RUNTIME_KIND_BOOL: return parse_bool(v, &s->use_cpu);
    case RUNTIME_KIND_U64: return parse_u64(v, &s->seed);
    case RUNTIME_KIND_ENUM:
        if (opt == RUNTIME_OPT_DISTRIBUTED_TYPE) {
            e = find_name(distributed_names, 3, v);
            if (e >= 0) s->distributed_type = (RuntimeDistributedType)e;
            return e >= 0;
        }
        if (find_name(precision_names, 3, v) < 0) return false;
        break;
    case RUNTIME_KIND_GPU_IDS:
        if (!valid_gpu_ids(v) || strlen(v) > RUNTIME_SETTING_MAX) return false;
        break;
    case RUNTIME_KIND_WORD:
        if (!valid_word(v)) return false;
        break;
    }
    size_t size = 0;
    char *dst = str_field(s, opt, &size);
    snprintf(dst, size, "%s", v);
    return true;
}

CtStatus runtime_settings_set(RuntimeSettings *s, RuntimeOption opt, const char *value)
{
    if (!s || !value) return ct_error(CT_ERR_NULL, "runtime_settings_set: NULL argument");
    if ((unsigned)opt >= RUNTIME_OPT_COUNT)
        return ct_error(CT_ERR_INVALID, "runtime_settings_set: no option %d", (int)opt);
    const RuntimeOptionInfo *o = &runtime_options[opt];
    if (!parse_value(s, opt, value))
        return ct_error(CT_ERR_INVALID, "%s: '%s' is not valid (expected %s)", o->key,
                        value, o->expects);
    s->set |= 1u << opt;
    return CT_OK;
}

const char *runtime_settings_format(const RuntimeSettings *s, RuntimeOption opt,
                                    char *buf, size_t size)
{
    RuntimeSettings *m = (RuntimeSettings *)s; /* the field getters do not write */
    if (size == 0) return buf;
    buf[0] = '\0';
    if ((unsigned)opt >= RUNTIME_OPT_COUNT) return buf;
    int *i = int_field(m, opt);
    size_t str_size;
    const char *str = str_field(m, opt, &str_size);
    if (i)
        snprintf(buf, size, "%d", *i);
    else if (str)
        snprintf(buf, size, "%s", str);
    else if (opt == RUNTIME_OPT_DISTRIBUTED_TYPE)
        snprintf(buf, size, "%s", distributed_names[s->distributed_type]);
    else if (opt == RUNTIME_OPT_USE_CPU)
        snprintf(buf, size, "%s", s->use_cpu ? "true" : "false");
    else
        snprintf(buf, size, "%" PRIu64, s->seed);
    return buf;
}

/* ------------------------------------------------------------ environment */

const char *runtime_option_env_name(RuntimeOption opt, char *buf)
{
    const char *k = runtime_options[opt].key;
    size_t n = strlen("CTRAINER_");
    memcpy(buf, "CTRAINER_", n);
    for (; *k; k++) buf[n++] = (char)toupper((unsigned char)*k);
    buf[n] = '\0';
    return buf;
}

static const char *env_lookup(const char *const *env, const char *name)
{
    size_t n = strlen(name);
    for (; env && *env; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
    return NULL;
}

CtStatus runtime_settings_from_env(const char *const *env, RuntimeSettings *out)
{
    runtime_settings_default(out);
    char name[64];
    for (int i = 0; i < RUNTIME_OPT_COUNT; i++) {
        const char *v = env_lookup(env, runtime_option_env_name((RuntimeOption)i, name));
        if (!v || !*v) continue;
        if (runtime_settings_set(out, (RuntimeOption)i, v) != CT_OK)
            return ct_error(CT_ERR_INVALID,
                            "environment variable %s='%s' is not valid "
                            "(expected %s)",
                            name, v, runtime_options[i].expects);
    }
    return CT_OK;
}

/* ------------------------------------------------------------- precedence */

/* Copies option opt from src to dst. */
static void copy_option(RuntimeSettings *dst, const RuntimeSettings *src,
                        RuntimeOption opt)
{
    char v[RUNTIME_SETTING_MAX + 1];
    runtime_settings_format(src, opt, v, sizeof v);
    (void)parse_value(dst, opt, v); /* src's values are valid: they parsed once */
    dst->set |= 1u << opt;
}

static CtStatus check_combination(const RuntimeSettings *s)
{
    const RuntimeSource *src = s->source;
#define SRC(opt) runtime_source_name(src[opt])
    if (s->machine_rank >= s->num_machines)
        return ct_error(CT_ERR_INVALID,
                        "machine_rank %d (%s) is not below num_machines %d (%s)",
                        s->machine_rank, SRC(RUNTIME_OPT_MACHINE_RANK), s->num_machines,
                        SRC(RUNTIME_OPT_NUM_MACHINES));
    if (s->num_processes % s->num_machines != 0)
        return ct_error(
            CT_ERR_INVALID,
            "num_processes %d (%s) is the total over all machines and must be "
            "a multiple of num_machines %d (%s)",
            s->num_processes, SRC(RUNTIME_OPT_NUM_PROCESSES), s->num_machines,
            SRC(RUNTIME_OPT_NUM_MACHINES));
    if (s->use_cpu && strcmp(s->mixed_precision, "fp16") == 0)
        return ct_error(CT_ERR_INVALID,
                        "mixed_precision fp16 (%s) needs a GPU but use_cpu is true (%s); "
                        "use bf16 on the CPU",
                        SRC(RUNTIME_OPT_MIXED_PRECISION), SRC(RUNTIME_OPT_USE_CPU));
#undef SRC
    return CT_OK;
}

CtStatus runtime_settings_resolve(const RuntimeSettings *api, const RuntimeSettings *cli,
                                  const char *const *env, const RuntimeSettings *file,
                                  RuntimeSettings *out)
{
    RuntimeSettings from_env;
    CtStatus st = runtime_settings_from_env(env, &from_env);
    if (st != CT_OK) return st;
    const RuntimeSettings *layers[] = {api, cli, &from_env, file};
    const RuntimeSource sources[] = {RUNTIME_SOURCE_API, RUNTIME_SOURCE_COMMAND_LINE,
                                     RUNTIME_SOURCE_ENVIRONMENT,
                                     RUNTIME_SOURCE_CONFIG_FILE};
    runtime_settings_default(out);
    for (int i = 0; i < RUNTIME_OPT_COUNT; i++) {
        for (int l = 0; l < 4; l++) {
            if (!layers[l] || !(layers[l]->set & (1u << i))) continue;
            copy_option(out, layers[l], (RuntimeOption)i);
            out->source[i] = sources[l];
            break;
        }
    }
    return check_combination(out);
}

/* ------------------------------------------------------ runtime_create's */

extern char **environ;

CtStatus runtime_args_resolve(const RuntimeArgs *args, RuntimeSettings *out)
{
    RuntimeArgs a = args ? *args : (RuntimeArgs){0};
    RuntimeSettings api;
    runtime_settings_default(&api);
    if (a.use_cuda && a.use_cpu)
        return ct_error(CT_ERR_INVALID,
                        "runtime_create: use_cuda and use_cpu are both set");
    if (a.use_cuda || a.use_cpu) {
        api.use_cpu = a.use_cpu;
        api.set |= 1u << RUNTIME_OPT_USE_CPU;
    }
    if (a.seed) {
        api.seed = a.seed;
        api.set |= 1u << RUNTIME_OPT_SEED;
    }
    if (a.mixed_precision && runtime_settings_set(&api, RUNTIME_OPT_MIXED_PRECISION,
                                                  a.mixed_precision) != CT_OK)
        return ct_error(
            CT_ERR_INVALID,
            "runtime_create: mixed_precision '%s' is not one of no, bf16, fp16",
            a.mixed_precision);
    if (a.gradient_accumulation_steps < 0)
        return ct_error(CT_ERR_INVALID,
                        "runtime_create: gradient_accumulation_steps %d < 0",
                        a.gradient_accumulation_steps);
    if (a.gradient_accumulation_steps) {
        api.gradient_accumulation_steps = a.gradient_accumulation_steps;
        api.set |= 1u << RUNTIME_OPT_GRADIENT_ACCUMULATION_STEPS;
    }
    return runtime_settings_resolve(&api, NULL, (const char *const *)environ, NULL, out);
}
