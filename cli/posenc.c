/* posenc: the command-line tool. Subcommands are a table; each is a function in cli/.
 * Errors print one line "posenc: ..." and exit with status 2 (bad input) or 1 (failure). */
#include "cli.h"
#include "options.h"
#include "posenc.h"

#include <stdio.h>
#include <string.h>

static int cmd_version(int argc, char **argv) {
    methods_args a = {0};
    arg_res r = {0};
    int rc = argc ? arg_parse(&ARGS_VERSION, argc, argv, &a, &r) : 0;
    if (rc) return rc < 0 ? 0 : rc;
    arg_free(&r);
    printf("posenc %s\n", PE_VERSION);
    return 0;
}

/* posenc methods NAME: the method's family, reference, keys with defaults and meanings,
 * tensors, and the paths it has. */
static int method_detail(const char *name) {
    const int m = pe_method_from_name(name);
    if (m < 0) {
        const char *best = NULL;
        int bd = 3;
        for (int k = 0; k < PE_METHOD_COUNT; k++)
            if (pe_edit_distance(name, pe_method_name(k)) < bd) bd = pe_edit_distance(name, pe_method_name(k)), best = pe_method_name(k);
        if (best) return cli_fail("methods: unknown method '%s' (did you mean %s?)", name, best);
        return cli_fail("methods: unknown method '%s' (posenc methods lists them)", name);
    }
    pe_method_info mt;
    pe_method_describe(m, &mt, NULL);
    pe_config cfg;
    pe_err err;
    pe_config_init(&cfg);
    pe_config_set(&cfg, "method", name, &err);
    printf("%s (%s): %s\n\nkeys (default; - is the method's own or the width's):\n", name, pe_family_name(mt.family),
           mt.reference);
    for (int k = 0; pe_config_key_name(k); k++) {
        const char *key = pe_config_key_name(k);
        if (!pe_method_accepts(m, k) || k == PE_K_method) continue;
        char val[128];
        pe_config_key_value(&cfg, k, val, sizeof val);
        if (k == PE_K_heads) snprintf(val, sizeof val, "(required)");
        if (k == PE_K_kv_heads) snprintf(val, sizeof val, "heads");
        printf("  %-33s %-12s %s\n", key, val, pe_config_key_meaning(k));
    }
    /* the tensors, at heads 2 and width 16 (shapes in the legend's letters where they follow it) */
    pe_attention *att = NULL;
    pe_config c2;
    pe_config_init(&c2);
    pe_config_set(&c2, "method", name, &err);
    pe_config_set(&c2, "heads", "2", &err);
    printf("\ntensors (for heads H = 2, head_dim D = 8; N: any number of rows):\n");
    if (!pe_attention_init(&att, &c2, 16, &err)) {
        pe_param_spec sp[PE_MAX_PARAMS];
        int n = pe_attention_params(att, sp);
        if (!n) printf("  none\n");
        for (int i = 0; i < n; i++) {
            printf("  %-18s [", sp[i].name);
            for (int d = 0; d < sp[i].ndim; d++) {
                if (sp[i].shape[d] < 0) printf("%sN", d ? ", " : "");
                else printf("%s%lld", d ? ", " : "", (long long)sp[i].shape[d]);
            }
            printf("]%s\n", sp[i].optional ? " (optional)" : "");
        }
        pe_attention_free(att);
    } else {
        printf("  (depend on keys: %s)\n", err.msg);
    }
    printf("\npaths: fused (no T x Tk buffer) %s; grouped-query attention %s; projected form (q, k, v) %s;"
           " memory (mems) %s; multi-axis positions %s\n",
           mt.fused ? "yes" : "no", mt.gqa ? "yes" : "no", mt.projected ? "yes" : "no", mt.memory ? "yes" : "no",
           mt.multi_axis ? "yes" : "no");
    return 0;
}

static int cmd_methods(int argc, char **argv) {
    methods_args a;
    int rc;
    if (arg_start(&ARGS_METHODS, argc, argv, &a, &rc)) return rc;
    if (a.name) return method_detail(a.name);
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
    {"demo", "[--length N] [--heads H] [--head-dim D] [--seed S]",
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
    {"encode", "[IN.safetensors] -o OUT.safetensors [--length N | --positions P0,P1,..] [--width C] [--KEY VALUE ...]",
     "write an absolute method's encoding P [T, C] and the positions (floater: P_q P_k P_v; complex:\n"
     "      P_re P_im of IN's ids). Settings and tensors (pos_table, floater_*, amp freq phase ids,\n"
     "      positions) from IN, e.g. a case file, and --KEY VALUE; --length N: positions 0..N-1;\n"
     "      --positions: a list; --width C: the width where no tensor gives it (sinusoidal)", cli_encode},
    {"positions", "SPANS [--merge M] [--tokens-per-second R] [-o OUT.safetensors]",
     "3-axis positions of text and image/video grids, as Qwen2-VL's get_rope_index (--help)", cli_positions},
    {"hf-config", "CONFIG.json|MODEL.gguf [--layer N] [--group]",
     "every layer of a HuggingFace model (config.json or GGUF) as posenc runs it: method, base, scaling, slice, scale", cli_hf_config},
    {"bench", "[--length 512,2048,8192] [--methods none,rope,alibi,t5] [--quick] [--no-torch] [--readme FILE] ...",
     "speed as ratios: RoPE vs a copy, fused vs reference attention vs PyTorch eager, memory (--help)", cli_bench},
    {"plot", "encoding|similarity|relative|attention|extrapolation|axes|grid [IN] -o FILE.png [--method NAME] [--size WxH] ...",
     "pictures: an absolute encoding, position similarity / RoPE decay, relative index or bias per head,\n"
     "      attention of a case file, a compare CSV's curves, the axis of each RoPE pair, a 2-D grid's\n"
     "      similarity map (--help)", cli_plot},
    {"analyze", "[--methods LIST] [--from FILE] [-o FILE.csv] [--length N] ...",
     "monotonicity, translation invariance and symmetry of each method's position-position matrix", cli_analyze},
    {"methods", "[NAME]", "list the methods, their families and keys; NAME: one method in full", cmd_methods},
    {"version", "", "print the version", cmd_version},
    {"help", "", "this help", cmd_help},
};

static int cmd_help(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("posenc %s: positional encodings of Transformers, forward and backward\n\n", PE_VERSION);
    printf("usage: posenc COMMAND [ARGS]\n\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        printf("  posenc %s %s\n      %s\n", COMMANDS[i].name, COMMANDS[i].args, COMMANDS[i].help);
    printf("\nposenc COMMAND --help: every option of the command, its default and meaning\n");
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
    const char *best = NULL;
    int bd = 3;
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (pe_edit_distance(argv[1], COMMANDS[i].name) < bd) bd = pe_edit_distance(argv[1], COMMANDS[i].name), best = COMMANDS[i].name;
    if (best) return cli_fail("unknown command '%s' (did you mean %s?)", argv[1], best);
    return cli_fail("unknown command '%s' (try: posenc help)", argv[1]);
}
