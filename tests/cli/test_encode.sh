#!/usr/bin/env bash
# CLI tests of `posenc encode`: each absolute method's encoding against an independent numpy
# formula (float64), the positions and metadata written beside it, and every bad input exits 2
# with exactly one stderr line "posenc: ..." and no output file.
#   usage: bash tests/cli/test_encode.sh PATH/TO/posenc
# Needs the project's Python (.venv, scripts/deps.sh) with numpy.
. "$(dirname "$0")/lib.sh" encode "${1:-}"
need_numpy

# ---- input files and the float64 formulas ------------------------------------------------
cat > "$WORK/lib.py" <<'EOF'
import json, struct
from fractions import Fraction
import numpy as np

DT = {np.dtype('float32'): 'F32', np.dtype('int32'): 'I32', np.dtype('int64'): 'I64'}
NP = {'F32': '<f4', 'F64': '<f8', 'I32': '<i4', 'I64': '<i8'}

def write(path, tensors, meta):
    hdr, blobs, off = {}, [], 0
    if meta is not None:
        hdr['__metadata__'] = meta
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        hdr[name] = {'dtype': DT[a.dtype], 'shape': list(a.shape), 'data_offsets': [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))

def read(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    meta = hdr.pop('__metadata__', None) or {}
    out, dtypes = {}, {}
    for name, e in hdr.items():
        b, t = e['data_offsets']
        out[name] = np.frombuffer(raw[8 + n + b:8 + n + t], dtype=NP[e['dtype']]).reshape(e['shape'])
        dtypes[name] = e['dtype']
    return out, dtypes, meta

def sinusoidal(pos, C, layout='interleaved', base=10000.0):
    half = C // 2
    t = np.arange(half, dtype=np.float64)
    w = np.exp(-t * np.log(base) / (half - 1)) if layout == 't2t' else base ** (-2 * t / C)
    ang = np.asarray(pos, np.float64)[:, None] * w
    if layout == 'interleaved':
        return np.stack([np.sin(ang), np.cos(ang)], -1).reshape(len(pos), C)
    return np.concatenate([np.sin(ang), np.cos(ang)], -1)

def floater(t, pos, dt='0.01', step='0.002'):
    """B(p dt) (T, 3, C) by a plain RK4 loop in float64, exact grid indices."""
    b0, w1, b1, w2, b2 = (t[n].astype(np.float64) for n in
                          ('floater_b0', 'floater_w1', 'floater_b1', 'floater_w2', 'floater_b2'))
    def f(tm, b):
        tt = np.full((3, 1), tm)
        a = np.maximum(np.concatenate([b, tt], 1) @ w1.T + b1, 0)
        return np.concatenate([a, tt], 1) @ w2.T + b2
    def rk4(t0, h, y):
        k1 = f(t0, y); k2 = f(t0 + h / 2, y + h / 2 * k1)
        k3 = f(t0 + h / 2, y + h / 2 * k2); k4 = f(t0 + h, y + h * k3)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    out, h = [], float(Fraction(step))
    for p in pos:
        tp = Fraction(dt) * int(p)
        n = tp // Fraction(step)
        y = b0
        for i in range(n):
            y = rk4(i * h, h, y)
        r = float(tp - n * Fraction(step))
        out.append(rk4(n * h, r, y) if r > 0 else y)
    return np.stack(out)

def complex_parts(t, ids, pos):
    ang = t['freq'][ids].astype(np.float64) * np.asarray(pos, np.float64)[:, None]
    if 'phase' in t:
        ang = ang + t['phase'][ids]
    amp = t['amp'][ids].astype(np.float64)
    return amp * np.cos(ang), amp * np.sin(ang)
EOF

cat > "$WORK/make.py" <<'EOF'
import os, sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import write

d = sys.argv[1]
rng = np.random.default_rng(11)
f = lambda *s, a=0.5: (a * (2 * rng.random(s) - 1)).astype(np.float32)
C = 8
write(os.path.join(d, 'learned.safetensors'), {'pos_table': f(10, C)}, {'method': 'learned'})
write(os.path.join(d, 'learned6.safetensors'), {'pos_table': f(10, 6)}, {'method': 'learned'})
fl = {'floater_b0': f(3, C), 'floater_w1': f(C, C + 1, a=0.3), 'floater_b1': f(C, a=0.2),
      'floater_w2': f(C, C + 1, a=0.3), 'floater_b2': f(C, a=0.2)}
# a conformance-style case: the layer's tensors are there too and must be ignored
case = dict(fl, x=f(6, C), wq=f(C, C), wk=f(C, C), wv=f(C, C), wo=f(C, C), dy=f(6, C))
write(os.path.join(d, 'floater_case.safetensors'), case, {'method': 'floater', 'heads': '2'})
write(os.path.join(d, 'floater.safetensors'), fl, {'method': 'floater'})
V = 7
cx = {'amp': f(V, C), 'freq': (0.05 + rng.random((V, C))).astype(np.float32),
      'phase': (6.28 * rng.random((V, C))).astype(np.float32),
      'ids': np.array([3, 0, 6, 3, 2], dtype=np.int32)}
write(os.path.join(d, 'complex.safetensors'), cx, {'method': 'complex'})
nophase = {k: v for k, v in cx.items() if k != 'phase'}
write(os.path.join(d, 'complex_nophase.safetensors'), nophase, {'method': 'complex'})
write(os.path.join(d, 'complex_noids.safetensors'), {k: v for k, v in cx.items() if k != 'ids'}, {'method': 'complex'})
write(os.path.join(d, 'complex_badid.safetensors'), dict(cx, ids=np.array([1, 7], dtype=np.int64)), {'method': 'complex'})
write(os.path.join(d, 'learned_extra.safetensors'), {'pos_table': f(10, C), 'extra': f(3)}, {'method': 'learned'})
write(os.path.join(d, 'floater_negpos.safetensors'), dict(fl, positions=np.array([0, -1], dtype=np.int64)), {'method': 'floater'})
EOF

if ! "$PY" "$WORK/make.py" "$WORK" > "$WORK/make.log" 2>&1; then
    not_ok "writing the input files" "$(cat "$WORK/make.log")"
    finish
fi

# ---- valid runs --------------------------------------------------------------------------
OUT=$WORK/out.safetensors
# good NAME CHECK ARGS...: exit 0, nothing on stderr, then python CHECK (a snippet that sees
# out, dt, meta, inp(name), np and lib's formulas) must pass
good() {
    local name=$1 check=$2
    shift 2
    rm -f "$OUT"
    if ! "$POSENC" encode "$@" -o "$OUT" > "$WORK/stdout" 2> "$WORK/stderr"; then
        not_ok "$name: exit status $?" "$(cat "$WORK/stderr")"
        return
    fi
    if [ -s "$WORK/stderr" ]; then not_ok "$name: stderr not empty" "$(cat "$WORK/stderr")"; return; fi
    local msg
    if msg=$("$PY" - "$WORK" "$OUT" "$check" 2>&1 <<'EOF'
import os, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from lib import *
out, dt, meta = read(sys.argv[2])
inp = lambda n: read(os.path.join(sys.argv[1], n + '.safetensors'))[0]
def close(name, got, want, tol=1e-5):
    got = np.asarray(got, np.float64)
    if got.shape != want.shape:
        raise SystemExit('%s: shape %s, expected %s' % (name, got.shape, want.shape))
    err = np.abs(got - want) - tol * (1 + np.abs(want))
    if err.max() > 0:
        raise SystemExit('%s: off the float64 formula by %g' % (name, np.abs(got - want).max()))
for n, d in dt.items():
    if d != ('I64' if n == 'positions' else 'F32'):
        raise SystemExit('%s: dtype %s' % (n, d))
exec(sys.argv[3])
EOF
    ); then ok "$name"; else not_ok "$name" "$msg"; fi
}

good "sinusoidal interleaved, --T 6 --width 8" "
assert set(out) == {'P', 'positions'}, sorted(out)
assert list(out['positions']) == list(range(6))
assert meta.get('method') == 'sinusoidal', meta
close('P', out['P'], sinusoidal(range(6), 8))" --method sinusoidal --T 6 --width 8
good "sinusoidal concat, --positions with 10^6, --shift, --sin_base" "
pos = [0, 3, 1000000]
assert list(out['positions']) == pos
assert meta.get('shift') == '2' and meta.get('sin_base') == '500', meta
close('P', out['P'], sinusoidal([p + 2 for p in pos], 8, 'concat', 500.0))" \
    --method sinusoidal --positions 0,3,1000000 --width 8 --sin_layout concat --shift 2 --sin_base 500
good "sinusoidal t2t, --heads 2 --width 12" "close('P', out['P'], sinusoidal(range(4), 12, 't2t'))" \
    --method sinusoidal --sin_layout t2t --T 4 --width 12 --heads 2
good "none: P of zeros" "assert out['P'].shape == (3, 4) and not out['P'].any()" --method none --T 3 --width 4
good "learned: rows of pos_table, width from it" "
close('P', out['P'], inp('learned')['pos_table'][[1, 4, 9]].astype(np.float64), 0)" \
    "$WORK/learned.safetensors" --positions 1,4,9
good "learned --shift 1" "close('P', out['P'], inp('learned')['pos_table'][[1, 2, 3]].astype(np.float64), 0)" \
    "$WORK/learned.safetensors" --T 3 --shift 1
good "floater: P_q P_k P_v = B(p dt) against a float64 RK4 loop" "
assert set(out) == {'P_q', 'P_k', 'P_v', 'positions'}, sorted(out)
B = floater(inp('floater'), range(5))
for i, n in enumerate(('P_q', 'P_k', 'P_v')): close(n, out[n], B[:, i])
close('P_q[0] = b0', out['P_q'][0], inp('floater')['floater_b0'][0].astype(np.float64), 0)" \
    "$WORK/floater.safetensors" --T 5
good "floater off the grid (--floater_dt 0.003) and far (p = 700)" "
B = floater(inp('floater'), [0, 1, 5, 700], '0.003')
for i, n in enumerate(('P_q', 'P_k', 'P_v')): close(n, out[n], B[:, i])" \
    "$WORK/floater.safetensors" --positions 0,1,5,700 --floater_dt 0.003
good "floater from a conformance case (its layer tensors ignored)" "
B = floater(inp('floater_case'), [2, 3])
close('P_v', out['P_v'], B[:, 2])" "$WORK/floater_case.safetensors" --positions 2,3
good "complex: P_re P_im of IN's ids (I32) at 0..T-1" "
t = inp('complex')
re, im = complex_parts(t, t['ids'], range(5))
assert set(out) == {'P_re', 'P_im', 'positions'}, sorted(out)
close('P_re', out['P_re'], re); close('P_im', out['P_im'], im)" "$WORK/complex.safetensors"
good "complex without phase, --positions 1,2,3,4,500000" "
t = inp('complex_nophase')
re, im = complex_parts(t, t['ids'], [1, 2, 3, 4, 500000])
close('P_re', out['P_re'], re); close('P_im', out['P_im'], im)" \
    "$WORK/complex_nophase.safetensors" --positions 1,2,3,4,500000

# ---- bad inputs --------------------------------------------------------------------------
# bad NAME EXPECT ARGS...: exit 2, one stderr line "posenc: ..." containing EXPECT, nothing on
# stdout, no output file
bad() { local name=$1 expect=$2; shift 2; expect_bad "$name" "$expect" "$OUT" encode "$@"; }

bad "not an absolute method" "not absolute" --method rope --T 3 --width 8 -o "$OUT"
bad "no method" "method" --T 3 --width 8 -o "$OUT"
bad "unknown method" "zzz" --method zzz --T 3 --width 8 -o "$OUT"
bad "key of another method" "rope_base" --method sinusoidal --rope_base 5 --T 3 --width 8 -o "$OUT"
bad "no positions" "give --length N" --method sinusoidal --width 8 -o "$OUT"
bad "width unknown" "width" --method sinusoidal --T 3 -o "$OUT"
bad "odd width for sinusoidal" "even" --method sinusoidal --T 3 --width 7 -o "$OUT"
bad "--T 0" "--T" --method sinusoidal --T 0 --width 8 -o "$OUT"
bad "--T and --positions" "--positions" --method sinusoidal --T 2 --positions 1,2 --width 8 -o "$OUT"
bad "bad --positions list" "--positions" --method sinusoidal --positions 1,x --width 8 -o "$OUT"
bad "bad --width" "--width" --method sinusoidal --T 2 --width -8 -o "$OUT"
bad "learned position outside pos_table" "pos_table" "$WORK/learned.safetensors" --positions 3,10 -o "$OUT"
bad "learned without pos_table" "pos_table" --method learned --T 2 --width 8 -o "$OUT"
bad "pos_table of another width" "pos_table" "$WORK/learned6.safetensors" --T 2 --width 8 -o "$OUT"
bad "tensor the method does not take" "extra" "$WORK/learned_extra.safetensors" --T 2 -o "$OUT"
bad "floater negative position" "negative" "$WORK/floater_negpos.safetensors" -o "$OUT"
bad "floater negative position from --positions" "negative" "$WORK/floater.safetensors" --positions 2,-3 -o "$OUT"
bad "floater_step 0" "floater_step" "$WORK/floater.safetensors" --T 2 --floater_step 0 -o "$OUT"
bad "complex without ids" "ids" "$WORK/complex_noids.safetensors" --T 2 -o "$OUT"
bad "complex id out of range" "ids" "$WORK/complex_badid.safetensors" -o "$OUT"
bad "complex: ids and positions of different lengths" "positions" "$WORK/complex.safetensors" --T 3 -o "$OUT"
bad "missing input file" "no_such_file" "$WORK/no_such_file.safetensors" --T 2 -o "$OUT"
bad "no -o" "usage" --method sinusoidal --T 2 --width 8
bad "unknown option" "-x" --method sinusoidal --T 2 --width 8 -x -o "$OUT"
bad "output directory missing" "" --method sinusoidal --T 2 --width 8 -o "$WORK/no/dir/out.safetensors"
[ -e "$WORK/no" ] && not_ok "output directory missing: a directory was created"

finish
