#!/usr/bin/env bash
# CLI tests of `posenc plot` and `posenc analyze`: every plot kind on every method it applies
# to writes a valid PNG of the requested size that is not blank (pixel statistics: enough
# non-white pixels and distinct colours), analyze prints a row per method and a CSV; tiny
# trained checkpoints (posenc train --save, a few steps of every method) give attention
# plots, and the trained encodings of learned, floater, complex; every bad input exits 2
# with exactly one stderr line "posenc: ..." and no output file.
#   usage: bash tests/cli/test_plot.sh PATH/TO/posenc
# Needs the project's Python (.venv, scripts/deps.sh) with numpy and PIL.
. "$(dirname "$0")/lib.sh" plot "${1:-}"
ROOT=$(cd "$HERE/../.." && pwd)
"$PY" -c 'import numpy, PIL' 2>/dev/null || bail "$PY has no numpy or PIL (scripts/deps.sh makes .venv)"

# the PNG check: size W x H, not blank: >= 5% pixels not white and >= 8 distinct colours
cat > "$WORK/png.py" <<'EOF'
import sys
import numpy as np
from PIL import Image
path, W, H = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
im = Image.open(path)
im.verify()
im = Image.open(path).convert('RGB')
if im.size != (W, H):
    sys.exit(f'size {im.size[0]}x{im.size[1]}, want {W}x{H}')
a = np.asarray(im).reshape(-1, 3).astype(np.int64)
inked = np.mean(np.any(a < 245, axis=1))
colours = len(np.unique(a[:, 0] * 65536 + a[:, 1] * 256 + a[:, 2]))
if inked < 0.05 or colours < 8:
    sys.exit(f'blank: {inked:.3f} of the pixels inked, {colours} colours')
EOF
# a learned table as a trainer checkpoint names it (pe.pos_table), and a small compare CSV
"$PY" - "$WORK" <<'EOF'
import json, sys
import numpy as np
w = sys.argv[1]
t = np.random.default_rng(0).standard_normal((80, 32)).astype('<f4')
b = t.tobytes()
h = json.dumps({'__metadata__': {'format': 'test'}, 'pe.pos_table': {'dtype': 'F32', 'shape': [80, 32], 'data_offsets': [0, len(b)]}}).encode()
open(f'{w}/ckpt.safetensors', 'wb').write(len(h).to_bytes(8, 'little') + h + b)
with open(f'{w}/compare.csv', 'w') as f:
    f.write('task,method,variant,seed,train_length,eval_multiple,eval_length,metric,value,loss_nats,bpc,token_acc,exact,steps,train_seconds,train_tokens_per_s,status\n')
    for m, k in (('rope', 0.1), ('alibi', 0.02), ('none', 0.3)):
        for s in (1, 2):
            for e in (1, 2, 4, 8):
                f.write(f'lm,{m},{m},{s},64,{e},{64*e},bpc,{2 + k * e + 0.01 * s},1,1,0.5,0,10,1,1,ok\n')
EOF

# plot NAME W H ARGS...: runs posenc plot ... -o NAME.png --size WxH and checks the PNG
plot() {
    local name=$1 W=$2 H=$3
    shift 3
    local out="$WORK/$name.png"
    local msg rc
    msg=$("$POSENC" plot "$@" -o "$out" --size "${W}x${H}" 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
        not_ok "plot $name" "exit $rc: $msg"
    elif ! msg=$("$PY" "$WORK/png.py" "$out" "$W" "$H" 2>&1); then
        not_ok "plot $name" "$msg"
    else
        ok "plot $name (${W}x${H})"
    fi
    rm -f "$out"
}

# encoding: the absolute methods
for a in interleaved concat t2t; do plot "encoding-sinusoidal-$a" 400 300 encoding --method sinusoidal --sin_layout $a; done
plot encoding-learned 420 320 encoding --method learned
plot encoding-learned-ckpt 400 300 encoding --method learned --from "$WORK/ckpt.safetensors" --N 80
for p in q k v; do plot "encoding-floater-$p" 400 300 encoding --method floater --part $p; done
for p in re im; do plot "encoding-complex-$p" 400 300 encoding --method complex --part $p; done
# similarity: every method (absolute: P P^T and cosine; rotary: decay curves; others: per head)
for m in $("$POSENC" methods | awk 'NR > 1 {print $1}'); do
    [ "$m" = none ] && continue # P = 0: nothing to see (its analyze row is nan)
    plot "similarity-$m" 480 360 similarity --method $m --N 48
done
plot similarity-sinusoidal-cos 400 300 similarity --method sinusoidal --cosine
plot similarity-learned-ckpt 400 300 similarity --method learned --from "$WORK/ckpt.safetensors" --N 80
for sc in "--rope_base 500000" "--rope_scaling linear --rope_factor 4" "--rope_scaling ntk --rope_factor 4" \
          "--rope_scaling yarn --rope_factor 4 --original_max_position_embeddings 64" \
          "--rope_scaling llama3 --rope_factor 8 --original_max_position_embeddings 64" \
          "--rope_scaling dynamic --rope_factor 2 --max_position_embeddings 64"; do
    # shellcheck disable=SC2086
    plot "similarity-rope-${sc// /_}" 500 320 similarity --method rope --heads 1 --width 64 --N 256 $sc
done
# relative: the index of the bucketed methods, the bias of the bias ones
for m in shaw t5 tupe deberta; do plot "relative-index-$m" 400 300 relative --method $m --show index; done
plot relative-index-deberta-buckets 400 300 relative --method deberta --position_buckets 8 --max_relative_positions 32
for m in t5 tupe alibi kerple fire xl; do plot "relative-bias-$m" 600 450 relative --method $m --show bias; done
plot relative-bias-kerple-power 400 300 relative --method kerple --kerple power --heads 3 --width 48
# a colour scale and bar per head, ALiBi's slope in each title (8 heads: 3 x 3 panels)
plot relative-bias-alibi-8-heads 500 400 relative --method alibi --heads 8 --N 32
# trained checkpoints: a few steps of every method (positions up to 4 x 16 = 64), and a copy task
CK="$WORK/ck"
mkdir -p "$CK"
trained="" # the methods the trainer takes (it names the others: "--method M: why")
for m in $("$POSENC" methods | awk 'NR > 1 {print $1}'); do
    keys=() # buckets that suit 16 positions
    case $m in t5 | tupe) keys=(--num_buckets 8 --max_distance 12) ;; esac
    if "$POSENC" train --method "$m" --steps 3 --width 16 --heads 2 --layers 2 --length 16 --eval 1,4 --eval-tokens 256 \
        --corpus-chars 20000 "${keys[@]}" --quiet --save "$CK/$m.safetensors" > "$WORK/train.out" 2>&1; then
        trained="$trained $m"
    elif ! grep -q -- "--method $m: " "$WORK/train.out"; then
        not_ok "train a tiny $m checkpoint" "$(tail -3 "$WORK/train.out")"
    fi
done
"$POSENC" train --task copy --method alibi --steps 3 --width 16 --heads 2 --layers 1 --length 8 --eval 1 --eval-tokens 256 \
    --quiet --save "$CK/copy.safetensors" > "$WORK/train.out" 2>&1 || not_ok "train a copy checkpoint" "$(tail -3 "$WORK/train.out")"
TEXT="let be 12. the dog is 12."

# attention of a trained checkpoint on a text: every method in block 0 (complex's own), one in
# block 1, a task's input
for m in $trained; do
    plot "attention-trained-$m" 400 300 attention --checkpoint "$CK/$m.safetensors" --input "$TEXT"
done
plot attention-trained-rope-block1 360 420 attention --checkpoint "$CK/rope.safetensors" --input "$TEXT" --layer 1
plot attention-trained-copy 400 300 attention --checkpoint "$CK/copy.safetensors" --input "abcd=abcd."
# the ticks are the input's characters: one lane, two alternating lanes, every k-th character
plot attention-chars-one-lane 900 900 attention --checkpoint "$CK/rope.safetensors" --input "$TEXT"
plot attention-chars-two-lanes 700 600 attention --checkpoint "$CK/rope.safetensors" --input "$TEXT$TEXT"
plot attention-chars-every-k 400 300 attention --checkpoint "$CK/rope.safetensors" --input "$TEXT$TEXT$TEXT$TEXT"
# the trained encodings: learned's table, floater's biases of a block, complex's embedding
plot encoding-learned-trained 400 300 encoding --from "$CK/learned.safetensors"
plot similarity-learned-trained 400 300 similarity --from "$CK/learned.safetensors" --cosine
for p in q k v; do plot "encoding-floater-trained-$p" 400 300 encoding --from "$CK/floater.safetensors" --layer 1 --part $p; done
plot similarity-floater-trained 400 300 similarity --from "$CK/floater.safetensors" --method floater
plot encoding-complex-trained 400 300 encoding --from "$CK/complex.safetensors" --part im
plot encoding-sinusoidal-trained 400 300 encoding --from "$CK/sinusoidal.safetensors"

# attention: a case file of every method (the basic fixtures)
for f in "$ROOT"/tests/fixtures/*_basic.safetensors; do
    m=$(basename "$f" _basic.safetensors)
    plot "attention-$m" 400 300 attention "$f"
done
plot attention-batch1 400 300 attention "$ROOT/tests/fixtures/rope_batch_gapped.safetensors" --batch 1
# extrapolation: a compare CSV, its value and another column
plot extrapolation 640 400 extrapolation "$WORK/compare.csv"
plot extrapolation-acc 300 200 extrapolation "$WORK/compare.csv" --metric token_acc
[ -f "$ROOT/doc/compare/compare.csv" ] && plot extrapolation-doc 800 500 extrapolation "$ROOT/doc/compare/compare.csv"
# a panel per family (the four of them); one method blown up (clipped to the others' range)
"$PY" - "$WORK" <<'EOF'
import sys
with open(f'{sys.argv[1]}/families.csv', 'w') as f:
    f.write('task,method,variant,seed,train_length,eval_multiple,eval_length,metric,value,loss_nats,bpc,token_acc,exact,steps,train_seconds,train_tokens_per_s,status\n')
    for i, m in enumerate('none learned sinusoidal shaw xl huang1 t5 alibi kerple fire rope xpos'.split()):
        for e in (1, 2, 4, 8):
            f.write(f'lm,{m},{m},1,64,{e},{64*e},bpc,{2 + 0.05 * i * e},1,1,0.5,0,10,1,1,ok\n')
EOF
plot extrapolation-panels 900 640 extrapolation "$WORK/families.csv"
awk -F, 'BEGIN { OFS = "," } NR > 1 && $3 == "learned" { $9 = $9 * 10 } { print }' "$WORK/families.csv" > "$WORK/blown.csv"
plot extrapolation-clipped 900 640 extrapolation "$WORK/blown.csv"

# compare --quick says it is a smoke test, in the table it prints, compare.md and the plot's
# title (the title is not checked: a PNG's text is not readable here); a run without --quick
# does not
if "$POSENC" compare --quick --quiet --methods alibi,none --steps 3 --eval 1,2 --out "$WORK/cq" > "$WORK/cq.out" 2>&1 &&
    grep -q '^SMOKE TEST (--quick): .*mean nothing' "$WORK/cq.out" && grep -q 'SMOKE TEST (--quick)' "$WORK/cq/compare.md" &&
    "$PY" -c 'import sys; from PIL import Image; im = Image.open(sys.argv[1]); im.verify(); sys.exit(im.size != (1200, 860))' \
        "$WORK/cq/compare.png"; then
    ok "compare --quick: labelled a smoke test, its plot 1200x860"
else
    not_ok "compare --quick: labelled a smoke test, its plot 1200x860" "$(tail -n 3 "$WORK/cq.out")"
fi
if "$POSENC" compare --quiet --methods alibi --seeds 1 --steps 3 --length 16 --eval 1 --eval-tokens 256 \
    --corpus-chars 20000 --out "$WORK/cf" > "$WORK/cf.out" 2>&1 && ! grep -q 'SMOKE TEST' "$WORK/cf.out" "$WORK/cf/compare.md"; then
    ok "compare without --quick: no smoke-test label"
else
    not_ok "compare without --quick: no smoke-test label" "$(tail -n 3 "$WORK/cf.out")"
fi

# analyze: a row per method, the CSV, a learned table from a file
if out=$("$POSENC" analyze -o "$WORK/a.csv" 2>&1) && [ "$(wc -l < "$WORK/a.csv")" -eq $(( $("$POSENC" methods | wc -l) )) ] &&
   echo "$out" | grep -q '^alibi .* 1.000 *1.000 *1.000 *1.000 *1.000$' && echo "$out" | grep -q '^sinusoidal .* 1.000 *1.000$'; then
    ok "analyze: every method, CSV, alibi perfect, sinusoidal translation invariant and symmetric"
else
    not_ok "analyze" "$out"
fi
if out=$("$POSENC" analyze --from "$WORK/ckpt.safetensors" --N 80 --cosine 2>&1) && echo "$out" | grep -q '^learned (file)'; then
    ok "analyze --from a checkpoint's pe.pos_table"
else
    not_ok "analyze --from" "$out"
fi

# analyze of a checkpoint: learned's row equals that of the same table in a plain file; a
# floater row per block; the checkpoint's method among a list
"$PY" - "$CK/learned.safetensors" "$WORK/table.safetensors" <<'PY'
import json, sys
raw = open(sys.argv[1], 'rb').read()
n = int.from_bytes(raw[:8], 'little')
e = json.loads(raw[8:8 + n])['pe.pos_table']
b = raw[8 + n + e['data_offsets'][0]:8 + n + e['data_offsets'][1]]
h = json.dumps({'pos_table': {'dtype': 'F32', 'shape': e['shape'], 'data_offsets': [0, len(b)]}}).encode()
open(sys.argv[2], 'wb').write(len(h).to_bytes(8, 'little') + h + b)
PY
a=$("$POSENC" analyze --from "$CK/learned.safetensors" 2>&1 | awk '/^learned \(file\)/ {$1 = $2 = ""; print}')
b=$("$POSENC" analyze --from "$WORK/table.safetensors" 2>&1 | awk '/^learned \(file\)/ {$1 = $2 = ""; print}')
if [ -n "$a" ] && [ "$a" = "$b" ]; then
    ok "analyze --from a trained learned checkpoint: the row of its pe.pos_table ($(echo $a))"
else
    not_ok "analyze --from a trained learned checkpoint" "checkpoint: $a; plain file: $b"
fi
out=$("$POSENC" analyze --from "$CK/floater.safetensors" --layer 1 -o "$WORK/f.csv" 2>&1)
if [ $? -eq 0 ] && echo "$out" | grep -q '^floater (file, block 1) *absolute *P_q P_k^T' && grep -q '^floater (file, block 1),absolute' "$WORK/f.csv"; then
    ok "analyze --from a floater checkpoint, block 1"
else
    not_ok "analyze --from a floater checkpoint, block 1" "$out"
fi
out=$("$POSENC" analyze --from "$CK/floater.safetensors" --methods rope,floater 2>&1)
if [ $? -eq 0 ] && [ "$(echo "$out" | grep -c '^rope \|^floater (file)')" -eq 2 ]; then
    ok "analyze --from a checkpoint among --methods"
else
    not_ok "analyze --from a checkpoint among --methods" "$out"
fi

# errors: status 2, one stderr line "posenc: ...", no output file
bad() { local what=$1 out=$2; shift 2; expect_bad "error: $what" "" "$out" "$@"; }
O="$WORK/bad.png"
bad "unknown kind" "$O" plot heat --method rope -o "$O"
bad "no output" "$O" plot encoding --method sinusoidal
bad "unknown method" "$O" plot encoding --method nope -o "$O"
bad "no method" "$O" plot similarity -o "$O"
bad "encoding of a rotary method" "$O" plot encoding --method rope -o "$O"
bad "bias of a method without one" "$O" plot relative --method shaw --show bias -o "$O"
bad "index of alibi" "$O" plot relative --method alibi --show index -o "$O"
bad "bias of an absolute method" "$O" plot relative --method learned --show bias -o "$O"
bad "bad --show" "$O" plot relative --method t5 --show both -o "$O"
bad "bad size" "$O" plot encoding --method sinusoidal --size 10x10 -o "$O"
bad "bad --N" "$O" plot encoding --method sinusoidal --N 0 -o "$O"
bad "bad key" "$O" plot similarity --method rope --rope_scaling warp -o "$O"
bad "odd head dim for rope" "$O" plot similarity --method rope --width 6 --heads 2 -o "$O"
bad "--part of sinusoidal" "$O" plot encoding --method sinusoidal --part q -o "$O"
bad "--part x of floater" "$O" plot encoding --method floater --part x -o "$O"
bad "--cosine of a rotary method" "$O" plot similarity --method rope --cosine -o "$O"
bad "missing checkpoint" "$O" plot encoding --method learned --from "$WORK/none.safetensors" -o "$O"
bad "checkpoint too short" "$O" plot encoding --method learned --from "$WORK/ckpt.safetensors" --N 200 -o "$O"
bad "checkpoint without the tensor" "$O" plot encoding --method learned --from "$WORK/ckpt.safetensors" --tensor wq -o "$O"
bad "attention without a case" "$O" plot attention -o "$O"
bad "attention of a missing case" "$O" plot attention "$WORK/none.safetensors" -o "$O"
bad "attention --batch too large" "$O" plot attention "$ROOT/tests/fixtures/rope_basic.safetensors" --batch 5 -o "$O"
bad "extrapolation of a non-CSV" "$O" plot extrapolation "$WORK/ckpt.safetensors" -o "$O"
bad "extrapolation unknown column" "$O" plot extrapolation "$WORK/compare.csv" --metric nope -o "$O"
bad "input file for encoding" "$O" plot encoding "$WORK/compare.csv" --method sinusoidal -o "$O"
bad "unwritable output" "$WORK/no/dir/x.png" plot encoding --method sinusoidal -o "$WORK/no/dir/x.png"
bad "attention: missing checkpoint" "$O" plot attention --checkpoint "$WORK/none.safetensors" --input "$TEXT" -o "$O"
bad "attention: not a checkpoint" "$O" plot attention --checkpoint "$ROOT/tests/fixtures/rope_basic.safetensors" --input "$TEXT" -o "$O"
bad "attention: no --input" "$O" plot attention --checkpoint "$CK/rope.safetensors" -o "$O"
bad "attention: empty --input" "$O" plot attention --checkpoint "$CK/rope.safetensors" --input "" -o "$O"
bad "attention: --layer out of range" "$O" plot attention --checkpoint "$CK/rope.safetensors" --input "$TEXT" --layer 2 -o "$O"
bad "attention: character outside the vocabulary" "$O" plot attention --checkpoint "$CK/copy.safetensors" --input "abcd=ABCD." -o "$O"
bad "attention: input longer than learned's table" "$O" plot attention --checkpoint "$CK/learned.safetensors" --input "$TEXT$TEXT$TEXT" -o "$O"
bad "attention: case file and checkpoint" "$O" plot attention "$ROOT/tests/fixtures/rope_basic.safetensors" --checkpoint "$CK/rope.safetensors" --input "$TEXT" -o "$O"
bad "attention: settings with a checkpoint" "$O" plot attention --checkpoint "$CK/rope.safetensors" --input "$TEXT" --rope_base 500 -o "$O"
bad "attention: --from instead of --checkpoint" "$O" plot attention --from "$CK/rope.safetensors" --input "$TEXT" -o "$O"
bad "--checkpoint for encoding" "$O" plot encoding --checkpoint "$CK/learned.safetensors" --input "$TEXT" -o "$O"
bad "encoding: checkpoint of another method" "$O" plot encoding --from "$CK/floater.safetensors" --method learned -o "$O"
bad "encoding: checkpoint --layer out of range" "$O" plot encoding --from "$CK/floater.safetensors" --layer 2 -o "$O"
bad "encoding: checkpoint rows too few" "$O" plot encoding --from "$CK/learned.safetensors" --N 100 -o "$O"
bad "encoding: complex block 1 (none there)" "$O" plot encoding --from "$CK/complex.safetensors" --layer 1 -o "$O"
bad "encoding: --layer without a checkpoint" "$O" plot encoding --method learned --layer 1 -o "$O"
bad "similarity: checkpoint of a rotary method" "$O" plot similarity --from "$CK/rope.safetensors" -o "$O"
bad "relative: checkpoint of a bias method" "$O" plot relative --from "$CK/alibi.safetensors" -o "$O"
bad "analyze: checkpoint of a bias method" "$WORK/a2.csv" analyze --from "$CK/alibi.safetensors" -o "$WORK/a2.csv"
bad "analyze: checkpoint --layer out of range" "$WORK/a2.csv" analyze --from "$CK/floater.safetensors" --layer 5 -o "$WORK/a2.csv"
bad "analyze: --layer without a checkpoint" "$WORK/a2.csv" analyze --from "$WORK/table.safetensors" --layer 1 -o "$WORK/a2.csv"
bad "analyze: unknown method" "$WORK/a2.csv" analyze --methods rope,nope -o "$WORK/a2.csv"
bad "analyze: bad --N" "$WORK/a2.csv" analyze --N 1 -o "$WORK/a2.csv"
bad "analyze: bad key" "$WORK/a2.csv" analyze --methods rope --rope_scaling warp -o "$WORK/a2.csv"

# multi-axis positions: the axis of each pair, and 2-D similarity maps of axial and mixed RoPE
plot axes-contiguous 700 400 axes --method rope --rope_sections 16,24,24 --width 256 --heads 2
plot axes-interleaved 700 400 axes --method rope --rope_sections 24,20,20 --rope_section_layout interleaved --width 256 --heads 2
plot grid-axial 700 600 grid --method rope --rope_sections 8,8 --rope_section_freqs per_axis --rope_base 100 --width 128 --heads 4
plot grid-mixed 700 600 grid --method rope_mixed --width 128 --heads 4 --grid 12x10 --patch 3,2
bad "plot axes: not multi-axis" "$WORK/x.png" plot axes --method rope -o "$WORK/x.png"
bad "plot grid: three sections" "$WORK/x.png" plot grid --method rope --rope_sections 2,1,1 --width 16 --heads 2 -o "$WORK/x.png"
bad "plot grid: a patch outside" "$WORK/x.png" plot grid --method rope_mixed --grid 4x4 --patch 5,1 -o "$WORK/x.png"
bad "plot grid: bad --grid" "$WORK/x.png" plot grid --method rope_mixed --grid 4by4 -o "$WORK/x.png"

finish
