#!/usr/bin/env bash
# CLI tests of `posenc compare --shard K/N` and `--merge DIR ...` (issue 29): the three shards of
# `compare --quick` merged give the unsharded CSV; a shard killed after its first run file and
# run again completes it; a run file of other settings is refused by name, a missing run named,
# a method added keeps the runs done;
# the shard comes from SLURM's (or MPI's) variables when --shard is not given; bad values exit 2
# with one line. The CSV's train_seconds and train_tokens_per_s are timings, which no two runs
# share: "the same CSV" is every other column byte for byte (the runs are deterministic), and
# merging the same run files twice gives the same bytes, timings included.
#   usage: bash tests/cli/test_shards.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" shards "${1:-}"

Q=(--quick --quiet)
bad() { local name=$1 expect=$2; shift 2; expect_bad "$name" "$expect" "" "$@"; }
# the CSV without its two timing columns (15 and 16)
untimed() { cut -d, -f1-15,18 "$1"; }
same_csv() { # NAME A B: A and B alike but for the timings
    if [ -s "$2" ] && cmp -s <(untimed "$2") <(untimed "$3"); then ok "$1"; else
        not_ok "$1" "$(diff <(untimed "$2") <(untimed "$3") 2>&1 | head -n 6)"; fi
}

# ---- three shards merged: the unsharded run's CSV -------------------------------------------------
start=$(date +%s)
"$POSENC" compare "${Q[@]}" --out "$WORK/u" > /dev/null 2> "$WORK/u.err" || bail "compare --quick failed: $(tail -n 3 "$WORK/u.err")"
runs=$(tail -n +2 "$WORK/u/compare.csv" | cut -d, -f3 | sort -u | wc -l)
fails=""
for k in 0 1 2; do
    "$POSENC" compare "${Q[@]}" --shard $k/3 --out "$WORK/d$k" > "$WORK/d$k.out" 2> "$WORK/d$k.err" || fails="$fails $k"
done
n=$(cat "$WORK"/d[012]/*.run 2>/dev/null | grep -c '^name ')
uniq=$(cat "$WORK"/d[012]/*.run 2>/dev/null | grep '^name ' | sort -u | wc -l)
if [ -z "$fails" ] && [ "$n" = "$runs" ] && [ "$uniq" = "$runs" ] && [ ! -e "$WORK/d0/compare.csv" ]; then
    ok "shards 0/3, 1/3, 2/3 write one run file per run, $runs in all, each run in one shard, no tables ($(( $(date +%s) - start )) s with the unsharded run)"
else
    not_ok "the shards share the runs" "failed:$fails; $n run files for $runs runs ($uniq names); $(cat "$WORK"/d[012].err | head -n 3)"
fi
sizes=$(for k in 0 1 2; do ls "$WORK/d$k" | wc -l; done | sort -n | sed -n '1p;$p' | tr '\n' ' ')
set -- $sizes
if [ $(( $2 - $1 )) -le 4 ]; then ok "the shares are balanced ($1 to $2 runs)"; else not_ok "the shares are balanced" "$sizes"; fi
if "$POSENC" compare "${Q[@]}" --merge "$WORK/d0" "$WORK/d1" "$WORK/d2" --out "$WORK/m" > "$WORK/m.out" 2> "$WORK/m.err" &&
   [ -s "$WORK/m/compare.md" ] && [ "$(head -c 4 "$WORK/m/compare.png" | od -An -c | tr -d ' ')" = "211PNG" ]; then
    ok "--merge of the three folders writes compare.csv, .md and .png"
else
    not_ok "--merge writes the outputs" "$(cat "$WORK/m.err")"
fi
same_csv "the merged CSV is the unsharded one (cmp, less the timings)" "$WORK/m/compare.csv" "$WORK/u/compare.csv"
# every run file in one folder, named in the other order: the same bytes, timings included
mkdir -p "$WORK/all" && cp "$WORK"/d[012]/*.run "$WORK/all/"
"$POSENC" compare "${Q[@]}" --merge "$WORK/all" --out "$WORK/m2" > /dev/null 2>&1
if cmp -s "$WORK/m/compare.csv" "$WORK/m2/compare.csv"; then ok "merging the same run files again gives the same CSV byte for byte"; else
    not_ok "merging the same run files again gives the same CSV" "$(diff "$WORK/m/compare.csv" "$WORK/m2/compare.csv" | head -n 4)"; fi
f=$(ls "$WORK"/d1/lm.rope.seed1.run "$WORK"/d[02]/lm.rope.seed1.run 2>/dev/null | head -n 1)
want=$(awk '$1 == "seconds" { printf "%.3f", $2 }' "$f")
if grep -q "^lm,rope,rope,1,32,1,32,bpc,.*,60,$want,[0-9.]*,ok\$" "$WORK/m/compare.csv"; then
    ok "the merged CSV has the run file's training time ($want s)"
else
    not_ok "the merged CSV has the run file's training time" "$want; $(grep '^lm,rope,rope,1,32,1,' "$WORK/m/compare.csv")"
fi

# ---- a shard killed after its first run file, then run again ------------------------------------
mine=$(ls "$WORK/d1" | wc -l)
"$POSENC" compare "${Q[@]}" --jobs 1 --shard 1/3 --out "$WORK/k" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 1000); do compgen -G "$WORK/k/*.run" > /dev/null && break; sleep 0.01; done
kill "$pid" 2> /dev/null
wait "$pid"
rc=$?
had=$(ls "$WORK/k" 2>/dev/null | grep -c '\.run$')
others=$(ls -A "$WORK/k" 2>/dev/null | grep -vc '\.run$')
if [ "$rc" = 143 ] && [ "$had" -ge 1 ] && [ "$had" -lt "$mine" ] && [ "$others" = 0 ]; then
    ok "a shard killed after its first run file leaves $had of its $mine run files and nothing else"
else
    not_ok "a shard killed mid-run leaves whole run files only" "status $rc, $had of $mine run files, $others other files"
fi
if "$POSENC" compare "${Q[@]}" --jobs 1 --shard 1/3 --out "$WORK/k" > "$WORK/k.out" 2>&1 &&
   grep -q "^shard 1/3 (--shard): $mine of the $runs runs, $had of them done already" "$WORK/k.out" &&
   grep -q "^shard 1/3: $(( mine - had )) runs in" "$WORK/k.out" && [ "$(ls "$WORK/k" | wc -l)" = "$mine" ]; then
    ok "run again, it runs only the $(( mine - had )) runs left"
else
    not_ok "the rerun continues the killed shard" "$(cat "$WORK/k.out")"
fi
"$POSENC" compare "${Q[@]}" --merge "$WORK/d0" "$WORK/k" "$WORK/d2" --out "$WORK/mk" > /dev/null 2> "$WORK/mk.err"
same_csv "with the continued shard, the merged CSV is the unsharded one" "$WORK/mk/compare.csv" "$WORK/u/compare.csv"

# ---- run files of other settings, missing and damaged ones -------------------------------------
# the same run names, with --seeds 2: another comparison
"$POSENC" compare "${Q[@]}" --methods rope --seeds 2 --shard 0/1 --out "$WORK/s2" > /dev/null 2>&1
r=$(ls "$WORK"/d[012]/lm.rope.seed1.run | head -n 1)
cp -r "$(dirname "$r")" "$WORK/foreign" && cp "$WORK/s2/lm.rope.seed1.run" "$WORK/foreign/"
bad "--merge refuses a run file of other settings, by name" "$WORK/foreign/lm.rope.seed1.run: a run of other settings" \
    compare "${Q[@]}" --merge "$WORK/d0" "$WORK/d1" "$WORK/d2" "$WORK/foreign" --out "$WORK/mf"
[ ! -e "$WORK/mf" ] && ok "... and writes nothing" || not_ok "a refused merge writes nothing" "$(ls "$WORK/mf")"
k=$(basename "$(dirname "$r")" | tr -d d)
bad "a shard refuses a folder with a run file of other settings" "lm.rope.seed1.run: a run of other settings" \
    compare "${Q[@]}" --shard "$k/3" --out "$WORK/foreign"
mkdir -p "$WORK/v" && sed 's/^version .*/version posenc 0.0.1/' "$WORK/s2/lm.rope.seed1.run" > "$WORK/v/lm.rope.seed1.run"
cp "$WORK/s2/lm.rope.seed2.run" "$WORK/v/"
bad "--merge refuses run files of another posenc version" "$WORK/v/lm.rope.seed1.run: a run of other settings (posenc 0.0.1" \
    compare "${Q[@]}" --methods rope --seeds 2 --merge "$WORK/v" --out "$WORK/mv"
rm -f "$WORK/v/lm.rope.seed1.run"
bad "--merge names the missing run" "1 of 2 runs missing: lm.rope.seed1 " \
    compare "${Q[@]}" --methods rope --seeds 2 --merge "$WORK/v" --out "$WORK/mv"
[ ! -e "$WORK/mv" ] && ok "... and writes nothing" || not_ok "a merge with a run missing writes nothing" "$(ls "$WORK/mv")"
head -n 12 "$WORK/s2/lm.rope.seed1.run" > "$WORK/v/lm.rope.seed1.run"
bad "--merge refuses a run file cut short" "lm.rope.seed1.run: not a whole run file" \
    compare "${Q[@]}" --methods rope --seeds 2 --merge "$WORK/v" --out "$WORK/mv"
if "$POSENC" compare "${Q[@]}" --methods rope --seeds 2 --shard 0/1 --out "$WORK/v" > "$WORK/v.out" 2> "$WORK/v.err" &&
   grep -q "not a whole run file .*: running it again" "$WORK/v.err" && grep -q '^shard 0/1: 1 runs in' "$WORK/v.out" &&
   [ "$(tail -n 1 "$WORK/v/lm.rope.seed1.run")" = end ]; then
    ok "a shard runs a run whose file was cut short again"
else
    not_ok "a shard runs a cut-short run again" "$(cat "$WORK/v.out" "$WORK/v.err")"
fi
# a method added to the list leaves the runs done good: only the new one runs
if "$POSENC" compare "${Q[@]}" --methods rope,alibi --seeds 2 --shard 0/1 --out "$WORK/v" > "$WORK/va.out" 2> "$WORK/va.err" &&
   grep -q '^shard 0/1 .*: 4 of the 4 runs, 2 of them done already' "$WORK/va.out" && grep -q '^shard 0/1: 2 runs in' "$WORK/va.out"; then
    ok "a method added to the list: the folder's runs kept, the new method's run"
else
    not_ok "a method added keeps the runs done" "$(cat "$WORK/va.out" "$WORK/va.err")"
fi
bad "--merge of a folder that is not there" "cannot read the folder" compare "${Q[@]}" --merge "$WORK/none" --out "$WORK/mn"

# ---- the shard from the environment ---------------------------------------------------------------
# the files of `--shard 1/3`, their results the same but for the timings (a few methods)
strip() { for f in "$1"/*.run; do echo "== ${f##*/}"; grep -Ev '^(seconds|tokens_per_s|cpu_seconds|started|ended|jobs) ' "$f"; done; }
M=(--methods rope,alibi,none,t5,learned,cope)
"$POSENC" compare "${Q[@]}" "${M[@]}" --shard 1/3 --out "$WORK/e1" > /dev/null 2>&1
if SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 "$POSENC" compare "${Q[@]}" "${M[@]}" --out "$WORK/e" > "$WORK/e.out" 2>&1 &&
   grep -q '^shard 1/3 (SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT)' "$WORK/e.out" && [ "$(ls "$WORK/e" | wc -l)" = 2 ] &&
   cmp -s <(strip "$WORK/e") <(strip "$WORK/e1"); then
    ok "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 writes the files of --shard 1/3"
else
    not_ok "SLURM's variables give the shard" "$(diff <(strip "$WORK/e") <(strip "$WORK/e1") | head -n 5; cat "$WORK/e.out")"
fi
est() { env "$@" "$POSENC" compare "${Q[@]}" --estimate --methods rope,alibi,none --out "$WORK/x" 2>&1 | grep '^shard'; }
[ "$(est SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=3 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 PMI_RANK=1 PMI_SIZE=4 | cut -d' ' -f2-3)" = \
  "2/3 (SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT):" ] && ok "SLURM's pair comes before MPI's" || not_ok "SLURM's pair comes first"
[ "$(est SLURM_ARRAY_TASK_ID=2 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 PMI_RANK=1 PMI_SIZE=4 | cut -d' ' -f2-3)" = \
  "0/2 (OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE):" ] && ok "half a pair is passed over (OpenMPI's next)" || not_ok "half a pair is passed over"
[ "$(est PMI_RANK=3 PMI_SIZE=4 | cut -d' ' -f2-3)" = "3/4 (PMI_RANK/PMI_SIZE):" ] && ok "PMI_RANK/PMI_SIZE" || not_ok "PMI_RANK/PMI_SIZE"
[ "$(est SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_MIN=1 | cut -d' ' -f2)" = "2/3" ] &&
    ok "an array numbered from SLURM_ARRAY_TASK_MIN=1" || not_ok "an array numbered from 1"
[ -z "$(est PMI_RANK=0 PMI_SIZE=1)" ] && ok "a count of 1 in the environment: no shards" || not_ok "a count of 1: no shards"
[ "$(SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 "$POSENC" compare "${Q[@]}" --estimate --methods rope --shard 0/2 |
    grep '^shard' | cut -d' ' -f2-3)" = "0/2 (--shard):" ] && ok "--shard wins over the environment" || not_ok "--shard wins over the environment"
printf '<!-- compare:begin -->\n<!-- compare:end -->\n' > "$WORK/README.md"
envbad() { local name=$1 expect=$2; shift 2; expect_bad "$name" "$expect" "" env "$@"; }
POS=$POSENC
POSENC=env
envbad "SLURM_ARRAY_TASK_ID not a number" "SLURM_ARRAY_TASK_ID='x'" SLURM_ARRAY_TASK_ID=x SLURM_ARRAY_TASK_COUNT=3 "$POS" compare "${Q[@]}" --out "$WORK/x"
envbad "SLURM_ARRAY_TASK_ID past the count" "SLURM_ARRAY_TASK_ID=3 is not below SLURM_ARRAY_TASK_COUNT=3" \
    SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_COUNT=3 "$POS" compare "${Q[@]}" --out "$WORK/x"
envbad "OMPI_COMM_WORLD_SIZE 0" "OMPI_COMM_WORLD_SIZE='0'" OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=0 "$POS" compare "${Q[@]}" --out "$WORK/x"
envbad "PMI_SIZE not a number" "PMI_SIZE='four'" PMI_RANK=0 PMI_SIZE=four "$POS" compare "${Q[@]}" --out "$WORK/x"
envbad "the environment's shard with --readme" "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT: a shard writes run files" \
    SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=2 "$POS" compare "${Q[@]}" --readme "$WORK/README.md" --out "$WORK/x"
POSENC=$POS

# ---- --estimate of a shard; bad --shard values ------------------------------------------------------
if "$POSENC" compare "${Q[@]}" --estimate --shard 1/3 --out "$WORK/est" > "$WORK/est.out" 2>&1 &&
   grep -q "^shard 1/3 (--shard): $mine of the $runs runs, 0 of them done already\$" "$WORK/est.out" &&
   grep -q '^estimated [0-9:]* (.* of runs, ' "$WORK/est.out" &&
   grep -q '^every shard of 3, at [0-9]* runs at a time: 0 [0-9:]*, 1 [0-9:]*, 2 [0-9:]*$' "$WORK/est.out" && [ ! -e "$WORK/est" ]; then
    ok "--estimate --shard 1/3 prints the shard's estimate and every shard's, and trains nothing"
else
    not_ok "--estimate --shard prints the shard's and every shard's time" "$(cat "$WORK/est.out")"
fi
for v in 3/3 0/0 abc 1/ /3 -1/3 1/3x 1.5/3 2/1 ""; do
    bad "--shard '$v'" "--shard '$v'" compare "${Q[@]}" --shard "$v" --out "$WORK/x"
done
bad "--shard with --merge" "--merge builds" compare "${Q[@]}" --shard 0/2 --merge "$WORK/d0" --out "$WORK/x"
bad "--merge with --estimate" "--estimate" compare "${Q[@]}" --estimate --merge "$WORK/d0" --out "$WORK/x"
bad "--merge without a folder" "needs a value" compare "${Q[@]}" --merge --out "$WORK/x"
bad "--shard with --results" "--results goes to --merge" compare --full "${Q[@]}" --shard 0/2 --results "$WORK/r.md" --out "$WORK/x"
if "$POSENC" compare --help | grep -q -- '^  --shard K/N ' && "$POSENC" compare --help | grep -q -- '^  --merge DIR \.\.\. '; then
    ok "compare --help lists --shard and --merge"
else
    not_ok "compare --help lists --shard and --merge"
fi

# ---- --full: the shards' tables and results page ----------------------------------------------------
F=(--full --quick --quiet --methods rope,alibi)
"$POSENC" compare "${F[@]}" --out "$WORK/fu" --results "$WORK/fu.md" > /dev/null 2>&1
for k in 0 1; do "$POSENC" compare "${F[@]}" --shard $k/2 --out "$WORK/fs$k" > /dev/null 2>&1; done
miss=""
if "$POSENC" compare "${F[@]}" --merge "$WORK/fs0" "$WORK/fs1" --out "$WORK/fm" --results "$WORK/fm.md" > /dev/null 2> "$WORK/fm.err"; then
    for t in lm copy reverse add count; do cmp -s <(untimed "$WORK/fu/$t.csv") <(untimed "$WORK/fm/$t.csv") || miss="$miss $t.csv"; done
    # the page but for the timings, the command and its paths
    # (and the table of where the runs ran: one row unsharded, one a shard merged)
    norm() { sed -e '/^| \(-\|[0-9]*\/[0-9]*\) | .* | [0-9]* | [0-9:]* | [0-9:]* |$/d' -e 's/[0-9.]*k |$/k |/' \
                 -e 's/^Generated by .*//' -e 's/| [0-9:]* | \([^|]*\) |$/| \1 |/' -e 's/(f[mu]\//(/' "$1"; }
    cmp -s <(norm "$WORK/fu.md") <(norm "$WORK/fm.md") || miss="$miss results.md ($(diff <(norm "$WORK/fu.md") <(norm "$WORK/fm.md") | head -n 3))"
else
    miss="merge failed: $(cat "$WORK/fm.err")"
fi
if [ -z "$miss" ]; then ok "--full: two shards merged give every task's CSV and the results page of the unsharded run"; else
    not_ok "--full: the merged outputs are the unsharded ones" "$miss"; fi

finish
