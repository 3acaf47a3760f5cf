/* metrics_tour — the metrics layer in one small program: evaluate noisy
 * 3-class "model outputs" in batches with a MetricCollection (accuracy,
 * top-2 accuracy, macro F1, confusion matrix) plus a weighted Mean of the
 * loss, as two simulated ranks; merge rank 1's states into rank 0 and check
 * that the result equals one collection that saw every batch.
 *
 *   metrics_tour [--cuda]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctrainer/ctrainer.h"
#include "example_cuda.h"

#define SAMPLES 256
#define BATCH   32
#define CLASSES 3

static MetricCollection *make_metrics(void)
{
    MetricCollection *c = metric_collection_create();
    CtStatus st = metric_collection_add(
        c, NULL, metric_accuracy_create(&(MetricClassArgs){.num_classes = CLASSES}));
    if (st == CT_OK)
        st = metric_collection_add(c, "top2_accuracy",
                                   metric_accuracy_create(&(MetricClassArgs){
                                       .num_classes = CLASSES, .top_k = 2}));
    if (st == CT_OK)
        st = metric_collection_add(
            c, "f1_macro",
            metric_f1_create(
                &(MetricClassArgs){.num_classes = CLASSES, .average = METRIC_AVG_MACRO}));
    if (st == CT_OK)
        st = metric_collection_add(c, NULL, metric_confusion_matrix_create(CLASSES));
    if (st == CT_OK) st = metric_collection_add(c, "loss", metric_mean_create());
    if (st != CT_OK) {
        metric_collection_free(c);
        return NULL;
    }
    return c;
}

/* Feeds one batch: classification metrics get (logits, target); "loss"
 * gets the batch's mean cross-entropy weighted by the batch size. */
static CtStatus eval_batch(MetricCollection *c, Tensor *logits, Tensor *target)
{
    CtScope *s = ct_scope_open();
    Tensor *loss = tensor_cross_entropy(logits, target, NULL);
    CtStatus st = loss ? CT_OK : ct_last_status();
    for (int64_t i = 0; i < metric_collection_size(c) && st == CT_OK; i++) {
        Metric *m = metric_collection_get(c, i);
        if (m == metric_collection_find(c, "loss"))
            st = metric_update_scalar(m, tensor_item(loss),
                                      (double)tensor_size(target, 0));
        else
            st = metric_update(m, logits, target);
    }
    ct_scope_close(s);
    return st;
}

static void print_metrics(const char *title, MetricCollection *c)
{
    MetricValue v[8];
    if (metric_collection_compute(c, v, 8) != CT_OK) return;
    printf("%s\n", title);
    for (int64_t i = 0; i < metric_collection_size(c); i++)
        if (v[i].scalar) printf("  %-16s %.4f\n", v[i].name, v[i].value);
    Tensor *cm = metric_compute_tensor(metric_collection_find(c, "confusion_matrix"));
    const int64_t *n = cm ? tensor_data(cm) : NULL;
    for (int r = 0; n && r < CLASSES; r++)
        printf("  %s %4lld %4lld %4lld\n", r ? "                " : "confusion_matrix",
               (long long)n[r * CLASSES], (long long)n[r * CLASSES + 1],
               (long long)n[r * CLASSES + 2]);
    tensor_free(cm);
}

/* Every metric of a and b has the same state. */
static bool same_states(MetricCollection *a, MetricCollection *b)
{
    for (int64_t i = 0; i < metric_collection_size(a); i++) {
        int64_t na, nb;
        const double *sa = metric_state(metric_collection_get(a, i), &na);
        const double *sb = metric_state(metric_collection_get(b, i), &nb);
        if (na != nb) return false;
        for (int64_t j = 0; j < na; j++)
            if (fabs(sa[j] - sb[j]) > 1e-9 * (1 + fabs(sb[j]))) return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    CtDevice dev;
    if (!example_cuda_flag(&argc, argv, &dev)) return 1;
    /* targets cycle through the classes; logits favour the target by 1.5
     * plus unit normal noise */
    int64_t ys[SAMPLES];
    for (int i = 0; i < SAMPLES; i++) ys[i] = i % CLASSES;
    CtGenerator g = ct_generator(7, 0);
    Tensor *target = tensor_from_data(ys, 1, (const int64_t[]){SAMPLES}, CT_I64, dev);
    Tensor *noise =
        tensor_normal(&g, 2, (const int64_t[]){SAMPLES, CLASSES}, 0, 1, CT_F32, dev);
    Tensor *hot = tensor_one_hot(target, CLASSES, CT_F32);
    Tensor *scaled = tensor_mul_scalar(hot, 1.5);
    Tensor *logits = tensor_add(noise, scaled);
    MetricCollection *rank[2] = {make_metrics(), make_metrics()}, *all = make_metrics();
    int rc = 1;
    if (!logits || !rank[0] || !rank[1] || !all) goto done;

    for (int64_t b = 0; b < SAMPLES / BATCH; b++) {
        CtScope *s = ct_scope_open();
        Tensor *x = tensor_slice(logits, 0, b * BATCH, (b + 1) * BATCH, 1);
        Tensor *y = tensor_slice(target, 0, b * BATCH, (b + 1) * BATCH, 1);
        /* even batches on rank 0, odd on rank 1, and everything on `all` */
        CtStatus st = eval_batch(rank[b % 2], x, y);
        if (st == CT_OK) st = eval_batch(all, x, y);
        ct_scope_close(s);
        if (st != CT_OK) goto done;
    }
    /* what the runtime does at the end of evaluation: merge the other
     * rank's state into ours, metric by metric */
    for (int64_t i = 0; i < metric_collection_size(rank[0]); i++)
        if (metric_merge(metric_collection_get(rank[0], i),
                         metric_state(metric_collection_get(rank[1], i), NULL)) != CT_OK)
            goto done;
    print_metrics("merged over 2 ranks:", rank[0]);
    if (!same_states(rank[0], all)) {
        fprintf(stderr, "metrics_tour: merged states differ from a single pass\n");
        goto done;
    }
    printf("equal to one pass over all %d samples\n", SAMPLES);
    rc = 0;
done:
    if (rc) fprintf(stderr, "metrics_tour: %s\n", ct_last_error());
    metric_collection_free(rank[0]);
    metric_collection_free(rank[1]);
    metric_collection_free(all);
    tensor_free(logits);
    tensor_free(scaled);
    tensor_free(hot);
    tensor_free(noise);
    tensor_free(target);
    return rc;
}
