/* Atomic file writes: temporary file, fsync, rename, directory fsync. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctrainer/io.h"

struct CtAtomicFile {
    FILE *stream;
    char *path, *tmp; /* one allocation: tmp points into it */
};

/* Creates "<path>.tmp.XXXXXX" exclusively. Unlike mkstemp, open() with 0666
 * lets the umask decide the final file's permissions. */
static int open_temp(const char *path, char *tmp, size_t n)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
                 ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)tmp;
    for (int attempt = 0; attempt < 100; attempt++) {
        char suffix[7];
        for (int i = 0; i < 6; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            suffix[i] = chars[(x >> 33) % (sizeof chars - 1)];
        }
        suffix[6] = '\0';
        snprintf(tmp, n, "%s.tmp.%s", path, suffix);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

/* fsync of the directory makes the rename itself durable. Best effort. */
static void sync_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

CtAtomicFile *ct_atomic_file_open(const char *path)
{
    if (!path) {
        ct_error(CT_ERR_NULL, "ct_atomic_file_open: NULL path");
        return NULL;
    }
    size_t plen = strlen(path) + 1, tlen = plen + 16;
    CtAtomicFile *f = malloc(sizeof *f + plen + tlen);
    if (!f) {
        ct_error(CT_ERR_OOM, "%s: out of memory opening for writing", path);
        return NULL;
    }
    f->path = memcpy((char *)(f + 1), path, plen);
    f->tmp = f->path + plen;
    int fd = open_temp(path, f->tmp, tlen);
    f->stream = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f->stream) {
        ct_error(CT_ERR_IO, "%s: cannot create %s: %s", path, f->tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(f->tmp);
        }
        free(f);
        return NULL;
    }
    return f;
}

FILE *ct_atomic_file_stream(CtAtomicFile *f)
{
    return f ? f->stream : NULL;
}

void ct_atomic_file_abort(CtAtomicFile *f)
{
    if (!f) return;
    fclose(f->stream);
    unlink(f->tmp);
    free(f);
}

CtStatus ct_atomic_file_commit(CtAtomicFile *f)
{
    if (!f) return ct_error(CT_ERR_NULL, "ct_atomic_file_commit: NULL file");
    CtStatus st = CT_OK;
    if (fflush(f->stream) != 0 || fsync(fileno(f->stream)) != 0)
        st = ct_error(CT_ERR_IO, "%s: writing %s: %s", f->path, f->tmp, strerror(errno));
    if (fclose(f->stream) != 0 && st == CT_OK)
        st = ct_error(CT_ERR_IO, "%s: closing %s: %s", f->path, f->tmp, strerror(errno));
    if (st == CT_OK && rename(f->tmp, f->path) != 0)
        st = ct_error(CT_ERR_IO, "%s: renaming %s into place: %s", f->path, f->tmp,
                      strerror(errno));
    if (st != CT_OK)
        unlink(f->tmp);
    else
        sync_parent_dir(f->path);
    free(f);
    return st;
}

CtStatus ct_write_file_atomic(const char *path, const void *data, size_t n)
{
    if (!path || (!data && n > 0))
        return ct_error(CT_ERR_NULL, "ct_write_file_atomic: NULL %s",
                        path ? "data" : "path");
    CtAtomicFile *f = ct_atomic_file_open(path);
    if (!f) return ct_last_status();
    if (n > 0 && fwrite(data, 1, n, f->stream) != n) {
        CtStatus st =
            ct_error(CT_ERR_IO, "%s: writing %s: %s", path, f->tmp, strerror(errno));
        ct_atomic_file_abort(f);
        return st;
    }
    return ct_atomic_file_commit(f);
}
