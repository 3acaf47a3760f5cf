/* The Module core: registration, forward, modes, traversal and naming. */
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

/* ------------------------------------------------------- life cycle */

CtStatus nn_module_init(Module *m, const ModuleVtable *vt)
{
    if (!m || !vt) return ct_error(CT_ERR_NULL, "nn_module_init: NULL module or vtable");
    if (!vt->type)
        return ct_error(CT_ERR_INVALID, "nn_module_init: the vtable has no type name");
    m->vt = vt;
    m->training = true;
    m->reg = calloc(1, sizeof *m->reg);
    if (!m->reg)
        return ct_error(CT_ERR_OOM, "%s: out of memory creating the module", vt->type);
    return CT_OK;
}

Module *nn_module_alloc(size_t size, const ModuleVtable *vt)
{
    Module *m = calloc(1, size);
    if (!m) {
        ct_error(CT_ERR_OOM, "%s: out of memory creating the module", vt->type);
        return NULL;
    }
    if (nn_module_init(m, vt) != CT_OK) {
        free(m);
        return NULL;
    }
    return m;
}

static void free_tensors(NnNamedTensor *v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i].name);
        tensor_free(v[i].t);
    }
    free(v);
}

void nn_module_free(Module *m)
{
    if (!m) return;
    NnRegistry *r = m->reg;
    if (r) {
        for (int i = 0; i < r->n_children; i++) {
            free(r->children[i].name);
            nn_module_free(r->children[i].m);
        }
        free(r->children);
        free_tensors(r->params, r->n_params);
        free_tensors(r->buffers, r->n_buffers);
        nn_pack_release(m);
        free(r);
        m->reg = NULL;
    }
    if (m->vt && m->vt->free) m->vt->free(m);
    free(m);
}

/* ------------------------------------------------------- registration */

static bool name_taken(const NnRegistry *r, const char *name)
{
    for (int i = 0; i < r->n_params; i++)
        if (!strcmp(r->params[i].name, name)) return true;
    for (int i = 0; i < r->n_buffers; i++)
        if (!strcmp(r->buffers[i].name, name)) return true;
    for (int i = 0; i < r->n_children; i++)
        if (!strcmp(r->children[i].name, name)) return true;
    return false;
}

/* Validates the module and the name for a new entry of `kind`. */
static CtStatus check_name(const Module *m, const char *kind, const char *name)
{
    if (!m || !m->reg)
        return ct_error(CT_ERR_NULL,
                        "nn_module_register_%s: NULL or uninitialised module", kind);
    const char *type = m->vt->type;
    if (!name || !*name)
        return ct_error(CT_ERR_INVALID, "%s: register_%s: empty or NULL name", type,
                        kind);
    if (strchr(name, '.'))
        return ct_error(CT_ERR_INVALID, "%s: register_%s: name \"%s\" contains '.'", type,
                        kind, name);
    if (name_taken(m->reg, name))
        return ct_error(CT_ERR_INVALID,
                        "%s: register_%s: name \"%s\" is already registered", type, kind,
                        name);
    return CT_OK;
}

/* Records an error for a NULL argument unless one is already recorded (the
 * usual cause: the constructor that produced it failed). */
static void null_arg(const Module *m, const char *kind, const char *name)
{
    if (ct_last_status() == CT_OK)
        ct_error(CT_ERR_NULL, "%s: register_%s \"%s\": NULL %s",
                 m && m->vt ? m->vt->type : "module", kind, name ? name : "(null)", kind);
}

static CtStatus grow(void **v, int *cap, int n, size_t elt)
{
    if (n < *cap) return CT_OK;
    int c = *cap ? *cap * 2 : 4;
    void *nv = realloc(*v, (size_t)c * elt);
    if (!nv) return ct_error(CT_ERR_OOM, "nn: out of memory growing a module registry");
    *v = nv;
    *cap = c;
    return CT_OK;
}

static Tensor *append_tensor(NnNamedTensor **v, int *n, int *cap, const char *name,
                             Tensor *t)
{
    char *copy = strdup(name);
    if (!copy || grow((void **)v, cap, *n, sizeof **v) != CT_OK) {
        free(copy);
        ct_error(CT_ERR_OOM, "nn: out of memory registering \"%s\"", name);
        tensor_free(t);
        return NULL;
    }
    (*v)[(*n)++] = (NnNamedTensor){copy, t};
    return t;
}

Tensor *nn_module_register_parameter(Module *m, const char *name, Tensor *p)
{
    if (!p) {
        null_arg(m, "parameter", name);
        return NULL;
    }
    if (check_name(m, "parameter", name) != CT_OK ||
        tensor_set_requires_grad(p, true) != CT_OK) {
        tensor_free(p);
        return NULL;
    }
    NnRegistry *r = m->reg;
    return append_tensor(&r->params, &r->n_params, &r->cap_params, name, p);
}

Tensor *nn_module_register_buffer(Module *m, const char *name, Tensor *b)
{
    if (!b) {
        null_arg(m, "buffer", name);
        return NULL;
    }
    if (check_name(m, "buffer", name) != CT_OK) {
        tensor_free(b);
        return NULL;
    }
    NnRegistry *r = m->reg;
    return append_tensor(&r->buffers, &r->n_buffers, &r->cap_buffers, name, b);
}

Module *nn_module_register_child(Module *m, const char *name, Module *child)
{
    if (!child) {
        null_arg(m, "child", name);
        return NULL;
    }
    if (child == m) { /* releasing it would free m: leave it alone */
        ct_error(CT_ERR_INVALID,
                 "%s: register_child \"%s\": a module cannot be its own child",
                 m->vt->type, name ? name : "(null)");
        return NULL;
    }
    if (check_name(m, "child", name) != CT_OK) goto fail;
    NnRegistry *r = m->reg;
    for (int i = 0; i < r->n_children; i++) {
        if (r->children[i].m == child) {
            /* the first registration owns it: return without releasing */
            ct_error(CT_ERR_INVALID,
                     "%s: register_child \"%s\": already registered as \"%s\" (a module "
                     "has one parent)",
                     m->vt->type, name, r->children[i].name);
            return NULL;
        }
    }
    char *copy = strdup(name);
    if (!copy || grow((void **)&r->children, &r->cap_children, r->n_children,
                      sizeof *r->children) != CT_OK) {
        free(copy);
        ct_error(CT_ERR_OOM, "%s: out of memory registering child \"%s\"", m->vt->type,
                 name);
        goto fail;
    }
    nn_pack_release(child); /* only the root of a tree holds packed blocks */
    r->children[r->n_children++] = (NnNamedChild){copy, child};
    return child;
fail:
    nn_module_free(child);
    return NULL;
}

CtStatus nn_register_slots(Module *m, int n, const NnSlot *slots)
{
    CtStatus st = CT_OK;
    for (int i = 0; i < n; i++) {
        const NnSlot *sl = &slots[i];
        if (st != CT_OK) {
            tensor_free(sl->t);
            continue;
        }
        *sl->field = sl->buffer ? nn_module_register_buffer(m, sl->name, sl->t)
                                : nn_module_register_parameter(m, sl->name, sl->t);
        if (!*sl->field) st = ct_last_status() != CT_OK ? ct_last_status() : CT_ERR_NULL;
    }
    return st;
}

/* ------------------------------------------------------- forward, modes */

Tensor *nn_forward(Module *m, Tensor *x)
{
    if (!x) return NULL; /* sticky: keep the first error */
    if (!m) {
        ct_error(CT_ERR_NULL, "nn_forward: NULL module");
        return NULL;
    }
    if (!m->vt->forward) {
        ct_error(CT_ERR_UNSUPPORTED, "%s: module has no forward", m->vt->type);
        return NULL;
    }
    return m->vt->forward(m, x);
}

Tensor *nn_forward_relu(Module *m, Tensor *x)
{
    if (x && m && m->vt->forward_relu) return m->vt->forward_relu(m, x);
    return tensor_relu(nn_forward(m, x));
}

Tensor *nn_forward_gelu(Module *m, Tensor *x, CtGeluApprox approx)
{
    if (x && m && m->vt->forward_gelu) return m->vt->forward_gelu(m, x, approx);
    return tensor_gelu(nn_forward(m, x), approx);
}

static void set_mode(Module *m, bool training)
{
    if (!m) return;
    m->training = training;
    if (!m->reg) return;
    for (int i = 0; i < m->reg->n_children; i++)
        set_mode(m->reg->children[i].m, training);
}

void nn_module_train(Module *m)
{
    set_mode(m, true);
}

void nn_module_eval(Module *m)
{
    set_mode(m, false);
}

/* ------------------------------------------------------- children */

int nn_module_num_children(const Module *m)
{
    return m && m->reg ? m->reg->n_children : 0;
}

Module *nn_module_child_at(const Module *m, int i)
{
    if (i < 0 || i >= nn_module_num_children(m)) return NULL;
    return m->reg->children[i].m;
}

const char *nn_module_child_name(const Module *m, int i)
{
    if (i < 0 || i >= nn_module_num_children(m)) return NULL;
    return m->reg->children[i].name;
}

/* The child of m named by path[0, len). */
static Module *child_named(const Module *m, const char *name, size_t len)
{
    for (int i = 0; i < nn_module_num_children(m); i++) {
        const char *c = m->reg->children[i].name;
        if (strlen(c) == len && !strncmp(c, name, len)) return m->reg->children[i].m;
    }
    return NULL;
}

/* Walks path[0, len) ("" is m itself). */
static Module *find_n(const Module *m, const char *path, size_t len)
{
    const char *p = path, *end = path + len;
    Module *cur = (Module *)m;
    while (cur && p < end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        cur = child_named(cur, p, n);
        p += n + (dot ? 1 : 0);
        if (dot && p == end) return NULL; /* trailing '.' */
    }
    return cur;
}

Module *nn_module_find(const Module *m, const char *path)
{
    if (!m || !path) return NULL;
    return find_n(m, path, strlen(path));
}

/* ------------------------------------------------------- named tensors */

enum { WANT_PARAMS = 1, WANT_BUFFERS = 2 };

static char *join(const char *prefix, const char *name)
{
    size_t a = strlen(prefix), b = strlen(name);
    char *s = malloc(a + b + 2);
    if (!s) return NULL;
    memcpy(s, prefix, a);
    if (a) s[a++] = '.';
    memcpy(s + a, name, b + 1);
    return s;
}

static bool dict_holds(const CtStateDict *d, const Tensor *t)
{
    for (int64_t i = 0; i < ct_state_dict_size(d); i++)
        if (ct_state_dict_tensor(d, i) == t) return true;
    return false;
}

static CtStatus add_list(CtStateDict *d, const char *prefix, const NnNamedTensor *v,
                         int n, bool dedup)
{
    for (int i = 0; i < n; i++) {
        if (dedup && dict_holds(d, v[i].t)) continue;
        char *name = join(prefix, v[i].name);
        if (!name)
            return ct_error(CT_ERR_OOM, "nn: out of memory naming \"%s\"", v[i].name);
        CtStatus st = ct_state_dict_add(d, name, v[i].t);
        free(name);
        if (st != CT_OK) return st;
    }
    return CT_OK;
}

/* Pre-order: m's own entries, then each child's (PyTorch's named_parameters
 * and state_dict order). dedup drops a tensor registered twice, as
 * named_parameters does; state_dict keeps every name. */
static CtStatus collect(const Module *m, const char *prefix, int want, bool dedup,
                        CtStateDict *d)
{
    const NnRegistry *r = m->reg;
    CtStatus st = CT_OK;
    if (want & WANT_PARAMS) st = add_list(d, prefix, r->params, r->n_params, dedup);
    if (st == CT_OK && (want & WANT_BUFFERS))
        st = add_list(d, prefix, r->buffers, r->n_buffers, dedup);
    for (int i = 0; st == CT_OK && i < r->n_children; i++) {
        char *p = join(prefix, r->children[i].name);
        if (!p) return ct_error(CT_ERR_OOM, "nn: out of memory naming a child");
        st = collect(r->children[i].m, p, want, dedup, d);
        free(p);
    }
    return st;
}

static CtStateDict *named(const Module *m, int want, bool dedup, const char *fn)
{
    if (!m || !m->reg) {
        ct_error(CT_ERR_NULL, "%s: NULL or uninitialised module", fn);
        return NULL;
    }
    CtStateDict *d = ct_state_dict_create();
    if (!d) return NULL;
    if (collect(m, "", want, dedup, d) != CT_OK) {
        ct_state_dict_free(d);
        return NULL;
    }
    return d;
}

CtStateDict *nn_module_parameters(const Module *m)
{
    return named(m, WANT_PARAMS, true, "nn_module_parameters");
}

CtStateDict *nn_module_buffers(const Module *m)
{
    return named(m, WANT_BUFFERS, true, "nn_module_buffers");
}

CtStateDict *nn_module_state_dict(const Module *m)
{
    return named(m, WANT_PARAMS | WANT_BUFFERS, false, "nn_module_state_dict");
}

static Tensor *lookup(const NnNamedTensor *v, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i].name, name)) return v[i].t;
    return NULL;
}

Tensor *nn_module_get(const Module *m, const char *name)
{
    if (!m || !m->reg || !name) return NULL;
    const char *dot = strrchr(name, '.');
    const Module *owner = dot ? find_n(m, name, (size_t)(dot - name)) : m;
    if (!owner) return NULL;
    const char *leaf = dot ? dot + 1 : name;
    Tensor *t = lookup(owner->reg->params, owner->reg->n_params, leaf);
    return t ? t : lookup(owner->reg->buffers, owner->reg->n_buffers, leaf);
}

int64_t nn_module_num_parameters(const Module *m, bool trainable_only)
{
    CtStateDict *d = nn_module_parameters(m);
    if (!d) return -1;
    int64_t total = 0;
    for (int64_t i = 0; i < ct_state_dict_size(d); i++) {
        Tensor *t = ct_state_dict_tensor(d, i);
        if (!trainable_only || tensor_requires_grad(t)) total += tensor_numel(t);
    }
    ct_state_dict_free(d);
    return total;
}
