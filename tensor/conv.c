/* 2-d convolution (NCHW, or channels last where the backend takes it) with
 * autograd through dedicated backward kernels. */
#include "conv.h"

_Static_assert(sizeof(CtConv2dParams) <= CT_NODE_PARAMS_BYTES,
               "conv2d params must fit in a node");

#define OP "conv2d"

/* A new (N, C, H, W) tensor in the scope, laid out as p's operands are
 * (conv.h). */
static Tensor *conv_operand(const CtConv2dParams *p, const int64_t shape[4], CtDType dt,
                            CtDevice dev)
{
    return ct_scope_adopt(ct_tensor_new_laid_out(4, shape, dt, dev, p->nhwc));
}

/* Forward kernel: y <- conv(x, w) + b, then relu(y) when p->relu. x, w, b
 * laid out as p says (conv.h). */
static Tensor *conv_forward(const CtConv2dParams *p, Tensor *x, Tensor *w, Tensor *b)
{
    int64_t shape[4] = {p->n, p->o, p->oh, p->ow};
    Tensor *y = conv_operand(p, shape, x->dtype, x->storage->device);
    if (!y) return NULL;
    CtOpCall c = {.op = CT_OP_CONV2D, .out = {y}, .in = {x, w, b}, .params = p};
    return ct_dispatch(&c) == CT_OK ? y : ct_op_discard(y);
}

/* in: x, w, b (b may be NULL). Gradients come from two kernels: data (gx)
 * and weight (gw and gb in one pass over gy). */
static CtStatus conv2d_backward(CtNode *n, Tensor *gout, Tensor **gin)
{
    const CtConv2dParams *p = CT_NODE_PARAMS(n, CtConv2dParams);
    /* the kernels read operands laid out as p says: the saved copies */
    Tensor *x = n->saved[0], *w = n->saved[1], *b = n->in[2];
    Tensor *gy = ct_scope_adopt(ct_layout_ref(gout, p->nhwc));
    if (!gy) return ct_last_status();
    if (n->needs_grad[0]) {
        gin[0] = p->nhwc
                     ? conv_operand(p, n->in[0]->shape, gy->dtype, gy->storage->device)
                     : ct_node_grad_buffer(n, 0, n->in[0]);
        if (!gin[0]) return ct_last_status();
        CtOpCall c = {
            .op = CT_OP_CONV2D_BWD_DATA, .out = {gin[0]}, .in = {gy, w}, .params = p};
        CtStatus st = ct_dispatch(&c);
        if (st != CT_OK) return st;
    }
    bool need_w = n->needs_grad[1], need_b = b && n->needs_grad[2];
    if (need_w || need_b) {
        if (need_w && !(gin[1] = ct_node_grad_buffer(n, 1, n->in[1])))
            return ct_last_status();
        if (need_b && !(gin[2] = ct_node_grad_buffer(n, 2, b))) return ct_last_status();
        /* channels last: gw comes stored as w is, then goes to w's layout */
        Tensor *gw = need_w && p->nhwc
                         ? conv_operand(p, w->shape, w->dtype, w->storage->device)
                         : gin[1];
        if (need_w && !gw) return ct_last_status();
        CtOpCall c = {.op = CT_OP_CONV2D_BWD_WEIGHT,
                      .out = {gw, gin[2]},
                      .in = {gy, x},
                      .params = p};
        CtStatus st = ct_dispatch(&c);
        if (st == CT_OK && gw != gin[1]) st = tensor_copy_(gin[1], gw);
        if (st != CT_OK) return st;
    }
    return CT_OK;
}

/* Validates the arguments and fills p; records an error and returns false
 * otherwise. */
static bool conv_params(const Tensor *x, const Tensor *w, const Tensor *b,
                        const CtConv2dArgs *args, CtConv2dParams *p)
{
    char dx[96], dw[96], db[96];
    if (!ct_check_float(OP, x) || !ct_check_same_dtype(OP, x, w) ||
        (b && !ct_check_same_dtype(OP, x, b)))
        return false;
    if (x->ndim != 4) {
        ct_error(CT_ERR_SHAPE, OP ": x must be 4-d (N, C, H, W), got %s",
                 tensor_describe(x, dx, sizeof dx));
        return false;
    }
    if (w->ndim != 4) {
        ct_error(CT_ERR_SHAPE, OP ": w must be 4-d (O, C/groups, kh, kw), got %s",
                 tensor_describe(w, dw, sizeof dw));
        return false;
    }
    static const CtConv2dArgs defaults; /* all zero: the defaults */
    CtConv2dArgs a = args ? *args : defaults;
    *p = (CtConv2dParams){
        .n = x->shape[0],
        .c = x->shape[1],
        .h = x->shape[2],
        .w = x->shape[3],
        .o = w->shape[0],
        .kh = w->shape[2],
        .kw = w->shape[3],
        .sh = a.stride[0] ? a.stride[0] : 1,
        .sw = a.stride[1] ? a.stride[1] : 1,
        .ph = a.padding[0],
        .pw = a.padding[1],
        .dh = a.dilation[0] ? a.dilation[0] : 1,
        .dw = a.dilation[1] ? a.dilation[1] : 1,
        .groups = a.groups ? a.groups : 1,
        .relu = a.relu,
    };
    if (p->sh < 0 || p->sw < 0 || p->dh < 0 || p->dw < 0 || p->ph < 0 || p->pw < 0 ||
        p->groups < 0) {
        ct_error(CT_ERR_INVALID,
                 OP ": negative argument (stride %dx%d, padding %dx%d, dilation %dx%d, "
                    "groups %d)",
                 p->sh, p->sw, p->ph, p->pw, p->dh, p->dw, p->groups);
        return false;
    }
    if (p->c % p->groups != 0 || p->o % p->groups != 0) {
        ct_error(CT_ERR_SHAPE,
                 OP ": groups %d must divide the input channels and the output channels "
                    "(x %s, w %s)",
                 p->groups, tensor_describe(x, dx, sizeof dx),
                 tensor_describe(w, dw, sizeof dw));
        return false;
    }
    if (w->shape[1] * p->groups != p->c) {
        ct_error(CT_ERR_SHAPE,
                 OP ": x %s has %lld channels but w %s expects %lld (C/groups = %lld, "
                    "groups %d)",
                 tensor_describe(x, dx, sizeof dx), (long long)p->c,
                 tensor_describe(w, dw, sizeof dw), (long long)(w->shape[1] * p->groups),
                 (long long)w->shape[1], p->groups);
        return false;
    }
    if (b && (b->ndim != 1 || b->shape[0] != p->o)) {
        ct_error(CT_ERR_SHAPE, OP ": bias %s must be (%lld) for w %s",
                 tensor_describe(b, db, sizeof db), (long long)p->o,
                 tensor_describe(w, dw, sizeof dw));
        return false;
    }
    int64_t ekh = (int64_t)p->dh * (p->kh - 1) + 1,
            ekw = (int64_t)p->dw * (p->kw - 1) + 1;
    int64_t hp = p->h + 2 * (int64_t)p->ph, wp = p->w + 2 * (int64_t)p->pw;
    if (p->kh < 1 || p->kw < 1 || ekh > hp || ekw > wp) {
        ct_error(CT_ERR_SHAPE,
                 OP ": kernel %lldx%lld (dilated %lldx%lld) is larger than the padded "
                    "input %lldx%lld (x %s, w %s)",
                 (long long)p->kh, (long long)p->kw, (long long)ekh, (long long)ekw,
                 (long long)hp, (long long)wp, tensor_describe(x, dx, sizeof dx),
                 tensor_describe(w, dw, sizeof dw));
        return false;
    }
    p->oh = (hp - ekh) / p->sh + 1;
    p->ow = (wp - ekw) / p->sw + 1;
    return ct_autocast_pick(OP, x, &p->autocast);
}

static Tensor *conv_again(Tensor **ops, const void *args)
{
    return tensor_conv2d(ops[0], ops[1], ops[2], (const CtConv2dArgs *)args);
}

Tensor *tensor_conv2d(Tensor *x, Tensor *w, Tensor *b, const CtConv2dArgs *args)
{
    int nin = b ? 3 : 2;
    if (!ct_check_inputs(OP, nin, (const Tensor *[]){x, w, b})) return NULL;
    CtDType low;
    Tensor *ops[3] = {x, w, b};
    /* on CUDA: the operands cast to the low dtype, which the output keeps */
    if (ct_autocast_low_activations(x, &low) && ct_autocast_needs_cast(3, ops, low))
        return ct_autocast_call(3, ops, low, conv_again, args);
    CtConv2dParams p;
    if (!conv_params(x, w, b, args, &p)) return NULL;
    CtOpCall probe = {.op = CT_OP_CONV2D, .in = {x, w, b}, .params = &p};
    ct_pick_channels_last(x, &probe, &p.nhwc);
    Tensor *xc = ct_layout_ref(x, p.nhwc), *wc = ct_layout_ref(w, p.nhwc);
    Tensor *bc = b ? ct_contiguous_ref(b) : NULL;
    Tensor *y = NULL;
    if (xc && wc && (!b || bc)) y = conv_forward(&p, xc, wc, bc);
    CtNode *n = NULL;
    if (y && ct_node_new(y, OP, conv2d_backward, 3, (Tensor *[]){x, w, b}, &n) != CT_OK)
        y = ct_op_discard(y);
    if (n) {
        *CT_NODE_PARAMS(n, CtConv2dParams) = p;
        ct_node_save(n, 0, xc);
        ct_node_save(n, 1, wc);
        if (p.relu && ct_node_fuse_relu(n, y) != CT_OK) y = ct_op_discard(y);
    }
    tensor_free(xc);
    tensor_free(wc);
    tensor_free(bc);
    return y;
}
