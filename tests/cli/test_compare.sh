#!/usr/bin/env bash
# CLI tests of `posenc compare` and `posenc train`: the --quick comparison completes and writes
# its CSV (a row per method and length), table and PNG; train writes a checkpoint that --resume
# continues; bad options exit 2 with one line "posenc: ..." on stderr.
#   usage: bash tests/cli/test_compare.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" compare "${1:-}"

bad() { local name=$1; shift; expect_bad "$name" "" "" "$@"; }

# ---- compare --quick ------------------------------------------------------------------------
start=$(date +%s)
if "$POSENC" compare --quick --quiet --out "$WORK/q" > "$WORK/q.out" 2> "$WORK/q.err"; then
    ok "compare --quick exits 0 ($(( $(date +%s) - start )) s)"
else
    not_ok "compare --quick exits 0" "$(tail -n 5 "$WORK/q.err")"
fi
csv="$WORK/q/compare.csv"
if [ -s "$csv" ] && head -n 1 "$csv" | grep -q '^task,method,variant,seed,train_length,eval_multiple,eval_length,metric,value'; then
    ok "compare.csv has the header"
else
    not_ok "compare.csv has the header" "$(head -n 2 "$csv" 2>&1)"
fi
# every method the tool lists that the trainer takes (compare names the others "skipped
# METHOD: why"), and sinusoidal+shape: 4 lengths each, all ok
skipped=$(awk '$1 == "skipped" { sub(":", "", $2); print $2 }' "$WORK/q.out")
methods=$("$POSENC" methods | awk 'NR > 1 {print $1}' | grep -vxF -e "${skipped:-none-skipped}")
want=$(( ($(printf '%s\n' $methods | wc -l) + 1) * 4 ))
rows=$(tail -n +2 "$csv" 2>/dev/null | grep -c ',ok$')
if [ "$rows" = "$want" ]; then ok "compare.csv has $want rows, all ok"; else not_ok "compare.csv has $want ok rows" "got $rows"; fi
miss=""
for m in $methods sinusoidal+shape; do grep -q "^lm,[a-z0-9_]*,$m,1,32,8,256,bpc," "$csv" || miss="$miss $m"; done
if [ -z "$miss" ]; then ok "every method is in the CSV at 8x"; else not_ok "every method is in the CSV at 8x" "missing:$miss"; fi
if [ "$(head -c 8 "$WORK/q/compare.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; then
    ok "compare.png is a PNG"
else
    not_ok "compare.png is a PNG"
fi
if grep -q '^| `alibi` |' "$WORK/q/compare.md" 2>/dev/null && grep -q 'alibi' "$WORK/q.out"; then
    ok "the table is printed and written"
else
    not_ok "the table is printed and written" "$(head -n 20 "$WORK/q.out")"
fi

# ---- --readme replaces the marked block ---------------------------------------------------------
printf 'before\n<!-- compare:begin -->\nold\n<!-- compare:end -->\nafter\n' > "$WORK/README.md"
if "$POSENC" compare --quick --quiet --methods alibi,none --steps 3 --eval 1,2 --out "$WORK/r" --readme "$WORK/README.md" > /dev/null 2>&1 &&
   grep -q '^| `alibi` |' "$WORK/README.md" && ! grep -q '^old$' "$WORK/README.md" && grep -q '^after$' "$WORK/README.md" &&
   grep -q 'compare.png)' "$WORK/README.md"; then
    ok "--readme fills the marked block"
else
    not_ok "--readme fills the marked block" "$(cat "$WORK/README.md")"
fi

# ---- a task's csv, md and png appear together or not at all (issue 32) ------------------------
# files past 30 KiB fail (ulimit -f, SIGXFSZ ignored: write says EFBIG), as on a full disk: the
# PNG fails, and the CSV written before it must not appear without it
mkdir -p "$WORK/full"
if ! (trap '' XFSZ; ulimit -f 30; "$POSENC" compare --quick --quiet --methods alibi,none --steps 3 --eval 1,2 \
        --out "$WORK/full" > /dev/null 2> "$WORK/full.err") && grep -q "compare.png" "$WORK/full.err" &&
   [ -z "$(ls -A "$WORK/full")" ]; then
    ok "compare on a full disk leaves none of csv, md, png"
else
    not_ok "compare on a full disk leaves none of csv, md, png" "$(ls -A "$WORK/full"; cat "$WORK/full.err")"
fi

# ---- --full: every task, its files, the results page ------------------------------------------------
# --quick's tiny budget (20 steps of a 1-layer model, length 4), two methods: they bring the
# tasks' variants of theirs with them (rope+random on copy, reverse, add and count, alibi+random
# on copy and reverse), and no others
printf '# R\n\n<!-- results:begin -->\nold\n<!-- results:end -->\ntail\n' > "$WORK/R.md"
start=$(date +%s)
if "$POSENC" compare --full --quick --quiet --methods rope,alibi --out "$WORK/f" --results "$WORK/results.md" \
    --readme "$WORK/R.md" > "$WORK/f.out" 2> "$WORK/f.err"; then
    ok "compare --full --quick exits 0 ($(( $(date +%s) - start )) s)"
else
    not_ok "compare --full --quick exits 0" "$(tail -n 5 "$WORK/f.err")"
fi
miss=""
for t in lm copy reverse add count; do
    for x in csv md png; do [ -s "$WORK/f/$t.$x" ] || miss="$miss $t.$x"; done
done
[ -s "$WORK/results.md" ] || miss="$miss results.md"
if [ -z "$miss" ]; then ok "--full writes a CSV, a table and a plot per task, and the results page"; else not_ok "--full writes every file" "missing:$miss"; fi
if grep -q '^| ordering | this run | in short |' "$WORK/R.md" && grep -q '^| CoPE on counting' "$WORK/R.md" &&
   grep -q '(results.md)\.$' "$WORK/R.md" && ! grep -q '^old$' "$WORK/R.md" && grep -q '^tail$' "$WORK/R.md"; then
    ok "--full --readme puts the table of verdicts, with a link to the page, into the README's results block"
else
    not_ok "--full --readme updates the results block" "$(cat "$WORK/R.md")"
fi
rows=$(tail -n +2 "$WORK/f/copy.csv" 2>/dev/null | grep -c ',ok$')
if [ "$rows" = 16 ] && grep -q '^copy,rope,rope+random,1,4,8,32,exact,' "$WORK/f/copy.csv" &&
   grep -q '^copy,alibi,alibi+random,1,4,1,4,exact,' "$WORK/f/copy.csv" && ! grep -q 'sinusoidal' "$WORK/f/copy.csv" &&
   grep -q '^count,alibi,alibi,1,4,1,4,exact,' "$WORK/f/count.csv" && ! grep -q 'random' "$WORK/f/lm.csv"; then
    ok "copy.csv has rope, alibi and their +random variants at every length (no others); lm has no +random variant"
else
    not_ok "the task CSVs hold their variants" "copy: $rows ok rows; $(head -n 3 "$WORK/f/copy.csv")"
fi
miss=""
for h in '^# Results' '^\*\*SMOKE TEST' '^## Budgets' '^| `count` | 4 statements |' '^## Published orderings' '^| ordering | this run | in short |' \
         '^### ALiBi is flat' '^### NoPE generalises' '^### Randomized positions help' '^### FIRE generalises' '^### CoPE counts' '^### The 2025 hybrids hold' \
         '^Criterion' '^Verdicts: ALiBi flat past L \*\*' '^## Tasks' '^### lm$' '^### copy$' '^### reverse$' '^### add$' '^### count$' \
         '^On `count`, [0-9]* of 3 variants learned' '^| `rope+random` |' '!\[copy: metric versus evaluation length\](f/copy.png)'; do
    grep -q "$h" "$WORK/results.md" 2>/dev/null || miss="$miss [$h]"
done
n_crit=$(grep -c '^Criterion' "$WORK/results.md" 2>/dev/null)
if [ -z "$miss" ] && [ "$n_crit" = 6 ]; then ok "the results page has every section, six criteria, a paragraph and a plot per task"; else
    not_ok "the results page has every section" "missing:$miss; $n_crit criteria"; fi
if grep -q '^| `alibi` | .* | \*\*no\*\* |' "$WORK/f/copy.md" && grep -q 'learned = mean exact match at 1x' "$WORK/f/copy.md" &&
   grep -q 'bigram model' "$WORK/f/lm.md"; then
    ok "the tables mark the variants that did not learn the task at 1x, and say by which rule"
else
    not_ok "the tables mark what did not learn the task" "$(cat "$WORK/f/copy.md")"
fi
# the tasks of --full, in their order (cli/compare_budgets.c: CMP_FULL)
FULL_TASKS="lm copy reverse add add_hints count reverse_string duplicate_string lm_hybrids count_scaled s2s_copy s2s_reverse s2s_sort s2s_parity"
if "$POSENC" compare --full --quick --estimate --methods rope --out "$WORK/e" > "$WORK/e.out" 2>&1 &&
   grep -q "^estimated [0-9:]* (.* of runs, .*); $(for t in $FULL_TASKS; do printf '%s [0-9:]*, ' "$t"; done | sed 's/, $//')\$" "$WORK/e.out" &&
   [ ! -e "$WORK/e/lm.csv" ]; then
    ok "--estimate prints the expected time of every task and trains nothing"
else
    not_ok "--estimate prints the expected time" "$(cat "$WORK/e.out")"
fi
if "$POSENC" train --task count --length 8 --steps 3 --batch 2 --eval 1,2 --eval-tokens 64 --quiet > "$WORK/n.out" 2>&1 &&
   grep -q 'exact' "$WORK/n.out" && grep -q 'on count' "$WORK/n.out"; then
    ok "train --task count trains and evaluates with exact match"
else
    not_ok "train --task count" "$(cat "$WORK/n.out")"
fi
bad "compare: --results without --full" compare --results "$WORK/x.md"
bad "compare: --full --readme without --results" compare --full --readme "$WORK/README.md"
bad "compare: --full with --task" compare --full --task copy
bad "compare: a variant that is not one" compare --methods rope+bogus
bad "compare: xl+random" compare --methods xl+random
bad "compare: --random-n below the longest sequence" compare --methods rope+random --task copy --length 8 --random-n 64

# ---- train, checkpoint, resume --------------------------------------------------------------------
T="--length 16 --batch 2 --corpus-chars 20000 --eval 1 --eval-tokens 64 --quiet"
if "$POSENC" train $T --steps 6 --save "$WORK/ck.safetensors" > "$WORK/t.out" 2>&1 &&
   "$POSENC" train --resume "$WORK/ck.safetensors" --steps 8 --save "$WORK/ck2.safetensors" > "$WORK/r.out" 2>&1 &&
   grep -q 'resumed from' "$WORK/r.out" && grep -q 'trained 2 steps' "$WORK/r.out"; then
    ok "train --save, then --resume continues from step 6"
else
    not_ok "train --save, then --resume continues from step 6" "$(cat "$WORK/t.out" "$WORK/r.out" 2>/dev/null | tail -n 8)"
fi

# ---- --resume goes on saving where the run saved; Ctrl-C writes a last checkpoint -------------
T=(--method alibi --width 16 --heads 2 --layers 1 --length 16 --eval 1 --eval-tokens 64 --quiet)
"$POSENC" train "${T[@]}" --steps 4 --save "$WORK/k.safetensors" --save-every 2 > /dev/null 2>&1
rm -f "$WORK/k2.safetensors"
if "$POSENC" train --resume "$WORK/k.safetensors" --steps 6 --quiet > "$WORK/k.out" 2>&1 &&
    grep -q "checkpoint: $WORK/k.safetensors" "$WORK/k.out" &&
    "$PY" - "$WORK/k.safetensors" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
m = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
assert (m["step"], m["save_every"]) == ("6", "2"), m
PYEOF
then ok "train --resume keeps --save and --save-every"; else not_ok "train --resume keeps --save" "$(cat "$WORK/k.out")"; fi
rm -f "$WORK/c.safetensors"
timeout -s INT 2 "$POSENC" train "${T[@]}" --steps 10000000 --save "$WORK/c.safetensors" > /dev/null 2> "$WORK/c.err"
if grep -q "interrupted at step [0-9]*; checkpoint $WORK/c.safetensors" "$WORK/c.err" && [ -s "$WORK/c.safetensors" ]; then
    ok "Ctrl-C writes a last checkpoint and says where"
else not_ok "Ctrl-C writes a last checkpoint" "$(cat "$WORK/c.err")"; fi

# ---- bad input: status 2, one line ----------------------------------------------------------------
bad "compare: unknown method" compare --methods rope,nosuch --out "$WORK/x"
bad "compare: SHAPE of a relative method" compare --methods rope+shape --out "$WORK/x"
bad "compare: unknown option" compare --nosuch 1
bad "train: unknown task" train --task nosuch
bad "train: SHAPE needs an absolute method" train --method alibi --shape 8
bad "train: missing checkpoint" train --resume "$WORK/none.safetensors"
bad "train: a layer key the method does not take" train --method rope --num_buckets 8 --steps 1
rp() { local name=$1 expect=$2; shift 2; expect_bad "$name" "$expect" "" "$@"; }
rp "train: --random-positions below the training length" "--random-positions 16: N must be at least the training length 32" \
    train --length 32 --random-positions 16 --steps 1
rp "train: --random-positions below the longest evaluation" "at least the longest sequence, 256 tokens" \
    train --length 32 --random-positions 100 --steps 1
rp "train: --random-positions with --shape" "give one" train --method learned --random-positions 600 --shape 4 --steps 1
rp "train: an unknown method in --layers-methods" "method 'nosuch'" train --layers-methods rope,nosuch --steps 1
rp "train: an absolute method in --layers-methods" "learned is not a method of the layers" train --layers-methods rope,learned --steps 1
rp "train: more methods than layers" "3 methods for 2 layers" train --layers-methods rope,none,alibi --steps 1
rp "train: --nope-temperature without a none layer" "none layers" train --layers-methods rope,alibi --nope-temperature 8 --steps 1
rp "train: --nope-temperature below 1" "--nope-temperature" train --layers-methods rope,none --nope-temperature 0.5 --steps 1
rp "train: a window that is no count" "--layers-windows: 'x' is not a token count" train --layers-windows 8,x --steps 1
rp "train: more windows than layers" "3 windows for 2 layers" train --layers-windows 8,8,0 --steps 1
rp "train: --layers-windows with --window" "give one" train --layers-windows 8 --window 3,0 --steps 1
rp "train: --layers-windows in the slots layout" "decoder layout" train --task copy --layout slots --layers-windows 8 --steps 1
# a window of 8 tokens on every layer is the layer key window 7,0; per layer, generation agrees
W=(--steps 5 --eval 1,2 --eval-tokens 512 --layers 2 --quiet)
if cmp -s <("$POSENC" train "${W[@]}" --window 7,0 | grep -v '^trained') <("$POSENC" train "${W[@]}" --layers-windows 8 | grep -v '^trained'); then
    ok "--layers-windows 8 trains the model of --window 7,0"
else not_ok "--layers-windows 8 is --window 7,0"; fi
if "$POSENC" train "${W[@]}" --layers-methods rope,none --layers-windows 8,0 --save "$WORK/w.safetensors" > /dev/null 2>&1 &&
   "$POSENC" generate --checkpoint "$WORK/w.safetensors" --prompt "the first time he said that the" --tokens 24 --check > "$WORK/w.out" 2>&1 &&
   awk '/^check:/ { split($0, f, "= "); ok = f[2] + 0 < 1e-5 && f[3] + 0 < 1e-4 } END { exit !ok }' "$WORK/w.out"; then
    ok "rope with a window of 8 and none over all (RNoPE-SWA): the KV cache's generation agrees with the full model"
else not_ok "--layers-windows through generate --check" "$(cat "$WORK/w.out")"; fi

# ---- the hybrids: a variant by name is its schedule, windows of L/4 on its rope layers ----------
if "$POSENC" compare --methods rnope-swa,swan --quick --quiet --layers 4 --out "$WORK/hy" > "$WORK/hy.out" 2>&1 &&
   "$POSENC" train --length 32 --steps 60 --batch 8 --eval-tokens 1024 --corpus-chars 200000 --layers 4 --quiet \
       --layers-methods rope,rope,rope,none --layers-windows 8,8,8,0 > "$WORK/hyt.out" 2>&1 &&
   [ "$(awk -F, '$3 == "rnope-swa" && $6 == 1 { printf "%.4f", $11 }' "$WORK/hy/compare.csv")" = "$(awk '$1 == 32 { print $3 }' "$WORK/hyt.out")" ]; then
    ok "compare's rnope-swa trains train's --layers-methods rope,rope,rope,none --layers-windows 8,8,8,0 (L 32)"
else not_ok "rnope-swa is its schedule and windows" "$(cat "$WORK/hy.out" "$WORK/hyt.out" | tail -n 8)"; fi
rp "compare: a hybrid of more layers than the model's" "rnope-swa: --layers-methods names 4 methods for 2 layers" \
    compare --methods rnope-swa --quick --out "$WORK/x"
rp "compare: a hybrid in the slots layout" "the hybrids are for the decoder layout" \
    compare --methods swan --task copy --layout slots --quick --out "$WORK/x"

# ---- the answer-slot layout: xl there runs without memory, and still reads no positions ----------
if "$POSENC" compare --task reverse --layout slots --alphabet 2 --methods xl,rope,rope+random --length 4 --steps 6 --batch 4 \
    --layers 1 --width 16 --heads 2 --eval-tokens 64 --seeds 1 --out "$WORK/slots" > "$WORK/slots.out" 2>&1 &&
   [ "$(grep -c '^reverse,rope,rope+random,' "$WORK/slots/compare.csv")" -eq 4 ] && [ "$(grep -c '^reverse,xl,xl,' "$WORK/slots/compare.csv")" -eq 4 ]
then ok "compare --layout slots: xl, rope and rope+random at every length"
else not_ok "compare --layout slots" "$(tail -n 5 "$WORK/slots.out"; head -n 3 "$WORK/slots/compare.csv" 2>/dev/null)"; fi
rp "compare: xl+random in the slots layout (xl reads no positions)" "it reads no positions" \
    compare --task reverse --layout slots --methods xl+random --quick --out "$WORK/x"
rp "train: xl with randomized positions in the slots layout" "it reads no positions" \
    train --task reverse --layout slots --method xl --length 4 --random-positions 64 --steps 1

# ---- Kazemnejad et al.'s mean reciprocal rank, on run files of known scores ----------------------
# a shard's run files of --quick, their results then set by hand (a result is no part of the
# fingerprint): on s2s_parity every encoding learned it at 1x, scored none 0.9, t5 and alibi 0.5
# (tied: 2nd and 3rd share (1/2 + 1/3) / 2), rope 0.1, sinusoidal 0; none learned no other task
K=(--full --quick --quiet --methods none,t5,alibi,rope,sinusoidal)
"$POSENC" compare "${K[@]}" --shard 0/1 --out "$WORK/k" > /dev/null 2>&1
for m in none:0.9 t5:0.5 alibi:0.5 rope:0.1 sinusoidal:0; do
    f="$WORK/k/s2s_parity.${m%%:*}.seed1.run"
    sed -i -E "s/^(eval 1 [^ ]+ [^ ]+ [^ ]+) [^ ]+ [^ ]+ /\1 1 1 /; s/^score .*/score ${m#*:}/" "$f"
done
if "$POSENC" compare "${K[@]}" --merge "$WORK/k" --out "$WORK/km" --results "$WORK/km/results.md" > "$WORK/km.out" 2>&1 &&
   grep -q '^Mean reciprocal rank over the 1 columns of the 1 tasks `none` learned at 1x (of the 4 run)' "$WORK/km/results.md" &&
   grep -q '^| `none` | 1.000 | 0.687 |$' "$WORK/km/results.md" && grep -q '^| `t5` | 0.417 | 0.549 |$' "$WORK/km/results.md" &&
   grep -q '^| `alibi` | 0.417 | 0.502 |$' "$WORK/km/results.md" && grep -q '^| `sinusoidal` | 0.200 | 0.215 |$' "$WORK/km/results.md" &&
   grep -q '^| NoPE generalises on synthetic tasks (Kazemnejad et al. 2023) | \*\*reproduced\*\* |' "$WORK/km/results.md"; then
    ok "NoPE: the mean reciprocal rank over their tasks' columns, ties sharing their ranks, beside theirs; --results into a new --out"
else
    not_ok "NoPE's mean reciprocal rank" "$(cat "$WORK/km.out"; sed -n '/^Mean reciprocal/,/^$/p' "$WORK/km/results.md" 2>/dev/null)"
fi

# ---- Ruoss et al.'s tasks are learned by token accuracy, as they are scored --------------------
# both runs 93% of tokens right at 1x and no string exact: learned by their measure; the +random
# run scored 0.6 against 0.5 on both tasks
R=(--full --quick --quiet --methods rope,rope+random)
"$POSENC" compare "${R[@]}" --shard 0/1 --out "$WORK/r" > /dev/null 2>&1
for t in reverse_string duplicate_string; do for m in rope:0.5 rope+random:0.6; do
    sed -i -E "s/^(eval 1 [^ ]+ [^ ]+ [^ ]+) [^ ]+ [^ ]+ /\1 0.93 0 /; s/^score .*/score ${m#*:}/" "$WORK/r/$t.${m%%:*}.seed1.run"
done; done
# merges $WORK/r into $WORK/$1 and checks that its results page has every line of the patterns
# that follow (grep -E); prints the Ruoss section and the merge's output where one is missing
ruoss_page() {
    local out="$WORK/$1" pat
    shift
    "$POSENC" compare "${R[@]}" --merge "$WORK/r" --out "$out" --results "$out/results.md" > "$out.log" 2>&1 || {
        cat "$out.log"; return 1; }
    for pat in "$@"; do
        grep -qE "$pat" "$out/results.md" || { echo "missing: $pat"; sed -n '/^### Randomized/,/^### FIRE/p' "$out/results.md"; return 1; }
    done
}
if msg=$(ruoss_page rm '^- `reverse_string`, `rope`: token accuracy at 1x 93.0% against 93.0%; score 60.0% against 50.0%: holds$' \
         '^learned = mean token accuracy at 1x at least 90% \(the task is scored by token accuracy\); 0 of 2 did not' \
         '^\| randomized positions help on longer strings \(Ruoss et al. 2023\) \| \*\*reproduced\*\* \| holds in 2 of 2 pairs'); then
    ok "Ruoss et al.'s tasks: learned by token accuracy at 1x (93%, no string exact), decided by their score"
else
    not_ok "Ruoss et al.'s learned rule" "$msg"
fi

# neither +random run learned their tasks (60% of tokens at 1x): the ordering falls back to copy
# and reverse, and says so
for t in reverse_string duplicate_string; do
    sed -i -E "s/^(eval 1 [^ ]+ [^ ]+ [^ ]+) [^ ]+ /\1 0.6 /" "$WORK/r/$t.rope+random.seed1.run"
done
if msg=$(ruoss_page rf '^- `reverse_string`, `rope`: token accuracy at 1x 60.0% against 93.0%; score 60.0% against 50.0%: undecided' \
         '^On their setup, randomized positions kept every encoding here from learning their tasks in distribution \(at best 60.0% of the answer.s symbols at 1x.* `X\+random` is above `X` in 2 of the 2 pairs' \
         '^No `X\+random` learned their tasks at 1x, so no pair of their setup is decided' '^- `copy`, `rope`: exact at 1x' \
         '^\| randomized positions help on longer strings \(Ruoss et al. 2023\) \| .*by token accuracy on copy and reverse \(no pair of their setup decided\)'); then
    ok "Ruoss et al.'s setup with no pair decided: the ordering is decided on copy and reverse, and says so"
else
    not_ok "Ruoss et al.'s fallback" "$msg"
fi

finish
