/* ImageFolder: image files under a root, labelled by subfolder or by a
 * regex on the file name. Files are listed at creation and decoded in get().
 */
#include <dirent.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "data_internal.h"
#include "image_internal.h"

#define MAX_DEPTH 32 /* guards the recursive walk against symlink cycles */

typedef struct ImageFolder {
    Dataset base;
    char *root;
    int64_t n;
    char **paths;
    int64_t *labels;
    int64_t nclasses;
    char **classes; /* sorted */
    int channels;
    DataTransform transform;
} ImageFolder;

/* ------------------------------------------------------- string vectors */

typedef struct StrVec {
    char **v;
    int64_t n, cap;
} StrVec;

static void strvec_free(StrVec *s)
{
    for (int64_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    *s = (StrVec){0};
}

/* Appends a copy of "dir/name", or of dir when name is NULL; false on OOM
 * (error recorded). */
static bool strvec_push(StrVec *s, const char *dir, const char *name)
{
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 16;
        char **v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) goto oom;
        s->v = v;
        s->cap = cap;
    }
    size_t ld = strlen(dir), ln = name ? strlen(name) + 1 : 0;
    char *p = malloc(ld + ln + 1);
    if (!p) goto oom;
    memcpy(p, dir, ld);
    if (name) {
        p[ld] = '/';
        memcpy(p + ld + 1, name, ln - 1);
    }
    p[ld + ln] = 0;
    s->v[s->n++] = p;
    return true;
oom:
    ct_error(CT_ERR_OOM, "image folder: out of memory listing files");
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Paths "dir/name" ordered by (dir, name), as sorted(os.walk()) then
 * sorted(files) in torchvision. */
static int cmp_path_by_dir(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    size_t dx = (size_t)(strrchr(x, '/') - x), dy = (size_t)(strrchr(y, '/') - y);
    int c = strncmp(x, y, dx < dy ? dx : dy);
    if (c) return c;
    if (dx != dy) return dx < dy ? -1 : 1; /* a prefix sorts first */
    return strcmp(x + dx + 1, y + dy + 1);
}

/* ----------------------------------------------------------------- walking */

/* "dir/name", malloc'd; NULL on OOM (error recorded). */
static char *path_join(const char *dir, const char *name)
{
    size_t ld = strlen(dir), ln = strlen(name);
    char *p = malloc(ld + ln + 2);
    if (!p) {
        ct_error(CT_ERR_OOM, "image folder: out of memory");
        return NULL;
    }
    memcpy(p, dir, ld);
    p[ld] = '/';
    memcpy(p + ld + 1, name, ln + 1);
    return p;
}

typedef enum { ENTRY_FILE, ENTRY_DIR, ENTRY_OTHER } EntryKind;

static EntryKind entry_kind(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return ENTRY_OTHER; /* dangling link and such */
    return S_ISDIR(st.st_mode)   ? ENTRY_DIR
           : S_ISREG(st.st_mode) ? ENTRY_FILE
                                 : ENTRY_OTHER;
}

/* Names in dir (no "." or ".."), sorted, with their kinds in *kinds. */
static CtStatus list_dir(const char *dir, StrVec *names, EntryKind **kinds)
{
    DIR *d = opendir(dir);
    if (!d)
        return ct_error(CT_ERR_IO, "image folder: cannot open %s: %s", dir,
                        strerror(errno));
    *names = (StrVec){0};
    *kinds = NULL;
    struct dirent *e;
    bool ok = true;
    while (ok && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            ok = strvec_push(names, e->d_name, NULL);
    closedir(d);
    if (ok && names->n) qsort(names->v, (size_t)names->n, sizeof *names->v, cmp_str);
    if (ok) *kinds = malloc((size_t)(names->n ? names->n : 1) * sizeof **kinds);
    if (ok && !*kinds) ok = (ct_error(CT_ERR_OOM, "image folder: out of memory"), false);
    for (int64_t i = 0; ok && i < names->n; i++) {
        char *path = path_join(dir, names->v[i]);
        if (path) (*kinds)[i] = entry_kind(path);
        ok = path != NULL;
        free(path);
    }
    if (!ok) free(*kinds);
    if (!ok) strvec_free(names);
    return ok ? CT_OK : ct_last_status();
}

static bool has_image_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") ||
                   !strcasecmp(dot, ".jpeg"));
}

/* Appends the image files under dir (recursively) to out. */
static CtStatus walk_images(const char *dir, int depth, StrVec *out)
{
    if (depth > MAX_DEPTH)
        return ct_error(CT_ERR_INVALID, "image folder: %s is nested over %d levels deep",
                        dir, MAX_DEPTH);
    StrVec names;
    EntryKind *kinds;
    CtStatus st = list_dir(dir, &names, &kinds);
    for (int64_t i = 0; st == CT_OK && i < names.n; i++) {
        if (kinds[i] == ENTRY_DIR) {
            char *sub = path_join(dir, names.v[i]);
            st = sub ? walk_images(sub, depth + 1, out) : ct_last_status();
            free(sub);
        } else if (kinds[i] == ENTRY_FILE && has_image_ext(names.v[i]))
            st = strvec_push(out, dir, names.v[i]) ? CT_OK : ct_last_status();
    }
    strvec_free(&names);
    free(kinds);
    return st;
}

/* ----------------------------------------------------------- the two modes */

/* Moves `files` (with labels) into f. */
static CtStatus take_files(ImageFolder *f, StrVec *files, int64_t *labels)
{
    f->n = files->n;
    f->paths = files->v;
    f->labels = labels;
    *files = (StrVec){0};
    return CT_OK;
}

static CtStatus by_subfolder(ImageFolder *f)
{
    StrVec names, classes = {0}, files = {0};
    EntryKind *kinds;
    CtStatus st = list_dir(f->root, &names, &kinds);
    if (st != CT_OK) return st;
    for (int64_t i = 0; st == CT_OK && i < names.n; i++)
        if (kinds[i] == ENTRY_DIR && !strvec_push(&classes, names.v[i], NULL))
            st = ct_last_status();
    strvec_free(&names);
    free(kinds);
    if (st == CT_OK && classes.n == 0)
        st = ct_error(CT_ERR_INVALID,
                      "image folder %s: no class subfolders (empty folder)", f->root);
    int64_t *labels = NULL;
    for (int64_t k = 0; st == CT_OK && k < classes.n; k++) {
        char *dir = path_join(f->root, classes.v[k]);
        int64_t n0 = files.n;
        st = dir ? walk_images(dir, 0, &files) : ct_last_status();
        free(dir);
        if (st == CT_OK && files.n == n0)
            st = ct_error(
                CT_ERR_INVALID,
                "image folder %s: class folder '%s' has no .png/.jpg/.jpeg files",
                f->root, classes.v[k]);
        if (st != CT_OK) break;
        qsort(files.v + n0, (size_t)(files.n - n0), sizeof *files.v, cmp_path_by_dir);
        int64_t *l = realloc(labels, (size_t)files.n * sizeof *l);
        if (!l) {
            st = ct_error(CT_ERR_OOM, "image folder: out of memory");
            break;
        }
        labels = l;
        for (int64_t i = n0; i < files.n; i++) labels[i] = k;
    }
    if (st == CT_OK) {
        f->nclasses = classes.n;
        f->classes = classes.v;
        classes = (StrVec){0};
        return take_files(f, &files, labels);
    }
    free(labels);
    strvec_free(&classes);
    strvec_free(&files);
    return st;
}

static CtStatus compile_regex(const char *root, const char *re, regex_t *rx)
{
    int rc = regcomp(rx, re, REG_EXTENDED);
    if (rc != 0) {
        char msg[256];
        regerror(rc, rx, msg, sizeof msg);
        return ct_error(CT_ERR_INVALID, "image folder %s: invalid label regex '%s': %s",
                        root, re, msg);
    }
    if (rx->re_nsub < 1) {
        regfree(rx);
        return ct_error(CT_ERR_INVALID,
                        "image folder %s: label regex '%s' has no capture group for the "
                        "class name",
                        root, re);
    }
    return CT_OK;
}

/* The files in root matching rx, and each one's capture (the class name). */
static CtStatus match_files(ImageFolder *f, const regex_t *rx, const char *re,
                            StrVec *files, StrVec *names)
{
    StrVec entries;
    EntryKind *kinds;
    CtStatus st = list_dir(f->root, &entries, &kinds);
    if (st != CT_OK) return st;
    int64_t nfiles = 0;
    for (int64_t i = 0; st == CT_OK && i < entries.n; i++) {
        regmatch_t m[2];
        if (kinds[i] != ENTRY_FILE) continue;
        nfiles++;
        const char *name = entries.v[i];
        if (regexec(rx, name, 2, m, 0) != 0 || m[1].rm_so < 0) continue;
        char cls[1024];
        int len = (int)(m[1].rm_eo - m[1].rm_so);
        snprintf(cls, sizeof cls, "%.*s", len, name + m[1].rm_so);
        if (!strvec_push(files, f->root, name) || !strvec_push(names, cls, NULL))
            st = ct_last_status();
    }
    strvec_free(&entries);
    free(kinds);
    if (st == CT_OK && nfiles == 0)
        st =
            ct_error(CT_ERR_INVALID, "image folder %s: no files (empty folder)", f->root);
    else if (st == CT_OK && files->n == 0)
        st = ct_error(CT_ERR_INVALID,
                      "image folder %s: no file name matches '%s' (%lld files)", f->root,
                      re, (long long)nfiles);
    return st;
}

static CtStatus by_regex(ImageFolder *f, const char *re)
{
    regex_t rx;
    CtStatus st = compile_regex(f->root, re, &rx);
    if (st != CT_OK) return st;
    StrVec files = {0}, names = {0}, classes = {0};
    st = match_files(f, &rx, re, &files, &names);
    regfree(&rx);
    /* classes: the sorted unique names */
    for (int64_t i = 0; st == CT_OK && i < names.n; i++)
        if (!strvec_push(&classes, names.v[i], NULL)) st = ct_last_status();
    int64_t *labels = NULL;
    if (st == CT_OK) {
        qsort(classes.v, (size_t)classes.n, sizeof *classes.v, cmp_str);
        int64_t u = 0;
        for (int64_t i = 0; i < classes.n; i++) {
            if (u > 0 && strcmp(classes.v[u - 1], classes.v[i]) == 0)
                free(classes.v[i]);
            else
                classes.v[u++] = classes.v[i];
        }
        classes.n = u;
        labels = malloc((size_t)files.n * sizeof *labels);
        if (!labels) st = ct_error(CT_ERR_OOM, "image folder: out of memory");
    }
    for (int64_t i = 0; st == CT_OK && i < files.n; i++) {
        char **hit = bsearch(&names.v[i], classes.v, (size_t)classes.n, sizeof *classes.v,
                             cmp_str);
        labels[i] = hit - classes.v;
    }
    strvec_free(&names);
    if (st != CT_OK) {
        free(labels);
        strvec_free(&files);
        strvec_free(&classes);
        return st;
    }
    f->nclasses = classes.n;
    f->classes = classes.v;
    return take_files(f, &files, labels);
}

/* ------------------------------------------------------------- the dataset */

static int64_t folder_len(const Dataset *d)
{
    return ((const ImageFolder *)d)->n;
}

static CtStatus folder_get(const Dataset *d, int64_t i, const DataCtx *ctx,
                           DataSample *out)
{
    const ImageFolder *f = (const ImageFolder *)d;
    if (i < 0 || i >= f->n)
        return ct_error(CT_ERR_INVALID,
                        "image folder %s: index %lld out of range [0, %lld)", f->root,
                        (long long)i, (long long)f->n);
    Tensor *img = data_image_read(f->paths[i], f->channels);
    if (img && f->transform.fn) {
        ct_clear_error(); /* a transform may fail without recording why */
        img = f->transform.fn(img, ctx, f->transform.user);
        if (!img) /* say which file the transform failed on */
            return ct_error_wrap(CT_OK, "%s: transform failed", f->paths[i]);
    }
    Tensor *label = img ? data_label(f->labels[i]) : NULL;
    if (!label) return ct_last_status();
    *out = (DataSample){.n = 2, .t = {img, label}};
    return CT_OK;
}

static void folder_free(Dataset *d)
{
    ImageFolder *f = (ImageFolder *)d;
    for (int64_t i = 0; i < f->n; i++) free(f->paths[i]);
    for (int64_t i = 0; i < f->nclasses; i++) free(f->classes[i]);
    free(f->paths);
    free(f->labels);
    free(f->classes);
    free(f->root);
    free(f);
}

static const DatasetVtable image_folder_vt = {"ImageFolder", folder_len, folder_get,
                                              folder_free};

Dataset *data_image_folder_create(const char *root, const DataImageFolderArgs *args)
{
    DataImageFolderArgs a = args ? *args : (DataImageFolderArgs){0};
    if (!root) {
        ct_error(CT_ERR_NULL, "data_image_folder_create: NULL root");
        return NULL;
    }
    if (a.channels != 0 && a.channels != 1 && a.channels != 3) {
        ct_error(CT_ERR_INVALID, "image folder %s: channels must be 0, 1 or 3, got %d",
                 root, a.channels);
        return NULL;
    }
    ImageFolder *f = calloc(1, sizeof *f);
    size_t lr = strlen(root);
    char *r = malloc(lr + 1);
    if (!f || !r) {
        free(f);
        free(r);
        ct_error(CT_ERR_OOM, "image folder %s: out of memory", root);
        return NULL;
    }
    memcpy(r, root, lr + 1);
    while (lr > 1 && r[lr - 1] == '/') r[--lr] = 0; /* "root/" -> "root" */
    *f = (ImageFolder){.base = {&image_folder_vt},
                       .root = r,
                       .channels = a.channels ? a.channels : 3,
                       .transform = a.transform};
    CtStatus st = a.label_regex ? by_regex(f, a.label_regex) : by_subfolder(f);
    if (st != CT_OK) {
        folder_free(&f->base);
        return NULL;
    }
    return &f->base;
}

/* ---------------------------------------------------------- the label map */

static const ImageFolder *as_folder(const Dataset *d, const char *fn)
{
    if (d && d->vt == &image_folder_vt) return (const ImageFolder *)d;
    ct_error(d ? CT_ERR_INVALID : CT_ERR_NULL, "%s: %s is not an image folder", fn,
             d && d->vt && d->vt->type ? d->vt->type : "NULL dataset");
    return NULL;
}

int64_t data_image_folder_num_classes(const Dataset *d)
{
    const ImageFolder *f = as_folder(d, "data_image_folder_num_classes");
    return f ? f->nclasses : 0;
}

const char *data_image_folder_class_name(const Dataset *d, int64_t id)
{
    const ImageFolder *f = as_folder(d, "data_image_folder_class_name");
    if (!f) return NULL;
    if (id < 0 || id >= f->nclasses) {
        ct_error(CT_ERR_INVALID, "image folder %s: class id %lld out of range [0, %lld)",
                 f->root, (long long)id, (long long)f->nclasses);
        return NULL;
    }
    return f->classes[id];
}

int64_t data_image_folder_class_id(const Dataset *d, const char *name)
{
    const ImageFolder *f = as_folder(d, "data_image_folder_class_id");
    if (!f) return -1;
    char **hit = name ? bsearch(&name, f->classes, (size_t)f->nclasses,
                                sizeof *f->classes, cmp_str)
                      : NULL;
    if (!hit) {
        ct_error(CT_ERR_INVALID, "image folder %s: no class named '%s'", f->root,
                 name ? name : "(null)");
        return -1;
    }
    return hit - f->classes;
}

const char *data_image_folder_path(const Dataset *d, int64_t i)
{
    const ImageFolder *f = as_folder(d, "data_image_folder_path");
    if (!f) return NULL;
    if (i < 0 || i >= f->n) {
        ct_error(CT_ERR_INVALID, "image folder %s: index %lld out of range [0, %lld)",
                 f->root, (long long)i, (long long)f->n);
        return NULL;
    }
    return f->paths[i];
}

int64_t data_image_folder_label(const Dataset *d, int64_t i)
{
    return data_image_folder_path(d, i) ? ((const ImageFolder *)d)->labels[i] : -1;
}
