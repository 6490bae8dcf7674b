#!/usr/bin/env bash
# The public conformance cases of every method this build implements (`posenc methods`),
# method by method, through the checker beside the cases (tests/conformance/check.py).
#   bash tests/conformance.sh build/posenc tests/conformance/cases
set -uo pipefail
bin=$1 cases=$2
# the project's Python environment (scripts/deps.sh), or POSENC_PYTHON
py=${POSENC_PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}
check="$(dirname "$cases")/check.py"
passed=0 failed=0
for m in $("$bin" methods | awk 'NR > 1 {print $1}'); do
    out=$("$py" "$check" "$bin" "$cases" --only "$m" 2>&1)
    echo "$out" | grep -E '^(PASS|FAIL|    )'
    line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -1)
    [ -n "$line" ] || continue   # no public case for this method
    passed=$((passed + $(echo "$line" | awk '{print $1}')))
    failed=$((failed + $(echo "$line" | awk '{print $3}')))
done
echo "conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
