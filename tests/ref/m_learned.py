"""Learned absolute table (BERT): x + pos_table[pos + shift]."""
PROJECTED = False  # acts on x: no projected form


def tensors(meta, H, D, npos):
    return {"pos_table": (npos + int(meta.get("shift", 0)) + 2, H * D)}


def embed(ctx, x):
    return x + ctx.t["pos_table"][ctx.pos + ctx.get("shift", 0, int)]


CASES = [
    dict(name="shift", T=5, H=2, D=4, meta={"shift": "3"}, positions="gapped", B=2),
]
