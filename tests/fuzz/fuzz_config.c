/* libFuzzer target for the YAML config reader (runtime_config_parse): any
 * input is accepted with valid settings or rejected with a "NAME:LINE: "
 * message. Built with -DCTRAINER_FUZZ=ON and clang. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "runtime/settings_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    RuntimeSettings s;
    CtStatus st = runtime_config_parse("fuzz.yaml", (const char *)data, size, &s);
    if (st == CT_OK) {
        if (s.num_processes < 1 || s.num_machines < 1 || s.machine_rank < 0 ||
            s.machine_rank >= s.num_machines || s.main_process_port < 1 ||
            s.main_process_port > 65535 || s.gradient_accumulation_steps < 1 ||
            s.set >= 1u << RUNTIME_OPT_COUNT)
            __builtin_trap();
    } else if (st == CT_ERR_FORMAT && strncmp(ct_last_error(), "fuzz.yaml:", 10) != 0) {
        __builtin_trap();
    }
    ct_clear_error();
    return 0;
}
