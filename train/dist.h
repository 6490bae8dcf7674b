/* Data-parallel training over MPI ranks (`mpirun -n N posenc train`): start and stop, which rank
 * this process is, sums of every rank's values in rank order, and ending the whole job on one
 * rank's error. Built with MPI when the Makefile finds Open MPI (pkg-config ompi; make MPI=0
 * turns it off); otherwise a stub of one rank that can tell it was started by mpirun.
 *
 * Why sums in rank order: MPI_Reduce(3) (Open MPI 4.1) says the implementation "can take
 * advantage of associativity, or associativity and commutativity, in order to change the order
 * of evaluation. This may change the result of the reduction for operations that are not
 * strictly associative and commutative, such as floating point addition" (MPI_Allreduce is
 * "Same as MPI_Reduce except that the result appears in the receive buffer of all the group
 * members"). So the sums here move data with MPI and add it up themselves, rank 0 first, then
 * 1, ..., N-1: the same N ranks give the same bits on every run. */
#ifndef TR_DIST_H
#define TR_DIST_H

#include <stddef.h>

#include "posenc.h"

/* Whether this build has MPI. */
int tr_dist_built(void);
/* The number of processes a launcher (mpirun, srun) says the job has, from its environment
 * (OMPI_COMM_WORLD_SIZE, PMI_SIZE; 1 when neither is set), and this one's rank among them
 * (rank may be NULL): read before any MPI call, so the stub can refuse to run N copies of a
 * one-process training, with one message. */
int tr_dist_launched(int *rank);
/* Joins the job when a launcher started this process (MPI_Init), else stays one rank of one;
 * then tr_dist_rank and tr_dist_size tell where this process stands. */
pe_status tr_dist_init(pe_err *err);
int tr_dist_rank(void);
int tr_dist_size(void);
/* x[0..n) <- the sum over ranks 0, 1, ..., N-1 of every rank's x, on every rank (collective:
 * every rank calls it with the same n). One rank: nothing changes. */
pe_status tr_dist_sum_f32(float *x, size_t n, pe_err *err);
pe_status tr_dist_sum_f64(double *x, size_t n, pe_err *err);
/* Whether flag is set on any rank, on every rank (collective). */
int tr_dist_any(int flag);
/* Waits for every rank (collective). */
void tr_dist_barrier(void);
/* Ends the whole job from one rank, the others included (MPI_Abort), with exit status code;
 * the caller has printed the message. One rank: exit(code). */
_Noreturn void tr_dist_abort(int code);
/* Leaves the job (MPI_Finalize) when it joined one; every rank calls it before it exits. */
void tr_dist_finalize(void);

#endif
