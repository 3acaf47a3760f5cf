/* Autograd: grad mode, graph nodes and the backward engine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Thread_local bool grad_disabled;
static _Thread_local int visit_epoch;
static _Thread_local bool backward_running;

bool ct_in_backward(void)
{
    return backward_running;
}

bool ct_set_grad_enabled(bool on)
{
    bool prev = !grad_disabled;
    grad_disabled = !on;
    return prev;
}

bool ct_grad_enabled(void)
{
    return !grad_disabled;
}

static uint64_t op_version(const Tensor *t)
{
    return t ? __atomic_load_n(&t->storage->op_version, __ATOMIC_RELAXED) : 0;
}

bool ct_node_wanted(int n_in, Tensor *const *in)
{
    if (grad_disabled) return false;
    for (int i = 0; i < n_in; i++)
        if (in[i] && in[i]->requires_grad) return true;
    return false;
}

CtStatus ct_node_new(Tensor *out, const char *op, CtBackwardFn bw, int n_in,
                     Tensor *const *in, CtNode **node)
{
    *node = NULL;
    if (!out || !ct_node_wanted(n_in, in)) return CT_OK;
    CtNode *n = ct_calloc(1, sizeof *n);
    if (!n)
        return ct_error(CT_ERR_OOM, "%s: out of memory recording the autograd node", op);
    n->op = op;
    n->backward = bw;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        n->in[i] = tensor_retain(in[i]);
        n->in_version[i] = op_version(in[i]);
        n->needs_grad[i] = in[i] && in[i]->requires_grad;
    }
    out->grad_fn = n;
    out->requires_grad = true;
    *node = n;
    return CT_OK;
}

void ct_node_save(CtNode *n, int i, Tensor *t)
{
    tensor_free(n->saved[i]);
    n->saved[i] = tensor_retain(t);
    n->saved_version[i] = op_version(t);
}

CtStatus ct_node_save_output(CtNode *n, int i, Tensor *out)
{
    tensor_free(n->saved[i]);
    n->saved[i] = ct_tensor_alias(out);
    n->saved_version[i] = op_version(out);
    return n->saved[i] ? CT_OK : ct_last_status();
}

CtStatus ct_node_fuse_act(CtNode *n, CtUnaryKind act, Tensor *x)
{
    tensor_free(n->act_x);
    n->act_x = ct_tensor_alias(x);
    n->act_version = op_version(x);
    n->act = act;
    return n->act_x ? CT_OK : ct_last_status();
}

CtStatus ct_node_fuse_relu(CtNode *n, Tensor *out)
{
    return ct_node_fuse_act(n, CT_UN_RELU, out);
}

CtStatus tensor_set_requires_grad(Tensor *t, bool on)
{
    if (!t) return ct_error(CT_ERR_NULL, "tensor_set_requires_grad: NULL tensor");
    char d[96];
    if (t->grad_fn)
        return ct_error(CT_ERR_STATE,
                        "tensor_set_requires_grad: %s is not a leaf (it is the "
                        "output of %s); detach it first",
                        tensor_describe(t, d, sizeof d), t->grad_fn->op);
    if (on && !ct_dtype_is_float(t->dtype))
        return ct_error(CT_ERR_DTYPE,
                        "tensor_set_requires_grad: only floating-point tensors "
                        "can require grad, got %s",
                        tensor_describe(t, d, sizeof d));
    t->requires_grad = on;
    return CT_OK;
}

bool tensor_requires_grad(const Tensor *t)
{
    return t && t->requires_grad;
}

Tensor *tensor_grad(const Tensor *t)
{
    return t ? t->grad : NULL;
}

CtStatus tensor_set_grad(Tensor *t, Tensor *g)
{
    if (!t) return ct_error(CT_ERR_NULL, "tensor_set_grad: NULL tensor");
    if (g && (!ct_check_same_shape("tensor_set_grad", t, g) ||
              !ct_check_same_dtype("tensor_set_grad", t, g) ||
              !ct_check_inputs("tensor_set_grad", 2, (const Tensor *[]){t, g})))
        return ct_last_status();
    tensor_retain(g);
    tensor_free(t->grad);
    t->grad = g;
    return CT_OK;
}

Tensor *tensor_detach(Tensor *t)
{
    if (!t) return NULL;
    return ct_tensor_view(t, t->ndim, t->shape, t->stride, t->offset);
}

/* ------------------------------------------------------------ the engine */

typedef struct NodeList {
    CtNode **v;
    size_t n, cap;
} NodeList;

static bool nl_push(NodeList *l, CtNode *n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        CtNode **v = ct_realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = n;
    return true;
}

/* Post-order (inputs before the nodes that use them), iteratively. */
static CtStatus topo_sort(CtNode *root, NodeList *order)
{
    NodeList stack = {0};
    int epoch = ++visit_epoch;
    CtStatus st = CT_OK;
    root->visit = epoch;
    if (!nl_push(&stack, root)) goto oom;
    /* entries are pushed once; a node is emitted when all inputs are done,
     * tracked by re-pushing it with a marker bit in `visit` */
    while (stack.n) {
        CtNode *n = stack.v[stack.n - 1];
        bool pushed = false;
        for (int i = 0; i < n->n_in; i++) {
            CtNode *c = n->needs_grad[i] && n->in[i] ? n->in[i]->grad_fn : NULL;
            if (c && c->visit != epoch) {
                c->visit = epoch;
                if (!nl_push(&stack, c)) goto oom;
                pushed = true;
                break;
            }
        }
        if (!pushed) {
            stack.n--;
            if (!nl_push(order, n)) goto oom;
        }
    }
    free(stack.v);
    return st;
oom:
    free(stack.v);
    return ct_error(CT_ERR_OOM, "tensor_backward: out of memory sorting the graph");
}

static CtStatus accumulate_into(Tensor **acc, Tensor *g)
{
    if (!*acc) {
        *acc = tensor_retain(g);
        return CT_OK;
    }
    Tensor *sum = tensor_add(*acc, g);
    if (!sum) return ct_last_status();
    tensor_free(*acc);
    *acc = tensor_retain(sum);
    return CT_OK;
}

/* After backward wrote leaf's gradient: its bytes hold zeros no longer
 * (so a later node, or another leaf sharing them, adds). */
static void mark_written(Tensor *leaf)
{
    ct_storage_written(leaf->grad);
}

static CtStatus accumulate_leaf(Tensor *leaf, Tensor *g)
{
    if (leaf->grad) {
        CtBinaryParams p = {CT_BIN_ADD};
        CtOpCall c = {
            .op = CT_OP_BINARY, .out = {leaf->grad}, .in = {leaf->grad, g}, .params = &p};
        CtStatus st = ct_dispatch(&c);
        mark_written(leaf);
        return st;
    }
    Tensor *copy = ct_tensor_new_persistent(leaf->ndim, leaf->shape, leaf->dtype,
                                            leaf->storage->device);
    if (!copy) return ct_last_status();
    CtStatus st = tensor_copy_(copy, g);
    if (st != CT_OK) {
        tensor_free(copy);
        return st;
    }
    leaf->grad = copy;
    mark_written(leaf);
    return CT_OK;
}

/* Leaf x's gradient when backward may overwrite it: it holds zeros (a
 * zero_grad, and no write since, backward's included), and it is laid out
 * as a new gradient would be. */
static Tensor *zeroed_grad(const Tensor *x)
{
    Tensor *g = x->grad;
    if (!g || x->grad_fn || !x->requires_grad || g->ndim != x->ndim ||
        !tensor_is_contiguous(g) || g->dtype != x->dtype ||
        !ct_device_eq(g->storage->device, x->storage->device) || !ct_known_zero(g))
        return NULL;
    for (int d = 0; d < x->ndim; d++)
        if (g->shape[d] != x->shape[d]) return NULL;
    return g;
}

/* Whether gradients a and b (contiguous) share bytes. */
static bool overlap(const Tensor *a, const Tensor *b)
{
    size_t alo, ahi, blo, bhi;
    ct_byte_span(a, &alo, &ahi);
    ct_byte_span(b, &blo, &bhi);
    return a->storage == b->storage && alo < bhi && blo < ahi;
}

/* Offers n's leaf inputs' zeroed gradients as its outputs, none twice and
 * no two that share bytes: an input that appears twice, or a leaf whose
 * gradient shares another's bytes, adds its gradient. */
static void offer_grad_dests(CtNode *n)
{
    for (int i = 0; i < n->n_in; i++) {
        n->grad_dest[i] = NULL;
        if (!n->needs_grad[i] || !n->in[i]) continue;
        bool first = true;
        for (int j = 0; first && j < i; j++) first = n->in[j] != n->in[i];
        Tensor *g = first ? zeroed_grad(n->in[i]) : NULL;
        for (int j = 0; g && j < i; j++)
            if (n->grad_dest[j] && overlap(g, n->grad_dest[j])) g = NULL;
        n->grad_dest[i] = g;
    }
}

Tensor *ct_node_grad_buffer(CtNode *n, int i, const Tensor *like)
{
    if (n->grad_dest[i]) return n->grad_dest[i];
    return ct_tensor_new(like->ndim, like->shape, like->dtype, like->storage->device);
}

static CtStatus route_grad(CtNode *n, int i, Tensor *g)
{
    Tensor *x = n->in[i];
    bool same = g->ndim == x->ndim && g->dtype == x->dtype;
    for (int d = 0; same && d < x->ndim; d++) same = g->shape[d] == x->shape[d];
    if (!same) {
        char d1[96], d2[96];
        return ct_error(CT_ERR_STATE,
                        "tensor_backward: %s produced gradient %s for input %d (%s)",
                        n->op, tensor_describe(g, d1, sizeof d1), i,
                        tensor_describe(x, d2, sizeof d2));
    }
    if (x->grad_fn) {
        if (x->grad_fn->released)
            return ct_error(CT_ERR_STATE,
                            "tensor_backward: the graph through %s was already "
                            "released by an earlier backward",
                            x->grad_fn->op);
        return accumulate_into(&x->grad_fn->grad_acc, g);
    }
    /* a leaf that stopped requiring grad since the forward gets none */
    return x->requires_grad ? accumulate_leaf(x, g) : CT_OK;
}

static bool changed(const Tensor *t, uint64_t version)
{
    return t && op_version(t) != version;
}

/* Refuses n's backward when something it reads changed in place since the
 * forward, as PyTorch's version counters do. The message is made only
 * then: this runs for every node of every backward. */
static CtStatus check_unchanged(const CtNode *n)
{
    const Tensor *t = NULL;
    char which[32] = "activation input";
    for (int i = 0; !t && i < n->n_in; i++)
        if ((n->reads & 1u << i) && changed(n->in[i], n->in_version[i])) {
            t = n->in[i];
            snprintf(which, sizeof which, "input %d", i);
        }
    for (int i = 0; !t && i < CT_NODE_MAX_SAVED; i++)
        if (changed(n->saved[i], n->saved_version[i])) {
            t = n->saved[i];
            snprintf(which, sizeof which, "saved tensor %d", i);
        }
    if (!t && changed(n->act_x, n->act_version)) t = n->act_x;
    if (!t) return CT_OK;
    char d[96];
    return ct_error(CT_ERR_STATE,
                    "tensor_backward: %s's backward needs the values its %s (%s) "
                    "had in the forward, but they were changed in place since (by an "
                    "optimizer step, tensor_copy_, tensor_fill_ or another in-place "
                    "op); call backward before changing them, or run the forward again",
                    n->op, which, tensor_describe(t, d, sizeof d));
}

static CtStatus run_nodes(NodeList *order)
{
    for (size_t k = order->n; k-- > 0;) {
        CtNode *n = order->v[k];
        if (!n->grad_acc) continue;
        CtStatus st = check_unchanged(n);
        if (st != CT_OK) return st;
        Tensor *gin[CT_NODE_MAX_IN] = {0};
        Tensor *g = n->act_x ? ct_act_grad(n->act, n->act_x, n->grad_acc) : n->grad_acc;
        if (!g) return ct_last_status();
        offer_grad_dests(n);
        st = n->backward(n, g, gin);
        for (int i = 0; st == CT_OK && i < n->n_in; i++) {
            if (!n->needs_grad[i] || !gin[i]) continue;
            if (gin[i] == n->grad_dest[i]) /* written in place */
                mark_written(n->in[i]);
            else
                st = route_grad(n, i, gin[i]);
        }
        memset(n->grad_dest, 0, sizeof n->grad_dest);
        if (st != CT_OK) return st;
        tensor_free(n->grad_acc);
        n->grad_acc = NULL;
    }
    return CT_OK;
}

static Tensor *seed_grad(Tensor *root, const Tensor *grad)
{
    if (grad) {
        if (!ct_check_same_shape("tensor_backward", root, grad) ||
            !ct_check_inputs("tensor_backward", 2, (const Tensor *[]){root, grad}))
            return NULL;
        /* backward only reads its incoming gradients: no copy needed */
        if (grad->dtype == root->dtype && tensor_is_contiguous(grad))
            return (Tensor *)grad;
        return tensor_cast((Tensor *)grad, root->dtype);
    }
    if (tensor_numel(root) != 1) {
        char d[96];
        ct_error(CT_ERR_SHAPE,
                 "tensor_backward: a gradient can be implied only for a "
                 "one-element output, got %s; pass `grad`",
                 tensor_describe(root, d, sizeof d));
        return NULL;
    }
    return tensor_ones_like(root);
}

CtStatus tensor_backward(Tensor *root, const Tensor *grad)
{
    if (!root) {
        CtStatus st = ct_last_status();
        return st != CT_OK ? st : ct_error(CT_ERR_NULL, "tensor_backward: NULL tensor");
    }
    if (!root->requires_grad) {
        char d[96];
        return ct_error(CT_ERR_STATE,
                        "tensor_backward: %s does not require grad (no input of "
                        "its graph requires grad, or grad mode was off)",
                        tensor_describe(root, d, sizeof d));
    }
    if (root->grad_fn && root->grad_fn->released)
        return ct_error(CT_ERR_STATE,
                        "tensor_backward: the graph of this %s output was already "
                        "released by an earlier backward",
                        root->grad_fn->op);
    CtScope *scope = ct_scope_open();
    if (!scope) return ct_last_status();
    bool prev = ct_set_grad_enabled(false);
    CtStatus st = CT_OK;
    NodeList order = {0};
    Tensor *seed = seed_grad(root, grad);
    if (!seed) {
        st = ct_last_status();
    } else if (!root->grad_fn) {
        st = accumulate_leaf(root, seed);
    } else {
        st = topo_sort(root->grad_fn, &order);
        if (st == CT_OK) {
            root->grad_fn->grad_acc = tensor_retain(seed);
            bool outer = backward_running;
            backward_running = true;
            st = run_nodes(&order);
            backward_running = outer;
        }
        /* release the graph whatever happened: nothing outlives backward
         * but leaf gradients */
        for (size_t k = 0; k < order.n; k++) {
            ct_node_free(order.v[k]);
            order.v[k]->released = true;
        }
    }
    free(order.v);
    ct_set_grad_enabled(prev);
    ct_scope_close(scope);
    return st;
}
