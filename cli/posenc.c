/* posenc: the command-line tool. Subcommands are a table; each is a function in cli/.
 * Errors print one line "posenc: ..." and exit with status 2 (bad input) or 1 (failure). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static int cmd_version(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("posenc %s\n", PE_VERSION);
    return 0;
}

static int cmd_methods(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("%-12s %-9s %s\n", "method", "family", "keys (besides method heads causal scale kv_heads)");
    for (int m = 0; m < PE_METHOD_COUNT; m++) {
        char keys[512];
        pe_method_keys(m, keys, sizeof keys);
        printf("%-12s %-9s %s\n", pe_method_name(m), pe_family_name(pe_method_family(m)), keys);
    }
    return 0;
}

static int cmd_help(int argc, char **argv);

static const struct command {
    const char *name, *args, *help;
    int (*run)(int argc, char **argv);
} COMMANDS[] = {
    {"demo", "[--T N] [--heads H] [--head-dim D] [--seed S]",
     "every method on a built-in random layer: shift invariance, gradient check, time", cli_demo},
    {"attend", "CASE.safetensors -o OUT.safetensors [--KEY VALUE ...]",
     "one attention layer as the conformance contract defines it", cli_attend},
    {"convert-rope", "IN.safetensors -o OUT.safetensors --to half|interleaved [--heads H] [--kv-heads K] [--rotary-dim R] [--q NAME] [--k NAME]",
     "permute q/k projection rows between the RoPE layouts (checkpoints from Meta <-> HF)", cli_convert_rope},
    {"train", "[--method NAME] [--task lm|copy|reverse|sort|add] [--steps N] [--save FILE] [--resume FILE] ...",
     "train the small Transformer with one encoding and evaluate it at longer lengths (--help)", cli_train},
    {"generate", "--checkpoint FILE --prompt TEXT [--tokens N] [--temperature X] [--seed S] [--check]",
     "sample text from a `posenc train --save` checkpoint through KV caches (--check: against the full model)",
     cli_generate},
    {"compare", "[--methods LIST] [--seeds N] [--quick] [--out DIR] ...",
     "train every method with the same budget and seeds; table, CSV and plot vs length (--help)", cli_compare},
    {"encode", "[IN.safetensors] -o OUT.safetensors [--T N | --positions P0,P1,..] [--width C] [--KEY VALUE ...]",
     "write an absolute method's encoding P [T, C] and the positions (floater: P_q P_k P_v; complex:\n"
     "      P_re P_im of IN's ids). Settings and tensors (pos_table, floater_*, amp freq phase ids,\n"
     "      positions) from IN, e.g. a case file, and --KEY VALUE; --T N: positions 0..N-1;\n"
     "      --positions: a list; --width C: the width where no tensor gives it (sinusoidal)", cli_encode},
    {"positions", "SPANS [--merge M] [--tokens-per-second R] [-o OUT.safetensors]",
     "3-axis positions of text and image/video grids, as Qwen2-VL's get_rope_index (--help)", cli_positions},
    {"bench", "[--T 512,2048,8192] [--methods none,rope,alibi,t5] [--quick] [--no-torch] [--readme FILE] ...",
     "speed as ratios: RoPE vs a copy, fused vs reference attention vs PyTorch eager, memory (--help)", cli_bench},
    {"plot", "encoding|similarity|relative|attention|extrapolation [IN] -o FILE.png [--method NAME] [--size WxH] ...",
     "pictures: an absolute encoding, position similarity / RoPE decay, relative index or bias per head,\n"
     "      attention of a case file, a compare CSV's curves (--help)", cli_plot},
    {"analyze", "[--methods LIST] [--from FILE] [-o FILE.csv] [--N N] ...",
     "monotonicity, translation invariance and symmetry of each method's position-position matrix", cli_analyze},
    {"methods", "", "list the methods, their families and keys", cmd_methods},
    {"version", "", "print the version", cmd_version},
    {"help", "", "this help", cmd_help},
};

static int cmd_help(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("posenc %s: positional encodings of Transformers, forward and backward\n\n", PE_VERSION);
    printf("usage: posenc COMMAND [ARGS]\n\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        printf("  posenc %s %s\n      %s\n", COMMANDS[i].name, COMMANDS[i].args, COMMANDS[i].help);
    printf("\nmethods:");
    for (int m = 0; m < PE_METHOD_COUNT; m++) printf(" %s", pe_method_name(m));
    printf("\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        cmd_help(0, NULL);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) return cmd_help(0, NULL);
    if (!strcmp(argv[1], "--version")) return cmd_version(0, NULL);
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].run(argc - 2, argv + 2);
    fprintf(stderr, "posenc: unknown command '%s' (try: posenc help)\n", argv[1]);
    return 2;
}
