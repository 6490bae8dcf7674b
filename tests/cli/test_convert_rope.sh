#!/usr/bin/env bash
# posenc convert-rope: a case converted to the other layout gives the same y, scores and probs.
#   bash tests/cli/test_convert_rope.sh build/posenc
set -u
bin=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { echo "ok - $1"; passed=$((passed + 1)); }
no() { echo "not ok - $1"; failed=$((failed + 1)); }

for case in rope_basic rope_partial_half rope_gqa rope_llama3; do
    src="$here/../fixtures/$case.safetensors"
    [ -f "$src" ] || { no "$case: fixture missing"; continue; }
    "$bin" attend "$src" -o "$tmp/a.safetensors" || { no "$case: attend"; continue; }
    if ! "$bin" convert-rope "$src" -o "$tmp/c.safetensors" --to interleaved; then no "$case: convert"; continue; fi
    "$bin" attend "$tmp/c.safetensors" -o "$tmp/b.safetensors" || { no "$case: attend after convert"; continue; }
    if REFDIR="$here/../ref" /usr/bin/python3 - "$tmp/a.safetensors" "$tmp/b.safetensors" <<'PY'
import sys, os
sys.path.insert(0, os.environ["REFDIR"])
from read_safetensors import read_safetensors
a, _ = read_safetensors(sys.argv[1]); b, _ = read_safetensors(sys.argv[2])
import numpy as np
for k in ("y", "scores", "probs"):
    fa, fb = a[k], b[k]
    m = np.isfinite(fa)
    assert np.array_equal(m, np.isfinite(fb)) and np.allclose(fa[m], fb[m], atol=1e-5, rtol=1e-5), k
PY
    then ok "$case: same y, scores, probs after --to interleaved"; else no "$case: outputs differ"; fi
    if "$bin" convert-rope "$tmp/c.safetensors" -o "$tmp/d.safetensors" --to interleaved 2>/dev/null; then
        no "$case: converting to the layout it has must fail"
    else ok "$case: refuses a second conversion to the same layout"; fi
done
"$bin" convert-rope "$here/../fixtures/rope_basic.safetensors" -o "$tmp/e.safetensors" --to sideways 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && [ ! -e "$tmp/e.safetensors" ] && [ "$(wc -l < "$tmp/err")" -eq 1 ]; then ok "bad --to: exit 2, one line, no output"
else no "bad --to (exit $rc)"; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
