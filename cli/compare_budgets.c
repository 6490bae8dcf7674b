/* The budgets of posenc compare --full, a task each (the table CMP_FULL), and the hybrids of
 * the 2025 models that the comparison runs as variants by name (compare.h). */
#include <stdio.h>
#include <string.h>

#include "compare.h"

/* ---- the budgets of --full --------------------------------------------------------------- *
 * Found by short runs (one seed, rope and two or three others per task, on 2 shared cores; the
 * results page prints the table). The first five tasks (lm, copy, reverse, add, count) fit 35
 * minutes on 2 cores: about 400 runs, 24 to 29 variants, 3 seeds; the synthetic tasks' short
 * sequences make most methods cost about the same there (floater 1.5x, pope 2.6x), while
 * count's 75 tokens put the T x T methods at 2-3x. The tasks after them follow the papers'
 * setups towards their sizes, and the whole has to fit the experiment's 16 CPU-hours: compare
 * --full --estimate gave 12:12 of runs on an AVX-512 EPYC (session 15), 2 hours a shard of 6. */

/* Ruoss et al. 2023's setup (google-deepmind/randomized_positional_encodings at 57bc5d01,
 * experiments/example.py and training.py): 5 layers x 64, 8 heads, dropout 0.1, batches of
 * 128 sequences of U(1, 40) binary symbols, 10,000 steps of Adam at a constant 1e-3, clipped
 * at norm 1, no weight decay; scored by the mean token accuracy over the lengths 41..100
 * (range_evaluation.py, 512 sequences a length); randomized positions from [0, 2048)
 * (noise_max_length). Their model is post-LN with ReLU and an untied output; ours is the
 * trainer's (README: the differences). Run here for 4000 of their 10,000 steps, one seed a
 * variant: 10,000 took 45 to 110 minutes a run on one AVX2 core (26 CPU-hours for --full,
 * against the experiment's 16), and rope's loss on reverse_string was 0.005 by step 2700 of a
 * full run (1x exact 99.0% at the end, score 0.526; session 14). */
#define RUOSS_OPTS                                                                                          \
    "alphabet 2 layout slots length 40 layers 5 width 64 heads 8 batch 128 dropout 0.1 lr 1e-3 "            \
    "weight-decay 0 warmup 1 min-lr 1 beta2 0.999 clip 1 steps 4000 score-lengths 41-100 eval 1,2"
/* their encodings, each with and without randomized positions; their RELATIVE is
 * Transformer-XL's (positional_encodings.py, compute_attention_with_relative_encodings), whose
 * randomized form draws noisy offsets: posenc's xl layer reads no positions (doc/spec: it
 * places keys by token index), so xl runs without randomized positions only */
#define RUOSS_METHODS                                                                                       \
    "sinusoidal,learned,xl,rope,alibi,sinusoidal+random,learned+random,rope+random,alibi+random"

/* add with index hints (--hints 1): the budget at which one method learned the sum in
 * distribution, one seed each, 4 x 64 wide, 6000 steps of 32, lr 3e-3 (session 14) */
#define ADD_HINTS_WHY                                                                                       \
    "the sum with index hints (Zhou et al. 2024's format, --hints 1), trained on 1..5 digits: with 4 layers x " \
    "64 wide, 6000 steps of 32 and lr 3e-3, fire answered 100% at 1x, alibi 99.5%, fire+random 99%, none 94%, " \
    "rope 0.5%, all 0% at 2x " \
    "(4 x 64 at lr 1e-2, 3000 x 64: fire 0%, rope 1.4%); 8x is past the 26 hint letters"

/* Kazemnejad et al. 2023's tasks (McGill-NLP/length-generalization at d06170ec, configs/data/
 * s2s_*.jsonnet and scripts/dataset_builders/make_*_dataset.py): a decoder-only model, the
 * answer after the prompt, trained on lengths up to L and tested on L+1 .. 2L (copy and reverse
 * L 20, sort and parity 8), scored by the exact match over the test lengths (their accuracy:
 * src/analyzers/seq2seq_analyzer.py), three seeds (theirs: 256788, 234054, 146317), their five
 * encodings (configs/models/pe_*.jsonnet: none, t5_relative_bias, alibi, rotary,
 * abs_sinusoid). Their model is T5-base's decoder, 12 layers x 768 and 40,000 steps of 64 at lr
 * 3e-5 (configs/t5_dec_base.jsonnet, configs/trainer/base_model.jsonnet); this one is 4 x 64,
 * 6000 steps of 32 at 3e-3, the budget at which rope and fire learned add with hints. */
#define NOPE_OPTS "layers 4 width 64 heads 4 steps 6000 batch 32 lr 3e-3 eval 1,2 score-metric exact"
#define NOPE_METHODS "none,t5,alibi,rope,sinusoidal"
#define NOPE_TASK(stem, task, L, test, what)                                                                \
    {.name = stem, .opts = "task " task " length " #L " score-lengths " test " " NOPE_OPTS,                  \
     .methods = NOPE_METHODS, .seeds = 3,                                                                   \
     .why = "Kazemnejad et al. 2023's " what ", trained on lengths 1.." #L " and scored by the exact match over " \
            test " (cli/compare_budgets.c: NOPE_OPTS)"}

const cmp_budget CMP_FULL[] = {
    {.name = "lm",
     .opts = "task lm length 64 steps 1500 batch 4",
     .variants = "",
     .why =
     "the default comparison's budget (posenc compare, the README's table): every method but none leaves the "
     "bigram plateau at 1x; at length 128 and 720 steps the absolute encodings stayed on it"},
    {.name = "copy",
     .opts = "task copy length 8 layers 4 width 32 heads 4 steps 3000 batch 16",
     .variants = "sinusoidal+random,learned+random,complex+random,rope+random,alibi+random",
     .why =
     "at lm's 2 layers x 64 wide, rope learns copying only after about 3000 steps of 16 (the loss falls all at "
     "once) and none and alibi were at 0% after 1500; 4 layers x 32 wide with 4 heads of 8 learn it sooner, "
     "at about half the wider model's cost per step: in 3000 steps alibi 97%, none 78% (rope 100% with 2 "
     "heads), in 2000 alibi 57%, rope 49%, none 18%. 2 heads (alibi 21% in 3000), length 6, batches of 8 or 12 "
     "(more steps, the same tokens: 0-1%) and of 24 or 32 (fewer steps: 0-38%) learned less. Randomized "
     "positions for the absolute encodings, rope and alibi, as Ruoss et al. ran them; not none, which has no "
     "positions, nor floater, whose ODE is solved anew for every draw of positions (10x floater's cost)"},
    {.name = "reverse",
     .opts = "task reverse length 8 layers 4 width 32 heads 4 steps 3000 batch 16",
     .variants = "sinusoidal+random,learned+random,complex+random,rope+random,alibi+random",
     .why =
     "the budget of copy, sequences of the same length (rope: 93% at 1x in 3000 steps; at 3 layers x 32 wide "
     "with 2 heads, 17% in 4000)"},
    {.name = "add",
     .opts = "task add length 4 layers 4 width 32 heads 4 steps 600 batch 16",
     .variants = "fire+random,rope+random",
     .why =
     "out of reach at this size and time: with the model of copy, 3000 steps at length 8 left rope and fire at "
     "0% (30% of the digits) and 4000 steps at length 4 left rope and learned at 1% (55% of the digits), with "
     "the operands most significant digit first and the sum least significant first; so a shorter run at "
     "length 4 that shows it; fire+random is Zhou et al. 2024's recipe (FIRE with randomized positions)"},
    {.name = "add_hints",
     .opts = "task add hints 1 length 5 layers 4 width 64 heads 4 steps 6000 batch 32 lr 3e-3 eval 1,2,4",
     .methods = "fire,fire+random,rope,rope+random,alibi,none,learned,kerple,t5",
     .seeds = 2,
     .random_n = 256,
     .why = ADD_HINTS_WHY},
    {.name = "count",
     .opts = "task count length 64 layers 2 width 32 heads 4 steps 1200 batch 8 eval-tokens 32768",
     .variants = "rope+random",
     .why =
     "64 statements, so the values asked about span CoPE's 0..10 (at 16 they are mostly 0..2 and the longer "
     "evaluations would ask for counts never trained): 2x-8x test longer contexts, not larger answers. "
     "Sequences of about 75 tokens; cope answers 69% at 1x after 1000 steps of 8 and 76% after 1500 (rope "
     "48%; with 2 heads 69% and 31%); cope, on the T x T path, costs 2.8x rope. 32768 tokens evaluated per "
     "length: the answer is one or two tokens of a long sequence, and 8192 left 16 sequences at 8x"},
    {.name = "reverse_string",
     .opts = "task reverse " RUOSS_OPTS,
     .methods = RUOSS_METHODS,
     .seeds = 1,
     .random_n = 2048,
     .why = "Ruoss et al. 2023's reverse_string as they ran it (cli/compare_budgets.c: RUOSS_OPTS): an encoder reading the "
            "string and one empty slot per answer symbol, the answer read at the slots"},
    {.name = "duplicate_string",
     .opts = "task duplicate " RUOSS_OPTS,
     .methods = RUOSS_METHODS,
     .seeds = 1,
     .random_n = 2048,
     .why = "Ruoss et al. 2023's duplicate_string as they ran it: the string, then twice as many slots"},
    {.name = "lm_hybrids",
     .opts = "task lm length 64 layers 4 steps 3000 batch 8",
     .methods = "rope,none,alibi,rnope-swa,swan,rnope,rnope+temp,rope-swa,none+temp",
     .why = "the 2025 hybrids (cli/compare_budgets.c: HYBRIDS) against rope, none and alibi on lm, with 4 layers for their "
            "3-to-1 patterns and twice lm's steps and batch"},
    {.name = "count_scaled",
     .opts = "task count length 64 layers 4 width 64 heads 4 steps 3000 batch 16 eval 1,2,4 eval-tokens 32768",
     .methods = "cope,learned,shaw,rope",
     .why = "CoPE's counting scaled towards theirs (facebookresearch/RAM projects/cope run.sh: 4 layers x 256, 4 "
            "heads, about 15,700 steps of 64 on 3..512 statements): 4 layers x 64, 3000 steps of 16 on 1..64 "
            "statements, their baselines (absolute: learned; relative: shaw) and rope"},
    NOPE_TASK("s2s_copy", "copy", 20, "21-40", "s2s_copy (theirs: 100 symbols, lengths 2..20)"),
    NOPE_TASK("s2s_reverse", "reverse", 20, "21-40", "s2s_reverse (theirs: 100 symbols, lengths 2..20)"),
    /* their s2s_addition and s2s_sum are not run: at this budget neither rope nor none learned
     * them in distribution (one seed each, session 15: add at L 8 rope 0% exact at 1x; sum rope
     * 10.4%, none 11.4%, chance 10%), so their 30 runs would decide nothing */
    NOPE_TASK("s2s_sort", "sort", 8, "9-16", "s2s_sort (theirs: 50 symbols)"),
    NOPE_TASK("s2s_parity", "parity", 8, "9-16", "s2s_parity (theirs: lengths 4..8)"),
};
const int CMP_N_FULL = sizeof CMP_FULL / sizeof CMP_FULL[0];
/* --full --quick: every task in seconds, for the tests; its numbers mean nothing */
const char CMP_FULL_QUICK[] = "steps 20 batch 4 layers 1 width 16 heads 2 eval-tokens 128 corpus-chars 20000";

/* The hybrids: schedules of the 2025 models on the trainer's layers, each a variant by its
 * name. Cohere2 (HF transformers cohere2/configuration_cohere2.py Cohere2Config,
 * sliding_window_pattern 4; modeling_cohere2.py Cohere2Attention.forward, RoPE only where the
 * layer slides: src/rotary/hf_families.c's cohere2 row): three sliding rope layers, then one
 * full NoPE layer. Llama 4 (llama4/modeling_llama4.py Llama4TextAttention, no_rope_layers
 * every no_rope_layer_interval 4th; attn_temperature_tuning with floor_scale 8192, its
 * attention_chunk_size): the same layers without windows (its rope layers' 8192-token chunks
 * left out), with and without the NoPE layers' temperature, floor_scale here the training
 * length. SWAN (Puvvada et al. 2025, EMNLP 2025 main 123, section 2: a global NoPE layer, then
 * three sliding-window rope layers, repeated; windows of 512 at training lengths of 1K and
 * 8K): the same pattern; their logits' scaling log_a(a + n) at inference is left out, its
 * constant a not being given. The window is L/4 tokens. */
static const cmp_hybrid HYBRIDS[] = {
    {"rnope-swa", "rope,rope,rope,none", 1, 0}, /* Cohere2's: rope with a window of L/4 on 3 of 4 layers, the 4th none over all */
    {"rnope", "rope,rope,rope,none", 0, 0}, /* Llama 4's interleaving: rope on 3 of 4 layers, the 4th none */
    {"rnope+temp", "rope,rope,rope,none", 0, 1}, /* Llama 4's interleaving with the none layers' temperature (floor_scale L) */
    {"swan", "none,rope,rope,rope", 1, 0}, /* SWAN's: none over all on 1 of 4 layers, then rope with a window of L/4 on 3 */
    {"rope-swa", "rope", 1, 0}, /* rope with a window of L/4 on every layer */
    {"none+temp", "none", 0, 1}, /* none with Llama 4's temperature on every layer (floor_scale L) */
};

const cmp_hybrid *cmp_hybrid_named(const char *name, size_t n) {
    for (size_t h = 0; h < sizeof HYBRIDS / sizeof HYBRIDS[0]; h++)
        if (strlen(HYBRIDS[h].name) == n && !strncmp(name, HYBRIDS[h].name, n)) return &HYBRIDS[h];
    return NULL;
}

int cmp_hybrid_layers(const char *list) {
    int most = 0;
    for (const char *p = list; p && *p; p += strcspn(p, ","), p += *p == ',') {
        const cmp_hybrid *h = cmp_hybrid_named(p, strcspn(p, ","));
        int n = 1;
        for (const char *c = h ? h->methods : ""; *c; c++) n += *c == ',';
        if (h && n > most) most = n;
    }
    return most;
}
