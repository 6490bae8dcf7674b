/* The process settings of training runs: BLAS threads, flushing denormals, timing. */
#ifndef TR_ENV_H
#define TR_ENV_H

#include <stddef.h>

/* Sets the thread count of BLAS and of OpenMP regions (the library's fused attention
 * included), and flushes denormals to zero in the calling thread (ALiBi's far logits give
 * denormal exp() values that slow the softmax several times; doc/perf.md, item 1). At this model size
 * one thread per run is fastest: a 2-thread region around per-head work costs more in
 * barriers than it saves. */
void tr_env_setup(int threads);
/* Debian's OpenBLAS 0.3.21 does not recognise recent Xeons and runs its SSE3 kernels, 2-6x
 * below its own AVX-512 ones (doc/perf.md, item 2). The core type is read once when the library loads,
 * so when OPENBLAS_CORETYPE is unset, the CPU has AVX-512 (or AVX2) and the library chose an
 * older core, this sets the variable and re-executes the tool (/proc/self/exe) as
 * `posenc COMMAND ARGS...`. Returns only when nothing needed changing or exec failed. */
void tr_env_blas_select(const char *command, int argc, char **argv);
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
