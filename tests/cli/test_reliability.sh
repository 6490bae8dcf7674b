#!/usr/bin/env bash
# CLI tests of reliability: hostile inputs never crash posenc and no output is ever half-written.
# Every case exits 2 with exactly one stderr line "posenc: ...", writes nothing to stdout, and
# leaves no output and no temporary file: shape products past 2^63, integer keys and positions
# near INT64_MAX, sizes of 2^62 on every size flag, NaN and Inf in inputs, a device, a FIFO or a
# directory as output, a FIFO or /dev/zero as input, a checkpoint of another run, a NaN weight
# in a checkpoint, a value holding a newline. A symlinked output replaces the file it names.
#   usage: bash tests/cli/test_reliability.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" reliability "${1:-}"
need_numpy
ROOT=$(cd "$HERE/../.." && pwd)
CASES="$ROOT/tests/conformance/cases"
O="$WORK/out/o.safetensors"
mkdir -p "$WORK/out"
# no temporary file or output left in the output folder
clean() { if [ -n "$(ls -A "$WORK/out")" ]; then not_ok "$1: left files behind" "$(ls -A "$WORK/out")"; rm -rf "$WORK/out"/* "$WORK/out"/.[!.]*; fi; }

# ---- hostile case files, written from the public cases --------------------------------------
"$PY" - "$CASES" "$WORK" <<'PYEOF'
import json, struct, sys
import numpy as np
cases, w = sys.argv[1], sys.argv[2]
def read(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    meta = h.pop("__metadata__", {})
    d = raw[8 + n:]
    t = {}
    for k, v in h.items():
        dt = {"F32": "<f4", "I64": "<i8", "I32": "<i4", "U8": "u1", "BOOL": "?"}[v["dtype"]]
        t[k] = np.frombuffer(d[v["data_offsets"][0]:v["data_offsets"][1]], dtype=dt).reshape(v["shape"])
    return meta, t
def write(p, meta, t, raw_header=None):
    h, blobs, off = {"__metadata__": meta}, [], 0
    for k, a in t.items():
        b = np.ascontiguousarray(a).tobytes()
        code = {"float32": "F32", "int64": "I64", "int32": "I32"}[str(a.dtype)]
        h[k] = {"dtype": code, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    if raw_header: h.update(raw_header)
    hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
    open(p, "wb").write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
meta, t = read(f"{cases}/none_basic.safetensors")
write(f"{w}/huge_shape.safetensors", meta, {k: v for k, v in t.items() if k != "dy"},
      {"dy": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 0]}})
x = t["x"].copy(); x.flat[3] = np.nan
write(f"{w}/nan_x.safetensors", meta, dict(t, x=x))
wq = t["wq"].copy(); wq.flat[0] = np.inf
write(f"{w}/inf_w.safetensors", meta, dict(t, wq=wq))
for m in ("learned_shift", "tupe_cls"):
    meta, t = read(f"{cases}/{m}.safetensors")
    T = t["x"].shape[-2]
    pos = np.arange(T, dtype=np.int64); pos[-1] = np.iinfo(np.int64).max
    write(f"{w}/{m}_posmax.safetensors", meta, dict(t, positions=pos))
PYEOF
C="$CASES/none_basic.safetensors"
expect_bad "shape product past 2^63: attend" "more than 2^40 elements" "$O" attend "$WORK/huge_shape.safetensors" -o "$O"; clean "huge attend"
expect_bad "shape product past 2^63: convert-rope" "more than 2^40 elements" "$O" convert-rope "$WORK/huge_shape.safetensors" -o "$O" --to half --heads 2; clean "huge convert"
expect_bad "shape product past 2^63: plot attention" "more than 2^40 elements" "$WORK/out/p.png" plot attention "$WORK/huge_shape.safetensors" -o "$WORK/out/p.png"; clean "huge plot"
expect_bad "learned: shift near INT64_MAX" "2^31" "$O" attend "$CASES/learned_shift.safetensors" -o "$O" --shift 9223372036854775000; clean "shift"
expect_bad "learned: position INT64_MAX" "2^53" "$O" attend "$WORK/learned_shift_posmax.safetensors" -o "$O"; clean "learned posmax"
expect_bad "tupe: position INT64_MAX" "2^53" "$O" attend "$WORK/tupe_cls_posmax.safetensors" -o "$O"; clean "tupe posmax"
expect_bad "shaw: max_rel INT64_MAX" "2^31" "$O" attend "$CASES/shaw_clip.safetensors" -o "$O" --max_rel 9223372036854775807; clean "shaw"
expect_bad "encode --T 2^62" "--T" "$O" encode -o "$O" --method sinusoidal --T 4611686018427387904 --width 8; clean "encode"
expect_bad "demo --heads 2^62" "--heads" "" demo --heads 4611686018427387904
expect_bad "demo --head-dim 2^62" "--head-dim" "" demo --head-dim 4611686018427387904
expect_bad "plot --width 2^62" "--width" "$WORK/out/p.png" plot encoding --method sinusoidal --width 4611686018427387904 -o "$WORK/out/p.png"; clean "plot width"
expect_bad "a NaN in x" "element 3 is NaN" "$O" attend "$WORK/nan_x.safetensors" -o "$O"; clean "nan"
expect_bad "an Inf in a weight" "tensor 'wq': element 0 is +Inf" "$O" attend "$WORK/inf_w.safetensors" -o "$O"; clean "inf"
expect_bad "a value holding a newline" "\\n" "$O" attend "$C" -o "$O" --heads "$(printf '2\nx')"; clean "newline"

# ---- outputs that are not regular files are never replaced ----------------------------------
expect_bad "-o /dev/full" "not a regular file" "" attend "$C" -o /dev/full
[ -c /dev/full ] && ok "/dev/full is still a device" || not_ok "/dev/full was replaced"
mkfifo "$WORK/fifo"
expect_bad "-o FIFO" "not a regular file (a FIFO)" "" attend "$C" -o "$WORK/fifo"
[ -p "$WORK/fifo" ] && ok "the FIFO is still a FIFO" || not_ok "the FIFO was replaced"
mkdir "$WORK/adir"
expect_bad "-o a directory" "a directory" "" attend "$C" -o "$WORK/adir"
expect_bad "plot -o /dev/full" "not a regular file" "" plot encoding --method sinusoidal -o /dev/full
expect_bad "analyze -o /dev/full" "not a regular file" "" analyze --methods rope -o /dev/full
ln -s real.safetensors "$WORK/out/link.safetensors"
if "$POSENC" attend "$C" -o "$WORK/out/link.safetensors" > /dev/null 2>&1 && [ -L "$WORK/out/link.safetensors" ] &&
    [ -s "$WORK/out/real.safetensors" ]; then ok "a symlinked output replaces the file it names"
else not_ok "a symlinked output replaces the file it names" "$(ls -la "$WORK/out")"; fi
rm -f "$WORK/out/link.safetensors" "$WORK/out/real.safetensors"; clean "symlink"

# ---- inputs that are not regular files are refused at once ------------------------------------
start=$(date +%s)
expect_bad "a FIFO as input" "not a regular file (a FIFO)" "$O" attend "$WORK/fifo" -o "$O"
expect_bad "/dev/zero as input" "not a regular file" "$O" attend /dev/zero -o "$O"
expect_bad "hf_config a FIFO" "not a regular file" "$O" attend "$CASES/rope_half.safetensors" -o "$O" --hf_config "$WORK/fifo"
[ $(( $(date +%s) - start )) -lt 5 ] && ok "non-regular inputs fail at once" || not_ok "non-regular inputs blocked"
clean "inputs"

# ---- checkpoints ------------------------------------------------------------------------------
"$POSENC" train --method alibi --steps 4 --width 16 --heads 2 --layers 1 --length 16 --eval 1 --eval-tokens 64 \
    --quiet --save "$WORK/ck.safetensors" > /dev/null 2>&1 || not_ok "train a checkpoint"
expect_bad "resume past the run's steps" "past the run's 2 steps" "" train --resume "$WORK/ck.safetensors" --steps 2 --quiet
"$PY" - "$WORK/ck.safetensors" "$WORK/ck_nan.safetensors" <<'PYEOF'
import json, struct, sys
raw = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
off = 8 + n + h["wte"]["data_offsets"][0]
raw[off:off + 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(raw)
PYEOF
expect_bad "a NaN weight in a checkpoint" "tensor 'wte': element 0 is not finite" "" train --resume "$WORK/ck_nan.safetensors" --quiet
expect_bad "generate from a NaN checkpoint" "not finite" "" generate --checkpoint "$WORK/ck_nan.safetensors" --prompt "a"
# sizes of 2^62 in a checkpoint's metadata (a segfault and a division by zero before the bounds)
for kv in width=4611686018427387904 mlp=4611686018427387904 batch=4611686018427387904 eval=4611686018427387904; do
    "$PY" - "$WORK/ck.safetensors" "$WORK/ck_big.safetensors" "$kv" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
k, v = sys.argv[3].split("=")
h["__metadata__"][k] = v
hb = json.dumps(h).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
PYEOF
    expect_bad "resume a checkpoint with $kv" "--${kv%%=*}" "" train --resume "$WORK/ck_big.safetensors" --quiet
done
expect_bad "train --save into a missing folder fails first" "No such file or directory" "" train --steps 3 --save "$WORK/none/x.safetensors"
finish
