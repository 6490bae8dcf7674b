#ifndef PE_CLI_H
#define PE_CLI_H

#include "posenc.h"
#include "../tools/safetensors.h"

/* Subcommands: argc/argv after the command name; return the exit status. */
int cli_attend(int argc, char **argv);
int cli_demo(int argc, char **argv);
int cli_encode(int argc, char **argv);
int cli_train(int argc, char **argv);
int cli_compare(int argc, char **argv);
int cli_convert_rope(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_plot(int argc, char **argv);
int cli_analyze(int argc, char **argv);
int cli_generate(int argc, char **argv);
int cli_positions(int argc, char **argv);
int cli_hf_config(int argc, char **argv);

/* Replaces the text between "<!-- TAG:begin -->" and "<!-- TAG:end -->" of a Markdown file
 * with block; the file is written whole or not at all. Returns 0, or cli_fail's 2. block NULL:
 * only whether it could (the file, its block, its folder), before the work that makes block. */
int cli_readme_block(const char *cmd, const char *path, const char *tag, const char *block);

/* The settings of a case: f's metadata, then the --KEY VALUE overrides replacing keys of the
 * same name (the last of repeated ones wins). keys/vals need f->n_meta + n_over entries;
 * returns how many were written. The strings stay f's and the overrides'. */
int cli_merge_settings(const pe_st_file *f, int n_over, const char *const *over_k, const char *const *over_v,
                       const char **keys, const char **vals);

/* A whole number from the command line: *out = text if it is one within lo .. hi; else 2 with
 * the message "FLAG: 'text' is not a whole number in lo .. hi" (what every size flag uses, so a
 * size from input never overflows what it allocates). */
int cli_int(const char *flag, const char *text, long long lo, long long hi, long long *out);

/* Prints "posenc: <msg>" and returns 2, the status of bad input. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
