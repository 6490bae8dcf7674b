#!/usr/bin/env bash
# posenc convert-rope: a case converted to the other layout gives the same y, scores and probs.
#   bash tests/cli/test_convert_rope.sh build/posenc
. "$(dirname "$0")/lib.sh" convert_rope "${1:-}"

for case in rope_basic rope_partial_half rope_gqa rope_llama3; do
    src="$HERE/../fixtures/$case.safetensors"
    [ -f "$src" ] || { not_ok "$case: fixture missing"; continue; }
    "$POSENC" attend "$src" -o "$WORK/a.safetensors" || { not_ok "$case: attend"; continue; }
    if ! "$POSENC" convert-rope "$src" -o "$WORK/c.safetensors" --to interleaved; then not_ok "$case: convert"; continue; fi
    "$POSENC" attend "$WORK/c.safetensors" -o "$WORK/b.safetensors" || { not_ok "$case: attend after convert"; continue; }
    if REFDIR="$HERE/../ref" "$PY" - "$WORK/a.safetensors" "$WORK/b.safetensors" <<'PY'
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
    then ok "$case: same y, scores, probs after --to interleaved"; else not_ok "$case: outputs differ"; fi
    if "$POSENC" convert-rope "$WORK/c.safetensors" -o "$WORK/d.safetensors" --to interleaved 2>/dev/null; then
        not_ok "$case: converting to the layout it has must fail"
    else ok "$case: refuses a second conversion to the same layout"; fi
done
"$POSENC" convert-rope "$HERE/../fixtures/rope_basic.safetensors" -o "$WORK/e.safetensors" --to sideways 2>"$WORK/err"
rc=$?
if [ $rc -eq 2 ] && [ ! -e "$WORK/e.safetensors" ] && [ "$(wc -l < "$WORK/err")" -eq 1 ]; then ok "bad --to: exit 2, one line, no output"
else not_ok "bad --to (exit $rc)"; fi
finish
