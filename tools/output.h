/* Files in and out, for every command (CLI, trainer): an output is written whole or not at all,
 * an input must be a regular file. Not part of libposenc. */
#ifndef PE_OUTPUT_H
#define PE_OUTPUT_H

#include <stdio.h>

#include "posenc.h"

/* An output file being written. pe_out_open refuses a target that exists and is not a regular
 * file (a device, FIFO or directory: never replaced), follows a symlink to the file it names,
 * and writes to an unnamed file in the target's directory (O_TMPFILE; a hidden temporary name
 * where the file system has none, removed on any error and on SIGINT, SIGTERM, SIGHUP);
 * pe_out_commit flushes and fsyncs it, puts it in place with one rename and fsyncs the
 * directory. Errors carry the system's reason. After open, exactly one of commit or abort. */
typedef struct pe_out {
    FILE *fp;
    char target[4096]; /* the file replaced (a symlink's target) */
    char tmp[4200];    /* the temporary name, "" while unnamed */
    int fd, unnamed;
} pe_out;

pe_status pe_out_open(pe_out *o, const char *path, pe_err *err);
pe_status pe_out_commit(pe_out *o, pe_err *err);
/* Commits n outputs that belong together (a table, its CSV and its plot): every file's data is
 * flushed and fsynced under its temporary name first, and only when all of them are on disk do
 * the renames (which need no space) put them in place; an error before that removes them all,
 * so a full disk leaves none of the group. Each o is closed afterwards. */
pe_status pe_out_commit_all(pe_out *o, int n, pe_err *err);
void pe_out_abort(pe_out *o);

/* Opens an input for reading: path must be a regular file (not a FIFO, device or directory,
 * which would block or never end) of at most max_bytes; *size gets its size. NULL and err set
 * on failure (with the system's reason). */
FILE *pe_in_open(const char *path, long long max_bytes, long long *size, pe_err *err);

#endif
