/* Files in and out (output.h): outputs written whole or not at all, inputs that are regular
 * files. Linux first (O_TMPFILE, linkat through /proc/self/fd), POSIX otherwise. */
#define _GNU_SOURCE
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdarg.h>
#include <stdio.h>

#include "posenc.h"

/* Temporary names that exist right now, removed by the signal handler: a SIGINT between
 * creating a name and renaming it leaves nothing behind. (SIGKILL cannot be caught: the
 * unnamed file of O_TMPFILE then simply disappears; only the instant of the rename has a name.) */
enum { MAX_PENDING = 16 };
static char pending[MAX_PENDING][4200];
static volatile sig_atomic_t pending_used[MAX_PENDING];

static void on_signal(int sig) {
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending_used[i]) unlink(pending[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int pending_add(const char *name) {
    static int installed;
    if (!installed) {
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
            struct sigaction old, sa = {.sa_handler = on_signal};
            sigemptyset(&sa.sa_mask);
            if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) sigaction(sigs[i], &sa, NULL);
        }
        installed = 1;
    }
    for (int i = 0; i < MAX_PENDING; i++)
        if (!pending_used[i]) {
            snprintf(pending[i], sizeof pending[i], "%s", name);
            pending_used[i] = 1;
            return i;
        }
    return -1;
}

static void pending_drop(const char *name) {
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending_used[i] && !strcmp(pending[i], name)) pending_used[i] = 0;
}

static void dir_of(const char *path, char *dir, size_t n) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    snprintf(dir, n, "%s", dirname(buf));
}

/* A fresh name beside the target: ".<name>.tmp<pid>.<k>" */
static void temp_name(const pe_out *o, char *out, size_t n, int k) {
    char dir[4096], base[4096];
    dir_of(o->target, dir, sizeof dir);
    snprintf(base, sizeof base, "%s", o->target);
    snprintf(out, n, "%s/.%s.tmp%ld.%d", dir, basename(base), (long)getpid(), k);
}

pe_status pe_out_open(pe_out *o, const char *path, pe_err *err) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
    if (!path || !*path) return pe_error(err, PE_EIO, "no output file name");
    struct stat st;
    snprintf(o->target, sizeof o->target, "%s", path);
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) { /* replace the file the link names */
        char real[PATH_MAX];
        if (realpath(path, real)) {
            snprintf(o->target, sizeof o->target, "%s", real);
        } else { /* a link to a file that does not exist yet: create the file it names */
            char link[2000], dir[2000];
            ssize_t n = readlink(path, link, sizeof link - 1);
            if (n <= 0) return pe_error(err, PE_EIO, "%s: a symlink that cannot be read: %s", path, strerror(errno));
            link[n] = 0;
            dir_of(path, dir, sizeof dir);
            if (n >= (ssize_t)sizeof link - 1) return pe_error(err, PE_EIO, "%s: a symlink to a name too long", path);
            if (link[0] == '/') snprintf(o->target, sizeof o->target, "%s", link);
            else snprintf(o->target, sizeof o->target, "%s/%s", dir, link);
        }
    }
    int exists = stat(o->target, &st) == 0;
    if (exists && !S_ISREG(st.st_mode))
        return pe_error(err, PE_EIO, "%s: not a regular file (%s): refusing to replace it", path,
                        S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
    char dir[4096];
    dir_of(o->target, dir, sizeof dir);
#ifdef O_TMPFILE
    o->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    o->unnamed = o->fd >= 0;
#endif
    for (int k = 0; o->fd < 0 && k < 100; k++) { /* no O_TMPFILE here: a hidden name, removed on signals */
        temp_name(o, o->tmp, sizeof o->tmp, k);
        o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (o->fd < 0 && errno != EEXIST) break;
    }
    if (o->fd < 0) {
        const int e = errno;
        o->tmp[0] = 0;
        return pe_error(err, PE_EIO, "%s: cannot create: %s", path, strerror(e));
    }
    if (!o->unnamed) pending_add(o->tmp);
    if (exists) (void)fchmod(o->fd, st.st_mode & 07777); /* a replaced file keeps its mode */
    else {
        mode_t mask = umask(0);
        umask(mask);
        (void)fchmod(o->fd, 0666 & ~mask);
    }
    if (!(o->fp = fdopen(o->fd, "wb"))) {
        const int e = errno;
        pe_out_abort(o);
        return pe_error(err, PE_EIO, "%s: cannot write: %s", path, strerror(e));
    }
    return PE_OK;
}

void pe_out_abort(pe_out *o) {
    if (o->fp) fclose(o->fp);
    else if (o->fd >= 0) close(o->fd);
    o->fp = NULL, o->fd = -1;
    if (o->tmp[0]) {
        unlink(o->tmp);
        pending_drop(o->tmp);
        o->tmp[0] = 0;
    }
}

/* Step 1 of a commit: the data on disk under a temporary name beside the target (what can fail
 * for want of space). On an error o is aborted. */
static pe_status out_ready(pe_out *o, pe_err *err) {
    int e = 0;
    if (fflush(o->fp) != 0 || ferror(o->fp)) e = errno ? errno : EIO;
    if (!e && fsync(o->fd) != 0) e = errno;
    if (!e && o->unnamed) { /* give the unnamed file a name beside the target */
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", o->fd);
        for (int k = 0;; k++) {
            temp_name(o, o->tmp, sizeof o->tmp, k);
            pending_add(o->tmp);
            if (linkat(AT_FDCWD, proc, AT_FDCWD, o->tmp, AT_SYMLINK_FOLLOW) == 0) break;
            e = errno;
            pending_drop(o->tmp);
            o->tmp[0] = 0;
            if (e != EEXIST || k == 100) break;
            e = 0;
        }
    }
    if (e) {
        pe_out_abort(o);
        return pe_error(err, PE_EIO, "%s: cannot write: %s", o->target, strerror(e));
    }
    return PE_OK;
}

/* Step 2: one rename onto the target (no space needed), and the directory fsynced. */
static pe_status out_place(pe_out *o, pe_err *err) {
    if (rename(o->tmp, o->target) != 0) {
        const int e = errno;
        pe_out_abort(o);
        return pe_error(err, PE_EIO, "%s: cannot write: %s", o->target, strerror(e));
    }
    pending_drop(o->tmp);
    o->tmp[0] = 0;
    fclose(o->fp);
    o->fp = NULL, o->fd = -1;
    char dir[4096];
    dir_of(o->target, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) fsync(dfd), close(dfd); /* the rename itself on disk */
    return PE_OK;
}

pe_status pe_out_commit(pe_out *o, pe_err *err) {
    pe_status st = out_ready(o, err);
    return st ? st : out_place(o, err);
}

pe_status pe_out_commit_all(pe_out *o, int n, pe_err *err) {
    pe_status st = PE_OK;
    for (int i = 0; i < n && !st; i++) st = out_ready(&o[i], err);
    if (st) {
        for (int i = 0; i < n; i++) pe_out_abort(&o[i]); /* the ready ones' temporaries too */
        return st;
    }
    for (int i = 0; i < n; i++) {
        pe_status si = out_place(&o[i], err);
        st = st ? st : si;
    }
    return st;
}

FILE *pe_in_open(const char *path, long long max_bytes, long long *size, pe_err *err) {
    struct stat st;
    if (stat(path, &st) != 0) {
        pe_error(err, PE_EIO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        pe_error(err, PE_EIO, "%s: not a regular file (%s)", path,
                 S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
        return NULL;
    }
    if (max_bytes > 0 && (long long)st.st_size > max_bytes) {
        pe_error(err, PE_EIO, "%s: %lld bytes, more than the %lld this reads", path, (long long)st.st_size, max_bytes);
        return NULL;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        pe_error(err, PE_EIO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (size) *size = (long long)st.st_size;
    return fp;
}
