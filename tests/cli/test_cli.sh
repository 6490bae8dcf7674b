#!/usr/bin/env bash
# CLI tests of `posenc attend`: a valid case writes the contract's outputs, --KEY VALUE
# overrides the metadata, and every bad input exits 2 with exactly one stderr line
# "posenc: ..." and no output file.
#   usage: bash tests/cli/test_cli.sh PATH/TO/posenc
# Needs the project's Python (.venv, scripts/deps.sh) with numpy; the case files are written here by an inline writer.
. "$(dirname "$0")/lib.sh" cli "${1:-}"
need_numpy

# ---- case files -------------------------------------------------------------------------
# lib.py: a safetensors writer and reader (independent of posenc), and the base case:
# method learned, T=4, C=8, heads=2, biases, I64 positions, pos_table [6, 8], dy.
cat > "$WORK/lib.py" <<'EOF'
import json, struct
import numpy as np

DT = {np.dtype('float32'): 'F32', np.dtype('float64'): 'F64', np.dtype('int32'): 'I32',
      np.dtype('int64'): 'I64', np.dtype('bool'): 'BOOL', np.dtype('uint8'): 'U8'}
NP = {'F32': '<f4', 'F64': '<f8', 'I32': '<i4', 'I64': '<i8', 'BOOL': '?', 'U8': 'u1'}

def write(path, tensors, meta):
    """tensors: dict name -> array; meta: dict of str -> str (or None)."""
    hdr, blobs, off = {}, [], 0
    if meta is not None:
        hdr['__metadata__'] = meta
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        b = a.astype(a.dtype.newbyteorder('<')).tobytes()
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
    meta = hdr.pop('__metadata__', None)
    data = raw[8 + n:]
    out, dtypes = {}, {}
    for name, e in hdr.items():
        b, t = e['data_offsets']
        out[name] = np.frombuffer(data[b:t], dtype=NP[e['dtype']]).reshape(e['shape'])
        dtypes[name] = e['dtype']
    return out, dtypes, meta

def base():
    rng = np.random.default_rng(7)
    T, C, N = 4, 8, 6
    f = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)
    t = {'x': f(T, C), 'wq': f(C, C), 'wk': f(C, C), 'wv': f(C, C), 'wo': f(C, C),
         'bq': f(C), 'bo': f(C), 'positions': np.array([0, 2, 3, 5], dtype=np.int64),
         'pos_table': f(N, C), 'dy': f(T, C)}
    return t, {'method': 'learned', 'heads': '2'}

def reference(t, heads, causal):
    """float64 forward of the learned layer."""
    x = t['x'].astype(np.float64) + t['pos_table'].astype(np.float64)[t['positions']]
    T, C = x.shape
    D = C // heads
    lin = lambda a, w, b: a @ w.astype(np.float64).T + (0 if b is None else b.astype(np.float64))
    q, k, v = lin(x, t['wq'], t.get('bq')), lin(x, t['wk'], t.get('bk')), lin(x, t['wv'], t.get('bv'))
    q, k, v = (a.reshape(T, heads, D).transpose(1, 0, 2) for a in (q, k, v))
    s = q @ k.transpose(0, 2, 1) / np.sqrt(D)
    if causal:
        s = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = (p @ v).transpose(1, 0, 2).reshape(T, C)
    return lin(o, t['wo'], t.get('bo')), s, p

def qkv():
    """The projected form: rope, T=2 queries against Tk=5 keys, heads 2, D 4, a mask, do."""
    rng = np.random.default_rng(9)
    f = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)
    t = {'q': f(2, 8), 'k': f(5, 8), 'v': f(5, 8), 'do': f(2, 8),
         'key_positions': np.array([0, 1, 2, 4, 7], dtype=np.int64),
         'attn_mask': np.ones((2, 5), dtype=bool)}
    return t, {'method': 'rope', 'heads': '2', 'causal': 'true'}
EOF

# make.py: every case file of the tests, into $WORK.
cat > "$WORK/make.py" <<'EOF'
import os, sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import write, base

d = sys.argv[1]
def case(name, edit=None, meta_edit=None):
    t, m = base()
    if edit: edit(t)
    if meta_edit: meta_edit(m)
    write(os.path.join(d, name + '.safetensors'), t, m)

case('valid')
case('causal_meta', meta_edit=lambda m: m.update(causal='true'))
case('unknown_meta_key', meta_edit=lambda m: m.update(colour='blue'))
case('missing_wq', edit=lambda t: t.pop('wq'))
case('wrong_shape_wk', edit=lambda t: t.update(wk=t['wk'][:4].copy()))
case('x_f64', edit=lambda t: t.update(x=t['x'].astype(np.float64)))
case('positions_f32', edit=lambda t: t.update(positions=t['positions'].astype(np.float32)))
case('unknown_method', meta_edit=lambda m: m.update(method='sinusoidal_typo'))
case('heads_3', meta_edit=lambda m: m.update(heads='3'))
case('position_out_of_range', edit=lambda t: t.update(positions=np.array([0, 1, 2, 6], dtype=np.int64)))
case('no_method', meta_edit=lambda m: m.pop('method'))
case('unknown_tensor', edit=lambda t: t.update(extra=np.zeros(3, np.float32)))
case('bad_meta_value', meta_edit=lambda m: m.update(heads='two'))
from lib import qkv
def qcase(name, edit=None, meta_edit=None):
    t, m = qkv()
    if edit: edit(t)
    if meta_edit: meta_edit(m)
    write(os.path.join(d, name + '.safetensors'), t, m)

def no_key_left(t):
    t['attn_mask'][1, :] = False
qcase('qkv_valid')
qcase('qkv_no_key_left', edit=no_key_left)
qcase('qkv_mask_shape', edit=lambda t: t.update(attn_mask=np.ones((2, 4), dtype=bool)))
qcase('qkv_mask_f32', edit=lambda t: t.update(attn_mask=np.ones((2, 5), dtype=np.float32)))
qcase('qkv_with_x', edit=lambda t: t.update(x=np.zeros((2, 8), np.float32)))
qcase('qkv_with_wq', edit=lambda t: t.update(wq=np.zeros((8, 8), np.float32)))
qcase('qkv_with_dy', edit=lambda t: t.update(dy=np.zeros((2, 8), np.float32)))
qcase('qkv_sinusoidal', meta_edit=lambda m: m.update(method='sinusoidal'))
qcase('qkv_fewer_keys_causal', edit=lambda t: t.update(k=t['k'][:1].copy(), v=t['v'][:1].copy(),
                                                        key_positions=t['key_positions'][:1].copy(),
                                                        attn_mask=t['attn_mask'][:, :1].copy()))
qcase('qkv_key_positions_len', edit=lambda t: t.update(key_positions=np.arange(4, dtype=np.int64)))
qcase('qkv_no_k', edit=lambda t: t.pop('k'))
qcase('qkv_heads_3', meta_edit=lambda m: m.update(heads='3'))
qcase('qkv_k_width', edit=lambda t: t.update(k=np.zeros((5, 6), np.float32)))
qcase('qkv_deberta_shared', edit=lambda t: t.update(rel_embeddings=np.zeros((8, 8), np.float32)),
      meta_edit=lambda m: m.update(method='deberta', position_buckets='4', max_relative_positions='8'))
case('layer_mask_shape', edit=lambda t: t.update(attn_mask=np.ones((4, 3), dtype=np.uint8)))
raw = open(os.path.join(d, 'valid.safetensors'), 'rb').read()
open(os.path.join(d, 'truncated.safetensors'), 'wb').write(raw[:-5])
EOF

if ! "$PY" "$WORK/make.py" "$WORK" > "$WORK/make.log" 2>&1; then
    not_ok "writing the case files" "$(cat "$WORK/make.log")"
    finish
fi

# ---- valid cases ------------------------------------------------------------------------
# run_ok NAME CASE OUT [ARGS...]: exit 0, nothing on stderr, OUT written
run_ok() {
    local name=$1 in=$2 out=$3
    shift 3
    rm -f "$out"
    "$POSENC" attend "$in" -o "$out" "$@" > "$WORK/stdout" 2> "$WORK/stderr"
    local rc=$?
    if [ $rc -ne 0 ]; then not_ok "$name: exit status $rc" "$(cat "$WORK/stderr")"; return 1; fi
    if [ -s "$WORK/stderr" ]; then not_ok "$name: stderr not empty" "$(cat "$WORK/stderr")"; return 1; fi
    if [ ! -f "$out" ]; then not_ok "$name: no output file"; return 1; fi
    return 0
}

# check_out NAME CASE OUT MODE: checks the output with python (MODE: see below)
check_out() {
    local name=$1 in=$2 out=$3 mode=$4
    local msg
    if msg=$("$PY" - "$WORK" "$in" "$out" "$mode" 2>&1 <<'EOF'
import os, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from lib import read, reference
inp, _, meta = read(sys.argv[2])
out, dt, _ = read(sys.argv[3])
mode = sys.argv[4]
def fail(m):
    print(m); sys.exit(1)
heads = 4 if mode == 'heads4' else 2
causal = mode in ('causal', 'causal_meta')
T, C = inp['x'].shape
want = {'y': (T, C), 'scores': (heads, T, T), 'probs': (heads, T, T)}
want['dx'] = inp['x'].shape
for n, a in inp.items():
    if a.dtype == np.float32 and n not in ('x', 'dy', 'mems'):
        want['d' + n] = a.shape
if set(out) != set(want):
    fail('outputs %s, expected %s' % (sorted(out), sorted(want)))
if 'dpositions' in out:
    fail('dpositions written')
for n, shape in want.items():
    if dt[n] != 'F32': fail('%s: dtype %s' % (n, dt[n]))
    if out[n].shape != shape: fail('%s: shape %s, expected %s' % (n, out[n].shape, shape))
for n in out:
    if n != 'scores' and not np.all(np.isfinite(out[n])): fail('%s: not finite' % n)
s = out['scores']
upper = np.triu(np.ones((T, T), bool), 1)
if causal:
    if not np.all(np.isneginf(s[:, upper])): fail('causal: masked scores are not -inf')
    if not np.all(np.isfinite(s[:, ~upper])): fail('causal: unmasked scores are not finite')
    if not np.all(out['probs'][:, upper] == 0): fail('causal: masked probs are not 0')
elif not np.all(np.isfinite(s)):
    fail('scores not finite')
y, sr, p = reference(inp, heads, causal)
for n, a, b in (('y', out['y'], y), ('scores', s, sr), ('probs', out['probs'], p)):
    fin = np.isfinite(b)
    err = np.abs(a[fin] - b[fin]) - (1e-4 + 1e-4 * np.abs(b[fin]))
    if err.size and err.max() > 0: fail('%s: off the float64 reference by %g' % (n, err.max()))
EOF
    ); then ok "$name"; else not_ok "$name" "$msg"; fi
}

OUT=$WORK/out.safetensors
if run_ok "valid case" "$WORK/valid.safetensors" "$OUT"; then
    check_out "valid case: y, scores, probs, dx and d<name> per F32 input, no dpositions" \
        "$WORK/valid.safetensors" "$OUT" plain
fi
if run_ok "--causal" "$WORK/valid.safetensors" "$OUT" --causal; then
    check_out "--causal (no value) overrides metadata: masked scores -inf" "$WORK/valid.safetensors" "$OUT" causal
fi
if run_ok "--causal true" "$WORK/valid.safetensors" "$OUT" --causal true; then
    check_out "--causal true overrides metadata" "$WORK/valid.safetensors" "$OUT" causal
fi
if run_ok "causal in metadata" "$WORK/causal_meta.safetensors" "$OUT"; then
    check_out "causal=true in metadata masks" "$WORK/causal_meta.safetensors" "$OUT" causal_meta
fi
if run_ok "--causal false" "$WORK/causal_meta.safetensors" "$OUT" --causal false; then
    check_out "--causal false overrides causal=true in metadata" "$WORK/causal_meta.safetensors" "$OUT" plain
fi
if run_ok "--heads 4" "$WORK/valid.safetensors" "$OUT" --heads 4; then
    check_out "--heads 4 overrides heads=2 in metadata" "$WORK/valid.safetensors" "$OUT" heads4
fi
# an existing output is replaced whole
echo garbage > "$OUT"
if "$POSENC" attend -o "$OUT" "$WORK/valid.safetensors" 2> "$WORK/stderr"; then
    check_out "-o before the case; an existing output is replaced" "$WORK/valid.safetensors" "$OUT" plain
else
    not_ok "-o before the case" "$(cat "$WORK/stderr")"
fi
# a bare flag right before -o: -o is the option, not the flag's value
rm -f "$OUT"
if "$POSENC" attend "$WORK/valid.safetensors" --causal -o "$OUT" 2> "$WORK/stderr"; then
    check_out "--causal -o OUT: a bare flag before -o means true" "$WORK/valid.safetensors" "$OUT" causal
else
    not_ok "--causal -o OUT: a bare flag before -o means true" "$(cat "$WORK/stderr")"
fi
# a value that starts with '-' is a value
rm -f "$OUT"
if "$POSENC" attend "$WORK/valid.safetensors" --shift -1 -o "$OUT" 2> "$WORK/stderr"; then
    not_ok "--shift -1: positions 0 - 1 are outside pos_table, expected an error"
elif grep -q "pos_table" "$WORK/stderr" && [ ! -e "$OUT" ]; then
    ok "--shift -1 takes -1 as the value"
else
    not_ok "--shift -1 takes -1 as the value" "$(cat "$WORK/stderr")"
fi
rm -f "$OUT"

# ---- bad inputs -------------------------------------------------------------------------
# bad NAME EXPECT CASE [ARGS...]: exit 2, one stderr line "posenc: ..." containing EXPECT,
# nothing on stdout, no output file
bad() { local name=$1 expect=$2 in=$3; shift 3; expect_bad "$name" "$expect" "$WORK/bad_out.safetensors" attend "$in" -o "$WORK/bad_out.safetensors" "$@"; }

bad "unknown key in metadata" "colour" "$WORK/unknown_meta_key.safetensors"
bad "unknown --flag key" "bogus" "$WORK/valid.safetensors" --bogus 3
bad "key of another method (--rope_base with learned)" "rope_base" "$WORK/valid.safetensors" --rope_base 500
bad "bad value in metadata (heads=two)" "heads" "$WORK/bad_meta_value.safetensors"
bad "bad --causal value" "causal" "$WORK/valid.safetensors" --causal maybe
bad "missing tensor wq" "wq" "$WORK/missing_wq.safetensors"
bad "wrong shape of wk" "wk" "$WORK/wrong_shape_wk.safetensors"
bad "F64 x" "'x'" "$WORK/x_f64.safetensors"
bad "positions as F32" "positions" "$WORK/positions_f32.safetensors"
bad "tensor the method does not take" "extra" "$WORK/unknown_tensor.safetensors"
bad "malformed file (truncated)" "" "$WORK/truncated.safetensors"
bad "missing input file" "no_such_case" "$WORK/no_such_case.safetensors"
bad "unknown method" "sinusoidal_typo" "$WORK/unknown_method.safetensors"
bad "unknown method from --method" "zzz" "$WORK/valid.safetensors" --method zzz
bad "no method" "method" "$WORK/no_method.safetensors"
bad "heads not dividing C" "tensor 'x': width C=8 does not divide by heads 3" "$WORK/heads_3.safetensors"
bad "heads not dividing C (--heads 3)" "heads" "$WORK/valid.safetensors" --heads 3
bad "learned position out of range" "pos_table" "$WORK/position_out_of_range.safetensors"
bad "layer attn_mask of the wrong shape" "attn_mask" "$WORK/layer_mask_shape.safetensors"

# the projected form (q, k, v)
bad "projected: a query with no key left" "every key masked" "$WORK/qkv_no_key_left.safetensors"
bad "projected: attn_mask of the wrong shape" "attn_mask" "$WORK/qkv_mask_shape.safetensors"
bad "projected: attn_mask as F32" "attn_mask" "$WORK/qkv_mask_f32.safetensors"
bad "projected: x beside q" "'x'" "$WORK/qkv_with_x.safetensors"
bad "projected: wq beside q" "'wq'" "$WORK/qkv_with_wq.safetensors"
bad "projected: dy beside q" "'dy'" "$WORK/qkv_with_dy.safetensors"
bad "projected: sinusoidal has no projected form" "projected form" "$WORK/qkv_sinusoidal.safetensors"
bad "projected: causal with Tk < T" "Tk >= T" "$WORK/qkv_fewer_keys_causal.safetensors"
bad "projected: key_positions of the wrong length" "key_positions" "$WORK/qkv_key_positions_len.safetensors"
bad "projected: k missing" "'k'" "$WORK/qkv_no_k.safetensors"
bad "projected: heads not dividing q's width (the form's names)" "tensor 'q': width C=8 does not divide by heads 3" "$WORK/qkv_heads_3.safetensors"
bad "projected: k of the wrong width" "'k'" "$WORK/qkv_k_width.safetensors"
bad "projected: deberta shares wq, wk" "share_att_key" "$WORK/qkv_deberta_shared.safetensors"
if run_ok "projected: valid case" "$WORK/qkv_valid.safetensors" "$WORK/qkv_out.safetensors"; then
    names=$("$PY" -c "import sys; sys.path.insert(0, '$WORK'); from lib import read; print(' '.join(sorted(read('$WORK/qkv_out.safetensors')[0])))")
    if [ "$names" = "dk dq dv o probs scores" ]; then ok "projected: writes o, scores, probs, dq, dk, dv"
    else not_ok "projected: outputs" "$names"; fi
fi

# usage errors: same rules (the output path, where given, must not appear)
bad "unknown option" "-x" "$WORK/valid.safetensors" -x
bad "second case file" "" "$WORK/valid.safetensors" "$WORK/valid.safetensors"
# no -o at all
"$POSENC" attend "$WORK/valid.safetensors" > "$WORK/stdout" 2> "$WORK/stderr"
rc=$?
if [ $rc -eq 2 ] && [ "$(awk 'END { print NR }' "$WORK/stderr")" -eq 1 ] && grep -q '^posenc: ' "$WORK/stderr"; then
    ok "no -o: exit 2, one line"
else
    not_ok "no -o: exit $rc" "$(cat "$WORK/stderr")"
fi
# output into a directory that does not exist
"$POSENC" attend "$WORK/valid.safetensors" -o "$WORK/no/dir/out.safetensors" > "$WORK/stdout" 2> "$WORK/stderr"
rc=$?
if [ $rc -eq 2 ] && [ "$(awk 'END { print NR }' "$WORK/stderr")" -eq 1 ] && grep -q '^posenc: ' "$WORK/stderr" &&
    [ ! -e "$WORK/no" ]; then
    ok "output directory missing: exit 2, one line, nothing created"
else
    not_ok "output directory missing: exit $rc" "$(cat "$WORK/stderr")"
fi

# ---- posenc methods NAME, and suggestions for misspelled names ---------------------------------
out=$("$POSENC" methods rope)
echo "$out" | grep -q "^rope (rotary): Su et al" && echo "$out" | grep -q "rope_scaling  *none  *none, linear" &&
    echo "$out" | grep -q "paths: fused (no T x Tk buffer) yes; grouped-query attention yes" && ok "methods rope" ||
    not_ok "methods rope" "$out"
"$POSENC" methods t5 | grep -q "rel_bias  *\[32, 2\]" && ok "methods t5 lists its tensor" || not_ok "methods t5"
"$POSENC" methods learned | grep -q "pos_table  *\[N, 16\]" && ok "methods learned: free rows" || not_ok "methods learned"
expect_bad "methods: a misspelled method" "did you mean rope?" "" methods ropee
expect_bad "attend: a misspelled key" "did you mean 'rope_scaling'?" "" attend "$HERE/../conformance/cases/rope_half.safetensors" -o "$WORK/x.safetensors" --rope_scalling yarn
expect_bad "attend: a misspelled method" "did you mean 'alibi'?" "" attend "$HERE/../conformance/cases/rope_half.safetensors" -o "$WORK/x.safetensors" --method alibj
# ---- every subcommand answers --help with exit 0 ----------------------------------------------
for c in attend demo convert-rope train compare encode bench plot analyze generate positions methods; do
    if "$POSENC" $c --help > "$WORK/help" 2>&1 && [ "$(wc -l < "$WORK/help")" -ge 3 ]; then ok "$c --help"
    else not_ok "$c --help" "$(head -3 "$WORK/help")"; fi
done
finish
