/* Private to runtime/: the option table shared by the settings, the config
 * file and the launcher. */
#ifndef CTRAINER_SETTINGS_INTERNAL_H
#define CTRAINER_SETTINGS_INTERNAL_H

#include "ctrainer/runtime.h"

typedef enum RuntimeOptionKind {
    RUNTIME_KIND_INT,     /* int in [lo, hi] */
    RUNTIME_KIND_U64,     /* uint64_t */
    RUNTIME_KIND_BOOL,    /* true/false, yes/no, on/off, 1/0 */
    RUNTIME_KIND_ENUM,    /* one of a fixed list of names */
    RUNTIME_KIND_WORD,    /* non-empty, no white space (addresses, paths) */
    RUNTIME_KIND_GPU_IDS, /* "all" or "0,1,..." */
} RuntimeOptionKind;

typedef struct RuntimeOptionInfo {
    const char *key;
    RuntimeOptionKind kind;
    long lo, hi;         /* RUNTIME_KIND_INT */
    const char *expects; /* "an integer >= 1", for messages */
} RuntimeOptionInfo;

extern const RuntimeOptionInfo runtime_options[RUNTIME_OPT_COUNT];

/* "CTRAINER_NUM_PROCESSES" for num_processes, into buf (>= 64 bytes). */
const char *runtime_option_env_name(RuntimeOption opt, char *buf);

/* runtime_config_load on text in memory (size bytes; name for messages). */
CtStatus runtime_config_parse(const char *name, const char *text, size_t size,
                              RuntimeSettings *out);

/* The settings RuntimeArgs gives (their "set" bits for the non-zero
 * fields), resolved against the environment: what runtime_create uses. */
CtStatus runtime_args_resolve(const RuntimeArgs *args, RuntimeSettings *out);

#endif
