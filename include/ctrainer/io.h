/* ctrainer — atomic file writes.
 *
 * A file written through these functions is either the complete new
 * content or untouched: the bytes go to a fresh temporary file next to the
 * target ("<path>.tmp.XXXXXX"), which is flushed, fsync'ed and renamed over
 * the target; the directory is then fsync'ed so the rename survives a crash.
 * On any failure the temporary file is removed and the old file, if any,
 * stays as it was. The new file's permissions follow the umask, as with
 * fopen. Checkpoints, run histories and logs are all written this way.
 *
 *     CtAtomicFile *af = ct_atomic_file_open("model.safetensors");
 *     if (!af) return ct_last_status();
 *     if (fwrite(buf, 1, n, ct_atomic_file_stream(af)) != n) {
 *         ct_atomic_file_abort(af);
 *         return ct_error(CT_ERR_IO, "...");
 *     }
 *     return ct_atomic_file_commit(af);
 */
#ifndef CTRAINER_IO_H
#define CTRAINER_IO_H

#include <stddef.h>
#include <stdio.h>

#include "ctrainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes n bytes of data to path atomically (see above). CT_ERR_NULL for a
 * NULL path (or NULL data with n > 0); CT_ERR_IO naming the path, the step
 * and the system's reason on failure, e.g. "out/h.json: cannot create
 * out/h.json.tmp.k3x9q2: No such file or directory". */
CtStatus ct_write_file_atomic(const char *path, const void *data, size_t n);

/* A file being written atomically, for content produced in pieces. */
typedef struct CtAtomicFile CtAtomicFile;

/* Creates the temporary file for path. NULL with CT_ERR_NULL (NULL path),
 * CT_ERR_OOM or CT_ERR_IO ("<path>: cannot create <tmp>: <reason>"). The
 * caller ends it with exactly one of ct_atomic_file_commit or
 * ct_atomic_file_abort. */
CtAtomicFile *ct_atomic_file_open(const char *path);

/* The stream to write the content to. Owned by f: do not fclose it. */
FILE *ct_atomic_file_stream(CtAtomicFile *f);

/* Flushes, fsyncs and closes the temporary file, renames it over the
 * target and fsyncs the directory (best effort). Frees f, also on failure,
 * where the temporary file is removed and CT_ERR_IO names the path and the
 * failed step; CT_ERR_NULL for a NULL f. */
CtStatus ct_atomic_file_commit(CtAtomicFile *f);

/* Closes and removes the temporary file, leaving the target untouched, and
 * frees f. NULL: no-op. Records no error (the caller has the reason). */
void ct_atomic_file_abort(CtAtomicFile *f);

#ifdef __cplusplus
}
#endif
#endif
