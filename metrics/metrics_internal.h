/* Private helpers of the metrics layer. */
#ifndef CTRAINER_METRICS_INTERNAL_H
#define CTRAINER_METRICS_INTERNAL_H

#include "ctrainer/metrics.h"

/* The inputs of one update and their lazily made host copies. */
struct MetricBatch {
    Tensor *preds, *target;
    double *preds_f64, *target_f64;
    int64_t *target_i64;
};

/* Frees the host copies (not the tensors). */
void metric_batch_release(MetricBatch *b);

/* The vtable's check (OK when it has none) and update, for collections. */
CtStatus metric_check_batch(Metric *m, MetricBatch *b);
CtStatus metric_update_batch(Metric *m, MetricBatch *b);

/* Records "<what> is NULL" unless an error is already recorded (sticky NULL
 * inputs keep the first message); returns CT_ERR_NULL. */
CtStatus metric_null(const char *name, const char *what);

/* Writes "[8, 4]" into buf (>= 128 bytes); returns buf. */
const char *metric_shape_str(const Tensor *t, char *buf);

/* True for i64, i32 and u8. */
bool metric_dtype_is_index(CtDType dt);

/* CT_ERR_INVALID unless 2 <= num_classes <= 2^24 (torchmetrics wants >= 2). */
CtStatus metric_check_num_classes(const char *name, int64_t num_classes);

/* Classification inputs: preds (N, C) scores or (N) indices, target (N)
 * indices in [0, C). Checks shapes, dtypes and ranges (and that index preds
 * are not combined with top_k > 1); records errors prefixed with `name`. */
CtStatus metric_class_check(const char *name, MetricBatch *b, int64_t num_classes,
                            int top_k);

/* After a successful check: true when preds are (N, C) scores. */
bool metric_class_has_scores(const MetricBatch *b);

/* Index of the highest of row[0 .. c) (first one on ties; NaN counts as the
 * highest, like torch.argmax). */
int64_t metric_argmax(const double *row, int64_t c);

/* Marks in `in` (c bytes) the k highest of row[0 .. c); ties go to the lower
 * index. */
void metric_topk_mask(const double *row, int64_t c, int k, unsigned char *in);

#endif
