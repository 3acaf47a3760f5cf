/* An out-of-tree program using an installed ctrainer: a matmul, its sum
 * and an error message, through the public headers only. */
#include <ctrainer/ctrainer.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    CtScope *s = ct_scope_open();
    const float v[] = {1, 2, 3, 4};
    Tensor *a = tensor_from_data(v, 2, (const int64_t[]){2, 2}, CT_F32, ct_cpu());
    double sum = tensor_item(tensor_sum_all(tensor_matmul(a, a))); /* 7+10+15+22 */
    ct_scope_close(s);
    Dataset *d = data_csv_dataset_create(&(DataCsvArgs){.path = "/nonexistent.csv"});
    const char *err = ct_last_error();
    printf("sum %g, error: %s\n", sum, err);
    return sum == 54 && !d && strstr(err, "/nonexistent.csv") ? 0 : 1;
}
