# The preamble every CLI test shares, sourced as `. "$(dirname "$0")/lib.sh" NAME PATH/TO/posenc`:
# POSENC (absolute), PY, a scratch folder WORK removed on exit, TAP-like ok/not_ok counters and
# finish, which prints the tally and gives the exit status.
set -u
_name=${1:?lib.sh: the test name}
POSENC=${2:?usage: bash tests/cli/test_$_name.sh PATH/TO/posenc}
case "$POSENC" in /*) ;; *) POSENC="$PWD/$POSENC" ;; esac
PY=/usr/bin/python3
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/#   /'; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
# bail: a precondition failed, so nothing else can run
bail() { echo "not ok - $1"; echo "0 passed, 1 failed"; exit 1; }
need_numpy() { "$PY" -c 'import numpy' 2>/dev/null || bail "$PY has no numpy"; }

[ -x "$POSENC" ] || bail "$POSENC is not an executable"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/posenc_$_name.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
