#!/usr/bin/env bash
# CLI tests of `posenc bench`, kept to seconds: the train section with a few steps, without
# Python (--no-torch) and, where .venv has torch, against bench/torch_train.py
# (the same parameter count on both sides, a ratio per row); torch_train.py alone prints one
# JSON line; the attn section prints its causal / full table; bad options exit 2.
#   usage: bash tests/cli/test_bench.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" bench "${1:-}"
SCRIPT="$HERE/../../bench/torch_train.py"

# ---- every section, small shapes (--quick): a tool nobody runs is a tool that crashes ----------
if "$POSENC" bench --quick --no-torch > "$WORK/q.out" 2> "$WORK/q.err"; then
    ok "bench --quick --no-torch exits 0"
else
    not_ok "bench --quick --no-torch exits 0" "$(tail -n 5 "$WORK/q.out" "$WORK/q.err")"
fi
for s in "(a) RoPE" "(b) attention layer" "(b) causal over full" "(i) the core alone" "(g) decoding" "(d) denormals" \
         "(e) GEMM ceiling" "(f) packed rows" "(h) training" "(j) scale-out"; do
    if grep -qF "## $s" "$WORK/q.out"; then ok "bench --quick: section $s"; else not_ok "bench --quick: section $s" "$(head -n 3 "$WORK/q.out")"; fi
done
# the scale section: one process at 1 and 2 threads, and mpirun -n 2 where this build and machine have it
rows=$(grep -cE '^\| 1 process, ([12] threads?|2 shares on 2 threads) \| [0-9.]+k \| [0-9.]+ \| — \|$' "$WORK/q.out")
if [ "$rows" = 3 ]; then ok "bench --quick: scale rows of one process"; else not_ok "bench --quick: scale rows of one process" "$(grep -A 8 '(j) scale' "$WORK/q.out")"; fi
if command -v mpirun > /dev/null && ! grep -q 'built without MPI' "$WORK/q.out"; then
    if grep -qE '^\| mpirun -n 2, 1 thread each \| [0-9.]+k \| [0-9.]+ \| [0-9.]+% of the time, [0-9.]+ ms a step' "$WORK/q.out"; then
        ok "bench --quick: scale row of mpirun -n 2 with the sums' share"
    else
        not_ok "bench --quick: scale row of mpirun -n 2 with the sums' share" "$(grep -A 8 '(j) scale' "$WORK/q.out")"
    fi
fi
if grep -q '^SMOKE TEST (--quick' "$WORK/q.out"; then ok "bench --quick: labelled a smoke test"; else not_ok "bench --quick: labelled a smoke test" "$(head -n 3 "$WORK/q.out")"; fi
# OpenMP's idle threads wait passively unless the environment says otherwise (train/env.c, tr_env_select)
want=passive
[ -n "${OMP_WAIT_POLICY:-}" ] && want=$OMP_WAIT_POLICY
[ -z "${OMP_WAIT_POLICY:-}" ] && [ -n "${GOMP_SPINCOUNT:-}" ] && want=unset
if grep -q "OMP_WAIT_POLICY $want," "$WORK/q.out"; then ok "bench: OMP_WAIT_POLICY $want"; else not_ok "bench: OMP_WAIT_POLICY $want" "$(head -n 3 "$WORK/q.out")"; fi
if OMP_WAIT_POLICY=active "$POSENC" bench --only gemm --quick --no-torch 2>&1 | grep -q "OMP_WAIT_POLICY active,"; then
    ok "bench: a given OMP_WAIT_POLICY is kept"
else
    not_ok "bench: a given OMP_WAIT_POLICY is kept" "$(OMP_WAIT_POLICY=active "$POSENC" bench --only gemm --quick --no-torch 2>&1 | head -n 3)"
fi
# the core section: a row per method, length and causal with its GFLOP/s, the causal rows with
# full over causal from the two settings' alternating calls
rows=$(grep -cE '^\| (none|rope|alibi|t5) \| (64|256) \| no \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| \|$' "$WORK/q.out")
crows=$(grep -cE '^\| (none|rope|alibi|t5) \| (64|256) \| yes \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ / [0-9.]+ \|$' "$WORK/q.out")
if [ "$rows" = 8 ] && [ "$crows" = 8 ]; then ok "bench --quick: 16 core rows, full over causal on the causal ones"
else not_ok "bench --quick: 16 core rows, full over causal on the causal ones" "$(grep -A 20 '(i) the core' "$WORK/q.out")"; fi
# the attn section: FLOATER from its reference initialisation (the test layer's uniform tensors
# leave its ODE non-finite), complex (token ids, no x) says so in its rows
if "$POSENC" bench --only attn --length 64 --reps 1 --methods floater,complex --no-torch > "$WORK/fc.out" 2>&1 &&
    [ "$(grep -cE '^\| floater \| 64 \| (yes|no) \| (fused|T x T) \| [0-9.]+ \|' "$WORK/fc.out")" = 2 ] &&
    [ "$(grep -c '^| complex | 64 | .* | reads token ids, not x' "$WORK/fc.out")" = 2 ]; then
    ok "bench attn: floater timed, complex says it reads token ids"
else
    not_ok "bench attn: floater timed, complex says it reads token ids" "$(tail -n 12 "$WORK/fc.out")"
fi
# more methods than the bench holds: refused, not silently cut (it ran the first 8 once)
many=$(printf 'none,%.0s' $(seq 33)); many=${many%,}
if "$POSENC" bench --only attn --quick --no-torch --methods "$many" > "$WORK/many.out" 2> "$WORK/many.err"; then
    not_ok "bench: 33 methods are refused" "exit 0"
elif [ $? = 2 ] && grep -q 'at most 32 methods' "$WORK/many.err" && [ ! -s "$WORK/many.out" ]; then
    ok "bench: 33 methods are refused"
else
    not_ok "bench: 33 methods are refused" "$(cat "$WORK/many.err")"
fi
# a method without a projected form says so in its row
if "$POSENC" bench --only core --quick --methods sinusoidal --causal no --no-torch > "$WORK/s.out" 2>&1 &&
    grep -qE '^\| sinusoidal \| 64 \| no \| no projected form \|' "$WORK/s.out"; then
    ok "bench core: sinusoidal has no projected form"
else
    not_ok "bench core: sinusoidal has no projected form" "$(cat "$WORK/s.out")"
fi
# a causal-only method (cope) says so in its full rows and the section goes on to the next method
if "$POSENC" bench --only attn,core --length 64 --reps 1 --methods cope,rope --no-reference --no-torch > "$WORK/cope.out" 2>&1 &&
    [ "$(grep -cE '^\| cope \| 64 \| no \| causal only \|' "$WORK/cope.out")" = 2 ] &&
    [ "$(grep -cE '^\| rope \| 64 \| (yes|no) \| [0-9.]+ \|' "$WORK/cope.out")" = 2 ]; then
    ok "bench attn, core: cope's full rows say causal only, rope still runs"
else
    not_ok "bench: cope is causal only" "$(cat "$WORK/cope.out")"
fi
expect_bad "bench --quick --readme" "bench: --readme with --quick: a smoke run's numbers do not go into a README" "" \
    bench --quick --readme README.md

# ---- train without Python ------------------------------------------------------------------------
if "$POSENC" bench --only train --steps 2 --reps 1 --no-torch > "$WORK/t.out" 2> "$WORK/t.err"; then
    ok "bench --only train --no-torch exits 0"
else
    not_ok "bench --only train --no-torch exits 0" "$(tail -n 5 "$WORK/t.err")"
fi
# a row per method of --methods (none, rope, alibi, t5) and batch (4, 32), PyTorch's columns empty, the
# step against its GEMMs alone, then with the attention's products too, last
rows=$(grep -cE '^\| (none|rope|alibi|t5) \| (4|32) x 64 \| [0-9]+ / — \| 2 \| [0-9.]+k \| — \| — \| [0-9.]+x \| [0-9.]+x \|$' "$WORK/t.out")
if [ "$rows" = 8 ]; then ok "train: 8 rows, no PyTorch"; else not_ok "train: 8 rows, no PyTorch" "$(cat "$WORK/t.out")"; fi
if [ ! -s "$WORK/t.err" ]; then ok "train --no-torch: nothing on stderr"; else not_ok "train --no-torch: nothing on stderr" "$(cat "$WORK/t.err")"; fi
if grep -q '^## (h) training: .*1 thread each, OpenBLAS core ' "$WORK/t.out"; then ok "train: header names threads and core"
else not_ok "train: header names threads and core" "$(grep '(h)' "$WORK/t.out")"; fi
# --readme rewrites the marked block of a file and leaves the rest
printf 'above\n<!-- bench:begin -->\nold\n<!-- bench:end -->\nbelow\n' > "$WORK/R.md"
if "$POSENC" bench --only train --steps 2 --reps 1 --no-torch --methods rope --readme "$WORK/R.md" > /dev/null 2>&1 &&
    [ "$(head -n 1 "$WORK/R.md")" = above ] && [ "$(tail -n 1 "$WORK/R.md")" = below ] && ! grep -q '^old$' "$WORK/R.md" &&
    [ "$(grep -cE '^\| `rope` \| (4|32) x 64 \| [0-9.]+k \| — \| — \| [0-9.]+x \| [0-9.]+x \|$' "$WORK/R.md")" = 2 ]; then
    ok "bench --readme: the block rewritten, the train rows with the step against its GEMMs"
else not_ok "bench --readme" "$(cat "$WORK/R.md")"; fi

# ---- train against PyTorch ------------------------------------------------------------------------
if "$PY" -c 'import torch' 2>/dev/null; then
    if "$POSENC" bench --only train --steps 2 --reps 1 --methods rope,t5 --torch-train "$SCRIPT" > "$WORK/p.out" 2> "$WORK/p.err"; then
        ok "bench --only train against PyTorch exits 0"
    else
        not_ok "bench --only train against PyTorch exits 0" "$(tail -n 5 "$WORK/p.err")"
    fi
    # the same model: the parameter counts agree; each row has both speeds and their ratio
    same=$(awk -F'|' '$2 ~ /^ (rope|t5) $/ { split($4, n, " / "); if (n[1] + 0 > 0 && n[1] + 0 == n[2] + 0 && $8 ~ /[0-9.]+x/) k++ }
                      END { print k + 0 }' "$WORK/p.out")
    if [ "$same" = 4 ]; then ok "train: same parameter count and a ratio in 4 rows"; else not_ok "train: same parameter count and a ratio in 4 rows" "$(cat "$WORK/p.out" "$WORK/p.err")"; fi
    if grep -q 'PyTorch: torch [0-9.a-z+]* threads 1 blas ' "$WORK/p.out"; then ok "train: PyTorch runs 1 thread"
    else not_ok "train: PyTorch runs 1 thread" "$(grep 'PyTorch' "$WORK/p.out")"; fi
    json=$("$PY" "$SCRIPT" --method t5 --steps 2 --warmup-steps 1 --threads 1 2> "$WORK/j.err")
    if printf '%s' "$json" | "$PY" -c 'import json, sys; d = json.load(sys.stdin); sys.exit(not (d["tokens_per_s"] > 0 and d["params"] == 102592 and d["steps"] == 2))'; then
        ok "torch_train.py prints one JSON line (t5: 102592 parameters, as posenc's)"
    else
        not_ok "torch_train.py prints one JSON line" "$json $(cat "$WORK/j.err")"
    fi
else
    echo "ok - # skip: $PY has no torch (the train section against PyTorch)"
fi

# ---- attn: causal over full ------------------------------------------------------------------------
if "$POSENC" bench --only attn --length 64 --reps 1 --methods none,rope --no-reference --no-torch > "$WORK/a.out" 2> "$WORK/a.err" &&
    [ "$(grep -cE '^\| (none|rope) \| 64 \| [0-9.]+ \| [0-9.]+ \| — \| — \|$' "$WORK/a.out")" = 2 ]; then
    ok "attn: causal / full per method and length"
else
    not_ok "attn: causal / full per method and length" "$(cat "$WORK/a.out" "$WORK/a.err")"
fi
if "$POSENC" bench --only attn --length 64 --reps 1 --methods rope --causal yes --no-reference --no-torch > "$WORK/c.out" 2>&1 &&
    ! grep -q 'causal over full' "$WORK/c.out"; then
    ok "attn --causal yes: no causal / full table"
else
    not_ok "attn --causal yes: no causal / full table" "$(cat "$WORK/c.out")"
fi

expect_bad "bench --only trian" "bench: --only: unknown section 'trian' (did you mean train?)" "" bench --only trian
expect_bad "bench --steps 0" "bench: --steps: '0' is not a whole number in 1 .. 1000000" "" bench --steps 0
finish
