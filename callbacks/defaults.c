/* The default callback list (pytorch-accelerated's DEFAULT_CALLBACKS). */
#include "cb_internal.h"

int callbacks_default(Callback **out, int cap, bool progress_bar)
{
    int need = progress_bar ? 5 : 4;
    if (!out || cap < need) {
        ct_error(CT_ERR_INVALID,
                 "callbacks_default: room for %d callbacks needed, got %d", need,
                 out ? cap : 0);
        return -1;
    }
    Callback *cbs[5];
    int n = 0;
    cbs[n++] = callback_move_modules_to_device_create();
    cbs[n++] = callback_terminate_on_nan_create();
    cbs[n++] = callback_print_progress_create(NULL);
    if (progress_bar) cbs[n++] = callback_progress_bar_create(NULL);
    cbs[n++] = callback_log_metrics_create(NULL);
    bool ok = true;
    for (int i = 0; i < n; i++) ok = ok && cbs[i];
    if (!ok) {
        for (int i = 0; i < n; i++) callback_free(cbs[i]);
        return -1;
    }
    for (int i = 0; i < n; i++) out[i] = cbs[i];
    return n;
}
