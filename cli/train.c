/* posenc train: one training run of the small Transformer (train/), with progress on one
 * updating line, safetensors checkpoints, --resume, and a final evaluation at multiples of
 * the training length. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../train/trainer.h"
#include "../src/io/output.h"
#include "cli.h"
#include "../train/env.h"

static void usage(void) {
    printf("usage: posenc train [--OPTION VALUE ...] [--save FILE] [--save-every N] [--resume FILE]\n"
           "                    [--threads N] [--quiet]\n\n"
           "Trains the small Transformer (token embedding, pre-LayerNorm blocks with the chosen encoding,\n"
           "GELU MLP, tied output) with AdamW, warm-up and cosine decay, gradient clipping; then evaluates\n"
           "at multiples of the training length.\n\n");
    tr_options_help();
    printf("  --save FILE             checkpoint (safetensors) at the end, every --save-every steps and on Ctrl-C\n"
           "  --save-every N          steps between checkpoints (default: only at the end)\n"
           "  --resume FILE           continue a checkpoint's run (its options, --save and --save-every; later\n"
           "                          flags override)\n"
           "  --threads N             BLAS threads (default 1: at this size one thread per run is fastest)\n"
           "  --quiet                 no progress line\n");
}

static volatile sig_atomic_t interrupted;
static void on_interrupt(int sig) {
    (void)sig;
    interrupted = 1;
}

int cli_train(int argc, char **argv) {
    const char *save = NULL, *resume = NULL;
    int64_t save_every = 0;
    int every_given = 0;
    static char ck_save[512];
    int threads = 1, quiet = 0;
    pe_err err = {{0}};
    tr_options o;
    tr_options_default(&o);
    /* pass 1: the run's own flags, and the checkpoint to resume */
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "--quiet")) quiet = 1;
        else if (strncmp(a, "--", 2) || !a[2]) return cli_fail("train: unexpected argument '%s' (try: posenc train --help)", a);
        else if (!has) return cli_fail("train: %s needs a value", a);
        else if (!strcmp(a, "--save")) save = argv[++i];
        else if (!strcmp(a, "--resume")) resume = argv[++i];
        else if (!strcmp(a, "--save-every") || !strcmp(a, "--threads")) {
            long long x;
            if (cli_int(a, argv[++i], a[2] == 't' ? 1 : 0, a[2] == 't' ? 1024 : 1LL << 40, &x)) return 2;
            if (a[2] == 't') threads = (int)x;
            else save_every = x, every_given = 1;
        }
        else if (!tr_options_known(a + 2)) return cli_fail("train: unknown option '%s' (try: posenc train --help)", a);
        else i++;
    }
    if (threads < 1) return cli_fail("train: --threads needs a positive count");
    if (resume) { /* a resumed run goes on saving where it saved, unless told otherwise */
        int64_t ck_every = 0;
        if (tr_checkpoint_saving(resume, ck_save, sizeof ck_save, &ck_every, &err)) return cli_fail("train: %s", err.msg);
        if (!save && ck_save[0]) save = ck_save;
        if (!every_given) save_every = ck_every;
    }
    if (save) { /* a --save that cannot be written fails now, not after the run */
        pe_out probe;
        if (pe_out_open(&probe, save, &err)) return cli_fail("train: --save: %s", err.msg);
        pe_out_abort(&probe);
    }
    tr_env_blas_select("train", argc, argv);
    if (resume && tr_checkpoint_options(resume, &o, &err)) return cli_fail("train: %s", err.msg);
    /* pass 2: the run's options (over the checkpoint's) */
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quiet")) continue;
        if (!strcmp(a, "--save") || !strcmp(a, "--resume") || !strcmp(a, "--save-every") || !strcmp(a, "--threads")) {
            i++;
            continue;
        }
        if (tr_options_set(&o, a + 2, argv[++i], &err)) return cli_fail("train: %s", err.msg);
    }
    tr_env_setup(threads);

    tr_task task;
    tr_run run;
    if (tr_task_from_options(&task, &o, &err)) return cli_fail("train: %s", err.msg);
    if (tr_run_init(&run, &o, &task, &err)) {
        tr_task_free(&task);
        return cli_fail("train: %s", err.msg);
    }
    int rc = 0;
    if (save) snprintf(run.save, sizeof run.save, "%s", save);
    run.save_every = save_every;
    if (resume && tr_run_load(&run, resume, &err)) {
        rc = cli_fail("train: %s", err.msg);
        goto done;
    }
    const tr_options *ro = &run.o;
    printf("posenc train: %s on %s (training length %lld%s), %lld layers x %lld wide, %lld heads, %zu parameters,\n"
           "  %lld steps of %lld sequences, lr %g, seed %llu\n",
           ro->method, ro->text[0] ? ro->text : ro->task, (long long)ro->length,
           ro->shape ? ", SHAPE" : "", (long long)ro->layers, (long long)ro->width, (long long)ro->heads,
           tr_model_size(run.model), (long long)ro->steps, (long long)ro->batch, ro->lr,
           (unsigned long long)ro->seed);
    if (resume) printf("  (resumed from %s at step %lld)\n", resume, (long long)run.step);
    fflush(stdout);

    double t0 = tr_now(), last_print = 0, loss = 0, ema = NAN;
    int64_t tokens = 0, start = run.step;
    int tty = isatty(2);
    struct sigaction sa = {.sa_handler = on_interrupt}, old_int;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int); /* Ctrl-C: a last checkpoint, then stop */
    while (run.step < ro->steps) {
        int64_t tk;
        if (interrupted) {
            sigaction(SIGINT, &old_int, NULL);
            if (save && !tr_run_save(&run, save, &err))
                fprintf(stderr, "\nposenc: train: interrupted at step %lld; checkpoint %s (posenc train --resume %s goes on)\n",
                        (long long)run.step, save, save);
            else if (save)
                fprintf(stderr, "\nposenc: train: interrupted at step %lld; the checkpoint failed: %s\n", (long long)run.step,
                        err.msg);
            else
                fprintf(stderr, "\nposenc: train: interrupted at step %lld (no --save: nothing kept)\n", (long long)run.step);
            rc = 130;
            goto done;
        }
        if (tr_run_step(&run, &loss, &tk, &err)) {
            rc = cli_fail("train: step %lld: %s", (long long)run.step, err.msg);
            goto done;
        }
        if (!isfinite(loss)) {
            rc = cli_fail("train: step %lld: the loss is not finite", (long long)run.step);
            goto done;
        }
        tokens += tk;
        ema = isnan(ema) ? loss : 0.9 * ema + 0.1 * loss;
        double el = tr_now() - t0;
        int last = run.step == ro->steps;
        if (!quiet && (el - last_print > (tty ? 0.25 : 10.0) || last)) {
            char eta[32];
            tr_format_time(eta, sizeof eta, el / (double)(run.step - start) * (double)(ro->steps - run.step));
            fprintf(stderr, "%sstep %lld/%lld  loss %.4f  %.1fk tok/s  ETA %s   %s", tty ? "\r" : "",
                    (long long)run.step, (long long)ro->steps, ema, tokens / el / 1e3, eta, tty && !last ? "" : "\n");
            last_print = el;
        }
        if (save && save_every > 0 && run.step % save_every == 0 && !last && tr_run_save(&run, save, &err)) {
            rc = cli_fail("train: %s", err.msg);
            goto done;
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    double el = tr_now() - t0;
    if (run.step > start)
        printf("trained %lld steps in %.1f s: %.1fk tokens/s, last loss %.4f\n", (long long)(run.step - start), el,
               tokens / el / 1e3, loss);
    if (save) {
        if (tr_run_save(&run, save, &err)) {
            rc = cli_fail("train: %s", err.msg);
            goto done;
        }
        printf("checkpoint: %s\n", save);
    }
    printf("\n%8s %8s %8s %10s %8s\n", "length", "loss", "bpc", "token acc", "exact");
    for (int k = 0; k < ro->n_eval; k++) {
        tr_metrics mt;
        if (tr_run_eval(&run, ro->eval[k], &mt, &err)) {
            rc = cli_fail("train: evaluation: %s", err.msg);
            goto done;
        }
        printf("%8lld %8.4f %8.4f %10.4f %8.4f\n", (long long)mt.n, mt.loss, mt.bpc, mt.token_acc, mt.exact);
    }
done:
    tr_run_free(&run);
    tr_task_free(&task);
    return rc;
}
