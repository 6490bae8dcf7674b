/* posenc bench, the scale section: `posenc train` at batch 32 as one process with 1 and with 2
 * threads, its batch in 2 shares on 2 threads, and as `mpirun -n 2` with 1 thread each (data
 * parallel, train/dist.c), each a child
 * process of this one reading the run's own summary (its tokens/s and, over ranks, the time rank 0
 * spent in the sums), in alternating rounds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../train/dist.h"
#include "bench.h"
#include "cli.h"

/* s in single quotes for sh, a quote inside as '\'' */
static void shell_quote(char *out, size_t n, const char *s) {
    size_t k = 0;
    if (k + 1 < n) out[k++] = '\'';
    for (; *s && k + 5 < n; s++) {
        if (*s == '\'') memcpy(out + k, "'\\''", 4), k += 4;
        else out[k++] = *s;
    }
    if (k + 1 < n) out[k++] = '\'';
    out[k] = 0;
}

/* Runs `cmd` under sh; from the output of `posenc train`, its tokens/s and (over ranks) the sums'
 * share of the time and milliseconds a step. 0, or 1 with the output's last line in why. */
static int train_child(const char *cmd, double *tps, double *share, double *ms, char *why, size_t nwhy) {
    FILE *p = popen(cmd, "r");
    if (!p) return snprintf(why, nwhy, "cannot start sh"), 1;
    char line[1024], last[1024] = "";
    double k = NAN;
    *share = *ms = NAN;
    while (fgets(line, sizeof line, p)) {
        long long steps;
        double s, pct, m;
        int ranks;
        if (sscanf(line, "trained %lld steps in %lf s: %lfk tokens/s", &steps, &s, &k) == 3) continue;
        if (sscanf(line, "the sums over %d ranks: %lf%% of the time (%lf ms", &ranks, &pct, &m) == 3) *share = pct, *ms = m;
        if (line[strspn(line, " \n")]) snprintf(last, sizeof last, "%s", line);
    }
    int st = pclose(p);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) || isnan(k)) {
        last[strcspn(last, "\n")] = 0;
        snprintf(why, nwhy, "%.200s", last[0] ? last : "no summary");
        return 1;
    }
    *tps = k * 1e3;
    return 0;
}

int bench_scale(const bopts *o, scale_res *R) {
    memset(R, 0, sizeof *R);
    char exe[4096], qexe[8200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return cli_fail("bench: scale: /proc/self/exe: cannot read where posenc is");
    exe[n] = 0;
    shell_quote(qexe, sizeof qexe, exe);
    /* the default model (2 layers x 64 wide, 4 heads, length 64); --quick a smaller one */
    const int64_t B = o->quick ? 8 : 32, steps = o->train_steps ? o->train_steps : o->quick ? 3 : 60;
    char args[512];
    snprintf(args, sizeof args, "train --batch %lld --steps %lld --warmup 1 --eval 1 --eval-tokens 512 --quiet%s",
             (long long)B, (long long)steps, o->quick ? " --width 16 --layers 1 --heads 2 --length 16" : "");
    /* POSENC_MPIRUN names another launcher (MPICH: mpiexec). Open MPI's mpirun(1) refuses root
     * without --allow-run-as-root and counts one slot a core; under a sanitizer build the ranks
     * run without LeakSanitizer, as Open MPI's unloaded plugins leave their allocations behind. */
    const char *launcher = getenv("POSENC_MPIRUN");
    char mpirun[256];
    snprintf(mpirun, sizeof mpirun, "%s", launcher && *launcher ? launcher : "mpirun --oversubscribe");
    if (!launcher && geteuid() == 0) strcat(mpirun, " --allow-run-as-root");
    /* the shell's own lookup, as the runs below go through sh */
    int have_mpi = tr_dist_built() && (launcher || system("command -v mpirun > /dev/null 2>&1") == 0);
    if (!tr_dist_built()) snprintf(R->why, sizeof R->why, "this posenc was built without MPI");
    else if (!have_mpi) snprintf(R->why, sizeof R->why, "no mpirun on PATH (Debian: openmpi-bin; or set POSENC_MPIRUN)");
    R->B = B, R->steps = steps, R->have_mpi = have_mpi;

    printf("## (j) scale-out: `posenc train` (batch %lld, %lld steps) as one process and as mpirun -n 2\n\n"
           "Tokens/s of the training loop, the median of %d alternating rounds; each run a process of its own.%s%s\n\n",
           (long long)B, (long long)steps, o->reps, have_mpi ? "" : " mpirun -n 2: not run, ", have_mpi ? "" : R->why);
    fflush(stdout);
    enum { RUNS = 4, MPI_RUN = 3 };
    static const char *const label[RUNS] = {"1 process, 1 thread", "1 process, 2 threads", "1 process, 2 shares on 2 threads",
                                            "mpirun -n 2, 1 thread each"};
    double tps[RUNS][16], share[16], ms[16];
    for (int round = 0; round < o->reps; round++)
        for (int j = 0; j < RUNS; j++) {
            const int r = (j + round) % RUNS; /* each run first in turn */
            if (r == MPI_RUN && !have_mpi) continue;
            char cmd[9400], why[512];
            double s = NAN, m = NAN;
            if (r < 2) snprintf(cmd, sizeof cmd, "%s %s --threads %d 2>&1", qexe, args, r + 1);
            else if (r == 2) snprintf(cmd, sizeof cmd, "%s %s --threads 2 --shares 2 2>&1", qexe, args);
            else
                snprintf(cmd, sizeof cmd, "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 %s -n 2 %s %s --threads 1 2>&1",
                         mpirun, qexe, args);
            if (train_child(cmd, &tps[r][round], &s, &m, why, sizeof why)) {
                if (r < MPI_RUN) return cli_fail("bench: scale: posenc train (%s) failed: %s", label[r], why);
                snprintf(R->why, sizeof R->why, "mpirun -n 2 failed: %s", why);
                printf("%s\n\n", R->why);
                R->have_mpi = have_mpi = 0; /* the one-process rows still mean something */
                continue;
            }
            if (r == MPI_RUN) share[round] = s, ms[round] = m;
            bench_gap();
        }
    for (int r = 0; r < RUNS; r++) R->tps[r] = r == MPI_RUN && !have_mpi ? NAN : bench_median(tps[r], o->reps);
    R->share = have_mpi ? bench_median(share, o->reps) : NAN;
    R->ms = have_mpi ? bench_median(ms, o->reps) : NAN;
    printf("| run | tokens/s | vs 1 process, 1 thread | rank 0 in the sums over ranks |\n| --- | ---: | ---: | --- |\n");
    for (int r = 0; r < RUNS; r++) {
        printf("| %s |", label[r]);
        if (isnan(R->tps[r])) {
            printf(" — | — | — |\n");
            continue;
        }
        printf(" %.1fk |", R->tps[r] / 1e3);
        bench_print_ratio2(R->tps[r], R->tps[0]);
        if (r == MPI_RUN) printf(" %.1f%% of the time, %.2f ms a step (waiting for the other rank included) |\n", R->share, R->ms);
        else printf(" — |\n");
    }
    printf("\n");
    return 0;
}
