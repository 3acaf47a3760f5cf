/* The YAML config file: read with libcyaml into typed fields, validated with
 * the option table, and errors placed at FILE:LINE (yaml_index.c finds the
 * lines libcyaml does not report). */
#include <cyaml/cyaml.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "settings_internal.h"
#include "yaml_index.h"

/* The file as libcyaml loads it: one string per option, in RuntimeOption
 * order, NULL when the key is absent. libcyaml checks the structure (a
 * mapping, known keys, each once, scalar values); every value then goes
 * through runtime_settings_set, the one validator of flags, environment
 * and files (libcyaml's own integer parsing accepts "1.5" and "-1").
 * A YAML null (null, Null, NULL, ~ or no value at all) is an absent key,
 * for every key alike (CYAML_FLAG_POINTER_NULL_STR; libcyaml reads the
 * quoted forms 'null', '~' and '' as null too). Writing leaves NULL values
 * out. */
typedef struct ConfigFile {
    char *value[RUNTIME_OPT_COUNT];
} ConfigFile;

#define FIELD(opt, key)                                                                  \
    CYAML_FIELD_STRING_PTR(key, CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER_NULL_STR,       \
                           ConfigFile, value[opt], 0, RUNTIME_SETTING_MAX)
static const cyaml_schema_field_t config_fields[] = {
    FIELD(RUNTIME_OPT_DISTRIBUTED_TYPE, "distributed_type"),
    FIELD(RUNTIME_OPT_NUM_PROCESSES, "num_processes"),
    FIELD(RUNTIME_OPT_NUM_MACHINES, "num_machines"),
    FIELD(RUNTIME_OPT_MACHINE_RANK, "machine_rank"),
    FIELD(RUNTIME_OPT_MAIN_PROCESS_IP, "main_process_ip"),
    FIELD(RUNTIME_OPT_MAIN_PROCESS_PORT, "main_process_port"),
    FIELD(RUNTIME_OPT_HOSTFILE, "hostfile"),
    FIELD(RUNTIME_OPT_MIXED_PRECISION, "mixed_precision"),
    FIELD(RUNTIME_OPT_GRADIENT_ACCUMULATION_STEPS, "gradient_accumulation_steps"),
    FIELD(RUNTIME_OPT_USE_CPU, "use_cpu"),
    FIELD(RUNTIME_OPT_GPU_IDS, "gpu_ids"),
    FIELD(RUNTIME_OPT_SEED, "seed"),
    CYAML_FIELD_END,
};
#undef FIELD

static const cyaml_schema_value_t config_schema = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, ConfigFile, config_fields),
};

/* ------------------------------------------------------------ libcyaml log */

/* What libcyaml said about the first error: its message, and the field and
 * line of the first backtrace entry that names a field. */
typedef struct CyamlLog {
    char message[320];
    char field[64];
    int line;
} CyamlLog;

static void capture_log(cyaml_log_t level, void *ctx, const char *fmt, va_list args)
{
    CyamlLog *log = ctx;
    char text[256];
    vsnprintf(text, sizeof text, fmt, args);
    text[strcspn(text, "\n")] = '\0';
    const char *body = strncmp(text, "Load: ", 6) == 0 ? text + 6 : text;
    int line = 0;
    char field[64];
    if (sscanf(body, " in mapping field '%63[^']' (line: %d", field, &line) == 2) {
        if (!log->field[0]) {
            snprintf(log->field, sizeof log->field, "%s", field);
            log->line = line;
        }
    } else if (!log->message[0] && strcmp(body, "Backtrace:") != 0 &&
               strncmp(body, "  in ", 5) != 0) {
        snprintf(log->message, sizeof log->message, "%s", body);
    }
}

static cyaml_config_t cyaml_config(CyamlLog *log)
{
    return (cyaml_config_t){
        .log_fn = capture_log,
        .log_ctx = log,
        .mem_fn = cyaml_mem,
        .log_level = CYAML_LOG_ERROR,
        .flags = CYAML_CFG_DEFAULT,
    };
}

/* ---------------------------------------------------------------- loading */

static void key_list(char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < RUNTIME_OPT_COUNT && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "",
                                 runtime_options[i].key);
}

/* The error for what libcyaml rejected, at the line of the key concerned. */
static CtStatus cyaml_failure(const char *path, const YamlIndex *ix, const CyamlLog *log)
{
    char key[64];
    if (sscanf(log->message, "Unexpected key: %63s", key) == 1) {
        char keys[512];
        key_list(keys, sizeof keys);
        return ct_error(CT_ERR_FORMAT, "%s:%d: unknown key '%s' (known keys: %s)", path,
                        yaml_index_line(ix, key, 0), key, keys);
    }
    if (sscanf(log->message, "Mapping field already seen: %63s", key) == 1)
        return ct_error(CT_ERR_FORMAT,
                        "%s:%d: key '%s' is given twice (first on line %d)", path,
                        yaml_index_line(ix, key, 1), key, yaml_index_line(ix, key, 0));
    RuntimeOption opt;
    if (log->field[0] && runtime_option_find(log->field, &opt) == CT_OK) {
        ct_clear_error();
        int line = log->line > 0 ? log->line : yaml_index_line(ix, log->field, 0);
        return ct_error(CT_ERR_FORMAT, "%s:%d: %s: %s is not valid (expected %s)", path,
                        line, log->field, yaml_index_value(ix, log->field),
                        runtime_options[opt].expects);
    }
    return ct_error(CT_ERR_FORMAT, "%s:%d: %s", path, log->line > 0 ? log->line : 1,
                    log->message[0] ? log->message : "not a valid config file");
}

/* Checks every value the file gives with the option table. */
static CtStatus take_values(const char *path, const YamlIndex *ix, const ConfigFile *f,
                            RuntimeSettings *out)
{
    for (int i = 0; i < RUNTIME_OPT_COUNT; i++) {
        const char *v = f->value[i];
        if (!v || runtime_settings_set(out, (RuntimeOption)i, v) == CT_OK) continue;
        const char *key = runtime_options[i].key;
        ct_clear_error();
        return ct_error(CT_ERR_FORMAT, "%s:%d: %s: '%s' is not valid (expected %s)", path,
                        yaml_index_line(ix, key, 0), key, v, runtime_options[i].expects);
    }
    if (out->machine_rank >= out->num_machines)
        return ct_error(
            CT_ERR_FORMAT, "%s:%d: machine_rank %d is not below num_machines %d", path,
            yaml_index_line(ix, "machine_rank", 0), out->machine_rank, out->num_machines);
    return CT_OK;
}

CtStatus runtime_config_parse(const char *name, const char *text, size_t size,
                              RuntimeSettings *out)
{
    runtime_settings_default(out);
    YamlIndex ix;
    CtStatus st = yaml_index_build(name, text, size, &ix);
    if (st != CT_OK) return st;
    CyamlLog log = {.line = 0};
    cyaml_config_t cfg = cyaml_config(&log);
    ConfigFile *f = NULL;
    cyaml_err_t e = cyaml_load_data((const uint8_t *)text, size, &cfg, &config_schema,
                                    (cyaml_data_t **)&f, NULL);
    if (e != CYAML_OK) {
        if (!log.message[0])
            snprintf(log.message, sizeof log.message, "%s", cyaml_strerror(e));
        st = cyaml_failure(name, &ix, &log);
    } else if (f) {
        st = take_values(name, &ix, f, out);
    }
    cyaml_free(&cfg, &config_schema, f, 0);
    yaml_index_free(&ix);
    return st;
}

/* A config file larger than this is not one. */
#define CONFIG_MAX_BYTES (1 << 20)

CtStatus runtime_config_load(const char *path, RuntimeSettings *out)
{
    if (!path || !out) return ct_error(CT_ERR_NULL, "runtime_config_load: NULL argument");
    FILE *fp = fopen(path, "rb");
    if (!fp) return ct_error(CT_ERR_IO, "config file %s: %s", path, strerror(errno));
    char *text = malloc(CONFIG_MAX_BYTES + 1);
    size_t n = text ? fread(text, 1, CONFIG_MAX_BYTES + 1, fp) : 0;
    bool failed = ferror(fp) != 0;
    fclose(fp);
    CtStatus st;
    if (!text)
        st = ct_error(CT_ERR_OOM, "config file %s: out of memory", path);
    else if (failed)
        st = ct_error(CT_ERR_IO, "config file %s: read error", path);
    else if (n > CONFIG_MAX_BYTES)
        st = ct_error(CT_ERR_FORMAT, "config file %s: larger than %d bytes", path,
                      CONFIG_MAX_BYTES);
    else
        st = runtime_config_parse(path, text, n, out);
    free(text);
    return st;
}

/* ---------------------------------------------------------------- writing */

static CtStatus write_atomic(const char *path, const char *head, const char *body,
                             size_t n)
{
    char tmp[RUNTIME_SETTING_MAX + 16];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ct_error(CT_ERR_INVALID, "config file path too long: %s", path);
    FILE *fp = fopen(tmp, "wb");
    if (!fp)
        return ct_error(CT_ERR_IO, "writing config file %s: %s", tmp, strerror(errno));
    bool ok = fputs(head, fp) >= 0 && fwrite(body, 1, n, fp) == n && fflush(fp) == 0 &&
              fsync(fileno(fp)) == 0;
    int err = errno;
    ok = fclose(fp) == 0 && ok;
    if (ok && rename(tmp, path) != 0) {
        err = errno;
        ok = false;
    }
    if (ok) return CT_OK;
    remove(tmp);
    return ct_error(CT_ERR_IO, "writing config file %s: %s", path, strerror(err));
}

CtStatus runtime_config_write(const char *path, const RuntimeSettings *s)
{
    if (!path || !s) return ct_error(CT_ERR_NULL, "runtime_config_write: NULL argument");
    char text[RUNTIME_OPT_COUNT][RUNTIME_SETTING_MAX + 1];
    ConfigFile f;
    for (int i = 0; i < RUNTIME_OPT_COUNT; i++) {
        runtime_settings_format(s, (RuntimeOption)i, text[i], sizeof text[i]);
        f.value[i] = text[i][0] ? text[i] : NULL; /* empty: no address, no hostfile */
    }
    CyamlLog log = {.line = 0};
    cyaml_config_t cfg = cyaml_config(&log);
    cfg.flags = CYAML_CFG_STYLE_BLOCK;
    char *yaml = NULL;
    size_t n = 0;
    cyaml_err_t e = cyaml_save_data(&yaml, &n, &cfg, &config_schema, &f, 0);
    if (e != CYAML_OK)
        return ct_error(CT_ERR_FORMAT, "writing config file %s: libcyaml: %s", path,
                        log.message[0] ? log.message : cyaml_strerror(e));
    CtStatus st = write_atomic(
        path, "# ctrainer config file (keys: include/ctrainer/runtime.h)\n", yaml, n);
    cfg.mem_fn(cfg.mem_ctx, yaml, 0);
    return st;
}

CtStatus runtime_config_default_path(char *buf, size_t size)
{
    const char *env = getenv("CTRAINER_CONFIG_FILE");
    const char *home = getenv("HOME");
    int n;
    if (env && *env)
        n = snprintf(buf, size, "%s", env);
    else if (home && *home)
        n = snprintf(buf, size, "%s/.cache/ctrainer/default_config.yaml", home);
    else
        return ct_error(CT_ERR_INVALID,
                        "no config file path: neither CTRAINER_CONFIG_FILE "
                        "nor HOME is set");
    if (n < 0 || (size_t)n >= size)
        return ct_error(CT_ERR_INVALID, "config file path does not fit in %zu bytes",
                        size);
    return CT_OK;
}
