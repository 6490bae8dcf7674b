#!/usr/bin/env bash
# CLI tests of examples/slurm (issue 29, item 3) on a one-node Slurm the test starts itself:
# munged, slurmctld and slurmd as the current user, every file of theirs (key, socket,
# slurm.conf, state, spool, logs, pid files) in the test's folder, on ports no socket has.
# compare.sh submits `compare --full --quick` (two methods) as a job array of 3 shards and the
# merge after them: each task runs its shard, the merge writes every task's CSV, which is the
# unsharded run's but for the timings; train.sbatch runs 2 ranks through srun --mpi=pmix, and its
# checkpoint is `posenc train --shares 2`'s bit for bit; scancel stops a longer run's ranks after
# the same step with a checkpoint, which train.sbatch resumes to the uninterrupted run's bits.
# Every process the test starts (daemons, job steps, ranks) carries a tag in its environment and
# is ended by its id on exit, failures included; waits are bounded. Without Slurm or munge the
# test is skipped; a Slurm that does not start is skipped with what the daemon said.
#   usage: bash tests/cli/test_slurm.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" slurm "${1:-}"

skip() { echo "ok - skipped: $1"; finish; }
PATH=$PATH:/usr/sbin:/sbin
for t in munged slurmctld slurmd sbatch squeue scontrol scancel sinfo srun; do
    command -v "$t" > /dev/null || skip "no $t (Debian: slurm-wlm munge)"
done
EX=$(cd "$HERE/../../examples/slurm" && pwd)
# the test's own cluster only: none of a surrounding job's or user's Slurm and MPI settings
for v in $(compgen -e); do
    case $v in SLURM_* | SBATCH_* | SRUN_* | SALLOC_* | SQUEUE_* | SINFO_* | SCONTROL_* | OMPI_* | PMI_* | PMIX_*) unset "$v" ;; esac
done

S=$WORK/slurm
mkdir -p "$S/state" "$S/spool" "$S/tmp" "$S/jobtmp"
# munged: "Socket is inaccessible: execute permissions for all required" on the socket's folders
chmod 711 "$WORK" "$S"
TAG=POSENC_TEST_SLURM_TAG=$WORK
# the daemons, and through sbatch (--export=ALL) the jobs and their ranks, carry TAG; their
# temporary files (Open MPI's session folder) go to $S/jobtmp
tagged() { env "$TAG" "TMPDIR=$S/jobtmp" "$@"; }
tagged_pids() { grep -lzx "$TAG" /proc/[0-9]*/environ 2> /dev/null | sed 's|^/proc/\([0-9]*\)/environ$|\1|'; }
stop() { # ends every tagged process (the jobs cancelled first): TERM, KILL after 3 s; 1 when one is left
    local left seen="" p
    [ -n "${ctld:-}" ] && kill -0 "$ctld" 2> /dev/null && timeout 5 scancel --user="$(id -un)" > /dev/null 2>&1
    for i in $(seq 50); do # again and again: a step slurmd was starting comes after the first sweep
        left=$(tagged_pids)
        [ -z "$left" ] && break
        seen="$seen $left"
        kill -"$([ "$i" -le 30 ] && echo TERM || echo KILL)" $left 2> /dev/null
        sleep 0.1
    done
    # this shell's background processes still running or not yet waited for: the references of
    # the training checks, when the test is stopped meanwhile
    left=$(jobs -p)
    [ -n "$left" ] && kill $left 2> /dev/null
    wait 2> /dev/null
    # slurmd starts each job step's slurmstepd as init's child: its zombie, without the
    # environment that has the tag, goes when init reaps it (within a second or two here)
    for p in $seen; do
        for _ in $(seq 50); do [ -e "/proc/$p" ] || break; sleep 0.1; done
    done
    for _ in $(seq 50); do ps -C slurmstepd -o stat= | grep -q Z || break; sleep 0.1; done
    [ -z "$(tagged_pids)" ]
}
trap 'stop; rm -rf "$WORK"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
# the last line of a daemon's log that says what went wrong
said() { { grep -aE 'error|fatal|Error|Fatal' "$1" || cat "$1"; } 2> /dev/null | tail -n 1 | sed -E 's/^\[[^]]*\] //; s/^(munged|slurmctld|slurmd): //'; }
started=$(date +%s)

# ---- ports, the node, slurm.conf ----------------------------------------------------------------
# TCP ports that no socket of this machine has (/proc/net/tcp*: local address HEXIP:HEXPORT)
used=" $(awk 'FNR > 1 { print $2 }' /proc/net/tcp /proc/net/tcp6 2> /dev/null | sed 's/.*://' |
    while read -r h; do echo $((16#$h)); done | tr '\n' ' ') "
ports=()
while [ ${#ports[@]} -lt 2 ]; do
    p=$((20000 + RANDOM % 40000))
    [[ "$used" == *" $p "* || " ${ports[*]:-} " == *" $p "* ]] || ports+=("$p")
done
# slurmd(8): -C prints "this node's configuration", its CPUs, sockets, cores and memory as
# slurm.conf takes them
node=$(slurmd -C 2>&1 | head -n 1)
[[ "$node" == NodeName=*" CPUs="* ]] || skip "slurmd -C: $node"
node="NodeName=posenc0 ${node#NodeName=* }"
user=$(id -un)
cat > "$S/slurm.conf" << EOF
# a one-node Slurm of tests/cli/test_slurm.sh, every file in $S
ClusterName=posenctest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
AuthInfo=socket=$S/munge.sock
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
TmpFS=$S/tmp
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
PlugStackConfig=$S/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
KillWait=2
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=posenc0 Default=YES MaxTime=INFINITE State=UP
EOF
: > "$S/plugstack.conf"
export SLURM_CONF=$S/slurm.conf

# ---- munged, slurmctld, slurmd --------------------------------------------------------------------
if command -v mungekey > /dev/null; then
    mungekey --create --keyfile="$S/munge.key" 2> "$S/mungekey.err" || skip "mungekey: $(tail -n 1 "$S/mungekey.err")"
else
    (umask 077 && head -c 1024 /dev/urandom > "$S/munge.key")
fi
tagged munged --foreground --socket="$S/munge.sock" --key-file="$S/munge.key" --pid-file="$S/munged.pid" \
    --seed-file="$S/munged.seed" > "$S/munged.log" 2>&1 &
for _ in $(seq 50); do [ -S "$S/munge.sock" ] && break; kill -0 $! 2> /dev/null || break; sleep 0.1; done
[ -S "$S/munge.sock" ] || skip "munged: $(said "$S/munged.log")"

tagged slurmctld -D -f "$S/slurm.conf" > "$S/slurmctld.out" 2>&1 &
ctld=$!
for _ in $(seq 100); do
    scontrol ping 2> /dev/null | grep -q 'is UP' && break
    kill -0 $ctld 2> /dev/null || break
    sleep 0.1
done
scontrol ping 2> /dev/null | grep -q 'is UP' || skip "slurmctld: $(said "$S/slurmctld.out")"
# slurmd(8): -N, the node's name in slurm.conf (not this machine's host name)
tagged slurmd -D -N posenc0 -f "$S/slurm.conf" > "$S/slurmd.out" 2>&1 &
slurmd=$!
for _ in $(seq 150); do
    [ "$(sinfo -h -N -o %t 2> /dev/null)" = idle ] && break
    kill -0 $slurmd 2> /dev/null || break
    sleep 0.1
done
state=$(sinfo -h -N -o %t 2> /dev/null)
[ "$state" = idle ] || skip "slurmd: $(said "$S/slurmd.out") (node state '$state')"
ok "munged, slurmctld and slurmd up, node posenc0 idle ($(($(date +%s) - started)) s; ${node%% RealMemory=*})"

# ---- jobs -----------------------------------------------------------------------------------------
# job_states JOBID: the state and exit code of every task of the job, "COMPLETED 0:0" each
job_states() { scontrol show job "$1" 2> /dev/null | grep -o 'JobState=[A-Z_]*\|ExitCode=[0-9:]*' | sed 's/.*=//' | paste -d' ' - -; }
# wait_jobs: until no job of this test pends or runs, at most 90 s (ASan's resumed run below
# takes 30 s here); 1 on the deadline
wait_jobs() {
    local end=$((SECONDS + 90))
    while [ $SECONDS -lt $end ]; do
        [ -z "$(squeue -h -o %i 2> /dev/null)" ] && squeue > /dev/null 2>&1 && return 0
        sleep 0.2
    done
    return 1
}
all_ok() { [ -n "$1" ] && [ -z "$(grep -v '^COMPLETED 0:0$' <<< "$1")" ]; }

# the comparison: 3 shards of --full --quick over two methods, and the merge
C=(--quick --quiet --methods rope,alibi)
"$POSENC" compare --full "${C[@]}" --out "$WORK/u" > /dev/null 2> "$WORK/u.err" || bail "compare --full --quick failed: $(tail -n 3 "$WORK/u.err")"
runs=$("$POSENC" compare --full "${C[@]}" --estimate --shard 0/1 --out "$WORK/x" | sed -n 's/^shard 0\/1 (--shard): \([0-9]*\) of the.*/\1/p')
mkdir -p "$WORK/c"
t0=$(date +%s)
(cd "$WORK/c" && tagged POSENC="$POSENC" POSENC_SHARDS=3 POSENC_RUNS="$WORK/c/runs" POSENC_OUT="$WORK/c/merged" \
    POSENC_ARGS="${C[*]}" "$EX/compare.sh") > "$WORK/submit.out" 2>&1
sub=$(cat "$WORK/submit.out")
array=$(sed -n 's/^shards \([0-9]*\) (array 0-2), merge \([0-9]*\)$/\1/p' <<< "$sub")
merge=$(sed -n 's/^shards \([0-9]*\) (array 0-2), merge \([0-9]*\)$/\2/p' <<< "$sub")
[ -n "$array" ] && [ -n "$merge" ] && ok "compare.sh submits the shards ($array, array 0-2) and the merge ($merge)" ||
    not_ok "compare.sh submits the shards and the merge" "$sub"

# data-parallel training: 2 ranks, 20 steps
O=(--steps 20 --width 32 --layers 1 --heads 2 --length 32 --batch 8 --eval 1 --eval-tokens 512 --quiet)
# a build without MPI would run 2 whole runs under srun: srun --mpi=pmix gives the ranks neither
# OMPI_COMM_WORLD_SIZE nor PMI_SIZE, by which such a build refuses mpirun's
mpi=$(ldd "$POSENC" 2> /dev/null | grep -c 'libmpi\.')
# submit_train DIR ARGS...: sbatch --ntasks=2 train.sbatch with POSENC_TRAIN_ARGS="ARGS..." in
# DIR, its job id (empty after sbatch's message in DIR/sbatch.err). Under ASan (make asan) the
# ranks run without LeakSanitizer, as in test_mpi.sh (Open MPI's unloaded plugins leave their
# allocations).
submit_train() {
    local dir=$1 id
    shift
    mkdir -p "$dir"
    id=$(tagged POSENC="$POSENC" POSENC_TRAIN_ARGS="$*" "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        sbatch --parsable --ntasks=2 --chdir="$dir" "$EX/train.sbatch" 2> "$dir/sbatch.err")
    echo "${id%%;*}"
}
# the references, one process in two shares, meanwhile: the 20 steps, and the run interrupted below
L=(--steps 3000 --width 32 --layers 1 --heads 2 --length 32 --batch 8 --eval 1 --eval-tokens 512 --quiet)
mkdir -p "$WORK/s" "$WORK/r"
if [ "$mpi" -gt 0 ]; then
    (cd "$WORK/s" && exec "$POSENC" train "${O[@]}" --shares 2 --save ck.st > out 2>&1) &
    sref=$!
    (cd "$WORK/r" && exec "$POSENC" train "${L[@]}" --shares 2 --save ck.st --save-every 300 > out 2>&1) &
    rref=$!
    train=$(submit_train "$WORK/t" "${O[@]}" --save ck.st)
fi

if wait_jobs; then ok "every job ended ($(($(date +%s) - t0)) s)"; else
    not_ok "every job ends within 90 s" "$(squeue 2>&1; tail -n 5 "$S/slurmctld.log")"; fi

# ---- the comparison's results ---------------------------------------------------------------------
st=$( [ -n "$array" ] && job_states "$array")
if all_ok "$st" && [ "$(wc -l <<< "$st")" = 3 ]; then ok "the 3 shards completed, exit code 0"; else
    not_ok "the 3 shards complete" "$st; $(cat "$WORK"/c/posenc-compare-*.out 2> /dev/null | tail -n 5)"; fi
miss=""
for k in 0 1 2; do
    grep -q "^shard $k/3 (--shard): [0-9]* of the $runs runs" "$WORK/c/posenc-compare-${array}_$k.out" 2> /dev/null || miss="$miss $k"
done
[ -z "$miss" ] && ok "array task K ran shard K/3 of the $runs runs" || not_ok "array task K runs shard K/3" "not:$miss"
n=$(cat "$WORK"/c/runs/*.run 2> /dev/null | grep -c '^name ')
uniq=$(cat "$WORK"/c/runs/*.run 2> /dev/null | grep '^name ' | sort -u | wc -l)
[ "$n" = "$runs" ] && [ "$uniq" = "$runs" ] && ok "one run file per run in the shared folder ($runs)" ||
    not_ok "one run file per run in the shared folder" "$n files, $uniq names, $runs runs"
st=$( [ -n "$merge" ] && job_states "$merge")
if all_ok "$st"; then ok "the merge ran after them, exit code 0"; else
    not_ok "the merge completes" "$st; $(cat "$WORK"/c/posenc-merge-*.out 2> /dev/null | tail -n 5)"; fi
# every task's CSV without its two timing columns (15 and 16), as in test_shards.sh
untimed() { cut -d, -f1-15,18 "$1"; }
diffs=""
for t in lm copy reverse add count; do
    [ -s "$WORK/c/merged/$t.csv" ] && cmp -s <(untimed "$WORK/c/merged/$t.csv") <(untimed "$WORK/u/$t.csv") || diffs="$diffs $t.csv"
done
[ -z "$diffs" ] && ok "the merged CSVs are the unsharded run's (cmp, less the timings)" ||
    not_ok "the merged CSVs are the unsharded run's" "differ:$diffs; $(diff <(untimed "$WORK/c/merged/lm.csv" 2>&1) <(untimed "$WORK/u/lm.csv") | head -n 4)"

# ---- training over two ranks ----------------------------------------------------------------------
if [ "$mpi" = 0 ]; then
    echo "ok - skipped: $POSENC is built without MPI (make MPI=1 with libopenmpi-dev)"
else
    log="$WORK/t/posenc-train-$train.out"
    st=$( [ -n "$train" ] && job_states "$train")
    if all_ok "$st" && grep -q "data parallel over 2 ranks of 4 sequences" "$log" && [ "$(grep -c '^posenc train:' "$log")" = 1 ]; then
        ok "train.sbatch with 2 tasks: srun --mpi=pmix runs 2 ranks, one header, exit code 0"
    else
        not_ok "train.sbatch runs 2 ranks" "$st; $(cat "$WORK/t/sbatch.err" 2> /dev/null; tail -n 8 "$log" 2>&1)"
    fi
    wait $sref
    if [ -s "$WORK/t/ck.st" ] && cmp -s "$WORK/t/ck.st" "$WORK/s/ck.st"; then
        ok "its checkpoint is posenc train --shares 2's, bit for bit"
    else
        not_ok "its checkpoint is posenc train --shares 2's" "$(cmp "$WORK/t/ck.st" "$WORK/s/ck.st" 2>&1; tail -n 3 "$WORK/s/out")"
    fi

    # scancel after the first checkpoint (step 300 of 3000), then train.sbatch --resume
    t0=$(date +%s)
    long=$(submit_train "$WORK/i" "${L[@]}" --save ck.st --save-every 300)
    for _ in $(seq 300); do [ -e "$WORK/i/ck.st" ] && break; sleep 0.05; done
    [ -n "$long" ] && scancel "$long"
    wait_jobs
    log="$WORK/i/posenc-train-$long.out"
    step=$(sed -n 's/.*interrupted at step \([0-9]*\); checkpoint.*/\1/p' "$log" 2> /dev/null)
    if [[ "$(job_states "$long")" == "CANCELLED "* ]] && [ -n "$step" ] && [ "$step" -lt 3000 ] &&
       [ "$(grep -c interrupted "$log")" = 1 ]; then
        ok "scancel: the ranks stop at step $step, rank 0 checkpoints and says so once"
    else
        not_ok "scancel stops the ranks with a checkpoint" "$(job_states "$long"); $(tail -n 6 "$log" 2>&1)"
    fi
    res=$(submit_train "$WORK/i" --resume ck.st --quiet)
    wait_jobs
    wait $rref
    if [ "$(job_states "$res")" = "COMPLETED 0:0" ] && cmp -s "$WORK/i/ck.st" "$WORK/r/ck.st"; then
        ok "train.sbatch --resume over two ranks: the uninterrupted run's checkpoint, bit for bit ($(($(date +%s) - t0)) s)"
    else
        not_ok "the resumed run gives the uninterrupted run's bits" "$(job_states "$res"); $(cmp "$WORK/i/ck.st" "$WORK/r/ck.st" 2>&1; tail -n 3 "$WORK/i/posenc-train-$res.out")"
    fi
fi

# ---- nothing left ---------------------------------------------------------------------------------
if stop; then ok "every daemon, job and rank ended ($(($(date +%s) - started)) s in all)"; else
    not_ok "every process of the test ends" "$(ps -o pid,args -p "$(tagged_pids | paste -sd,)")"; fi
finish
