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

#include "../train/kernels.h"
#include "../train/trainer.h"
#include "../tools/output.h"
#include "cli.h"
#include "options.h"
#include "../train/dist.h"
#include "../train/env.h"

/* The trainer's option names and the layer's keys, for "did you mean". */
static const char *trainer_name(int i) {
    static char names[64][40];
    static int n;
    if (!n) {
        tr_options o;
        char values[64][520];
        tr_options_default(&o);
        n = tr_options_list(&o, names, values, 64);
    }
    return i < n ? names[i] : pe_config_key_name(i - n);
}

int cli_train_keys(const arg_cmd *c, const arg_res *r) {
    for (int i = 0; i < r->n_keys; i++) {
        char spelled[80];
        snprintf(spelled, sizeof spelled, "--%s", r->keys[i]);
        if (!tr_options_known(r->keys[i])) return arg_unknown(c, spelled, trainer_name);
        long long x; /* the one the trainer would take as 0 = "the task's default" */
        char what[96];
        snprintf(what, sizeof what, "%s: --length", c->name);
        if (!strcmp(r->keys[i], "length") && cli_int(what, r->vals[i], 1, 4096, &x)) return 2;
    }
    return 0;
}

static volatile sig_atomic_t interrupted;
static void on_interrupt(int sig) {
    (void)sig;
    interrupted = 1;
}

/* The run of cli_train once its options are set: train, save, evaluate; 0 or an exit status. */
static int train(const tr_options *opts, const train_args *a, const char *save, int64_t save_every) {
    pe_err err = {{0}};
    int rc = 0, quiet = a->quiet;
    const tr_options o = *opts;
    const char *resume = a->resume;
    pe_out curve; /* --loss-log */
    int logging = 0;
    tr_env_setup((int)a->threads);

    tr_task task;
    tr_run run;
    if (tr_task_from_options(&task, &o, &err)) return cli_fail("train: %s", err.msg);
    if (tr_run_init(&run, &o, &task, &err)) {
        tr_task_free(&task);
        return cli_fail("train: %s", err.msg);
    }
    if (save) snprintf(run.save, sizeof run.save, "%s", save);
    run.save_every = save_every;
    const int rank = tr_dist_rank(), ranks = tr_dist_size(), shares = a->shares ? (int)a->shares : ranks;
    if (ranks > 1 && shares != ranks) {
        rc = cli_fail("train: --shares %d under mpirun -n %d: each rank computes one share (leave --shares out)", shares, ranks);
        goto done;
    }
    if (tr_run_distribute(&run, shares, rank, ranks, tr_dist_sum_f32, tr_dist_sum_f64, &err)) {
        rc = cli_fail("train: %s", err.msg);
        goto done;
    }
    /* one process's shares on its threads: a model copy each, BLAS on one thread */
    const int share_threads = ranks == 1 && shares > 1 && a->threads > 1 ? (int)a->threads : 1;
    if (share_threads > 1) tr_env_setup(1);
    if (tr_run_share_threads(&run, share_threads, &err)) {
        rc = cli_fail("train: %s", err.msg);
        goto done;
    }
    for (int t = 0; a->profile && t <= run.threads; t++) tr_model_profile(t ? run.reps[t - 1] : run.model, 1);
    if (rank > 0) save = NULL; /* rank 0 writes the checkpoints: every rank holds the same model */
    if (resume && tr_run_load(&run, resume, &err)) {
        rc = cli_fail("train: %s", err.msg);
        goto done;
    }
    const tr_options *ro = &run.o;
    char label[600], rp[64] = "";
    if (ro->random_positions) snprintf(rp, sizeof rp, ", random positions from [0, %lld)", (long long)ro->random_positions);
    printf("posenc train: %s on %s (training length %lld%s%s%s), %lld layers x %lld wide, %lld heads, %zu parameters,\n"
           "  %lld steps of %lld sequences, lr %g, seed %llu\n",
           tr_options_method_label(ro, label, sizeof label), ro->text[0] ? ro->text : ro->task, (long long)ro->length,
           ro->shape ? ", SHAPE" : "", rp, ro->nope_temperature ? ", NoPE temperature tuning" : "",
           (long long)ro->layers, (long long)ro->width, (long long)ro->heads,
           tr_model_size(run.model), (long long)ro->steps, (long long)ro->batch, ro->lr,
           (unsigned long long)ro->seed);
    char on[32] = "";
    if (run.threads > 1) snprintf(on, sizeof on, ", on %d threads", run.threads);
    if (shares > 1)
        printf("  %s %d %s of %lld sequences each%s, gradients summed in %s order\n", ranks > 1 ? "data parallel over" : "in",
               shares, ranks > 1 ? "ranks" : "shares", (long long)ro->batch / shares, on, ranks > 1 ? "rank" : "share");
    if (resume) printf("  (resumed from %s at step %lld)\n", resume, (long long)run.step);
    fflush(stdout);
    if (a->loss_log && pe_out_open(&curve, a->loss_log, &err)) {
        rc = cli_fail("train: --loss-log: %s", err.msg);
        goto done;
    }
    logging = a->loss_log != NULL;

    double t0 = tr_now(), last_print = 0, loss = 0, ema = NAN;
    int64_t tokens = 0, start = run.step;
    int tty = isatty(2);
    struct sigaction sa = {.sa_handler = on_interrupt}, old_int;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int); /* Ctrl-C: a last checkpoint, then stop */
    /* mpirun(1): "When orterun receives a SIGTERM and SIGINT, it will attempt to kill the entire
     * job by sending all processes in the job a SIGTERM, waiting a small number of seconds, then
     * sending all processes in the job a SIGKILL": over ranks, SIGTERM is the Ctrl-C */
    struct sigaction old_term;
    if (ranks > 1) sigaction(SIGTERM, &sa, &old_term);
    while (run.step < ro->steps) {
        int64_t tk;
        if (tr_dist_any(interrupted)) { /* every rank stops after the same step */
            sigaction(SIGINT, &old_int, NULL);
            rc = 130;
            if (rank > 0) goto done;
            if (save && !tr_run_save(&run, save, &err))
                fprintf(stderr, "\nposenc: train: interrupted at step %lld; checkpoint %s (posenc train --resume %s goes on)\n",
                        (long long)run.step, save, save);
            else if (save)
                fprintf(stderr, "\nposenc: train: interrupted at step %lld; the checkpoint failed: %s\n", (long long)run.step,
                        err.msg);
            else
                fprintf(stderr, "\nposenc: train: interrupted at step %lld (no --save: nothing kept)\n", (long long)run.step);
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
        if (logging) fprintf(curve.fp, "%lld %.17g\n", (long long)run.step, loss);
        tokens += tk;
        ema = isnan(ema) ? loss : 0.9 * ema + 0.1 * loss;
        double el = tr_now() - t0;
        int last = run.step == ro->steps;
        if (!quiet && (el - last_print > (tty ? 0.25 : 10.0) || last)) {
            char eta[32];
            tr_format_time(eta, sizeof eta, el / (double)(run.step - start) * (double)(ro->steps - run.step));
            fprintf(stderr, "%sstep %lld/%lld  train loss %.4f  %.1fk tok/s  ETA %s   %s", tty ? "\r" : "",
                    (long long)run.step, (long long)ro->steps, ema, tokens / el / 1e3, eta, tty && !last ? "" : "\n");
            last_print = el;
        }
        if (save && save_every > 0 && run.step % save_every == 0 && !last && tr_run_save(&run, save, &err)) {
            rc = cli_fail("train: %s", err.msg);
            goto done;
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    if (ranks > 1) sigaction(SIGTERM, &old_term, NULL);
    double el = tr_now() - t0;
    if (run.step > start)
        printf("trained %lld steps in %.1f s: %.1fk tokens/s, train loss of the last step %.4f\n", (long long)(run.step - start), el,
               tokens / el / 1e3, loss);
    if (run.step > start && a->profile) { /* the copies' times, on threads, are thread seconds */
        double at = 0, gm = 0, x, y;
        for (int t = 0; t <= run.threads; t++) {
            tr_model_profile_read(t ? run.reps[t - 1] : run.model, &x, &y, 0);
            at += x, gm += y;
        }
        const double steps = (double)(run.step - start), k = run.threads > 1 ? run.threads : 1, all = el * k;
        printf("profile of a step: %.2f ms%s; the attention layers (their projections included) %.2f ms (%.0f%%), the"
               " MLP and output GEMMs %.2f ms (%.0f%%), the rest (embedding, LayerNorms, GELU, loss, sums, AdamW) %.2f ms"
               " (%.0f%%)\n", 1e3 * all / steps, run.threads > 1 ? " of thread time" : "", 1e3 * at / steps,
               100 * at / all, 1e3 * gm / steps, 100 * gm / all, 1e3 * (all - at - gm) / steps, 100 * (all - at - gm) / all);
        /* the bound: the step's GEMMs alone on its shapes (one thread's BLAS, as the step's) */
        const tr_model_config *mc = tr_model_cfg(run.model);
        const int64_t rows = (int64_t)(tokens / steps + 0.5);
        const double bound = tr_step_gemm_seconds(rows, mc->layers, mc->C, mc->F, mc->V, 5);
        printf("its GEMMs alone (4 projections and the MLP a layer, the tied output; forward and backward, on the step's %lld"
               " rows; best of 5): %.2f ms, so the step is %.2fx its GEMMs\n", (long long)rows, 1e3 * bound, all / steps / bound);
        /* and with the attention's own products, as an eager implementation's bmm runs them */
        const int64_t B = ro->batch, T = rows / B > 0 ? rows / B : 1;
        const double attn = tr_step_attention_gemm_seconds(B, T, mc->heads, mc->C / mc->heads, mc->layers, 5);
        printf("with the attention's six products a head as GEMMs too (q k^T, p v and their backward on every key, as"
               " PyTorch eager's bmm; best of 5): %.2f ms more, so the step is %.2fx all its GEMMs\n", 1e3 * attn,
               all / steps / (bound + attn));
    }
    if (run.step > start && ranks > 1) /* rank 0's: the sums wait for the slowest rank too */
        printf("the sums over %d ranks: %.1f%% of the time (%.2f ms a step, waiting included)\n", ranks,
               100 * run.sum_seconds / el, 1e3 * run.sum_seconds / (double)(run.step - start));
    if (save) {
        if (tr_run_save(&run, save, &err)) {
            rc = cli_fail("train: %s", err.msg);
            goto done;
        }
        printf("checkpoint: %s\n", save);
    }
    if (rank > 0) goto done; /* the same model on every rank: rank 0 evaluates it */
    /* evaluation on held-out sequences; exact match only means something for the tasks,
     * whose answers are either right or wrong (lm has no answer) */
    const int tasks = task.kind != TR_TASK_LM;
    printf("\nevaluation on held-out sequences (loss: mean cross-entropy in nats, as the train loss above)\n"
           "%8s %10s %8s %10s", "length", "eval loss", "bpc", "token acc");
    printf(tasks ? " %8s\n" : "\n", "exact");
    for (int k = 0; k < ro->n_eval; k++) {
        tr_metrics mt;
        if (tr_run_eval(&run, ro->eval[k], &mt, &err)) {
            rc = cli_fail("train: evaluation: %s", err.msg);
            goto done;
        }
        printf("%8lld %10.4f %8.4f %10.4f", (long long)mt.n, mt.loss, mt.bpc, mt.token_acc);
        printf(tasks ? " %8.4f\n" : "\n", mt.exact);
    }
    if (ro->score_lengths[0]) {
        double score;
        if (tr_run_score(&run, &score, &err)) {
            rc = cli_fail("train: --score-lengths: %s", err.msg);
            goto done;
        }
        const int exact = !strcmp(ro->score_metric, "exact");
        printf("score: mean %s over content lengths %s (%s), %d sequences each: %.4f\n", exact ? "exact match" : "token accuracy",
               ro->score_lengths, exact ? "Kazemnejad et al. 2023" : "Ruoss et al. 2023", TR_SCORE_SEQS, score);
    }
done:
    /* the curve up to where the run stopped, Ctrl-C included; nothing of a failed run */
    if (logging && (rc == 0 || rc == 130) && pe_out_commit(&curve, &err)) rc = rc ? rc : cli_fail("train: --loss-log: %s", err.msg);
    else if (logging && rc && rc != 130) pe_out_abort(&curve);
    tr_run_free(&run);
    tr_task_free(&task);
    return rc;
}

int cli_train(int argc, char **argv) {
    train_args a;
    arg_res r;
    ARGS_TRAIN.init(&a);
    int rc = arg_parse(&ARGS_TRAIN, argc, argv, &a, &r);
    if (rc < 0) tr_options_help();
    if (rc) return rc < 0 ? 0 : rc;
    if ((rc = cli_train_keys(&ARGS_TRAIN, &r))) {
        arg_free(&r);
        return rc;
    }
    const char *save = a.save, *resume = a.resume;
    int64_t save_every = a.save_every < 0 ? 0 : a.save_every;
    static char ck_save[512];
    pe_err err = {{0}};
    tr_options o;
    tr_options_default(&o);
    if (resume) { /* a resumed run goes on saving where it saved, unless told otherwise */
        int64_t ck_every = 0;
        if (tr_checkpoint_saving(resume, ck_save, sizeof ck_save, &ck_every, &err)) rc = cli_fail("train: %s", err.msg);
        if (!rc && !save && ck_save[0]) save = ck_save;
        if (a.save_every < 0) save_every = ck_every;
    }
    if (!rc && save == ck_save) { /* the checkpoint's --save, checked now as a given one is */
        pe_out probe;
        if (pe_out_open(&probe, save, &err)) rc = cli_fail("train: --save: %s", err.msg);
        else pe_out_abort(&probe);
    }
    int launched_rank, launched = tr_dist_launched(&launched_rank);
    if (!rc && !tr_dist_built() && launched > 1) { /* N copies would each train the whole run: one says so */
        cli_silent = launched_rank > 0;
        rc = cli_fail("train: this posenc was built without MPI, so it cannot train over the %d processes mpirun (or srun) "
                      "started: rebuild it with Open MPI (Debian: libopenmpi-dev), or run one process", launched);
    }
    if (!rc) tr_env_select("train", argc, argv); /* may re-execute the tool: before MPI_Init */
    if (!rc && resume && tr_checkpoint_options(resume, &o, &err)) rc = cli_fail("train: %s", err.msg);
    /* the run's options over the checkpoint's */
    for (int i = 0; !rc && i < r.n_keys; i++)
        if (tr_options_set(&o, r.keys[i], r.vals[i], &err)) rc = cli_fail("train: %s", err.msg);
    arg_free(&r);
    if (rc) return rc;
    if (tr_dist_init(&err)) return cli_fail("train: %s", err.msg);
    if (tr_dist_rank() > 0) { /* output and progress come from rank 0; errors from the rank that has them */
        a.quiet = 1, a.loss_log = NULL;
        if (!freopen("/dev/null", "w", stdout)) return cli_fail("train: /dev/null: cannot write");
    }
    rc = train(&o, &a, save, save_every);
    /* a failing rank ends the others, which would wait for it in the next sum (mpirun(1):
     * "if any process dies abnormally (either exiting before invoking MPI_FINALIZE, or dying as
     * the result of a signal), mpirun will print out an error message and kill the rest");
     * Ctrl-C (130) stopped every rank at the same step */
    if (rc && rc != 130 && tr_dist_size() > 1) tr_dist_abort(rc);
    tr_dist_finalize();
    return rc;
}
