/* Loading state dicts into modules, and saving / loading modules as
 * safetensors files.
 *
 * Loading works in two passes: the first classifies every key (matching,
 * missing from the dict, unexpected in the dict, mis-shaped) without
 * touching the module; the second copies. A strict load that finds any
 * problem stops after the first pass, so the module is unchanged. As in
 * PyTorch, values are copied into the live tensors (dtype and device are
 * converted by tensor_copy_), so packed blocks and optimizer references stay
 * valid. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nn_internal.h"

/* Names shown per kind in NnLoadReport.message. */
#define REPORT_NAMES 3

static bool same_shape(const Tensor *a, const Tensor *b)
{
    if (tensor_ndim(a) != tensor_ndim(b)) return false;
    for (int i = 0; i < tensor_ndim(a); i++)
        if (tensor_shape(a)[i] != tensor_shape(b)[i]) return false;
    return true;
}

static void shape_str(const Tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < tensor_ndim(t) && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "",
                              (long long)tensor_shape(t)[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Appends printf output to a fixed buffer, truncating silently. */
static void appendf(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t n, const char *fmt, ...)
{
    size_t k = strlen(buf);
    if (k + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + k, n - k, fmt, ap);
    va_end(ap);
}

/* True for the num_batches_tracked of a BatchNorm of m. PyTorch's
 * BatchNorm loads a dict without it when the dict carries no version
 * metadata (a plain dict, as every safetensors file is: torchvision's
 * checkpoints from before PyTorch 0.4.1 have none) and sets the counter to
 * 0 (_NormBase._load_from_state_dict); so do we, in strict mode too. */
static bool optional_counter(const Module *m, const char *name)
{
    static const char key[] = "num_batches_tracked";
    const size_t n = strlen(name), k = sizeof key - 1;
    if (n < k || strcmp(name + n - k, key) != 0) return false;
    if (n == k) return nn_is_batch_norm(m);
    if (name[n - k - 1] != '.') return false;
    char path[512];
    const size_t len = n - k - 1;
    if (len >= sizeof path) return false;
    memcpy(path, name, len);
    path[len] = '\0';
    return nn_is_batch_norm(nn_module_find(m, path));
}

/* Classifies the keys of own (the module's state dict) against d, filling
 * r->counts and r->message. */
static void classify(const Module *m, const CtStateDict *own, const CtStateDict *d,
                     NnLoadReport *r)
{
    char missing[320] = "", unexpected[320] = "", mismatched[384] = "";
    for (int64_t i = 0; i < ct_state_dict_size(own); i++) {
        const char *name = ct_state_dict_name(own, i);
        const Tensor *src = ct_state_dict_get(d, name);
        if (!src) {
            if (optional_counter(m, name)) continue;
            if (r->n_missing++ < REPORT_NAMES)
                appendf(missing, sizeof missing, "%s%s", r->n_missing > 1 ? ", " : "",
                        name);
        } else if (!same_shape(src, ct_state_dict_tensor(own, i))) {
            if (r->n_mismatched++ < REPORT_NAMES) {
                char a[96], b[96];
                shape_str(src, a, sizeof a);
                shape_str(ct_state_dict_tensor(own, i), b, sizeof b);
                appendf(mismatched, sizeof mismatched, "%s%s (checkpoint %s, model %s)",
                        r->n_mismatched > 1 ? ", " : "", name, a, b);
            }
        }
    }
    for (int64_t i = 0; i < ct_state_dict_size(d); i++) {
        const char *name = ct_state_dict_name(d, i);
        if (!ct_state_dict_get(own, name) && r->n_unexpected++ < REPORT_NAMES)
            appendf(unexpected, sizeof unexpected, "%s%s",
                    r->n_unexpected > 1 ? ", " : "", name);
    }
    const struct {
        const char *what, *names;
        int n;
    } kinds[] = {{"missing", missing, r->n_missing},
                 {"unexpected", unexpected, r->n_unexpected},
                 {"mis-shaped", mismatched, r->n_mismatched}};
    r->message[0] = '\0';
    for (int k = 0; k < 3; k++) {
        if (!kinds[k].n) continue;
        appendf(r->message, sizeof r->message, "%s%d %s key%s: %s%s",
                r->message[0] ? "; " : "", kinds[k].n, kinds[k].what,
                kinds[k].n > 1 ? "s" : "", kinds[k].names,
                kinds[k].n > REPORT_NAMES ? ", ..." : "");
    }
}

/* Copies every entry of d whose name and shape match into own, and zeroes
 * the BatchNorm counters d lacks (optional_counter). */
static CtStatus copy_matching(const Module *m, const CtStateDict *own,
                              const CtStateDict *d)
{
    for (int64_t i = 0; i < ct_state_dict_size(own); i++) {
        Tensor *dst = ct_state_dict_tensor(own, i);
        const char *name = ct_state_dict_name(own, i);
        const Tensor *src = ct_state_dict_get(d, name);
        CtStatus st = CT_OK;
        if (!src && optional_counter(m, name))
            st = tensor_zero_(dst);
        else if (src && same_shape(src, dst))
            st = tensor_copy_(dst, src);
        if (st != CT_OK)
            return nn_error_context(ct_last_status(), "load_state_dict (%s): \"%s\"",
                                    m->vt->type, name);
    }
    return CT_OK;
}

CtStatus nn_module_load_state_dict(Module *m, const CtStateDict *d, bool strict,
                                   NnLoadReport *report)
{
    NnLoadReport local;
    NnLoadReport *r = report ? report : &local;
    memset(r, 0, sizeof *r);
    if (!m || !d)
        return ct_error(CT_ERR_NULL, "nn_module_load_state_dict: NULL argument");
    CtStateDict *own = nn_module_state_dict(m);
    if (!own) return ct_last_status();
    classify(m, own, d, r);
    CtStatus st = CT_OK;
    if (strict && (r->n_missing || r->n_unexpected || r->n_mismatched)) {
        CtStatus kind = r->n_missing || r->n_unexpected ? CT_ERR_INVALID : CT_ERR_SHAPE;
        st = ct_error(kind, "load_state_dict (%s): %s; nothing was loaded", m->vt->type,
                      r->message);
    } else {
        st = copy_matching(m, own, d);
    }
    ct_state_dict_free(own);
    return st;
}

CtStatus nn_module_save(const Module *m, const char *path)
{
    if (!m || !path) return ct_error(CT_ERR_NULL, "nn_module_save: NULL argument");
    CtStateDict *sd = nn_module_state_dict(m);
    if (!sd) return ct_last_status();
    /* what transformers writes, so Hugging Face loaders accept the file */
    const char *key = "format", *value = "pt";
    CtStatus st = nn_safetensors_save(path, sd, 1, &key, &value);
    ct_state_dict_free(sd);
    return st;
}

CtStatus nn_module_load(Module *m, const char *path, bool strict, NnLoadReport *report)
{
    if (report) memset(report, 0, sizeof *report);
    if (!m || !path) return ct_error(CT_ERR_NULL, "nn_module_load: NULL argument");
    /* read to the host; tensor_copy_ moves values to the module's device */
    CtStateDict *d = nn_safetensors_load(path, ct_cpu());
    if (!d) return ct_last_status();
    CtStatus st = nn_module_load_state_dict(m, d, strict, report);
    ct_state_dict_free(d);
    if (st != CT_OK) return nn_error_context(st, "%s", path);
    return CT_OK;
}
