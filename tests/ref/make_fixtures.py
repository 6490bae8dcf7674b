#!/usr/bin/env python3
"""Writes the committed fixtures: for every method module tests/ref/m_<name>.py, the generic
edge-case variants below plus the module's own CASES, each as NAME.safetensors (inputs and
settings, the conformance format) and NAME.expected.safetensors (the float64 reference,
stored as F32).

    .venv/bin/python tests/ref/make_fixtures.py tests/fixtures [METHOD ...]
"""
import glob
import json
import os
import struct
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import posenc_ref  # noqa: E402

# Variants every method gets: T=1, odd head count, batches, offsets and gaps, causal and not.
GENERIC = [
    dict(name="basic", T=7, H=2, D=4),
    dict(name="t1", T=1, H=2, D=4, causal=True),
    dict(name="h3_causal", T=6, H=3, D=4, causal=True),
    dict(name="batch_gapped", T=5, H=2, D=4, B=2, positions="gapped"),
    dict(name="offset_causal", T=6, H=2, D=6, positions="offset", causal=True),
]


# The projected form (q, k, v; doc/spec/conformance.md) for every method that acts on q and k:
# the whole sequence, decode steps and chunks against a cache (bottom-right causal alignment),
# fewer keys than queries, gapped and far key positions, batches, odd heads; then attn_mask.
PROJ_GENERIC = [
    dict(name="proj_full", T=5, Tk=5, H=2, D=4),
    dict(name="proj_decode", T=1, Tk=7, H=2, D=4, causal=True),
    dict(name="proj_chunk_h3", T=3, Tk=8, H=3, D=4, causal=True),
    dict(name="proj_gapped_batch", T=3, Tk=6, H=2, D=4, B=2, positions="gapped", causal=True),
    dict(name="proj_offset", T=2, Tk=9, H=2, D=6, positions="offset", causal=True),
    dict(name="proj_fewer_keys", T=5, Tk=3, H=2, D=4, positions="cross", meta={"causal": "false"}),
    dict(name="proj_mask_random", T=4, Tk=7, H=2, D=4, B=2, positions="gapped", mask="random"),
    dict(name="proj_mask_window_u8", T=4, Tk=9, H=2, D=4, causal=True, mask="window", mask_dtype="uint8"),
    # the window key (FlashAttention's window_size), with attn_mask beside it in the second
    dict(name="proj_window_key", T=4, Tk=9, H=2, D=4, causal=True, meta={"window": "2,0"}),
    dict(name="proj_window_key_mask", T=5, Tk=7, H=2, D=4, B=2, positions="gapped", mask="random",
         meta={"window": "3,1"}),
]
# attn_mask in the layer form, for every method with the plain layer: packed documents
# (positions restart, block-diagonal mask, causal) and a bidirectional sliding window.
MASK_GENERIC = [
    dict(name="mask_packed", T=8, H=2, D=4, positions="packed", mask="packed", causal=True),
    dict(name="mask_window_batch", T=6, H=3, D=2, B=2, mask="window", mask_dtype="uint8"),
    dict(name="window_key", T=7, H=2, D=4, meta={"window": "1,2"}),
]
DOCS = [3, 4, 1]  # the packed documents' lengths (of T = 8)


def mask_of(kind, B, T, Tk, rng, dtype):
    i = np.arange(T)[:, None] + (Tk - T)  # token indices: the queries are the last T tokens
    j = np.arange(Tk)[None, :]
    if kind == "packed":
        doc = np.repeat(np.arange(len(DOCS)), DOCS)[-Tk:]
        m = doc[None, :] == doc[-T:, None]
    elif kind == "window":
        m = np.abs(i - j) < 3
    else:  # random, with every query's own (or last) key kept so no row is empty
        m = rng.random((B, T, Tk)) < 0.5
        m[:, np.arange(T), np.minimum(np.arange(T) + (Tk - T), Tk - 1)] = True
    m = np.broadcast_to(m, (B, T, Tk)) if m.ndim == 2 and B > 1 else m
    return m.astype(np.uint8 if dtype == "uint8" else bool)


def packed_positions(T):
    return np.concatenate([np.arange(n) for n in DOCS])[-T:].astype(np.int64)


def case_meta(mod, spec, *extra):
    """The case's settings: method and heads, the module's BASE_META, then extra dicts
    (PROJ_META), the spec's own (None drops a key), causal and kv_heads."""
    H = spec["H"]
    meta = {"method": mod.__name__[2:], "heads": str(H)}
    meta.update(getattr(mod, "BASE_META", {}))
    for e in extra:
        meta.update(e)
    meta.update(spec.get("meta", {}))
    meta = {k: v for k, v in meta.items() if v is not None}  # None: drop a BASE_META key
    if spec.get("causal"):
        meta["causal"] = "true"
    if spec.get("kv_heads", H) != H:
        meta["kv_heads"] = str(spec["kv_heads"])
    return meta


def method_tensors(mod, meta, spec, npos, rng, u):
    """The method's tensors (and the optional ones the spec adds), by its init or uniform."""
    shapes = mod.tensors(meta, spec["H"], spec["D"], npos) if hasattr(mod, "tensors") else {}
    shapes.update(spec.get("tensors", {}))
    init = getattr(mod, "init", None)
    return {name: init(name, shape, rng) if init else u(*shape, a=0.5) for name, shape in shapes.items()}


def build_qkv(mod, spec, seed):
    """A projected-form case: q, k, v with positions, key_positions, attn_mask and do."""
    rng = np.random.default_rng(seed)
    T, Tk, H, D = spec["T"], spec["Tk"], spec["H"], spec["D"]
    B = spec.get("B")
    Hkv = spec.get("kv_heads", H)
    C, Ckv = H * D, Hkv * D
    meta = case_meta(mod, spec, getattr(mod, "PROJ_META", {}))
    lead = (B,) if B else ()
    nb = B or 1
    u = lambda *shape, a=1.0: (a * (2 * rng.random(shape) - 1)).astype(np.float32)
    t = {"q": u(*lead, T, C), "k": u(*lead, Tk, Ckv), "v": u(*lead, Tk, Ckv)}
    kind = spec.get("positions")
    kpos = qpos = None
    if kind == "gapped":  # (B, Tk) increasing with gaps; the queries are the last T keys
        kpos = positions("gapped", nb, Tk, rng)
        qpos = kpos[:, Tk - T:] if T <= Tk else None
    elif kind == "offset":
        kpos = np.arange(100, 100 + Tk, dtype=np.int64)
        qpos = kpos[Tk - T:]
    elif kind == "million":
        kpos = np.arange(10**6 - Tk + 1, 10**6 + 1, dtype=np.int64)
        qpos = kpos[Tk - T:]
    elif kind == "cross":  # queries anywhere (cross-attention): positions of their own
        kpos = np.arange(Tk, dtype=np.int64) * 2
        qpos = np.arange(T, dtype=np.int64) + 1
    if "kpos_axes" in spec:  # positions with a trailing axis, as given: [n, A] or [B, n, A]
        kpos = np.asarray(spec["kpos_axes"], dtype=np.int64)
        qpos = np.asarray(spec["pos_axes"], dtype=np.int64)
        t["key_positions"], t["positions"] = kpos, qpos
    if kpos is not None and "key_positions" not in t:
        t["key_positions"] = kpos if (B or kpos.ndim == 1) else kpos[0]
    if qpos is not None and "positions" not in t:
        t["positions"] = qpos if (B or qpos.ndim == 1) else qpos[0]
    npos = int(max(kpos.max() if kpos is not None else Tk - 1, qpos.max() if qpos is not None else Tk - 1) + 1)
    t.update(method_tensors(mod, meta, spec, npos, rng, u))
    if spec.get("mask"):
        m = mask_of(spec["mask"], nb, T, Tk, rng, spec.get("mask_dtype"))
        t["attn_mask"] = m if (B or m.ndim == 2) else m[0]
    t["do"] = u(*lead, T, C)
    return meta, t


def write_safetensors(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        code = {"float32": "F32", "float64": "F64", "int64": "I64", "int32": "I32", "bool": "BOOL",
                "uint8": "U8"}[str(a.dtype)]
        buf = a.tobytes()
        header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [off, off + len(buf)]}
        blobs.append(buf)
        off += len(buf)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


def positions(kind, B, T, rng):
    if kind in (None, "default"):
        return None
    if kind == "gapped":  # (B, T): per-sequence offsets and gaps, increasing
        steps = rng.integers(1, 4, size=(B, T))
        start = rng.integers(0, 6, size=(B, 1))
        return (np.cumsum(steps, 1) - steps[:, :1] + start).astype(np.int64)
    if kind == "offset":  # a KV-cache offset: (T)
        return np.arange(100, 100 + T, dtype=np.int64)
    if kind == "million":
        return np.arange(10**6 - T + 1, 10**6 + 1, dtype=np.int64)
    return np.asarray(kind, dtype=np.int64)


def build(mod, spec, seed):
    rng = np.random.default_rng(seed)
    T, H, D = spec["T"], spec["H"], spec["D"]
    B = spec.get("B")
    Hkv = spec.get("kv_heads", H)
    C, Ckv = H * D, Hkv * D
    meta = case_meta(mod, spec)
    lead = (B,) if B else ()
    t = {}
    u = lambda *shape, a=1.0: (a * (2 * rng.random(shape) - 1)).astype(np.float32)
    t["x"] = u(*lead, T, C)
    for w, rows in (("wq", C), ("wk", Ckv), ("wv", Ckv), ("wo", C)):
        t[w] = u(rows, C, a=1 / np.sqrt(C))
    for b, rows in (("bq", C), ("bk", Ckv), ("bv", Ckv), ("bo", C)):
        t[b] = u(rows, a=0.1)
    pos = packed_positions(T) if spec.get("positions") == "packed" else positions(spec.get("positions"), B or 1, T, rng)
    if pos is not None:
        t["positions"] = pos if (B and pos.ndim == 2) else (pos[0] if pos.ndim == 2 else pos)
    if "pos_axes" in spec:  # positions with a trailing axis, as given: [T, A] or [B, T, A]
        pos = t["positions"] = np.asarray(spec["pos_axes"], dtype=np.int64)
    npos = int((pos.max() if pos is not None else T - 1) + 1)
    t.update(method_tensors(mod, meta, spec, npos, rng, u))
    for name, v in spec.get("values", {}).items():  # exact values a case needs (e.g. a tie)
        t[name] = np.asarray(v, dtype=np.float32)
    if spec.get("mask"):
        M = next((sh[-2] for n, sh in spec.get("tensors", {}).items() if n == "mems"), 0)
        m = mask_of(spec["mask"], B or 1, T, M + T, rng, spec.get("mask_dtype"))
        t["attn_mask"] = m if (B or m.ndim == 2) else m[0]
    t["dy"] = u(*lead, T, C)
    if hasattr(mod, "edit_inputs"):  # a layer with other inputs (complex: ids for x, dy_imag)
        mod.edit_inputs(t, spec, rng)
    return meta, t


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "fixtures")
    only = set(sys.argv[2:])
    os.makedirs(out, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(HERE, "m_*.py"))):
        name = os.path.basename(path)[2:-3]
        if only and name not in only:
            continue
        mod = posenc_ref.method_module(name)
        skip = getattr(mod, "SKIP_GENERIC", ())  # generic variants a method cannot run (by name)
        specs = [dict(s) for s in GENERIC if s["name"] not in skip]
        specs += [dict(s) for s in getattr(mod, "CASES", [])]
        if getattr(mod, "MASKS", True):
            specs += [dict(s) for s in MASK_GENERIC if s["name"] not in skip]
        if getattr(mod, "PROJECTED", True):
            specs += [dict(s, qkv=True) for s in PROJ_GENERIC + getattr(mod, "PROJ_CASES", []) if s["name"] not in skip]
        for spec in specs:
            # the seed depends only on the case's name, so regenerating any subset of the
            # methods writes the same inputs
            seed = zlib.crc32(f"{name}_{spec['name']}".encode())
            meta, t = (build_qkv if spec.get("qkv") else build)(mod, spec, seed=seed)
            exp = posenc_ref.attend(meta, t)
            case = f"{name}_{spec['name']}"
            write_safetensors(os.path.join(out, case + ".safetensors"), t, meta)
            write_safetensors(os.path.join(out, case + ".expected.safetensors"),
                              {k: v.numpy().astype(np.float32) for k, v in exp.items()})
            print(f"wrote {case}")
        if hasattr(mod, "write_tables"):
            tables = os.path.join(out, "tables")
            os.makedirs(tables, exist_ok=True)
            mod.write_tables(tables, write_safetensors)
            print(f"wrote tables of {name}")


if __name__ == "__main__":
    main()
