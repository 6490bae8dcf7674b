# The preamble every CLI test shares, sourced as `. "$(dirname "$0")/lib.sh" NAME PATH/TO/posenc`:
# POSENC (absolute), PY, a scratch folder WORK removed on exit, TAP-like ok/not_ok counters and
# finish, which prints the tally and gives the exit status.
set -u
_name=${1:?lib.sh: the test name}
POSENC=${2:?usage: bash tests/cli/test_$_name.sh PATH/TO/posenc}
case "$POSENC" in /*) ;; *) POSENC="$PWD/$POSENC" ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# the project's Python environment (scripts/deps.sh), or POSENC_PYTHON
PY=${POSENC_PYTHON:-$(cd "$HERE/../.." && pwd)/.venv/bin/python}
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/#   /'; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
# bail: a precondition failed, so nothing else can run
bail() { echo "not ok - $1"; echo "0 passed, 1 failed"; exit 1; }
need_numpy() { "$PY" -c 'import numpy' 2>/dev/null || bail "$PY has no numpy (scripts/deps.sh makes .venv)"; }

# a batch job's variables would make every compare of a test a shard (cli/compare_shard.c)
unset SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_STEP \
    OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE
[ -x "$POSENC" ] || bail "$POSENC is not an executable"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/posenc_$_name.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# expect_bad NAME EXPECT OUT ARGS...: `posenc ARGS...` is refused as bad input: exit status 2,
# exactly one stderr line "posenc: ..." mentioning EXPECT (empty: anything), nothing on stdout,
# and no file OUT or OUT* left behind (empty OUT: nothing to check).
expect_bad() {
    local name=$1 expect=$2 out=$3
    shift 3
    [ -n "$out" ] && rm -f "$out"*
    "$POSENC" "$@" > "$WORK/stdout" 2> "$WORK/stderr"
    local rc=$? lines first
    lines=$(awk 'END { print NR }' "$WORK/stderr")
    first=$(head -n 1 "$WORK/stderr")
    if [ $rc -ne 2 ]; then
        not_ok "$name: exit status $rc, expected 2" "$(cat "$WORK/stderr")"
    elif [ "$lines" -ne 1 ] || [ -n "$(tail -c 1 "$WORK/stderr")" ]; then
        not_ok "$name: stderr is $lines lines, expected exactly one" "$(cat "$WORK/stderr")"
    elif [ "${first#posenc: }" = "$first" ]; then
        not_ok "$name: stderr does not start with 'posenc: '" "$first"
    elif [ -n "$expect" ] && [[ "$first" != *"$expect"* ]]; then
        not_ok "$name: message does not mention '$expect'" "$first"
    elif [ -s "$WORK/stdout" ]; then
        not_ok "$name: wrote to stdout" "$(cat "$WORK/stdout")"
    elif [ -n "$out" ] && compgen -G "$out*" > /dev/null; then
        not_ok "$name: an output file exists"
    else
        ok "$name"
    fi
}
