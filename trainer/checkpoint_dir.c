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

/* checkpoint_<n>.tmp-<pid>, checkpoint_<n>.old-<pid>, and the temporary
 * file of the pointer's atomic write (latest.tmp.<suffix>): left by a save
 * that was killed. */
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

/* The main process: root created, the index of the next checkpoint. */
static CtStatus next_index(const char *root, int64_t *next)
{
    if (mkdir(root, 0755) != 0 && errno != EEXIST)
        return ct_error(CT_ERR_IO, "trainer_save_checkpoint: cannot create %s: %s", root,
                        strerror(errno));
    long long *idx = NULL;
    int n = 0;
    CtStatus st = list_checkpoints(root, &idx, &n);
    *next = n > 0 ? idx[n - 1] + 1 : 0;
    free(idx);
    return st;
}

/* The main process, once the checkpoint is in place: the pointer (last
 * step of the save), then rotation and the leftovers of killed saves. */
static CtStatus point_latest(const char *root, const char *name, int total_limit)
{
    char *latest = ckpt_join(root, CKPT_LATEST);
    if (!latest) return ct_last_status();
    char text[80];
    int len = snprintf(text, sizeof text, "%s\n", name);
    CtStatus st = ct_write_file_atomic(latest, text, (size_t)len);
    free(latest);
    if (st == CT_OK && total_limit > 0) st = rotate(root, total_limit);
    if (st == CT_OK) st = remove_leftovers(root);
    return st;
}

/* Collective: the main process picks the index and moves the pointer, with
 * an agreement after each step (see trainer_save_state). */
CtStatus trainer_save_checkpoint(Trainer *t, const char *root, int total_limit)
{
    if (!t || !t->state)
        return ct_error(CT_ERR_NULL, "trainer_save_checkpoint: NULL trainer");
    if (!root || !*root)
        return ct_error(CT_ERR_NULL, "trainer_save_checkpoint: NULL/empty directory");
    if (total_limit < 0)
        return ct_error(CT_ERR_INVALID, "trainer_save_checkpoint: total_limit %d < 0",
                        total_limit);
    ct_clear_error();
    bool main = runtime_is_main_process(trainer_runtime(t));
    int64_t next = 0;
    char *base = ckpt_trim(root), name[64];
    size_t n = base ? strlen(base) + 64 : 0;
    char *dir = base ? malloc(n) : NULL;
    CtStatus st = dir    ? CT_OK
                  : base ? ct_error(CT_ERR_OOM, "checkpoint: out of memory")
                         : ct_last_status();
    if (st == CT_OK && main) st = next_index(base, &next);
    st = ckpt_agree(t, st, &next);
    snprintf(name, sizeof name, CKPT_PREFIX "%lld", (long long)next);
    if (st == CT_OK) {
        snprintf(dir, n, "%s%s%s", base, strcmp(base, "/") == 0 ? "" : "/", name);
        st = trainer_save_state(t, dir);
    }
    if (st == CT_OK)
        st = ckpt_agree(t, main ? point_latest(base, name, total_limit) : CT_OK, NULL);
    free(dir);
    free(base);
    return st;
}

char *trainer_latest_checkpoint(const char *root)
{
    if (!root) {
        ct_error(CT_ERR_NULL, "trainer_latest_checkpoint: NULL directory");
        return NULL;
    }
    char *base = ckpt_trim(root), *text = NULL;
    char *path = base ? ckpt_join(base, CKPT_LATEST) : NULL;
    size_t n = 0;
    CtStatus st = path ? ckpt_read_file(path, &text, &n) : ct_last_status();
    while (st == CT_OK && n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = '\0';
    if (st == CT_OK && checkpoint_index(text) < 0)
        st = ct_error(CT_ERR_FORMAT,
                      "trainer_latest_checkpoint: %s does not name a checkpoint "
                      "directory (\"%.40s\")",
                      path, text);
    char *dir = st == CT_OK ? ckpt_join(base, text) : NULL;
    if (st != CT_OK && st != CT_ERR_FORMAT)
        ct_error(CT_ERR_IO, "trainer_latest_checkpoint: no checkpoint in %s (%s missing)",
                 root, path ? path : "latest");
    free(text);
    free(path);
    free(base);
    return dir;
}
