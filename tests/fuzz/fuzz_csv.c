/* libFuzzer target for the CSV parser (data_csv_parse). The first byte picks
 * the options (header mode, label column, delimiter, label kind); the rest is
 * the file. Built with -DCTRAINER_FUZZ=ON and clang. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "data/data_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint8_t o = data[0];
    DataCsvArgs a = {
        .path = "fuzz.csv",
        .header = (DataCsvHeader)(o % 3),
        .label_column = (int)((o >> 2) & 3) - 1, /* -1 .. 2 */
        .delimiter = (o & 16) ? ';' : 0,
        .regression = (o & 32) != 0,
        .num_classes = (o & 64) ? 10 : 0,
        .label_name = (o & 128) ? "y" : NULL,
    };
    DataCsvTable t;
    if (data_csv_parse((const char *)data + 1, size - 1, &a, &t) == CT_OK) {
        if (t.rows < 1 || t.features < 1 || !t.x || (a.regression ? !t.y_f32 : !t.y_i64))
            __builtin_trap();
        volatile float x = 0;
        for (int64_t i = 0; i < t.rows * t.features; i++) x += t.x[i];
        for (int64_t i = 0; i < t.rows; i++) {
            if (!a.regression && a.num_classes && (t.y_i64[i] < 0 || t.y_i64[i] >= 10))
                __builtin_trap();
            x += a.regression ? t.y_f32[i] : (float)t.y_i64[i];
        }
        (void)x;
        data_csv_table_free(&t);
    }
    ct_clear_error();
    return 0;
}
