/* A ResNet state dict made by PyTorch (make_resnet_fixture.py), loaded as
 * the fine-tuning example loads a user's file (nn_model_resnet_load), gives
 * PyTorch's eval-mode logits; the running statistics and num_batches_tracked
 * are the file's; a new head of another size loads the body only.
 *
 *   resnet_fixture DIR MODEL     (DIR/MODEL.safetensors, DIR/MODEL_io.safetensors)
 *
 * Tolerance: max |ours - PyTorch| <= 1e-4 * max(1, max |PyTorch|): both
 * run in f32 with different summation orders through ~20 layers; a wrong
 * weight, statistic or layout moves logits by orders of magnitude more. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrainer/nn.h"

#define TOLERANCE 1e-4

static int fail(const char *what)
{
    fprintf(stderr, "FAIL: %s%s%s\n", what, ct_last_error()[0] ? ": " : "",
            ct_last_error());
    return 1;
}

/* max |a - b| over n f32 values, and max |b| in *scale. */
static double max_diff(const float *a, const float *b, int64_t n, double *scale)
{
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    *scale = s;
    return d;
}

/* The eval-mode logits for io's "input" match io's "logits". */
static int check_logits(Module *m, const CtStateDict *io)
{
    Tensor *x = ct_state_dict_get(io, "input"), *want = ct_state_dict_get(io, "logits");
    if (!x || !want) return fail("the io file lacks input or logits");
    nn_module_eval(m);
    bool was = ct_set_grad_enabled(false);
    CtScope *s = ct_scope_open();
    Tensor *y = nn_forward(m, x);
    int rc = 0;
    if (!y || tensor_numel(y) != tensor_numel(want)) {
        rc = fail("forward");
    } else {
        float *got = malloc((size_t)tensor_numel(y) * sizeof *got);
        double scale;
        if (!got || tensor_copy_to_host(y, got, CT_F32) != CT_OK) {
            rc = fail("copy logits");
        } else {
            double d = max_diff(got, tensor_data(want), tensor_numel(y), &scale);
            printf("logits: max |diff| %.3g, max |logit| %.3g, tolerance %.3g\n", d,
                   scale, TOLERANCE * fmax(1.0, scale));
            if (!(d <= TOLERANCE * fmax(1.0, scale)))
                rc = fail("logits differ from PyTorch's");
        }
        free(got);
    }
    ct_scope_close(s);
    ct_set_grad_enabled(was);
    return rc;
}

/* Every running statistic and num_batches_tracked equals the file's. */
static int check_buffers(Module *m, const CtStateDict *file)
{
    CtStateDict *bufs = nn_module_buffers(m);
    if (!bufs) return fail("buffers");
    int rc = 0, n = 0;
    for (int64_t i = 0; i < ct_state_dict_size(bufs) && !rc; i++) {
        const char *name = ct_state_dict_name(bufs, i);
        Tensor *ours = ct_state_dict_tensor(bufs, i),
               *theirs = ct_state_dict_get(file, name);
        int64_t k = tensor_numel(ours);
        double *a = malloc((size_t)k * sizeof *a), *b = malloc((size_t)k * sizeof *b);
        if (!theirs || !a || !b || tensor_copy_to_host(ours, a, CT_F64) != CT_OK ||
            tensor_copy_to_host(theirs, b, CT_F64) != CT_OK ||
            memcmp(a, b, k * sizeof *a)) {
            fprintf(stderr, "buffer %s: ", name);
            rc = fail("not the file's values");
        }
        if (strstr(name, "num_batches_tracked") && !rc && a[0] != 3) {
            fprintf(stderr, "%s = %g\n", name, a[0]);
            rc = fail("num_batches_tracked is not 3");
        }
        n++;
        free(a);
        free(b);
    }
    ct_state_dict_free(bufs);
    if (!rc) printf("%d buffers equal the file's\n", n);
    return rc;
}

/* With 7 classes: the body is the file's, fc is new (7, width). */
static int check_new_head(const char *path, const CtStateDict *file)
{
    CtGenerator g = ct_generator(1, 0);
    Module *m = nn_model_resnet_load(path, &(NnResNetArgs){.num_classes = 7}, &g, NULL);
    if (!m) return fail("load with a new head");
    Tensor *fc = nn_module_get(m, "fc.weight"),
           *conv = nn_module_get(m, "layer4.1.conv2.weight");
    Tensor *conv_file = ct_state_dict_get(file, "layer4.1.conv2.weight");
    int64_t k = tensor_numel(conv);
    float *a = malloc((size_t)k * sizeof *a);
    int rc = 0;
    if (tensor_shape(fc)[0] != 7 ||
        tensor_shape(fc)[1] != tensor_shape(ct_state_dict_get(file, "fc.weight"))[1])
        rc = fail("the new head is not (7, width)");
    else if (!a || tensor_copy_to_host(conv, a, CT_F32) != CT_OK ||
             memcmp(a, tensor_data(conv_file), (size_t)k * sizeof *a))
        rc = fail("layer4.1.conv2.weight is not the file's under a new head");
    else
        printf("new head: fc (7, %lld), body loaded\n", (long long)tensor_shape(fc)[1]);
    free(a);
    nn_module_free(m);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s DIR resnet18|resnet50d\n", argv[0]);
        return 2;
    }
    char path[4096], io_path[4096];
    snprintf(path, sizeof path, "%s/%s.safetensors", argv[1], argv[2]);
    snprintf(io_path, sizeof io_path, "%s/%s_io.safetensors", argv[1], argv[2]);
    CtGenerator g = ct_generator(0, 0);
    const char *arch = NULL;
    Module *m = nn_model_resnet_load(path, NULL, &g, &arch);
    CtStateDict *file = nn_safetensors_load(path, ct_cpu());
    CtStateDict *io = nn_safetensors_load(io_path, ct_cpu());
    int rc = 0;
    if (!m || !file || !io) {
        rc = fail("load");
    } else if (strcmp(arch, argv[2]) != 0) {
        fprintf(stderr, "detected %s\n", arch);
        rc = fail("wrong architecture");
    } else {
        printf("%s: %s loaded (%lld entries)\n", path, arch,
               (long long)ct_state_dict_size(file));
        rc = check_buffers(m, file);
        if (!rc) rc = check_logits(m, io);
        if (!rc) rc = check_new_head(path, file);
    }
    nn_module_free(m);
    ct_state_dict_free(file);
    ct_state_dict_free(io);
    if (!rc) printf("PASS %s\n", argv[2]);
    return rc;
}
