/* FLOATER's neural ODE (floater.c: the method's hooks and the trajectory cache; floater_ode.c:
 * the dynamics, RK4 and their vector-Jacobian products in double). Private to the two. */
#ifndef PE_FLOATER_H
#define PE_FLOATER_H

#include <stdatomic.h>

#include "../exec/fused.h"

enum { B0, W1, B1, W2, B2 };

#define TABLE_BYTES ((size_t)64 << 20)
#define TRAJ_BYTES ((size_t)16 << 20)
/* A step's stages: STAGES (3, C) blocks, the stage inputs y1..y4 then pre-activations z1..z4. */
enum { STAGES = 8 };
/* (3, C) blocks of scratch: 0-7 the stages of a step not kept elsewhere, 8-13 rk4's own
 * (relu, stage outputs, bias), 14-15 rk4_vjp's, 16 a partial step's result, then 17-18 the
 * adjoint's lambda and its update and 19 the recomputing walker (backward), or 18-19 the
 * walker's state and a partial step's result (forward). */
enum { WORK_BLOCKS = 20 };

/* out (3, n) = init + x (3, k) m, for m (k, n) of row stride ldm and init (n) the same for
 * every row (NULL: 0); below */
typedef void mm3_fn(const double *m, int64_t ldm, int64_t k, int64_t n, const double *x, const double *init,
                    double *out);

typedef struct floater_state {
    int64_t C;
    /* the cache, valid while the tensors and keys equal key, dt, step bit for bit */
    float *key; /* b0 (3C), w1 (C(C+1)), b1 (C), w2 (C(C+1)), b2 (C) */
    double dt, step;
    double *w1, *b1, *w2, *b2; /* the dynamics in double */
    double *w1t, *w2t;         /* (C, C) their first C columns transposed, for mm3 */
    double *w1c, *w2c;         /* (C) their last columns (time), contiguous */
    mm3_fn *mm3;               /* the 3-row product for this CPU */
    int64_t K;                 /* grid steps between checkpoints */
    double *ckpt;              /* (n_ckpt, 3, C): B(c K step) */
    int64_t n_ckpt, cap_ckpt;
    double *traj;              /* (n_traj, STAGES, 3, C): the stages of grid steps 0 .. n_traj-1 */
    double *traj_y;            /* (3, C) the state at grid point n_traj */
    int64_t n_traj, cap_traj;
    int64_t *tab_pos; /* (n_tab) sorted positions solved so far */
    float *tab_row;   /* (n_tab, 3, C) their B(p dt) */
    int64_t n_tab, cap_tab;
    /* this call */
    int64_t *upos, n_u; /* distinct positions, sorted */
    int64_t *u_tab;     /* (n_u) row of upos[u] in the table */
    int64_t *tok_u;     /* (B*T + B*Tk) index into upos of each query, then of each key */
    float *grad;        /* (n_u, 3, C) dB of each distinct position, filled by rotate_backward */
    int have_grad;      /* rotate_backward ran since prepare */
    double *adj;        /* scratch of finish_backward (adj_floats), kept between calls */
    size_t adj_cap;
    double *work;       /* scratch of the solver: WORK_BLOCKS (3, C) blocks */
} floater_state;

/* Parameter gradients of the dynamics, in double until the end of backward. The two outer
 * products of every stage (rank 3 each) wait as rows in g/a and dz/b and are added as one
 * product per GRAD_ROWS rows: a rank-3 update per stage would write all of dW1 and dW2 4
 * times per step. The rows of a and b end in [t, 1], so that product also sums the time
 * columns of dW and the biases: w1, w2 are (C, C + 2), [dW | db]. */
enum { GRAD_ROWS = 192 };
typedef struct grads {
    double *w1, *w2;        /* (C, C + 2) */
    double *g, *dz;         /* (GRAD_ROWS, C) pending: dW2 += g^T a, dW1 += dz^T b */
    double *a, *b;          /* (GRAD_ROWS, C + 2) */
    int64_t rows;
} grads;

/* the 3-row product for this CPU (the layer's run options with isa "generic": the portable one) */
mm3_fn *pe__floater_mm3_pick(const pe_run_options *run);
/* One RK4 step of length h from (t0, y) into out (may alias y), its stages kept in stg (STAGES
 * blocks) for the VJP; work: 6 blocks */
void pe__floater_rk4(const floater_state *st, double t0, double h, const double *y, double *out, double *stg,
                     double *work);
/* the pending weight-gradient rows of gr added into its dW1, dW2 */
void pe__floater_grads_flush(const floater_state *st, grads *gr);
/* The step's VJP: dy = lam d(out)/dy from its stages, parameter gradients into gr; work: scratch */
void pe__floater_rk4_vjp(const floater_state *st, grads *gr, double t0, double h, const double *stg,
                         const double *lam, double *dy, double *work);
/* every RK4 step taken, full or partial, forward or backward (pe__floater_steps) */
extern _Atomic int64_t pe__floater_steps_taken;

#endif
