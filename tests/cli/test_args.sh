# The one argument parser of every subcommand (cli/args.c, cli/options.c; issue 16 item 3):
# --help lists every option with its default, a missing value, a bad number, "did you mean" for
# options, methods and choices, the length option's old names, outputs checked before any work,
# and train's labelled losses (item 5).
#   usage: bash tests/cli/test_args.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" args "$@"

# a case whose metadata says heads=two
"$PY" - "$HERE/../conformance/cases/none_basic.safetensors" "$WORK/none.safetensors" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
h["__metadata__"]["heads"] = "two"
hb = json.dumps(h).encode()
hb += b" " * (-len(hb) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
PYEOF

# ---- --help: exit 0, every option of the table ---------------------------------------------------
# has_options CMD OPTION...: `posenc CMD --help` exits 0 and lists each OPTION at the start of a line
has_options() {
    local c=$1 missing=""
    shift
    if ! "$POSENC" $c --help > "$WORK/help" 2> "$WORK/stderr"; then
        not_ok "$c --help: exit status" "$(cat "$WORK/stderr")"
        return
    fi
    for o in "$@"; do grep -Eq -- "^  ($o[ ,]|-., $o )" "$WORK/help" || missing="$missing $o"; done
    if [ -z "$missing" ]; then ok "$c --help lists its options"; else not_ok "$c --help lacks:$missing" "$(cat "$WORK/help")"; fi
}
has_options demo --length --heads --head-dim --seed --help
has_options attend --output --help
has_options encode --output --length --positions --width
has_options convert-rope --output --to --heads --kv-heads --rotary-dim --q --k
has_options train --save --save-every --resume --threads --quiet --steps --length --method
has_options compare --methods --seeds --quick --out --readme --jobs --shape-k --random-n --full --results --estimate --quiet --steps
has_options generate --checkpoint --prompt --tokens --temperature --seed --check
has_options positions --merge --tokens-per-second --output
has_options bench --length --methods --causal --reps --threads --only --steps --no-torch --no-reference --ref-max-length \
    --torch-max-length --torch --torch-train --quick --readme
has_options plot --output --length --width --heads --seed --size --from --tensor --layer --part --show --metric \
    --checkpoint --input --batch --grid --patch --cosine
has_options analyze --methods --from --tensor --layer --length --width --heads --seed --cosine --output
has_options methods --help
has_options version --help

# defaults, ranges and the old names are in the help lines
"$POSENC" demo --help > "$WORK/help"
grep -q -- "--length N .*(1 \.\. 4096; default 64; old name --T)" "$WORK/help" && ok "demo --help: range, default, old name" ||
    not_ok "demo --help: range, default, old name" "$(cat "$WORK/help")"
"$POSENC" plot -h | grep -q -- "--size WxH .*default 900x700" && ok "plot -h: a text default" || not_ok "plot -h: a text default"
"$POSENC" convert-rope --help | grep -q -- "--to LAYOUT .*half, interleaved; required" && ok "convert-rope --help: choices" ||
    not_ok "convert-rope --help: choices"
"$POSENC" generate --help | grep -q -- "--temperature X .*0 \.\. 100; default 1" && ok "generate --help: a real's range" ||
    not_ok "generate --help: a real's range"
"$POSENC" train --help | grep -q -- "--eval-tokens" && ok "train --help: the trainer's options" || not_ok "train --help: the trainer's options"
"$POSENC" help | grep -q -- "--help: every option" && ok "posenc help points to COMMAND --help" || not_ok "posenc help"

# ---- a missing value ---------------------------------------------------------------------------
expect_bad "demo --length: needs a value" "demo: option --length needs a value" "" demo --length
expect_bad "demo --T: needs a value" "demo: option --T needs a value" "" demo --T
expect_bad "train --steps --method: needs a value" "train: option --steps needs a value" "" train --steps --method alibi
expect_bad "compare --jobs: needs a value" "compare: option --jobs needs a value" "" compare --jobs --quick
expect_bad "plot -o: needs a value" "plot: option -o needs a value" "" plot encoding --method sinusoidal -o
expect_bad "attend -o --causal: needs a value" "attend: option -o needs a value" "" attend x.safetensors -o --causal
expect_bad "generate --prompt: needs a value" "generate: option --prompt needs a value" "" generate --checkpoint x --prompt

# ---- numbers are checked, no silent default -------------------------------------------------------
expect_bad "demo --heads abc" "demo: --heads: 'abc' is not a whole number in 1 .. 256" "" demo --heads abc
expect_bad "demo --length 0" "'0' is not a whole number in 1 .. 4096" "" demo --length 0
expect_bad "train --length 0" "train: --length: '0' is not a whole number in 1 .. 4096" "" train --length 0 --steps 1
expect_bad "train --save-every abc" "train: --save-every: 'abc' is not a whole number" "" train --save-every abc
expect_bad "train --micro-batch with memory" "train: --micro-batch: xl carries memory between segments" "" train --method xl --micro-batch 2 --steps 1
expect_bad "compare --seeds 17" "compare: --seeds: '17' is not a whole number in 1 .. 16" "" compare --seeds 17
expect_bad "generate --temperature x" "generate: --temperature: 'x' is not a number in [0, 100]" "" generate --checkpoint x --prompt a --temperature x
expect_bad "positions --tokens-per-second -1" "is not a number >= 0" "" positions text:3 --tokens-per-second -1
expect_bad "bench --length 5,x" "bench: --length: 'x' is not a whole number in 1 .. 131072" "" bench --length 5,x
expect_bad "bench --reps 1.5" "bench: --reps: '1.5' is not a whole number in 1 .. 15" "" bench --reps 1.5
expect_bad "plot --size" "plot: --size: '9x' is not WxH" "$WORK/p.png" plot encoding --method sinusoidal --size 9x -o "$WORK/p.png"
expect_bad "convert-rope: metadata heads=two" "IN's heads: 'two'" "" convert-rope "$WORK/none.safetensors" -o "$WORK/c.safetensors" --to half

# ---- did you mean ----------------------------------------------------------------------------------
expect_bad "demo --lenght" "demo: unknown option '--lenght' (did you mean --length?)" "" demo --lenght 4
expect_bad "train --stesp" "train: unknown option '--stesp' (did you mean --steps?)" "" train --stesp 4
expect_bad "compare --sedes" "did you mean --seeds?" "" compare --sedes 2
expect_bad "plot --widht" "plot: unknown option '--widht' (did you mean --width?)" "$WORK/p.png" plot encoding --method sinusoidal --widht 8 -o "$WORK/p.png"
expect_bad "attend --outptu" "did you mean --output?" "" attend x.safetensors --outptu y
expect_bad "analyze --cosin" "did you mean --cosine?" "" analyze --cosin
expect_bad "generate --top-k: no near option" "generate: unknown option '--top-k' (posenc generate --help lists the options)" "" generate --top-k 5
expect_bad "convert-rope --to hlaf" "'hlaf' is not one of half, interleaved (did you mean half?)" "" convert-rope x -o y --to hlaf
expect_bad "plot kind" "plot: KIND: 'encodign' is not one of encoding, similarity" "$WORK/p.png" plot encodign -o "$WORK/p.png"
expect_bad "bench --methods ropee" "bench: --methods: unknown method 'ropee' (did you mean rope?)" "" bench --methods ropee
expect_bad "analyze --methods alibj" "analyze: --methods: unknown method 'alibj' (did you mean alibi?)" "" analyze --methods rope,alibj
expect_bad "compare --methods t55" "unknown method 't55' (did you mean t5?)" "" compare --methods t55
expect_bad "bench --only rop" "bench: --only: unknown section 'rop' (did you mean rope?)" "" bench --only rop
expect_bad "an unknown command" "unknown command 'demoo' (did you mean demo?)" "" demoo
expect_bad "a second argument" "demo: unexpected argument 'x'" "" demo x
expect_bad "a required option" "convert-rope: --to LAYOUT is required" "" convert-rope "$WORK/none.safetensors" -o "$WORK/c.safetensors"

# ---- one name for the length option; the old ones still work -----------------------------------------
"$POSENC" demo --T 8 --heads 1 --head-dim 2 2>&1 | head -1 > "$WORK/a"
"$POSENC" demo --length 8 --heads 1 --head-dim 2 2>&1 | head -1 > "$WORK/b"
grep -q "T=8," "$WORK/a" && cmp -s "$WORK/a" "$WORK/b" && ok "demo: --T is --length" || not_ok "demo: --T is --length" "$(cat "$WORK/a" "$WORK/b")"
"$POSENC" encode --method sinusoidal --T 5 --width 8 -o "$WORK/e1.safetensors" &&
    "$POSENC" encode --method sinusoidal --length 5 --width 8 -o "$WORK/e2.safetensors" && cmp -s "$WORK/e1.safetensors" "$WORK/e2.safetensors" &&
    ok "encode: --T is --length" || not_ok "encode: --T is --length"
"$POSENC" analyze --methods rope,alibi --N 8 > "$WORK/a" && "$POSENC" analyze --methods rope,alibi --length 8 > "$WORK/b" &&
    cmp -s "$WORK/a" "$WORK/b" && ok "analyze: --N is --length" || not_ok "analyze: --N is --length"
"$POSENC" plot similarity --method alibi --heads 1 --N 12 --size 300x200 -o "$WORK/p1.png" > /dev/null &&
    "$POSENC" plot similarity --method alibi --heads 1 --length 12 --size 300x200 -o "$WORK/p2.png" > /dev/null &&
    cmp -s "$WORK/p1.png" "$WORK/p2.png" && ok "plot: --N is --length" || not_ok "plot: --N is --length"
expect_bad "bench: --T is --length" "bench: --length" "" bench --T 0
expect_bad "bench: --ref-max-T is --ref-max-length" "bench: --ref-max-T: 'x'" "" bench --ref-max-T x
expect_bad "encode: the old name in the message" "encode: --T: '0'" "" encode --method sinusoidal --T 0 --width 8 -o "$WORK/e.safetensors"

# ---- outputs are checked before the work --------------------------------------------------------------
timed_bad() { # timed_bad NAME EXPECT ARGS...: expect_bad, and at once (no run started)
    local name=$1 start=$(date +%s)
    expect_bad "$@"
    [ $(( $(date +%s) - start )) -le 2 ] && ok "$name: at once" || not_ok "$name: took $(( $(date +%s) - start )) s"
}
printf 'no block here\n' > "$WORK/README.md"
timed_bad "compare --out in a missing folder" "compare: --out: cannot write into" "" compare --out "$WORK/no/such/dir"
timed_bad "compare --readme without its block" "has no <!-- compare:begin -->" "" compare --readme "$WORK/README.md"
timed_bad "compare --readme missing" "No such file or directory" "" compare --readme "$WORK/nothing.md"
timed_bad "compare --full --readme without --results" "--full --readme writes the verdicts of the results page: it needs --results" "" \
    compare --full --readme "$WORK/README.md"
timed_bad "compare --full --readme without its block" "has no <!-- results:begin -->" "" \
    compare --full --readme "$WORK/README.md" --results "$WORK/page.md"
timed_bad "bench --readme without its block" "has no <!-- bench:begin -->" "" bench --readme "$WORK/README.md"
timed_bad "plot -o in a missing folder" "No such file or directory" "" plot similarity --method rope --length 4096 -o "$WORK/no/p.png"
timed_bad "analyze -o in a missing folder" "No such file or directory" "" analyze --length 2048 -o "$WORK/no/a.csv"
timed_bad "train --save in a missing folder" "train: --save:" "" train --save "$WORK/no/ck.safetensors"
timed_bad "an input that is a folder" "not a regular file (a directory)" "" attend "$WORK" -o "$WORK/o.safetensors"
[ ! -e "$WORK/no" ] && ok "nothing created" || not_ok "a folder was created"

# ---- train labels its losses; exact only for the tasks ---------------------------------------------------
run_train() { "$POSENC" train --method alibi --steps 4 --width 16 --heads 2 --layers 1 --eval 1 --eval-tokens 64 "$@" > "$WORK/out" 2> "$WORK/err"; }
if run_train --length 16; then
    if grep -q "train loss [0-9]" "$WORK/err" && grep -q "train loss of the last step" "$WORK/out" &&
        grep -q "eval loss" "$WORK/out" && ! grep -q "exact" "$WORK/out"; then ok "train lm: losses labelled, no exact"
    else not_ok "train lm: losses labelled, no exact" "$(cat "$WORK/err" "$WORK/out")"; fi
else not_ok "train lm" "$(cat "$WORK/err")"; fi
if run_train --task copy --length 4 && grep -q "eval loss .* exact" "$WORK/out"; then ok "train copy: exact shown"
else not_ok "train copy: exact shown" "$(cat "$WORK/err" "$WORK/out")"; fi
finish
