#!/usr/bin/env bash
# CLI tests of `posenc generate`: from a fresh `posenc train --save` checkpoint of every
# trainable method, --check finds the KV-cache decoding within float32 tolerance of the model
# over the whole sequence (complex, which has no cache, decodes through the full model);
# greedy decoding is deterministic and the output is the prompt plus --tokens characters;
# every bad input exits 2 with exactly one stderr line "posenc: ...".
#   usage: bash tests/cli/test_generate.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" generate "${1:-}"

methods=$("$POSENC" methods | awk 'NR > 1 { print $1 }')
for m in $methods; do
    ck="$WORK/$m.safetensors"
    if ! "$POSENC" train --method "$m" --steps 20 --width 32 --layers 2 --length 32 --eval 1 --eval-tokens 128 \
        --quiet --save "$ck" > /dev/null 2> "$WORK/err"; then
        if grep -q "\-\-method $m: " "$WORK/err"; then ok "$m: not trained ($(cut -c 1-70 "$WORK/err"))"
        else not_ok "$m: train" "$(cat "$WORK/err")"; fi
        continue
    fi
    "$POSENC" generate --checkpoint "$ck" --prompt "let vupo be " --tokens 15 --temperature 0.7 --check \
        > "$WORK/out" 2> "$WORK/err" || { not_ok "$m: generate --check" "$(cat "$WORK/err")"; continue; }
    text=$(head -n 1 "$WORK/out")
    if [ ${#text} -ne 27 ]; then
        not_ok "$m: '$text' is not the prompt plus 15 characters"
    elif [ "$m" = complex ]; then
        grep -q "whole sequence" "$WORK/err" && ok "$m: decodes through the full model" || not_ok "$m: no note" "$(cat "$WORK/err")"
    elif awk '/^check:/ { split($0, a, "= "); split(a[2], b, ","); split(a[3], c, " "); exit !(b[1] + 0 < 1e-5 && c[1] + 0 < 1e-4) }' "$WORK/out"; then
        ok "$m: cache equals the full model ($(tail -n 1 "$WORK/out" | cut -c 1-80))"
    else
        not_ok "$m: deviation" "$(cat "$WORK/out")"
    fi
done

# a per-layer schedule with NoPE temperature tuning, randomized positions, and NoPE's learned
# temperature per head (HeadScale): the caches follow each block's method, and the positions
# are the sorted draw of evaluation
for v in "mixed:--layers 4 --layers-methods rope,none,alibi --nope-temperature 4" "random:--method rope --random-positions 300" \
         "mixed-random:--layers-methods none,rope --random-positions 300" \
         "head-scale:--method none --head_scale true --head_scale_init 1.5 --head_scale_min 0.5"; do
    name=${v%%:*}
    # shellcheck disable=SC2086
    if ! "$POSENC" train ${v#*:} --steps 20 --width 32 --length 32 --eval 1 --eval-tokens 128 --quiet \
        --save "$WORK/$name.safetensors" > /dev/null 2> "$WORK/err"; then
        not_ok "$name: train" "$(cat "$WORK/err")"
        continue
    fi
    "$POSENC" generate --checkpoint "$WORK/$name.safetensors" --prompt "let vupo be " --tokens 15 --check \
        > "$WORK/out" 2> "$WORK/err" || { not_ok "$name: generate --check" "$(cat "$WORK/err")"; continue; }
    if awk '/^check:/ { split($0, a, "= "); split(a[2], b, ","); split(a[3], c, " "); exit !(b[1] + 0 < 1e-5 && c[1] + 0 < 1e-4) }' "$WORK/out"; then
        ok "$name: cache equals the full model ($(tail -n 1 "$WORK/out" | cut -c 1-80))"
    else
        not_ok "$name: deviation" "$(cat "$WORK/out")"
    fi
done
expect_bad "past the randomized positions" "--random-positions 300" "" generate --checkpoint "$WORK/random.safetensors" --prompt "a" --tokens 400

ck="$WORK/rope.safetensors"
a=$("$POSENC" generate --checkpoint "$ck" --prompt "the " --tokens 30 --temperature 0)
b=$("$POSENC" generate --checkpoint "$ck" --prompt "the " --tokens 30 --temperature 0 --seed 9)
[ "$a" = "$b" ] && ok "greedy decoding ignores the seed" || not_ok "greedy differs" "$a / $b"
a=$("$POSENC" generate --checkpoint "$ck" --prompt "the " --tokens 30 --seed 3)
b=$("$POSENC" generate --checkpoint "$ck" --prompt "the " --tokens 30 --seed 3)
[ "$a" = "$b" ] && ok "sampling is a function of the seed" || not_ok "sampling differs" "$a / $b"
"$POSENC" generate --help | grep -q -- "--temperature" && ok "--help" || not_ok "--help"

# a model whose logits overflow float32 (finite weights, ln_f.bias 3e38) is an error, not one token forever
"$PY" - "$ck" "$WORK/huge.safetensors" <<'PYEOF'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
o = h["ln_f.bias"]["data_offsets"]
b[8 + n + o[0]:8 + n + o[1]] = struct.pack("<f", 3e38) * ((o[1] - o[0]) // 4)
open(sys.argv[2], "wb").write(b)
PYEOF
"$POSENC" generate --checkpoint "$WORK/huge.safetensors" --prompt "the " --tokens 5 > /dev/null 2> "$WORK/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "logits overflow" "$WORK/err"; then ok "overflowing logits are an error"
else not_ok "overflowing logits: exit $rc" "$(cat "$WORK/err")"; fi

expect_bad "no checkpoint" "--checkpoint FILE is required" "" generate --prompt "a"
expect_bad "missing file" "$WORK/absent.safetensors" "" generate --checkpoint "$WORK/absent.safetensors" --prompt "a"
expect_bad "empty prompt" "--prompt is empty" "" generate --checkpoint "$ck" --prompt ""
expect_bad "a prompt past its limit (issue 32: 131 KB ran for minutes)" "--prompt of 20000 characters is past the limit of 16384" "" \
    generate --checkpoint "$ck" --prompt "$(head -c 20000 /dev/zero | tr '\0' a)"
expect_bad "prompt outside the vocabulary" "not in the vocabulary" "" generate --checkpoint "$ck" --prompt "A~"
expect_bad "bad --tokens" "--tokens" "" generate --checkpoint "$ck" --prompt "a" --tokens abc
expect_bad "fractional --tokens" "--tokens" "" generate --checkpoint "$ck" --prompt "a" --tokens 2.5
expect_bad "negative --temperature" "--temperature" "" generate --checkpoint "$ck" --prompt "a" --temperature -1
expect_bad "missing value" "--tokens needs a value" "" generate --checkpoint "$ck" --prompt "a" --tokens
expect_bad "unknown option" "unknown option '--top-k'" "" generate --checkpoint "$ck" --prompt "a" --top-k 5
expect_bad "past a learned table" "pos_table" "" generate --checkpoint "$WORK/learned.safetensors" --prompt "a" --tokens 500
# the answer-slot layout (Ruoss et al.'s encoder): trains (Transformer-XL's relative attention
# without memory, with randomized positions), resumes to the uninterrupted run's numbers, and a
# bidirectional checkpoint is refused by generate, which decodes causally; layouts and
# alphabets a task does not have are refused
slots="--task duplicate --alphabet 2 --layout slots --length 6 --layers 2 --width 32 --heads 4 --batch 8 --method rope --random-positions 64 --eval 1,2 --eval-tokens 256 --warmup 1 --min-lr 1 --quiet"
# (a constant learning rate, so the 6-step run is the 12-step one's first half)
# shellcheck disable=SC2086
if "$POSENC" train $slots --steps 12 --save "$WORK/slots.safetensors" > "$WORK/slots_full" 2> "$WORK/err" &&
   "$POSENC" train $slots --steps 6 --save "$WORK/slots6.safetensors" > /dev/null 2>> "$WORK/err" &&
   "$POSENC" train --resume "$WORK/slots6.safetensors" --steps 12 --quiet > "$WORK/slots_resumed" 2>> "$WORK/err"; then
    if cmp -s <(grep -E "^ +(6|12) +[0-9]" "$WORK/slots_full") <(grep -E "^ +(6|12) +[0-9]" "$WORK/slots_resumed") &&
       [ "$(grep -cE "^ +(6|12) +[0-9]" "$WORK/slots_full")" -eq 2 ]; then ok "slots: trains, and resumes to the same evaluation"
    else not_ok "slots: resumed run differs" "$(cat "$WORK/slots_full" "$WORK/slots_resumed")"; fi
else
    not_ok "slots: train" "$(cat "$WORK/err")"
fi
# shellcheck disable=SC2086
"$POSENC" train $slots --steps 4 --score-lengths 7-9 > "$WORK/score" 2> "$WORK/err" &&
    awk '/^score: mean token accuracy over content lengths 7-9/ { s = $NF } END { exit !(s > 0 && s < 1) }' "$WORK/score" &&
    ok "slots: --score-lengths prints Ruoss et al.'s score" || not_ok "slots: --score-lengths" "$(cat "$WORK/score" "$WORK/err")"
# Kazemnejad et al.'s parity and sum, scored by the exact match over the lengths past L
for t in parity sum; do
    "$POSENC" train --task $t --length 4 --layers 1 --width 16 --heads 2 --batch 8 --steps 4 --eval 1,2 --eval-tokens 256 \
        --score-lengths 5-8 --score-metric exact > "$WORK/$t" 2> "$WORK/err" &&
        awk '/^score: mean exact match over content lengths 5-8 \(Kazemnejad/ { s = $NF; n++ } END { exit !(n == 1 && s >= 0 && s <= 1) }' "$WORK/$t" &&
        ok "$t: trains, and --score-metric exact prints the exact-match score" || not_ok "$t: --score-metric exact" "$(cat "$WORK/$t" "$WORK/err")"
done
expect_bad "an unknown score metric" "--score-metric: unknown metric 'bpc' (token_acc, exact)" "" train --task parity --score-metric bpc --steps 1 --quiet
expect_bad "score lengths backwards" "is not A-B" "" train --task copy --score-lengths 9-7 --steps 1 --quiet
expect_bad "score lengths on lm" "not lm" "" train --score-lengths 1-2 --steps 1 --quiet
expect_bad "score lengths past the random positions" "at least the longest sequence" "" train --task copy --layout slots --length 4 --random-positions 16 --score-lengths 5-9 --steps 1 --quiet
expect_bad "generate from a bidirectional model" "bidirectional" "" generate --checkpoint "$WORK/slots.safetensors" --prompt "ab" --tokens 2
expect_bad "slots on add" "--layout slots is for copy" "" train --task add --layout slots --steps 1 --quiet
expect_bad "an unknown layout" "unknown layout 'encoder'" "" train --task copy --layout encoder --steps 1 --quiet
expect_bad "an alphabet of 11" "need 2..10" "" train --task copy --alphabet 11 --steps 1 --quiet
expect_bad "an alphabet for lm" "--alphabet is for copy" "" train --alphabet 2 --steps 1 --quiet

# add with index hints: trains, resumes, and generate continues a hinted prompt from the checkpoint
hints="--task add --hints 1 --length 3 --layers 1 --width 32 --heads 4 --batch 8 --eval 1,2 --eval-tokens 256 --quiet"
if "$POSENC" train $hints --steps 8 --save "$WORK/hints.safetensors" > "$WORK/hints_out" 2> "$WORK/err" &&
   grep -qE "^ +6 +[0-9]" "$WORK/hints_out" &&
   "$POSENC" generate --checkpoint "$WORK/hints.safetensors" --prompt "A0B1C2+A0B3C4=" --tokens 4 > "$WORK/hints_gen" 2>> "$WORK/err" &&
   grep -q "A0B1C2+A0B3C4=" "$WORK/hints_gen"; then ok "add --hints 1: trains, evaluates at 2x and generates from a hinted prompt"
else not_ok "add --hints 1" "$(cat "$WORK/hints_out" "$WORK/hints_gen" "$WORK/err" 2>/dev/null)"; fi
expect_bad "hints on copy" "--hints is for add" "" train --task copy --hints 1 --steps 1 --quiet
expect_bad "hints of 2" "0 or 1" "" train --task add --hints 2 --steps 1 --quiet
expect_bad "hints past the letters" "needs 41 hint letters" "" train --task add --hints 1 --length 5 --eval 1,8 --steps 1 --quiet

finish
