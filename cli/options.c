/* Every subcommand's options (options.h): one table each, read by the parser (args.c) for
 * parsing and --help, by the dispatcher and by the fuzzer (tests/fuzz/fuzz_args.c). A default
 * help shows is the value init puts in the struct, unless .def says it in words. */
#include "options.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>

#define OPT(S, nm, field, k, ...) {.name = nm, .kind = k, .off = offsetof(S, field), __VA_ARGS__}
#define CMD(nm, S, ...) {.name = nm, .size = sizeof(S), .init = init_##S, __VA_ARGS__}
#define MAX LLONG_MAX

/* ---- demo ------------------------------------------------------------------------------------ */
static void init_demo_args(void *p) { *(demo_args *)p = (demo_args){.length = 64, .heads = 4, .head_dim = 16, .seed = 1}; }
static const arg_opt DEMO_OPTS[] = {
    OPT(demo_args, "length", length, ARG_INT, .alias = "T", .meta = "N", .lo = 1, .hi = 4096, .help = "tokens"),
    OPT(demo_args, "heads", heads, ARG_INT, .meta = "H", .lo = 1, .hi = 256, .help = "heads"),
    OPT(demo_args, "head-dim", head_dim, ARG_INT, .meta = "D", .lo = 2, .hi = 512, .help = "width of a head, even"),
    OPT(demo_args, "seed", seed, ARG_INT, .meta = "S", .lo = 0, .hi = MAX, .help = "the random layer's seed"),
    {0}};
const arg_cmd ARGS_DEMO = CMD("demo", demo_args, .opts = DEMO_OPTS,
    .about = "Every method on one built-in random causal layer: whether shifting all positions changes\n"
             "the output (relative methods: no), a finite-difference check of the backward, the time.");

/* ---- attend ---------------------------------------------------------------------------------- */
static void init_attend_args(void *p) { *(attend_args *)p = (attend_args){0}; }
static const arg_opt ATTEND_POS[] = {
    OPT(attend_args, "CASE", in, ARG_IN, .required = 1,
        .help = "settings in __metadata__, tensors by the contract's names: x, wq, wk, wv, wo\n"
                "(biases optional), positions, mems, attn_mask, dy and the method's tensors;\n"
                "or q, k, v (the projected form) with positions, key_positions, do"),
    {0}};
static const arg_opt ATTEND_OPTS[] = {
    OPT(attend_args, "o", out, ARG_OUT, .alias = "output", .meta = "OUT", .required = 1,
        .help = "y (or o), scores, probs, and with dy (do) every gradient"),
    {0}};
const arg_cmd ARGS_ATTEND = CMD("attend", attend_args, .pos = ATTEND_POS, .opts = ATTEND_OPTS, .keys = ARG_KEYS_BARE,
    .usage = "CASE.safetensors -o OUT.safetensors [--KEY VALUE ...]",
    .about = "One attention layer as the conformance contract defines it (doc/spec/conformance.md).",
    .keys_help = "overrides a setting of the case (posenc methods NAME lists a method's keys);\n"
                 "--KEY alone: true");

/* ---- encode ---------------------------------------------------------------------------------- */
static void init_encode_args(void *p) { *(encode_args *)p = (encode_args){0}; }
static const arg_opt ENCODE_POS[] = {
    OPT(encode_args, "IN", in, ARG_IN,
        .help = "a case file: its settings and tensors (pos_table, floater_*, amp freq phase, ids,\npositions)"),
    {0}};
static const arg_opt ENCODE_OPTS[] = {
    OPT(encode_args, "o", out, ARG_OUT, .alias = "output", .meta = "OUT", .required = 1,
        .help = "the encoding and the positions, with the settings as metadata"),
    OPT(encode_args, "length", length, ARG_INT, .alias = "T", .meta = "N", .lo = 1, .hi = 1 << 20,
        .def = "IN's positions", .help = "positions 0 .. N-1"),
    OPT(encode_args, "positions", positions, ARG_STR, .meta = "P0,P1,..", .help = "a list of positions instead"),
    OPT(encode_args, "width", width, ARG_INT, .meta = "C", .lo = 1, .hi = 1 << 16, .def = "the tensors'",
        .help = "the width where no tensor gives it (sinusoidal)"),
    {0}};
const arg_cmd ARGS_ENCODE = CMD("encode", encode_args, .pos = ENCODE_POS, .opts = ENCODE_OPTS, .keys = ARG_KEYS_BARE,
    .usage = "[IN.safetensors] -o OUT.safetensors [--length N | --positions P0,P1,..] [--width C] [--KEY VALUE ...]",
    .about = "The absolute encoding of an absolute method (pe_encode): P [T, C] for sinusoidal and\n"
             "learned, P_q P_k P_v for floater, P_re P_im for complex (of IN's ids), with the positions.",
    .keys_help = "a setting (--method sinusoidal --sin_layout concat ...); --KEY alone: true");

/* ---- convert-rope ---------------------------------------------------------------------------- */
static void init_convert_rope_args(void *p) { *(convert_rope_args *)p = (convert_rope_args){.q = "wq", .k = "wk"}; }
static const arg_opt CONVERT_POS[] = {
    OPT(convert_rope_args, "IN", in, ARG_IN, .required = 1, .help = "a safetensors checkpoint or posenc attend case"),
    {0}};
static const arg_opt CONVERT_OPTS[] = {
    OPT(convert_rope_args, "o", out, ARG_OUT, .alias = "output", .meta = "OUT", .required = 1,
        .help = "IN with the rows permuted (and rope_layout updated)"),
    OPT(convert_rope_args, "to", to, ARG_ENUM, .meta = "LAYOUT", .choices = "half interleaved", .required = 1,
        .help = "the layout to write: interleaved (Meta's checkpoints) or half (HF Llama's)"),
    OPT(convert_rope_args, "heads", heads, ARG_INT, .meta = "H", .lo = 1, .hi = 1 << 20, .def = "IN's metadata",
        .help = "query heads"),
    OPT(convert_rope_args, "kv-heads", kv_heads, ARG_INT, .meta = "K", .lo = 1, .hi = 1 << 20,
        .def = "IN's metadata, else --heads", .help = "key heads"),
    OPT(convert_rope_args, "rotary-dim", rotary_dim, ARG_INT, .meta = "R", .lo = 1, .hi = 1 << 20,
        .def = "IN's metadata, else the head width", .help = "the rotated part of each head"),
    OPT(convert_rope_args, "q", q, ARG_STR, .meta = "NAME", .help = "the query projection (e.g. q_proj.weight)"),
    OPT(convert_rope_args, "k", k, ARG_STR, .meta = "NAME", .help = "the key projection (e.g. k_proj.weight)"),
    {0}};
const arg_cmd ARGS_CONVERT_ROPE = CMD("convert-rope", convert_rope_args, .pos = CONVERT_POS, .opts = CONVERT_OPTS,
    .usage = "IN.safetensors -o OUT.safetensors --to half|interleaved [options]",
    .about = "Permutes the q and k projection rows (and their biases: wq -> bq, x.weight -> x.bias)\n"
             "between the RoPE layouts: Meta's checkpoints are interleaved, HF Llama's half. Every other\n"
             "tensor is copied.");

/* ---- train ----------------------------------------------------------------------------------- */
static void init_train_args(void *p) { *(train_args *)p = (train_args){.save_every = -1, .threads = 1}; }
static const arg_opt TRAIN_OPTS[] = {
    OPT(train_args, "save", save, ARG_OUT, .meta = "FILE",
        .help = "checkpoint (safetensors) at the end, every --save-every steps and on Ctrl-C"),
    OPT(train_args, "save-every", save_every, ARG_INT, .meta = "N", .lo = 0, .hi = 1LL << 40,
        .def = "only at the end; resumed: the run's", .help = "steps between checkpoints"),
    OPT(train_args, "resume", resume, ARG_IN, .meta = "FILE",
        .help = "continue a checkpoint's run (its options, --save and --save-every;\nlater flags override)"),
    OPT(train_args, "threads", threads, ARG_INT, .meta = "N", .lo = 1, .hi = 1024,
        .help = "BLAS threads; with --shares K, the shares on N threads at once, a model\ncopy each (the same bits; at this size the faster use of N threads)"),
    OPT(train_args, "quiet", quiet, ARG_FLAG, .help = "no progress line"),
    OPT(train_args, "shares", shares, ARG_INT, .meta = "K", .lo = 1, .hi = 1024, .def = "1; under mpirun -n N: N",
        .help = "the batch's gradient as K contiguous shares summed in order: the bits of\nmpirun -n K in one process"),
    OPT(train_args, "profile", profile, ARG_FLAG,
        .help = "after training, where a step's time went: the attention layers (their\nprojections included), the MLP and output GEMMs, the rest; and the\nstep against its GEMMs alone (the same shapes timed by themselves), then\nwith the attention's own products as GEMMs too (as PyTorch eager's bmm)"),
    OPT(train_args, "loss-log", loss_log, ARG_OUT, .meta = "FILE",
        .help = "every step's train loss, `STEP LOSS` a line (the batch's mean, all digits)"),
    {0}};
const arg_cmd ARGS_TRAIN = CMD("train", train_args, .opts = TRAIN_OPTS, .keys = ARG_KEYS_VALUE,
    .usage = "[--OPTION VALUE ...] [--save FILE] [--save-every N] [--resume FILE] [--threads N] [--shares K] [--quiet] [--loss-log FILE]\n"
             "       mpirun -n N posenc train ... (data parallel: see the README's Scale-out)",
    .about = "Trains the small Transformer (token embedding, pre-LayerNorm blocks with the chosen encoding,\n"
             "GELU MLP, tied output) with AdamW, warm-up and cosine decay, gradient clipping; then evaluates\n"
             "at multiples of the training length.",
    .notes = "training options:");

/* ---- compare --------------------------------------------------------------------------------- */
static void init_compare_args(void *p) { *(compare_args *)p = (compare_args){.methods = "all", .out = "compare"}; }
static const arg_opt COMPARE_OPTS[] = {
    OPT(compare_args, "methods", methods, ARG_STR, .meta = "LIST",
        .help = "comma-separated: method names, NAME+shape for SHAPE training of an absolute\n"
                "method, NAME+random for randomized positions, a hybrid of the 2025 models\n"
                "(rnope-swa: Cohere2's, swan, rnope and rnope+temp: Llama 4's, rope-swa, none+temp;\n"
                "cli/compare_budgets.c), or all (every supported method and sinusoidal+shape)"),
    OPT(compare_args, "seeds", seeds, ARG_INT, .meta = "N", .lo = 1, .hi = 16, .def = "3; --quick: 1",
        .help = "seeds 1..N for every method"),
    OPT(compare_args, "quick", quick, ARG_FLAG,
        .help = "a smoke test for CI whose numbers mean nothing: 1 seed, length 32, 60 steps,\nshort evaluation "
                "(with --full: every task at length 4, lm 16, 20 steps\nof a tiny model)"),
    OPT(compare_args, "full", full, ARG_FLAG,
        .help = "the whole experiment (many CPU-hours: --estimate says how long, --shard splits it):\n"
                "lm, copy, reverse, add, count, add with index hints, the hybrids on lm, counting\n"
                "scaled, Ruoss et al.'s reverse_string and duplicate_string and Kazemnejad et al.'s\n"
                "s2s_* tasks at sizes towards theirs, each with its own budget (cli/compare_budgets.c),\n"
                "plus the variants the published orderings need; DIR/TASK.csv, .md and .png per task"),
    OPT(compare_args, "estimate", estimate, ARG_FLAG,
        .help = "time 4 steps of every variant, print the estimated time of the runs and stop"),
    OPT(compare_args, "results", results, ARG_STR, .meta = "FILE",
        .help = "with --full: write the results page (make results: doc/results.md): tables, plots,\n"
                "the published orderings tested on the run's numbers, a paragraph per task"),
    OPT(compare_args, "out", out, ARG_OUTDIR, .meta = "DIR", .help = "output folder (made if missing)"),
    OPT(compare_args, "readme", readme, ARG_EDIT, .meta = "FILE",
        .help = "also replace the block between <!-- compare:begin --> and <!-- compare:end -->\n"
                "in FILE with the table and the plot (--full: <!-- results:begin --> .. end\n"
                "with the table of verdicts of --results)"),
    OPT(compare_args, "jobs", jobs, ARG_INT, .meta = "N", .lo = 1, .hi = 1024, .def = "the number of cores",
        .help = "runs at a time"),
    OPT(compare_args, "shape-k", shape_k, ARG_INT, .meta = "K", .lo = 1, .hi = 1LL << 31,
        .def = "half the training length", .help = "the shift K of +shape variants"),
    OPT(compare_args, "random-n", random_n, ARG_INT, .meta = "N", .lo = 1, .hi = 1LL << 30,
        .def = "the longest evaluated sequence, up to a power of two",
        .help = "NAME+random variants: randomized positions from [0, N)\n(--random-positions N)"),
    OPT(compare_args, "quiet", quiet, ARG_FLAG, .help = "no progress line"),
    OPT(compare_args, "shard", shard, ARG_STR, .meta = "K/N", .def = "the environment's, else every run",
        .help = "run the K-th (0 .. N-1) of N disjoint shares of the runs, balanced by a cost model\n"
                "(the same on every machine): DIR/TASK.VARIANT.seedS.run per run, no tables; a run\n"
                "whose file is there is skipped (a rerun continues a killed shard); not given:\n"
                "SLURM_ARRAY_TASK_ID/_COUNT, OMPI_COMM_WORLD_RANK/_SIZE or PMI_RANK/_SIZE where\n"
                "set (a count of 1 there: no shards)\n--estimate: this shard's time and every shard's"),
    OPT(compare_args, "merge", merge, ARG_LIST, .meta = "DIR ...",
        .help = "train nothing: build the tables, CSVs, plots (and --results, --readme) from the\n"
                "run files of the shards in the folders, as the unsharded run writes them; the same\n"
                "settings as the shards' (--full, --quick, --methods, --seeds, training options)"),
    {0}};
const arg_cmd ARGS_COMPARE = CMD("compare", compare_args, .opts = COMPARE_OPTS, .keys = ARG_KEYS_VALUE,
    .usage = "[--methods LIST] [--seeds N] [--quick] [--out DIR] [--readme FILE] [--jobs N] [--shape-k K]\n"
             "                      [--random-n N] [--full [--results FILE]] [--estimate] [--quiet] [training options]\n"
             "                      [--shard K/N | --merge DIR ...]",
    .about = "Trains every method with the same budget and seeds, evaluates at multiples of the training\n"
             "length, prints the table (mean +- standard deviation over seeds) and writes DIR/compare.csv,\n"
             "DIR/compare.md and DIR/compare.png. --full: every task, DIR/TASK.csv, .md, .png each.\n"
             "On several machines: --shard K/N on each (one run file per run), then --merge DIR ...",
    .notes = "training options (the same budget for every method; see posenc train --help):");

/* ---- generate -------------------------------------------------------------------------------- */
static void init_generate_args(void *p) { *(generate_args *)p = (generate_args){.tokens = 200, .seed = 1, .temperature = 1}; }
static const arg_opt GENERATE_OPTS[] = {
    OPT(generate_args, "checkpoint", checkpoint, ARG_IN, .meta = "FILE", .required = 1,
        .help = "a `posenc train --save` checkpoint (its task gives the characters)"),
    OPT(generate_args, "prompt", prompt, ARG_STR, .meta = "TEXT", .required = 1, .any = 1,
        .help = "the text to continue (characters of the checkpoint's vocabulary; at most 16384)"),
    OPT(generate_args, "tokens", tokens, ARG_INT, .meta = "N", .lo = 0, .hi = 1 << 20, .help = "characters to generate"),
    OPT(generate_args, "temperature", temperature, ARG_REAL, .meta = "X", .rlo = 0, .rhi = 100,
        .help = "softmax temperature; 0: greedy"),
    OPT(generate_args, "seed", seed, ARG_INT, .meta = "S", .lo = 0, .hi = MAX, .help = "the sampler's seed"),
    OPT(generate_args, "check", check, ARG_FLAG,
        .help = "compare every step with the model over the whole sequence; prints the\n"
                "largest difference of the next-token probabilities"),
    {0}};
const arg_cmd ARGS_GENERATE = CMD("generate", generate_args, .opts = GENERATE_OPTS,
    .usage = "--checkpoint FILE --prompt TEXT [--tokens N] [--temperature X] [--seed S] [--check]",
    .about = "Samples text from a `posenc train --save` checkpoint through one KV cache per block: the\n"
             "prompt in one step, then one token per step, printed as it comes.");

/* ---- positions ------------------------------------------------------------------------------- */
static void init_positions_args(void *p) { *(positions_args *)p = (positions_args){.merge = 2}; }
static const arg_opt POSITIONS_POS[] = {
    OPT(positions_args, "SPANS", spans, ARG_STR, .required = 1,
        .help = "comma-separated: text:N, image:HxW or image:TxHxW, video:TxHxW[@SECONDS]\n"
                "(patches, before the merge; SECONDS per temporal patch, Qwen2.5-VL),\n"
                "e.g. text:5,image:4x6,text:3"),
    {0}};
static const arg_opt POSITIONS_OPTS[] = {
    OPT(positions_args, "merge", merge, ARG_INT, .meta = "M", .lo = 1, .hi = 1 << 20,
        .help = "spatial merge size (Qwen2-VL's)"),
    OPT(positions_args, "tokens-per-second", tokens_per_second, ARG_REAL, .meta = "R", .rlo = 0, .rhi = HUGE_VAL,
        .help = "Qwen2.5-VL: a video's temporal position is floor(i SECONDS R);\n"
                "0: the frame index (Qwen2-VL and Qwen3-VL)"),
    OPT(positions_args, "o", out, ARG_OUT, .alias = "output", .meta = "FILE",
        .help = "write `positions` [N, 3] (I64) instead of printing them"),
    {0}};
const arg_cmd ARGS_POSITIONS = CMD("positions", positions_args, .pos = POSITIONS_POS, .opts = POSITIONS_OPTS,
    .usage = "SPANS [--merge M] [--tokens-per-second R] [-o OUT.safetensors]",
    .about = "The 3-axis (time, row, column) positions of text and image/video grids, as Qwen2-VL's\n"
             "get_rope_index lays them out; prints one line per token and the position text resumes at.");

/* ---- hf-config ------------------------------------------------------------------------------- */
static void init_hf_config_args(void *p) { *(hf_config_args *)p = (hf_config_args){.layer = -1}; }
static const arg_opt HF_CONFIG_POS[] = {
    OPT(hf_config_args, "CONFIG.json", config, ARG_IN, .help = "a HuggingFace model's config.json, or a GGUF file (llama.cpp's: its\n"
        "header is read, never its tensors)"),
    {0}};
static const arg_opt HF_CONFIG_OPTS[] = {
    OPT(hf_config_args, "layer", layer, ARG_INT, .meta = "N", .lo = 0, .hi = 1 << 30, .def = "every layer",
        .help = "only layer N (0-based)"),
    OPT(hf_config_args, "group", group, ARG_FLAG, .help = "one row per distinct setting, with the layers that share it"),
    OPT(hf_config_args, "assume", assume, ARG_STR, .meta = "FAMILY",
        .help = "read the config as FAMILY's code does (a model_type of --families; key hf_assume), for a\n"
                "model_type posenc does not know"),
    OPT(hf_config_args, "families", families, ARG_FLAG,
        .help = "list the model families posenc reads (model_type, the HF code each was read from) and stop"),
    {0}};
const arg_cmd ARGS_HF_CONFIG = CMD("hf-config", hf_config_args, .pos = HF_CONFIG_POS, .opts = HF_CONFIG_OPTS,
    .usage = "CONFIG.json|MODEL.gguf [--layer N] [--group] [--assume FAMILY] | --families",
    .about = "Every layer of a HuggingFace model as posenc runs it: method (rope, or none for a NoPE layer),\n"
             "rope base, scaling, attention factor (on cos and sin), the rotated slice of the head and its\n"
             "pair layout, the softmax scale, and what the caller applies around the layer (window masks,\n"
             "qk-norm). Reads HF v5 rope_parameters per layer type, layer_types, no_rope_layers,\n"
             "sliding_window_pattern, rope_local_base_freq, mrope_section, partial_rotary_factor and MLA's\n"
             "qk_rope_head_dim, through the row of the config's model_type in posenc's family table (what\n"
             "that family's attention code decides: which layers rotate, the pair layout, the slice, key\n"
             "names, the softmax scale); a model_type without a row is refused, naming the nearest. A GGUF\n"
             "file (llama.cpp's) is read from its header: its architecture as the HF family it comes from,\n"
             "rope.dimension_count, rope.freq_base, rope.scaling.*, head counts (one per layer too), the\n"
             "sliding window and its pattern, M-RoPE's sections; the pairs as llama.cpp's rope type lays\n"
             "them out (a Llama's interleaved: its converter permutes q and k).");

/* ---- bench ----------------------------------------------------------------------------------- */
static void init_bench_args(void *p) {
    *(bench_args *)p = (bench_args){.methods = "none,rope,alibi,t5", .causal = "both", .ref_max_length = 2048,
                                    .torch_max_length = 2048, .torch = "bench/torch_bench.py",
                                    .torch_train = "bench/torch_train.py"};
}
static const arg_opt BENCH_OPTS[] = {
    OPT(bench_args, "length", lengths, ARG_STR, .alias = "T", .meta = "LIST", .def = "512,2048,8192; --quick: 64,256",
        .help = "sequence lengths of the attn section, comma-separated (1 .. 131072)"),
    OPT(bench_args, "methods", methods, ARG_STR, .meta = "LIST", .help = "methods of the attn and train sections"),
    OPT(bench_args, "causal", causal, ARG_ENUM, .meta = "WHICH", .choices = "both yes no",
        .help = "causal attention, not causal, or both"),
    OPT(bench_args, "reps", reps, ARG_INT, .meta = "N", .lo = 1, .hi = 15, .def = "3; --quick and length 8192: 1",
        .help = "repetitions, of which the median counts (train: alternating rounds)"),
    OPT(bench_args, "threads", threads, ARG_INT, .meta = "N", .lo = 1, .hi = 1024, .def = "every core; train: 1",
        .help = "threads of posenc, OpenBLAS and PyTorch"),
    OPT(bench_args, "only", only, ARG_STR, .meta = "LIST", .def = "every section",
        .help = "sections: rope, attn, core, decode, denormal, gemm, packed, train, scale"),
    OPT(bench_args, "steps", steps, ARG_INT, .meta = "N", .lo = 1, .hi = 1000000,
        .def = "about 1 s of posenc's training; --quick: 2", .help = "timed optimizer steps per round of the train section"),
    OPT(bench_args, "no-torch", no_torch, ARG_FLAG, .help = "no PyTorch columns"),
    OPT(bench_args, "no-reference", no_reference, ARG_FLAG, .help = "no reference-path columns"),
    OPT(bench_args, "ref-max-length", ref_max_length, ARG_INT, .alias = "ref-max-T", .meta = "N", .lo = 0, .hi = 1 << 20,
        .help = "longest length the reference path runs"),
    OPT(bench_args, "torch-max-length", torch_max_length, ARG_INT, .alias = "torch-max-T", .meta = "N", .lo = 0,
        .hi = 1 << 20, .help = "longest length PyTorch runs"),
    OPT(bench_args, "torch", torch, ARG_STR, .meta = "FILE", .help = "the PyTorch side (run with $POSENC_PYTHON, else .venv/bin/python)"),
    OPT(bench_args, "torch-train", torch_train, ARG_STR, .meta = "FILE",
        .help = "the PyTorch side of the train section (run as --torch)"),
    OPT(bench_args, "quick", quick, ARG_FLAG,
        .help = "a smoke run of every section on small shapes (lengths 64,256, 1 repetition; seconds in all)"),
    OPT(bench_args, "readme", readme, ARG_EDIT, .meta = "FILE",
        .help = "rewrite the <!-- bench:begin --> ... <!-- bench:end --> block of FILE with a summary"),
    {0}};
const arg_cmd ARGS_BENCH = CMD("bench", bench_args, .opts = BENCH_OPTS,
    .usage = "[options]",
    .about = "Prints Markdown tables of ratios measured side by side in one run:\n"
             "  rope      RoPE on q, k [4096, 32 heads, 128] (both layouts) against a copy of the same bytes\n"
             "  attn      attention layer forward and backward, H=8, D=64, for each --length, method and\n"
             "            --causal: fused path vs reference path (up to --ref-max-length) vs PyTorch eager\n"
             "            (bench/torch_bench.py via .venv/bin/python, up to --torch-max-length), peak memory;\n"
             "            the time of causal over full attention per method and length\n"
             "  core      the projected form alone (q, k, v; no projections), fused path, forward and\n"
             "            backward per --length, method and --causal, GFLOP/s\n"
             "  decode    one decode step through the KV cache (H=32, Hkv=8, D=128, rope and alibi, 4096 and\n"
             "            32768 cached keys) against a copy of the cache's bytes and PyTorch eager; a context\n"
             "            shift's re-rotation\n"
             "  denormal  alibi T=2048 with and without FTZ/DAZ, exp clamped or underflowing gradually\n"
             "  gemm      BLAS sgemm 2048x2048x64 against the fused attention core, GFLOP/s\n"
             "  packed    rope causal, projected form: 8 documents of T/8 packed in one row (attn_mask)\n"
             "            against one document of T and against one call per document\n"
             "  train     posenc train's model (2 layers x 64 wide, 4 heads, length 64, batch 4 and 32) for\n"
             "            of --methods, tokens/s of the C trainer against the same model in PyTorch eager\n"
             "            (bench/torch_train.py via .venv/bin/python), one thread each, alternating rounds");

/* ---- plot ------------------------------------------------------------------------------------ */
static void init_plot_args(void *p) {
    *(plot_args *)p = (plot_args){.length = 64, .width = 64, .heads = 4, .seed = 1, .layer = -1, .metric = "value",
                                  .size = "900x700", .grid = "16x16"};
}
static const arg_opt PLOT_POS[] = {
    OPT(plot_args, "KIND", kind, ARG_ENUM, .required = 1,
        .choices = "encoding similarity relative attention extrapolation axes grid", .help = "the picture (above)"),
    OPT(plot_args, "IN", in, ARG_IN,
        .help = "attention: a `posenc attend` case; extrapolation: a `posenc compare` CSV"),
    {0}};
static const arg_opt PLOT_OPTS[] = {
    OPT(plot_args, "o", out, ARG_OUT, .alias = "output", .meta = "FILE.png", .required = 1, .help = "the picture"),
    OPT(plot_args, "length", length, ARG_INT, .alias = "N", .meta = "N", .lo = 1, .hi = 4096, .help = "positions"),
    OPT(plot_args, "width", width, ARG_INT, .meta = "C", .lo = 1, .hi = 1 << 16, .help = "the layer's width"),
    OPT(plot_args, "heads", heads, ARG_INT, .meta = "H", .lo = 1, .hi = 1024, .help = "heads"),
    OPT(plot_args, "seed", seed, ARG_INT, .meta = "S", .lo = 0, .hi = MAX, .help = "seed of random tensors"),
    OPT(plot_args, "size", size, ARG_STR, .meta = "WxH", .help = "picture size in pixels (160..8000 x 120..8000)"),
    OPT(plot_args, "from", from, ARG_IN, .meta = "FILE",
        .help = "encoding, similarity: a file's pos_table, or a `posenc train --save`\n"
                "checkpoint's method, settings and trained tensors"),
    OPT(plot_args, "tensor", tensor, ARG_STR, .meta = "NAME", .def = "the method's", .help = "the table in --from FILE"),
    OPT(plot_args, "layer", layer, ARG_INT, .meta = "L", .lo = 0, .hi = 1 << 20, .def = "0",
        .help = "a checkpoint's block"),
    OPT(plot_args, "part", part, ARG_STR, .meta = "PART", .def = "q; complex: re",
        .help = "floater: q, k or v; complex: re or im"),
    OPT(plot_args, "show", show, ARG_STR, .meta = "WHAT", .help = "relative: index or bias"),
    OPT(plot_args, "metric", metric, ARG_STR, .meta = "COLUMN", .help = "extrapolation: the CSV column"),
    OPT(plot_args, "checkpoint", checkpoint, ARG_IN, .meta = "FILE", .help = "attention: a trained model"),
    OPT(plot_args, "input", input, ARG_STR, .meta = "TEXT", .any = 1,
        .help = "attention: the text the model reads (characters of its vocabulary)"),
    OPT(plot_args, "batch", batch, ARG_INT, .meta = "B", .lo = 0, .hi = 1 << 20, .help = "attention: the case's batch row"),
    OPT(plot_args, "grid", grid, ARG_STR, .meta = "HxW", .help = "grid: the grid of patches (H, W in 1..256)"),
    OPT(plot_args, "patch", patch, ARG_STR, .meta = "R,C", .def = "the centre", .help = "grid: the patch compared"),
    OPT(plot_args, "cosine", cosine, ARG_FLAG, .help = "similarity: cosine instead of the dot product"),
    {0}};
const arg_cmd ARGS_PLOT = CMD("plot", plot_args, .pos = PLOT_POS, .opts = PLOT_OPTS, .keys = ARG_KEYS_BARE,
    .usage = "KIND [IN] -o FILE.png [options] [--KEY VALUE ...]",
    .about = "kinds:\n"
             "  encoding       P[position, dimension] of an absolute method (sinusoidal, learned, floater\n"
             "                 (--part q|k|v), complex (--part re|im), none); --from FILE: a file's pos_table\n"
             "                 (learned), or a `posenc train --save` checkpoint: its method, settings and\n"
             "                 trained tensors (learned's table; floater's biases of block --layer L)\n"
             "  similarity     absolute: P P^T (--cosine: cosine); rotary: score of q = k = ones against the\n"
             "                 distance (long-term decay); relative/bias: scores with q = k = ones, per head\n"
             "  relative       --show index (shaw, t5, tupe, deberta) or --show bias (scores with zero q, k:\n"
             "                 t5, tupe, alibi, kerple, fire, xl), per head\n"
             "  attention      IN = a `posenc attend` case file: probabilities per head (--batch B); or\n"
             "                 --checkpoint FILE --input TEXT: a trained model's probabilities in block\n"
             "                 --layer L (default 0) on TEXT, characters of its task's vocabulary (lm: the\n"
             "                 training text's; copy, reverse, sort, add: e.g. \"abcd=abcd.\", \"12+345=\")\n"
             "  extrapolation  IN = a `posenc compare` CSV: --metric COLUMN (default value) against length\n"
             "  axes           rope with rope_sections: which position axis each frequency pair reads\n"
             "                 (--rope_sections 16,24,24 [--rope_section_layout interleaved])\n"
             "  grid           a 2-D grid of patches (--grid HxW), positions (column, row): the score of\n"
             "                 q = k = ones between --patch R,C and every patch, per head: rope with two\n"
             "                 rope_sections (--rope_section_freqs per_axis: axial) or rope_mixed\n"
             "                 (rope-vit's initial frequencies, theta 10, angles from --seed)",
    .keys_help = "--method NAME and the method's settings (with a checkpoint: its own,\n"
                 "the command line's win); --KEY alone: true");

/* ---- analyze --------------------------------------------------------------------------------- */
static void init_analyze_args(void *p) {
    *(analyze_args *)p = (analyze_args){.length = 64, .width = 64, .heads = 4, .seed = 1, .layer = -1};
}
static const arg_opt ANALYZE_OPTS[] = {
    OPT(analyze_args, "methods", methods, ARG_STR, .meta = "LIST", .def = "every method; with --from: the file's",
        .help = "comma-separated"),
    OPT(analyze_args, "from", from, ARG_IN, .meta = "FILE",
        .help = "a trained encoding: a posenc train checkpoint or a safetensors table"),
    OPT(analyze_args, "tensor", tensor, ARG_STR, .meta = "NAME", .def = "the method's", .help = "the table in FILE"),
    OPT(analyze_args, "layer", layer, ARG_INT, .meta = "L", .lo = 0, .hi = 1 << 20, .def = "0",
        .help = "a checkpoint's block"),
    OPT(analyze_args, "length", length, ARG_INT, .alias = "N", .meta = "N", .lo = 3, .hi = 2048, .help = "positions"),
    OPT(analyze_args, "width", width, ARG_INT, .meta = "C", .lo = 1, .hi = 1 << 16, .help = "the random layer's width"),
    OPT(analyze_args, "heads", heads, ARG_INT, .meta = "H", .lo = 1, .hi = 1024, .help = "the random layer's heads"),
    OPT(analyze_args, "seed", seed, ARG_INT, .meta = "S", .lo = 0, .hi = MAX, .help = "the random layer's seed"),
    OPT(analyze_args, "cosine", cosine, ARG_FLAG, .help = "cosine similarity of the encodings instead of logits"),
    OPT(analyze_args, "o", out, ARG_OUT, .alias = "output", .meta = "FILE.csv", .help = "the table as CSV"),
    {0}};
const arg_cmd ARGS_ANALYZE = CMD("analyze", analyze_args, .opts = ANALYZE_OPTS, .keys = ARG_KEYS_BARE,
    .usage = "[--methods LIST] [--from FILE [--tensor NAME] [--layer L]] [options] [-o FILE.csv] [--KEY VALUE ...]",
    .about = "The three properties of \"On Position Embeddings in BERT\" (Wang et al. 2021) of every method's\n"
             "position-position matrix: the Gram matrix P P^T of an absolute encoding, the scores with\n"
             "q = k = ones of the others, averaged over heads (doc/plots.md): monotonicity (forward and\n"
             "backward apart), translation invariance and symmetry.",
    .keys_help = "a method setting; --KEY alone: true");

/* ---- methods, version ------------------------------------------------------------------------ */
static void init_methods_args(void *p) { *(methods_args *)p = (methods_args){0}; }
static const arg_opt METHODS_POS[] = {
    OPT(methods_args, "NAME", name, ARG_STR, .help = "one method in full"),
    {0}};
static const arg_opt NO_OPTS[] = {{0}};
const arg_cmd ARGS_METHODS = CMD("methods", methods_args, .pos = METHODS_POS, .opts = NO_OPTS,
    .usage = "[NAME]",
    .about = "Without NAME: every method, its family and keys. NAME: its reference, every key with\n"
             "default and meaning, its tensors and paths.");
const arg_cmd ARGS_VERSION = CMD("version", methods_args, .opts = NO_OPTS, .usage = "", .about = "The version.");

const arg_cmd *const ARG_COMMANDS[] = {&ARGS_DEMO, &ARGS_ATTEND, &ARGS_ENCODE, &ARGS_CONVERT_ROPE, &ARGS_TRAIN,
                                       &ARGS_COMPARE, &ARGS_GENERATE, &ARGS_POSITIONS, &ARGS_HF_CONFIG, &ARGS_BENCH, &ARGS_PLOT,
                                       &ARGS_ANALYZE, &ARGS_METHODS, &ARGS_VERSION, NULL};
