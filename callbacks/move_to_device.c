/* MoveModulesToDevice: registered modules, tensors and objects follow the
 * trainer's device at each run start. */
#include <stdlib.h>

#include "cb_internal.h"

typedef enum { MOVE_MODULE, MOVE_TENSOR, MOVE_FN } MoveKind;

typedef struct MoveItem {
    MoveKind kind;
    void *obj;
    MoveToDeviceFn fn;
} MoveItem;

typedef struct MoveModules {
    Callback base;
    MoveItem *items;
    int n, cap;
} MoveModules;

static void mm_free(Callback *cb)
{
    free(((MoveModules *)cb)->items);
    free(cb);
}

/* Moves t in place: a new block on dev, values copied by tensor_rebind. */
static CtStatus move_tensor(Tensor *t, CtDevice dev)
{
    if (ct_device_eq(tensor_device(t), dev)) return CT_OK;
    int64_t n = tensor_numel(t);
    Tensor *block = tensor_empty(1, &n, tensor_dtype(t), dev);
    if (!block) return ct_last_status();
    CtStatus st = tensor_rebind(t, block, 0);
    tensor_free(block); /* t holds the storage now */
    return st;
}

static CtStatus mm_run_start(Callback *cb, Trainer *t)
{
    MoveModules *m = (MoveModules *)cb;
    CtDevice dev = trainer_device(t);
    for (int i = 0; i < m->n; i++) {
        MoveItem *it = &m->items[i];
        CtStatus st = it->kind == MOVE_MODULE   ? nn_module_to(it->obj, dev)
                      : it->kind == MOVE_TENSOR ? move_tensor(it->obj, dev)
                                                : it->fn(it->obj, dev);
        if (st != CT_OK) return st;
    }
    return CT_OK;
}

static const CallbackVtable move_modules_vt = {
    .type = "MoveModulesToDevice",
    .free = mm_free,
    .on_training_run_start = mm_run_start,
    .on_evaluation_run_start = mm_run_start,
};

Callback *callback_move_modules_to_device_create(void)
{
    return cb_alloc(sizeof(MoveModules), &move_modules_vt);
}

static CtStatus add(Callback *cb, MoveKind kind, void *obj, MoveToDeviceFn fn)
{
    if (!cb_is(cb, &move_modules_vt))
        return ct_error(CT_ERR_INVALID,
                        "callback_move_modules_add: not a MoveModulesToDevice "
                        "callback");
    if (!obj || (kind == MOVE_FN && !fn))
        return ct_error(CT_ERR_NULL, "MoveModulesToDevice: NULL object or move function");
    MoveModules *m = (MoveModules *)cb;
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 4;
        MoveItem *items = realloc(m->items, (size_t)cap * sizeof *items);
        if (!items) return ct_error(CT_ERR_OOM, "MoveModulesToDevice: out of memory");
        m->items = items;
        m->cap = cap;
    }
    m->items[m->n++] = (MoveItem){kind, obj, fn};
    return CT_OK;
}

CtStatus callback_move_modules_add_module(Callback *cb, Module *m)
{
    return add(cb, MOVE_MODULE, m, NULL);
}

CtStatus callback_move_modules_add_tensor(Callback *cb, Tensor *t)
{
    return add(cb, MOVE_TENSOR, t, NULL);
}

CtStatus callback_move_modules_add(Callback *cb, MoveToDeviceFn fn, void *object)
{
    return add(cb, MOVE_FN, object, fn);
}
