/* The process settings of training runs: BLAS threads, flushing denormals, timing. */
#ifndef TR_ENV_H
#define TR_ENV_H

#include <stddef.h>

/* Sets the thread count of BLAS and of OpenMP regions (the library's fused attention
 * included), and flushes denormals to zero in the calling thread (ALiBi's far logits give
 * denormal exp() values that slow the softmax several times; doc/perf.md, item 1). At this model size
 * the batch's shares use threads better than one product's threads do (doc/perf.md, item 6). */
void tr_env_setup(int threads);
/* The libraries' settings that are read once, when they load, so a process sets them by
 * re-executing itself (the binary /proc/self/exe names, as `posenc COMMAND ARGS...`); this returns only when
 * nothing needed changing or exec failed. OPENBLAS_CORETYPE, where unset, the CPU has AVX-512
 * (or AVX2) and OpenBLAS chose an older core: Debian's 0.3.21 does not recognise recent Xeons
 * and runs its SSE3 kernels, 2-6x below its own AVX-512 ones (doc/perf.md, item 2).
 * OMP_WAIT_POLICY=passive, where neither it nor GOMP_SPINCOUNT is set: libgomp's idle threads
 * otherwise spin after each region and slow OpenBLAS's threads beside them (item 3). */
void tr_env_select(const char *command, int argc, char **argv);
/* Flushes denormals in the calling thread only. */
void tr_env_thread(void);
/* The BLAS core in use ("" when unknown or without BLAS). */
const char *tr_env_blas_core(void);
/* The CPU's model name (/proc/cpuinfo), "unknown CPU" where it cannot be read. */
void tr_env_cpu_model(char *buf, size_t n);
/* Monotonic seconds. */
double tr_now(void);
/* "m:ss" or "h:mm:ss". */
void tr_format_time(char *buf, size_t n, double seconds);

#endif
