/* A checkpoint root: checkpoint_<n> directories, rotation to the last K,
 * and the `latest` pointer file, updated last. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint_internal.h"
#include "ctrainer/io.h"

#define CKPT_PREFIX "checkpoint_"
#define CKPT_LATEST "latest"

/* n of "checkpoint_<n>", or -1 for any other name. */
static long long checkpoint_index(const char *name)
{
    size_t p = strlen(CKPT_PREFIX);
    if (strncmp(name, CKPT_PREFIX, p) != 0 || !name[p]) return -1;
    long long v = 0;
    for (const char *c = name + p; *c; c++) {
        if (*c < '0' || *c > '9' || v > 1000000000000LL) return -1;
        v = v * 10 + (*c - '0');
    }
    return v;
}

/* Sorted indices of the checkpoints in root (malloc'd into *out). */
static CtStatus list_checkpoints(const char *root, long long **out, int *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(root);
    if (!d)
        return ct_error(CT_ERR_IO, "checkpoint: cannot list %s: %s", root,
                        strerror(errno));
    int cap = 0;
    CtStatus st = CT_OK;
    for (struct dirent *e; st == CT_OK && (e = readdir(d));) {
        long long i = checkpoint_index(e->d_name);
        if (i < 0) continue;
        if (*n == cap) {
            long long *g = realloc(*out, sizeof **out * (size_t)(cap = cap * 2 + 8));
            if (!g) {
                st = ct_error(CT_ERR_OOM, "checkpoint: out of memory");
                break;
            }
            *out = g;
        }
        (*out)[(*n)++] = i;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) /* insertion sort: a handful of entries */
        for (int j = i; j > 0 && (*out)[j - 1] > (*out)[j]; j--) {
            long long x = (*out)[j];
            (*out)[j] = (*out)[j - 1];
            (*out)[j - 1] = x;
        }
    return st;
}

/* checkpoint_<n>.tmp-<pid>, checkpoint_<n>.old-<pid>, and latest.tmp.XXXXXX
 * (ct_write_file_atomic's temp file): left by a save that was killed. */
static bool is_leftover(const char *name)
{
    if (strncmp(name, CKPT_LATEST ".tmp.", strlen(CKPT_LATEST) + 5) == 0) return true;
    return strncmp(name, CKPT_PREFIX, strlen(CKPT_PREFIX)) == 0 &&
           (strstr(name, ".tmp-") || strstr(name, ".old-"));
}

/* Removes the leftovers of killed saves. */
static CtStatus remove_leftovers(const char *root)
{
    DIR *d = opendir(root);
    if (!d)
        return ct_error(CT_ERR_IO, "checkpoint: cannot list %s: %s", root,
                        strerror(errno));
    CtStatus st = CT_OK;
    for (struct dirent *e; st == CT_OK && (e = readdir(d));) {
        if (!is_leftover(e->d_name)) continue;
        char *path = ckpt_join(root, e->d_name);
        st = path ? ckpt_remove_tree(path) : ct_last_status();
        free(path);
    }
    closedir(d);
    return st;
}

static CtStatus rotate(const char *root, int total_limit)
{
    long long *idx = NULL;
    int n = 0;
    CtStatus st = list_checkpoints(root, &idx, &n);
    for (int i = 0; st == CT_OK && i < n - total_limit; i++) {
        char name[64];
        snprintf(name, sizeof name, CKPT_PREFIX "%lld", idx[i]);
        char *path = ckpt_join(root, name);
        st = path ? ckpt_remove_tree(path) : ct_last_status();
        free(path);
    }
    free(idx);
    return st;
}

CtStatus trainer_save_checkpoint(Trainer *t, const char *root, int total_limit)
{
    if (!root || !*root)
        return ct_error(CT_ERR_NULL, "trainer_save_checkpoint: NULL/empty directory");
    if (total_limit < 0)
        return ct_error(CT_ERR_INVALID, "trainer_save_checkpoint: total_limit %d < 0",
                        total_limit);
    if (mkdir(root, 0755) != 0 && errno != EEXIST)
        return ct_error(CT_ERR_IO, "trainer_save_checkpoint: cannot create %s: %s", root,
                        strerror(errno));
    long long *idx = NULL;
    int n = 0;
    CtStatus st = list_checkpoints(root, &idx, &n);
    long long next = n > 0 ? idx[n - 1] + 1 : 0;
    free(idx);
    char name[64];
    snprintf(name, sizeof name, CKPT_PREFIX "%lld", next);
    char *dir = st == CT_OK ? ckpt_join(root, name) : NULL;
    if (st == CT_OK && !dir) st = ct_last_status();
    if (st == CT_OK) st = trainer_save_state(t, dir);
    free(dir);
    char *latest = st == CT_OK ? ckpt_join(root, CKPT_LATEST) : NULL;
    if (st == CT_OK && !latest) st = ct_last_status();
    /* only the main process moves the pointer and rotates (the others only
     * write their random_states file) */
    bool main = runtime_is_main_process(trainer_runtime(t));
    if (st == CT_OK && main) {
        char text[80];
        int len = snprintf(text, sizeof text, "%s\n", name);
        st = ct_write_file_atomic(latest, text, (size_t)len);
    }
    if (st == CT_OK && main && total_limit > 0) st = rotate(root, total_limit);
    if (st == CT_OK && main) st = remove_leftovers(root);
    free(latest);
    return st;
}

char *trainer_latest_checkpoint(const char *root)
{
    if (!root) {
        ct_error(CT_ERR_NULL, "trainer_latest_checkpoint: NULL directory");
        return NULL;
    }
    char *path = ckpt_join(root, CKPT_LATEST), *text = NULL;
    size_t n = 0;
    CtStatus st = path ? ckpt_read_file(path, &text, &n) : ct_last_status();
    while (st == CT_OK && n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = '\0';
    if (st == CT_OK && checkpoint_index(text) < 0)
        st = ct_error(CT_ERR_FORMAT,
                      "trainer_latest_checkpoint: %s does not name a checkpoint "
                      "directory (\"%.40s\")",
                      path, text);
    char *dir = st == CT_OK ? ckpt_join(root, text) : NULL;
    if (st != CT_OK && st != CT_ERR_FORMAT)
        ct_error(CT_ERR_IO, "trainer_latest_checkpoint: no checkpoint in %s (%s missing)",
                 root, path ? path : "latest");
    free(text);
    free(path);
    return dir;
}
