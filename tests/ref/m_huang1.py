"""Huang et al. 2020, method 1: s = scale (q.k) rel_scale[|a|, h], a = clip(i - j, -K, K)."""
BASE_META = {"max_rel": "3"}


def distance(ctx):
    """(B, T, Tk) a = clip(i - j, -K, K), K = max_rel (default 64)."""
    K = ctx.get("max_rel", 64, int)
    return (ctx.pos[:, :, None] - ctx.kpos[:, None, :]).clamp(-K, K), K


def tensors(meta, H, D, npos):
    K = int(meta.get("max_rel", 64))
    return {"rel_scale": (K + 1, H)}


def score(ctx, q, k):
    a, K = distance(ctx)
    w = ctx.t["rel_scale"][a.abs()].permute(0, 3, 1, 2)  # (B, H, T, T)
    return ctx.scale * (q @ k.transpose(-1, -2)) * w


CASES = [
    dict(name="k0", T=4, H=2, D=4, meta={"max_rel": "0"}),
    dict(name="default_k", T=7, H=3, D=4, B=2, meta={"max_rel": None},
         positions=[[0, 10, 30, 64, 65, 100, 200], [5, 6, 7, 70, 71, 72, 300]]),
    dict(name="million_causal", T=6, H=2, D=4, positions="million", causal=True),
    dict(name="scaled", T=5, H=2, D=4, meta={"scale": "0.7"}),
]
