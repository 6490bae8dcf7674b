#!/usr/bin/env bash
# CLI tests of `posenc hf-config MODEL.gguf`: llama.cpp's files, written here by
# tests/gguf/write_gguf.py from the specs in tests/gguf (the header, and the rope_freqs tensor's
# data where the converter writes one, as it writes the values of the config.json files in
# tests/hf), read to the same table as those configs (a Llama's pairs interleaved, as its
# converter permutes q and k; Llama 3.1 / 4's llama3 scaling as the rope_freqs factors, a
# LongRoPE table of one list); what llama.cpp's graph does that the header cannot make posenc
# compute is refused by name; bad files exit 2 with one line.
#   usage: bash tests/cli/test_gguf.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" gguf "${1:-}"
ROOT=$(cd "$HERE/../.." && pwd)
G="$ROOT/tests/gguf"
write() { "$PY" "$G/write_gguf.py" "$WORK/$1.gguf" "$2"; }
for spec in "$G"/*.json; do write "$(basename "$spec" .json)" "$spec"; done

# same NAME GGUF CONFIG: the tables but for their first line (the file's name and kind)
same() {
    local got want
    got=$("$POSENC" hf-config "$WORK/$2.gguf" --group 2>&1 | tail -n +2)
    want=$("$POSENC" hf-config "$ROOT/tests/hf/$3.json" --group 2>&1 | tail -n +2)
    [ -n "$got" ] && [ "$got" = "$want" ] && ok "$1" || not_ok "$1" "gguf:"$'\n'"$got"$'\n'"config.json:"$'\n'"$want"
}
same "qwen2 yarn: GGUF and config.json give one table" qwen2_yarn qwen_yarn
same "gpt-neox: rope.dimension_count is rotary_pct's slice" gpt_neox gpt_neox
same "cohere2: the window's period, NoPE global layers" cohere2 cohere2
same "qwen2-vl: dimension_sections as mrope_section" qwen2vl qwen2vl
same "gpt-oss: yarn, windows, sinks" gpt_oss gpt_oss
same "gemma3 27B: 5 of 6 layers slide at 10000 unscaled, scale (5376 / 32)^-1/2 at 62 layers" gemma3_27b gemma3_27b
same "gemma3 1B: key_length^-1/2, rope.freq_base_swa 10000" gemma3_1b_v5 gemma3_1b_v5
same "deepseek2: MLA slice, yarn_log_multiplier as mscale_all_dim" deepseek_v3 deepseek_v3
# llama3 scaling in GGUF is the rope_freqs factors: the same table but for the scaling's name
got=$("$POSENC" hf-config "$WORK/llama4_scout.gguf" --group 2>&1 | tail -n +2 | sed 's/longrope x1  /llama3 x16   /')
want=$("$POSENC" hf-config "$ROOT/tests/hf/llama4_scout.json" --group 2>&1 | tail -n +2)
[ "$got" = "$want" ] && ok "llama4: NoPE every 4th layer, chunks of 8192, temperature, rope_freqs" ||
    not_ok "llama4: the config.json's table" "gguf:"$'\n'"$got"$'\n'"config.json:"$'\n'"$want"
row=$("$POSENC" hf-config "$WORK/llama31.gguf" | tail -n 1)
[[ "$row" == *"500000    longrope x1"*"interleaved"* ]] && ok "llama 3.1: the rope_freqs factors as a LongRoPE table" ||
    not_ok "llama 3.1: the rope_freqs factors" "$row"
"$PY" -c 'import json, sys; json.dump({"model_type": "gemma", "hidden_size": 3072, "num_attention_heads": 16,
    "num_key_value_heads": 16, "head_dim": 256, "num_hidden_layers": 28, "max_position_embeddings": 8192,
    "rope_theta": 10000.0}, open(sys.argv[1], "w"))' "$WORK/gemma_config.json"
got=$("$POSENC" hf-config "$WORK/gemma.gguf" --group 2>&1 | tail -n +2)
want=$("$POSENC" hf-config "$WORK/gemma_config.json" --group 2>&1 | tail -n +2)
[ -n "$got" ] && [ "$got" = "$want" ] && ok "gemma: q by value_length^-1/2, the config's head_dim^-1/2" ||
    not_ok "gemma: the config's table" "gguf:"$'\n'"$got"$'\n'"config.json:"$'\n'"$want"
expect_bad "gemma2: llama.cpp soft-caps every layer" "soft-caps" "" hf-config "$WORK/gemma2.gguf"
"$POSENC" hf-config "$WORK/llama.gguf" | head -n 1 | grep -q "read as family llama (GGUF architecture llama)" &&
    ok "the header line names the GGUF architecture" || not_ok "the header line names the GGUF architecture"
row=$("$POSENC" hf-config "$WORK/llama.gguf" --layer 5 | tail -n 1)
[[ "$row" == *"0..127 of 128    interleaved"* ]] && ok "llama: pairs (2p, 2p + 1), as llama.cpp's NORM rotates the permuted q, k" ||
    not_ok "llama: interleaved pairs" "$row"

# variations: a spec from a Python one-liner over llama.json
variant() { # NAME EDIT (python statements over the spec s)
    "$PY" - "$G/llama.json" "$WORK/$1.json" "$2" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(s, open(sys.argv[2], "w"))
PYEOF
    write "$1" "$WORK/$1.json"
}
variant heads 's["kv"]["llama.attention.head_count_kv"] = [["array", "u32"], [8] * 16 + [4] * 16]'
row=$("$POSENC" hf-config "$WORK/heads.gguf" --layer 20 | tail -n 1)
[[ "$row" == *"32/4x128"* ]] && ok "head_count_kv per layer" || not_ok "head_count_kv per layer" "$row"
variant swa 's["kv"]["llama.attention.sliding_window"] = ["u32", 512]; s["kv"]["llama.attention.sliding_window_pattern"] = [["array", "bool"], [True, False] * 16]'
row=$("$POSENC" hf-config "$WORK/swa.gguf" --layer 2 | tail -n 1)
[[ "$row" == *"sliding_attention"*"window 512"* ]] && ok "a sliding flag per layer" || not_ok "a sliding flag per layer" "$row"
variant linear 's["kv"]["llama.rope.scaling.type"] = ["str", "linear"]; s["kv"]["llama.rope.scaling.factor"] = ["f32", 4.0]'
row=$("$POSENC" hf-config "$WORK/linear.gguf" --layer 0 | tail -n 1)
[[ "$row" == *"linear x4"* ]] && ok "linear scaling" || not_ok "linear scaling" "$row"

variant freqs 's["tensors"] = ["token_embd.weight", "rope_freqs.weight"]'
expect_bad "rope_freqs of another length than the pairs" "one factor per rotated pair" "" hf-config "$WORK/freqs.gguf"
variant zeros 's["tensors"] = [{"name": "rope_freqs.weight", "f32": [0.0] * 64}]'
expect_bad "a rope_freqs factor of 0" "not a positive number" "" hf-config "$WORK/zeros.gguf"
variant freqs_yarn 's["tensors"] = [{"name": "rope_freqs.weight", "f32": [1.0] * 64}]; s["kv"]["llama.rope.scaling.type"] = ["str", "yarn"]'
expect_bad "rope_freqs with a scaling type" "rope_freqs with a rope.scaling.type" "" hf-config "$WORK/freqs_yarn.gguf"
variant qwen_freqs 's["kv"] = {k.replace("llama", "qwen2"): v for k, v in s["kv"].items()}; s["kv"]["general.architecture"] = ["str", "qwen2"]; s["tensors"] = [{"name": "rope_freqs.weight", "f32": [1.0] * 64}]'
expect_bad "rope_freqs in a graph posenc has not read with them" "not qwen2's" "" hf-config "$WORK/qwen_freqs.gguf"
variant longrope 's["tensors"] = ["rope_factors_long.weight", "rope_factors_short.weight"]'
expect_bad "LongRoPE's tables: llama.cpp picks one by its context size" "context size" "" hf-config "$WORK/longrope.gguf"
variant longrope_type 's["kv"]["llama.rope.scaling.type"] = ["str", "longrope"]'
expect_bad "rope.scaling.type longrope" "longrope" "" hf-config "$WORK/longrope_type.gguf"
variant align 's["kv"]["general.alignment"] = ["u32", 24]'
expect_bad "general.alignment not a power of 2" "general.alignment" "" hf-config "$WORK/align.gguf"
for arch in gemma3n gemma4 gemma-embedding; do
    variant "$arch" "s['kv']['general.architecture'] = ['str', '$arch']"
    expect_bad "$arch: refused by name" "GGUF architecture '$arch' is not read:" "" hf-config "$WORK/$arch.gguf"
done
variant mistral 's["kv"]["general.architecture"] = ["str", "mistral3"]'
expect_bad "an architecture posenc has not read" "GGUF architecture 'mistral3'" "" hf-config "$WORK/mistral.gguf"

# the rules' refusals: a spec's copy with one edit
edit() { # NAME SPEC EDIT
    "$PY" - "$G/$2.json" "$WORK/$1.json" "$3" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
kv = s["kv"]
exec(sys.argv[3])
json.dump(s, open(sys.argv[2], "w"))
PYEOF
    write "$1" "$WORK/$1.json"
}
edit g3_pattern gemma3_27b 'kv["gemma3.attention.sliding_window_pattern"] = ["u32", 4]'
expect_bad "gemma3: another window period" "sliding_window_pattern is not 6" "" hf-config "$WORK/g3_pattern.gguf"
edit g3_base gemma3_27b 'kv["gemma3.rope.freq_base_swa"] = ["f32", 100000.0]'
expect_bad "gemma3: another sliding base" "freq_base_swa is not 10000" "" hf-config "$WORK/g3_base.gguf"
edit g3_nowindow gemma3_27b 'del kv["gemma3.attention.sliding_window"]'
expect_bad "gemma3: no window" "sliding_window" "" hf-config "$WORK/g3_nowindow.gguf"
edit g3_yarn gemma3_27b 'kv["gemma3.rope.scaling.type"] = ["str", "yarn"]'
expect_bad "gemma3: YaRN" "not linear or none" "" hf-config "$WORK/g3_yarn.gguf"
edit g3_12b gemma3_27b 'kv["gemma3.block_count"] = ["u32", 48]'
row=$("$POSENC" hf-config "$WORK/g3_12b.gguf" --layer 5 | tail -n 1)
[[ "$row" == *"0.0883883"* ]] && ok "gemma3 at another size: key_length^-1/2" || not_ok "gemma3 at 48 layers" "$row"
edit g_value gemma 'kv["gemma.attention.value_length"] = ["u32", 128]'
expect_bad "gemma: a value width other than the key's" "value_length" "" hf-config "$WORK/g_value.gguf"
edit ds_attn deepseek_v3 'kv["deepseek2.rope.scaling.attn_factor"] = ["f32", 2.0]'
expect_bad "deepseek2: attn_factor" "attn_factor is not 1" "" hf-config "$WORK/ds_attn.gguf"
edit ds_nolog deepseek_v3 'del kv["deepseek2.rope.scaling.yarn_log_multiplier"]'
expect_bad "deepseek2: YaRN without its log multiplier" "yarn_log_multiplier" "" hf-config "$WORK/ds_nolog.gguf"
edit ds_temp deepseek_v3 'kv["deepseek2.attention.temperature_scale"] = ["f32", 0.1]'
expect_bad "deepseek2: temperature scaling" "temperature_scale" "" hf-config "$WORK/ds_temp.gguf"
edit ds_old deepseek_v3 'del kv["deepseek2.attention.key_length_mla"]; del kv["deepseek2.attention.value_length_mla"]; kv["deepseek2.attention.key_length"] = ["u32", 192]'
got=$("$POSENC" hf-config "$WORK/ds_old.gguf" --group 2>&1 | tail -n +2)
want=$("$POSENC" hf-config "$ROOT/tests/hf/deepseek_v3.json" --group 2>&1 | tail -n +2)
[ "$got" = "$want" ] && ok "deepseek2 without the MLA lengths: key_length is the qk head" || not_ok "deepseek2 old" "$got"
edit l4_mobile llama4_scout 'kv["llama4.attention.sliding_window"] = ["u32", 0]'
expect_bad "llama4: sliding_window 0" "MobileLLM" "" hf-config "$WORK/l4_mobile.gguf"
edit l4_pattern llama4_scout 'kv["llama4.attention.sliding_window_pattern"] = ["u32", 2]'
expect_bad "llama4: another chunk period" "sliding_window_pattern is not 4" "" hf-config "$WORK/l4_pattern.gguf"
edit l4_maverick llama4_scout 'kv["llama4.expert_count"] = ["u32", 128]'
row=$("$POSENC" hf-config "$WORK/l4_maverick.gguf" --layer 0 | tail -n 1)
[[ "$row" == *"chunks of 8192"* && "$row" != *"L2-norm"* ]] && ok "llama4 with 128 experts: no qk norm (Maverick)" ||
    not_ok "llama4 with 128 experts" "$row"
# the factors past the first 64 MiB: read from the file itself (a sparse file)
"$PY" - "$G/llama31.json" "$WORK/far.gguf" <<'PYEOF'
import json, struct, sys
sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0])
import write_gguf
s = json.load(open(sys.argv[1]))
big = 17 << 20  # F32 elements before the factors: 68 MiB
head = write_gguf.header(s["kv"], [])
head = head[:8] + struct.pack("<Q", 2) + head[16:]
head += write_gguf.string("token_embd.weight") + struct.pack("<IQIQ", 1, big, 0, 0)
head += write_gguf.string("rope_freqs.weight") + struct.pack("<IQIQ", 1, 64, 0, 4 * big)
start = write_gguf.pad(len(head), 32)
with open(sys.argv[2], "wb") as f:
    f.write(head + b"\0" * (start - len(head)))
    f.seek(start + 4 * big)
    f.write(struct.pack("<64f", *s["tensors"][0]["f32"]))
PYEOF
got=$("$POSENC" hf-config "$WORK/far.gguf" | tail -n 1)
want=$("$POSENC" hf-config "$WORK/llama31.gguf" | tail -n 1)
[ "$got" = "$want" ] && ok "rope_freqs data past the first 64 MiB, read from the file" || not_ok "far factors" "$got"
truncate -s 70000000 "$WORK/far.gguf"
expect_bad "rope_freqs data past the end of the file" "past the end of the file" "" hf-config "$WORK/far.gguf"
variant v1 's["version"] = 1'
expect_bad "version 1" "version" "" hf-config "$WORK/v1.gguf"
"$PY" - "$WORK" <<'PYEOF'
import struct, sys
d = sys.argv[1]
def s(x): return struct.pack("<Q", len(x)) + x
head = b"GGUF" + struct.pack("<IQQ", 3, 0, 2)
kv = s(b"general.architecture") + struct.pack("<I", 8) + s(b"llama")
open(d + "/dup.gguf", "wb").write(head + kv + kv)
open(d + "/nested.gguf", "wb").write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + s(b"a") + struct.pack("<IIQ", 9, 9, 1))
open(d + "/long.gguf", "wb").write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 62))
open(d + "/cut.gguf", "wb").write((head + kv)[:-3])
open(d + "/type.gguf", "wb").write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + s(b"a") + struct.pack("<I", 13))
open(d + "/many.gguf", "wb").write(b"GGUF" + struct.pack("<IQQ", 3, 1 << 60, 1 << 60))
PYEOF
expect_bad "a key given twice" "twice" "" hf-config "$WORK/dup.gguf"
expect_bad "an array of arrays" "array of arrays" "" hf-config "$WORK/nested.gguf"
expect_bad "a key longer than the file" "truncated" "" hf-config "$WORK/long.gguf"
expect_bad "a cut header" "past the end" "" hf-config "$WORK/cut.gguf"
expect_bad "an unknown value type" "unknown type" "" hf-config "$WORK/type.gguf"
expect_bad "counts past any header" "more keys or tensors" "" hf-config "$WORK/many.gguf"
finish
