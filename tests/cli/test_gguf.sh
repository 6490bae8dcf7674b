#!/usr/bin/env bash
# CLI tests of `posenc hf-config MODEL.gguf`: llama.cpp's files, written here by
# tests/gguf/write_gguf.py from the specs in tests/gguf (the header alone, as the converter writes
# the values of the config.json files in tests/hf), read to the same table as those configs (a
# Llama's pairs interleaved, as its converter permutes q and k); bad files exit 2 with one line.
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
expect_bad "Llama 3.1's rope_freqs tensor is refused" "rope_freqs" "" hf-config "$WORK/freqs.gguf"
variant gemma 's["kv"]["general.architecture"] = ["str", "gemma3"]'
expect_bad "an architecture posenc has not read" "GGUF architecture 'gemma3'" "" hf-config "$WORK/gemma.gguf"
variant longrope 's["kv"]["llama.rope.scaling.type"] = ["str", "longrope"]'
expect_bad "longrope's tensors" "longrope" "" hf-config "$WORK/longrope.gguf"
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
