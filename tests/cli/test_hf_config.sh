#!/usr/bin/env bash
# CLI tests of `posenc hf-config`: the per-layer table of the example configs of tests/hf
# (Llama 4 Scout, Gemma 3 27B in the v4 layout and a Gemma 3 1B in HF v5's rope_parameters per
# layer type, DeepSeek-V3, Qwen2-VL, Qwen3-VL, and one config per family whose attention code
# decides more than its config says: Cohere2, EXAONE 4, GPT-NeoX, GPT-J, Falcon, GLM-4, Bloom, Ministral 3, Gemma 4
# with its per-layer head shapes and p-RoPE; ChatGLM3, InternLM2, Baichuan 7B/13B, EXAONE 3,
# MiniCPM, Falcon 40B (converted and as published), Phi-4-mini, Granite, OLMo, Llama 3.2, Mistral),
# checked column by column (Ministral 3 with its query scaling); the families posenc refuses (Gemma 2, an unknown
# model_type, none) and bad input.
#   usage: bash tests/cli/test_hf_config.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" hf_config "${1:-}"
ROOT=$(cd "$HERE/../.." && pwd)
HF="$ROOT/tests/hf"

# expect_row NAME CONFIG LAYER FIELDS...: the table's row of LAYER holds FIELDS, in order
# (whitespace-separated words of the row, each matched exactly at its column)
expect_row() {
    local name=$1 cfg=$2 layer=$3
    shift 3
    local line
    [[ "$cfg" == /* ]] || cfg="$HF/$cfg" # a name in tests/hf, or a path
    line=$("$POSENC" hf-config "$cfg" | awk -v l="$layer" 'NR > 2 && $1 == l')
    local want="$layer $*" got
    got=$(echo "$line" | awk -v n=$(($# + 1)) '{ s = $1; for (i = 2; i <= n; i++) s = s " " $i; print s }')
    if [ "$got" = "$want" ]; then ok "$name"; else not_ok "$name" "want: $want"$'\n'"got:  $line"; fi
}
# expect_notes NAME CONFIG LAYER TEXT: the row's notes mention TEXT
expect_notes() {
    local line
    line=$("$POSENC" hf-config "$HF/$2" | awk -v l="$3" 'NR > 2 && $1 == l')
    [[ "$line" == *"$4"* ]] && ok "$1" || not_ok "$1" "want: ...$4..."$'\n'"got:  $line"
}

#            name                         config              layer type method base scaling factor attn slice(3 words) pairs scale
expect_row "llama4: a RoPE layer"        llama4_scout.json 0  chunked_attention rope 500000 llama3 x16 1 0..127 of 128 interleaved 0.0883883
expect_row "llama4: every 4th is NoPE"   llama4_scout.json 3  full_attention none - - - - - 0.0883883
expect_row "llama4: layer 47 is NoPE"    llama4_scout.json 47 full_attention none - - - - - 0.0883883
expect_notes "llama4: temperature tuning" llama4_scout.json 3 "q x 1 + 0.1 ln(1 + floor((p + 1) / 8192))"
expect_notes "llama4: chunked attention"  llama4_scout.json 0 "chunks of 8192"
expect_row "gemma3 27b: local layer"     gemma3_27b.json 0  sliding_attention rope 10000 none 1 0..127 of 128 half 0.0771517
expect_row "gemma3 27b: global layer"    gemma3_27b.json 5  full_attention rope 1000000 linear x8 1 0..127 of 128 half 0.0771517
expect_row "gemma3 27b: last layer"      gemma3_27b.json 61 sliding_attention rope 10000 none 1 0..127 of 128 half 0.0771517
expect_notes "gemma3 27b: the window"     gemma3_27b.json 4 "window 1024"
expect_row "gemma3 v5: local layer"      gemma3_1b_v5.json 4 sliding_attention rope 10000 none 1 0..255 of 256 half 0.0625
expect_row "gemma3 v5: global layer"     gemma3_1b_v5.json 11 full_attention rope 1000000 none 1 0..255 of 256 half 0.0625
expect_row "deepseek-v3: MLA slice"      deepseek_v3.json 60 full_attention rope 10000 yarn x40 1 128..191 of 192 interleaved 0.135234
expect_row "qwen2-vl: M-RoPE"            qwen2vl.json 27 full_attention rope 1000000 none 1 0..127 of 128 half 0.0883883
expect_notes "qwen2-vl: sections"         qwen2vl.json 0 "sections 16,24,24 contiguous"
expect_row "qwen3-vl: M-RoPE"            qwen3vl.json 35 full_attention rope 5000000 none 1 0..127 of 128 half 0.0883883
expect_notes "qwen3-vl: interleaved"      qwen3vl.json 0 "sections 24,20,20 interleaved"
# the family table: what each family's code decides (src/rotary/hf_families.c cites the code)
expect_row "cohere2: sliding layers rotate, interleaved" cohere2.json 0 sliding_attention rope 10000 none 1 0..127 of 128 interleaved 0.0883883
expect_row "cohere2: every 4th is global NoPE" cohere2.json 3 full_attention none - - - - - 0.0883883
expect_row "exaone4: sliding layers rotate, half" exaone4.json 2 sliding_attention rope 1000000 none 1 0..127 of 128 half 0.0883883
expect_row "exaone4: global NoPE"           exaone4.json 31 full_attention none - - - - - 0.0883883
expect_row "gpt-neox: rotary_pct of the head" gpt_neox.json 43 full_attention rope 10000 none 1 0..23 of 96 half 0.102062
expect_row "gpt-j: rotary_dim, every two"   gptj.json 27 full_attention rope 10000 none 1 0..63 of 256 interleaved 0.0625
expect_row "falcon 7b: rope, half"          falcon_7b.json 0 full_attention rope 10000 none 1 0..63 of 64 half 0.125
expect_row "glm-4: half the head, interleaved" glm4.json 39 full_attention rope 10000 none 1 0..63 of 128 interleaved 0.0883883
expect_row "bloom: ALiBi"                   bloom.json 23 full_attention alibi - - - - - 0.125
"$POSENC" hf-config "$HF/falcon_7b.json" | head -n 1 | grep -q "71 heads (1 kv), head_dim 64; read as family falcon" &&
    ok "falcon 7b: multi_query is one kv head; the family is named" || not_ok "falcon 7b: multi_query, family"
expect_bad "gemma2: soft-capping is refused" "attn_logit_softcapping" "" hf-config "$HF/gemma2.json"
expect_row "ministral3: yarn, half"          ministral3.json 33 full_attention rope 1000000 yarn x16 1 0..127 of 128 half 0.0883883
expect_notes "ministral3: its query scaling" ministral3.json 0 "q x 1 + 0.1 ln(1 + floor(p / 16384))"
# Gemma 4: sliding layers at the whole head, global ones at p-RoPE on global_head_dim heads with
# num_global_key_value_heads (attention_k_eq_v), softmax scale 1
expect_row "gemma4 31b: sliding layer"  gemma4_31b.json 0  sliding_attention rope 10000 none 1 0..255 of 256 half 1 32/16x256
expect_row "gemma4 31b: global p-RoPE"  gemma4_31b.json 5  full_attention rope 1000000 p-RoPE 0.25 1 0..511 of 512 half 1 32/4x512
expect_row "gemma4 31b: last layer"     gemma4_31b.json 59 full_attention rope 1000000 p-RoPE 0.25 1 0..511 of 512 half 1 32/4x512
expect_notes "gemma4 31b: a quarter of the pairs rotate" gemma4_31b.json 5 "pairs 0..63 of 256 rotate"
expect_notes "gemma4 31b: the window"   gemma4_31b.json 4 "window 1024"
expect_row "gemma4 e2b: global layer, no k_eq_v" gemma4_e2b.json 34 full_attention rope 1000000 p-RoPE 0.25 1 0..511 of 512 half 1 8/1x512
expect_notes "gemma4 e2b: the class's window" gemma4_e2b.json 0 "window 512"
# Gemma4TextConfig's defaults: 5:1 layers, the last forced full, its rope_parameters, head_dim 256
printf '{"model_type": "gemma4_text", "num_hidden_layers": 7, "num_attention_heads": 8, "num_key_value_heads": 4}' > "$WORK/g4.json"
expect_row "gemma4 defaults: sliding"   "$WORK/g4.json" 0 sliding_attention rope 10000 none 1 0..255 of 256 half 1 8/4x256
expect_row "gemma4 defaults: the last is full" "$WORK/g4.json" 6 full_attention rope 1000000 p-RoPE 0.25 1 0..511 of 512 half 1 8/4x512
printf '{"model_type": "gemma4_text", "num_hidden_layers": 2, "num_attention_heads": 8, "attention_k_eq_v": true}' > "$WORK/g4kv.json"
expect_bad "gemma4: k_eq_v without global kv heads" "num_global_key_value_heads" "" hf-config "$WORK/g4kv.json"
printf '{"model_type": "gemma4_text", "num_hidden_layers": 2, "num_attention_heads": 8, "use_bidirectional_attention": "all"}' > "$WORK/g4bi.json"
expect_bad "gemma4: bidirectional everywhere is refused" "use_bidirectional_attention all" "" hf-config "$WORK/g4bi.json"
printf '{"model_type": "gemma4_text", "num_hidden_layers": 1, "num_attention_heads": 8,
  "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}}' > "$WORK/g4def.json"
expect_bad "gemma4: a global layer's default rope cannot fit" "only proportional reads global_head_dim" "" hf-config "$WORK/g4def.json"
expect_row "ernie-4.5-vl: interleaved pairs"  ernie4_5_vl.json 27 full_attention rope 500000 none 1 0..127 of 128 interleaved 0.0883883 20/4x128
expect_notes "ernie-4.5-vl: (h, w, t) as posenc's (t, h, w), alternating" ernie4_5_vl.json 0 "sections 20,22,22 alternating"
expect_row "gpt-oss: yarn, half, sinks"   gpt_oss.json 0 sliding_attention rope 150000 yarn x32 1.34657 0..63 of 64 half 0.125 64/8x64
expect_notes "gpt-oss: its sinks"         gpt_oss.json 1 "learned sinks (tensor sinks [64])"
expect_notes "gpt-oss: the window"        gpt_oss.json 0 "window 128"
expect_row "starcoder2: every layer slides" starcoder2.json 29 sliding_attention rope 10000 none 1 0..127 of 128 half
expect_notes "starcoder2: its window"      starcoder2.json 0 "window 4096"
# DeepSeek-V4-Flash: compress_ratios [0, 0, 4, 128, ...] as layer types; the main rope set on the
# sliding layers, the compress set (YaRN x16 at 160000, attention factor 1) on CSA and HCA ones;
# the last 64 of 512 dims in adjacent pairs, one kv head, the values rotated
expect_row "deepseek-v4: a sliding layer"  deepseek_v4.json 1 sliding_attention rope 10000 none 1 448..511 of 512 interleaved 0.0441942 64/1x512
expect_row "deepseek-v4: a CSA layer"      deepseek_v4.json 42 compressed_sparse_attention rope 160000 yarn x16 1 448..511 of 512 interleaved
expect_row "deepseek-v4: an HCA layer"     deepseek_v4.json 3 heavily_compressed_attention rope 160000 yarn x16 1 448..511 of 512
expect_notes "deepseek-v4: values, sinks"  deepseek_v4.json 0 "learned sinks (tensor sinks [64]); v rotated as k, o rotated back (rope_values)"
expect_notes "deepseek-v4: HCA entries"    deepseek_v4.json 3 "window 128 over its own keys (attn_mask); learned sinks"
expect_notes "deepseek-v4: CSA entries"    deepseek_v4.json 2 "compressed entries of 4 tokens as keys at their blocks' first positions"
printf '{"model_type": "deepseek_v4", "num_hidden_layers": 3, "num_attention_heads": 8, "compress_ratios": [0, 3, 4]}' > "$WORK/v4bad.json"
expect_bad "deepseek-v4: a compress ratio HF does not map" "compress_ratios is not a list of 0, 4 or 128" "" hf-config "$WORK/v4bad.json"
printf '{"model_type": "deepseek_v4", "num_hidden_layers": 4, "num_attention_heads": 8}' > "$WORK/v4def.json"
"$POSENC" hf-config "$WORK/v4def.json" | awk 'NR > 2 { print $2 }' | tr '\n' ' ' | grep -qx "heavily_compressed_attention heavily_compressed_attention heavily_compressed_attention compressed_sparse_attention " &&
    ok "deepseek-v4: the class's layer types without compress_ratios" || not_ok "deepseek-v4: the class's layer types" "$("$POSENC" hf-config "$WORK/v4def.json" 2>&1)"
# issue 28's families, each read from its own code (src/rotary/hf_families.c cites it)
expect_row "chatglm3: half the kv_channels head, interleaved" chatglm3.json 27 full_attention rope 10000 none 1 0..63 of 128 interleaved 0.0883883 32/2x128
expect_row "internlm2: dynamic NTK, half"   internlm2.json 31 full_attention rope 1000000 dynamic x2 1 0..127 of 128 half 0.0883883 32/8x128
expect_row "baichuan 13b: ALiBi (hidden 5120)" baichuan_13b.json 39 full_attention alibi - - - - - 0.0883883 40/40x128
expect_row "baichuan 7b: RoPE (hidden 4096)" baichuan_7b.json 0 full_attention rope 10000 none 1 0..127 of 128 half 0.0883883 32/32x128
expect_row "exaone 3: num_layers, hidden / heads" exaone.json 31 full_attention rope 10000 none 1 0..63 of 64 half 0.125 32/32x64
expect_row "minicpm: Llama's attention"     minicpm.json 31 full_attention rope 10000 none 1 0..127 of 128 half 0.0883883 32/2x128
expect_row "falcon 40b: num_kv_heads"       falcon_40b.json 59 full_attention rope 10000 none 1 0..63 of 64 half 0.125 128/8x64
expect_row "falcon 40b as published (RefinedWeb)" falcon_40b_refinedweb.json 59 full_attention rope 10000 none 1 0..63 of 64 half 0.125 128/8x64
expect_row "phi-4-mini: 0.75 of the head"   phi4_mini.json 31 full_attention rope 10000 none 1 0..95 of 128 half 0.0883883 24/8x128
expect_row "granite: attention_multiplier is the scale" granite.json 0 full_attention rope 10000 none 1 0..127 of 128 half 0.015625 32/32x128
expect_row "olmo: Llama's attention"        olmo.json 31 full_attention rope 10000 none 1 0..127 of 128 half 0.0883883 32/32x128
expect_row "llama 3.2: llama3 x32"          llama32.json 15 full_attention rope 500000 llama3 x32 1 0..63 of 64 half 0.125 32/8x64
expect_row "mistral: the class's window on every layer" mistral.json 31 sliding_attention rope 10000 none 1 0..127 of 128 half 0.0883883 32/8x128
expect_notes "mistral: window 4096"         mistral.json 0 "window 4096"
"$POSENC" hf-config "$HF/falcon_40b_refinedweb.json" | head -n 1 | grep -q "128 heads (8 kv), head_dim 64; read as family RefinedWeb" &&
    ok "falcon 40b (RefinedWeb): n_head_kv, the family named" || not_ok "falcon 40b (RefinedWeb): n_head_kv, the family named"
d1=$("$POSENC" hf-config "$HF/falcon_40b.json" | tail -n +3); d2=$("$POSENC" hf-config "$HF/falcon_40b_refinedweb.json" | tail -n +3)
[ "$d1" = "$d2" ] && ok "falcon 40b: the published config and its conversion print one table" ||
    not_ok "falcon 40b: the published config and its conversion print one table"
# Phi-4-mini's LongRoPE: one factor per rotated pair (48 of the 96 rotated dims)
"$PY" - "$HF/phi4_mini.json" "$WORK" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(max_position_embeddings=131072, original_max_position_embeddings=4096)
for n, name in ((48, "phi4_longrope.json"), (64, "phi4_longrope_bad.json")):
    c["rope_scaling"] = {"type": "longrope", "short_factor": [1.0] * n, "long_factor": [1.0 + i / n for i in range(n)]}
    json.dump(c, open(sys.argv[2] + "/" + name, "w"))
PY
expect_row "phi-4-mini: longrope on 96 dims" "$WORK/phi4_longrope.json" 0 full_attention rope 10000 longrope x1 1.19024 0..95 of 128 half 0.0883883
expect_bad "phi-4-mini: a factor per head pair is refused" "rotary_dim 96 needs 48" "" hf-config "$WORK/phi4_longrope_bad.json"
# refused by name: what posenc does not compute, or what the config does not say
for k in '"position_encoding_2d": true' '"rope_ratio": 16' '"original_rope": false'; do
    printf '{"model_type": "chatglm", "hidden_size": 4096, "num_attention_heads": 32, "num_layers": 28, %s}' "$k" > "$WORK/glm.json"
    expect_bad "chatglm: $k is refused" "model_type 'chatglm' is not read" "" hf-config "$WORK/glm.json"
done
printf '{"model_type": "deepseek_v32", "hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128}' > "$WORK/v32.json"
expect_bad "deepseek-v3.2: the indexer is refused" "index_topk" "" hf-config "$WORK/v32.json"
"$POSENC" hf-config "$WORK/v32.json" --assume deepseek_v3 | head -n 1 | grep -q "read as family deepseek_v3" &&
    ok "deepseek-v3.2: --assume deepseek_v3 reads its MLA" || not_ok "deepseek-v3.2: --assume deepseek_v3 reads its MLA"
printf '{"model_type": "minicpm", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, "sparse_config": {"topk": 64}}' > "$WORK/cpm.json"
expect_bad "minicpm: sparse attention is refused" "InfLLM-v2" "" hf-config "$WORK/cpm.json"
printf '{"model_type": "falcon", "hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 24, "alibi": true, "multi_query": false}' > "$WORK/rw.json"
expect_bad "falcon-rw: its ALiBi is refused" "sqrt(head_dim)" "" hf-config "$WORK/rw.json"
printf '{"model_type": "internlm", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32}' > "$WORK/ilm.json"
expect_bad "internlm (unknown) names internlm2" "nearest known: internlm2" "" hf-config "$WORK/ilm.json"
printf '{"model_type": "qwen9", "hidden_size": 64, "num_attention_heads": 4}' > "$WORK/qwen9.json"
expect_bad "an unknown model_type names the nearest" "model_type 'qwen9' is not in posenc's family table" "" hf-config "$WORK/qwen9.json"
printf '{"hidden_size": 64, "num_attention_heads": 4}' > "$WORK/untyped.json"
expect_bad "a config without model_type" "no model_type" "" hf-config "$WORK/untyped.json"
"$POSENC" hf-config "$WORK/qwen9.json" --assume qwen2 | head -n 1 | grep -q "read as family qwen2" &&
    ok "--assume reads it as the family's code does" || not_ok "--assume reads it as the family's code does"
expect_bad "--assume of an unknown family" "'qwen9' is not a family posenc knows" "" hf-config "$WORK/qwen9.json" --assume qwen9
fam=$("$POSENC" hf-config --families)
[[ "$fam" == *"cohere2 "*"yes"*"Cohere2Attention.forward"* && "$fam" == *"gpt_oss "*"refused"* ]] &&
    ok "--families lists the table with its sources" || not_ok "--families lists the table with its sources" "$fam"
[[ "$fam" == *"refused where position_encoding_2d is set or rope_ratio != 1 or original_rope != true:"* &&
   "$fam" == *"baichuan "*"yes"*"vllm-project/vllm"* ]] &&
    ok "--families names each refusing term and a remote-code family's repository" ||
    not_ok "--families names each refusing term and a remote-code family's repository"

n=$("$POSENC" hf-config "$HF/llama4_scout.json" | tail -n +3 | wc -l)
[ "$n" -eq 48 ] && ok "llama4: one row per layer" || not_ok "llama4: one row per layer" "$n rows"
g=$("$POSENC" hf-config "$HF/gemma3_27b.json" --group | tail -n +3)
[[ "$g" == *"layers 0-4,6-10,"*"layers 5,11,17,23,29,35,41,47,53,59" ]] && ok "--group lists the layers of each setting" ||
    not_ok "--group lists the layers of each setting" "$g"
one=$("$POSENC" hf-config "$HF/deepseek_v3.json" --layer 7 | tail -n +3 | awk '{ print $1 }')
[ "$one" = 7 ] && ok "--layer N prints that layer" || not_ok "--layer N prints that layer" "$one"
"$POSENC" hf-config --help | grep -q -- "--group" && ok "--help lists the options" || not_ok "--help lists the options"

expect_bad "a layer past the model"   "layer 48 is not within 0 .. 47" "" hf-config "$HF/llama4_scout.json" --layer 48
expect_bad "--layer without a value"  "--layer needs a value" "" hf-config "$HF/llama4_scout.json" --layer
expect_bad "a missing file"           "No such file" "" hf-config "$WORK/nothing.json"
printf '{"num_hidden_layers": 2, "head_dim": 8, "num_attention_heads": 2, "no_rope_layers": [1]}' > "$WORK/short.json"
expect_bad "no_rope_layers too short" "no_rope_layers" "" hf-config "$WORK/short.json" --assume smollm3
printf '{"model_type": "llama", "num_hidden_layers": 1, "head_dim": 8, "num_attention_heads": 2, "layer_types": ["sliding_attention"],
  "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}}' > "$WORK/types.json"
expect_bad "a layer type without rope parameters" "no entry for layer type 'sliding_attention'" "" hf-config "$WORK/types.json"
finish
