#!/usr/bin/env bash
# CLI tests of multi-axis positions (rope_sections, rope_mixed) through `posenc attend`: the
# public cases run, and every bad input exits 2 with one stderr line "posenc: ..." and no output:
# sections that do not sum to rotary_dim/2, a section of 0 pairs, positions without the axis,
# per_axis with a scaling, section keys without sections, rope_mixed with kv_heads, positions
# of another method with an axis.
#   usage: bash tests/cli/test_multiaxis.sh PATH/TO/posenc
. "$(dirname "$0")/lib.sh" multiaxis "${1:-}"
need_numpy
ROOT=$(cd "$HERE/../.." && pwd)
C="$ROOT/tests/conformance/cases-multiaxis"
L="$C/mrope_qwen2vl_layer.safetensors"
"$POSENC" attend "$L" -o "$WORK/ok.safetensors" > /dev/null 2>&1 && ok "the layer case runs" || not_ok "the layer case runs"

# a copy of the layer case with plain positions [T], and one of another method with axes
"$PY" - "$L" "$WORK" <<'PYEOF'
import json, struct, sys
src, w = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
data = raw[8 + n:]
def write(path, header, blobs):
    off, out = 0, {}
    for name, (info, blob) in blobs.items():
        out[name] = dict(info, data_offsets=[off, off + len(blob)])
        off += len(blob)
    out["__metadata__"] = header
    hb = json.dumps(out).encode()
    hb += b" " * (-len(hb) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hb)) + hb + b"".join(b for _, b in blobs.values()))
blobs = {k: (dict(dtype=v["dtype"], shape=v["shape"]), data[v["data_offsets"][0]:v["data_offsets"][1]])
         for k, v in h.items() if k != "__metadata__"}
plain = dict(blobs)
T = blobs["positions"][0]["shape"][0]
plain["positions"] = (dict(dtype="I64", shape=[T]), struct.pack(f"<{T}q", *range(T)))
write(f"{w}/plain.safetensors", h["__metadata__"], plain)
write(f"{w}/nosections.safetensors", {k: v for k, v in h["__metadata__"].items() if k != "rope_sections"}, plain)
write(f"{w}/alibi.safetensors", {"method": "alibi", "heads": "2", "causal": "true"}, blobs)
PYEOF
O="$WORK/out.safetensors"
expect_bad "sections that do not sum to rotary_dim/2" "sum to 3 pairs" "$O" attend "$L" -o "$O" --rope_sections 2,1
expect_bad "a section of 0 pairs" "section 1 has 0 pairs" "$O" attend "$L" -o "$O" --rope_sections 4,0,0
expect_bad "more sections than positions have axes" "position axes" "$O" attend "$L" -o "$O" --rope_sections 1,1,1,1
expect_bad "positions without the axis" "expected [T, 3]" "$O" attend "$WORK/plain.safetensors" -o "$O"
expect_bad "per_axis with a scaling" "per_axis takes no rope_scaling" "$O" attend "$L" -o "$O" --rope_section_freqs per_axis \
    --rope_scaling linear --rope_factor 2
expect_bad "section keys without sections" "needs rope_sections" "$O" attend "$WORK/nosections.safetensors" -o "$O" \
    --rope_section_layout interleaved
expect_bad "rope_mixed with kv_heads" "grouped-query" "$O" attend "$C/rope_mixed_proj.safetensors" -o "$O" --kv_heads 1
expect_bad "an axis for a method without" "expected [T]" "$O" attend "$WORK/alibi.safetensors" -o "$O"

# ---- posenc positions ------------------------------------------------------------------------
out=$("$POSENC" positions text:2,image:4x4,text:3)
[ "$(echo "$out" | awk '!/^#/ { printf "%s/%s/%s ", $2, $3, $4 }')" = "0/0/0 1/1/1 2/2/2 2/2/3 2/3/2 2/3/3 4/4/4 5/5/5 6/6/6 " ] &&
    echo "$out" | grep -q "text resumes at position 7 (rope_deltas -2)" && ok "positions: text, image, text" ||
    not_ok "positions: text, image, text" "$out"
"$POSENC" positions text:1,video:3x2x4@0.75,text:1 --tokens-per-second 2 -o "$WORK/p.safetensors" > /dev/null &&
    "$PY" - "$WORK/p.safetensors" <<'PYEOF' && ok "positions -o: [N, 3] I64 and the next position" || not_ok "positions -o"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
p = h["positions"]
assert p["dtype"] == "I64" and p["shape"] == [8, 3], p
v = struct.unpack("<24q", raw[8 + n + p["data_offsets"][0]:8 + n + p["data_offsets"][1]])
assert [v[3 * i] for i in range(8)] == [0, 1, 1, 2, 2, 4, 4, 5], v
assert h["__metadata__"]["next_position"] == "6", h["__metadata__"]
PYEOF
"$POSENC" positions --help | grep -q -- "--tokens-per-second" && ok "positions --help" || not_ok "positions --help"
expect_bad "positions: no spans" "SPANS is required" "" positions
expect_bad "positions: a bad span" "span 1 ('picture:4x4') is not text:N" "" positions text:2,picture:4x4
expect_bad "positions: a trailing comma" "span 1 ('') is not" "" positions text:2,
expect_bad "positions: a signed count" "span 0 ('text:+2') is not" "" positions text:+2
expect_bad "positions: grid not divisible" "do not divide by the spatial merge 2" "" positions image:3x4
expect_bad "positions: bad --merge" "--merge" "" positions text:2 --merge 0
# grids are read whole or refused (issue 32: a fourth field and trailing junk were dropped)
expect_bad "positions: a fourth grid field" "('image:4x6x8x10') is not" "" positions image:4x6x8x10
expect_bad "positions: junk after the grid" "('image:1x4x6xjunk') is not" "" positions image:1x4x6xjunk
# a sequence the machine could not hold is refused with the limit, before any memory is asked for
expect_bad "positions: past the token limit" "past the limit of 268435456 (2^28) tokens" "" positions image:1048576x1048576
expect_bad "positions: time past 2^40" "past 2^40" "" positions video:3x4x4@1 --tokens-per-second 4611686018427387904
expect_bad "positions: output directory missing" "$WORK/none/p.safetensors" "$WORK/none/p.safetensors" positions text:2 -o "$WORK/none/p.safetensors"
finish
