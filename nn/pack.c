/* Packed parameters: one parameter block and one gradient block per module
 * tree, so zero-grad is one fill and collectives, clipping and optimizers
 * can work on one flat buffer.
 *
 * Parameters keep their identity (tensor_rebind moves their storage into the
 * block); each gradient is a view of the gradient block installed with
 * tensor_set_grad, so backward accumulates straight into the block. Only the
 * module that nn_module_pack / nn_module_to was called on holds blocks. */
#include <string.h>

#include "nn_internal.h"

void nn_pack_release(Module *m)
{
    if (!m || !m->reg) return;
    tensor_free(m->reg->param_block);
    tensor_free(m->reg->grad_block);
    m->reg->param_block = m->reg->grad_block = NULL;
}

static void release_descendants(Module *m)
{
    for (int i = 0; i < nn_module_num_children(m); i++) {
        Module *c = nn_module_child_at(m, i);
        nn_pack_release(c);
        release_descendants(c);
    }
}

/* Does t sit contiguously at element `off` of `block`? */
static bool placed_at(const Tensor *t, const Tensor *block, int64_t off)
{
    if (!t || !tensor_shares_storage(t, block) || !tensor_is_contiguous(t)) return false;
    size_t esz = ct_dtype_size(tensor_dtype(block));
    return (char *)tensor_data(t) == (char *)tensor_data(block) + (size_t)off * esz;
}

/* Walks m's parameters in PyTorch's order, checking that each sits (with
 * its gradient) at *off of the blocks. A parameter found at an earlier
 * offset is one registered twice (packed once) and is skipped. */
static bool walk_placed(const Module *m, const Tensor *pb, const Tensor *gb, int64_t *off)
{
    const NnRegistry *r = m->reg;
    size_t esz = ct_dtype_size(tensor_dtype(pb));
    for (int i = 0; i < r->n_params; i++) {
        const Tensor *p = r->params[i].t;
        if (tensor_dtype(p) != tensor_dtype(pb)) return false;
        if (!placed_at(p, pb, *off)) {
            char *d = tensor_data(p), *b = tensor_data(pb);
            if (tensor_shares_storage(p, pb) && d >= b && d < b + (size_t)*off * esz)
                continue;
            return false;
        }
        if (!placed_at(tensor_grad(p), gb, *off)) return false;
        *off += tensor_numel(p);
    }
    for (int i = 0; i < r->n_children; i++)
        if (!walk_placed(r->children[i].m, pb, gb, off)) return false;
    return true;
}

/* True when m's blocks on dev hold exactly m's parameters (and their
 * gradients), in order. Cheap (no allocation): zero_grad calls it every
 * step. */
static bool packed_ok(const Module *m, CtDevice dev)
{
    Tensor *pb = m && m->reg ? m->reg->param_block : NULL;
    Tensor *gb = m && m->reg ? m->reg->grad_block : NULL;
    if (!pb || !gb || !ct_device_eq(tensor_device(pb), dev)) return false;
    int64_t off = 0;
    return walk_placed(m, pb, gb, &off) && off == tensor_numel(pb);
}

/* The blocks, while they still hold m's parameters and gradients. */
Tensor *nn_module_param_block(const Module *m)
{
    Tensor *pb = m && m->reg ? m->reg->param_block : NULL;
    return pb && packed_ok(m, tensor_device(pb)) ? pb : NULL;
}

Tensor *nn_module_grad_block(const Module *m)
{
    Tensor *gb = m && m->reg ? m->reg->grad_block : NULL;
    return gb && packed_ok(m, tensor_device(gb)) ? gb : NULL;
}

/* All parameters must share a floating dtype (and, unless moving, a
 * device). Returns the total element count, or -1 with an error. */
static int64_t check_params(const Module *m, const CtStateDict *ps, bool same_device)
{
    Tensor *p0 = ct_state_dict_tensor(ps, 0);
    int64_t total = 0;
    char d0[96], d1[96];
    for (int64_t i = 0; i < ct_state_dict_size(ps); i++) {
        Tensor *p = ct_state_dict_tensor(ps, i);
        if (tensor_dtype(p) != tensor_dtype(p0) ||
            (same_device && !ct_device_eq(tensor_device(p), tensor_device(p0)))) {
            ct_error(
                CT_ERR_DTYPE,
                "%s: cannot pack parameters of different dtypes or devices: \"%s\" is "
                "%s, \"%s\" is %s",
                m->vt->type, ct_state_dict_name(ps, 0),
                tensor_describe(p0, d0, sizeof d0), ct_state_dict_name(ps, i),
                tensor_describe(p, d1, sizeof d1));
            return -1;
        }
        total += tensor_numel(p);
    }
    return total;
}

/* Moves every parameter into a new block on dev and every gradient into a
 * view of a new gradient block (existing gradient values are kept; missing
 * ones start at zero). Runs inside its own scope: only the blocks (one
 * reference each, kept) and the parameters' new grads outlive it. */
static CtStatus pack_into(Module *m, const CtStateDict *ps, int64_t total, CtDevice dev)
{
    CtDType dt = tensor_dtype(ct_state_dict_tensor(ps, 0));
    CtScope *s = ct_scope_open();
    if (!s) return ct_last_status();
    Tensor *pb = tensor_empty(1, &total, dt, dev);
    Tensor *gb = tensor_zeros(1, &total, dt, dev);
    CtStatus st = pb && gb ? CT_OK : ct_last_status();
    int64_t off = 0;
    for (int64_t i = 0; st == CT_OK && i < ct_state_dict_size(ps); i++) {
        Tensor *p = ct_state_dict_tensor(ps, i);
        int64_t n = tensor_numel(p);
        Tensor *g = tensor_view(tensor_slice(gb, 0, off, off + n, 1), tensor_ndim(p),
                                tensor_shape(p));
        if (!g) {
            st = ct_last_status();
            break;
        }
        if (tensor_grad(p)) st = tensor_copy_(g, tensor_grad(p));
        if (st == CT_OK) st = tensor_rebind(p, pb, off);
        if (st == CT_OK) st = tensor_set_grad(p, g);
        if (st != CT_OK)
            nn_error_context(st, "%s: packing parameter \"%s\"", m->vt->type,
                             ct_state_dict_name(ps, i));
        off += n;
    }
    if (st == CT_OK) {
        release_descendants(m);
        nn_pack_release(m);
        m->reg->param_block = nn_keep(pb);
        m->reg->grad_block = nn_keep(gb);
    }
    ct_scope_close(s);
    return st;
}

/* Packs m's parameters on dev (NULL: where they are). */
static CtStatus pack(Module *m, const CtDevice *dev)
{
    if (!m || !m->reg) return ct_error(CT_ERR_NULL, "nn_module_pack: NULL module");
    CtStateDict *ps = nn_module_parameters(m);
    if (!ps) return ct_last_status();
    CtStatus st = CT_OK;
    if (ct_state_dict_size(ps) == 0) {
        nn_pack_release(m);
    } else {
        int64_t total = check_params(m, ps, dev == NULL);
        CtDevice to = dev ? *dev : tensor_device(ct_state_dict_tensor(ps, 0));
        if (total < 0)
            st = ct_last_status();
        else if (!packed_ok(m, to))
            st = pack_into(m, ps, total, to);
    }
    ct_state_dict_free(ps);
    return st;
}

CtStatus nn_module_pack(Module *m)
{
    return pack(m, NULL);
}

/* Buffers move one by one (they are few and small): each gets storage of
 * its own on dev, keeping its identity. */
static CtStatus move_buffers(Module *m, CtDevice dev)
{
    CtStateDict *bs = nn_module_buffers(m);
    if (!bs) return ct_last_status();
    CtStatus st = CT_OK;
    for (int64_t i = 0; st == CT_OK && i < ct_state_dict_size(bs); i++) {
        Tensor *b = ct_state_dict_tensor(bs, i);
        if (ct_device_eq(tensor_device(b), dev)) continue;
        int64_t n = tensor_numel(b);
        CtScope *s = ct_scope_open();
        Tensor *blk = s ? tensor_empty(1, &n, tensor_dtype(b), dev) : NULL;
        st = blk ? tensor_rebind(b, blk, 0) : ct_last_status();
        ct_scope_close(s);
        if (st != CT_OK)
            nn_error_context(st, "%s: moving buffer \"%s\"", m->vt->type,
                             ct_state_dict_name(bs, i));
    }
    ct_state_dict_free(bs);
    return st;
}

CtStatus nn_module_to(Module *m, CtDevice dev)
{
    CtStatus st = pack(m, &dev);
    return st == CT_OK ? move_buffers(m, dev) : st;
}

CtStatus nn_module_zero_grad(Module *m)
{
    if (!m || !m->reg) return ct_error(CT_ERR_NULL, "nn_module_zero_grad: NULL module");
    Tensor *gb = nn_module_grad_block(m);
    if (gb) return tensor_zero_(gb);
    CtStateDict *ps = nn_module_parameters(m);
    if (!ps) return ct_last_status();
    CtStatus st = CT_OK;
    for (int64_t i = 0; st == CT_OK && i < ct_state_dict_size(ps); i++) {
        Tensor *g = tensor_grad(ct_state_dict_tensor(ps, i));
        if (g) st = tensor_zero_(g);
    }
    ct_state_dict_free(ps);
    return st;
}
