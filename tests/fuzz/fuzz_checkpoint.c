/* libFuzzer: bytes as a training checkpoint, loaded the way `posenc train --resume` (and
 * `generate --checkpoint`, `plot attention --checkpoint`) loads one: where it saves, its options,
 * the task and the run they describe, then parameters, moments, step and memory. The reader
 * takes a path, so the bytes go to one temporary file (in /dev/shm when there is one), rewritten
 * for every input; a checkpoint that loads then takes one training step, as a resumed run does.
 * Every rejection must be a status and everything is freed.
 *
 * Runs the options describe that would make one input slow (a model past a few thousand
 * parameters, a corpus past 20000 characters, layer keys past 4096) are checked but not built;
 * --text is dropped, so an input never names a file to read. Seeds (tests/fuzz/seeds_checkpoint):
 * checkpoints of `posenc train --save` (width 4, 2 heads, 1 layer, length 4, 2 steps) of 16
 * methods (the memory of xl, input tables, token ids of complex, layer keys) and every task. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../train/env.h"
#include "../../train/trainer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[256];
static int fd = -1;

static void remove_file(void) {
    if (path[0]) unlink(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/fuzz_checkpoint.XXXXXX", dir);
    fd = mkstemp(path);
    if (fd < 0) {
        fprintf(stderr, "fuzz_checkpoint: cannot create %s: %s\n", path, strerror(errno));
        abort();
    }
    atexit(remove_file);
    tr_env_setup(1);
    return 0;
}

/* The whole input into the file, or -1. */
static int put(const uint8_t *data, size_t size) {
    if (ftruncate(fd, 0)) return -1;
    for (size_t done = 0; done < size;) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) return -1;
        done += (size_t)w;
    }
    return 0;
}

/* 1 when the run the options describe is small enough to build for every input. */
static int small(const tr_options *o) {
    if (o->layers > 2 || o->width > 32 || o->mlp > 128 || o->length > 32 || o->batch > 4 || o->shape > 256) return 0;
    if (!strcmp(o->task, "lm") && o->corpus_chars > 20000) return 0;
    for (int k = 0; k < o->n_eval; k++)
        if (o->eval[k] > 8) return 0;
    for (int k = 0; k < o->n_keys; k++) {
        char *end;
        long long v = strtoll(o->val[k], &end, 10);
        if (end != o->val[k] && (v > 4096 || v < -4096)) return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (put(data, size)) abort();
    pe_err err;
    char save[512];
    int64_t save_every;
    if (tr_checkpoint_saving(path, save, sizeof save, &save_every, &err)) return 0;
    tr_options o;
    if (tr_checkpoint_options(path, &o, &err)) return 0;
    o.text[0] = 0;
    if (tr_options_check(&o, &err) || !small(&o)) return 0;
    o.steps++; /* as `--resume FILE --steps N+1` does: a checkpoint at its last step goes on */
    tr_task task;
    if (tr_task_from_options(&task, &o, &err)) return 0;
    tr_run run;
    if (!tr_run_init(&run, &o, &task, &err)) {
        /* then one step from the loaded state (memory included) */
        double loss;
        if (!tr_run_load(&run, path, &err)) tr_run_step(&run, &loss, NULL, &err);
        tr_run_free(&run);
    }
    tr_task_free(&task);
    return 0;
}
