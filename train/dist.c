/* Data-parallel training over MPI ranks (dist.h). The MPI quotations are Open MPI 4.1's man
 * pages (Debian's openmpi-doc: man MPI_Init_thread, MPI_Alltoallv, ...). */
#include "dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef PE_MPI
#include <mpi.h>
#endif

/* The environment variable `name` as a whole number in [lo, INT_MAX], or -1. */
static int env_count(const char *name, int lo) {
    const char *s = getenv(name);
    char *end;
    long v = s ? strtol(s, &end, 10) : -1;
    return s && *s && !*end && v >= lo && v <= INT_MAX ? (int)v : -1;
}

int tr_dist_launched(int *rank) {
    /* mpirun gives every process OMPI_COMM_WORLD_SIZE and _RANK (seen in `mpirun -n 2 env`);
     * PMI_SIZE and PMI_RANK are the PMI launchers' (srun --mpi=pmi2, MPICH's hydra) */
    static const char *const names[][2] = {{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, {"PMI_SIZE", "PMI_RANK"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int n = env_count(names[i][0], 2), k = env_count(names[i][1], 0);
        if (n < 0) continue;
        if (rank) *rank = k < 0 ? 0 : k;
        return n;
    }
    /* srun --mpi=pmix gives its tasks PMIX_RANK and no size of PMIx's own: the step's task
     * count is Slurm's SLURM_STEP_NUM_TASKS (srun(1), OUTPUT ENVIRONMENT VARIABLES) */
    int pk = env_count("PMIX_RANK", 0), pn = env_count("SLURM_STEP_NUM_TASKS", 2);
    if (pk >= 0 && pn > 0) {
        if (rank) *rank = pk;
        return pn;
    }
    if (rank) *rank = 0;
    return 1;
}

#ifdef PE_MPI

static int joined, rank, size = 1;

int tr_dist_built(void) { return 1; }

/* a launcher that starts ranks without OMPI_COMM_WORLD_SIZE or PMI_SIZE (srun --mpi=pmix) still
 * gives PMIX_RANK: joining is what tells the job's size then */
static int under_launcher(void) { return tr_dist_launched(NULL) > 1 || getenv("PMIX_RANK"); }

pe_status tr_dist_init(pe_err *err) {
    if (joined || !under_launcher()) return PE_OK; /* one process: no MPI at all */
    /* MPI_Init_thread(3): MPI_THREAD_FUNNELED, "only the thread that called MPI_Init_thread will
     * make MPI calls": the OpenMP threads of a step compute, the main thread communicates */
    int provided;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return pe_error(err, PE_EINVAL, "MPI_Init_thread failed");
    joined = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_FUNNELED)
        return pe_error(err, PE_EINVAL, "this MPI gives thread level %d, below MPI_THREAD_FUNNELED", provided);
    return PE_OK;
}

int tr_dist_rank(void) { return rank; }
int tr_dist_size(void) { return size; }

/* Rank k owns the k-th of `size` near-equal slices of n elements: its first element, its count. */
static void slice(size_t n, int k, int *first, int *count) {
    size_t a = n * (size_t)k / (size_t)size, b = n * (size_t)(k + 1) / (size_t)size;
    *first = (int)a, *count = (int)(b - a);
}

/* The rank-order sum as a reduce-scatter and an all-gather, both of which only move data:
 * MPI_Alltoallv(3): "Process j sends the k-th block of its local sendbuf to process k, which
 * places the data in the j-th block of its local recvbuf", so rank k holds every rank's copy
 * of its slice in rank order and adds them up 0, 1, ..., N-1; then MPI_Allgatherv(3): "The
 * block of data sent from the jth process is received by every process and placed in the jth
 * block of the buffer recvbuf" puts every summed slice on every rank. Each rank sends and
 * receives about 2n elements whatever N is, as a ring all-reduce does. */
static pe_status sum_in_order(void *x, size_t n, size_t elem, MPI_Datatype type, int is_double, pe_err *err) {
    if (size == 1 || !n) return PE_OK;
    if (n > INT_MAX) return pe_error(err, PE_EINVAL, "%zu values to sum: MPI counts are ints", n);
    int mine, own;
    slice(n, rank, &mine, &own);
    int *counts = malloc(sizeof(int) * 4 * (size_t)size);
    char *in = malloc(elem * ((size_t)own * (size_t)size + 1));
    if (!counts || !in) {
        free(counts), free(in);
        return pe_error(err, PE_ENOMEM, "out of memory for the sum over ranks");
    }
    int *firsts = counts + size, *rcounts = counts + 2 * size, *rfirsts = counts + 3 * size;
    for (int k = 0; k < size; k++) {
        slice(n, k, &firsts[k], &counts[k]);
        rcounts[k] = own, rfirsts[k] = k * own;
    }
    int rc = MPI_Alltoallv(x, counts, firsts, type, in, rcounts, rfirsts, type, MPI_COMM_WORLD);
    for (int e = 0; e < own && rc == MPI_SUCCESS; e++) {
        if (is_double) {
            const double *v = (const double *)in;
            double s = v[e];
            for (int j = 1; j < size; j++) s += v[(size_t)j * (size_t)own + (size_t)e];
            ((double *)x)[mine + e] = s;
        } else {
            const float *v = (const float *)in;
            float s = v[e];
            for (int j = 1; j < size; j++) s += v[(size_t)j * (size_t)own + (size_t)e];
            ((float *)x)[mine + e] = s;
        }
    }
    /* MPI_Allgatherv(3), in place: "Use the variable MPI_IN_PLACE as the value of sendbuf" */
    if (rc == MPI_SUCCESS) rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, counts, firsts, type, MPI_COMM_WORLD);
    free(counts), free(in);
    return rc == MPI_SUCCESS ? PE_OK : pe_error(err, PE_EINVAL, "the sum over %d ranks failed (MPI error %d)", size, rc);
}

pe_status tr_dist_sum_f32(float *x, size_t n, pe_err *err) { return sum_in_order(x, n, sizeof *x, MPI_FLOAT, 0, err); }
pe_status tr_dist_sum_f64(double *x, size_t n, pe_err *err) { return sum_in_order(x, n, sizeof *x, MPI_DOUBLE, 1, err); }

int tr_dist_any(int flag) {
    if (size == 1) return flag != 0;
    int in = flag != 0, out = in;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD); /* an integer max: any order gives it */
    return out;
}

void tr_dist_barrier(void) {
    if (joined) MPI_Barrier(MPI_COMM_WORLD);
}

_Noreturn void tr_dist_abort(int code) {
    fflush(NULL); /* the message first: MPI_Abort(3): "All associated processes are sent a SIGTERM" */
    if (joined) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

void tr_dist_finalize(void) {
    if (joined) MPI_Finalize();
    joined = 0;
}

#else /* built without MPI: one rank of one */

int tr_dist_built(void) { return 0; }
pe_status tr_dist_init(pe_err *err) { return PE_OK; }
int tr_dist_rank(void) { return 0; }
int tr_dist_size(void) { return 1; }
pe_status tr_dist_sum_f32(float *x, size_t n, pe_err *err) { return PE_OK; }
pe_status tr_dist_sum_f64(double *x, size_t n, pe_err *err) { return PE_OK; }
int tr_dist_any(int flag) { return flag != 0; }
void tr_dist_barrier(void) {}
_Noreturn void tr_dist_abort(int code) {
    fflush(NULL);
    exit(code);
}
void tr_dist_finalize(void) {}

#endif
