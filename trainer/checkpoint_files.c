/* Files of a training-state checkpoint: SHA-256 digests (OpenSSL's
 * libcrypto), whole-file reads, durable writes (fsync of files and of the
 * directories that name them) and removal of a directory tree. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint_internal.h"

char *ckpt_join(const char *dir, const char *name)
{
    size_t len = strlen(dir), n = len + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) {
        ct_error(CT_ERR_OOM, "checkpoint: out of memory");
        return NULL;
    }
    bool slash = len > 0 && dir[len - 1] == '/';
    snprintf(p, n, "%s%s%s", dir, slash ? "" : "/", name);
    return p;
}

/* The first n bytes of path, as a new string. */
static char *prefix_copy(const char *path, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) {
        ct_error(CT_ERR_OOM, "checkpoint: out of memory");
        return NULL;
    }
    memcpy(p, path, n);
    p[n] = '\0';
    return p;
}

char *ckpt_trim(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    return prefix_copy(path, n);
}

char *ckpt_parent(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return ckpt_join(".", "");
    return prefix_copy(path, slash == path ? 1 : (size_t)(slash - path));
}

CtStatus ckpt_fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return ct_error(CT_ERR_IO, "checkpoint: open %s: %s", path, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0)
        return ct_error(CT_ERR_IO, "checkpoint: fsync %s: %s", path, strerror(err));
    return CT_OK;
}

CtStatus ckpt_read_file(const char *path, char **data, size_t *n)
{
    *data = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ct_error(CT_ERR_IO, "checkpoint: cannot read %s: %s", path,
                        strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    CtStatus st = buf ? CT_OK : ct_error(CT_ERR_OOM, "checkpoint: out of memory");
    while (st == CT_OK) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb)
            st = ct_error(CT_ERR_OOM, "checkpoint: out of memory reading %s", path);
        else
            buf = nb, cap *= 2;
    }
    if (st == CT_OK && ferror(f))
        st = ct_error(CT_ERR_IO, "checkpoint: read error on %s", path);
    fclose(f);
    if (st != CT_OK) {
        free(buf);
        return st;
    }
    buf[len] = '\0';
    *data = buf;
    *n = len;
    return CT_OK;
}

CtStatus ckpt_sha256_file(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ct_error(CT_ERR_IO, "checkpoint: cannot read %s: %s", path,
                        strerror(errno));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    CtStatus st = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1
                      ? CT_OK
                      : ct_error(CT_ERR_OOM, "checkpoint: cannot start SHA-256");
    unsigned char buf[1 << 16];
    size_t got;
    while (st == CT_OK && (got = fread(buf, 1, sizeof buf, f)) > 0)
        if (EVP_DigestUpdate(ctx, buf, got) != 1)
            st = ct_error(CT_ERR_BACKEND, "checkpoint: SHA-256 of %s failed", path);
    if (st == CT_OK && ferror(f))
        st = ct_error(CT_ERR_IO, "checkpoint: read error on %s", path);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (st == CT_OK && (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32))
        st = ct_error(CT_ERR_BACKEND, "checkpoint: SHA-256 of %s failed", path);
    for (unsigned i = 0; st == CT_OK && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    EVP_MD_CTX_free(ctx);
    fclose(f);
    return st;
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

CtStatus ckpt_remove_tree(const char *dir)
{
    struct stat sb;
    if (lstat(dir, &sb) != 0) return CT_OK; /* nothing there */
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return ct_error(CT_ERR_IO, "checkpoint: cannot remove %s: %s", dir,
                        strerror(errno));
    return CT_OK;
}

bool ckpt_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}
